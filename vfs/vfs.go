// Package vfs is the transport-free node tree that gsvfs serves.
//
// A tree is made of Nodes. Directories implement Dir; files implement File
// and hand out a Handle per open. The FUSE binding (package vfs/fusefs) and
// the 9P export (package ninep) both serve the same tree and know nothing of
// what the nodes mean: every node operation receives the caller's Cred, an
// opaque value the tree's owner produced from what the transport knew about
// the peer (a host uid, a 9P user name and secret), and a context that ends
// when the transport gives up on the request (an interrupted syscall, a 9P
// Tflush, a closed connection).
//
// Errors returned by nodes are plain Go errors. A transport maps them to its
// own vocabulary with Errno: an error that has an Errno() method says which
// errno it is; the 9P export sends err.Error() as the Rerror text.
package vfs

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
	"time"
)

// Cred is the caller of a node operation as the tree's owner understands it.
// Transports obtain one from an Authenticator and pass it back unchanged.
type Cred any

// Peer is what a transport knows about who is on the other end.
type Peer struct {
	// Transport names the transport: "fuse", "9p-unix", "9p-tcp".
	Transport string
	// HostUID is the peer's host uid, or -1 when the transport cannot know it.
	HostUID int
	// HostGID is the peer's host gid, or -1.
	HostGID int
	// User is the user name the peer claimed (the 9P attach uname).
	User string
	// Secret is what the peer wrote to its 9P auth fid, if anything.
	Secret []byte
}

// Authenticator turns a Peer into a Cred. It is called once per FUSE caller
// uid (and cached by the binding for a short while) and once per 9P attach.
type Authenticator interface {
	Authenticate(ctx context.Context, p Peer) (Cred, error)
}

// Lease is implemented by a Cred whose authority is a grant that can end
// while a transport still holds the Cred (a token that is revoked or
// expires). A transport that keeps a connection attached with such a
// Cred counts its connections and fids against the grant, and ends the
// connection when Done is closed. A Cred whose Grant is "" names no grant: its
// authority lasts as long as its peer.
type Lease interface {
	// Grant names the grant for limits and messages, e.g. "token tok_x";
	// every Cred of one grant returns the same name.
	Grant() string
	// Done is closed when the grant ends; nil if it never ends.
	Done() <-chan struct{}
}

// Attr describes a node. Ino is stable for the life of the node's identity
// and doubles as the 9P qid path. Mode carries the type bits (fs.ModeDir) and
// the permission bits. A synthetic file reports the size of what an open
// would read now (a View's rendering, a Backed file's file), a stream its
// handle's own size (see Sizer), a ctl file 0. Mtime is when the content
// last changed, as far as the tree knows.
type Attr struct {
	Ino   uint64
	Mode  fs.FileMode
	Size  int64
	Mtime time.Time
	// Uid and Gid are the numbers POSIX transports show; User and Group the
	// names 9P shows.
	Uid, Gid    uint32
	User, Group string
	// Nlink is the number of names of the node (hard links); 0 means 1.
	Nlink uint32
	// Synthetic marks files whose content is rendered by the tree: the FUSE
	// binding serves them with direct I/O and no kernel caching (a handle
	// that is a BackingFiler may instead be read by the kernel from its
	// real file: FUSE passthrough).
	Synthetic bool
}

// Node is any file or directory in the tree.
type Node interface {
	// Attr reports the node's attributes as cred sees them.
	Attr(ctx context.Context, cred Cred) (Attr, error)
}

// DirEntry is one name in a directory listing.
type DirEntry struct {
	Name string
	Node Node
	// Attr, if not nil, is what Node.Attr would have answered when the
	// listing was made: a directory that learns its children's attributes
	// as it lists them (a real directory's fstatat, a 9P directory read)
	// gives them here, and a transport that lists the directory (a 9P
	// directory read, a FUSE READDIR) uses them instead of asking each
	// node. Nil means ask Node.Attr.
	Attr *Attr
}

// EntryAttr returns the attributes of e as the listing gave them, or else
// as e.Node.Attr answers for cred.
func EntryAttr(ctx context.Context, e DirEntry, cred Cred) (Attr, error) {
	if e.Attr != nil {
		return *e.Attr, nil
	}
	return e.Node.Attr(ctx, cred)
}

// Dir is a directory.
type Dir interface {
	Node
	// Lookup finds the child called name. A missing child is an error whose
	// Errno is ENOENT (use ErrNotExist).
	Lookup(ctx context.Context, cred Cred, name string) (Node, error)
	// ReadDir lists the directory's children in a stable order.
	ReadDir(ctx context.Context, cred Cred) ([]DirEntry, error)
}

// AttrLookuper is a Dir that can find a child and report its attributes in
// one step (the data tree stats a real file once instead of twice).
type AttrLookuper interface {
	LookupAttr(ctx context.Context, cred Cred, name string) (Node, Attr, error)
}

// LookupAttr finds the child name of d and its attributes, in one step if d
// is an AttrLookuper.
func LookupAttr(ctx context.Context, d Dir, cred Cred, name string) (Node, Attr, error) {
	if l, ok := d.(AttrLookuper); ok {
		return l.LookupAttr(ctx, cred, name)
	}
	n, err := d.Lookup(ctx, cred, name)
	if err != nil {
		return nil, Attr{}, err
	}
	if n == nil {
		return nil, Attr{}, ErrNotExist
	}
	a, err := n.Attr(ctx, cred)
	return n, a, err
}

// File is a non-directory node that can be opened.
type File interface {
	Node
	// Open checks that cred may open the file with flags (os.O_RDONLY,
	// os.O_WRONLY, os.O_RDWR, possibly os.O_TRUNC, os.O_APPEND) and
	// returns a handle. A POSIX transport also passes syscall.O_NONBLOCK
	// and syscall.O_NOFOLLOW as the opener gave them: a file whose reads
	// can wait (a Stream) reads them as the opener's wish not to wait
	// (tree walkers such as cp -r, tar, rsync and grep -r open with
	// O_NOFOLLOW); other files ignore them.
	Open(ctx context.Context, cred Cred, flags int) (Handle, error)
}

// Handle is one open of a File. Read and Write may be called concurrently
// by the transports; handles serialise as they need.
type Handle interface {
	// Read reads into p at off. A blocking read returns when ctx ends with
	// ctx.Err() (mapped to EINTR), and fails at once with ErrWouldBlock if
	// ctx is Nonblocking.
	Read(ctx context.Context, p []byte, off int64) (int, error)
	// Write writes p at off and returns only when the write's effect is
	// done. ctx ends only when the write is abandoned for good (a 9P
	// Tflush, the connection's end); the FUSE binding never cancels a
	// write, whose INTERRUPT may be a spurious one (the Go runtime's
	// SIGURG).
	Write(ctx context.Context, p []byte, off int64) (int, error)
	// Close releases the handle. It is called exactly once.
	Close(ctx context.Context) error
}

// Sizer is a Handle whose size is its own rather than its file's: a
// stream's size is the bytes of the records that have reached the handle,
// so that a reader that follows a file's size (tail -f) sees it grow. A
// POSIX transport reports it for a stat made through an open file. own
// says the request named this very handle (the FUSE kernel names it when a
// reader seeks to the end of the file, as tail does to find where the file
// ends); otherwise the transport picked one of the file's open handles to
// answer a stat of the file. A negative size says the handle has no size
// of its own for this stat: the file's Attr answers (a view's snapshot is
// its own only for a stat that names it).
type Sizer interface {
	Size(own bool) int64
}

// WithNonblocking returns a context for a Read that must not wait: the
// reader's file descriptor is non-blocking (O_NONBLOCK). A Read that would
// block then fails with ErrWouldBlock.
func WithNonblocking(ctx context.Context) context.Context {
	return context.WithValue(ctx, nonblockingKey{}, true)
}

// Nonblocking reports whether ctx was made by WithNonblocking.
func Nonblocking(ctx context.Context) bool {
	v, _ := ctx.Value(nonblockingKey{}).(bool)
	return v
}

type nonblockingKey struct{}

// StatFS is what df(1) shows of a tree: the figures of statfs(2). As JSON
// (its tags) it is the content of a tree's statfs file, which a remote
// mount reads to answer df (ninep.RemoteOptions.Statfs).
type StatFS struct {
	Blocks uint64 `json:"blocks"` // in units of Frsize
	Bfree  uint64 `json:"bfree"`
	Bavail uint64 `json:"bavail"`
	Files  uint64 `json:"files"`
	Ffree  uint64 `json:"ffree"`
	Bsize  uint32 `json:"bsize"`
	Frsize uint32 `json:"frsize"`
	// NameLen is the longest name.
	NameLen uint32 `json:"namelen"`
}

// Statfser is a Dir, the root of a tree, that reports the space of the
// storage behind it (statfs(2), df).
type Statfser interface {
	Statfs(ctx context.Context, cred Cred) (StatFS, error)
}

// Flusher is a Handle that has work to finish when its file descriptor is
// closed (FUSE FLUSH): a ctl handle runs a final line written without a
// newline. The error is reported to close(2).
type Flusher interface {
	Flush(ctx context.Context) error
}

// Truncater is a Handle that supports ftruncate.
type Truncater interface {
	Truncate(ctx context.Context, size int64) error
}

// Syncer is a Handle that supports fsync.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Creator is a Dir in which files and directories can be made.
type Creator interface {
	// Create makes (or, without O_EXCL, opens and maybe truncates) the file
	// name with permission perm and returns it opened with flags.
	Create(ctx context.Context, cred Cred, name string, flags int, perm fs.FileMode) (Node, Handle, error)
	// Mkdir makes the directory name.
	Mkdir(ctx context.Context, cred Cred, name string, perm fs.FileMode) (Node, error)
}

// Remover is a Dir whose children can be removed.
type Remover interface {
	// Remove removes the child name; dir says whether the caller expects a
	// directory (rmdir) or not (unlink).
	Remove(ctx context.Context, cred Cred, name string, dir bool) error
}

// Renamer is a Dir whose children can be renamed into another directory of
// the same kind.
type Renamer interface {
	Rename(ctx context.Context, cred Cred, name string, newDir Dir, newName string) error
}

// Symlinker is a Dir in which symbolic links can be made. A link's target
// is data: the tree stores it and never resolves it.
type Symlinker interface {
	// Symlink makes name a symbolic link to target.
	Symlink(ctx context.Context, cred Cred, target, name string) (Node, error)
}

// Linker is a Dir in which hard links can be made.
type Linker interface {
	// Link makes name another name of the existing node target (a node of
	// the same tree, not a directory).
	Link(ctx context.Context, cred Cred, target Node, name string) (Node, error)
}

// Readlinker is a node that is a symbolic link: its Attr has
// fs.ModeSymlink and Readlink returns its target.
type Readlinker interface {
	Readlink(ctx context.Context, cred Cred) (string, error)
}

// SetAttr says which attributes a Setter should change.
type SetAttr struct {
	Mode  *fs.FileMode // permission bits only
	Size  *int64
	Mtime *time.Time
}

// Setter is a Node whose attributes can be changed (chmod, truncate, utimes).
type Setter interface {
	SetAttr(ctx context.Context, cred Cred, s SetAttr) (Attr, error)
}

// Errors nodes commonly return. Each carries its errno.
var (
	ErrNotExist   = Errorf(syscall.ENOENT, "file does not exist")
	ErrPermission = Errorf(syscall.EACCES, "permission denied")
	ErrIsDir      = Errorf(syscall.EISDIR, "is a directory")
	ErrNotDir     = Errorf(syscall.ENOTDIR, "not a directory")
	ErrReadOnly   = Errorf(syscall.EACCES, "file is read-only")
	ErrWriteOnly  = Errorf(syscall.EACCES, "file is write-only")
	ErrNotSupp    = Errorf(syscall.ENOTSUP, "operation not supported")
	ErrExist      = Errorf(syscall.EEXIST, "file exists")
	ErrWouldBlock = Errorf(syscall.EAGAIN, "nothing to read yet")
)

// errnoError is an error with a fixed errno.
type errnoError struct {
	errno syscall.Errno
	msg   string
}

func (e *errnoError) Error() string        { return e.msg }
func (e *errnoError) Errno() syscall.Errno { return e.errno }
func (e *errnoError) Is(target error) bool {
	t, ok := target.(*errnoError)
	return ok && t.errno == e.errno
}

// Errorf returns an error whose Errno is errno and whose text is msg.
func Errorf(errno syscall.Errno, msg string) error { return &errnoError{errno, msg} }

// Errno maps err to the errno a POSIX transport reports: EINTR for a
// cancelled context (whatever wraps it), the error's own Errno() if it (or
// an error it wraps) has one, the errno inside a *fs.PathError or
// syscall.Errno, EIO otherwise.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return syscall.EINTR
	}
	var en interface{ Errno() syscall.Errno }
	if errors.As(err, &en) {
		return en.Errno()
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		return se
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	}
	return syscall.EIO
}
