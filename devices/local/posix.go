package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// Internal args of the POSIX side of the data tree.
type (
	fsPathArgs struct{ Path string }
	fsOpenArgs struct {
		Path  string
		Flags int
		Perm  fs.FileMode
	}
	fsIOArgs struct {
		F   *os.File
		Buf []byte
		Off int64
	}
	fsMkdirArgs struct {
		Path string
		Perm fs.FileMode
	}
	fsRemoveArgs struct {
		Path string
		Dir  bool
	}
	fsRenameArgs  struct{ Old, New string }
	fsSymlinkArgs struct{ Target, Path string }
	fsSetattrArgs struct {
		Path string
		Set  vfs.SetAttr
	}
	fsTruncArgs struct {
		F    *os.File
		Size int64
	}
	// DirEnt is one entry of fs.readdir.
	DirEnt struct {
		Name string
		Attr vfs.Attr
	}
)

// fileIOSyscalls are the internal file syscalls for subsystems:
// fs.openread, fs.readraw and fs.create (see abi.FileArgs).
func (d *Device) fileIOSyscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Fn("fs.openread", kernel.Internal, d.openread),
		kernel.Fn("fs.readraw", kernel.Internal, d.readraw),
		kernel.Fn("fs.create", kernel.Internal, d.createFile),
	}
}

// posixSyscalls are the internal syscalls that serve /home, /workspaces
// and /var/sessions to the transports. Paths are relative to the data
// root and already resolved (the nodes hold them); each call checks
// permissions.
func (d *Device) posixSyscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Fn("fs.stat", kernel.Internal, d.statFile),
		kernel.Fn("fs.readdir", kernel.Internal, d.readDir),
		kernel.Fn("fs.open", kernel.Internal, d.openFile),
		kernel.Fn("fs.pread", kernel.Internal, d.pread),
		kernel.Fn("fs.pwrite", kernel.Internal, d.pwrite),
		kernel.Fn("fs.ftruncate", kernel.Internal, d.ftruncate),
		kernel.Fn("fs.fsync", kernel.Internal, d.fsync),
		kernel.Fn("fs.mkdir", kernel.Internal, d.mkdirFile),
		kernel.Fn("fs.remove", kernel.Internal, d.removeFile),
		kernel.Fn("fs.rename", kernel.Internal, d.renameFile),
		kernel.Fn("fs.readlink", kernel.Internal, d.readlinkFile),
		kernel.Fn("fs.symlink", kernel.Internal, d.symlinkFile),
		kernel.Fn("fs.link", kernel.Internal, d.linkFile),
		kernel.Fn("fs.setattr", kernel.Internal, d.setattr),
	}
}

// checkLinkTarget checks a symbolic link's target: text of 1 to 4095
// bytes without NUL. The target is data: the daemon never resolves it
// (its own walks follow no link), and a client resolves it on its own
// side, as on any file system.
func checkLinkTarget(t string) error {
	if t == "" || len(t) >= unix.PathMax || strings.ContainsRune(t, 0) {
		return abi.E(abi.Invalid, "a link target is 1 to 4095 bytes without NUL")
	}
	return nil
}

// openread is fs.openread (internal): it opens a data tree file the caller
// may read, for reading (a subsystem reads an archive with it).
func (d *Device) openread(ctx context.Context, c *kernel.Caller, a *abi.FileArgs) (*os.File, error) {
	rel, err := resolve(c.Identity, a.Path)
	if err != nil {
		return nil, err
	}
	if _, err := d.access(ctx, c.Identity, rel, vfs.WantRead); err != nil {
		return nil, err
	}
	f, err := d.openData(rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return f, nil
}

// readraw is fs.readraw (internal): it returns the content of a regular
// data tree file the caller may read, at most a.Max bytes (default 25 MiB);
// a FIFO, a device or a larger file is a 400, never a block.
func (d *Device) readraw(ctx context.Context, c *kernel.Caller, a *abi.FileArgs) ([]byte, error) {
	rel, err := resolve(c.Identity, a.Path)
	if err != nil {
		return nil, err
	}
	fi, err := d.access(ctx, c.Identity, rel, vfs.WantRead)
	if err != nil {
		return nil, err
	}
	limit := int64(maxReadFile)
	if a.Max > 0 {
		limit = a.Max
	}
	if !fi.Mode().IsRegular() {
		return nil, abi.E(abi.Path("/"+rel), abi.Invalid, "not a regular file")
	}
	if fi.Size() > limit {
		return nil, abi.E(abi.Path("/"+rel), abi.Invalid, fmt.Sprintf("file is larger than %d bytes", limit))
	}
	b, err := d.readFileData(rel, limit)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return b, nil
}

// createFile is fs.create (internal): it creates a new data tree file
// (O_EXCL) with mode a.Perm, making its missing parent directories, and
// returns it open for writing.
func (d *Device) createFile(ctx context.Context, c *kernel.Caller, a *abi.FileArgs) (*os.File, error) {
	rel, err := resolve(c.Identity, a.Path)
	if err != nil {
		return nil, err
	}
	dirPerm := a.Perm.Perm() | (a.Perm.Perm()&0o444)>>2
	if err := d.mkdirAllMode(ctx, c.Identity, path.Dir(rel), dirPerm); err != nil {
		return nil, err
	}
	if err := d.accessParent(ctx, c.Identity, rel); err != nil {
		return nil, err
	}
	f, err := d.openData(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, a.Perm)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	f.Chmod(a.Perm.Perm())
	return f, nil
}

// statFile is fs.stat (internal): it returns the attributes of rel (a
// symbolic link itself), checking that its parent is searchable.
func (d *Device) statFile(ctx context.Context, c *kernel.Caller, a *fsPathArgs) (vfs.Attr, error) {
	fi, err := d.lstatStep(ctx, c.Identity, a.Path)
	if err != nil {
		return vfs.Attr{}, err
	}
	return d.attrOf(ctx, a.Path, fi), nil
}

// readDir is fs.readdir (internal): it lists a directory the caller may
// read, with each entry's attributes.
func (d *Device) readDir(ctx context.Context, c *kernel.Caller, a *fsPathArgs) ([]DirEnt, error) {
	if _, err := d.access(ctx, c.Identity, a.Path, vfs.WantRead); err != nil {
		return nil, err
	}
	ents, err := d.readDirData(a.Path)
	if err != nil {
		return nil, abi.E(abi.Path("/"+a.Path), err)
	}
	out := make([]DirEnt, 0, len(ents))
	for _, fi := range ents {
		rel := a.Path + "/" + fi.Name()
		out = append(out, DirEnt{fi.Name(), d.attrOf(ctx, rel, fi)})
	}
	return out, nil
}

// openFile is fs.open (internal): it opens (or, with O_CREATE, creates) a
// data tree file as the caller, as open(2) does; O_APPEND is left to the
// transport, which sends the offsets.
func (d *Device) openFile(ctx context.Context, c *kernel.Caller, a *fsOpenArgs) (*os.File, error) {
	fi, err := d.accessStep(ctx, c.Identity, a.Path, vfs.WantOf(a.Flags))
	created := false
	switch {
	case err == nil:
		if a.Flags&os.O_CREATE != 0 && a.Flags&os.O_EXCL != 0 {
			return nil, abi.E(abi.Path("/"+a.Path), abi.Busy, syscall.EEXIST)
		}
		if fi.IsDir() && vfs.WantOf(a.Flags)&vfs.WantWrite != 0 {
			return nil, abi.E(abi.Path("/"+a.Path), abi.Invalid, syscall.EISDIR)
		}
	case a.Flags&os.O_CREATE != 0 && errors.Is(err, fs.ErrNotExist):
		if err := d.accessParent(ctx, c.Identity, a.Path); err != nil {
			return nil, err
		}
		created = true
	default:
		return nil, err
	}
	// O_APPEND is the transport's business: it sends the offsets, and
	// WriteAt refuses files opened for appending.
	f, err := d.openData(a.Path, a.Flags&^os.O_APPEND, a.Perm)
	if err != nil {
		return nil, abi.E(abi.Path("/"+a.Path), err)
	}
	if created {
		// The mode is the caller's (the transport applied its umask);
		// the daemon's own umask must not narrow it.
		f.Chmod(a.Perm.Perm())
	}
	return f, nil
}

// pread is fs.pread (internal): it reads from an open file at an offset;
// end of file is a short read, not an error.
func (d *Device) pread(ctx context.Context, c *kernel.Caller, a *fsIOArgs) (int, error) {
	n, err := a.F.ReadAt(a.Buf, a.Off)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// pwrite is fs.pwrite (internal): it writes to an open file at an offset.
func (d *Device) pwrite(ctx context.Context, c *kernel.Caller, a *fsIOArgs) (int, error) {
	return a.F.WriteAt(a.Buf, a.Off)
}

// mkdirFile is fs.mkdir (internal): it makes a directory in a directory the
// caller may write.
func (d *Device) mkdirFile(ctx context.Context, c *kernel.Caller, a *fsMkdirArgs) (vfs.Attr, error) {
	if err := d.accessParent(ctx, c.Identity, a.Path); err != nil {
		return vfs.Attr{}, err
	}
	if err := d.mkdirData(a.Path, a.Perm); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	fi, err := d.lstatData(a.Path)
	if err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	return d.attrOf(ctx, a.Path, fi), nil
}

// readlinkFile is fs.readlink (internal): it returns a symbolic link's
// target.
func (d *Device) readlinkFile(ctx context.Context, c *kernel.Caller, a *fsPathArgs) (string, error) {
	fi, err := d.lstatStep(ctx, c.Identity, a.Path)
	if err != nil {
		return "", err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", abi.E(abi.Path("/"+a.Path), abi.Invalid, syscall.EINVAL)
	}
	t, err := d.readlinkData(a.Path)
	if err != nil {
		return "", abi.E(abi.Path("/"+a.Path), err)
	}
	return t, nil
}

// symlinkFile is fs.symlink (internal): it makes a symbolic link; its
// target is data, never resolved by the daemon.
func (d *Device) symlinkFile(ctx context.Context, c *kernel.Caller, a *fsSymlinkArgs) (vfs.Attr, error) {
	if err := checkLinkTarget(a.Target); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	if err := d.accessParent(ctx, c.Identity, a.Path); err != nil {
		return vfs.Attr{}, err
	}
	if err := d.symlinkData(a.Target, a.Path); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	fi, err := d.lstatData(a.Path)
	if err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	return d.attrOf(ctx, a.Path, fi), nil
}

// linkFile is fs.link (internal): it makes a hard link within one owner's
// tree (only the owner, or who may read and write the file, links it, as
// Linux's protected_hardlinks).
func (d *Device) linkFile(ctx context.Context, c *kernel.Caller, a *fsRenameArgs) (vfs.Attr, error) {
	fi, err := d.reach(ctx, c.Identity, a.Old)
	if err != nil {
		return vfs.Attr{}, err
	}
	if fi.IsDir() {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Old), abi.Permission, syscall.EPERM)
	}
	if err := d.accessParent(ctx, c.Identity, a.New); err != nil {
		return vfs.Attr{}, err
	}
	o := d.ownerOf(ctx, a.Old)
	if o != d.ownerOf(ctx, a.New) {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.New), abi.Permission, syscall.EXDEV) // links stay within one owner's tree
	}
	// As Linux's protected_hardlinks: only the owner, or who may read
	// and write the file, links it.
	if !c.IsRoot() && c.Uid != o.uid && !allowed(c.Identity, o, fi.Mode(), vfs.WantRead|vfs.WantWrite) {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Old), abi.Permission, "permission denied")
	}
	if err := d.linkData(a.Old, a.New); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.New), err)
	}
	if fi, err = d.lstatData(a.New); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.New), err)
	}
	return d.attrOf(ctx, a.New, fi), nil
}

// setattr is fs.setattr (internal): it changes a file's mode (its owner
// only), size (who may write it) or modification time.
func (d *Device) setattr(ctx context.Context, c *kernel.Caller, a *fsSetattrArgs) (vfs.Attr, error) {
	fi, err := d.reach(ctx, c.Identity, a.Path)
	if err != nil {
		return vfs.Attr{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 && (a.Set.Mode != nil || a.Set.Size != nil) {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), syscall.EOPNOTSUPP)
	}
	o := d.ownerOf(ctx, a.Path)
	isOwner := c.IsRoot() || c.Uid == o.uid
	if a.Set.Mode != nil {
		if !isOwner {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), abi.Permission, "only the owner may change the mode")
		}
		if err := d.chmodData(a.Path, *a.Set.Mode); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
	}
	if a.Set.Size != nil {
		if !allowed(c.Identity, o, fi.Mode(), vfs.WantWrite) {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), abi.Permission, "permission denied")
		}
		f, err := d.openData(a.Path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		err = f.Truncate(*a.Set.Size)
		f.Close()
		if err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
	}
	if a.Set.Mtime != nil {
		if !isOwner && (fi.Mode()&fs.ModeSymlink != 0 || !allowed(c.Identity, o, fi.Mode(), vfs.WantWrite)) {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), abi.Permission, "permission denied")
		}
		if err := d.chtimesData(a.Path, *a.Set.Mtime); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
	}
	if fi, err = d.lstatData(a.Path); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	return d.attrOf(ctx, a.Path, fi), nil
}

// ftruncate is fs.ftruncate (internal): it truncates an open file.
func (d *Device) ftruncate(ctx context.Context, c *kernel.Caller, a *fsTruncArgs) (struct{}, error) {
	return struct{}{}, a.F.Truncate(a.Size)
}

// fsync is fs.fsync (internal): it flushes an open file to stable storage.
func (d *Device) fsync(ctx context.Context, c *kernel.Caller, a *fsTruncArgs) (struct{}, error) {
	return struct{}{}, a.F.Sync()
}

// removeFile is fs.remove (internal): it removes a file or link (a.Dir
// false) or an empty directory (a.Dir true) from a directory the caller may
// write.
func (d *Device) removeFile(ctx context.Context, c *kernel.Caller, a *fsRemoveArgs) (struct{}, error) {
	if err := d.accessParent(ctx, c.Identity, a.Path); err != nil {
		return struct{}{}, err
	}
	fi, err := d.lstatData(a.Path)
	if err != nil {
		return struct{}{}, abi.E(abi.Path("/"+a.Path), err)
	}
	if a.Dir && !fi.IsDir() {
		return struct{}{}, abi.E(abi.Path("/"+a.Path), syscall.ENOTDIR)
	}
	if !a.Dir && fi.IsDir() {
		return struct{}{}, abi.E(abi.Path("/"+a.Path), abi.Invalid, syscall.EISDIR)
	}
	if err := d.removeData(a.Path, fi.IsDir()); err != nil {
		return struct{}{}, abi.E(abi.Path("/"+a.Path), err)
	}
	return struct{}{}, nil
}

// renameFile is fs.rename (internal): it renames a file within one owner's
// tree, as rename(2) does.
func (d *Device) renameFile(ctx context.Context, c *kernel.Caller, a *fsRenameArgs) (struct{}, error) {
	if err := d.accessParent(ctx, c.Identity, a.Old); err != nil {
		return struct{}{}, err
	}
	if err := d.accessParent(ctx, c.Identity, a.New); err != nil {
		return struct{}{}, err
	}
	if d.ownerOf(ctx, a.Old) != d.ownerOf(ctx, a.New) && !c.IsRoot() {
		return struct{}{}, abi.E(abi.Path("/"+a.Old), abi.Permission, "cannot move a file into another user's tree")
	}
	if err := d.renameData(a.Old, a.New); err != nil {
		return struct{}{}, abi.E(abi.Path("/"+a.Old), err)
	}
	return struct{}{}, nil
}
