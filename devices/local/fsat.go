package local

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"gsvfs.dev/gsvfs/abi"
)

// The daemon's own file operations on the data tree follow no symbolic
// link, anywhere in a path: users make links, and a link swapped in for a
// directory between a permission check and the operation must not carry
// the daemon (root) into another user's files. Each operation opens the
// parent directory with openData (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS) and acts on the last name with a *at(2) call, which
// never follows it.

// atParent opens rel's parent directory beneath the data root, following
// no symbolic link, and returns it with rel's last name.
func (d *Device) atParent(rel string) (*os.File, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	f, err := d.openData(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", err
	}
	return f, name, nil
}

// atErr is the error of the *at call op on rel.
func atErr(op, rel string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: rel, Err: err}
}

// retryEINTR runs fn until it does not fail with EINTR.
func retryEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// mkdirData makes the directory rel with mode perm (not narrowed by the
// daemon's umask), owned by its owner's disk ids.
func (d *Device) mkdirData(ctx context.Context, rel string, perm fs.FileMode) error {
	pd, name, err := d.atParent(rel)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := retryEINTR(func() error { return unix.Mkdirat(int(pd.Fd()), name, uint32(perm.Perm())) }); err != nil {
		return atErr("mkdir", rel, err)
	}
	if err := d.ownAt(ctx, int(pd.Fd()), name, rel); err != nil {
		unix.Unlinkat(int(pd.Fd()), name, unix.AT_REMOVEDIR)
		return err
	}
	return d.chmodData(rel, perm)
}

// chmodData sets rel's permission bits; rel must not be a symbolic link.
func (d *Device) chmodData(rel string, perm fs.FileMode) error {
	f, err := d.openData(rel, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return atErr("chmod", rel, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return atErr("chmod", rel, unix.ELOOP)
	}
	// An O_PATH descriptor has no fchmod; its /proc/self/fd entry names
	// exactly the file it was opened on.
	proc := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	return atErr("chmod", rel, retryEINTR(func() error { return unix.Fchmodat(unix.AT_FDCWD, proc, uint32(perm.Perm()), 0) }))
}

// chtimesData sets rel's access and modification times to t.
func (d *Device) chtimesData(rel string, t time.Time) error {
	pd, name, err := d.atParent(rel)
	if err != nil {
		return err
	}
	defer pd.Close()
	ts := unix.NsecToTimespec(t.UnixNano())
	return atErr("chtimes", rel, retryEINTR(func() error {
		return unix.UtimesNanoAt(int(pd.Fd()), name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}))
}

// removeData removes rel: a directory (which must be empty) if dir, else
// a file or a symbolic link.
func (d *Device) removeData(rel string, dir bool) error {
	pd, name, err := d.atParent(rel)
	if err != nil {
		return err
	}
	defer pd.Close()
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	return atErr("remove", rel, retryEINTR(func() error { return unix.Unlinkat(int(pd.Fd()), name, flags) }))
}

// renameData renames old to new, replacing new as rename(2) does.
func (d *Device) renameData(old, new string) error {
	return d.atPair("rename", old, old, new, func(od int, oname string, nd int, nname string) error {
		return unix.Renameat(od, oname, nd, nname)
	})
}

// symlinkData makes rel a symbolic link to target, owned by its owner's
// disk ids.
func (d *Device) symlinkData(ctx context.Context, target, rel string) error {
	pd, name, err := d.atParent(rel)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := retryEINTR(func() error { return unix.Symlinkat(target, int(pd.Fd()), name) }); err != nil {
		return atErr("symlink", rel, err)
	}
	if err := d.ownAt(ctx, int(pd.Fd()), name, rel); err != nil {
		unix.Unlinkat(int(pd.Fd()), name, 0)
		return err
	}
	return nil
}

// linkData makes new another name of old (a symbolic link itself, not its
// target, if old is one).
func (d *Device) linkData(old, new string) error {
	return d.atPair("link", new, old, new, func(od int, oname string, nd int, nname string) error {
		return unix.Linkat(od, oname, nd, nname, 0)
	})
}

// atPair opens the parents of old and new (as atParent) and runs the *at
// call fn on them and the last names, retrying on EINTR; fn's error is the
// error of op on rel.
func (d *Device) atPair(op, rel, old, new string, fn func(od int, oname string, nd int, nname string) error) error {
	od, oname, err := d.atParent(old)
	if err != nil {
		return err
	}
	defer od.Close()
	nd, nname, err := d.atParent(new)
	if err != nil {
		return err
	}
	defer nd.Close()
	return atErr(op, rel, retryEINTR(func() error { return fn(int(od.Fd()), oname, int(nd.Fd()), nname) }))
}

// readlinkData returns the target of the symbolic link rel.
func (d *Device) readlinkData(rel string) (string, error) {
	pd, name, err := d.atParent(rel)
	if err != nil {
		return "", err
	}
	defer pd.Close()
	buf := make([]byte, unix.PathMax)
	var n int
	err = retryEINTR(func() (err error) {
		n, err = unix.Readlinkat(int(pd.Fd()), name, buf)
		return err
	})
	if err != nil {
		return "", atErr("readlink", rel, err)
	}
	return string(buf[:n]), nil
}

// readDirData lists the directory rel: each entry's lstat, in directory
// order. Entries that vanish while it lists are left out.
func (d *Device) readDirData(rel string) ([]fs.FileInfo, error) {
	f, err := d.openData(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, atErr("readdir", rel, err)
	}
	out := make([]fs.FileInfo, 0, len(names))
	for _, name := range names {
		var st unix.Stat_t
		err := retryEINTR(func() error { return unix.Fstatat(int(f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) })
		if err != nil {
			continue
		}
		out = append(out, &statInfo{name: name, st: st})
	}
	return out, nil
}

// openReadData opens rel for reading (see openFileData).
func (d *Device) openReadData(rel string) (*os.File, error) {
	return d.openFileData(rel, unix.O_RDONLY, 0)
}

// openFileData opens rel as openData does, to read or write its content,
// without ever blocking: with O_NONBLOCK, so that a FIFO opens at once
// (or is ENXIO) and a file lease is EWOULDBLOCK rather than a wait, and
// only if it is a regular file or a directory; any other kind (a FIFO, a
// socket, a device node) is closed unread and is ENXIO. O_NONBLOCK stays
// on the descriptor, where a regular file ignores it.
func (d *Device) openFileData(rel string, flags int, perm fs.FileMode) (*os.File, error) {
	f, err := d.openData(rel, flags|unix.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		err = unix.ENXIO
	}
	if err != nil {
		f.Close()
		return nil, atErr("open", rel, err)
	}
	return f, nil
}

// special says whether fi is a file the daemon never opens: neither a
// regular file, a directory nor a symbolic link (a FIFO, a socket, a
// device node).
func special(fi fs.FileInfo) bool {
	return !fi.Mode().IsRegular() && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0
}

// errSpecial is the error of an open of a special file.
func errSpecial(rel string) error {
	return abi.E(abi.Path("/"+rel), abi.Invalid,
		fmt.Errorf("a FIFO, socket or device node is not opened through the namespace: %w", unix.ENXIO))
}

// readFileData returns the content of the regular file rel, up to max
// bytes (a longer file is an error).
func (d *Device) readFileData(rel string, max int64) ([]byte, error) {
	f, err := d.openReadData(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, atErr("read", rel, err)
	}
	if int64(len(b)) > max {
		return nil, abi.E(abi.Path("/"+rel), abi.Invalid, fmt.Sprintf("file is larger than %d bytes", max))
	}
	return b, nil
}

// then fstat. A link in the middle of rel is ELOOP.
func (d *Device) lstatData(rel string) (fs.FileInfo, error) {
	// A raw descriptor: an *os.File costs more than the stat itself.
	fd, err := d.openPath(rel)
	if err == unix.ENOSYS {
		return d.data.Lstat(rel) // no openat2: the os.Root's own walk
	}
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := retryEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return &statInfo{name: path.Base(rel), st: st}, nil
}

// lstatPair stats rel's parent directory and rel itself (a final symlink
// itself), following no symbolic link, with one path resolution: the
// parent is opened O_PATH with RESOLVE_NO_SYMLINKS and rel's last name is
// stat-ed relative to it. dir is nil if the parent could not be stat-ed;
// otherwise err concerns rel (or says that dir is not a directory).
func (d *Device) lstatPair(rel string) (dir, fi fs.FileInfo, err error) {
	i := strings.LastIndexByte(rel, '/')
	parent, name := rel[:i], rel[i+1:]
	fd, err := d.openPath(parent)
	if err == unix.ENOSYS { // no openat2: the os.Root's own walks
		if dir, err = d.data.Lstat(parent); err != nil {
			return nil, nil, err
		}
		fi, err = d.data.Lstat(rel)
		return dir, fi, err
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "lstat", Path: parent, Err: err}
	}
	defer unix.Close(fd)
	var pst, st unix.Stat_t
	if err := retryEINTR(func() error { return unix.Fstat(fd, &pst) }); err != nil {
		return nil, nil, &fs.PathError{Op: "lstat", Path: parent, Err: err}
	}
	dir = &statInfo{name: path.Base(parent), st: pst}
	if !dir.IsDir() {
		return dir, nil, &fs.PathError{Op: "lstat", Path: rel, Err: unix.ENOTDIR}
	}
	if err := retryEINTR(func() error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		return dir, nil, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return dir, &statInfo{name: name, st: st}, nil
}

// openPath opens rel (a final symlink itself) with O_PATH beneath the data
// root, following no symbolic link, and returns the raw descriptor. It is
// ENOSYS where there is no openat2 (or no descriptor of the data root):
// the caller then walks with the os.Root.
func (d *Device) openPath(rel string) (int, error) {
	if d.dataFD == nil {
		return -1, unix.ENOSYS
	}
	for {
		fd, err := unix.Openat2(int(d.dataFD.Fd()), rel, &unix.OpenHow{
			Flags:   uint64(unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
		})
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// statInfo is an fs.FileInfo from a stat(2) result.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &syscall.Stat_t{Ino: s.st.Ino, Nlink: s.st.Nlink} }
func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFREG:
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	default:
		m |= fs.ModeIrregular
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// openData opens rel beneath the data root without following any symbolic
// link: one openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) where the kernel
// has it, the os.Root otherwise.
func (d *Device) openData(rel string, flags int, perm fs.FileMode) (*os.File, error) {
	if d.dataFD != nil {
		fd, err := unix.Openat2(int(d.dataFD.Fd()), rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
			Mode:    uint64(perm.Perm()),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
		})
		if err == nil {
			return os.NewFile(uintptr(fd), d.dataPath+"/"+rel), nil
		}
		if err != unix.ENOSYS {
			return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
		}
	}
	return d.data.OpenFile(rel, flags|syscall.O_NOFOLLOW, perm.Perm())
}

// accessParent checks write and search permission on rel's parent, as
