package pkgs

import (
	"context"
	"io/fs"
	"path"
	"sort"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// pkg.sync: the builtin packages, from the files shipped with gsvfs
// (Options.Builtin: a directory per package) through the builtin source
// repository (BuiltinRepo), as root.

// Start syncs the builtin packages once the room is registered (the
// repos room is added before it). On a system not set up yet, the sync
// waits for sys.setup, in a goroutine Close stops.
func (r *Room) Start(ctx context.Context) error {
	if r.builtin == nil {
		close(r.synced)
		return nil
	}
	_, err := r.syncBuiltin(ctx, kernel.Audience{})
	if abi.KindOf(err) != abi.SetupRequired {
		close(r.synced)
		if err != nil {
			r.log.Warn("pkgs: syncing the builtin packages", "err", err)
		}
		return nil
	}
	setup := make(chan struct{}, 1)
	r.k.Observe(func(ev *kernel.Event, _ kernel.Audience) {
		if ev.Signal == abi.SigSysSetup.Name {
			select {
			case setup <- struct{}{}:
			default:
			}
		}
	})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(r.synced)
		select {
		case <-r.stop:
			return
		case <-setup:
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		if _, err := r.syncBuiltin(ctx, kernel.Audience{}); err != nil {
			r.log.Warn("pkgs: syncing the builtin packages", "err", err)
		}
	}()
	return nil
}

// Synced is closed once Start's sync of the builtin packages has ended
// (done, failed, or stopped by Close): the daemon waits for it after
// sys.setup, so that the sync's writes precede its first client.
func (r *Room) Synced() <-chan struct{} { return r.synced }

// sync serves pkg.sync: it announces pkg.changed to every user.
func (r *Room) sync(ctx context.Context, c *kernel.Caller, _ *struct{}) (*abi.PkgSyncResult, error) {
	return r.syncBuiltin(ctx, kernel.Audience{All: true})
}

// syncBuiltin rebuilds the builtin packages and announces pkg.changed to
// aud. The sync at start announces it to root alone: no user has seen
// the packages before it, and a signal every user's event stream gets
// at an unforeseeable moment after the start would only be noise.
func (r *Room) syncBuiltin(ctx context.Context, aud kernel.Audience) (*abi.PkgSyncResult, error) {
	if r.builtin == nil {
		return nil, abi.E(abi.Invalid, "this daemon ships no builtin packages")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	root, err := r.ownerCaller(ctx, 0)
	if err != nil {
		return nil, err
	}
	dirs, ops, err := builtinOps(r.builtin)
	if err != nil {
		return nil, err
	}
	if _, err := kernel.Do(ctx, r.k, root, abi.RepoCreate, &abi.RepoCreateArgs{Repo: BuiltinRepo, Public: true,
		Description: "the packages shipped with gsvfs (pkg.sync)"}); err != nil {
		return nil, err
	}
	// The repository's tree becomes the shipped files: what is not
	// shipped any more goes.
	cur, err := kernel.Do(ctx, r.k, root, abi.RepoRead, &abi.RepoReadArgs{Repo: BuiltinRepo})
	if err != nil {
		return nil, err
	}
	var all []abi.RepoOp
	for _, e := range cur.Entries {
		all = append(all, abi.RepoOp{Type: "delete", Path: e.Path, Recursive: e.Type == "tree"})
	}
	all = append(all, ops...)
	// Files that are already there make no commit (repo.apply's "nothing
	// changes"): an unchanged sync keeps every package's commit.
	if _, err := kernel.Do(ctx, r.k, root, abi.RepoApply, &abi.RepoApplyArgs{Repo: BuiltinRepo, Message: "sync of the builtin packages",
		Ops: all}); err != nil && !(abi.KindOf(err) == abi.Invalid && strings.Contains(err.Error(), "nothing changes")) {
		return nil, err
	}
	keep := map[string]bool{}
	out := []abi.PkgSummary{}
	now := r.now().UnixMilli()
	for _, dir := range dirs {
		commit, m, err := r.resolve(ctx, root, 0, BuiltinRepo, "main", dir)
		if err != nil {
			return nil, abi.E(abi.Path(dir), err)
		}
		id := globalScope + "/" + m.Name
		keep[id] = true
		rec, err := r.get(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			// The package manager's own package is enabled when it
			// first appears; the others wait for root's pkg.install.
			rec = &record{id: id, scope: globalScope, name: m.Name, installedAt: now}
			next := *rec
			next.enabled = m.Name == managerPkg
			fill(&next, commit, m, dir, now)
			if err := r.replace(ctx, rec, &next); err != nil {
				return nil, err
			}
			rec = &next
		} else if rec.commit != commit || rec.subdir != dir || !rec.builtin || rec.repo != BuiltinRepo {
			next := *rec
			fill(&next, commit, m, dir, now)
			if next.name == managerPkg {
				next.enabled = true
			}
			if err := r.replace(ctx, rec, &next); err != nil {
				return nil, err
			}
			rec = &next
		}
		out = append(out, r.summary(rec))
	}
	stale, err := r.listWhere(ctx, `WHERE builtin=1`)
	if err != nil {
		return nil, err
	}
	for _, rec := range stale {
		if keep[rec.id] {
			continue
		}
		if rec.active() {
			if err := r.uninstall(ctx, rec); err != nil {
				return nil, err
			}
		}
		if err := r.deleteBuiltin(ctx, rec.id); err != nil {
			return nil, err
		}
	}
	for _, p := range out {
		r.changes.Touch(p.ID)
	}
	kernel.Publish(r.k, abi.SigPkgChanged, abi.PkgChanged{PackageID: globalScope + "/*", Change: "synced"}, aud)
	return &abi.PkgSyncResult{Packages: out}, nil
}

// fill makes rec a builtin package at commit.
func fill(rec *record, commit string, m *abi.PkgManifest, dir string, now int64) {
	rec.builtin, rec.reviewNeeded = true, false
	rec.repo, rec.remoteURL, rec.ref, rec.subdir, rec.commit, rec.manifest = BuiltinRepo, "", "main", dir, commit, *m
	rec.updatedAt = now
}

// builtinOps are the package directories of fsys (those with a
// manifest) and the repo.apply puts of all their files.
func builtinOps(fsys fs.FS) (dirs []string, ops []abi.RepoOp, err error) {
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		s := string(b)
		ops = append(ops, abi.RepoOp{Type: "put", Path: p, Content: &s})
		if path.Base(p) == abi.PkgManifestFile && path.Dir(p) != "." {
			dirs = append(dirs, path.Dir(p))
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, ops, err
}
