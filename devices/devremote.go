package devices

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// /dev/<id>: a remote device's directory, there from when the device
// first registers until it is removed, online or not. status renders
// sys.device.get as the reader; fs/ is the device's exported tree,
// reached over its live connection, and EHOSTDOWN while it has none;
// shell/ holds the reader's exec sessions on the device, the same files
// as /dev/gsv/shell. Only those who may use the device (its owner, a
// granted group, root) see it in /dev and may enter it; to anyone else
// /dev/<id> does not exist, as for an id nobody has.

// devRoot is /dev: the files every Unix has (ns.DevFiles: null, zero,
// random, urandom), gsv, the local device, and the devices the reader may
// use (root: all), as sys.device.list (offline ones too) shows them to the
// reader.
func (r *Router) devRoot() vfs.Dir {
	local := r.devDir()
	return &vfs.FuncDir{Meta: ns.RootMeta("/dev", fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			out := append(ns.DevFiles(), vfs.DirEntry{Name: abi.LocalTarget, Node: local})
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.SysDeviceList, &abi.DeviceListArgs{IncludeOffline: true})
			if err != nil {
				return out, nil // a caller without sys.device.list sees the local device only
			}
			for _, d := range res.Devices {
				out = append(out, vfs.DirEntry{Name: d.DeviceID, Node: r.deviceNode(d.DeviceID)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if name == abi.LocalTarget {
				return local, nil
			}
			if n := ns.DevFile(name); n != nil {
				return n, nil
			}
			if abi.CheckDeviceID(name) != nil {
				return nil, vfs.ErrNotExist
			}
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.SysDeviceGet, &abi.DeviceGetArgs{DeviceID: name})
			if err != nil || res.Device == nil {
				return nil, vfs.ErrNotExist // none, or one the reader may not use
			}
			return r.deviceNode(name), nil
		}}
}

// deviceNode returns /dev/<id>, made once.
func (r *Router) deviceNode(id string) vfs.Dir {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.devDirs[id]
	if d == nil {
		d = r.deviceDir(id)
		r.devDirs[id] = d
	}
	return d
}

// forgetDevice drops /dev/<id>: the device was removed.
func (r *Router) forgetDevice(id string) {
	r.mu.Lock()
	delete(r.devDirs, id)
	r.mu.Unlock()
}

// deviceMeta is the Meta of a node of /dev/<id>: owned by the device's
// owner; who may use the device may read and search it (and write where
// mode lets the owner), nobody else may even reach it.
type deviceMeta struct {
	r    *Router
	id   string
	path string
	mode fs.FileMode
}

var _ vfs.Meta = (*deviceMeta)(nil)

// record is the device's record as cred may see it: nil if cred may not
// use the device.
func (m *deviceMeta) record(ctx context.Context, cred vfs.Cred) (*abi.Device, error) {
	res, err := kernel.Do(ctx, m.r.k, ns.CallerOf(cred, ""), abi.SysDeviceGet, &abi.DeviceGetArgs{DeviceID: m.id})
	if err != nil {
		return nil, err
	}
	return res.Device, nil
}

// Attr implements vfs.Meta.
func (m *deviceMeta) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	a := vfs.Attr{Ino: vfs.PathIno(m.path), Mode: m.mode, Mtime: time.Now(), User: "root", Group: "root", Synthetic: !m.mode.IsDir()}
	if d, err := m.record(ctx, cred); err == nil && d != nil {
		o := m.r.ownerMeta(ctx, d.OwnerUid)
		a.Uid, a.Gid, a.User, a.Group = uint32(o.HostUID), o.Gid, o.Owner, o.Group
	}
	return a, nil
}

// Access implements vfs.Meta: who may use the device may read and search;
// nobody writes the synthetic nodes.
func (m *deviceMeta) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error {
	d, err := m.record(ctx, cred)
	if err != nil {
		return err
	}
	if d == nil || want&vfs.WantWrite != 0 {
		return abi.E(abi.Path(m.path), abi.Permission, "permission denied")
	}
	return nil
}

// deviceDir is /dev/<id>.
func (r *Router) deviceDir(id string) vfs.Dir {
	base := "/dev/" + id
	status := &vfs.View{Meta: &deviceMeta{r: r, id: id, path: base + "/status", mode: 0o444},
		Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			d, err := (&deviceMeta{r: r, id: id}).record(ctx, cred)
			if err != nil {
				return nil, err
			}
			if d == nil {
				return nil, abi.E(abi.Path(base+"/status"), abi.Permission, "permission denied")
			}
			return renderDevice(d), nil
		}}
	return vfs.NewDir(&deviceMeta{r: r, id: id, path: base, mode: fs.ModeDir | 0o555},
		vfs.DirEntry{Name: "status", Node: status},
		vfs.DirEntry{Name: "fs", Node: &deviceFS{r: r, id: id, meta: &deviceMeta{r: r, id: id, path: base + "/fs", mode: fs.ModeDir | 0o755}}},
		vfs.DirEntry{Name: "shell", Node: r.shellDir(base+"/shell", id, &deviceMeta{r: r, id: id, path: base + "/shell", mode: fs.ModeDir | 0o555})},
	)
}

// renderDevice renders a device's status as key: value lines.
func renderDevice(d *abi.Device) []byte {
	var b strings.Builder
	stamp := func(ms *int64) string {
		if ms == nil || *ms == 0 {
			return "-"
		}
		return time.UnixMilli(*ms).UTC().Format(time.RFC3339)
	}
	last := d.LastSeenAt
	first := d.FirstSeenAt
	fmt.Fprintf(&b, "id: %s\n", d.DeviceID)
	fmt.Fprintf(&b, "owner: %d\n", d.OwnerUid)
	fmt.Fprintf(&b, "description: %q\n", d.Description)
	fmt.Fprintf(&b, "online: %v\n", d.Online)
	fmt.Fprintf(&b, "platform: %s\n", d.Platform)
	fmt.Fprintf(&b, "version: %s\n", d.Version)
	fmt.Fprintf(&b, "implements: %s\n", strings.Join(d.Implements, " "))
	fmt.Fprintf(&b, "groups: %s\n", strings.Join(d.Groups, " "))
	fmt.Fprintf(&b, "first seen: %s\n", stamp(&first))
	fmt.Fprintf(&b, "connected: %s\n", stamp(d.ConnectedAt))
	fmt.Fprintf(&b, "disconnected: %s\n", stamp(d.DisconnectedAt))
	fmt.Fprintf(&b, "last seen: %s\n", stamp(&last))
	return []byte(b.String())
}

// deviceFS is /dev/<id>/fs: the root of the device's exported tree on its
// live connection. Every operation on it asks for the live connection
// first (EHOSTDOWN without one); the nodes below it belong to the
// connection they were reached through, and fail once it ends.
type deviceFS struct {
	r    *Router
	id   string
	meta *deviceMeta
}

var (
	_ vfs.Dir     = (*deviceFS)(nil)
	_ vfs.Creator = (*deviceFS)(nil)
	_ vfs.Remover = (*deviceFS)(nil)
	_ vfs.Renamer = (*deviceFS)(nil)
)

// root returns the device's tree on its live connection, once cred may
// use the device.
func (f *deviceFS) root(ctx context.Context, cred vfs.Cred) (vfs.Dir, error) {
	if err := f.use(ctx, cred, vfs.WantExec); err != nil {
		return nil, err
	}
	d := f.r.remote(f.id)
	if d == nil {
		return nil, abi.E(abi.Path(f.meta.path), abi.Offline, fmt.Sprintf("device %q is offline", f.id))
	}
	return d.tree, nil
}

// use checks that cred may use the device: its owner, a granted group,
// root. Within its tree the device's own permissions decide the rest.
func (f *deviceFS) use(ctx context.Context, cred vfs.Cred, _ vfs.Want) error {
	d, err := f.meta.record(ctx, cred)
	if err != nil {
		return err
	}
	if d == nil {
		return abi.E(abi.Path(f.meta.path), abi.Permission, "permission denied")
	}
	return nil
}

// Access checks that cred may use the device.
func (f *deviceFS) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error {
	return f.use(ctx, cred, want)
}

// Attr implements vfs.Node: the tree's root's, or, offline, the
// directory's own.
func (f *deviceFS) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	if d := f.r.remote(f.id); d != nil {
		if a, err := d.tree.Attr(ctx, cred); err == nil {
			a.Ino = vfs.PathIno(f.meta.path)
			return a, nil
		}
	}
	return f.meta.Attr(ctx, cred)
}

// Lookup implements vfs.Dir.
func (f *deviceFS) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	d, err := f.root(ctx, cred)
	if err != nil {
		return nil, err
	}
	return d.Lookup(ctx, cred, name)
}

// ReadDir implements vfs.Dir.
func (f *deviceFS) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	d, err := f.root(ctx, cred)
	if err != nil {
		return nil, err
	}
	return d.ReadDir(ctx, cred)
}

// Create implements vfs.Creator.
func (f *deviceFS) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm fs.FileMode) (vfs.Node, vfs.Handle, error) {
	d, err := f.root(ctx, cred)
	if err != nil {
		return nil, nil, err
	}
	c, ok := d.(vfs.Creator)
	if !ok {
		return nil, nil, abi.E(abi.Path(f.meta.path), abi.Permission, "the device's tree takes no new files")
	}
	return c.Create(ctx, cred, name, flags, perm)
}

// Mkdir implements vfs.Creator.
func (f *deviceFS) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm fs.FileMode) (vfs.Node, error) {
	d, err := f.root(ctx, cred)
	if err != nil {
		return nil, err
	}
	c, ok := d.(vfs.Creator)
	if !ok {
		return nil, abi.E(abi.Path(f.meta.path), abi.Permission, "the device's tree takes no new directories")
	}
	return c.Mkdir(ctx, cred, name, perm)
}

// Remove implements vfs.Remover.
func (f *deviceFS) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	d, err := f.root(ctx, cred)
	if err != nil {
		return err
	}
	rm, ok := d.(vfs.Remover)
	if !ok {
		return abi.E(abi.Path(f.meta.path), abi.Permission, "the device's tree removes nothing")
	}
	return rm.Remove(ctx, cred, name, dir)
}

// Rename implements vfs.Renamer: within the device's tree only.
func (f *deviceFS) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	d, err := f.root(ctx, cred)
	if err != nil {
		return err
	}
	rn, ok := d.(vfs.Renamer)
	if !ok {
		return abi.E(abi.Path(f.meta.path), abi.Permission, "the device's tree renames nothing")
	}
	if nd, ok := newDir.(*deviceFS); ok {
		if nd.id != f.id {
			return abi.E(abi.Path(f.meta.path), abi.Invalid, "a rename does not cross devices")
		}
		newDir = d
	}
	return rn.Rename(ctx, cred, name, newDir, newName)
}
