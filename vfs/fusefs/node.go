package fusefs

import (
	"context"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"gsvfs.dev/gsvfs/vfs"
)

// node is the go-fuse inode of one vfs node, directory or file. Its inode
// number is the node's Attr.Ino, so a node keeps its inode across lookups.
type node struct {
	fs.Inode
	srv *Server
	st  atomic.Pointer[nodeState]
	// backing is the identity of the file last registered as this
	// inode's passthrough backing file (see backedHandle).
	backing atomic.Pointer[fileID]
}

// nodeState is what a node last learnt about its vfs node. A later lookup
// of the same identity may bring a fresh vfs.Node value (a FuncDir builds
// its children on each call); it replaces the old one.
type nodeState struct {
	vn        vfs.Node
	ino       uint64 // Attr.Ino as the tree reported it (0: none)
	synthetic bool
}

var (
	_ fs.InodeEmbedder      = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeReaddirer      = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeAccesser       = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
)

func newNode(s *Server, vn vfs.Node, a vfs.Attr) *node {
	n := &node{srv: s}
	n.set(vn, a)
	return n
}

func (n *node) state() *nodeState { return n.st.Load() }
func (n *node) vnode() vfs.Node   { return n.st.Load().vn }

func (n *node) set(vn vfs.Node, a vfs.Attr) {
	n.st.Store(&nodeState{vn: vn, ino: a.Ino, synthetic: a.Synthetic})
}

// noteAttr records what a fresh Attr says about the node.
func (n *node) noteAttr(a vfs.Attr) {
	for {
		st := n.state()
		if st.synthetic == a.Synthetic ||
			n.st.CompareAndSwap(st, &nodeState{vn: st.vn, ino: st.ino, synthetic: a.Synthetic}) {
			return
		}
	}
}

// child returns the inode for vn, found as name in n with attributes a. An
// inode the kernel already knows under that name and identity is reused,
// with its vfs node refreshed.
func (n *node) child(ctx context.Context, name string, vn vfs.Node, a vfs.Attr) *fs.Inode {
	st := fs.StableAttr{Ino: a.Ino, Mode: typeBits(a.Mode)}
	if c := n.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*node); ok && c.Mode() == st.Mode {
			if (a.Ino != 0 && c.StableAttr().Ino == a.Ino) || (a.Ino == 0 && cn.state().ino == 0) {
				cn.set(vn, a)
				return c
			}
		}
	}
	return n.NewInode(ctx, newNode(n.srv, vn, a), st)
}

// dir returns n's vfs node as a directory.
func (n *node) dir() (vfs.Dir, syscall.Errno) {
	d, ok := n.vnode().(vfs.Dir)
	if !ok {
		return nil, syscall.ENOTDIR
	}
	return d, 0
}

// credDir returns the caller's Cred and n's vfs node as a directory: the
// start of every directory operation.
func (n *node) credDir(ctx context.Context) (vfs.Cred, vfs.Dir, syscall.Errno) {
	cred, e := n.srv.cred(ctx)
	if e != 0 {
		return nil, nil, e
	}
	d, e := n.dir()
	return cred, d, e
}

// Lookup implements fs.NodeLookuper with vfs.Dir.Lookup.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return nil, e
	}
	vn, a, err := vfs.LookupAttr(ctx, d, cred, name)
	if err != nil {
		return nil, n.srv.errno("lookup", err, "name", name)
	}
	fillAttr(&out.Attr, a)
	return n.child(ctx, name, vn, a), 0
}

// Readdir implements fs.NodeReaddirer with vfs.Dir.ReadDir. A child's type
// and inode come from the attributes its entry carries, else from its
// Attr, asked without content (vfs.WithoutContent: a view need not be
// rendered for its type); children whose Attr fails are left out.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return nil, e
	}
	ents, err := d.ReadDir(ctx, cred)
	if err != nil {
		return nil, n.srv.errno("readdir", err)
	}
	parent := n.EmbeddedInode()
	if _, p := n.Parent(); p != nil {
		parent = p
	}
	list := make([]fuse.DirEntry, 0, len(ents)+2)
	list = append(list,
		fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: n.StableAttr().Ino},
		fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: parent.StableAttr().Ino},
	)
	actx := vfs.WithoutContent(ctx)
	for _, ent := range ents {
		a, err := vfs.EntryAttr(actx, ent, cred)
		if err != nil {
			if ctx.Err() != nil {
				return nil, syscall.EINTR
			}
			n.srv.log.Debug("fusefs: readdir: leaving out a child", "name", ent.Name, "err", err)
			continue
		}
		list = append(list, fuse.DirEntry{Name: ent.Name, Mode: typeBits(a.Mode), Ino: a.Ino})
	}
	return fs.NewListDirStream(list), 0
}

// Getattr implements fs.NodeGetattrer with vfs.Node.Attr. A stat through
// an open handle that is a vfs.Sizer reports that handle's size, unless
// the handle says it has none for this stat (f is the handle the kernel
// named, or one go-fuse picked among the node's opens).
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	cred, e := n.srv.cred(ctx)
	if e != 0 {
		return e
	}
	a, err := n.vnode().Attr(ctx, cred)
	if err != nil {
		return n.srv.errno("getattr", err)
	}
	if h, ok := f.(*handle); ok {
		if sz, ok := h.h.(vfs.Sizer); ok {
			if s := sz.Size(flagged(ctx, &n.srv.ownAttr)); s >= 0 {
				a.Size = s
			}
		}
	}
	n.noteAttr(a)
	fillAttr(&out.Attr, a)
	return 0
}

// Setattr implements fs.NodeSetattrer: chmod, truncate and utimes go to a
// vfs.Setter. A node that is not a Setter accepts only a truncate, done by
// the vfs.Truncater handle it is opened with (ftruncate), or by any open
// Truncater handle of the node; anything else is EPERM. Changing the owner
// is EPERM; the access time is ignored.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	cred, e := n.srv.cred(ctx)
	if e != 0 {
		return e
	}
	vn := n.vnode()
	uid, setUID := in.GetUID()
	gid, setGID := in.GetGID()
	if setUID || setGID {
		cur, err := vn.Attr(ctx, cred)
		if err != nil {
			return n.srv.errno("setattr attr", err)
		}
		if (setUID && uid != cur.Uid) || (setGID && gid != cur.Gid) {
			return syscall.EPERM
		}
	}
	var sa vfs.SetAttr
	if m, ok := in.GetMode(); ok {
		fm := fileMode(m)
		sa.Mode = &fm
	}
	if sz, ok := in.GetSize(); ok {
		v := int64(sz)
		sa.Size = &v
	}
	if mt, ok := in.GetMTime(); ok {
		sa.Mtime = &mt
	}
	var (
		a   vfs.Attr
		err error
	)
	switch setter, isSetter := vn.(vfs.Setter); {
	case sa.Mode == nil && sa.Size == nil && sa.Mtime == nil:
		// Nothing the tree keeps (atime, ctime, an unchanged owner).
		a, err = vn.Attr(ctx, cred)
	case isSetter:
		if a, err = setter.SetAttr(ctx, cred, sa); err != nil {
			return n.srv.errno("setattr", err)
		}
	case sa.Mode == nil && sa.Mtime == nil:
		var t vfs.Truncater
		if h, ok := f.(*handle); ok {
			t, _ = h.h.(vfs.Truncater)
		}
		if t == nil {
			t = n.srv.truncater(n)
		}
		if t == nil {
			return syscall.EPERM
		}
		if err := t.Truncate(ctx, *sa.Size); err != nil {
			return n.srv.errno("truncate", err)
		}
		a, err = vn.Attr(ctx, cred)
	default:
		return syscall.EPERM
	}
	if err != nil {
		return n.srv.errno("setattr attr", err)
	}
	n.noteAttr(a)
	fillAttr(&out.Attr, a)
	return 0
}

// Access implements fs.NodeAccesser (access(2), and the search permission
// chdir(2) needs) with the node's Access method; a node without one allows
// everything.
func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	want := vfs.Want(mask & 7)
	if want == 0 {
		return 0
	}
	// A node with an Access method is a vfs.Meta (every vfs kind embeds one).
	ac, ok := n.vnode().(vfs.Meta)
	if !ok {
		return 0
	}
	cred, e := n.srv.cred(ctx)
	if e != 0 {
		return e
	}
	if err := ac.Access(ctx, cred, want); err != nil {
		return n.srv.errno("access", err)
	}
	return 0
}

// Statfs implements fs.NodeStatfser with the root's vfs.Statfser; a tree
// whose root is none reports no space.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	sf, ok := n.srv.root.(vfs.Statfser)
	if !ok {
		*out = fuse.StatfsOut{Bsize: 4096, Frsize: 4096, NameLen: 255}
		return 0
	}
	cred, e := n.srv.cred(ctx)
	if e != 0 {
		return e
	}
	st, err := sf.Statfs(ctx, cred)
	if err != nil {
		return n.srv.errno("statfs", err)
	}
	*out = fuse.StatfsOut{Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Files: st.Files, Ffree: st.Ffree,
		Bsize: st.Bsize, Frsize: st.Frsize, NameLen: st.NameLen}
	return 0
}

// Open implements fs.NodeOpener with vfs.File.Open.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	cred, e := n.srv.cred(ctx)
	if e != 0 {
		return nil, 0, e
	}
	st := n.state()
	f, ok := st.vn.(vfs.File)
	if !ok {
		if _, isDir := st.vn.(vfs.Dir); isDir {
			return nil, 0, syscall.EISDIR
		}
		return nil, 0, syscall.ENOTSUP
	}
	h, err := f.Open(ctx, cred, openFlags(flags))
	if err != nil {
		return nil, 0, n.srv.errno("open", err)
	}
	if bf, ok := h.(vfs.BackingFiler); ok {
		if fh := n.srv.newBackedHandle(ctx, n, h, bf.BackingFile(), flags); fh != nil {
			return fh, 0, 0 // flags settled by rawFS.Open
		}
	}
	fh, fl := n.srv.newHandle(n, h, st.synthetic)
	return fh, fl, 0
}

// Create implements fs.NodeCreater with vfs.Creator.Create; a directory
// that is not a Creator is read-only (EROFS).
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return nil, nil, 0, e
	}
	c, ok := d.(vfs.Creator)
	if !ok {
		return nil, nil, 0, syscall.EROFS
	}
	vn, h, err := c.Create(ctx, cred, name, openFlags(flags)|syscall.O_CREAT, fileMode(mode))
	if err != nil {
		return nil, nil, 0, n.srv.errno("create", err, "name", name)
	}
	a, err := vn.Attr(ctx, cred)
	if err == nil && a.Mode.IsDir() {
		err = vfs.ErrIsDir
	}
	if err != nil {
		h.Close(context.WithoutCancel(ctx))
		return nil, nil, 0, n.srv.errno("create attr", err, "name", name)
	}
	fillAttr(&out.Attr, a)
	ch := n.child(ctx, name, vn, a)
	fh, fl := n.srv.newHandle(ch.Operations().(*node), h, a.Synthetic)
	return ch, fh, fl, 0
}

// Mkdir implements fs.NodeMkdirer with vfs.Creator.Mkdir; a directory that
// is not a Creator is read-only (EROFS).
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return nil, e
	}
	c, ok := d.(vfs.Creator)
	if !ok {
		return nil, syscall.EROFS
	}
	vn, err := c.Mkdir(ctx, cred, name, fileMode(mode))
	if err != nil {
		return nil, n.srv.errno("mkdir", err, "name", name)
	}
	a, err := vn.Attr(ctx, cred)
	if err != nil {
		return nil, n.srv.errno("mkdir attr", err, "name", name)
	}
	if !a.Mode.IsDir() {
		n.srv.log.Debug("fusefs: mkdir made a non-directory", "name", name, "mode", a.Mode)
		return nil, syscall.EIO
	}
	fillAttr(&out.Attr, a)
	return n.child(ctx, name, vn, a), 0
}

func (n *node) remove(ctx context.Context, name string, dir bool) syscall.Errno {
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return e
	}
	r, ok := d.(vfs.Remover)
	if !ok {
		return syscall.EROFS
	}
	if err := r.Remove(ctx, cred, name, dir); err != nil {
		return n.srv.errno("remove", err, "name", name)
	}
	return 0
}

// Unlink implements fs.NodeUnlinker with vfs.Remover.Remove; a directory
// that is not a Remover is read-only (EROFS).
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, false)
}

// Rmdir implements fs.NodeRmdirer with vfs.Remover.Remove; a directory that
// is not a Remover is read-only (EROFS).
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, true)
}

// renameNoreplace is RENAME_NOREPLACE of renameat2(2).
const renameNoreplace = 1

// Rename implements fs.NodeRenamer with vfs.Renamer.Rename. A directory
// that is not a Renamer is read-only (EROFS). RENAME_NOREPLACE is honoured
// with a lookup first; RENAME_EXCHANGE and RENAME_WHITEOUT are EINVAL.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags&^renameNoreplace != 0 {
		return syscall.EINVAL
	}
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return e
	}
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	nd, e := np.dir()
	if e != 0 {
		return e
	}
	r, ok := d.(vfs.Renamer)
	if !ok {
		return syscall.EROFS
	}
	if flags&renameNoreplace != 0 {
		_, err := nd.Lookup(ctx, cred, newName)
		if err == nil {
			return syscall.EEXIST
		}
		if en := vfs.Errno(err); en != syscall.ENOENT {
			return n.srv.errno("rename lookup", err, "name", newName)
		}
	}
	if err := r.Rename(ctx, cred, name, nd, newName); err != nil {
		return n.srv.errno("rename", err, "name", name, "new", newName)
	}
	return 0
}

// CopyFileRange implements fs.NodeCopyFileRanger with ENOSYS, which makes
// the kernel stop asking and copy with reads and writes.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Symlink implements fs.NodeSymlinker with vfs.Symlinker.Symlink; a
// directory that is not a Symlinker refuses links (EPERM, as a file system
// without symbolic links does).
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return nil, e
	}
	sl, ok := d.(vfs.Symlinker)
	if !ok {
		return nil, syscall.EPERM
	}
	vn, err := sl.Symlink(ctx, cred, target, name)
	if err != nil {
		return nil, n.srv.errno("symlink", err, "name", name)
	}
	return n.linked(ctx, cred, name, vn, out)
}

// Link implements fs.NodeLinker with vfs.Linker.Link. Both nodes must be
// of this tree; a directory that is not a Linker refuses links (EPERM).
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	cred, d, e := n.credDir(ctx)
	if e != 0 {
		return nil, e
	}
	tn, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	l, ok := d.(vfs.Linker)
	if !ok {
		return nil, syscall.EPERM
	}
	vn, err := l.Link(ctx, cred, tn.vnode(), name)
	if err != nil {
		return nil, n.srv.errno("link", err, "name", name)
	}
	return n.linked(ctx, cred, name, vn, out)
}

// linked answers a new name vn made in n: its attributes and inode.
func (n *node) linked(ctx context.Context, cred vfs.Cred, name string, vn vfs.Node, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, err := vn.Attr(ctx, cred)
	if err != nil {
		return nil, n.srv.errno("link attr", err, "name", name)
	}
	fillAttr(&out.Attr, a)
	return n.child(ctx, name, vn, a), 0
}

// Readlink implements fs.NodeReadlinker with vfs.Readlinker.Readlink. The
// kernel resolves the target on the client's side, as for any file system.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	cred, e := n.srv.cred(ctx)
	if e != 0 {
		return nil, e
	}
	rl, ok := n.vnode().(vfs.Readlinker)
	if !ok {
		return nil, syscall.EINVAL
	}
	t, err := rl.Readlink(ctx, cred)
	if err != nil {
		return nil, n.srv.errno("readlink", err)
	}
	return []byte(t), 0
}
