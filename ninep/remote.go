package ninep

// The 9P client side as a vfs tree: RemoteDir, its nodes and its
// directories (its listings are in remote_list.go, its calls to the
// client and their errors in remote_err.go, its files in remote_file.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/vfs"
)

// RemoteOwner is the owner a RemoteDir shows for every node, in place of
// the one the 9P server's stat names.
type RemoteOwner struct {
	// Uid and Gid are the numbers POSIX transports show.
	Uid, Gid uint32
	// User and Group are the names 9P shows.
	User, Group string
}

// RemoteOptions configure a RemoteDir. The zero value is usable.
type RemoteOptions struct {
	// Access decides who may use the tree: it is asked by every node's
	// Access method (access(2), chdir(2) over FUSE) and before every
	// operation that reaches the server (want is WantExec for a walk or a
	// listing, the open's access for an open, WantWrite for a change to a
	// directory or to attributes). Nil allows everyone. The server checks
	// the rest, as the identity the Fsys attached with: every caller that
	// passes Access acts as that one identity.
	Access func(ctx context.Context, cred vfs.Cred, want vfs.Want) error
	// Owner, if not nil, is shown as the owner of every node. Nil shows
	// the 9P stat's uid and gid names, and as numbers those names' host
	// uid and gid (a decimal name is its own number; an unknown name, or
	// one over MaxNameLen bytes, is 65534, nobody).
	Owner *RemoteOwner
	// Lost, if not nil, is closed when the connection of fsys ends (its
	// owner saw it end): every call in flight and every later one fails
	// at once with EIO, as when a call of the tree sees the end itself.
	// The tree watches it until it closes, so it must close.
	Lost <-chan struct{}
	// OneLineNames refuses names with a control character (a newline, a
	// tab, ...) in a listing or a lookup, besides the names every
	// RemoteDir refuses (see RemoteDir): a device's names are one line of
	// text.
	OneLineNames bool
	// Statfs, if not "", is the path of a file of the tree whose content
	// is the figures df shows (a vfs.StatFS as JSON: the namespace's
	// /sys/statfs): every directory of the tree is a vfs.Statfser that
	// reads it, as the caller. 9P2000 has no statfs of its own; without
	// the file a tree shows no space.
	Statfs string
}

// MaxNameLen is the longest name a RemoteDir takes from a server or
// looks up (NAME_MAX).
const MaxNameLen = 255

// MaxListing is the most bytes of stats a RemoteDir reads for one
// listing of a directory (about 150,000 entries of names of 20 bytes): a
// longer listing fails with EFBIG, so that a server cannot make the
// client hold an endless listing.
const MaxListing = 16 << 20

// RemoteChunk is the payload of one Tread a RemoteDir asks for when it
// splits a large read: the iounit of a session with this package's largest
// msize (MaxMsize). A server with a smaller msize answers each piece with
// several Treads.
const RemoteChunk = MaxMsize - ioHdrSize

// RemoteReadAhead is how many Treads one large read of a RemoteDir file
// keeps in flight at once.
const RemoteReadAhead = 16

// readdirTTL is how long the attributes a directory listing returned stand
// for its nodes' Attr and for the Lookups of its names, and a listing read
// ahead (see readAheadDirs) for the ReadDir it was read for, from when the
// read began and while nothing changes through the RemoteDir: a walk that
// lists a directory and then looks up or stats its entries, as find(1)
// does over FUSE (which caches no entry), costs one listing, not a round
// trip per entry. A change made through the RemoteDir (create, mkdir,
// remove, rename, setattr, a write or truncate through a handle) forgets
// the directory's listing and voids every listing, listing read ahead and
// cached Attr; a change made on the server itself shows within readdirTTL.
const readdirTTL = time.Second

// maxIDs bounds how many user and group names a RemoteDir remembers the
// host ids of.
const maxIDs = 4096

// maxListings bounds how many directories' listings a RemoteDir keeps for
// Lookup at once (each for readdirTTL at most).
const maxListings = 256

// readAheadDirs is how many directories a RemoteDir lists ahead of a
// walker: when a directory is listed that was found in its parent's fresh
// listing, the listings of the next readAheadDirs directories of that
// parent (in the parent's order) are read at once, as find(1), du or
// ls -R list them next. The walker's ReadDir of one of them takes its
// listing (waiting for it while it is in flight) instead of a read of its
// own, so the round trips to the server and the server's work overlap the
// walker's; a directory listed on its own (ls DIR) reads nothing ahead.
const readAheadDirs = 8

// readAheadInflight bounds the reads ahead in flight at once on one
// RemoteDir, and maxAhead how many listings read ahead it keeps unused.
const (
	readAheadInflight = 4
	maxAhead          = 64
)

// nonblockWait is how long a read on a non-blocking descriptor
// (vfs.Nonblocking) waits for its Tread before it says ErrWouldBlock; 9P
// cannot say "do not wait", and the Tread stays in flight for the next read.
const nonblockWait = 50 * time.Millisecond

// RemoteDir returns the directory dir of the 9P server reached through fsys
// as a vfs tree: every node is a file or directory of the server, walked by
// path from fsys's root on each operation (a node holds no fid; an open
// handle holds one, clunked by Close).
//
// Lookup is a Twalk and Tstat; Attr a Tstat, whose mode bits, length,
// mtime and qid path (as Ino) become the vfs.Attr (a file of length 0, or
// one marked DMTMP, is Synthetic: its content may be rendered, so a FUSE
// binding reads it with direct I/O); ReadDir reads the directory (a Twalk, a Topen, Treads of
// whole messages and a Tclunk), and its entries carry their attributes; a
// listing answers Lookups and Attrs for readdirTTL, and a walker's next
// directories are listed ahead (readAheadDirs); Open a Topen (O_TRUNC is
// OTRUNC; O_APPEND is done by the handle, which writes at the length a
// Tstat gives); Create and Mkdir a Tcreate (without O_EXCL an existing
// file is opened instead); Remove a Tremove; Rename, SetAttr and Truncate
// a Twstat (a rename stays in its directory: another directory is EXDEV).
//
// A read of a file that had a length when it was opened is split into
// RemoteChunk pieces read at their offsets with up to RemoteReadAhead
// Treads in flight on the handle's fid. Any other file (a ctl, call or
// stream file, or an empty one) is read with one Tread per Read, in turn:
// a short read there is not the end of the file.
//
// Rerror texts become errors with the same text (one line: control
// characters become spaces; at most 1 KiB) and an errno guessed from it
// (RemoteErrno). When the connection fails every call in flight and
// every later call fails at once with EIO.
//
// Cancellation: the 9fans client cannot flush a request, so when ctx ends
// a call returns ctx.Err() at once and the request goes on at the server;
// its reply is dropped (a fid it made is clunked). A read that is
// abandoned so keeps its Tread: the next Read of the handle at the same
// offset is answered with what it brings, so a stream loses no record to
// an interrupted read.
//
// Names: a listing that holds a name that is empty, has a '/' or a NUL,
// or is longer than MaxNameLen bytes (or, with OneLineNames, has a
// control character) fails with EIO naming it, as Linux fails a FUSE
// listing with such a name; "." and ".." are left out. Such a name is
// never looked up (ENOENT; ENAMETOOLONG over MaxNameLen) nor made
// (EINVAL). A listing of more than MaxListing bytes of stats fails with
// EFBIG. A length over the largest int64 is shown as the largest int64;
// no length is trusted to size a buffer (a read asks for what its reader
// asked for).
func RemoteDir(fsys *client.Fsys, dir string, opts RemoteOptions) vfs.Dir {
	r := &remote{fsys: fsys, opts: opts, dead: make(chan struct{}), aheadSlots: make(chan struct{}, readAheadInflight)}
	if opts.Lost != nil {
		go func() {
			<-opts.Lost
			r.kill(errors.New("the connection ended"))
		}()
	}
	return &remoteDir{remoteNode{r: r, path: strings.Trim(path.Clean("/"+dir), "/")}}
}

// nameErr reports whether name may be a name of the tree: nil, or the
// error a lookup or a creation of it returns (ENAMETOOLONG over
// MaxNameLen, else ENOENT for a lookup and EINVAL for a creation).
func (r *remote) nameErr(name string, create bool) error {
	switch {
	case len(name) > MaxNameLen:
		return vfs.Errorf(syscall.ENAMETOOLONG, fmt.Sprintf("name longer than %d bytes", MaxNameLen))
	case !r.goodName(name):
		if create {
			return vfs.Errorf(syscall.EINVAL, "bad file name")
		}
		return vfs.ErrNotExist
	}
	return nil
}

// goodName reports whether name is a name a listing may hold: not empty,
// ".", or "..", no '/' or NUL, at most MaxNameLen bytes, and with
// OneLineNames no control character.
func (r *remote) goodName(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > MaxNameLen || strings.ContainsAny(name, "/\x00") {
		return false
	}
	if r.opts.OneLineNames {
		for _, c := range name {
			if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
				return false
			}
		}
	}
	return true
}

var (
	_ vfs.Dir          = (*remoteDir)(nil)
	_ vfs.AttrLookuper = (*remoteDir)(nil)
	_ vfs.Creator      = (*remoteDir)(nil)
	_ vfs.Remover      = (*remoteDir)(nil)
	_ vfs.Renamer      = (*remoteDir)(nil)
	_ vfs.Setter       = (*remoteDir)(nil)
	_ vfs.Meta         = (*remoteDir)(nil)
	_ vfs.File         = (*remoteFile)(nil)
	_ vfs.Setter       = (*remoteFile)(nil)
	_ vfs.Meta         = (*remoteFile)(nil)
	_ vfs.Handle       = (*remoteHandle)(nil)
	_ vfs.Truncater    = (*remoteHandle)(nil)
)

// remote is what the nodes of one RemoteDir share.
type remote struct {
	fsys *client.Fsys
	opts RemoteOptions

	dead     chan struct{} // closed when the connection has failed
	deadOnce sync.Once
	deadErr  error // set before dead is closed

	ids  sync.Map     // "u:name" or "g:name" -> uint32
	nids atomic.Int64 // names looked up for ids: at most maxIDs are kept

	// listings holds the attributes of the last listing of each
	// directory (by path) while it is fresh, for LookupAttr.
	listMu   sync.Mutex
	listings map[string]*listing
	// changes counts the changes made through this tree: a node's
	// cached attributes stand only while it is what it was.
	changes atomic.Uint64

	// ahead holds the listings read ahead of a walker (see
	// readAheadDirs), by path, until the ReadDir they were read for
	// takes them; aheadSlots bounds those in flight.
	aheadMu    sync.Mutex
	ahead      map[string]*dirRead
	aheadSlots chan struct{}
}

// lost returns the error of every call once the connection has failed,
// else nil.
func (r *remote) lost() error {
	select {
	case <-r.dead:
		return r.deadErr
	default:
		return nil
	}
}

func (r *remote) kill(cause error) {
	r.deadOnce.Do(func() {
		r.deadErr = vfs.Errorf(syscall.EIO, "9P connection lost: "+cause.Error())
		close(r.dead)
	})
}

func (r *remote) access(ctx context.Context, cred vfs.Cred, want vfs.Want) error {
	if r.opts.Access == nil {
		return nil
	}
	return r.opts.Access(ctx, cred, want)
}

// attr turns a 9P stat into a vfs.Attr.
func (r *remote) attr(d *plan9.Dir) vfs.Attr {
	a := vfs.Attr{
		Ino:   d.Qid.Path,
		Mode:  fs.FileMode(d.Mode & 0o777),
		Size:  int64(min(d.Length, math.MaxInt64)),
		Mtime: time.Unix(int64(d.Mtime), 0),
	}
	switch {
	case d.Mode&plan9.DMDIR != 0:
		a.Mode |= fs.ModeDir
		a.Size = 0
	case d.Mode&plan9.DMAPPEND != 0:
		a.Mode |= fs.ModeAppend
	}
	if d.Mode&plan9.DMEXCL != 0 {
		a.Mode |= fs.ModeExclusive
	}
	// A file of length 0, or one the server marks QTTMP (ours marks every
	// synthetic file so: a view has the length of its rendering), may be
	// rendered: read it with direct I/O.
	a.Synthetic = !a.Mode.IsDir() && (a.Size == 0 || d.Mode&plan9.DMTMP != 0)
	if o := r.opts.Owner; o != nil {
		a.Uid, a.Gid, a.User, a.Group = o.Uid, o.Gid, o.User, o.Group
	} else {
		a.User, a.Group = d.Uid, d.Gid
		a.Uid, a.Gid = r.id("u", d.Uid), r.id("g", d.Gid)
	}
	return a
}

// id returns the host uid (kind "u") or gid ("g") of a 9P user or group
// name, remembered once found.
func (r *remote) id(kind, name string) uint32 {
	if len(name) > MaxNameLen {
		return 65534
	}
	if v, ok := r.ids.Load(kind + ":" + name); ok {
		return v.(uint32)
	}
	id := uint32(65534)
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		id = uint32(n)
	} else if kind == "u" {
		if u, err := user.Lookup(name); err == nil {
			if n, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
				id = uint32(n)
			}
		}
	} else if g, err := user.LookupGroup(name); err == nil {
		if n, err := strconv.ParseUint(g.Gid, 10, 32); err == nil {
			id = uint32(n)
		}
	}
	if r.nids.Add(1) <= maxIDs {
		r.ids.Store(kind+":"+name, id)
	}
	return id
}

// remoteNode is a file or directory of the server: its path from fsys's
// root ("" for the root itself).
type remoteNode struct {
	r    *remote
	path string

	// cached holds the attributes a listing returned, and until when
	// Attr may answer with them (see readdirTTL); nil if none.
	cached atomic.Pointer[cachedAttr]
	// size is the length the last stat reported (0 for a synthetic
	// file: bulkSize), for Open's choice of how to read.
	size atomic.Int64
}

type cachedAttr struct {
	a       vfs.Attr
	until   time.Time
	changes uint64 // remote.changes when the attributes were read
}

func (n *remoteNode) child(name string) string {
	if n.path == "" {
		return name
	}
	return n.path + "/" + name
}

// stat makes a Tstat of n's path.
func (n *remoteNode) stat(ctx context.Context) (vfs.Attr, error) {
	d, err := do(ctx, n.r, func() (*plan9.Dir, error) { return n.r.fsys.Stat(n.path) }, nil)
	if err != nil {
		return vfs.Attr{}, err
	}
	a := n.r.attr(d)
	n.size.Store(bulkSize(a))
	return a, nil
}

// Attr implements vfs.Node with a Tstat.
func (n *remoteNode) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	if c := n.cached.Load(); c != nil && time.Now().Before(c.until) && c.changes == n.r.changes.Load() {
		return c.a, nil
	}
	return n.stat(ctx)
}

// Access implements vfs.Meta with RemoteOptions.Access.
func (n *remoteNode) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error {
	return n.r.access(ctx, cred, want)
}

// SetAttr implements vfs.Setter with a Twstat, then a Tstat.
func (n *remoteNode) setAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr, isDir bool) (vfs.Attr, error) {
	if err := n.r.access(ctx, cred, vfs.WantWrite); err != nil {
		return vfs.Attr{}, err
	}
	var d plan9.Dir
	d.Null()
	set := false
	if s.Mode != nil {
		d.Mode = plan9.Perm(s.Mode.Perm())
		if isDir {
			d.Mode |= plan9.DMDIR
		}
		set = true
	}
	if s.Size != nil {
		if isDir {
			return vfs.Attr{}, vfs.ErrIsDir
		}
		d.Length = uint64(*s.Size)
		set = true
	}
	if s.Mtime != nil {
		d.Mtime = uint32(s.Mtime.Unix())
		set = true
	}
	if set {
		n.r.forget(parent(n.path))
		if _, err := do(ctx, n.r, func() (struct{}, error) { return struct{}{}, n.r.fsys.Wstat(n.path, &d) }, nil); err != nil {
			return vfs.Attr{}, err
		}
	}
	return n.stat(ctx)
}

// bulkSize is the size of a file read in pieces at offsets (a data file
// with a length), 0 for one read in turn: a synthetic file (a view, a
// rendering read as a stream) whatever its length.
func bulkSize(a vfs.Attr) int64 {
	if a.Synthetic {
		return 0
	}
	return a.Size
}

// node returns the vfs node for path whose stat is a.
func (r *remote) node(p string, a vfs.Attr) vfs.Node {
	if a.Mode.IsDir() {
		d := &remoteDir{remoteNode{r: r, path: p}}
		d.size.Store(a.Size)
		return d
	}
	f := &remoteFile{remoteNode: remoteNode{r: r, path: p}}
	f.size.Store(bulkSize(a))
	f.excl = a.Mode&(fs.ModeAppend|fs.ModeExclusive) != 0
	return f
}

// remoteDir is a directory of the server.
type remoteDir struct{ remoteNode }

var _ vfs.Statfser = (*remoteDir)(nil)

// maxStatfsFile bounds the statfs file a remote tree reads.
const maxStatfsFile = 4096

// Statfs implements vfs.Statfser: the figures of the file RemoteOptions
// names (Statfs), walked from the tree's root and read as cred; no space
// (and 255-byte names) when it names none.
func (d *remoteDir) Statfs(ctx context.Context, cred vfs.Cred) (vfs.StatFS, error) {
	none := vfs.StatFS{Bsize: 4096, Frsize: 4096, NameLen: MaxNameLen}
	if d.r.opts.Statfs == "" {
		return none, nil
	}
	var n vfs.Node = &remoteDir{remoteNode{r: d.r}}
	for _, name := range strings.Split(strings.Trim(d.r.opts.Statfs, "/"), "/") {
		dir, ok := n.(vfs.Dir)
		if !ok {
			return none, vfs.ErrNotDir
		}
		var err error
		if n, err = dir.Lookup(ctx, cred, name); err != nil {
			return none, err
		}
	}
	f, ok := n.(vfs.File)
	if !ok {
		return none, vfs.ErrIsDir
	}
	h, err := f.Open(ctx, cred, os.O_RDONLY)
	if err != nil {
		return none, err
	}
	defer h.Close(context.WithoutCancel(ctx))
	buf := make([]byte, maxStatfsFile)
	var got int
	for got < len(buf) {
		k, err := h.Read(ctx, buf[got:], int64(got))
		if err != nil {
			return none, err
		}
		if k == 0 {
			break
		}
		got += k
	}
	var st vfs.StatFS
	if err := json.Unmarshal(buf[:got], &st); err != nil {
		return none, vfs.Errorf(syscall.EIO, fmt.Sprintf("%s: not the figures of statfs: %v", d.r.opts.Statfs, err))
	}
	return st, nil
}

// SetAttr implements vfs.Setter with a Twstat, then a Tstat.
func (d *remoteDir) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	return d.setAttr(ctx, cred, s, true)
}

// Lookup implements vfs.Dir with a Twalk and a Tstat.
func (d *remoteDir) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	n, _, err := d.LookupAttr(ctx, cred, name)
	return n, err
}

// LookupAttr implements vfs.AttrLookuper with a Twalk and a Tstat.
func (d *remoteDir) LookupAttr(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, vfs.Attr, error) {
	if err := d.r.access(ctx, cred, vfs.WantExec); err != nil {
		return nil, vfs.Attr{}, err
	}
	if err := d.r.nameErr(name, false); err != nil {
		return nil, vfs.Attr{}, err
	}
	p := d.child(name)
	if c, ok := d.r.listed(d.path, name); ok {
		n := d.r.node(p, c.a)
		switch n := n.(type) { // its Attr, too, is the listing's while it stands
		case *remoteDir:
			n.cached.Store(c)
		case *remoteFile:
			n.cached.Store(c)
		}
		return n, c.a, nil
	}
	dir, err := do(ctx, d.r, func() (*plan9.Dir, error) { return d.r.fsys.Stat(p) }, nil)
	if err != nil {
		return nil, vfs.Attr{}, err
	}
	a := d.r.attr(dir)
	return d.r.node(p, a), a, nil
}

// omode returns the 9P open mode of POSIX open flags.
func omode(flags int) uint8 {
	var m uint8
	switch flags & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		m = plan9.OREAD
	case os.O_WRONLY:
		m = plan9.OWRITE
	default:
		m = plan9.ORDWR
	}
	if flags&os.O_TRUNC != 0 {
		m |= plan9.OTRUNC
	}
	return m
}

// Create implements vfs.Creator with a Tcreate. Without O_EXCL, a name
// that exists is opened (Topen) instead.
func (d *remoteDir) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm fs.FileMode) (vfs.Node, vfs.Handle, error) {
	if err := d.r.access(ctx, cred, vfs.WantWrite); err != nil {
		return nil, nil, err
	}
	if err := d.r.nameErr(name, true); err != nil {
		return nil, nil, err
	}
	p := d.child(name)
	d.r.forget(d.path)
	mode := omode(flags)
	fid, err := do(ctx, d.r, func() (*client.Fid, error) {
		return d.r.fsys.Create(p, mode, plan9.Perm(perm.Perm()))
	}, closeFid)
	if err != nil && flags&os.O_EXCL == 0 && vfs.Errno(err) == syscall.EEXIST {
		f := &remoteFile{remoteNode: remoteNode{r: d.r, path: p}}
		h, err := f.Open(ctx, cred, flags&^(os.O_CREATE|os.O_EXCL))
		if err != nil {
			return nil, nil, err
		}
		return f, h, nil
	}
	if err != nil {
		return nil, nil, err
	}
	f := &remoteFile{remoteNode: remoteNode{r: d.r, path: p}}
	return f, newRemoteHandle(d.r, p, fid, false, flags), nil
}

// Mkdir implements vfs.Creator with a Tcreate of a directory.
func (d *remoteDir) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm fs.FileMode) (vfs.Node, error) {
	if err := d.r.access(ctx, cred, vfs.WantWrite); err != nil {
		return nil, err
	}
	if err := d.r.nameErr(name, true); err != nil {
		return nil, err
	}
	p := d.child(name)
	d.r.forget(d.path)
	_, err := do(ctx, d.r, func() (struct{}, error) {
		fid, err := d.r.fsys.Create(p, plan9.OREAD, plan9.DMDIR|plan9.Perm(perm.Perm()))
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, fid.Close()
	}, nil)
	if err != nil {
		return nil, err
	}
	return &remoteDir{remoteNode{r: d.r, path: p}}, nil
}

// Remove implements vfs.Remover with a Tremove. The server decides by the
// node whether it is a directory; dir is not checked here (a POSIX
// transport's kernel has checked it against the node's type).
func (d *remoteDir) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	if err := d.r.access(ctx, cred, vfs.WantWrite); err != nil {
		return err
	}
	p := d.child(name)
	d.r.forget(d.path)
	_, err := do(ctx, d.r, func() (struct{}, error) { return struct{}{}, d.r.fsys.Remove(p) }, nil)
	return err
}

// Rename implements vfs.Renamer with a Twstat of the name: 9P2000 renames
// only within a directory, so newDir must be d's own directory of the same
// RemoteDir (else EXDEV, and mv copies). An existing newName is replaced:
// if the server refuses the rename because it exists, it is removed first.
func (d *remoteDir) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	nd, ok := newDir.(*remoteDir)
	if !ok || nd.r != d.r || nd.path != d.path {
		return vfs.Errorf(syscall.EXDEV, "9P renames only within a directory")
	}
	if err := d.r.access(ctx, cred, vfs.WantWrite); err != nil {
		return err
	}
	if name == newName {
		return nil
	}
	if err := d.r.nameErr(newName, true); err != nil {
		return err
	}
	p := d.child(name)
	d.r.forget(d.path)
	var st plan9.Dir
	st.Null()
	st.Name = newName
	wstat := func() (struct{}, error) { return struct{}{}, d.r.fsys.Wstat(p, &st) }
	_, err := do(ctx, d.r, wstat, nil)
	if err != nil && vfs.Errno(err) == syscall.EEXIST {
		if err := d.Remove(ctx, cred, newName, false); err != nil {
			return err
		}
		_, err = do(ctx, d.r, wstat, nil)
	}
	return err
}
