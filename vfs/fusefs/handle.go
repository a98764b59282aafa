package fusefs

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"gsvfs.dev/gsvfs/vfs"
)

// handle is one open of a file: the kernel's file handle wrapping a
// vfs.Handle.
type handle struct {
	n    *node
	h    vfs.Handle
	once sync.Once
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileFsyncer  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

// newHandle registers h, an open of n, and returns it with the FUSE open
// flags: direct I/O for synthetic files; never FOPEN_KEEP_CACHE, so the
// kernel drops a data file's cached pages at each open.
func (s *Server) newHandle(n *node, h vfs.Handle, synthetic bool) (*handle, uint32) {
	fh := &handle{n: n, h: h}
	s.addHandle(fh)
	var flags uint32
	if synthetic {
		flags = fuse.FOPEN_DIRECT_IO
	}
	return fh, flags
}

// Read implements fs.FileReader. ctx ends when the kernel interrupts the
// request, which makes a blocked vfs read return EINTR. io.EOF is the end of
// the file, not an error; data read before an error is returned.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	vctx := ctx
	if flagged(ctx, &h.n.srv.nonblocking) {
		vctx = vfs.WithNonblocking(ctx)
	}
	n, err := h.h.Read(vctx, dest, off)
	if n < 0 || n > len(dest) {
		h.n.srv.log.Debug("fusefs: read returned a bad count", "n", n, "len", len(dest))
		return nil, syscall.EIO
	}
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil, h.n.srv.errno("read", err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write implements fs.FileWriter. The kernel's INTERRUPT does not cancel
// it (see the package comment).
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := h.h.Write(context.WithoutCancel(ctx), data, off)
	if err != nil {
		return 0, h.n.srv.errno("write", err)
	}
	if n < 0 || n > len(data) {
		h.n.srv.log.Debug("fusefs: write returned a bad count", "n", n, "len", len(data))
		return 0, syscall.EIO
	}
	return uint32(n), 0
}

// Flush implements fs.FileFlusher (each close(2) of a descriptor) with
// vfs.Flusher; its error is close(2)'s.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	fl, ok := h.h.(vfs.Flusher)
	if !ok {
		return 0
	}
	if err := fl.Flush(context.WithoutCancel(ctx)); err != nil {
		return h.n.srv.errno("flush", err)
	}
	return 0
}

// Fsync implements fs.FileFsyncer with vfs.Syncer; a handle that is not a
// Syncer has nothing to sync.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	sy, ok := h.h.(vfs.Syncer)
	if !ok {
		return 0
	}
	if err := sy.Sync(ctx); err != nil {
		return h.n.srv.errno("fsync", err)
	}
	return 0
}

// Release implements fs.FileReleaser: the last close of the open file
// closes the vfs handle.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.close(ctx)
	return 0
}

// close closes the vfs handle once and forgets it.
func (h *handle) close(ctx context.Context) {
	h.once.Do(func() {
		h.n.srv.dropHandle(h)
		if err := h.h.Close(ctx); err != nil {
			h.n.srv.log.Debug("fusefs: close", "err", err)
		}
	})
}

// fileID is the identity of a real file: device and inode numbers.
type fileID struct{ dev, ino uint64 }

func fileIDOf(f *os.File) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

// backedHandle is an open of a file whose vfs handle is a
// vfs.BackingFiler: when it can, the kernel reads the real file itself
// (FUSE passthrough) and the reads never reach us; otherwise it is served
// like any synthetic file, with direct I/O and Read.
//
// Whether an open uses passthrough is go-fuse's decision, made after our
// node's Open has returned (fs/bridge.go, addBackingID): it calls
// PassthroughFd only when the inode has no backing file registered, else
// it gives the open the inode's registered backing file, whichever that
// is; and when registering fails (not root, no CAP_PASSTHROUGH, a backing
// file stacked too deep) it silently serves the open without passthrough,
// which for a synthetic file of size 0 with the open flags we return would
// be a cached open of an empty file. So our Open returns no flags, and
// rawFS.Open, once go-fuse has decided, settles them (settle):
//
//   - no passthrough: direct I/O, served by Read;
//   - passthrough with this handle's own file as the inode's backing
//     file: plain passthrough, the kernel reads the file;
//   - passthrough with another file as the backing file (an older open of
//     the node, still open, got an earlier file: the tree's owner has
//     replaced the file since): FOPEN_PASSTHROUGH stays (the kernel refuses a
//     non-passthrough open of an inode that has a backing file) and direct
//     I/O is added, which the kernel honours over passthrough: reads come
//     to Read, which reads this handle's own file.
//
// The inode's backing file is known exactly: every backing file of a node
// is registered through PassthroughFd of one of its handles, which records
// the file's identity in the node (under go-fuse's backing lock); and the
// backing file cannot change between this open's go-fuse decision and
// settle, because this open holds a reference on it until it is released,
// which cannot happen before the kernel has our answer. So no window is
// left between our Release and go-fuse's releaseBackingIDRef: an open that
// follows the release of the last passthrough open either finds no
// backing file (and registers its own) or still finds the old one and is
// served with direct I/O.
type backedHandle struct {
	*handle
	f  *os.File
	id fileID
	// passthrough is set once settled with the kernel reading f.
	passthrough atomic.Bool
}

var (
	_ fs.FilePassthroughFder = (*backedHandle)(nil)
	_ fs.FileReader          = (*backedHandle)(nil)
	_ fs.FileReleaser        = (*backedHandle)(nil)
)

// newBackedHandle registers h, an open of n whose vfs handle offers the
// real file f, as a backedHandle, or returns nil when passthrough cannot be
// offered (the request is not a FUSE OPEN, the open is not read-only, f
// cannot be stat'ed): the caller then serves h as usual.
func (s *Server) newBackedHandle(ctx context.Context, n *node, h vfs.Handle, f *os.File, flags uint32) *backedHandle {
	fc, ok := ctx.(*fuse.Context)
	if !ok || fc.Cancel == nil || flags&syscall.O_ACCMODE != syscall.O_RDONLY || f == nil {
		return nil
	}
	id, err := fileIDOf(f)
	if err != nil {
		s.log.Debug("fusefs: backing file", "err", err)
		return nil
	}
	bh := &backedHandle{handle: &handle{n: n, h: h}, f: f, id: id}
	s.addHandle(bh.handle)
	s.opening.Store(fc.Cancel, bh)
	return bh
}

// PassthroughFd implements fs.FilePassthroughFder. go-fuse calls it, under
// its backing lock, when it registers this handle's file as the inode's
// backing file.
func (h *backedHandle) PassthroughFd() (int, bool) {
	id := h.id
	h.n.backing.Store(&id)
	return int(h.f.Fd()), true
}

// settle sets the open flags of out, go-fuse's answer to this handle's
// OPEN (see backedHandle).
func (h *backedHandle) settle(out *fuse.OpenOut) {
	if out.OpenFlags&fuse.FOPEN_PASSTHROUGH != 0 {
		if b := h.n.backing.Load(); b != nil && *b == h.id {
			h.passthrough.Store(true)
			return
		}
	}
	out.OpenFlags |= fuse.FOPEN_DIRECT_IO
}
