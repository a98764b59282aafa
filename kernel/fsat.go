package kernel

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
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
func (k *Kernel) atParent(rel string) (*os.File, string, error) {
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	f, err := k.openData(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
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
// daemon's umask).
func (k *Kernel) mkdirData(rel string, perm fs.FileMode) error {
	d, name, err := k.atParent(rel)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := retryEINTR(func() error { return unix.Mkdirat(int(d.Fd()), name, uint32(perm.Perm())) }); err != nil {
		return atErr("mkdir", rel, err)
	}
	return k.chmodData(rel, perm)
}

// chmodData sets rel's permission bits; rel must not be a symbolic link.
func (k *Kernel) chmodData(rel string, perm fs.FileMode) error {
	f, err := k.openData(rel, unix.O_PATH, 0)
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
func (k *Kernel) chtimesData(rel string, t time.Time) error {
	d, name, err := k.atParent(rel)
	if err != nil {
		return err
	}
	defer d.Close()
	ts := unix.NsecToTimespec(t.UnixNano())
	return atErr("chtimes", rel, retryEINTR(func() error {
		return unix.UtimesNanoAt(int(d.Fd()), name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}))
}

// removeData removes rel: a directory (which must be empty) if dir, else
// a file or a symbolic link.
func (k *Kernel) removeData(rel string, dir bool) error {
	d, name, err := k.atParent(rel)
	if err != nil {
		return err
	}
	defer d.Close()
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	return atErr("remove", rel, retryEINTR(func() error { return unix.Unlinkat(int(d.Fd()), name, flags) }))
}

// renameData renames old to new, replacing new as rename(2) does.
func (k *Kernel) renameData(old, new string) error {
	return k.atPair("rename", old, old, new, func(od int, oname string, nd int, nname string) error {
		return unix.Renameat(od, oname, nd, nname)
	})
}

// symlinkData makes rel a symbolic link to target.
func (k *Kernel) symlinkData(target, rel string) error {
	d, name, err := k.atParent(rel)
	if err != nil {
		return err
	}
	defer d.Close()
	return atErr("symlink", rel, retryEINTR(func() error { return unix.Symlinkat(target, int(d.Fd()), name) }))
}

// linkData makes new another name of old (a symbolic link itself, not its
// target, if old is one).
func (k *Kernel) linkData(old, new string) error {
	return k.atPair("link", new, old, new, func(od int, oname string, nd int, nname string) error {
		return unix.Linkat(od, oname, nd, nname, 0)
	})
}

// atPair opens the parents of old and new (as atParent) and runs the *at
// call fn on them and the last names, retrying on EINTR; fn's error is the
// error of op on rel.
func (k *Kernel) atPair(op, rel, old, new string, fn func(od int, oname string, nd int, nname string) error) error {
	od, oname, err := k.atParent(old)
	if err != nil {
		return err
	}
	defer od.Close()
	nd, nname, err := k.atParent(new)
	if err != nil {
		return err
	}
	defer nd.Close()
	return atErr(op, rel, retryEINTR(func() error { return fn(int(od.Fd()), oname, int(nd.Fd()), nname) }))
}

// readlinkData returns the target of the symbolic link rel.
func (k *Kernel) readlinkData(rel string) (string, error) {
	d, name, err := k.atParent(rel)
	if err != nil {
		return "", err
	}
	defer d.Close()
	buf := make([]byte, unix.PathMax)
	var n int
	err = retryEINTR(func() (err error) {
		n, err = unix.Readlinkat(int(d.Fd()), name, buf)
		return err
	})
	if err != nil {
		return "", atErr("readlink", rel, err)
	}
	return string(buf[:n]), nil
}

// readDirData lists the directory rel: each entry's lstat, in directory
// order. Entries that vanish while it lists are left out.
func (k *Kernel) readDirData(rel string) ([]fs.FileInfo, error) {
	f, err := k.openData(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
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

// openReadData opens rel for reading; a FIFO or device never blocks the
// open (O_NONBLOCK), and rel must be a regular file or a directory.
func (k *Kernel) openReadData(rel string) (*os.File, error) {
	f, err := k.openData(rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
		f.Close()
		if err == nil {
			err = unix.EINVAL
		}
		return nil, atErr("open", rel, err)
	}
	return f, nil
}

// readFileData returns the content of the regular file rel, up to max
// bytes (a longer file is an error).
func (k *Kernel) readFileData(rel string, max int64) ([]byte, error) {
	f, err := k.openReadData(rel)
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
