package main

// A second baseline for BenchmarkHistoryCat (bench_proc_test.go): go-fuse's
// loopback file system with FUSE passthrough off.
//
// go-fuse v2.12's loopback registers each open file's descriptor with the
// kernel (FOPEN_PASSTHROUGH, when running as root on Linux >= 6.9): reads
// of it never reach the file server, the kernel reads the tmpfs file
// itself. That is the baseline the target is set against. This one hides
// the descriptor (its file handles do not implement
// fs.FilePassthroughFder), so every read goes to the userspace server
// through the page cache with the kernel's readahead: what any userspace
// FUSE server can do at best with a regular file.

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

type noPassthroughNode struct{ fs.LoopbackNode }

var _ = (fs.NodeOpener)((*noPassthroughNode)(nil))

func (n *noPassthroughNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &noPassthroughFile{fh}, fl, 0
}

// noPassthroughFile forwards what cat needs to the loopback file.
type noPassthroughFile struct{ f fs.FileHandle }

var (
	_ fs.FileReader    = (*noPassthroughFile)(nil)
	_ fs.FileReleaser  = (*noPassthroughFile)(nil)
	_ fs.FileFlusher   = (*noPassthroughFile)(nil)
	_ fs.FileGetattrer = (*noPassthroughFile)(nil)
	_ fs.FileLseeker   = (*noPassthroughFile)(nil)
)

func (f *noPassthroughFile) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.f.(fs.FileReader).Read(ctx, buf, off)
}

func (f *noPassthroughFile) Release(ctx context.Context) syscall.Errno {
	return f.f.(fs.FileReleaser).Release(ctx)
}

func (f *noPassthroughFile) Flush(ctx context.Context) syscall.Errno {
	return f.f.(fs.FileFlusher).Flush(ctx)
}

func (f *noPassthroughFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.f.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *noPassthroughFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.f.(fs.FileLseeker).Lseek(ctx, off, whence)
}

// mountLoopbackNoPassthrough mounts src like mountLoopback (1 s timeouts)
// with passthrough off, in this process, on a temporary directory.
func mountLoopbackNoPassthrough(b *testing.B, src string) string {
	b.Helper()
	dir := b.TempDir()
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		b.Fatal(err)
	}
	ln := root.(*fs.LoopbackNode)
	ln.RootData.NewNode = func(rd *fs.LoopbackRoot, parent *fs.Inode, name string, st *syscall.Stat_t) fs.InodeEmbedder {
		return &noPassthroughNode{fs.LoopbackNode{RootData: rd}}
	}
	sec := time.Second
	srv, err := fs.Mount(dir, root, &fs.Options{
		NullPermissions: true,
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		MountOptions:    fuse.MountOptions{DirectMountStrict: true, FsName: src, Name: "loopback"},
	})
	if err != nil {
		b.Skipf("cannot mount the loopback: %v", err)
	}
	b.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		srv.Wait()
	})
	return dir
}
