// Package fusefs serves a vfs tree as a FUSE file system.
//
// The binding knows nothing of what the nodes mean. Every FUSE request is
// turned into the matching vfs call: the caller's host uid and gid (from the
// kernel's request header) become a vfs.Cred through the mount's
// vfs.Authenticator, and the request's context ends when the kernel
// interrupts the request (the calling process got a signal), so a blocked
// stream read returns at once with EINTR.
//
// The kernel caches nothing: entry, negative-entry and attribute timeouts
// are zero, so every path walk and stat reaches the tree. Files whose
// Attr.Synthetic is set are served with direct I/O (every read(2) and
// write(2) becomes one vfs Read or Write, offsets as the caller sees them)
// and report the size the tree gives (0 for most; a vfs.Backed file its
// file's size; a stat through an open vfs.Sizer handle that handle's
// size); other files go through the page cache, which is dropped on every
// open. A synthetic file whose handle is a vfs.BackingFiler (a vfs.Backed
// file) is read by the kernel itself from the handle's real file (FUSE
// passthrough) when the daemon may register backing files (root), and
// otherwise with direct I/O like the rest; see backedHandle.
//
// A read on a non-blocking descriptor reaches the tree with a context
// marked vfs.WithNonblocking; opens pass O_NONBLOCK and O_NOFOLLOW on to
// vfs File.Open. Writes and flushes are never cancelled: their INTERRUPT
// may be the Go runtime's SIGURG, and a command that has started runs to
// its end (vfs.Handle.Write).
//
// Permissions are the tree's: the mount is made without default_permissions,
// so the kernel checks nothing itself and asks the tree (through Open,
// Lookup, and the nodes' Access method for access(2) and chdir(2)). When the
// daemon runs as root the mount is made with allow_other, so every host user
// reaches the tree and the tree decides.
//
// The kernel interrupts a request whenever the calling process receives a
// signal, including the SIGURG the Go runtime uses for preemption: a Go
// program reading a stream file through the mount sees EINTR now and then,
// and os.File retries it.
package fusefs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"gsvfs.dev/gsvfs/vfs"
)

// credTTL is how long the Cred of one host uid/gid pair is reused before
// the Authenticator is asked again.
const credTTL = time.Second

// Options configure a mount. The zero value is usable.
type Options struct {
	// Debug logs every FUSE request and reply at slog debug level (the
	// Logger's handler must enable that level to show them).
	Debug bool
	// Logger receives the binding's structured logs. Nil means
	// slog.Default().
	Logger *slog.Logger
	// AllowOther lets host users other than the daemon's reach the mount
	// (mount option allow_other). It is always on when the daemon runs as
	// root; otherwise it needs user_allow_other in /etc/fuse.conf.
	AllowOther bool
	// FsName is the mount's source, the first column of /proc/mounts and
	// df. Empty means "gsvfs".
	FsName string
	// MakeDir makes the mount point (and its parents, 0755) if it does
	// not exist, once a stale mount there is detached.
	MakeDir bool
	// OnRequest, if set, learns of every FUSE request answered, by
	// operation (see countFS).
	OnRequest vfs.RequestHook
}

// Server is one mounted tree. Its methods are safe for concurrent use.
type Server struct {
	dir  string
	root vfs.Dir
	auth vfs.Authenticator
	log  *slog.Logger
	fuse *fuse.Server

	creds sync.Map // credKey -> *credEntry

	unmountMu sync.Mutex
	detached  bool // Unmount detached the mount lazily

	mu   sync.Mutex
	open map[*handle]struct{} // handles not yet released

	// nonblocking holds the cancel channels of the READs in flight on a
	// non-blocking file descriptor (O_NONBLOCK, which the kernel passes
	// with every READ; a reader may set it after the open, as tail does).
	nonblocking sync.Map // <-chan struct{} -> struct{}

	// ownAttr holds the cancel channels of the GETATTRs in flight that
	// name a file handle (FUSE_GETATTR_FH: an lseek to the end of the
	// file), as opposed to those go-fuse answers with any open handle.
	ownAttr sync.Map // <-chan struct{} -> struct{}

	// opening holds the backed handles whose OPEN is being answered,
	// keyed by the request's cancel channel (unique among requests in
	// flight): rawFS.Open settles their open flags (see backedHandle).
	opening sync.Map // <-chan struct{} -> *backedHandle

	done chan struct{} // closed when serving has ended and handles are closed
}

type credKey struct{ uid, gid uint32 }

type credEntry struct {
	cred    vfs.Cred
	expires time.Time
}

// Mount mounts root on the directory dir and serves it until the mount goes
// away (Unmount, or umount(8) by someone else). auth maps each caller's host
// uid and gid to the Cred passed to the tree.
//
// When running as root the mount is made with mount(2) directly
// (fuse.MountOptions.DirectMountStrict); otherwise through fusermount3. If
// dir is a stale mount left by a daemon that died without unmounting (stat
// fails with ENOTCONN), it is detached lazily first; then, with
// Options.MakeDir, a missing dir is made. Mount returns once the kernel has
// answered the FUSE handshake, so the mount is usable at once.
func Mount(dir string, root vfs.Dir, auth vfs.Authenticator, opts Options) (*Server, error) {
	if root == nil || auth == nil {
		return nil, errors.New("fusefs: Mount needs a root and an authenticator")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount point %s: %w", dir, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		dir:  abs,
		root: root,
		auth: auth,
		log:  log,
		open: map[*handle]struct{}{},
		done: make(chan struct{}),
	}
	if err := detachStale(abs, log); err != nil {
		return nil, err
	}
	if opts.MakeDir {
		if _, err := os.Stat(abs); errors.Is(err, iofs.ErrNotExist) {
			if err := os.MkdirAll(abs, 0o755); err != nil {
				return nil, fmt.Errorf("fusefs: mount point %s: %w", abs, err)
			}
		}
	}

	asRoot := os.Geteuid() == 0
	fsName := opts.FsName
	if fsName == "" {
		fsName = "gsvfs"
	}
	zero := time.Duration(0)
	fo := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        opts.AllowOther || asRoot,
			FsName:            fsName,
			Name:              "gsvfs",
			Debug:             opts.Debug,
			Logger:            slog.NewLogLogger(log.Handler(), slog.LevelDebug),
			DirectMountStrict: asRoot,
			// The kernel then passes O_TRUNC to OPEN instead of sending a
			// separate SETATTR without a file handle, so File.Open sees
			// O_TRUNC (shell "echo x > ctl" must work on files that are
			// not Setters).
			ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
			// The tree has no extended attributes; ENOSYS stops the kernel
			// from asking on every ls -l.
			DisableXAttrs: true,
			// Entries and attributes are never cached (the timeouts below
			// are zero), so the attributes READDIRPLUS carries would be
			// dropped at once: plain READDIR (names and types) is all a
			// walker such as find needs, and stat asks when it must.
			DisableReadDirPlus: true,
			PanicHandler: func(v any) fuse.Status {
				log.Error("fusefs: panic in request", "panic", v, "stack", string(debug.Stack()))
				return fuse.EIO
			},
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		NullPermissions: true,
		Logger:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	rootNode := &node{srv: s}
	rootNode.st.Store(&nodeState{vn: root})
	// fs.Mount, with the node file system wrapped (see rawFS).
	var raw fuse.RawFileSystem = &rawFS{RawFileSystem: fs.NewNodeFS(rootNode, fo), srv: s}
	if opts.OnRequest != nil {
		raw = &countFS{RawFileSystem: raw, hook: opts.OnRequest}
	}
	fsrv, err := fuse.NewServer(raw, abs, &fo.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", abs, err)
	}
	go fsrv.Serve()
	if err := fsrv.WaitMount(); err != nil {
		return nil, fmt.Errorf("fusefs: mount %s: %w", abs, err)
	}
	s.fuse = fsrv
	go func() {
		fsrv.Wait()
		s.closeAll()
		close(s.done)
	}()
	log.Debug("fusefs: mounted", "dir", abs, "direct", asRoot, "allow_other", fo.AllowOther)
	return s, nil
}

// rawFS is go-fuse's node file system with what its node API does not
// pass on: once go-fuse has answered an OPEN of a backed file (and decided
// whether the open uses passthrough, after our node's Open returned), it
// settles the handle's open flags (see backedHandle); it notes the READs
// of non-blocking descriptors and the GETATTRs that name a file handle,
// keyed by the request's cancel channel (unique among requests in flight),
// for handle.Read and node.Getattr.
type rawFS struct {
	fuse.RawFileSystem
	srv *Server
}

func (r *rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := r.RawFileSystem.Open(cancel, in, out)
	if v, ok := r.srv.opening.LoadAndDelete(cancel); ok && st == fuse.OK {
		v.(*backedHandle).settle(out)
	}
	return st
}

func (r *rawFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if in.Flags&syscall.O_NONBLOCK != 0 {
		r.srv.nonblocking.Store(cancel, struct{}{})
		defer r.srv.nonblocking.Delete(cancel)
	}
	return r.RawFileSystem.Read(cancel, in, buf)
}

func (r *rawFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.Flags()&fuse.FUSE_GETATTR_FH != 0 {
		r.srv.ownAttr.Store(cancel, struct{}{})
		defer r.srv.ownAttr.Delete(cancel)
	}
	return r.RawFileSystem.GetAttr(cancel, in, out)
}

// flagged reports whether the request of ctx is in m (see rawFS).
func flagged(ctx context.Context, m *sync.Map) bool {
	fc, ok := ctx.(*fuse.Context)
	if !ok || fc.Cancel == nil {
		return false
	}
	_, ok = m.Load(fc.Cancel)
	return ok
}

// Dir returns the absolute path of the mount point.
func (s *Server) Dir() string { return s.dir }

// Unmount removes the mount and returns when the serving loop has ended. If
// the mount is busy (a process has a file open or its cwd inside), it is
// detached lazily instead: it disappears from the namespace at once, and
// serving ends (Wait returns) when the last user lets go. Unmounting an
// unmounted Server returns nil.
func (s *Server) Unmount() error {
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	if s.detached {
		return nil
	}
	err := s.fuse.Unmount()
	if err == nil {
		return nil
	}
	s.log.Debug("fusefs: unmount failed, detaching lazily", "dir", s.dir, "err", err)
	if derr := detach(s.dir); derr != nil {
		return fmt.Errorf("fusefs: unmount %s: %w (lazy detach: %v)", s.dir, err, derr)
	}
	s.detached = true
	return nil
}

// Wait blocks until the mount has gone away and serving has ended. Handles
// the kernel never released (open files at a forced unmount) are closed
// before Wait returns.
func (s *Server) Wait() { <-s.done }

// cred returns the Cred of the caller of the request ctx belongs to.
// Authentication failures are EACCES, or EINTR if the request was
// interrupted meanwhile.
func (s *Server) cred(ctx context.Context) (vfs.Cred, syscall.Errno) {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return nil, syscall.EACCES
	}
	k := credKey{c.Uid, c.Gid}
	now := time.Now()
	if v, ok := s.creds.Load(k); ok {
		e := v.(*credEntry)
		if now.Before(e.expires) {
			return e.cred, 0
		}
	}
	cred, err := s.auth.Authenticate(ctx, vfs.Peer{
		Transport: "fuse",
		HostUID:   int(c.Uid),
		HostGID:   int(c.Gid),
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, syscall.EINTR
		}
		s.log.Debug("fusefs: authentication failed", "uid", c.Uid, "gid", c.Gid, "pid", c.Pid, "err", err)
		return nil, syscall.EACCES
	}
	s.creds.Store(k, &credEntry{cred: cred, expires: now.Add(credTTL)})
	return cred, 0
}

// errno maps a tree error to the errno for the kernel, logging the
// unexpected ones (EIO).
func (s *Server) errno(op string, err error, args ...any) syscall.Errno {
	e := vfs.Errno(err)
	if e == syscall.EIO {
		s.log.Debug("fusefs: "+op, append(args, "err", err)...)
	}
	return e
}

func (s *Server) addHandle(h *handle) {
	s.mu.Lock()
	s.open[h] = struct{}{}
	s.mu.Unlock()
}

func (s *Server) dropHandle(h *handle) {
	s.mu.Lock()
	delete(s.open, h)
	s.mu.Unlock()
}

// truncater returns the vfs handle of an open of n that is a
// vfs.Truncater, if any.
func (s *Server) truncater(n *node) vfs.Truncater {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.open {
		if h.n != n {
			continue
		}
		if t, ok := h.h.(vfs.Truncater); ok {
			return t
		}
	}
	return nil
}

// closeAll closes the handles the kernel never released.
func (s *Server) closeAll() {
	s.mu.Lock()
	hs := make([]*handle, 0, len(s.open))
	for h := range s.open {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		h.close(context.Background())
	}
}

// detachStale lazily detaches dir while it is a FUSE mount whose daemon is
// gone (stat fails with ENOTCONN); stale mounts may be stacked.
func detachStale(dir string, log *slog.Logger) error {
	for range 8 {
		_, err := os.Stat(dir)
		if err == nil || !errors.Is(err, syscall.ENOTCONN) {
			return nil
		}
		log.Info("fusefs: detaching stale mount", "dir", dir)
		if err := detach(dir); err != nil {
			return fmt.Errorf("fusefs: detach stale mount %s: %w", dir, err)
		}
	}
	return fmt.Errorf("fusefs: %s: still a stale mount after detaching", dir)
}

// detach lazily unmounts dir: umount2(MNT_DETACH) as root, fusermount3 -u -z
// otherwise.
func detach(dir string) error {
	if os.Geteuid() == 0 {
		return syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			return err
		}
	}
	out, err := exec.Command(bin, "-u", "-z", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -u -z: %w: %s", bin, err, out)
	}
	return nil
}

// posixMode returns the permission bits of m as a POSIX mode (without type
// bits).
func posixMode(m iofs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&iofs.ModeSetuid != 0 {
		p |= syscall.S_ISUID
	}
	if m&iofs.ModeSetgid != 0 {
		p |= syscall.S_ISGID
	}
	if m&iofs.ModeSticky != 0 {
		p |= syscall.S_ISVTX
	}
	return p
}

// fileMode is the inverse of posixMode; type bits in mode are dropped.
func fileMode(mode uint32) iofs.FileMode {
	m := iofs.FileMode(mode & 0o777)
	if mode&syscall.S_ISUID != 0 {
		m |= iofs.ModeSetuid
	}
	if mode&syscall.S_ISGID != 0 {
		m |= iofs.ModeSetgid
	}
	if mode&syscall.S_ISVTX != 0 {
		m |= iofs.ModeSticky
	}
	return m
}

// typeBits returns the POSIX file type of m: a directory, a symbolic link
// or a regular file (the tree has nothing else).
func typeBits(m iofs.FileMode) uint32 {
	switch {
	case m.IsDir():
		return syscall.S_IFDIR
	case m&iofs.ModeSymlink != 0:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

// fillAttr converts a to the kernel's attributes.
func fillAttr(out *fuse.Attr, a vfs.Attr) {
	out.Mode = typeBits(a.Mode) | posixMode(a.Mode)
	size := max(a.Size, 0)
	out.Size = uint64(size)
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = 4096
	out.Nlink = max(a.Nlink, 1)
	out.Uid = a.Uid
	out.Gid = a.Gid
	if !a.Mtime.IsZero() {
		t := a.Mtime
		out.SetTimes(&t, &t, &t)
	}
}

// openFlags keeps the open(2) flags a vfs File understands.
func openFlags(flags uint32) int {
	return int(flags) & (syscall.O_ACCMODE | syscall.O_TRUNC | syscall.O_APPEND | syscall.O_CREAT | syscall.O_EXCL |
		syscall.O_NONBLOCK | syscall.O_NOFOLLOW)
}
