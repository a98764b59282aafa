package fusefs

import (
	"context"
	"errors"
	"io"
	"sync"
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
	n, err := h.h.Read(ctx, dest, off)
	if n < 0 || n > len(dest) {
		h.n.srv.log.Debug("fusefs: read returned a bad count", "n", n, "len", len(dest))
		return nil, syscall.EIO
	}
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil, h.n.srv.errno("read", err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// Write implements fs.FileWriter.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := h.h.Write(ctx, data, off)
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
	if err := fl.Flush(ctx); err != nil {
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
