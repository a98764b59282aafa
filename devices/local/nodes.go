package local

import (
	"context"
	"io/fs"
	"os"
	"syscall"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// dataNode is a file or directory of the data tree. Its every operation is
// a syscall made as the caller, through the dispatcher (Host.As), whose
// checks come first; the device's method that serves it checks the
// file's permissions.
type dataNode struct {
	dev *Device
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
	a, err := do(ctx, n.dev.k.As(cred), abi.FsStat, &PathArgs{Path: n.rel})
	return vfs.Attr(a), err
}

func (n *dataNode) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	a, err := do(ctx, n.dev.k.As(cred), abi.FsSetattr, &SetattrArgs{Path: n.rel, Set: abi.SetAttr(s)})
	return vfs.Attr(a), err
}

func (n *dataNode) node(rel string, a vfs.Attr) vfs.Node {
	switch {
	case a.Mode.IsDir():
		return &dataDir{dataNode{n.dev, rel}}
	case a.Mode&fs.ModeSymlink != 0:
		return &dataLink{dataNode{n.dev, rel}}
	}
	return &dataFile{dataNode{n.dev, rel}}
}

// Symlink implements vfs.Symlinker with fs.symlink.
func (d *dataDir) Symlink(ctx context.Context, cred vfs.Cred, target, name string) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	rel := d.rel + "/" + name
	a, err := do(ctx, d.dev.k.As(cred), abi.FsSymlink, &SymlinkArgs{Target: target, Path: rel})
	if err != nil {
		return nil, err
	}
	return d.node(rel, vfs.Attr(a)), nil
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
		return nil, abi.E(abi.Op("link"), abi.Permission, syscall.EPERM)
	default:
		return nil, abi.E(abi.Op("link"), abi.Permission, syscall.EXDEV)
	}
	rel := d.rel + "/" + name
	a, err := do(ctx, d.dev.k.As(cred), abi.FsLink, &RenameArgs{Old: old, New: rel})
	if err != nil {
		return nil, err
	}
	return d.node(rel, vfs.Attr(a)), nil
}

// Readlink implements vfs.Readlinker with fs.readlink.
func (l *dataLink) Readlink(ctx context.Context, cred vfs.Cred) (string, error) {
	return do(ctx, l.dev.k.As(cred), abi.FsReadlink, &PathArgs{Path: l.rel})
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

// validName refuses a name that is not a file name (vfs.CheckName) with a
// 400 naming it.
func validName(name string) error {
	if err := vfs.CheckName(name); err != nil {
		return abi.E(abi.Invalid, abi.Path(name), err)
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
	at, err := do(ctx, d.dev.k.As(cred), abi.FsStat, &PathArgs{Path: rel})
	if err != nil {
		return nil, vfs.Attr{}, err
	}
	a := vfs.Attr(at)
	return d.node(rel, a), a, nil
}

func (d *dataDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	ents, err := do(ctx, d.dev.k.As(cred), abi.FsReaddir, &PathArgs{Path: d.rel})
	if err != nil {
		return nil, err
	}
	out := make([]vfs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = vfs.DirEntry{Name: e.Name, Node: d.node(d.rel+"/"+e.Name, vfs.Attr(e.Attr))}
	}
	return out, nil
}

func (d *dataDir) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm fs.FileMode) (vfs.Node, vfs.Handle, error) {
	if err := validName(name); err != nil {
		return nil, nil, err
	}
	rel := d.rel + "/" + name
	as := d.dev.k.As(cred)
	f, err := do(ctx, as, abi.FsOpen, &OpenArgs{Path: rel, Flags: flags | os.O_CREATE, Perm: perm})
	if err != nil {
		return nil, nil, err
	}
	return &dataFile{dataNode{d.dev, rel}}, &dataHandle{as: as, f: f, rel: rel}, nil
}

func (d *dataDir) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm fs.FileMode) (vfs.Node, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	rel := d.rel + "/" + name
	if _, err := do(ctx, d.dev.k.As(cred), abi.FsMkdir, &MkdirArgs{Path: rel, Perm: perm}); err != nil {
		return nil, err
	}
	return &dataDir{dataNode{d.dev, rel}}, nil
}

func (d *dataDir) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	if err := validName(name); err != nil {
		return err
	}
	_, err := do(ctx, d.dev.k.As(cred), abi.FsRemove, &RemoveArgs{Path: d.rel + "/" + name, Dir: dir})
	return err
}

func (d *dataDir) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	nd, ok := newDir.(*dataDir)
	if !ok {
		return abi.E(abi.Op("rename"), abi.Invalid, syscall.EXDEV)
	}
	if err := validName(name); err != nil {
		return err
	}
	if err := validName(newName); err != nil {
		return err
	}
	_, err := do(ctx, d.dev.k.As(cred), abi.FsRename, &RenameArgs{Old: d.rel + "/" + name, New: nd.rel + "/" + newName})
	return err
}

func (f *dataFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	as := f.dev.k.As(cred)
	fd, err := do(ctx, as, abi.FsOpen, &OpenArgs{Path: f.rel, Flags: flags &^ (os.O_CREATE | os.O_EXCL)})
	if err != nil {
		return nil, err
	}
	return &dataHandle{as: as, f: fd, rel: f.rel}, nil
}

// dataHandle is an open real file. Permission was checked at open, as for
// a POSIX file descriptor; each read and write is still a syscall.
type dataHandle struct {
	as  Dispatcher // who opened it
	f   *os.File
	rel string // its path as opened, for the homes' quotas
}

var (
	_ vfs.Truncater = (*dataHandle)(nil)
	_ vfs.Syncer    = (*dataHandle)(nil)
)

func (h *dataHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	return do(ctx, h.as, abi.FsPread, &IOArgs{F: h.f, Buf: p, Off: off})
}

func (h *dataHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return do(ctx, h.as, abi.FsPwrite, &IOArgs{F: h.f, Buf: p, Off: off, Rel: h.rel})
}

func (h *dataHandle) Truncate(ctx context.Context, size int64) error {
	_, err := do(ctx, h.as, abi.FsFtruncate, &TruncArgs{F: h.f, Size: size, Rel: h.rel})
	return err
}

func (h *dataHandle) Sync(ctx context.Context) error {
	_, err := do(ctx, h.as, abi.FsFsync, &TruncArgs{F: h.f})
	return err
}

func (h *dataHandle) Close(ctx context.Context) error { return h.f.Close() }

// Node returns the node of the data tree's directory rel ("home",
// "workspaces", "var/sessions"), to be bound at "/"+rel.
func (d *Device) Node(rel string) vfs.Dir { return &dataDir{dataNode{d, rel}} }
