package ninep

// The 9P client side as a vfs tree: RemoteDir.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// listing is what one ReadDir of a directory returned.
type listing struct {
	until   time.Time
	changes uint64 // remote.changes before the listing was read
	attrs   map[string]vfs.Attr
	dirs    []string       // the names of its directories, in the server's order
	dirAt   map[string]int // the index of each in dirs
}

// dirRead is one read of a directory's listing, done when done is closed.
type dirRead struct {
	done    chan struct{}
	state   atomic.Int32 // a read ahead: aheadQueued, aheadStarted or aheadDropped
	changes uint64       // remote.changes before the read
	start   time.Time    // when the read began
	dirs    []*plan9.Dir
	err     error
}

// The states of a read ahead: waiting for a slot, reading, or dropped by
// the ReadDir it was for before it started (that ReadDir reads itself).
const (
	aheadQueued int32 = iota
	aheadStarted
	aheadDropped
)

// remember keeps the listing of dir for readdirTTL.
func (r *remote) remember(dir string, l *listing) {
	r.listMu.Lock()
	defer r.listMu.Unlock()
	if r.listings == nil {
		r.listings = map[string]*listing{}
	}
	if len(r.listings) >= maxListings {
		now := time.Now()
		for p, l := range r.listings {
			if now.After(l.until) {
				delete(r.listings, p)
			}
		}
		if len(r.listings) >= maxListings {
			clear(r.listings)
		}
	}
	r.listings[dir] = l
}

// listed returns the attributes of name in the fresh listing of dir, if
// there is one, nothing has changed through the tree since it was read,
// and it holds name.
func (r *remote) listed(dir, name string) (*cachedAttr, bool) {
	r.listMu.Lock()
	defer r.listMu.Unlock()
	l := r.listings[dir]
	if l == nil {
		return nil, false
	}
	if time.Now().After(l.until) || l.changes != r.changes.Load() {
		delete(r.listings, dir)
		return nil, false
	}
	a, ok := l.attrs[name]
	if !ok {
		return nil, false
	}
	return &cachedAttr{a, l.until, l.changes}, true
}

// forget drops the listing of dir: something in it changed.
func (r *remote) forget(dir string) {
	r.changes.Add(1)
	r.listMu.Lock()
	delete(r.listings, dir)
	r.listMu.Unlock()
}

// parent is the path of the directory holding p.
func parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
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

// connErr reports whether err, returned by the 9fans client, is a failure
// of the connection rather than an Rerror or a refusal of the client's own
// (or of the tree's: a refusal).
func connErr(err error) bool {
	if err == nil {
		return false
	}
	var ce client.Error
	var pe plan9.ProtocolError
	var rf refusal
	return !errors.As(err, &ce) && !errors.As(err, &pe) && !errors.As(err, &rf)
}

// refusal is an answer of the server that the tree refuses (a listing too
// long): the call's error, not the connection's.
type refusal struct{ err error }

func (e refusal) Error() string { return e.err.Error() }
func (e refusal) Unwrap() error { return e.err }

// result is what one client call returned.
type result[T any] struct {
	v   T
	err error
}

// do runs fn, a call of the 9fans client, and waits for it, for ctx to end,
// or for the connection to fail, whichever is first. The client does not
// wake the callers still waiting when its connection fails (only the one
// reading the connection sees the error), so fn runs in a goroutine of its
// own; a call abandoned this way is left to finish (or to wait for ever on
// a dead connection), and drop is given what a call abandoned by ctx
// returns successfully, to release it.
func do[T any](ctx context.Context, r *remote, fn func() (T, error), drop func(T)) (T, error) {
	var zero T
	if err := r.lost(); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	ch := make(chan result[T], 1)
	go func() {
		v, err := fn()
		if connErr(err) {
			r.kill(err)
		}
		ch <- result[T]{v, err}
	}()
	var cause error
	select {
	case res := <-ch:
		if res.err != nil {
			return res.v, r.mapErr(res.err)
		}
		return res.v, nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-r.dead:
		cause = r.deadErr
	}
	go func() {
		if res := <-ch; res.err == nil && drop != nil {
			drop(res.v)
		}
	}()
	return zero, cause
}

// mapErr turns an error of the client into a vfs error.
func (r *remote) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var rf refusal
	if errors.As(err, &rf) {
		return rf.err
	}
	if connErr(err) {
		if lerr := r.lost(); lerr != nil {
			return lerr
		}
		return vfs.Errorf(syscall.EIO, err.Error())
	}
	text := errText(err.Error())
	return vfs.Errorf(RemoteErrno(text), text)
}

// maxErrText bounds the text of a server's Rerror as the tree reports it.
const maxErrText = 1024

// errText is an Rerror's text as the tree reports it: one line (control
// characters become spaces) of at most maxErrText bytes.
func errText(s string) string {
	s = strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, s)
	if len(s) > maxErrText {
		s = strings.ToValidUTF8(s[:maxErrText-3], "") + "..."
	}
	return s
}

// remoteErrnos maps words of Rerror texts to errnos, most specific first.
var remoteErrnos = []struct {
	text  string
	errno syscall.Errno
}{
	{"not a directory", syscall.ENOTDIR},
	{"is a directory", syscall.EISDIR},
	{"not empty", syscall.ENOTEMPTY},
	{"does not exist", syscall.ENOENT},
	{"no such", syscall.ENOENT},
	{"not found", syscall.ENOENT},
	{"already exists", syscall.EEXIST},
	{"file exists", syscall.EEXIST},
	{"exists", syscall.EEXIST},
	{"permission denied", syscall.EACCES},
	{"access denied", syscall.EACCES},
	{"read-only", syscall.EACCES},
	{"write-only", syscall.EACCES},
	{"not permitted", syscall.EPERM},
	{"cross-device", syscall.EXDEV},
	{"name too long", syscall.ENAMETOOLONG},
	{"too long", syscall.EINVAL},
	{"no space", syscall.ENOSPC},
	{"not supported", syscall.ENOTSUP},
	{"not implemented", syscall.ENOTSUP},
	{"nothing to read yet", syscall.EAGAIN},
	{"temporarily unavailable", syscall.EAGAIN},
	{"too many", syscall.EAGAIN},
	{"interrupted", syscall.EINTR},
	{"timed out", syscall.ETIMEDOUT},
	{"offline", syscall.EHOSTDOWN},
	{"host is down", syscall.EHOSTDOWN},
	{"invalid", syscall.EINVAL},
	{"malformed", syscall.EINVAL},
	{"unknown", syscall.EINVAL},
	{"bad ", syscall.EINVAL},
}

// RemoteErrno reads the errno of a 9P Rerror text (9P2000 carries none):
// a text that ends with an errno's strerror (": invalid argument", which
// our server adds to every error that has an errno, see errorText) is
// that errno; else it is guessed from the words: "file does not exist"
// and "no such file" are ENOENT, "permission denied" EACCES, "file
// exists" EEXIST, "unknown verb" EINVAL, and so on; a text it does not
// know is EIO.
func RemoteErrno(text string) syscall.Errno {
	if e, ok := errnoOfEnd(text); ok {
		return e
	}
	t := strings.ToLower(text)
	for _, e := range remoteErrnos {
		if strings.Contains(t, e.text) {
			return e.errno
		}
	}
	return syscall.EIO
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

// ReadDir implements vfs.Dir: the directory is opened and read to its
// end, unless its listing was read ahead (see readAheadDirs) within
// readdirTTL and nothing has changed through the tree since; the entries
// carry their attributes.
func (d *remoteDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	if err := d.r.access(ctx, cred, vfs.WantRead); err != nil {
		return nil, err
	}
	got, err := d.r.readAheadOf(ctx, d.path)
	if err != nil {
		return nil, err
	}
	if got == nil {
		got = &dirRead{changes: d.r.changes.Load(), start: time.Now()} // before the read: a change during it voids it
		if got.dirs, err = d.r.readList(ctx, d.path); err != nil {
			return nil, err
		}
	}
	until := got.start.Add(readdirTTL)
	out := make([]vfs.DirEntry, 0, len(got.dirs))
	l := &listing{until: until, changes: got.changes, attrs: make(map[string]vfs.Attr, len(got.dirs)), dirAt: map[string]int{}}
	for _, di := range got.dirs {
		if di.Name == "." || di.Name == ".." {
			continue
		}
		if !d.r.goodName(di.Name) {
			name := di.Name
			if len(name) > MaxNameLen+1 {
				name = name[:MaxNameLen+1] + "..."
			}
			return nil, vfs.Errorf(syscall.EIO, fmt.Sprintf("/%s: the server listed a bad name %q: refused", d.path, name))
		}
		a := d.r.attr(di)
		l.attrs[di.Name] = a
		c := &cachedAttr{a, until, got.changes}
		n := d.r.node(d.child(di.Name), a)
		switch n := n.(type) {
		case *remoteDir:
			n.cached.Store(c)
			l.dirAt[di.Name] = len(l.dirs)
			l.dirs = append(l.dirs, di.Name)
		case *remoteFile:
			n.cached.Store(c)
		}
		out = append(out, vfs.DirEntry{Name: di.Name, Node: n, Attr: &c.a})
	}
	d.r.remember(d.path, l)
	d.r.readAhead(d.path)
	return out, nil
}

// readList reads the listing of the directory p: a Twalk and a Topen,
// Treads of a whole message until an empty one, and a Tclunk. The 9fans
// client reports the end of a connection as it reports an empty read
// (io.EOF); the clunk's answer, which follows the empty read's, shows the
// connection was alive, and a clunk on a failed connection fails at once.
func (r *remote) readList(ctx context.Context, p string) ([]*plan9.Dir, error) {
	return do(ctx, r, func() ([]*plan9.Dir, error) {
		fid, err := r.fsys.Open(p, plan9.OREAD)
		if err != nil {
			return nil, err
		}
		bp := dirBufs.Get().(*[]byte)
		defer dirBufs.Put(bp)
		buf := *bp
		var dirs []*plan9.Dir
		total := 0
		for {
			n, err := fid.Read(buf)
			if err == io.EOF {
				break
			}
			if total += n; err == nil && total > MaxListing {
				err = refusal{vfs.Errorf(syscall.EFBIG, fmt.Sprintf("/%s: a listing of more than %d bytes: refused", p, MaxListing))}
			}
			if err == nil {
				dirs, err = unpackDirs(dirs, buf[:n])
			}
			if err != nil {
				fid.Close()
				return nil, err
			}
		}
		if err := fid.Close(); connErr(err) {
			return nil, err
		}
		return dirs, nil
	}, nil)
}

// dirBufs holds the buffers of directory reads: each asks for a whole
// message of stats.
var dirBufs = sync.Pool{New: func() any { b := make([]byte, RemoteChunk); return &b }}

// unpackDirs appends the stats of a directory read's data b to dirs.
func unpackDirs(dirs []*plan9.Dir, b []byte) ([]*plan9.Dir, error) {
	for len(b) > 0 {
		if len(b) < 2 {
			return dirs, plan9.ProtocolError("short stat in a directory read")
		}
		n := int(b[0]) | int(b[1])<<8
		if len(b) < n+2 {
			return dirs, plan9.ProtocolError("short stat in a directory read")
		}
		d, err := plan9.UnmarshalDir(b[:n+2])
		if err != nil {
			return dirs, err
		}
		dirs = append(dirs, d)
		b = b[n+2:]
	}
	return dirs, nil
}

// readAheadOf returns the listing of dir read ahead, waiting for it if it
// is in flight, when there is one that stands (read within readdirTTL,
// nothing changed through the tree since it began); else nil. It is
// forgotten either way: a listing read ahead serves one ReadDir. One that
// still waits for a slot is dropped: the caller reads at once instead of
// behind the other reads ahead.
func (r *remote) readAheadOf(ctx context.Context, dir string) (*dirRead, error) {
	r.aheadMu.Lock()
	a := r.ahead[dir]
	delete(r.ahead, dir)
	r.aheadMu.Unlock()
	if a == nil || a.state.CompareAndSwap(aheadQueued, aheadDropped) {
		return nil, nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.dead:
		return nil, r.deadErr
	}
	if a.err != nil || a.changes != r.changes.Load() || time.Since(a.start) >= readdirTTL {
		return nil, nil
	}
	return a, nil
}

// readAhead starts reading the listings of the directories that follow
// dir in its parent's fresh listing, up to readAheadDirs of them, when dir
// is in that listing: a walker lists them next. The reads run as the tree
// does every call, as the identity fsys attached with; a read that fails
// is forgotten, and the ReadDir it was for reads again.
func (r *remote) readAhead(dir string) {
	if dir == "" {
		return
	}
	p, name := parent(dir), dir[strings.LastIndexByte(dir, '/')+1:]
	var next []string
	r.listMu.Lock()
	if l := r.listings[p]; l != nil && time.Now().Before(l.until) && l.changes == r.changes.Load() {
		if i, ok := l.dirAt[name]; ok {
			next = l.dirs[i+1 : min(len(l.dirs), i+1+readAheadDirs)]
		}
	}
	r.listMu.Unlock()
	if len(next) == 0 {
		return
	}
	r.aheadMu.Lock()
	defer r.aheadMu.Unlock()
	if r.ahead == nil {
		r.ahead = map[string]*dirRead{}
	}
	for _, n := range next {
		c := n
		if p != "" {
			c = p + "/" + n
		}
		if r.ahead[c] != nil {
			continue
		}
		if len(r.ahead) >= maxAhead {
			r.pruneAhead()
			if len(r.ahead) >= maxAhead {
				return
			}
		}
		a := &dirRead{done: make(chan struct{})}
		r.ahead[c] = a
		go r.fetch(c, a)
	}
}

// pruneAhead forgets the listings read ahead that no longer stand.
// r.aheadMu is held.
func (r *remote) pruneAhead() {
	for p, a := range r.ahead {
		select {
		case <-a.done:
			if a.err != nil || time.Since(a.start) >= readdirTTL {
				delete(r.ahead, p)
			}
		default:
		}
	}
}

// fetch reads the listing of dir ahead into a, in one of r.aheadSlots.
func (r *remote) fetch(dir string, a *dirRead) {
	defer close(a.done)
	select {
	case r.aheadSlots <- struct{}{}:
	case <-r.dead:
		a.err = r.deadErr
		return
	}
	defer func() { <-r.aheadSlots }()
	if !a.state.CompareAndSwap(aheadQueued, aheadStarted) {
		a.err = errors.New("dropped")
		return
	}
	a.changes, a.start = r.changes.Load(), time.Now()
	a.dirs, a.err = r.readList(context.Background(), dir)
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
