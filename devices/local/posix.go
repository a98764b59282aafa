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
	"gsvfs.dev/gsvfs/vfs"
)

// The args of the internal syscalls of the data tree (fs.stat, fs.open,
// ...), which its nodes make through the dispatcher: abi's (posix.go).
type (
	PathArgs    = abi.PathArgs
	OpenArgs    = abi.OpenArgs
	IOArgs      = abi.IOArgs
	MkdirArgs   = abi.MkdirArgs
	RemoveArgs  = abi.RemoveArgs
	RenameArgs  = abi.RenameArgs
	SymlinkArgs = abi.SymlinkArgs
	SetattrArgs = abi.SetattrArgs
	TruncArgs   = abi.TruncArgs
	DirEnt      = abi.DirEnt
)

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

// OpenRead is fs.openread (internal): it opens a data tree file the caller
// may read, for reading (a subsystem reads an archive with it).
func (d *Device) OpenRead(ctx context.Context, who Who, a *abi.FileArgs) (*os.File, error) {
	rel, err := resolve(who, a.Path)
	if err != nil {
		return nil, err
	}
	fi, err := d.access(ctx, who, rel, vfs.WantRead)
	if err != nil {
		return nil, err
	}
	if special(fi) {
		return nil, errSpecial(rel)
	}
	f, err := d.openFileData(rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return f, nil
}

// ReadRaw is fs.readraw (internal): it returns the content of a regular
// data tree file the caller may read, at most a.Max bytes (default 25 MiB);
// a FIFO, a device or a larger file is a 400, never a block.
func (d *Device) ReadRaw(ctx context.Context, who Who, a *abi.FileArgs) ([]byte, error) {
	rel, err := resolve(who, a.Path)
	if err != nil {
		return nil, err
	}
	fi, err := d.access(ctx, who, rel, vfs.WantRead)
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

// Create is fs.create (internal): it creates a new data tree file
// (O_EXCL) with mode a.Perm, making its missing parent directories, and
// returns it open for writing.
func (d *Device) Create(ctx context.Context, who Who, a *abi.FileArgs) (*os.File, error) {
	rel, err := resolve(who, a.Path)
	if err != nil {
		return nil, err
	}
	dirPerm := a.Perm.Perm() | (a.Perm.Perm()&0o444)>>2
	if err := d.mkdirAllMode(ctx, who, path.Dir(rel), dirPerm); err != nil {
		return nil, err
	}
	if err := d.accessParent(ctx, who, rel); err != nil {
		return nil, err
	}
	f, err := d.openData(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, a.Perm)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	if err := d.chmodCreated(ctx, f, rel, a.Perm); err != nil {
		return nil, err
	}
	return f, nil
}

// Stat is fs.stat (internal): it returns the attributes of rel (a
// symbolic link itself), checking that its parent is searchable.
func (d *Device) Stat(ctx context.Context, who Who, a *PathArgs) (vfs.Attr, error) {
	fi, err := d.lstatStep(ctx, who, a.Path)
	if err != nil {
		return vfs.Attr{}, err
	}
	return d.attrOf(ctx, a.Path, fi), nil
}

// ReadDir is fs.readdir (internal): it lists a directory the caller may
// read, with each entry's attributes.
func (d *Device) ReadDir(ctx context.Context, who Who, a *PathArgs) ([]DirEnt, error) {
	if _, err := d.access(ctx, who, a.Path, vfs.WantRead); err != nil {
		return nil, err
	}
	ents, err := d.readDirData(a.Path)
	if err != nil {
		return nil, abi.E(abi.Path("/"+a.Path), err)
	}
	out := make([]DirEnt, 0, len(ents))
	for _, fi := range ents {
		rel := a.Path + "/" + fi.Name()
		out = append(out, DirEnt{Name: fi.Name(), Attr: abi.Attr(d.attrOf(ctx, rel, fi))})
	}
	return out, nil
}

// Open is fs.open (internal): it opens (or, with O_CREATE, creates) a
// data tree file as the caller, as open(2) does; O_APPEND is left to the
// transport, which sends the offsets.
func (d *Device) Open(ctx context.Context, who Who, a *OpenArgs) (*os.File, error) {
	fi, err := d.accessStep(ctx, who, a.Path, vfs.WantOf(a.Flags))
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
		if err := d.accessParent(ctx, who, a.Path); err != nil {
			return nil, err
		}
		created = true
	default:
		return nil, err
	}
	if fi != nil && special(fi) {
		return nil, errSpecial(a.Path) // never opened: a FIFO's open would wait for a peer
	}
	// O_APPEND is the transport's business: it sends the offsets, and
	// WriteAt refuses files opened for appending. The open never blocks
	// and is only of a regular file or a directory (openFileData), should
	// the file have changed since the check.
	f, err := d.openFileData(a.Path, a.Flags&^os.O_APPEND, a.Perm)
	if err != nil {
		return nil, abi.E(abi.Path("/"+a.Path), err)
	}
	if a.Flags&os.O_TRUNC != 0 && fi != nil && fi.Mode().IsRegular() {
		d.creditHome(a.Path, fi.Size()) // emptied: its bytes leave the home's count
	}
	if created {
		// The mode is the caller's (the transport applied its umask);
		// the daemon's own umask must not narrow it.
		if err := d.chmodCreated(ctx, f, a.Path, a.Perm); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Pread is fs.pread (internal): it reads from an open file at an offset;
// end of file is a short read, not an error.
func (d *Device) Pread(ctx context.Context, who Who, a *IOArgs) (int, error) {
	n, err := a.F.ReadAt(a.Buf, a.Off)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// Pwrite is fs.pwrite (internal): it writes to an open file at an
// offset. A write that would take a home over its quota fails whole with
// EDQUOT.
func (d *Device) Pwrite(ctx context.Context, who Who, a *IOArgs) (int, error) {
	if err := d.chargeHome(ctx, a.Rel, func() int64 {
		return max(a.Off+int64(len(a.Buf))-fileSize(a.F), 0)
	}); err != nil {
		return 0, err
	}
	n, err := a.F.WriteAt(a.Buf, a.Off)
	if err != nil {
		d.staleHome(homeUser(a.Rel), false) // counted, perhaps not written
	}
	return n, err
}

// Mkdir is fs.mkdir (internal): it makes a directory in a directory the
// caller may write.
func (d *Device) Mkdir(ctx context.Context, who Who, a *MkdirArgs) (vfs.Attr, error) {
	if err := d.accessParent(ctx, who, a.Path); err != nil {
		return vfs.Attr{}, err
	}
	if err := d.mkdirData(ctx, a.Path, a.Perm); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	fi, err := d.lstatData(a.Path)
	if err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	return d.attrOf(ctx, a.Path, fi), nil
}

// Readlink is fs.readlink (internal): it returns a symbolic link's
// target.
func (d *Device) Readlink(ctx context.Context, who Who, a *PathArgs) (string, error) {
	fi, err := d.lstatStep(ctx, who, a.Path)
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

// Symlink is fs.symlink (internal): it makes a symbolic link; its
// target is data, never resolved by the daemon.
func (d *Device) Symlink(ctx context.Context, who Who, a *SymlinkArgs) (vfs.Attr, error) {
	if err := checkLinkTarget(a.Target); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	if err := d.accessParent(ctx, who, a.Path); err != nil {
		return vfs.Attr{}, err
	}
	if err := d.symlinkData(ctx, a.Target, a.Path); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	fi, err := d.lstatData(a.Path)
	if err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
	}
	return d.attrOf(ctx, a.Path, fi), nil
}

// Link is fs.link (internal): it makes a hard link within one owner's
// tree (only the owner, or who may read and write the file, links it, as
// Linux's protected_hardlinks).
func (d *Device) Link(ctx context.Context, who Who, a *RenameArgs) (vfs.Attr, error) {
	fi, err := d.reach(ctx, who, a.Old)
	if err != nil {
		return vfs.Attr{}, err
	}
	if fi.IsDir() {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Old), abi.Permission, syscall.EPERM)
	}
	if err := d.accessParent(ctx, who, a.New); err != nil {
		return vfs.Attr{}, err
	}
	o := d.ownerOf(ctx, a.Old)
	if o != d.ownerOf(ctx, a.New) {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.New), abi.Permission, syscall.EXDEV) // links stay within one owner's tree
	}
	// As Linux's protected_hardlinks: only the owner, or who may read
	// and write the file, links it.
	if !who.IsRoot() && who.Uid != o.Uid && !allowed(who, o, fi.Mode(), vfs.WantRead|vfs.WantWrite) {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Old), abi.Permission, "permission denied")
	}
	if fi.Mode().IsRegular() {
		if err := d.chargeHome(ctx, a.New, func() int64 { return fi.Size() }); err != nil {
			return vfs.Attr{}, err
		}
	}
	if err := d.linkData(a.Old, a.New); err != nil {
		if fi.Mode().IsRegular() {
			d.creditHome(a.New, fi.Size())
		}
		return vfs.Attr{}, abi.E(abi.Path("/"+a.New), err)
	}
	if fi, err = d.lstatData(a.New); err != nil {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.New), err)
	}
	return d.attrOf(ctx, a.New, fi), nil
}

// Setattr is fs.setattr (internal): it changes a file's mode (its owner
// only), size (who may write it) or modification time.
func (d *Device) Setattr(ctx context.Context, who Who, a *SetattrArgs) (vfs.Attr, error) {
	fi, err := d.reach(ctx, who, a.Path)
	if err != nil {
		return vfs.Attr{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 && (a.Set.Mode != nil || a.Set.Size != nil) {
		return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), syscall.EOPNOTSUPP)
	}
	o := d.ownerOf(ctx, a.Path)
	isOwner := who.IsRoot() || who.Uid == o.Uid
	if a.Set.Mode != nil {
		if !isOwner {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), abi.Permission, "only the owner may change the mode")
		}
		if err := d.chmodData(a.Path, *a.Set.Mode); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
	}
	if a.Set.Size != nil {
		if !allowed(who, o, fi.Mode(), vfs.WantWrite) {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), abi.Permission, "permission denied")
		}
		if special(fi) {
			return vfs.Attr{}, errSpecial(a.Path)
		}
		f, err := d.openFileData(a.Path, os.O_WRONLY, 0)
		if err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		if err := d.chargeHome(ctx, a.Path, func() int64 { return *a.Set.Size - fileSize(f) }); err != nil {
			f.Close()
			return vfs.Attr{}, err
		}
		err = f.Truncate(*a.Set.Size)
		f.Close()
		if err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
	}
	if a.Set.Mtime != nil {
		if !isOwner && (fi.Mode()&fs.ModeSymlink != 0 || !allowed(who, o, fi.Mode(), vfs.WantWrite)) {
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

// Ftruncate is fs.ftruncate (internal): it truncates an open file (a
// size that would take a home over its quota is EDQUOT).
func (d *Device) Ftruncate(ctx context.Context, who Who, a *TruncArgs) (struct{}, error) {
	if err := d.chargeHome(ctx, a.Rel, func() int64 { return a.Size - fileSize(a.F) }); err != nil {
		return struct{}{}, err
	}
	return struct{}{}, a.F.Truncate(a.Size)
}

// Fsync is fs.fsync (internal): it flushes an open file to stable storage.
func (d *Device) Fsync(ctx context.Context, who Who, a *TruncArgs) (struct{}, error) {
	return struct{}{}, a.F.Sync()
}

// Remove is fs.remove (internal): it removes a file or link (a.Dir
// false) or an empty directory (a.Dir true) from a directory the caller may
// write.
func (d *Device) Remove(ctx context.Context, who Who, a *RemoveArgs) (struct{}, error) {
	if err := d.accessParent(ctx, who, a.Path); err != nil {
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
	if fi.Mode().IsRegular() {
		d.creditHome(a.Path, fi.Size())
	}
	return struct{}{}, nil
}

// Rename is fs.rename (internal): it renames a file within one owner's
// tree, as rename(2) does; root may move a file into another owner's
// tree, which gives it (and all beneath it) that owner's disk ids.
func (d *Device) Rename(ctx context.Context, who Who, a *RenameArgs) (struct{}, error) {
	if err := d.accessParent(ctx, who, a.Old); err != nil {
		return struct{}{}, err
	}
	if err := d.accessParent(ctx, who, a.New); err != nil {
		return struct{}{}, err
	}
	across := d.ownerOf(ctx, a.Old) != d.ownerOf(ctx, a.New)
	if across && !who.IsRoot() {
		return struct{}{}, abi.E(abi.Path("/"+a.Old), abi.Permission, "cannot move a file into another user's tree")
	}
	// What the homes' quotas count: a file replaced at New goes; a file
	// moved between homes (root's) leaves one and enters the other.
	var moved, replaced int64
	if fi, err := d.lstatData(a.Old); err == nil && fi.Mode().IsRegular() && homeUser(a.Old) != homeUser(a.New) {
		moved = fi.Size()
	}
	if fi, err := d.lstatData(a.New); err == nil && fi.Mode().IsRegular() {
		replaced = fi.Size()
	}
	if moved > 0 {
		if err := d.chargeHome(ctx, a.New, func() int64 { return moved - replaced }); err != nil {
			return struct{}{}, err
		}
	}
	if err := d.renameData(a.Old, a.New); err != nil {
		if moved > 0 {
			d.creditHome(a.New, moved-replaced)
		}
		return struct{}{}, abi.E(abi.Path("/"+a.Old), err)
	}
	if across || isOwnersRoot(a.Old) || isOwnersRoot(a.New) {
		if err := d.reownTree(ctx, a.New); err != nil {
			return struct{}{}, abi.E(abi.Path("/"+a.New), err)
		}
	}
	if moved > 0 {
		d.creditHome(a.Old, moved)
	} else {
		d.creditHome(a.New, replaced)
	}
	return struct{}{}, nil
}

// isOwnersRoot says whether rel is a directory whose entries belong to
// different owners (/home, /var/sessions) or the top of one owner's tree
// (/home/<user>, /var/sessions/<user>): a rename of one changes the
// owners of what it holds.
func isOwnersRoot(rel string) bool {
	switch parts := strings.Split(rel, "/"); {
	case parts[0] == "home":
		return len(parts) <= 2
	case len(parts) >= 2 && parts[0] == "var" && parts[1] == "sessions":
		return len(parts) <= 3
	}
	return false
}

// chmodCreated gives f, just created at rel, its owner's disk ids and the
// mode perm (which the daemon's umask may have narrowed); on failure it
// closes and removes the file and returns the error.
func (d *Device) chmodCreated(ctx context.Context, f *os.File, rel string, perm fs.FileMode) error {
	err := d.ownFile(ctx, f, rel)
	if err == nil {
		err = f.Chmod(perm.Perm())
	}
	if err != nil {
		f.Close()
		d.removeData(rel, false)
		return abi.E(abi.Path("/"+rel), err)
	}
	return nil
}
