package local

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The data tree: /home, /workspaces and /var/sessions are real
// directories under <state>/fs. Ownership follows the tree: everything
// under /home/<user> (and /var/sessions/<user>) is owned by <user> (group:
// the user's primary group); the permission bits are the real files' own.
// /home and /workspaces themselves belong to root. This file holds the
// permission checks every operation on it makes.

// clean validates a namespace path for who and returns it absolute and
// clean. It resolves "~" and relative paths against who's home and cwd,
// and refuses "..", NUL bytes and invalid UTF-8.
func clean(who Who, p string) (string, error) {
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
		p = who.Home + p[1:]
	case !strings.HasPrefix(p, "/"):
		p = path.Join(who.Cwd, p)
	}
	return path.Clean(p), nil
}

// inData reports whether rel (a clean path without its leading "/") is in
// the data tree.
func inData(rel string) bool {
	for _, r := range dataRoots {
		if rel == r || strings.HasPrefix(rel, r+"/") {
			return true
		}
	}
	return false
}

// resolve validates a namespace path for who (see clean) and returns it
// relative to the data root ("home/alice/notes.txt"); a path outside the
// data tree is a 404.
func resolve(who Who, p string) (string, error) {
	p, err := clean(who, p)
	if err != nil {
		return "", err
	}
	rel := strings.TrimPrefix(p, "/")
	if !inData(rel) {
		return "", abi.E(abi.NotExist, abi.Path(p), "not in the data tree (/home, /workspaces, /var/sessions)")
	}
	return rel, nil
}

// place is where a path of an fs.* syscall leads: a file of the data tree
// (rel) or, with ns, a node of the namespace reached by walking it.
type place struct {
	path string // absolute and clean
	rel  string // relative to the data root, if !ns
	ns   bool
}

// where validates p for who (see clean) and tells whether the data tree or
// the namespace serves it. Without a namespace root (SetRoot), only the
// data tree is served.
func (d *Device) where(who Who, p string) (place, error) {
	p, err := clean(who, p)
	if err != nil {
		return place{}, err
	}
	rel := strings.TrimPrefix(p, "/")
	if inData(rel) {
		return place{path: p, rel: rel}, nil
	}
	if d.nsRoot() == nil {
		return place{}, abi.E(abi.NotExist, abi.Path(p), "not in the data tree (/home, /workspaces, /var/sessions)")
	}
	return place{path: p, ns: true}, nil
}

// rootOwner owns the data tree outside the users' parts.
var rootOwner = Owner{Uid: 0, Gid: 0, HostUID: 0, User: "root", Group: "root"}

// ownerCache maps user names to owners; users are never renamed.
type ownerCache struct {
	mu sync.Mutex
	m  map[string]Owner
	ws map[string]string // workspace ids to their owners' names (never changed)
}

// ownerOf returns the owner of the data path rel: <user> for
// /home/<user>/... and /var/sessions/<user>/..., the maker of
// /workspaces/<id>/... (workspaces.go), root for the rest (and for a
// name that is no user).
func (d *Device) ownerOf(ctx context.Context, rel string) Owner {
	var name string
	if parts := strings.SplitN(rel, "/", 3); len(parts) >= 2 && parts[0] == "home" {
		name = parts[1]
	} else if parts := strings.SplitN(rel, "/", 4); len(parts) >= 3 && parts[0] == "var" && parts[1] == "sessions" {
		name = parts[2] // /var/sessions/<user>/... belongs to <user>
	} else if parts := strings.SplitN(rel, "/", 3); len(parts) >= 2 && parts[0] == "workspaces" {
		if name = d.workspaceUser(parts[1]); name == "" { // fs.workspace.make's
			return rootOwner
		}
	} else {
		return rootOwner
	}
	d.owners.mu.Lock()
	o, ok := d.owners.m[name]
	d.owners.mu.Unlock()
	if ok {
		return o
	}
	o, err := d.k.Owner(ctx, name)
	if err != nil {
		return rootOwner
	}
	d.owners.mu.Lock()
	if d.owners.m == nil {
		d.owners.m = map[string]Owner{}
	}
	d.owners.m[name] = o
	d.owners.mu.Unlock()
	return o
}

// allowed reports whether who may access a file with mode and owner o.
func allowed(who Who, o Owner, mode fs.FileMode, want vfs.Want) bool {
	return who.Allowed(o.Uid, o.Gid, mode, uint32(want))
}

// access checks that who may search every directory above rel and use rel
// itself as want says (want 0: only reach it). It returns rel's FileInfo.
func (d *Device) access(ctx context.Context, who Who, rel string, want vfs.Want) (fs.FileInfo, error) {
	if err := d.searchAbove(ctx, who, rel); err != nil {
		return nil, err
	}
	return d.usable(ctx, who, rel, want)
}

// searchAbove checks that who may search every directory above rel.
func (d *Device) searchAbove(ctx context.Context, who Who, rel string) error {
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			if err := d.searchable(ctx, who, rel[:i], rel); err != nil {
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
func (d *Device) accessStep(ctx context.Context, who Who, rel string, want vfs.Want) (fs.FileInfo, error) {
	fi, err := d.lstatStep(ctx, who, rel)
	if err != nil {
		return nil, err
	}
	return d.usableInfo(ctx, who, rel, want, fi)
}

// lstatStep is accessStep for a name that may be a symbolic link (stat
// and readlink, which never follow it): it checks that rel's parent is
// searchable and returns rel's own FileInfo.
func (d *Device) lstatStep(ctx context.Context, who Who, rel string) (fs.FileInfo, error) {
	i := strings.LastIndexByte(rel, '/')
	if i <= 0 {
		fi, err := d.lstatData(rel)
		if err != nil {
			return nil, abi.E(abi.Path("/"+rel), err)
		}
		return fi, nil
	}
	dir, fi, err := d.lstatPair(rel)
	if dir == nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	// The parent's search permission comes before any error about rel.
	if serr := d.searchableInfo(ctx, who, rel[:i], rel, dir); serr != nil {
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
func (d *Device) reach(ctx context.Context, who Who, rel string) (fs.FileInfo, error) {
	if err := d.searchAbove(ctx, who, rel); err != nil {
		return nil, err
	}
	fi, err := d.lstatData(rel)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return fi, nil
}

// searchable checks that dir, above rel, is a directory who may search.
func (d *Device) searchable(ctx context.Context, who Who, dir, rel string) error {
	fi, err := d.lstatData(dir)
	if err != nil {
		return abi.E(abi.Path("/"+rel), err)
	}
	return d.searchableInfo(ctx, who, dir, rel, fi)
}

// searchableInfo is searchable with dir's FileInfo at hand.
func (d *Device) searchableInfo(ctx context.Context, who Who, dir, rel string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return abi.E(abi.Path("/"+rel), syscall.ENOTDIR)
	}
	if !allowed(who, d.ownerOf(ctx, dir), fi.Mode(), vfs.WantExec) {
		return abi.E(abi.Path("/"+rel), abi.Permission, "permission denied")
	}
	return nil
}

// usable stats rel, refuses a symbolic link, and checks want against its
// mode and owner.
func (d *Device) usable(ctx context.Context, who Who, rel string, want vfs.Want) (fs.FileInfo, error) {
	fi, err := d.lstatData(rel)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return d.usableInfo(ctx, who, rel, want, fi)
}

// usableInfo is usable with rel's FileInfo at hand.
func (d *Device) usableInfo(ctx context.Context, who Who, rel string, want vfs.Want, fi fs.FileInfo) (fs.FileInfo, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, abi.E(abi.Path("/"+rel), abi.Permission, "symbolic links are not followed")
	}
	if want != 0 && !allowed(who, d.ownerOf(ctx, rel), fi.Mode(), want) {
		return nil, abi.E(abi.Path("/"+rel), abi.Permission, "permission denied")
	}
	return fi, nil
}

// lstatData stats rel (a final symlink itself, not its target) beneath
// the data root, following no symbolic link on the way: an O_PATH openat2
// with RESOLVE_NO_SYMLINKS (which yields the link itself for a final one),
// creating, removing or renaming rel needs.
func (d *Device) accessParent(ctx context.Context, who Who, rel string) error {
	parent := path.Dir(rel)
	if parent == "." || !strings.Contains(rel, "/") {
		if who.IsRoot() {
			return nil
		}
		return abi.E(abi.Path("/"+rel), abi.Permission, "permission denied")
	}
	fi, err := d.access(ctx, who, parent, vfs.WantWrite|vfs.WantExec)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return abi.E(abi.Path("/"+rel), abi.NotExist, syscall.ENOTDIR)
	}
	return nil
}

// attrOf turns a real file's info into a vfs.Attr.
func (d *Device) attrOf(ctx context.Context, rel string, fi fs.FileInfo) vfs.Attr {
	o := d.ownerOf(ctx, rel)
	a := vfs.Attr{Mode: fi.Mode(), Size: fi.Size(), Mtime: fi.ModTime(),
		Uid: uint32(o.HostUID), Gid: o.Gid, User: o.User, Group: o.Group}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		a.Ino = st.Ino
		a.Nlink = uint32(st.Nlink)
	}
	if fi.IsDir() {
		a.Size = 0
	}
	return a
}
