package repos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Workspaces: /workspaces/<id> is a working tree owned by the user who
// made it (the local device's fs.workspace.make, made as that user), and
// the repository <owner>/ws-<root> (kind "workspace") keeps its history.
// A workspace made with mode "new" is its own root, on branch main; a
// fork (mode "attach" with a branch) is a working tree of its own,
// /workspaces/<new id>, on that branch of its root's repository, made
// from the files of the working tree it branched from. A checkpoint
// commits a working tree's files (walked as the caller, as the home
// keeper walks a home) on its branch; a merge brings a fork's branch
// into a working tree (merge.go).

// wsPrefix begins the name of a workspace's repository.
const wsPrefix = "ws-"

// workspace is a working tree's row.
type workspace struct {
	ID, Root, Branch, Owner string
	OwnerUid                uint32
	Label                   *string
	Kind                    string
	CreatedAt, UpdatedAt    int64
}

// dir is the working tree's path in the namespace.
func (w *workspace) dir() string { return "/workspaces/" + w.ID }

// repo is the record key of the workspace's repository.
func (w *workspace) repo() *record {
	return &record{Owner: w.Owner, Name: wsPrefix + w.Root, OwnerUid: w.OwnerUid, Kind: "workspace"}
}

const wsColumns = `id, root, branch, owner, owner_uid, label, kind, created_at, updated_at`

// scanWorkspace reads one row of wsColumns.
func scanWorkspace(row interface{ Scan(...any) error }) (*workspace, error) {
	w := &workspace{}
	if err := row.Scan(&w.ID, &w.Root, &w.Branch, &w.Owner, &w.OwnerUid, &w.Label, &w.Kind, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return nil, err
	}
	return w, nil
}

// workspaceByID returns the working tree id if c may use it (its owner
// or root): another user's is a 403, none a 404.
func (r *Room) workspaceByID(ctx context.Context, c *kernel.Caller, id string) (*workspace, error) {
	w, err := scanWorkspace(r.st.QueryRowContext(ctx, `SELECT `+wsColumns+` FROM repos_workspaces WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.NotExist, abi.Path("/workspaces/"+id), "no such workspace")
	}
	if err != nil {
		return nil, err
	}
	if !c.IsRoot() && c.Uid != w.OwnerUid {
		return nil, abi.E(abi.Permission, abi.Path(w.dir()), "another user's workspace")
	}
	return w, nil
}

// workspaceOnBranch returns root's working tree on branch, or nil.
func (r *Room) workspaceOnBranch(ctx context.Context, root, branch string) (*workspace, error) {
	w, err := scanWorkspace(r.st.QueryRowContext(ctx, `SELECT `+wsColumns+` FROM repos_workspaces WHERE root=? AND branch=?`, root, branch))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return w, err
}

// newWorkspaceID is a fresh working tree name: 12 hex digits.
func newWorkspaceID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// workspaceOpen serves repo.workspace.open (internal: proc.spawn makes
// it as the spawning user).
func (r *Room) workspaceOpen(ctx context.Context, c *kernel.Caller, a *abi.WorkspaceOpenArgs) (*abi.WorkspaceOpenResult, error) {
	if err := kernel.CheckText("label", a.Label, kernel.MaxLabel); err != nil {
		return nil, err
	}
	switch a.Mode {
	case "new":
		kind := a.Kind
		switch kind {
		case "":
			kind = "thread"
		case "thread", "app", "shared":
		default:
			return nil, abi.E(abi.Invalid, fmt.Sprintf("workspace kind %q: want thread, app or shared", kind))
		}
		id := newWorkspaceID()
		w := &workspace{ID: id, Root: id, Branch: "main", Owner: c.Username, OwnerUid: c.Uid, Kind: kind}
		if a.Label != "" {
			w.Label = &a.Label
		}
		if err := r.makeWorkspace(ctx, c, w, plumbing.ZeroHash); err != nil {
			return nil, err
		}
		return r.opened(w, true), nil
	case "attach":
		src, err := r.workspaceByID(ctx, c, a.WorkspaceID)
		if err != nil {
			return nil, err
		}
		if a.Branch == "" || a.Branch == src.Branch {
			return r.opened(src, false), nil
		}
		return r.fork(ctx, c, src, a.Branch)
	}
	return nil, abi.E(abi.Invalid, fmt.Sprintf("workspace mode %q: repo.workspace.open makes new and attach", a.Mode))
}

// opened is w as repo.workspace.open answers it.
func (r *Room) opened(w *workspace, created bool) *abi.WorkspaceOpenResult {
	return &abi.WorkspaceOpenResult{WorkspaceID: w.ID, Dir: w.dir(), Repo: w.repo().id(), Branch: w.Branch, Created: created}
}

// fork makes a working tree on branch of src's repository from src's
// files now (checkpointed first), or opens the one there is.
func (r *Room) fork(ctx context.Context, c *kernel.Caller, src *workspace, branch string) (*abi.WorkspaceOpenResult, error) {
	if _, err := branchRef(branch); err != nil {
		return nil, err
	}
	if old, err := r.workspaceOnBranch(ctx, src.Root, branch); err != nil || old != nil {
		if err != nil {
			return nil, err
		}
		return r.opened(old, false), nil
	}
	head, _, err := r.checkpoint(ctx, c, src, "fork: branch "+branch)
	if err != nil {
		return nil, err
	}
	id := newWorkspaceID()
	w := &workspace{ID: id, Root: src.Root, Branch: branch, Owner: src.Owner, OwnerUid: src.OwnerUid, Label: src.Label, Kind: src.Kind}
	if err := r.makeWorkspace(ctx, c, w, head); err != nil {
		return nil, err
	}
	return r.opened(w, true), nil
}

// makeWorkspace makes w's directory (as c), its repository (if w is a
// root) and its branch at from (a root's: an empty first commit), fills
// the directory with from's files, and records w.
func (r *Room) makeWorkspace(ctx context.Context, c *kernel.Caller, w *workspace, from plumbing.Hash) error {
	if _, err := kernel.Do(ctx, r.k, c, abi.FsWorkspaceMake, &abi.WorkspaceMakeArgs{ID: w.ID}); err != nil {
		return err
	}
	rec, err := r.ensure(ctx, w.repo(), "refs/heads/main")
	if err != nil {
		return err
	}
	unlock := r.lock(rec)
	g, err := r.open(rec)
	if err != nil {
		unlock()
		return err
	}
	ref := plumbing.NewBranchReferenceName(w.Branch)
	if from.IsZero() {
		from, err = r.commit(g, c, plumbing.ZeroHash, nil, "Create workspace "+w.ID)
		if err != nil {
			unlock()
			return err
		}
	}
	if err := g.Storer.CheckAndSetReference(plumbing.NewHashReference(ref, from), nil); err != nil {
		unlock()
		return abi.E(abi.Busy, abi.Path(rec.id()+"@"+w.Branch), "the branch is there already")
	}
	files, err := r.treeOf(g, from)
	unlock()
	if err != nil {
		return err
	}
	for p, e := range files {
		b, err := readBlob(g, e.hash)
		if err != nil {
			return err
		}
		if err := r.writeAs(ctx, c, w.dir()+"/"+p, b); err != nil {
			return err
		}
	}
	now := r.now().UnixMilli()
	_, err = r.st.Exec(ctx, `INSERT INTO repos_workspaces (`+wsColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.Root, w.Branch, w.Owner, w.OwnerUid, w.Label, w.Kind, now, now)
	return err
}

// writeAs writes b to the namespace path p as c (fs.write).
func (r *Room) writeAs(ctx context.Context, c *kernel.Caller, p string, b []byte) error {
	res, err := kernel.Do(ctx, r.k, c, abi.FsWrite, &abi.FSWriteArgs{Path: p, Content: string(b)})
	if err != nil {
		return err
	}
	if !res.OK {
		return abi.E(abi.Path(p), abi.Other, res.Error)
	}
	return nil
}

// deleteAs removes the namespace path p as c (fs.delete).
func (r *Room) deleteAs(ctx context.Context, c *kernel.Caller, p string) error {
	res, err := kernel.Do(ctx, r.k, c, abi.FsDelete, &abi.FSDeleteArgs{Path: p})
	if err != nil {
		return err
	}
	if !res.OK {
		return abi.E(abi.Path(p), abi.Other, res.Error)
	}
	return nil
}

// workspaceCheckpoint serves repo.workspace.checkpoint.
func (r *Room) workspaceCheckpoint(ctx context.Context, c *kernel.Caller, a *abi.WorkspaceCheckpointArgs) (*abi.WorkspaceCheckpointResult, error) {
	w, err := r.workspaceByID(ctx, c, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if len(a.Message) > maxMessage {
		return nil, abi.E(abi.Invalid, "message: at most 64 KiB")
	}
	msg := a.Message
	if msg == "" {
		msg = "checkpoint"
	}
	head, changed, err := r.checkpointAs(ctx, c, w, msg, false, a.AllowEmpty)
	if err != nil {
		return nil, err
	}
	return &abi.WorkspaceCheckpointResult{WorkspaceID: w.ID, Repo: w.repo().id(), Branch: w.Branch, Head: head.String(), Changed: changed}, nil
}

// checkpoint walks w's directory as c and commits it on w's branch when
// its tree differs from the branch's head, as c; it returns the head.
func (r *Room) checkpoint(ctx context.Context, c *kernel.Caller, w *workspace, msg string) (plumbing.Hash, bool, error) {
	return r.checkpointAs(ctx, c, w, msg, false, false)
}

// checkpointAs is checkpoint; byWriter commits the change as its writers
// did (one commit per writer, journal.go), with msg as the subject's
// first word, rather than as c; allowEmpty commits (as c) even when
// nothing changed, a mark in the history.
func (r *Room) checkpointAs(ctx context.Context, c *kernel.Caller, w *workspace, msg string, byWriter, allowEmpty bool) (plumbing.Hash, bool, error) {
	rec, err := r.lookup(ctx, w.Owner, wsPrefix+w.Root)
	if err != nil || rec == nil {
		return plumbing.ZeroHash, false, errors.Join(err, abi.E(abi.NotExist, abi.Path(w.repo().id()), "no repository"))
	}
	unlock := r.lock(rec)
	defer unlock()
	g, err := r.open(rec)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	notes := r.journal.drain(w.dir())
	r.homeMu.Lock()
	seen := r.wsSeen[w.ID]
	r.homeMu.Unlock()
	if seen == nil {
		seen = map[string]homeSeen{}
	}
	walk := &homeWalk{r: r, ctx: ctx, cred: c.Identity, seen: seen, next: map[string]homeSeen{}, files: flatTree{}, st: g.Storer}
	dir, err := walk.find(w.dir())
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if err := walk.walk(dir, "", 0); err != nil {
		return plumbing.ZeroHash, false, err
	}
	r.homeMu.Lock()
	r.wsSeen[w.ID] = walk.next
	r.homeMu.Unlock()
	th, err := writeTree(g.Storer, walk.files)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	ref := plumbing.NewBranchReferenceName(w.Branch)
	cur, err := g.Reference(ref, false)
	if err != nil {
		return plumbing.ZeroHash, false, abi.E(abi.NotExist, abi.Path(rec.id()+"@"+w.Branch), err)
	}
	if cm, err := g.CommitObject(cur.Hash()); err == nil && cm.TreeHash == th && !allowEmpty {
		return cur.Hash(), false, nil
	}
	oldFiles, changed, err := changedPaths(g.Storer, cur.Hash(), walk.files)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	tail := ""
	if len(walk.skipped) > 0 {
		tail = "\n\nRecorded, not stored:\n" + strings.Join(walk.skipped, "\n")
	}
	var h plumbing.Hash
	if byWriter && len(changed) > 0 {
		groups := groupByWriter(changed, notes, writer{name: w.Owner, uid: w.OwnerUid})
		h, err = r.commitByWriter(g, cur.Hash(), oldFiles, walk.files, groups, msg+": ", tail)
	} else {
		h, err = r.commit(g, c, cur.Hash(), &th, msg+"\n\n"+summarize(changed)+tail+"\n")
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if err := g.Storer.CheckAndSetReference(plumbing.NewHashReference(ref, h), cur); err != nil {
		return plumbing.ZeroHash, false, err
	}
	r.touch(ctx, rec)
	if _, err := r.st.Exec(ctx, `UPDATE repos_workspaces SET updated_at=? WHERE id=?`, r.now().UnixMilli(), w.ID); err != nil {
		r.log.Warn("repos: recording a checkpoint", "workspace", w.ID, "err", err)
	}
	return h, true, nil
}

// workspaceList serves sys.workspace.list: the caller's working trees
// (root: every user's, or Uid's), oldest first.
func (r *Room) workspaceList(ctx context.Context, c *kernel.Caller, a *abi.WorkspaceListArgs) (*abi.WorkspaceListResult, error) {
	q, args := `SELECT `+wsColumns+` FROM repos_workspaces`, []any{}
	switch {
	case a.Uid != nil && !c.IsRoot() && *a.Uid != c.Uid:
		return nil, abi.E(abi.Permission, "uid: a user lists only their own workspaces")
	case a.Uid != nil:
		q, args = q+` WHERE owner_uid=?`, append(args, *a.Uid)
	case !c.IsRoot():
		q, args = q+` WHERE owner_uid=?`, append(args, c.Uid)
	}
	rows, err := r.st.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	var ws []*workspace
	for rows.Next() {
		w, err := scanWorkspace(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		ws = append(ws, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// The processes working in each, as the caller may list them (a
	// kernel without proc lists none).
	procs := map[string][]abi.Process{}
	if ps, err := kernel.Do(ctx, r.k, c, abi.ProcList, &abi.ListArgs{Uid: a.Uid}); err == nil {
		for _, p := range ps.Processes {
			if p.WorkspaceID != nil {
				procs[*p.WorkspaceID] = append(procs[*p.WorkspaceID], p)
			}
		}
	}
	out := &abi.WorkspaceListResult{Workspaces: []abi.WorkspaceInfo{}}
	for _, w := range ws {
		info := abi.WorkspaceInfo{WorkspaceID: w.ID, OwnerUid: w.OwnerUid, Label: w.Label, Kind: w.Kind, State: "active",
			CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, DefaultBranch: w.Branch, Repo: w.repo().id(), Root: w.Root, Dir: w.dir()}
		if g, err := r.open(w.repo()); err == nil {
			if ref, err := g.Reference(plumbing.NewBranchReferenceName(w.Branch), false); err == nil {
				h := ref.Hash().String()
				info.HeadCommit = &h
			}
		}
		for _, p := range procs[w.ID] {
			info.ProcessCount++
			if info.ActiveProcess == nil || p.CreatedAt > info.ActiveProcess.CreatedAt {
				info.ActiveProcess = &abi.WorkspaceProcess{Pid: p.Pid, Label: p.Label, Cwd: p.Cwd, CreatedAt: p.CreatedAt}
			}
		}
		out.Workspaces = append(out.Workspaces, info)
	}
	return out, nil
}
