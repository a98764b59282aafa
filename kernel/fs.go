package kernel

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The data tree: /home and /workspaces are real directories under the
// state dir. Ownership follows the tree: everything under /home/<user> is
// owned by <user> (group: the user's primary group); the permission bits are
// the real files' own. /home and /workspaces themselves belong to root.

// dataRoots are the top-level namespace directories backed by real files.
var dataRoots = []string{"home", "workspaces", "var/sessions"}

// tmpDir, beside the data roots and outside the namespace, holds the
// temporary files of atomic writes; the kernel empties it at start.
const tmpDir = ".tmp"

// resolve validates a namespace path for id and returns it relative to the
// data root ("home/alice/notes.txt"). It resolves "~" and relative paths
// against id's home and cwd, and refuses "..", NUL bytes, invalid UTF-8 and
// anything outside the data tree.
func resolve(id *Identity, p string) (string, error) {
	if p == "" {
		return "", abi.E(abi.Invalid, "empty path")
	}
	if !utf8.ValidString(p) {
		return "", abi.E(abi.Invalid, "path is not valid UTF-8")
	}
	if strings.ContainsRune(p, 0) {
		return "", abi.E(abi.Invalid, "path contains a NUL byte")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", abi.E(abi.Invalid, abi.Path(p), "paths may not contain '..'")
		}
	}
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		p = id.Home + p[1:]
	case !strings.HasPrefix(p, "/"):
		p = path.Join(id.Cwd, p)
	}
	p = path.Clean(p)
	rel := strings.TrimPrefix(p, "/")
	for _, r := range dataRoots {
		if rel == r || strings.HasPrefix(rel, r+"/") {
			return rel, nil
		}
	}
	return "", abi.E(abi.NotExist, abi.Path(p), "not in the data tree (/home, /workspaces, /var/sessions)")
}

// owner is who owns a data path.
type owner struct {
	uid, gid uint32
	hostUID  int
	name     string
	group    string
}

var rootOwner = owner{uid: 0, gid: 0, hostUID: 0, name: "root", group: "root"}

// ownerCache maps user names to owners; users are never renamed.
type ownerCache struct {
	mu sync.Mutex
	m  map[string]owner
}

func (k *Kernel) ownerOf(ctx context.Context, rel string) owner {
	var name string
	if parts := strings.SplitN(rel, "/", 3); len(parts) >= 2 && parts[0] == "home" {
		name = parts[1]
	} else if parts := strings.SplitN(rel, "/", 4); len(parts) >= 3 && parts[0] == "var" && parts[1] == "sessions" {
		name = parts[2] // /var/sessions/<user>/... belongs to <user>
	} else {
		return rootOwner
	}
	k.owners.mu.Lock()
	o, ok := k.owners.m[name]
	k.owners.mu.Unlock()
	if ok {
		return o
	}
	u, err := k.userByName(ctx, name)
	if err != nil {
		return rootOwner
	}
	o = owner{uid: u.Uid, gid: u.Gid, hostUID: int(u.Uid), name: u.Username, group: UsersGroup}
	if u.HostUID != nil {
		o.hostUID = *u.HostUID
	}
	if u.Gid == RootGID {
		o.group = "root"
	}
	k.owners.mu.Lock()
	if k.owners.m == nil {
		k.owners.m = map[string]owner{}
	}
	k.owners.m[name] = o
	k.owners.mu.Unlock()
	return o
}

// allowed reports whether id may access a file with mode and owner o.
func allowed(id *Identity, o owner, mode fs.FileMode, want vfs.Want) bool {
	return id.Allowed(o.uid, o.gid, mode, uint32(want))
}

// access checks that id may search every directory above rel and use rel
// itself as want says (want 0: only reach it). It returns rel's FileInfo.
func (k *Kernel) access(ctx context.Context, id *Identity, rel string, want vfs.Want) (fs.FileInfo, error) {
	if err := k.searchAbove(ctx, id, rel); err != nil {
		return nil, err
	}
	return k.usable(ctx, id, rel, want)
}

// searchAbove checks that id may search every directory above rel.
func (k *Kernel) searchAbove(ctx context.Context, id *Identity, rel string) error {
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			if err := k.searchable(ctx, id, rel[:i], rel); err != nil {
				return err
			}
		}
	}
	return nil
}

// accessStep is access for a path walked one name at a time, as the
// transports walk: the directories above rel's parent were checked when
// they were walked, so only the parent's search permission and rel itself
// are checked (POSIX path walk semantics; an open node, like an open file
// descriptor, keeps working if an ancestor's mode changes later).
func (k *Kernel) accessStep(ctx context.Context, id *Identity, rel string, want vfs.Want) (fs.FileInfo, error) {
	fi, err := k.lstatStep(ctx, id, rel)
	if err != nil {
		return nil, err
	}
	return k.usableInfo(ctx, id, rel, want, fi)
}

// lstatStep is accessStep for a name that may be a symbolic link (stat
// and readlink, which never follow it): it checks that rel's parent is
// searchable and returns rel's own FileInfo.
func (k *Kernel) lstatStep(ctx context.Context, id *Identity, rel string) (fs.FileInfo, error) {
	i := strings.LastIndexByte(rel, '/')
	if i <= 0 {
		fi, err := k.lstatData(rel)
		if err != nil {
			return nil, abi.E(abi.Path("/"+rel), err)
		}
		return fi, nil
	}
	dir, fi, err := k.lstatPair(rel)
	if dir == nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	// The parent's search permission comes before any error about rel.
	if serr := k.searchableInfo(ctx, id, rel[:i], rel, dir); serr != nil {
		return nil, serr
	}
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return fi, nil
}

// reach is access with want 0 for a name that may be a symbolic link: it
// checks that every directory above rel is searchable and returns rel's
// own FileInfo.
func (k *Kernel) reach(ctx context.Context, id *Identity, rel string) (fs.FileInfo, error) {
	if err := k.searchAbove(ctx, id, rel); err != nil {
		return nil, err
	}
	fi, err := k.lstatData(rel)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return fi, nil
}

// searchable checks that dir, above rel, is a directory id may search.
func (k *Kernel) searchable(ctx context.Context, id *Identity, dir, rel string) error {
	fi, err := k.lstatData(dir)
	if err != nil {
		return abi.E(abi.Path("/"+rel), err)
	}
	return k.searchableInfo(ctx, id, dir, rel, fi)
}

// searchableInfo is searchable with dir's FileInfo at hand.
func (k *Kernel) searchableInfo(ctx context.Context, id *Identity, dir, rel string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return abi.E(abi.Path("/"+rel), syscall.ENOTDIR)
	}
	if !allowed(id, k.ownerOf(ctx, dir), fi.Mode(), vfs.WantExec) {
		return abi.E(abi.Path("/"+rel), abi.Permission, "permission denied")
	}
	return nil
}

// usable stats rel, refuses a symbolic link, and checks want against its
// mode and owner.
func (k *Kernel) usable(ctx context.Context, id *Identity, rel string, want vfs.Want) (fs.FileInfo, error) {
	fi, err := k.lstatData(rel)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return k.usableInfo(ctx, id, rel, want, fi)
}

// usableInfo is usable with rel's FileInfo at hand.
func (k *Kernel) usableInfo(ctx context.Context, id *Identity, rel string, want vfs.Want, fi fs.FileInfo) (fs.FileInfo, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, abi.E(abi.Path("/"+rel), abi.Permission, "symbolic links are not followed")
	}
	if want != 0 && !allowed(id, k.ownerOf(ctx, rel), fi.Mode(), want) {
		return nil, abi.E(abi.Path("/"+rel), abi.Permission, "permission denied")
	}
	return fi, nil
}

// lstatData stats rel (a final symlink itself, not its target) beneath
// the data root, following no symbolic link on the way: an O_PATH openat2
// with RESOLVE_NO_SYMLINKS (which yields the link itself for a final one),
// then fstat. A link in the middle of rel is ELOOP.
func (k *Kernel) lstatData(rel string) (fs.FileInfo, error) {
	// A raw descriptor: an *os.File costs more than the stat itself.
	fd, err := k.openPath(rel)
	if err == unix.ENOSYS {
		return k.data.Lstat(rel) // no openat2: the os.Root's own walk
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
func (k *Kernel) lstatPair(rel string) (dir, fi fs.FileInfo, err error) {
	i := strings.LastIndexByte(rel, '/')
	parent, name := rel[:i], rel[i+1:]
	fd, err := k.openPath(parent)
	if err == unix.ENOSYS { // no openat2: the os.Root's own walks
		if dir, err = k.data.Lstat(parent); err != nil {
			return nil, nil, err
		}
		fi, err = k.data.Lstat(rel)
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
func (k *Kernel) openPath(rel string) (int, error) {
	if k.dataFD == nil {
		return -1, unix.ENOSYS
	}
	for {
		fd, err := unix.Openat2(int(k.dataFD.Fd()), rel, &unix.OpenHow{
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
func (k *Kernel) openData(rel string, flags int, perm fs.FileMode) (*os.File, error) {
	if k.dataFD != nil {
		fd, err := unix.Openat2(int(k.dataFD.Fd()), rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
			Mode:    uint64(perm.Perm()),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
		})
		if err == nil {
			return os.NewFile(uintptr(fd), k.dataPath+"/"+rel), nil
		}
		if err != unix.ENOSYS {
			return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
		}
	}
	return k.data.OpenFile(rel, flags|syscall.O_NOFOLLOW, perm.Perm())
}

// accessParent checks write and search permission on rel's parent, as
// creating, removing or renaming rel needs.
func (k *Kernel) accessParent(ctx context.Context, id *Identity, rel string) error {
	parent := path.Dir(rel)
	if parent == "." || !strings.Contains(rel, "/") {
		if id.IsRoot() {
			return nil
		}
		return abi.E(abi.Path("/"+rel), abi.Permission, "permission denied")
	}
	fi, err := k.access(ctx, id, parent, vfs.WantWrite|vfs.WantExec)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return abi.E(abi.Path("/"+rel), abi.NotExist, syscall.ENOTDIR)
	}
	return nil
}

// attrOf turns a real file's info into a vfs.Attr.
func (k *Kernel) attrOf(ctx context.Context, rel string, fi fs.FileInfo) vfs.Attr {
	o := k.ownerOf(ctx, rel)
	a := vfs.Attr{Mode: fi.Mode(), Size: fi.Size(), Mtime: fi.ModTime(),
		Uid: uint32(o.hostUID), Gid: o.gid, User: o.name, Group: o.group}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		a.Ino = st.Ino
		a.Nlink = uint32(st.Nlink)
	}
	if fi.IsDir() {
		a.Size = 0
	}
	return a
}

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

func (k *Kernel) registerFS() {
	k.registerPosixFS()
	k.registerSeedFS()
	k.registerFileIO()
}

// FileArgs names a file of the data tree by its namespace path, for the
// Internal syscalls fs.openread, fs.create and fs.readraw that subsystems
// use to read and write real files (archives, context files) through the
// dispatcher.
type FileArgs struct {
	Path string
	// Perm is the mode of a file fs.create makes; its missing parent
	// directories get Perm with search bits added.
	Perm fs.FileMode
	// Max, if positive, is the largest file fs.readraw returns (else 25
	// MiB); a larger file is a 400.
	Max int64
}

// registerFileIO registers the Internal file syscalls for subsystems.
func (k *Kernel) registerFileIO() {
	Handle(k, "fs.openread", Internal, func(ctx context.Context, c *Caller, a *FileArgs) (*os.File, error) {
		rel, err := resolve(c.Identity, a.Path)
		if err != nil {
			return nil, err
		}
		if _, err := k.access(ctx, c.Identity, rel, vfs.WantRead); err != nil {
			return nil, err
		}
		f, err := k.openData(rel, os.O_RDONLY, 0)
		if err != nil {
			return nil, abi.E(abi.Path("/"+rel), err)
		}
		return f, nil
	})
	Handle(k, "fs.readraw", Internal, func(ctx context.Context, c *Caller, a *FileArgs) ([]byte, error) {
		rel, err := resolve(c.Identity, a.Path)
		if err != nil {
			return nil, err
		}
		fi, err := k.access(ctx, c.Identity, rel, vfs.WantRead)
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
		b, err := k.readFileData(rel, limit)
		if err != nil {
			return nil, abi.E(abi.Path("/"+rel), err)
		}
		return b, nil
	})
	Handle(k, "fs.create", Internal, func(ctx context.Context, c *Caller, a *FileArgs) (*os.File, error) {
		rel, err := resolve(c.Identity, a.Path)
		if err != nil {
			return nil, err
		}
		dirPerm := a.Perm.Perm() | (a.Perm.Perm()&0o444)>>2
		if err := k.mkdirAllMode(ctx, c.Identity, path.Dir(rel), dirPerm); err != nil {
			return nil, err
		}
		if err := k.accessParent(ctx, c.Identity, rel); err != nil {
			return nil, err
		}
		f, err := k.openData(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, a.Perm)
		if err != nil {
			return nil, abi.E(abi.Path("/"+rel), err)
		}
		f.Chmod(a.Perm.Perm())
		return f, nil
	})
}

// registerPosixFS registers the Internal syscalls that serve /home and
// /workspaces to the transports. Paths are relative to the data root and
// already resolved (the nodes hold them); each call checks permissions.
func (k *Kernel) registerPosixFS() {
	Handle(k, "fs.stat", Internal, func(ctx context.Context, c *Caller, a *fsPathArgs) (vfs.Attr, error) {
		fi, err := k.lstatStep(ctx, c.Identity, a.Path)
		if err != nil {
			return vfs.Attr{}, err
		}
		return k.attrOf(ctx, a.Path, fi), nil
	})
	Handle(k, "fs.readdir", Internal, func(ctx context.Context, c *Caller, a *fsPathArgs) ([]DirEnt, error) {
		if _, err := k.access(ctx, c.Identity, a.Path, vfs.WantRead); err != nil {
			return nil, err
		}
		ents, err := k.readDirData(a.Path)
		if err != nil {
			return nil, abi.E(abi.Path("/"+a.Path), err)
		}
		out := make([]DirEnt, 0, len(ents))
		for _, fi := range ents {
			rel := a.Path + "/" + fi.Name()
			out = append(out, DirEnt{fi.Name(), k.attrOf(ctx, rel, fi)})
		}
		return out, nil
	})
	Handle(k, "fs.open", Internal, func(ctx context.Context, c *Caller, a *fsOpenArgs) (*os.File, error) {
		fi, err := k.accessStep(ctx, c.Identity, a.Path, vfs.WantOf(a.Flags))
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
			if err := k.accessParent(ctx, c.Identity, a.Path); err != nil {
				return nil, err
			}
			created = true
		default:
			return nil, err
		}
		// O_APPEND is the transport's business: it sends the offsets, and
		// WriteAt refuses files opened for appending.
		f, err := k.openData(a.Path, a.Flags&^os.O_APPEND, a.Perm)
		if err != nil {
			return nil, abi.E(abi.Path("/"+a.Path), err)
		}
		if created {
			// The mode is the caller's (the transport applied its umask);
			// the daemon's own umask must not narrow it.
			f.Chmod(a.Perm.Perm())
		}
		return f, nil
	})
	Handle(k, "fs.pread", Internal, func(ctx context.Context, c *Caller, a *fsIOArgs) (int, error) {
		n, err := a.F.ReadAt(a.Buf, a.Off)
		if err == io.EOF {
			err = nil
		}
		return n, err
	})
	Handle(k, "fs.pwrite", Internal, func(ctx context.Context, c *Caller, a *fsIOArgs) (int, error) {
		return a.F.WriteAt(a.Buf, a.Off)
	})
	Handle(k, "fs.ftruncate", Internal, func(ctx context.Context, c *Caller, a *fsTruncArgs) (struct{}, error) {
		return struct{}{}, a.F.Truncate(a.Size)
	})
	Handle(k, "fs.fsync", Internal, func(ctx context.Context, c *Caller, a *fsTruncArgs) (struct{}, error) {
		return struct{}{}, a.F.Sync()
	})
	Handle(k, "fs.mkdir", Internal, func(ctx context.Context, c *Caller, a *fsMkdirArgs) (vfs.Attr, error) {
		if err := k.accessParent(ctx, c.Identity, a.Path); err != nil {
			return vfs.Attr{}, err
		}
		if err := k.mkdirData(a.Path, a.Perm); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		fi, err := k.lstatData(a.Path)
		if err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		return k.attrOf(ctx, a.Path, fi), nil
	})
	Handle(k, "fs.remove", Internal, func(ctx context.Context, c *Caller, a *fsRemoveArgs) (struct{}, error) {
		if err := k.accessParent(ctx, c.Identity, a.Path); err != nil {
			return struct{}{}, err
		}
		fi, err := k.lstatData(a.Path)
		if err != nil {
			return struct{}{}, abi.E(abi.Path("/"+a.Path), err)
		}
		if a.Dir && !fi.IsDir() {
			return struct{}{}, abi.E(abi.Path("/"+a.Path), syscall.ENOTDIR)
		}
		if !a.Dir && fi.IsDir() {
			return struct{}{}, abi.E(abi.Path("/"+a.Path), abi.Invalid, syscall.EISDIR)
		}
		if err := k.removeData(a.Path, fi.IsDir()); err != nil {
			return struct{}{}, abi.E(abi.Path("/"+a.Path), err)
		}
		return struct{}{}, nil
	})
	Handle(k, "fs.rename", Internal, func(ctx context.Context, c *Caller, a *fsRenameArgs) (struct{}, error) {
		if err := k.accessParent(ctx, c.Identity, a.Old); err != nil {
			return struct{}{}, err
		}
		if err := k.accessParent(ctx, c.Identity, a.New); err != nil {
			return struct{}{}, err
		}
		if k.ownerOf(ctx, a.Old) != k.ownerOf(ctx, a.New) && !c.IsRoot() {
			return struct{}{}, abi.E(abi.Path("/"+a.Old), abi.Permission, "cannot move a file into another user's tree")
		}
		if err := k.renameData(a.Old, a.New); err != nil {
			return struct{}{}, abi.E(abi.Path("/"+a.Old), err)
		}
		return struct{}{}, nil
	})
	Handle(k, "fs.readlink", Internal, func(ctx context.Context, c *Caller, a *fsPathArgs) (string, error) {
		fi, err := k.lstatStep(ctx, c.Identity, a.Path)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return "", abi.E(abi.Path("/"+a.Path), abi.Invalid, syscall.EINVAL)
		}
		t, err := k.readlinkData(a.Path)
		if err != nil {
			return "", abi.E(abi.Path("/"+a.Path), err)
		}
		return t, nil
	})
	Handle(k, "fs.symlink", Internal, func(ctx context.Context, c *Caller, a *fsSymlinkArgs) (vfs.Attr, error) {
		if err := checkLinkTarget(a.Target); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		if err := k.accessParent(ctx, c.Identity, a.Path); err != nil {
			return vfs.Attr{}, err
		}
		if err := k.symlinkData(a.Target, a.Path); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		fi, err := k.lstatData(a.Path)
		if err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		return k.attrOf(ctx, a.Path, fi), nil
	})
	Handle(k, "fs.link", Internal, func(ctx context.Context, c *Caller, a *fsRenameArgs) (vfs.Attr, error) {
		fi, err := k.reach(ctx, c.Identity, a.Old)
		if err != nil {
			return vfs.Attr{}, err
		}
		if fi.IsDir() {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Old), abi.Permission, syscall.EPERM)
		}
		if err := k.accessParent(ctx, c.Identity, a.New); err != nil {
			return vfs.Attr{}, err
		}
		o := k.ownerOf(ctx, a.Old)
		if o != k.ownerOf(ctx, a.New) {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.New), abi.Permission, syscall.EXDEV) // links stay within one owner's tree
		}
		// As Linux's protected_hardlinks: only the owner, or who may read
		// and write the file, links it.
		if !c.IsRoot() && c.Uid != o.uid && !allowed(c.Identity, o, fi.Mode(), vfs.WantRead|vfs.WantWrite) {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Old), abi.Permission, "permission denied")
		}
		if err := k.linkData(a.Old, a.New); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.New), err)
		}
		if fi, err = k.lstatData(a.New); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.New), err)
		}
		return k.attrOf(ctx, a.New, fi), nil
	})
	Handle(k, "fs.setattr", Internal, func(ctx context.Context, c *Caller, a *fsSetattrArgs) (vfs.Attr, error) {
		fi, err := k.reach(ctx, c.Identity, a.Path)
		if err != nil {
			return vfs.Attr{}, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 && (a.Set.Mode != nil || a.Set.Size != nil) {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), syscall.EOPNOTSUPP)
		}
		o := k.ownerOf(ctx, a.Path)
		isOwner := c.IsRoot() || c.Uid == o.uid
		if a.Set.Mode != nil {
			if !isOwner {
				return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), abi.Permission, "only the owner may change the mode")
			}
			if err := k.chmodData(a.Path, *a.Set.Mode); err != nil {
				return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
			}
		}
		if a.Set.Size != nil {
			if !allowed(c.Identity, o, fi.Mode(), vfs.WantWrite) {
				return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), abi.Permission, "permission denied")
			}
			f, err := k.openData(a.Path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
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
			if err := k.chtimesData(a.Path, *a.Set.Mtime); err != nil {
				return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
			}
		}
		if fi, err = k.lstatData(a.Path); err != nil {
			return vfs.Attr{}, abi.E(abi.Path("/"+a.Path), err)
		}
		return k.attrOf(ctx, a.Path, fi), nil
	})
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

// opErr is the seed's operation-level failure: {ok:false, error}.
func opErr(err error) map[string]any {
	return map[string]any{"ok": false, "error": err.Error()}
}

type fsReadArgs struct {
	Target string `json:"target"`
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}
type fsWriteArgs struct {
	Target  string `json:"target"`
	Path    string `json:"path"`
	Content string `json:"content"`
}
type fsEditArgs struct {
	Target     string `json:"target"`
	Path       string `json:"path"`
	OldString  string `json:"oldString"`
	NewString  string `json:"newString"`
	ReplaceAll bool   `json:"replaceAll"`
}
type fsDeleteArgs struct {
	Target string `json:"target"`
	Path   string `json:"path"`
}
type fsSearchArgs struct {
	Target  string `json:"target"`
	Query   string `json:"query"`
	Path    string `json:"path"`
	Include string `json:"include"`
}

// maxReadFile is the largest file fs.read returns.
const maxReadFile = 25 << 20

// maxSearchMatches caps fs.search.
const maxSearchMatches = 500

// registerSeedFS registers the seed's fs.* syscalls (the agent's tools).
// Failures of the operation itself come back as {ok:false, error}.
func (k *Kernel) registerSeedFS() {
	Handle(k, "fs.read", 0, func(ctx context.Context, c *Caller, a *fsReadArgs) (map[string]any, error) {
		if err := checkTarget(a.Target); err != nil {
			return nil, err
		}
		res, err := k.fsRead(ctx, c.Identity, a)
		if err != nil {
			return opErr(err), nil
		}
		return res, nil
	})
	Handle(k, "fs.write", 0, func(ctx context.Context, c *Caller, a *fsWriteArgs) (map[string]any, error) {
		if err := checkTarget(a.Target); err != nil {
			return nil, err
		}
		rel, err := resolve(c.Identity, a.Path)
		if err == nil {
			err = k.writeFile(ctx, c.Identity, rel, []byte(a.Content), true)
		}
		if err != nil {
			return opErr(err), nil
		}
		return map[string]any{"ok": true, "path": "/" + rel, "size": len(a.Content)}, nil
	})
	Handle(k, "fs.edit", 0, func(ctx context.Context, c *Caller, a *fsEditArgs) (map[string]any, error) {
		if err := checkTarget(a.Target); err != nil {
			return nil, err
		}
		n, rel, err := k.fsEdit(ctx, c.Identity, a)
		if err != nil {
			return opErr(err), nil
		}
		return map[string]any{"ok": true, "path": "/" + rel, "replacements": n}, nil
	})
	Handle(k, "fs.delete", 0, func(ctx context.Context, c *Caller, a *fsDeleteArgs) (map[string]any, error) {
		if err := checkTarget(a.Target); err != nil {
			return nil, err
		}
		rel, err := resolve(c.Identity, a.Path)
		if err == nil {
			err = k.deleteTree(ctx, c.Identity, rel)
		}
		if err != nil {
			return opErr(err), nil
		}
		return map[string]any{"ok": true, "path": "/" + rel}, nil
	})
	Handle(k, "fs.search", 0, func(ctx context.Context, c *Caller, a *fsSearchArgs) (map[string]any, error) {
		if err := checkTarget(a.Target); err != nil {
			return nil, err
		}
		res, err := k.fsSearch(ctx, c.Identity, a)
		if err != nil {
			return opErr(err), nil
		}
		return res, nil
	})
}

// checkTarget refuses device targets until devices exist.
func checkTarget(t string) error {
	if t == "" || t == "gsv" {
		return nil
	}
	return abi.E(abi.Offline, fmt.Sprintf("no active connection for device %q", t))
}

func (k *Kernel) fsRead(ctx context.Context, id *Identity, a *fsReadArgs) (map[string]any, error) {
	rel, err := resolve(id, a.Path)
	if err != nil {
		return nil, err
	}
	fi, err := k.access(ctx, id, rel, vfs.WantRead)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		list, err := k.readDirData(rel)
		if err != nil {
			return nil, abi.E(abi.Path("/"+rel), err)
		}
		files, dirs := []string{}, []string{}
		for _, e := range list {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
			} else if e.Mode().IsRegular() {
				files = append(files, e.Name())
			}
		}
		return map[string]any{"ok": true, "path": "/" + rel, "files": files, "directories": dirs}, nil
	}
	if fi.Size() > maxReadFile {
		return nil, abi.E(abi.Path("/"+rel), abi.Invalid, fmt.Sprintf("file is larger than %d bytes", maxReadFile))
	}
	b, err := k.readFileData(rel, maxReadFile)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	if !utf8.Valid(b) {
		return nil, abi.E(abi.Path("/"+rel), abi.Invalid, "binary file")
	}
	var out strings.Builder
	lines := strings.SplitAfter(string(b), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	total := len(lines)
	start := min(max(a.Offset, 0), total)
	end := total
	if a.Limit > 0 {
		end = min(start+a.Limit, total)
	}
	for i := start; i < end; i++ {
		fmt.Fprintf(&out, "%6d\t%s", i+1, strings.TrimSuffix(lines[i], "\n")+"\n")
	}
	return map[string]any{"ok": true, "path": "/" + rel, "content": out.String(), "lines": total, "size": fi.Size()}, nil
}

// writeFile replaces rel's content atomically (a temporary file renamed
// over it), creating parent directories when mkParents is set. An existing
// file keeps its mode; a new one gets 0644.
func (k *Kernel) writeFile(ctx context.Context, id *Identity, rel string, content []byte, mkParents bool) error {
	mode := fs.FileMode(0o644)
	fi, err := k.access(ctx, id, rel, vfs.WantWrite)
	switch {
	case err == nil:
		if fi.IsDir() {
			return abi.E(abi.Path("/"+rel), abi.Invalid, syscall.EISDIR)
		}
		mode = fi.Mode().Perm()
		if err := k.accessParent(ctx, id, rel); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrNotExist):
		if mkParents {
			if err := k.mkdirAll(ctx, id, path.Dir(rel)); err != nil {
				return err
			}
		}
		if err := k.accessParent(ctx, id, rel); err != nil {
			return err
		}
	default:
		return err
	}
	tmp := tmpDir + "/" + randomText(10)
	f, err := k.openData(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return abi.E(abi.Path("/"+rel), err)
	}
	_, werr := f.Write(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = k.chmodData(tmp, mode)
	}
	if werr == nil {
		werr = k.renameData(tmp, rel)
	}
	if werr != nil {
		k.removeData(tmp, false)
		return abi.E(abi.Path("/"+rel), werr)
	}
	return nil
}

// mkdirAll makes rel and its missing parents, checking each step.
func (k *Kernel) mkdirAll(ctx context.Context, id *Identity, rel string) error {
	return k.mkdirAllMode(ctx, id, rel, 0o755)
}

// mkdirAllMode is mkdirAll making directories with mode perm.
func (k *Kernel) mkdirAllMode(ctx context.Context, id *Identity, rel string, perm fs.FileMode) error {
	if fi, err := k.access(ctx, id, rel, 0); err == nil {
		if !fi.IsDir() {
			return abi.E(abi.Path("/"+rel), syscall.ENOTDIR)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := path.Dir(rel); parent != "." {
		if err := k.mkdirAllMode(ctx, id, parent, perm); err != nil {
			return err
		}
	}
	if err := k.accessParent(ctx, id, rel); err != nil {
		return err
	}
	if err := k.mkdirData(rel, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return abi.E(abi.Path("/"+rel), err)
	}
	return nil
}

func (k *Kernel) fsEdit(ctx context.Context, id *Identity, a *fsEditArgs) (int, string, error) {
	rel, err := resolve(id, a.Path)
	if err != nil {
		return 0, "", err
	}
	if a.OldString == "" {
		return 0, rel, abi.E(abi.Path("/"+rel), abi.Invalid, "oldString is empty")
	}
	if _, err := k.access(ctx, id, rel, vfs.WantRead|vfs.WantWrite); err != nil {
		return 0, rel, err
	}
	b, err := k.readFileData(rel, maxReadFile)
	if err != nil {
		return 0, rel, abi.E(abi.Path("/"+rel), err)
	}
	s := string(b)
	n := strings.Count(s, a.OldString)
	switch {
	case n == 0:
		return 0, rel, abi.E(abi.Path("/"+rel), abi.NotExist, "oldString not found in file")
	case n > 1 && !a.ReplaceAll:
		return 0, rel, abi.E(abi.Path("/"+rel), abi.Invalid, fmt.Sprintf("oldString occurs %d times: give more context to make it unique, or set replaceAll", n))
	}
	if !a.ReplaceAll {
		n = 1
	}
	s = strings.Replace(s, a.OldString, a.NewString, n)
	return n, rel, k.writeFile(ctx, id, rel, []byte(s), false)
}

// deleteTree removes rel and, for a directory, everything in it.
func (k *Kernel) deleteTree(ctx context.Context, id *Identity, rel string) error {
	if !strings.Contains(rel, "/") {
		return abi.E(abi.Path("/"+rel), abi.Permission, "cannot delete a top-level directory")
	}
	if err := k.accessParent(ctx, id, rel); err != nil {
		return err
	}
	fi, err := k.reach(ctx, id, rel)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if _, err := k.access(ctx, id, rel, vfs.WantWrite|vfs.WantExec|vfs.WantRead); err != nil {
			return err
		}
		ents, err := k.readDirData(rel)
		if err != nil {
			return abi.E(abi.Path("/"+rel), err)
		}
		for _, e := range ents {
			if err := k.deleteTree(ctx, id, rel+"/"+e.Name()); err != nil {
				return err
			}
		}
	}
	if err := k.removeData(rel, fi.IsDir()); err != nil {
		return abi.E(abi.Path("/"+rel), err)
	}
	return nil
}

func (k *Kernel) fsSearch(ctx context.Context, id *Identity, a *fsSearchArgs) (map[string]any, error) {
	if a.Query == "" {
		return nil, abi.E(abi.Invalid, "empty query")
	}
	p := a.Path
	if p == "" {
		p = id.Cwd
	}
	rel, err := resolve(id, p)
	if err != nil {
		return nil, err
	}
	if a.Include != "" {
		if _, err := path.Match(a.Include, "x"); err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("bad include pattern %q", a.Include))
		}
	}
	type match struct {
		Path    string `json:"path"`
		Line    int    `json:"line"`
		Content string `json:"content"`
	}
	matches := []match{}
	truncated := false
	q := []byte(a.Query)
	var walk func(rel string) error
	walk = func(rel string) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fi, err := k.access(ctx, id, rel, vfs.WantRead)
		if err != nil {
			return nil // unreadable parts are skipped, as grep -r -s does
		}
		if fi.IsDir() {
			ents, err := k.readDirData(rel)
			if err != nil {
				return nil
			}
			for _, e := range ents {
				if err := walk(rel + "/" + e.Name()); err != nil || truncated {
					return err
				}
			}
			return nil
		}
		if !fi.Mode().IsRegular() || fi.Size() > maxReadFile {
			return nil
		}
		if a.Include != "" {
			if ok, _ := path.Match(a.Include, path.Base(rel)); !ok {
				return nil
			}
		}
		f, err := k.openReadData(rel)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if bytes.IndexByte(line, 0) >= 0 {
				return nil // binary
			}
			if bytes.Contains(line, q) {
				if len(matches) == maxSearchMatches {
					truncated = true
					return nil
				}
				matches = append(matches, match{"/" + rel, n, string(line)})
			}
		}
		return nil
	}
	if err := walk(rel); err != nil {
		return nil, abi.E(err)
	}
	res := map[string]any{"ok": true, "matches": matches, "count": len(matches)}
	if truncated {
		res["truncated"] = true
	}
	return res, nil
}

// dataNode is a file or directory of the data tree. Its every operation is
// a syscall made as the caller.
type dataNode struct {
	k   *Kernel
	rel string
}

type dataDir struct{ dataNode }
type dataFile struct{ dataNode }

// dataLink is a symbolic link of the data tree. Over FUSE the client's
// kernel reads its target (Readlink) and resolves it on its own side. 9P2000
// has no symbolic links: there a link is a read-only file whose content is
// its target.
type dataLink struct{ dataNode }

var (
	_ vfs.Dir          = (*dataDir)(nil)
	_ vfs.AttrLookuper = (*dataDir)(nil)
	_ vfs.Creator      = (*dataDir)(nil)
	_ vfs.Remover      = (*dataDir)(nil)
	_ vfs.Renamer      = (*dataDir)(nil)
	_ vfs.Setter       = (*dataDir)(nil)
	_ vfs.File         = (*dataFile)(nil)
	_ vfs.Setter       = (*dataFile)(nil)
	_ vfs.Symlinker    = (*dataDir)(nil)
	_ vfs.Linker       = (*dataDir)(nil)
	_ vfs.Readlinker   = (*dataLink)(nil)
	_ vfs.File         = (*dataLink)(nil)
	_ vfs.Setter       = (*dataLink)(nil)
)

func (n *dataNode) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	return Invoke[vfs.Attr](ctx, n.k, CallerOf(cred, ""), "fs.stat", &fsPathArgs{n.rel})
}

func (n *dataNode) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	return Invoke[vfs.Attr](ctx, n.k, CallerOf(cred, ""), "fs.setattr", &fsSetattrArgs{n.rel, s})
}

func (n *dataNode) node(rel string, a vfs.Attr) vfs.Node {
	switch {
	case a.Mode.IsDir():
		return &dataDir{dataNode{n.k, rel}}
	case a.Mode&fs.ModeSymlink != 0:
		return &dataLink{dataNode{n.k, rel}}
	}
	return &dataFile{dataNode{n.k, rel}}
}

// Symlink implements vfs.Symlinker with fs.symlink.
func (d *dataDir) Symlink(ctx context.Context, cred vfs.Cred, target, name string) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	rel := d.rel + "/" + name
	a, err := Invoke[vfs.Attr](ctx, d.k, CallerOf(cred, ""), "fs.symlink", &fsSymlinkArgs{Target: target, Path: rel})
	if err != nil {
		return nil, err
	}
	return d.node(rel, a), nil
}

// Link implements vfs.Linker with fs.link: target must be a file or link
// of the data tree.
func (d *dataDir) Link(ctx context.Context, cred vfs.Cred, target vfs.Node, name string) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	var old string
	switch t := target.(type) {
	case *dataFile:
		old = t.rel
	case *dataLink:
		old = t.rel
	case *dataDir:
		return nil, abi.E(abi.Path("link"), abi.Permission, syscall.EPERM)
	default:
		return nil, abi.E(abi.Path("link"), abi.Permission, syscall.EXDEV)
	}
	rel := d.rel + "/" + name
	a, err := Invoke[vfs.Attr](ctx, d.k, CallerOf(cred, ""), "fs.link", &fsRenameArgs{Old: old, New: rel})
	if err != nil {
		return nil, err
	}
	return d.node(rel, a), nil
}

// Readlink implements vfs.Readlinker with fs.readlink.
func (l *dataLink) Readlink(ctx context.Context, cred vfs.Cred) (string, error) {
	return Invoke[string](ctx, l.k, CallerOf(cred, ""), "fs.readlink", &fsPathArgs{l.rel})
}

// Open serves the link to transports without symbolic links (9P2000): a
// read-only file whose content is the target.
func (l *dataLink) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	if vfs.WantOf(flags)&vfs.WantWrite != 0 || flags&os.O_TRUNC != 0 {
		return nil, abi.E(abi.Path("/"+l.rel), abi.Permission, "a symbolic link is read-only here; its content is its target")
	}
	t, err := l.Readlink(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &linkHandle{t: []byte(t)}, nil
}

// linkHandle reads a link's target.
type linkHandle struct{ t []byte }

func (h *linkHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if off >= int64(len(h.t)) {
		return 0, nil
	}
	return copy(p, h.t[off:]), nil
}

func (h *linkHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, vfs.ErrReadOnly
}

func (h *linkHandle) Close(ctx context.Context) error { return nil }

func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || !utf8.ValidString(name) {
		return abi.E(abi.Invalid, abi.Op(name), "bad file name")
	}
	return nil
}

func (d *dataDir) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	n, _, err := d.LookupAttr(ctx, cred, name)
	return n, err
}

// LookupAttr implements vfs.AttrLookuper: one fs.stat finds the child.
func (d *dataDir) LookupAttr(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, vfs.Attr, error) {
	if err := validName(name); err != nil {
		return nil, vfs.Attr{}, err
	}
	rel := d.rel + "/" + name
	a, err := Invoke[vfs.Attr](ctx, d.k, CallerOf(cred, ""), "fs.stat", &fsPathArgs{rel})
	if err != nil {
		return nil, vfs.Attr{}, err
	}
	return d.node(rel, a), a, nil
}

func (d *dataDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	ents, err := Invoke[[]DirEnt](ctx, d.k, CallerOf(cred, ""), "fs.readdir", &fsPathArgs{d.rel})
	if err != nil {
		return nil, err
	}
	out := make([]vfs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = vfs.DirEntry{Name: e.Name, Node: d.node(d.rel+"/"+e.Name, e.Attr)}
	}
	return out, nil
}

func (d *dataDir) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm fs.FileMode) (vfs.Node, vfs.Handle, error) {
	if err := validName(name); err != nil {
		return nil, nil, err
	}
	rel := d.rel + "/" + name
	c := CallerOf(cred, "")
	f, err := Invoke[*os.File](ctx, d.k, c, "fs.open", &fsOpenArgs{rel, flags | os.O_CREATE, perm})
	if err != nil {
		return nil, nil, err
	}
	return &dataFile{dataNode{d.k, rel}}, &dataHandle{k: d.k, c: c, f: f}, nil
}

func (d *dataDir) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm fs.FileMode) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	rel := d.rel + "/" + name
	if _, err := Invoke[vfs.Attr](ctx, d.k, CallerOf(cred, ""), "fs.mkdir", &fsMkdirArgs{rel, perm}); err != nil {
		return nil, err
	}
	return &dataDir{dataNode{d.k, rel}}, nil
}

func (d *dataDir) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	if err := validName(name); err != nil {
		return err
	}
	_, err := d.k.Call(ctx, CallerOf(cred, ""), "fs.remove", &fsRemoveArgs{d.rel + "/" + name, dir})
	return err
}

func (d *dataDir) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	nd, ok := newDir.(*dataDir)
	if !ok {
		return abi.E(abi.Path("rename"), abi.Invalid, syscall.EXDEV)
	}
	if err := validName(name); err != nil {
		return err
	}
	if err := validName(newName); err != nil {
		return err
	}
	_, err := d.k.Call(ctx, CallerOf(cred, ""), "fs.rename", &fsRenameArgs{d.rel + "/" + name, nd.rel + "/" + newName})
	return err
}

func (f *dataFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	c := CallerOf(cred, "")
	fd, err := Invoke[*os.File](ctx, f.k, c, "fs.open", &fsOpenArgs{Path: f.rel, Flags: flags &^ (os.O_CREATE | os.O_EXCL)})
	if err != nil {
		return nil, err
	}
	return &dataHandle{k: f.k, c: c, f: fd}, nil
}

// dataHandle is an open real file. Permission was checked at open, as for
// a POSIX file descriptor; each read and write is still a syscall.
type dataHandle struct {
	k *Kernel
	c *Caller
	f *os.File
}

var (
	_ vfs.Truncater = (*dataHandle)(nil)
	_ vfs.Syncer    = (*dataHandle)(nil)
)

func (h *dataHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	return Invoke[int](ctx, h.k, h.c, "fs.pread", &fsIOArgs{h.f, p, off})
}

func (h *dataHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return Invoke[int](ctx, h.k, h.c, "fs.pwrite", &fsIOArgs{h.f, p, off})
}

func (h *dataHandle) Truncate(ctx context.Context, size int64) error {
	_, err := h.k.Call(ctx, h.c, "fs.ftruncate", &fsTruncArgs{h.f, size})
	return err
}

func (h *dataHandle) Sync(ctx context.Context) error {
	_, err := h.k.Call(ctx, h.c, "fs.fsync", &fsTruncArgs{F: h.f})
	return err
}

func (h *dataHandle) Close(ctx context.Context) error { return h.f.Close() }

// ident returns the *Identity inside a vfs.Cred.
func ident(cred vfs.Cred) *Identity {
	if id, ok := cred.(*Identity); ok && id != nil {
		return id
	}
	return nobody(-1)
}

// CallerOf returns the Caller for a vfs.Cred, with origin dir.
func CallerOf(cred vfs.Cred, origin string) *Caller {
	return &Caller{Identity: ident(cred), Origin: origin}
}

// DataNode returns the node of the data tree's directory rel ("home",
// "workspaces", "var/sessions").
func (k *Kernel) DataNode(rel string) vfs.Node { return &dataDir{dataNode{k, rel}} }
