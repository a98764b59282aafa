package repos

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// Options configure the repository room.
type Options struct {
	Logger *slog.Logger
	// Dir is where the bare repositories are kept; "" is STATE/repos.
	Dir string
	// Now is the room's clock; nil means time.Now.
	Now func() time.Time
	// HomeEvery is how often each user's home is committed to
	// <user>/home, and each workspace's working tree autosaved (default
	// 3 seconds; negative: never).
	HomeEvery time.Duration
}

// Room is the repository room (ns.Room): the repo.* syscalls and
// /src/repos.
type Room struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	dir   string
	now   func() time.Time

	mu    sync.Mutex             // guards locks
	locks map[string]*sync.Mutex // each repository's write lock, by owner/name

	homeEvery time.Duration
	importMax int64                          // the largest pack repo.import takes (importPackMax)
	homeMu    sync.Mutex                     // guards homeSeen
	homeSeen  map[uint32]map[string]homeSeen // each home's files at the last walk, by uid
	wsSeen    map[string]map[string]homeSeen // each working tree's files at its last checkpoint, by id (guarded by homeMu)
	journal   journal                        // who wrote each path since its tree's last commit
	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the home keeper
}

var (
	_ ns.Room    = (*Room)(nil)
	_ ns.Starter = (*Room)(nil)
)

// Open migrates the room's table, makes its directory (0700, the
// daemon's alone) and prepares a Room over space.
func Open(space *ns.Space, opts Options) (*Room, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HomeEvery == 0 {
		opts.HomeEvery = 3 * time.Second
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(k.StateDir(), "repos")
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := k.Store.Migrate("repos", migrations()); err != nil {
		return nil, err
	}
	r := &Room{k: k, space: space, st: k.Store, log: opts.Logger, dir: opts.Dir, now: opts.Now,
		locks: map[string]*sync.Mutex{}, homeEvery: opts.HomeEvery, importMax: importPackMax, homeSeen: map[uint32]map[string]homeSeen{},
		wsSeen: map[string]map[string]homeSeen{}, stop: make(chan struct{})}
	k.ConfigRules(keeperRules()...)
	k.Observe(r.journal.observe)
	return r, nil
}

// Close stops the home keeper and waits for it. It is safe to call more
// than once.
func (r *Room) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.wg.Wait()
		r.journal.close()
	})
	return nil
}

// Syscalls is the room's syscall table.
func (r *Room) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.RepoList, r.list),
		kernel.Handle(abi.RepoCreate, r.create),
		kernel.Handle(abi.RepoRefs, r.refs),
		kernel.Handle(abi.RepoRead, r.read),
		kernel.Handle(abi.RepoSearch, r.search),
		kernel.Handle(abi.RepoLog, r.logCall),
		kernel.Handle(abi.RepoDiff, r.diff),
		kernel.Handle(abi.RepoCompare, r.compare),
		kernel.Handle(abi.RepoApply, r.apply),
		kernel.Handle(abi.RepoImport, r.importCall),
		kernel.Handle(abi.RepoBlob, r.blob),
		kernel.Handle(abi.RepoUpload, r.upload),
		kernel.Handle(abi.RepoReceive, r.receive),
		kernel.Handle(abi.RepoWorkspaceOpen, r.workspaceOpen),
		kernel.Handle(abi.RepoWorkspaceCheckpoint, r.workspaceCheckpoint),
		kernel.Handle(abi.RepoWorkspaceMerge, r.workspaceMerge),
		kernel.Handle(abi.RepoWorkspaceRemove, r.workspaceRemove),
		kernel.Handle(abi.SysWorkspaceList, r.workspaceList),
	}
}

// Mounts are the room's files: /src/repos, and /src/workspaces/ctl.
func (r *Room) Mounts() []ns.Mount {
	return []ns.Mount{{Path: srcPath, Node: r.topDir()}, {Path: wsPath, Node: r.wsDir()}}
}

// migrations are the room's schema steps.
func migrations() []string {
	return []string{
		`CREATE TABLE repos_repos (
		owner TEXT NOT NULL,
		name TEXT NOT NULL,
		owner_uid INTEGER NOT NULL,
		kind TEXT NOT NULL DEFAULT 'user',
		public INTEGER NOT NULL DEFAULT 0,
		description TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		PRIMARY KEY (owner, name)
	);`,
		`CREATE TABLE repos_workspaces (
		id TEXT NOT NULL PRIMARY KEY,
		root TEXT NOT NULL,
		branch TEXT NOT NULL,
		owner TEXT NOT NULL,
		owner_uid INTEGER NOT NULL,
		label TEXT,
		kind TEXT NOT NULL DEFAULT 'thread',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		UNIQUE (root, branch)
	);`,
	}
}

// record is a repository's row.
type record struct {
	Owner, Name string
	OwnerUid    uint32
	Kind        string
	Public      bool
	Description string
	UpdatedAt   int64
}

// id is the record's owner/name.
func (rec *record) id() string { return rec.Owner + "/" + rec.Name }

// lookup reads a repository's record; nil if there is none.
func (r *Room) lookup(ctx context.Context, owner, name string) (*record, error) {
	rec := &record{Owner: owner, Name: name}
	var pub int
	err := r.st.QueryRowContext(ctx, `SELECT owner_uid, kind, public, description, updated_at FROM repos_repos WHERE owner=? AND name=?`,
		owner, name).Scan(&rec.OwnerUid, &rec.Kind, &pub, &rec.Description, &rec.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec.Public = pub != 0
	return rec, nil
}

// records reads every repository's record, owner's alone if owner is set.
func (r *Room) records(ctx context.Context, owner string) ([]*record, error) {
	q := `SELECT owner, name, owner_uid, kind, public, description, updated_at FROM repos_repos`
	var args []any
	if owner != "" {
		q += ` WHERE owner=?`
		args = append(args, owner)
	}
	rows, err := r.st.QueryContext(ctx, q+` ORDER BY owner, name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*record
	for rows.Next() {
		rec := &record{}
		var pub int
		if err := rows.Scan(&rec.Owner, &rec.Name, &rec.OwnerUid, &rec.Kind, &pub, &rec.Description, &rec.UpdatedAt); err != nil {
			return nil, err
		}
		rec.Public = pub != 0
		out = append(out, rec)
	}
	return out, rows.Err()
}

// insert records a new repository.
func (r *Room) insert(ctx context.Context, rec *record) error {
	now := r.now().UnixMilli()
	pub := 0
	if rec.Public {
		pub = 1
	}
	_, err := r.st.Exec(ctx, `INSERT INTO repos_repos (owner, name, owner_uid, kind, public, description, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, rec.Owner, rec.Name, rec.OwnerUid, rec.Kind, pub, rec.Description, now, now)
	return err
}

// touch records that a repository changed now.
func (r *Room) touch(ctx context.Context, rec *record) {
	if _, err := r.st.Exec(ctx, `UPDATE repos_repos SET updated_at=? WHERE owner=? AND name=?`, r.now().UnixMilli(), rec.Owner, rec.Name); err != nil {
		r.log.Warn("repos: recording a change", "repo", rec.id(), "err", err)
	}
}

// canRead reports whether c may read rec: root, its owner, or anyone for
// a public one.
func canRead(c *kernel.Caller, rec *record) bool {
	return c.IsRoot() || c.Uid == rec.OwnerUid || rec.Public
}

// canWrite reports whether c may write rec: root or its owner.
func canWrite(c *kernel.Caller, rec *record) bool {
	return c.IsRoot() || c.Uid == rec.OwnerUid
}

// access finds the repository repo names and checks that c may read it
// (write, if write is set): 404 when there is none, 403 when c may not.
func (r *Room) access(ctx context.Context, c *kernel.Caller, repo string, write bool) (*record, error) {
	owner, name, err := splitRepo(repo, c.Username)
	if err != nil {
		return nil, err
	}
	rec, err := r.lookup(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, abi.E(abi.NotExist, abi.Path(owner+"/"+name), "no such repository")
	}
	if !canRead(c, rec) {
		return nil, abi.E(abi.Permission, abi.Path(rec.id()), "the repository is private to "+rec.Owner)
	}
	if write && !canWrite(c, rec) {
		return nil, abi.E(abi.Permission, abi.Path(rec.id()), "only "+rec.Owner+" may write the repository")
	}
	return rec, nil
}

// gitDir is where rec's bare repository is.
func (r *Room) gitDir(rec *record) string {
	return filepath.Join(r.dir, rec.Owner, rec.Name+".git")
}

// open opens rec's repository.
func (r *Room) open(rec *record) (*git.Repository, error) {
	g, err := git.PlainOpen(r.gitDir(rec))
	if err != nil {
		return nil, abi.E(abi.Other, abi.Path(rec.id()), err)
	}
	return g, nil
}

// lock takes rec's write lock and returns its release.
func (r *Room) lock(rec *record) func() {
	r.mu.Lock()
	m := r.locks[rec.id()]
	if m == nil {
		m = &sync.Mutex{}
		r.locks[rec.id()] = m
	}
	r.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// list serves repo.list: the repositories c may read.
func (r *Room) list(ctx context.Context, c *kernel.Caller, a *abi.RepoListArgs) (*abi.RepoListResult, error) {
	recs, err := r.records(ctx, a.Owner)
	if err != nil {
		return nil, err
	}
	out := &abi.RepoListResult{Repos: []abi.RepoInfo{}}
	for _, rec := range recs {
		if !canRead(c, rec) {
			continue
		}
		out.Repos = append(out.Repos, abi.RepoInfo{Repo: rec.id(), Owner: rec.Owner, Name: rec.Name, Kind: rec.Kind,
			Writable: canWrite(c, rec), Public: rec.Public, Description: rec.Description, UpdatedAt: rec.UpdatedAt})
	}
	return out, nil
}
