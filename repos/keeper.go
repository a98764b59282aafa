package repos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// The keeper's switches: config/repos/home and config/repos/workspaces,
// "on" (the default, also when unset) or "off". Off, the keeper does not
// walk or commit homes (workspaces' working trees) until the key is on
// again; nothing written meanwhile is lost, since the next walk compares
// the whole tree. A workspace's explicit checkpoints (fork, merge, kill,
// reset, repo.workspace.checkpoint) happen whatever the switch says.
const (
	homeKey       = "config/repos/home"
	workspacesKey = "config/repos/workspaces"
)

// keeperRules are the rules of the keeper's config keys.
func keeperRules() []kernel.ConfigRule {
	onOff := func(v string) error {
		if v != "on" && v != "off" {
			return fmt.Errorf("%q: want on or off", v)
		}
		return nil
	}
	return []kernel.ConfigRule{{Pattern: homeKey, Check: onOff}, {Pattern: workspacesKey, Check: onOff}}
}

// switches reads the keeper's switches: whether homes and workspaces
// are kept now.
func (r *Room) switches(ctx context.Context) (home, workspaces bool) {
	home, workspaces = true, true
	res, err := kernel.Do(ctx, r.k, r.k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: "config/repos"})
	if err != nil {
		return
	}
	for _, e := range res.Entries {
		switch e.Key {
		case homeKey:
			home = e.Value != "off"
		case workspacesKey:
			workspaces = e.Value != "off"
		}
	}
	return
}

// keepOnce is one round of the keeper: every user's home, then every
// working tree, each committed if it changed, as its switch allows.
func (r *Room) keepOnce(ctx context.Context) {
	home, workspaces := r.switches(ctx)
	if home {
		users, err := r.k.Users(ctx)
		if err == nil {
			for _, u := range users {
				if u.Uid == kernel.RootUID || u.Home == "" || r.journal.busy(path.Clean(u.Home), time.Now()) {
					continue
				}
				if _, err := r.CommitHome(ctx, u.Uid); err != nil && ctx.Err() == nil {
					level := slog.LevelWarn
					if abi.KindOf(err) == abi.NotExist || errors.Is(err, vfs.ErrNotExist) {
						level = slog.LevelDebug // a home not there (yet) is nothing to keep
					}
					r.log.Log(ctx, level, "repos: committing a home", "user", u.Username, "err", err)
				}
			}
		}
	}
	if workspaces {
		r.autosaveAll(ctx)
	}
}

// autosaveAll commits each working tree that changed (AutosaveWorkspace).
func (r *Room) autosaveAll(ctx context.Context) {
	rows, err := r.st.QueryContext(ctx, `SELECT `+wsColumns+` FROM repos_workspaces ORDER BY created_at, id`)
	if err != nil {
		return
	}
	var ws []*workspace
	for rows.Next() {
		w, err := scanWorkspace(rows)
		if err != nil {
			break
		}
		ws = append(ws, w)
	}
	rows.Close()
	for _, w := range ws {
		if ctx.Err() != nil {
			return
		}
		if r.journal.busy(w.dir(), time.Now()) {
			continue
		}
		if _, err := r.autosave(ctx, w); err != nil && ctx.Err() == nil {
			level := slog.LevelWarn
			if abi.KindOf(err) == abi.NotExist || errors.Is(err, vfs.ErrNotExist) {
				level = slog.LevelDebug // removed meanwhile
			}
			r.log.Log(ctx, level, "repos: autosaving a workspace", "workspace", w.ID, "err", err)
		}
	}
}

// AutosaveWorkspace walks the working tree id as its owner and commits
// it on its branch if it changed, one commit per writer ("autosave:
// <paths>"); it returns the new head, or "" if nothing changed. The
// keeper calls it; so do tests.
func (r *Room) AutosaveWorkspace(ctx context.Context, id string) (string, error) {
	w, err := r.workspaceByID(ctx, r.k.KernelCaller(), id)
	if err != nil {
		return "", err
	}
	return r.autosave(ctx, w)
}

// autosave is AutosaveWorkspace of w.
func (r *Room) autosave(ctx context.Context, w *workspace) (string, error) {
	id, err := r.k.IdentityOf(ctx, w.OwnerUid)
	if err != nil {
		return "", err
	}
	h, changed, err := r.checkpointAs(ctx, &kernel.Caller{Identity: id}, w, "autosave", true, false)
	if err != nil || !changed {
		return "", err
	}
	return h.String(), nil
}

// workspaceRemove serves repo.workspace.remove: the caller's working
// tree (root: anyone's) is committed a last time (as the caller), the
// processes attached to it are detached (their cwd becomes their owner's
// home), and its directory and record are removed; its branch and
// repository stay, so nothing is lost. One that a process is running in
// now (a run in progress: proc.list's state "running", made by the
// kernel, so any user's process counts) is a 409 naming the processes,
// and nothing is changed.
func (r *Room) workspaceRemove(ctx context.Context, c *kernel.Caller, a *abi.WorkspaceRemoveArgs) (*abi.WorkspaceRemoveResult, error) {
	w, err := r.workspaceByID(ctx, c, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	var attached []abi.Process
	if err := r.k.Permit(r.k.KernelCaller(), abi.ProcList.Name); err == nil { // a kernel with no proc room has no processes
		ps, err := kernel.Do(ctx, r.k, r.k.KernelCaller(), abi.ProcList, &abi.ListArgs{})
		if err != nil {
			return nil, err
		}
		var running []string
		for _, p := range ps.Processes {
			if p.WorkspaceID == nil || *p.WorkspaceID != w.ID {
				continue
			}
			attached = append(attached, p)
			if p.State == "running" {
				running = append(running, p.Pid)
			}
		}
		if len(running) > 0 {
			return nil, abi.E(abi.Busy, abi.Path(w.dir()), fmt.Sprintf("workspace %s is in use: process %s is running in it (gsv kill it, or wait for its run to end); nothing was removed",
				w.ID, strings.Join(running, ", ")))
		}
	}
	head, _, err := r.checkpoint(ctx, c, w, "workspace.remove "+w.ID)
	if err != nil {
		return nil, err
	}
	for _, p := range attached {
		home := ""
		if u, err := r.k.UserOf(ctx, p.Uid); err == nil {
			home = u.Home
		}
		if _, err := kernel.Do(ctx, r.k, r.k.KernelCaller(), abi.ProcSetidentity,
			&abi.SetIdentityArgs{Pid: p.Pid, Identity: &abi.Identity{Cwd: home}}); err != nil && abi.KindOf(err) != abi.NotExist {
			return nil, err
		}
	}
	if _, err := kernel.Do(ctx, r.k, c, abi.FsWorkspaceRemove, &abi.WorkspaceMakeArgs{ID: w.ID}); err != nil && abi.KindOf(err) != abi.NotExist {
		return nil, err
	}
	if _, err := r.st.Exec(ctx, `DELETE FROM repos_workspaces WHERE id=?`, w.ID); err != nil {
		return nil, err
	}
	r.homeMu.Lock()
	delete(r.wsSeen, w.ID)
	r.homeMu.Unlock()
	r.journal.drain(w.dir())
	return &abi.WorkspaceRemoveResult{WorkspaceID: w.ID, Repo: w.repo().id(), Branch: w.Branch, Head: head.String()}, nil
}
