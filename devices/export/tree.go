package export

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// fs/: the exported directory's real files, each operation one made on
// the os.Root of Root, which follows a symbolic link only while it stays
// inside Root. A link that leads outside Root (or nowhere) is shown as
// what it is: a link, whose target Readlink gives and whose open (9P2000
// has no links) is refused. Every caller may do what the daemon's host
// user may do; a read-only export refuses every write with EROFS.

// nonblock opens a FIFO or device without waiting for a peer.
const nonblock = syscall.O_NONBLOCK

// allow is the vfs.Meta of the tree's synthetic nodes: the root and the
// call file, which everyone may use.
type allow struct {
	path string
	dir  bool
	mode fs.FileMode
}

func (m allow) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	mode := m.mode
	if mode == 0 {
		mode = 0o555
	}
	uid, gid := os.Getuid(), os.Getgid()
	return vfs.Attr{Ino: vfs.PathIno(m.path), Mode: vfs.ModeOf(m.dir, mode), Uid: uint32(uid), Gid: uint32(gid),
		User: userName(uint32(uid)), Group: groupName(uint32(gid)), Synthetic: !m.dir}, nil
}

func (m allow) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error { return nil }

// node is a file, directory or link of fs/ at rel (relative to Root; "."
// for Root itself). follow says rel is a symbolic link inside Root that
// the node stands for the target of.
type node struct {
	e      *Export
	rel    string
	follow bool
}

type dirNode struct{ node }
type fileNode struct{ node }
type linkNode struct{ node }

var (
	_ vfs.Dir        = (*dirNode)(nil)
	_ vfs.Creator    = (*dirNode)(nil)
	_ vfs.Remover    = (*dirNode)(nil)
	_ vfs.Renamer    = (*dirNode)(nil)
	_ vfs.Symlinker  = (*dirNode)(nil)
	_ vfs.Setter     = (*dirNode)(nil)
	_ vfs.File       = (*fileNode)(nil)
	_ vfs.Setter     = (*fileNode)(nil)
	_ vfs.File       = (*linkNode)(nil)
	_ vfs.Readlinker = (*linkNode)(nil)
)

// fail is err as an error of the node at rel.
func (n *node) fail(rel string, err error) error {
	return abi.E(abi.Path("/"+strings.TrimPrefix(rel, ".")), err)
}

// stat is the node's FileInfo (its target's, for a followed link).
func (n *node) stat() (fs.FileInfo, error) {
	if n.follow || n.rel == "." {
		return n.e.dir.Stat(n.rel)
	}
	return n.e.dir.Lstat(n.rel)
}

func (n *node) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	fi, err := n.stat()
	if err != nil {
		return vfs.Attr{}, n.fail(n.rel, err)
	}
	return attrOf(fi), nil
}

// attrOf is a real file's vfs.Attr.
func attrOf(fi fs.FileInfo) vfs.Attr {
	a := vfs.Attr{Mode: fi.Mode(), Size: fi.Size(), Mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		a.Ino = st.Ino
		a.Nlink = uint32(st.Nlink)
		a.Uid, a.Gid = st.Uid, st.Gid
	}
	a.User, a.Group = userName(a.Uid), groupName(a.Gid)
	if fi.IsDir() {
		a.Size = 0
	}
	return a
}

// child is the node of rel, a name found in a directory, by its type.
func (e *Export) child(rel string) (vfs.Node, fs.FileInfo, error) {
	fi, err := e.dir.Lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	n, fi := e.nodeOf(rel, fi)
	return n, fi, nil
}

// nodeOf is the node of rel, whose Lstat is fi, by its type, and the
// FileInfo its Attr answers with (a followed link's target's).
func (e *Export) nodeOf(rel string, fi fs.FileInfo) (vfs.Node, fs.FileInfo) {
	n := node{e: e, rel: rel}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := e.dir.Stat(rel) // only while the link stays inside Root
		if err != nil {
			return &linkNode{n}, fi
		}
		n.follow, fi = true, t
	}
	if fi.IsDir() {
		return &dirNode{n}, fi
	}
	return &fileNode{n}, fi
}

// sub is the path of name in d.
func (d *dirNode) sub(name string) string {
	if d.rel == "." {
		return name
	}
	return d.rel + "/" + name
}

// validName refuses a name that is not a file name: vfs.CheckName.
func validName(name string) error { return vfs.CheckName(name) }

// readOnly is the error of a write to a read-only export.
func (e *Export) readOnly() error {
	if e.opts.ReadOnly {
		return abi.E(abi.Permission, syscall.EROFS)
	}
	return nil
}

func (d *dirNode) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, vfs.ErrNotExist
	}
	n, _, err := d.e.child(d.sub(name))
	if err != nil {
		return nil, d.fail(d.sub(name), err)
	}
	return n, nil
}

// ReadDir lists the directory with the attributes of its entries: the
// directory is opened once, as an os.Root of its own, and each name is
// one fstatat in it rather than a walk from Root.
func (d *dirNode) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	dir, err := d.e.dir.OpenRoot(d.rel)
	if err != nil {
		return nil, d.fail(d.rel, err)
	}
	defer dir.Close()
	f, err := dir.Open(".")
	if err != nil {
		return nil, d.fail(d.rel, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, d.fail(d.rel, err)
	}
	slices.Sort(names)
	out := make([]vfs.DirEntry, 0, len(names))
	for _, name := range names {
		fi, err := dir.Lstat(name)
		if err != nil {
			continue // gone while listed
		}
		n, fi := d.e.nodeOf(d.sub(name), fi)
		a := attrOf(fi)
		out = append(out, vfs.DirEntry{Name: name, Node: n, Attr: &a})
	}
	return out, nil
}

func (d *dirNode) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm fs.FileMode) (vfs.Node, vfs.Handle, error) {
	if err := validName(name); err != nil {
		return nil, nil, err
	}
	if err := d.e.readOnly(); err != nil {
		return nil, nil, err
	}
	rel := d.sub(name)
	f, err := d.e.dir.OpenFile(rel, openFlags(flags)|os.O_CREATE, perm.Perm())
	if err != nil {
		return nil, nil, d.fail(rel, err)
	}
	return &fileNode{node{e: d.e, rel: rel}}, &handle{f: f}, nil
}

func (d *dirNode) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm fs.FileMode) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := d.e.readOnly(); err != nil {
		return nil, err
	}
	rel := d.sub(name)
	if err := d.e.dir.Mkdir(rel, perm.Perm()); err != nil {
		return nil, d.fail(rel, err)
	}
	return &dirNode{node{e: d.e, rel: rel}}, nil
}

func (d *dirNode) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := d.e.readOnly(); err != nil {
		return err
	}
	rel := d.sub(name)
	fi, err := d.e.dir.Lstat(rel)
	if err != nil {
		return d.fail(rel, err)
	}
	switch {
	case dir && !fi.IsDir():
		return d.fail(rel, syscall.ENOTDIR)
	case !dir && fi.IsDir():
		return d.fail(rel, syscall.EISDIR)
	}
	if err := d.e.dir.Remove(rel); err != nil {
		return d.fail(rel, err)
	}
	return nil
}

func (d *dirNode) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := validName(newName); err != nil {
		return err
	}
	if err := d.e.readOnly(); err != nil {
		return err
	}
	nd, ok := newDir.(*dirNode)
	if !ok || nd.e != d.e {
		return d.fail(d.sub(name), syscall.EXDEV)
	}
	if err := d.e.dir.Rename(d.sub(name), nd.sub(newName)); err != nil {
		return d.fail(d.sub(name), err)
	}
	return nil
}

func (d *dirNode) Symlink(ctx context.Context, cred vfs.Cred, target, name string) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := d.e.readOnly(); err != nil {
		return nil, err
	}
	if target == "" || strings.ContainsRune(target, 0) {
		return nil, vfs.Errorf(syscall.EINVAL, "a link target is 1 to 4095 bytes without NUL")
	}
	rel := d.sub(name)
	if err := d.e.dir.Symlink(target, rel); err != nil {
		return nil, d.fail(rel, err)
	}
	n, _, err := d.e.child(rel)
	if err != nil {
		return nil, d.fail(rel, err)
	}
	return n, nil
}

// SetAttr changes the mode, size or modification time (a followed link's
// target's).
func (n *node) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	if err := n.e.readOnly(); err != nil {
		return vfs.Attr{}, err
	}
	if s.Mode != nil {
		if err := n.e.dir.Chmod(n.rel, s.Mode.Perm()); err != nil {
			return vfs.Attr{}, n.fail(n.rel, err)
		}
	}
	if s.Size != nil {
		f, err := n.e.dir.OpenFile(n.rel, os.O_WRONLY|nonblock, 0)
		if err != nil {
			return vfs.Attr{}, n.fail(n.rel, err)
		}
		err = f.Truncate(*s.Size)
		f.Close()
		if err != nil {
			return vfs.Attr{}, n.fail(n.rel, err)
		}
	}
	if s.Mtime != nil {
		if err := n.e.dir.Chtimes(n.rel, time.Time{}, *s.Mtime); err != nil {
			return vfs.Attr{}, n.fail(n.rel, err)
		}
	}
	return n.Attr(ctx, cred)
}

// openFlags are a transport's open flags for os.Root: the transport sends
// the offsets (no O_APPEND), and the node is already resolved (no
// O_NOFOLLOW, which would refuse a followed link).
func openFlags(flags int) int {
	return flags &^ (os.O_APPEND | syscall.O_NOFOLLOW)
}

func (f *fileNode) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	if vfs.WantOf(flags)&vfs.WantWrite != 0 || flags&os.O_TRUNC != 0 {
		if err := f.e.readOnly(); err != nil {
			return nil, err
		}
	}
	fh, err := f.e.dir.OpenFile(f.rel, openFlags(flags)|nonblock, 0)
	if err != nil {
		return nil, f.fail(f.rel, err)
	}
	// Only a regular file's content is served: a FIFO, socket or device
	// node (opened at once, nonblock) is closed unread, ENXIO.
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		fh.Close()
		if err == nil {
			err = fmt.Errorf("a FIFO, socket or device node is not served: %w", syscall.ENXIO)
		}
		return nil, f.fail(f.rel, err)
	}
	return &handle{f: fh}, nil
}

// handle is an open real file.
type handle struct{ f *os.File }

var (
	_ vfs.Truncater = (*handle)(nil)
	_ vfs.Syncer    = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := h.f.ReadAt(p, off)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (h *handle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return h.f.WriteAt(p, off)
}

func (h *handle) Close(ctx context.Context) error                { return h.f.Close() }
func (h *handle) Truncate(ctx context.Context, size int64) error { return h.f.Truncate(size) }
func (h *handle) Sync(ctx context.Context) error                 { return h.f.Sync() }

func (l *linkNode) Readlink(ctx context.Context, cred vfs.Cred) (string, error) {
	t, err := l.e.dir.Readlink(l.rel)
	if err != nil {
		return "", l.fail(l.rel, err)
	}
	return t, nil
}

// Open refuses the link: it leads outside the export, or nowhere.
func (l *linkNode) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	return nil, abi.E(abi.Path("/"+l.rel), abi.Permission, "a symbolic link that leads outside the device's export (or nowhere) is not followed")
}

// names caches user and group names by id.
type names struct {
	mu     sync.Mutex
	users  map[uint32]string
	groups map[uint32]string
}

var idNames names

func userName(uid uint32) string {
	return idNames.get(&idNames.users, uid, func(id string) (string, error) {
		u, err := user.LookupId(id)
		if err != nil {
			return "", err
		}
		return u.Username, nil
	})
}

func groupName(gid uint32) string {
	return idNames.get(&idNames.groups, gid, func(id string) (string, error) {
		g, err := user.LookupGroupId(id)
		if err != nil {
			return "", err
		}
		return g.Name, nil
	})
}

func (c *names) get(m *map[uint32]string, id uint32, look func(string) (string, error)) string {
	c.mu.Lock()
	name, ok := (*m)[id]
	c.mu.Unlock()
	if ok {
		return name
	}
	s := strconv.FormatUint(uint64(id), 10)
	name, err := look(s)
	if err != nil || name == "" {
		name = s
	}
	c.mu.Lock()
	if *m == nil {
		*m = map[uint32]string{}
	}
	(*m)[id] = name
	c.mu.Unlock()
	return name
}
