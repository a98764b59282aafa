package local

import (
	"context"
	"errors"
	"os"
	"path"
	"strings"

	"gsvfs.dev/gsvfs/abi"
)

// Workspaces: /workspaces belongs to root, and each /workspaces/<id>
// under it to the user who made it (fs.workspace.make, which the repos
// room makes as that user). Who owns a workspace is kept beside the data
// tree, in <data>/.workspace-owners/<id> (the owner's name), outside
// every tree the namespace shows; the directory is made after its owner
// is recorded, so a crash leaves at most an owner with no directory,
// which a retry of the same id reuses.

// wsOwners is the directory, relative to the data root, of the
// workspaces' owner records.
const wsOwners = ".workspace-owners"

// validWorkspaceID reports whether id is a workspace's name: 1-64 of
// a-z, 0-9 and '-', not beginning with '-'.
func validWorkspaceID(id string) bool {
	if id == "" || len(id) > 64 || id[0] == '-' {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// workspaceUser returns the name of the user who owns the workspace id,
// or "" (root's, as /workspaces is) when none is recorded.
func (d *Device) workspaceUser(id string) string {
	if !validWorkspaceID(id) {
		return ""
	}
	d.owners.mu.Lock()
	name, ok := d.owners.ws[id]
	d.owners.mu.Unlock()
	if ok {
		return name
	}
	b, err := d.data.ReadFile(path.Join(wsOwners, id))
	if err != nil {
		return "" // none yet: not cached, fs.workspace.make may record one
	}
	name = strings.TrimSpace(string(b))
	d.owners.mu.Lock()
	if d.owners.ws == nil {
		d.owners.ws = map[string]string{}
	}
	d.owners.ws[id] = name
	d.owners.mu.Unlock()
	return name
}

// MakeWorkspace is fs.workspace.make (internal): it makes the directory
// /workspaces/<ID>, mode 0700, owned by the caller (their files under it
// too), and returns its path. A workspace that exists is a 409 unless it
// is the caller's already. Root's workspace is root's as the rest of
// /workspaces is.
func (d *Device) MakeWorkspace(ctx context.Context, who Who, a *abi.WorkspaceMakeArgs) (string, error) {
	if !validWorkspaceID(a.ID) {
		return "", abi.E(abi.Invalid, abi.Path(a.ID), "a workspace id is 1-64 of a-z, 0-9 and '-'")
	}
	rel := path.Join("workspaces", a.ID)
	if u := d.workspaceUser(a.ID); u != "" && u != who.Username {
		return "", abi.E(abi.Busy, abi.Path("/"+rel), "another user's workspace")
	}
	if who.Uid != 0 {
		if err := d.data.Mkdir(wsOwners, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", abi.E(abi.Path("/"+rel), err)
		}
		if err := d.data.WriteFile(path.Join(wsOwners, a.ID), []byte(who.Username+"\n"), 0o600); err != nil {
			return "", abi.E(abi.Path("/"+rel), err)
		}
	}
	if err := d.mkdirData(ctx, rel, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", abi.E(abi.Path("/"+rel), err)
	}
	return "/" + rel, nil
}

// RemoveWorkspace is fs.workspace.remove (internal; the repos room makes
// it as the caller of repo.workspace.remove, after its checks): it
// removes the directory /workspaces/<ID> and everything in it (links are
// removed, never followed), then its owner record. Only its owner (or
// root) removes it: another user's is a 403; a bad id a 400; one that is
// not there is a 404.
func (d *Device) RemoveWorkspace(ctx context.Context, who Who, a *abi.WorkspaceMakeArgs) (struct{}, error) {
	if !validWorkspaceID(a.ID) {
		return struct{}{}, abi.E(abi.Invalid, abi.Path(a.ID), "a workspace id is 1-64 of a-z, 0-9 and '-'")
	}
	rel := path.Join("workspaces", a.ID)
	if _, err := d.data.Lstat(rel); err != nil {
		return struct{}{}, abi.E(abi.NotExist, abi.Path("/"+rel), "no such workspace")
	}
	if who.Uid != 0 && d.workspaceUser(a.ID) != who.Username {
		return struct{}{}, abi.E(abi.Permission, abi.Path("/"+rel), "another user's workspace")
	}
	if err := d.data.RemoveAll(rel); err != nil {
		return struct{}{}, abi.E(abi.Path("/"+rel), err)
	}
	if err := d.data.Remove(path.Join(wsOwners, a.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return struct{}{}, abi.E(abi.Path("/"+rel), err)
	}
	d.owners.mu.Lock()
	delete(d.owners.ws, a.ID)
	d.owners.mu.Unlock()
	return struct{}{}, nil
}
