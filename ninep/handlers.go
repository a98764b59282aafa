package ninep

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// The handlers below run in the request's own goroutine. Each receives the
// request, whose context ends when a Tflush names the request, a Tversion
// resets the session or the connection ends; a handler passes that context
// to every node call, so cancellation means "the client gave up: return
// soon". Whatever a handler returns after a Tflush is subject to the reply
// rules in the package comment. Each handler holds a reference to the fids
// it uses for as long as it runs.

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
	cur, qid, state, _, _ := f.snapshot()
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

// read handles Tread. Checked: fid exists and is open for reading (OREAD,
// ORDWR or OEXEC); the offset fits an int64. The count is cut to the
// iounit. An auth fid reads as empty. A directory returns whole stat
// entries; its offset must be 0 (which takes a fresh listing) or where the
// previous read ended. A file is read with Handle.Read; data returned with
// an error is still sent, io.EOF is no error. Cancellation ends
// Handle.Read (a blocked stream read returns ctx.Err(), and a flushed
// request's failure is not answered).
func (c *conn) read(r *request, m *proto.TRead) (proto.FCall, error) {
	f, err := c.getFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	if int64(m.Offset) < 0 {
		return nil, errBadOffset
	}
	count := min(m.Count, c.iounit())
	reply := &proto.RRead{Header: hdr(r, proto.Rread)}
	if f.auth != nil {
		return reply, nil
	}
	l, qid, state, omode, h := f.snapshot()
	if state != fidOpen {
		return nil, errNotOpen
	}
	if omode&3 == proto.Owrite {
		return nil, errNotOpenRead
	}
	var data []byte
	if qid.Qtype&qtDir != 0 {
		data, err = c.readDir(r, f, l, m.Offset, count)
		if err != nil {
			return nil, err
		}
	} else {
		buf := getReadBuf(count)
		n, err := h.Read(r.ctx, buf, int64(m.Offset))
		if n < 0 || n > len(buf) {
			putReadBuf(buf)
			return nil, errBadCount
		}
		if n == 0 && err != nil && !errors.Is(err, io.EOF) {
			putReadBuf(buf)
			return nil, err
		}
		data = append([]byte(nil), buf[:n]...)
		putReadBuf(buf)
	}
	reply.Count, reply.Data = uint32(len(data)), data
	return reply, nil
}

// readBufs holds the buffers Tread hands to a handle's Read: a client
// asks for up to an iounit (128 KiB for the 9fans client) and most reads
// return a few bytes, so a fresh zeroed buffer per read is most of the
// garbage a connection makes. A handle's Read writes only what it returns
// (io.Reader's contract; handles that read in the background read into
// buffers of their own), and only that is copied out of the buffer.
var readBufs sync.Pool

// getReadBuf returns a buffer of n bytes, from readBufs if one is big
// enough.
func getReadBuf(n uint32) []byte {
	if b, ok := readBufs.Get().(*[]byte); ok && uint32(cap(*b)) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

// putReadBuf gives b back to readBufs.
func putReadBuf(b []byte) {
	readBufs.Put(&b)
}

// readDir returns the next whole stat entries of the directory at l: each
// entry's attributes as the listing gave them, else its node's Attr.
func (c *conn) readDir(r *request, f *fid, l *loc, offset uint64, count uint32) ([]byte, error) {
	dir, ok := l.node.(vfs.Dir)
	if !ok {
		return nil, errWalkNonDir
	}
	f.dirMu.Lock()
	defer f.dirMu.Unlock()
	d := &f.dir
	if offset == 0 {
		ents, err := dir.ReadDir(r.ctx, f.cred)
		if err != nil {
			return nil, err
		}
		*d = dirState{ents: ents}
	} else if offset != d.offset {
		return nil, errDirOffset
	}
	out := make([]byte, 0, count)
	for {
		if d.pending == nil {
			if d.next >= len(d.ents) {
				break
			}
			e := d.ents[d.next]
			d.next++
			if e.Node == nil || !validName(e.Name) {
				continue
			}
			a, err := vfs.EntryAttr(r.ctx, e, f.cred)
			if err != nil {
				if r.ctx.Err() != nil {
					d.next--
					return nil, err
				}
				c.log.Debug("9p dirread: skipping entry", "name", e.Name, "err", err)
				continue
			}
			st, err := statOf(a, e.Name)
			if err != nil {
				c.log.Debug("9p dirread: skipping entry", "name", e.Name, "err", err)
				continue
			}
			d.pending = st.Compose()
		}
		if len(out)+len(d.pending) > int(count) {
			if len(out) == 0 {
				return nil, errDirCount
			}
			break
		}
		out = append(out, d.pending...)
		d.pending = nil
	}
	d.offset += uint64(len(out))
	return out, nil
}

// write handles Twrite. Checked: fid exists and is open for writing (OWRITE
// or ORDWR) and is not a directory; the offset fits an int64. On an auth
// fid the data is appended to the secret (at most 8 KiB in all). A file is
// written with Handle.Write; a short count with an error reports the count.
// Cancellation is passed to Handle.Write: a Tflush or the connection's end
// abandons the write for good, and a ctl command it runs is cancelled (a
// call file's write only queues its requests).
func (c *conn) write(r *request, m *proto.TWrite) (proto.FCall, error) {
	f, err := c.getFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	if int64(m.Offset) < 0 {
		return nil, errBadOffset
	}
	if f.auth != nil {
		a := f.auth
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(a.secret)+len(m.Data) > maxSecret {
			return nil, errSecretTooLong
		}
		a.secret = append(a.secret, m.Data...)
		return &proto.RWrite{Header: hdr(r, proto.Rwrite), Count: uint32(len(m.Data))}, nil
	}
	_, qid, state, omode, h := f.snapshot()
	if state != fidOpen {
		return nil, errNotOpen
	}
	if qid.Qtype&qtDir != 0 {
		return nil, vfs.ErrIsDir
	}
	if mode := omode & 3; mode != proto.Owrite && mode != proto.Ordwr {
		return nil, errNotOpenWrite
	}
	n, err := h.Write(r.ctx, m.Data, int64(m.Offset))
	if n < 0 || n > len(m.Data) {
		return nil, errBadCount
	}
	if err != nil && n == 0 {
		return nil, err
	}
	return &proto.RWrite{Header: hdr(r, proto.Rwrite), Count: uint32(n)}, nil
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
	_, _, _, _, h := f.snapshot()
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
	l, qid, _, _, _ := f.snapshot()
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

// stat handles Tstat. Checked: fid exists. The node's Attr becomes the
// stat (see statOf); an auth fid gets a made-up stat. Cancellation ends
// the Attr call.
func (c *conn) stat(r *request, m *proto.TStat) (proto.FCall, error) {
	f, err := c.getFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	var st proto.Stat
	if f.auth != nil {
		st = proto.Stat{Qid: f.qid, Mode: dmAuth | 0600, Name: "auth",
			Uid: f.auth.uname, Gid: f.auth.uname, Muid: f.auth.uname}
	} else {
		l, _, _, _, _ := f.snapshot()
		a, err := l.node.Attr(r.ctx, f.cred)
		if err != nil {
			return nil, err
		}
		if st, err = statOf(a, l.name); err != nil {
			return nil, err
		}
	}
	if rstatHdr+int(st.ComposeLength()) > int(c.msize.Load()) {
		return nil, errStatTooLarge
	}
	return &proto.RStat{Header: hdr(r, proto.Rstat), Stat: st}, nil
}

// qidOf returns the qid of a node: path = Ino, type from the mode, version
// 0. A synthetic file (content rendered by the tree, not stored) is
// QTTMP, Plan 9's mark of a file that is not backed up: a client that
// reads it knows its length describes only what an open would read now
// (RemoteDir serves it with direct I/O).
func qidOf(a vfs.Attr) proto.Qid {
	var t uint8
	if a.Synthetic && !a.Mode.IsDir() {
		t |= qtTmp
	}
	if a.Mode.IsDir() {
		t |= qtDir
	}
	if a.Mode&fs.ModeAppend != 0 {
		t |= qtAppend
	}
	if a.Mode&fs.ModeExclusive != 0 {
		t |= qtExcl
	}
	if a.Mode&fs.ModeTemporary != 0 {
		t |= qtTmp
	}
	return proto.Qid{Qtype: t, Uid: a.Ino}
}

// statOf turns an Attr into a 9P stat: qid from qidOf, mode DMDIR (and
// DMAPPEND, DMEXCL, DMTMP) | permission bits, atime = mtime, length = Size
// (0 for directories), uid/gid/muid = User/Group (or the numbers if empty).
func statOf(a vfs.Attr, name string) (proto.Stat, error) {
	qid := qidOf(a)
	// The DM type bits are the qid type bits in the top byte.
	mode := uint32(qid.Qtype)<<24 | uint32(a.Mode.Perm())
	var length uint64
	if !a.Mode.IsDir() && a.Size > 0 {
		length = uint64(a.Size)
	}
	var mtime uint32
	if !a.Mtime.IsZero() {
		if s := a.Mtime.Unix(); s > 0 && s <= 1<<32-1 {
			mtime = uint32(s)
		}
	}
	uid, gid := a.User, a.Group
	if uid == "" {
		uid = strconv.FormatUint(uint64(a.Uid), 10)
	}
	if gid == "" {
		gid = strconv.FormatUint(uint64(a.Gid), 10)
	}
	st := proto.Stat{Qid: qid, Mode: mode, Atime: mtime, Mtime: mtime,
		Length: length, Name: name, Uid: uid, Gid: gid, Muid: uid}
	if statFixed+len(st.Name)+len(st.Uid)+len(st.Gid)+len(st.Muid) > MaxMsize-rstatHdr {
		return proto.Stat{}, errStatTooLarge
	}
	return st, nil
}

// wstat handles Twstat. Checked: fid exists and is not an auth fid; type,
// dev, qid and muid are "don't touch"; uid and gid are "don't touch" or
// unchanged; a mode keeps the DMDIR bit; a directory's length is not set;
// a new name is valid, the fid is not the root and its directory implements
// vfs.Renamer; mode, length or mtime need a vfs.Setter node (or, for a
// length alone, an open vfs.Truncater handle). All checks happen before any
// change; then SetAttr, then the rename within the same directory. A stat
// that touches nothing is a sync: an open vfs.Syncer handle is synced.
// atime is ignored. Cancellation ends the node calls.
func (c *conn) wstat(r *request, m *proto.TWstat) (proto.FCall, error) {
	f, err := c.fileFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	d := &m.Stat
	switch {
	case d.Type != 0xFFFF:
		return nil, errWstatType
	case d.Dev != ^uint32(0):
		return nil, errWstatDev
	case d.Qid.Qtype != 0xFF || d.Qid.Vers != ^uint32(0) || d.Qid.Uid != ^uint64(0):
		return nil, errWstatQid
	case d.Muid != "":
		return nil, errWstatMuid
	}
	l, qid, _, _, h := f.snapshot()
	isDir := qid.Qtype&qtDir != 0
	reply := &proto.RWstat{Header: hdr(r, proto.Rwstat)}

	if d.Mode == ^uint32(0) && d.Length == ^uint64(0) && d.Mtime == ^uint32(0) &&
		d.Name == "" && d.Uid == "" && d.Gid == "" {
		if s, ok := h.(vfs.Syncer); ok {
			if err := s.Sync(r.ctx); err != nil {
				return nil, err
			}
		}
		return reply, nil
	}

	var sa vfs.SetAttr
	set := false
	if d.Mode != ^uint32(0) {
		if (d.Mode&proto.DMDIR != 0) != isDir {
			return nil, errWstatDMDIR
		}
		mode := fs.FileMode(d.Mode & 0777)
		sa.Mode, set = &mode, true
	}
	if d.Length != ^uint64(0) {
		if isDir {
			return nil, errWstatDirLength
		}
		if int64(d.Length) < 0 {
			return nil, errBadOffset
		}
		size := int64(d.Length)
		sa.Size, set = &size, true
	}
	if d.Mtime != ^uint32(0) {
		t := time.Unix(int64(d.Mtime), 0)
		sa.Mtime, set = &t, true
	}
	if d.Uid != "" || d.Gid != "" {
		a, err := l.node.Attr(r.ctx, f.cred)
		if err != nil {
			return nil, err
		}
		st, err := statOf(a, l.name)
		if err != nil {
			return nil, err
		}
		if d.Uid != "" && d.Uid != st.Uid {
			return nil, errWstatUid
		}
		if d.Gid != "" && d.Gid != st.Gid {
			return nil, errWstatGid
		}
	}
	var renamer vfs.Renamer
	rename := d.Name != "" && d.Name != l.name
	if rename {
		if l.parent == nil {
			return nil, errRenameRoot
		}
		if !validName(d.Name) {
			return nil, errBadName
		}
		var ok bool
		if renamer, ok = l.parent.node.(vfs.Renamer); !ok || l.parentDir() == nil {
			return nil, vfs.ErrNotSupp
		}
	}
	var setter vfs.Setter
	var truncater vfs.Truncater
	if set {
		var ok bool
		if setter, ok = l.node.(vfs.Setter); !ok {
			truncater, ok = h.(vfs.Truncater)
			if !ok || sa.Mode != nil || sa.Mtime != nil {
				return nil, vfs.ErrNotSupp
			}
		}
	}

	switch {
	case setter != nil:
		if _, err := setter.SetAttr(r.ctx, f.cred, sa); err != nil {
			return nil, err
		}
	case truncater != nil:
		if err := truncater.Truncate(r.ctx, *sa.Size); err != nil {
			return nil, err
		}
	}
	if rename {
		if err := renamer.Rename(r.ctx, f.cred, l.name, l.parentDir(), d.Name); err != nil {
			return nil, err
		}
		f.mu.Lock()
		if f.loc == l {
			f.loc = &loc{node: l.node, name: d.Name, parent: l.parent}
		}
		f.mu.Unlock()
	}
	return reply, nil
}
