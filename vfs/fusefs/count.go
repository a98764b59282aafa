package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fuse"

	"gsvfs.dev/gsvfs/vfs"
)

// countFS tells Options.OnRequest of every FUSE request the file system
// answers, by operation (the lower-case name of the FUSE opcode).
type countFS struct {
	fuse.RawFileSystem
	hook vfs.RequestHook
}

func (c *countFS) done(op string, st fuse.Status) fuse.Status {
	c.hook(op, st != fuse.OK)
	return st
}

func (c *countFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	return c.done("lookup", c.RawFileSystem.Lookup(cancel, h, name, out))
}

func (c *countFS) Forget(nodeid, nlookup uint64) {
	c.RawFileSystem.Forget(nodeid, nlookup)
	c.hook("forget", false)
}

func (c *countFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	return c.done("getattr", c.RawFileSystem.GetAttr(cancel, in, out))
}

func (c *countFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return c.done("setattr", c.RawFileSystem.SetAttr(cancel, in, out))
}

func (c *countFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return c.done("mknod", c.RawFileSystem.Mknod(cancel, in, name, out))
}

func (c *countFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return c.done("mkdir", c.RawFileSystem.Mkdir(cancel, in, name, out))
}

func (c *countFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return c.done("unlink", c.RawFileSystem.Unlink(cancel, h, name))
}

func (c *countFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return c.done("rmdir", c.RawFileSystem.Rmdir(cancel, h, name))
}

func (c *countFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return c.done("rename", c.RawFileSystem.Rename(cancel, in, oldName, newName))
}

func (c *countFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return c.done("link", c.RawFileSystem.Link(cancel, in, name, out))
}

func (c *countFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, to, name string, out *fuse.EntryOut) fuse.Status {
	return c.done("symlink", c.RawFileSystem.Symlink(cancel, h, to, name, out))
}

func (c *countFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	out, st := c.RawFileSystem.Readlink(cancel, h)
	return out, c.done("readlink", st)
}

func (c *countFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return c.done("access", c.RawFileSystem.Access(cancel, in))
}

func (c *countFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	n, st := c.RawFileSystem.GetXAttr(cancel, h, attr, dest)
	return n, c.done("getxattr", st)
}

func (c *countFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	n, st := c.RawFileSystem.ListXAttr(cancel, h, dest)
	return n, c.done("listxattr", st)
}

func (c *countFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return c.done("setxattr", c.RawFileSystem.SetXAttr(cancel, in, attr, data))
}

func (c *countFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return c.done("removexattr", c.RawFileSystem.RemoveXAttr(cancel, h, attr))
}

func (c *countFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return c.done("create", c.RawFileSystem.Create(cancel, in, name, out))
}

func (c *countFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return c.done("tmpfile", c.RawFileSystem.Tmpfile(cancel, in, out))
}

func (c *countFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return c.done("open", c.RawFileSystem.Open(cancel, in, out))
}

func (c *countFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	r, st := c.RawFileSystem.Read(cancel, in, buf)
	return r, c.done("read", st)
}

func (c *countFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	return c.done("lseek", c.RawFileSystem.Lseek(cancel, in, out))
}

func (c *countFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	return c.done("getlk", c.RawFileSystem.GetLk(cancel, in, out))
}

func (c *countFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return c.done("setlk", c.RawFileSystem.SetLk(cancel, in))
}

func (c *countFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return c.done("setlkw", c.RawFileSystem.SetLkw(cancel, in))
}

func (c *countFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.RawFileSystem.Release(cancel, in)
	c.hook("release", false)
}

func (c *countFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, st := c.RawFileSystem.Write(cancel, in, data)
	return n, c.done("write", st)
}

func (c *countFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	n, st := c.RawFileSystem.Writev(cancel, in, data)
	return n, c.done("write", st)
}

func (c *countFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	n, st := c.RawFileSystem.CopyFileRange(cancel, in)
	return n, c.done("copy_file_range", st)
}

func (c *countFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	return c.done("ioctl", c.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf))
}

func (c *countFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return c.done("flush", c.RawFileSystem.Flush(cancel, in))
}

func (c *countFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return c.done("fsync", c.RawFileSystem.Fsync(cancel, in))
}

func (c *countFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return c.done("fallocate", c.RawFileSystem.Fallocate(cancel, in))
}

func (c *countFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return c.done("opendir", c.RawFileSystem.OpenDir(cancel, in, out))
}

func (c *countFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return c.done("readdir", c.RawFileSystem.ReadDir(cancel, in, out))
}

func (c *countFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return c.done("readdirplus", c.RawFileSystem.ReadDirPlus(cancel, in, out))
}

func (c *countFS) ReleaseDir(in *fuse.ReleaseIn) {
	c.RawFileSystem.ReleaseDir(in)
	c.hook("releasedir", false)
}

func (c *countFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return c.done("fsyncdir", c.RawFileSystem.FsyncDir(cancel, in))
}

func (c *countFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	return c.done("statfs", c.RawFileSystem.StatFs(cancel, h, out))
}

func (c *countFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	return c.done("statx", c.RawFileSystem.Statx(cancel, in, out))
}
