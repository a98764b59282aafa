package ninep

import (
	"io/fs"
	"os"
	"strings"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// The handlers below run in the request's own goroutine. Each receives the
// request, whose context ends when a Tflush names the request, a Tversion
// resets the session or the connection ends; a handler passes that context
// to every node call, so cancellation means "the client gave up: return
// soon". Whatever a handler returns after a Tflush is subject to the reply
// rules in the package comment. Each handler holds a reference to the fids
// it uses for as long as it runs. The handlers of Tread and Twrite are in
// handlers_io.go, those of Tstat and Twstat in handlers_stat.go.

func hdr(r *request, typ uint8) proto.Header { return proto.Header{Type: typ, Tag: r.tag} }

// auth handles Tauth. Checked: the server has an Authenticator and afid is
// free. It makes afid an auth fid (qid type QTAUTH) to which the client
// writes its secret; the secret is handed to the Authenticator by a Tattach
// naming afid. Nothing here blocks, so cancellation has no effect.
func (c *conn) auth(r *request, m *proto.TAuth) (proto.FCall, error) {
	if c.srv.Auth == nil {
		return nil, errNoAuth
	}
	af, err := c.reserveFid(m.Afid, c.peerP)
	if err != nil {
		return nil, err
	}
	af.auth = &authState{uname: m.Uname, aname: m.Aname}
	af.qid = proto.Qid{Qtype: qtAuth, Uid: authPathHi | c.authPath.Add(1)}
	c.publishFid(af)
	return &proto.RAuth{Header: hdr(r, proto.Rauth), Aqid: af.qid}, nil
}

// attach handles Tattach. Checked: fid is free; afid is NOFID or an auth
// fid made for the same uname and aname. It calls Server.Auth with the
// connection's peer, User = uname and Secret = what was written to afid
// (none if afid is NOFID) and gives fid the resulting Cred, at the root. The
// aname is otherwise ignored: there is one tree. An Authenticate error on a
// connection with no attached session also closes the connection after the
// Rerror. Cancellation ends the Authenticate and Attr calls; fid is then
// not made.
func (c *conn) attach(r *request, m *proto.TAttach) (proto.FCall, error) {
	root := c.srv.Root
	if root == nil {
		return nil, errNoRoot
	}
	var secret []byte
	if m.Afid != NOFID {
		af, err := c.getFid(m.Afid)
		if err != nil {
			return nil, err
		}
		defer c.putFid(af)
		if af.auth == nil {
			return nil, errNotAuthFid
		}
		if af.auth.uname != m.Uname || af.auth.aname != m.Aname {
			return nil, errAttachMismatch
		}
		af.auth.mu.Lock()
		secret = append([]byte{}, af.auth.secret...)
		af.auth.mu.Unlock()
	}
	nf, err := c.reserveFid(m.Fid, nil)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.unreserveFid(nf)
		}
	}()
	var cred vfs.Cred
	if c.srv.Auth != nil {
		p := c.peer
		p.User = m.Uname
		p.Secret = secret
		if cred, err = c.srv.Auth.Authenticate(r.ctx, p); err != nil {
			// A peer that cannot authenticate holds nothing: close a
			// connection that has no attached session after the Rerror.
			r.hangup = !c.authed.Load() && r.ctx.Err() == nil
			return nil, err
		}
	}
	owner, err := c.useGrant(cred)
	if err != nil {
		return nil, err
	}
	if err := c.chargeFid(nf, owner); err != nil {
		return nil, err
	}
	a, err := root.Attr(r.ctx, cred)
	if err != nil {
		return nil, err
	}
	q := qidOf(a)
	q.Qtype |= qtDir
	nf.cred = cred
	nf.loc = &loc{node: root, name: "/"}
	nf.qid = q
	c.publishFid(nf)
	c.authed.Store(true)
	TicketOf(c.nc).Authenticated()
	ok = true
	return &proto.RAttach{Header: hdr(r, proto.Rattach), Qid: q}, nil
}

// walk handles Twalk. Checked: fid exists, is not an auth fid and is not
// open; at most 16 names; with names, fid is a directory; newfid is fid or
// free. Each name is looked up (".." goes to the parent, staying at the
// root) and its Attr gives its qid. A failure at the first name is an
// Rerror; a later one returns the qids walked so far and makes no newfid
// (fid itself never moves unless the whole walk succeeds). Cancellation
// ends the walk at the current name.
func (c *conn) walk(r *request, m *proto.TWalk) (proto.FCall, error) {
	f, err := c.fileFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	if len(m.Wname) > maxWelem {
		return nil, errTooManyNames
	}
	snap := f.snapshot()
	cur, qid, state := snap.loc, snap.qid, snap.state
	if state != fidClosed {
		return nil, errWalkOpen
	}
	if len(m.Wname) > 0 && qid.Qtype&qtDir == 0 {
		return nil, errWalkNonDir
	}
	var nf *fid
	if m.Newfid != m.Fid {
		c.mu.Lock()
		owner := f.p
		c.mu.Unlock()
		if owner == nil {
			owner = c.peerP
		}
		if nf, err = c.reserveFid(m.Newfid, owner); err != nil {
			return nil, err
		}
		// unreserveFid is a no-op once nf is published.
		defer c.unreserveFid(nf)
	}
	qids := make([]proto.Qid, 0, len(m.Wname))
	for _, name := range m.Wname {
		next, q, err := c.step(r, f.cred, cur, name)
		if err != nil {
			if len(qids) == 0 {
				return nil, err
			}
			break
		}
		qids = append(qids, q)
		cur, qid = next, q
	}
	reply := &proto.RWalk{Header: hdr(r, proto.Rwalk), Nwqid: uint16(len(qids)), Wqid: qids}
	if len(qids) < len(m.Wname) {
		return reply, nil
	}
	if nf == nil {
		f.mu.Lock()
		if f.state != fidClosed {
			f.mu.Unlock()
			return nil, errWalkOpen
		}
		f.loc, f.qid = cur, qid
		f.mu.Unlock()
	} else {
		nf.cred = f.cred
		nf.loc, nf.qid = cur, qid
		c.publishFid(nf)
	}
	return reply, nil
}

// step walks one name from the directory at cur.
func (c *conn) step(r *request, cred vfs.Cred, cur *loc, name string) (*loc, proto.Qid, error) {
	dir, ok := cur.node.(vfs.Dir)
	if !ok {
		return nil, proto.Qid{}, errWalkNonDir
	}
	if name == ".." {
		next := cur
		if cur.parent != nil {
			next = cur.parent
		}
		a, err := next.node.Attr(vfs.WithoutContent(r.ctx), cred)
		if err != nil {
			return nil, proto.Qid{}, err
		}
		return next, qidOf(a), nil
	}
	if !validName(name) {
		return nil, proto.Qid{}, errBadName
	}
	// A qid needs the node's type and inode only: a view is not
	// rendered for a walk (vfs.WithoutContent).
	n, a, err := vfs.LookupAttr(vfs.WithoutContent(r.ctx), dir, cred, name)
	if err != nil {
		return nil, proto.Qid{}, err
	}
	return &loc{node: n, name: name, parent: cur}, qidOf(a), nil
}

// validName reports whether name may be a file name: not empty, ".", ".."
// and without '/' or NUL.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// openFlags maps a 9P open mode to os flags. OEXEC opens for reading.
func openFlags(mode proto.Mode) (int, error) {
	if mode&oRclose != 0 {
		return 0, errRclose
	}
	var flags int
	switch mode & 3 {
	case proto.Oread, oExec:
		flags = os.O_RDONLY
	case proto.Owrite:
		flags = os.O_WRONLY
	case proto.Ordwr:
		flags = os.O_RDWR
	}
	if mode&oTrunc != 0 {
		flags |= os.O_TRUNC
	}
	return flags, nil
}

// open handles Topen. Checked: fid exists, is not an auth fid and is not
// open (or being opened); the mode has no ORCLOSE; a directory is opened for
// reading only (and, if the node has an Access method, with WantRead). A
// file is opened with File.Open and the flags os.O_RDONLY, O_WRONLY or
// O_RDWR, plus O_TRUNC for OTRUNC. Cancellation ends File.Open; the fid then
// stays unopened.
func (c *conn) open(r *request, m *proto.TOpen) (proto.FCall, error) {
	f, err := c.fileFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	flags, err := openFlags(m.Mode)
	if err != nil {
		return nil, err
	}
	l, qid, err := f.beginOpen()
	if err != nil {
		return nil, err
	}
	defer f.abandonOpen() // if the node fails or panics

	var h vfs.Handle
	// A directory with an Access method (a vfs.Meta, which every vfs kind
	// embeds) is asked whether cred may read it.
	if qid.Qtype&qtDir != 0 {
		if flags != os.O_RDONLY {
			err = vfs.ErrIsDir
		} else if a, ok := l.node.(vfs.Meta); ok {
			err = a.Access(r.ctx, f.cred, vfs.WantRead)
		}
	} else if file, ok := l.node.(vfs.File); !ok {
		err = errNotFile
	} else {
		h, err = file.Open(r.ctx, f.cred, flags)
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.state, f.omode, f.handle = fidOpen, m.Mode, h
	f.mu.Unlock()
	return &proto.ROpen{Header: hdr(r, proto.Ropen), Qid: qid, Iounit: c.iounit()}, nil
}

// create handles Tcreate. Checked: fid exists, is not an auth fid, is not
// open and is a directory implementing vfs.Creator; the name is valid; the
// mode has no ORCLOSE. DMDIR in perm makes a directory with Mkdir (opened
// for reading, so the mode must be OREAD); otherwise Create is called with
// the open flags plus os.O_CREATE|os.O_EXCL (9P create fails on an existing
// name). perm's permission bits are passed; the tree applies its own policy.
// On success fid is the new file, open. Cancellation ends the node call.
func (c *conn) create(r *request, m *proto.TCreate) (proto.FCall, error) {
	f, err := c.fileFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	if !validName(m.Name) {
		return nil, errBadName
	}
	flags, err := openFlags(proto.Mode(m.Mode))
	if err != nil {
		return nil, err
	}
	isDir := m.Perm&proto.DMDIR != 0
	if isDir && flags != os.O_RDONLY {
		return nil, vfs.ErrIsDir
	}
	parent, pqid, err := f.beginOpen()
	if err != nil {
		return nil, err
	}
	defer f.abandonOpen() // if the node fails or panics
	if pqid.Qtype&qtDir == 0 {
		return nil, errCreateNonDir
	}

	node, h, qid, err := c.doCreate(r, f.cred, parent, m.Name, m.Perm, isDir, flags)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.loc = &loc{node: node, name: m.Name, parent: parent}
	f.qid = qid
	f.state, f.omode, f.handle = fidOpen, proto.Mode(m.Mode), h
	f.mu.Unlock()
	return &proto.RCreate{Header: hdr(r, proto.Rcreate), Qid: qid, Iounit: c.iounit()}, nil
}

func (c *conn) doCreate(r *request, cred vfs.Cred, parent *loc, name string, perm uint32, isDir bool, flags int) (vfs.Node, vfs.Handle, proto.Qid, error) {
	cr, ok := parent.node.(vfs.Creator)
	if !ok {
		return nil, nil, proto.Qid{}, vfs.ErrNotSupp
	}
	mode := fs.FileMode(perm & 0777)
	var node vfs.Node
	var h vfs.Handle
	var err error
	if isDir {
		node, err = cr.Mkdir(r.ctx, cred, name, mode)
	} else {
		node, h, err = cr.Create(r.ctx, cred, name, flags|os.O_CREATE|os.O_EXCL, mode)
	}
	if err == nil && node == nil {
		err = vfs.ErrNotExist
	}
	var a vfs.Attr
	if err == nil {
		a, err = node.Attr(r.ctx, cred)
	}
	if err != nil {
		if h != nil {
			h.Close(r.ctx)
		}
		return nil, nil, proto.Qid{}, err
	}
	return node, h, qidOf(a), nil
}

// clunk handles Tclunk. Checked: fid exists (the connection loop took it
// out of the table as the Tclunk arrived). The fid is forgotten whatever
// else happens. An open handle that is a vfs.Flusher is flushed and its
// error reported; the handle is then closed (at once, or when the last
// request still using the fid returns) and, if closed at once, Close's
// error is reported. Always answered, even if flushed.
func (c *conn) clunk(r *request, m *proto.TClunk) (proto.FCall, error) {
	f, err := r.unlinked, r.unlinkedErr // taken from the table on arrival
	if err != nil {
		return nil, err
	}
	err = c.finish(r, f)
	if err != nil {
		return nil, err
	}
	return &proto.RClunk{Header: hdr(r, proto.Rclunk)}, nil
}

// finish flushes an unlinked fid's handle and drops the caller's reference,
// returning the first error of Flush and (if it is the last reference)
// Close.
func (c *conn) finish(r *request, f *fid) (err error) {
	defer func() { // deferred so that a panicking Flush still releases f
		if cerr := c.putFid(f); err == nil {
			err = cerr
		}
	}()
	h := f.snapshot().handle
	if fl, ok := h.(vfs.Flusher); ok {
		err = fl.Flush(r.ctx)
	}
	return err
}

// remove handles Tremove. Checked: fid exists; it is not the root or an
// auth fid; its directory implements vfs.Remover. The fid is clunked
// (as by Tclunk) whether or not the removal succeeds; the removal's error
// comes first. Always answered, even if flushed.
func (c *conn) remove(r *request, m *proto.TRemove) (reply proto.FCall, err error) {
	f, err := r.unlinked, r.unlinkedErr // taken from the table on arrival
	if err != nil {
		return nil, err
	}
	defer func() { // deferred so that a panicking Remove still clunks
		if ferr := c.finish(r, f); err == nil && ferr != nil {
			reply, err = nil, ferr
		}
	}()
	snap := f.snapshot()
	l, qid := snap.loc, snap.qid
	switch {
	case f.auth != nil:
		err = errAuthFid
	case l.parent == nil:
		err = errRemoveRoot
	default:
		if rm, ok := l.parent.node.(vfs.Remover); !ok {
			err = vfs.ErrNotSupp
		} else {
			err = rm.Remove(r.ctx, f.cred, l.name, qid.Qtype&qtDir != 0)
		}
	}
	if err != nil {
		return nil, err
	}
	return &proto.RRemove{Header: hdr(r, proto.Rremove)}, nil
}
