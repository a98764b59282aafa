package pkgs

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The handlers of pkg.list, add, show, checkout, install,
// review.approve and remove.

const (
	// globalScope is the scope of the packages every user sees: the
	// builtin ones and those root adds.
	globalScope = "global"
	// BuiltinRepo is the builtin source: the repository pkg.sync
	// writes the packages shipped with gsvfs to. A package from it
	// needs no review.
	BuiltinRepo = "root/gsv-packages"
	// managerPkg is the package manager's own package, which cannot be
	// disabled.
	managerPkg = "packages"
)

// summary is rec as pkg.* shows it.
func (r *Room) summary(rec *record) abi.PkgSummary {
	s := abi.PkgSummary{ID: rec.id, Name: rec.name, Scope: rec.scope, Version: rec.manifest.Version, Desc: rec.manifest.Description,
		Builtin: rec.builtin, Enabled: rec.enabled, Repo: rec.repo, RemoteURL: redacted(rec.remoteURL), Ref: rec.ref, Subdir: rec.subdir,
		Commit: rec.commit, Active: rec.active(), InstalledAt: rec.installedAt, UpdatedAt: rec.updatedAt,
		Review: abi.PkgReview{Required: rec.reviewNeeded, Approved: rec.approved(), ApprovedAt: rec.approvedAt,
			ApprovedBy: rec.approvedBy, Commit: rec.approvedCommit}}
	return s
}

// redacted is an upstream URL as pkg.* shows it: no password.
func redacted(raw string) string {
	if raw == "" {
		return ""
	}
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(an unreadable URL)"
}

// powers are the parts of a manifest that run code or reach out: its
// commands, schedules and MCP servers, one string each. A checkout whose
// powers are not all among those approved needs a new review.
func powers(m *abi.PkgManifest) []string {
	var out []string
	for _, c := range m.Commands {
		out = append(out, "command "+c.Name+" = "+c.Path)
	}
	for _, s := range m.Schedules {
		out = append(out, "schedule "+s.Name+" = "+s.Line)
	}
	for _, s := range m.McpServers {
		if s.URL != "" {
			out = append(out, "mcpServer "+s.Name+" = "+s.URL)
		} else {
			out = append(out, "mcpServer "+s.Name+" = "+strings.Join(s.Command, " "))
		}
	}
	slices.Sort(out)
	return out
}

// newPowers are the powers of rec's manifest that its approval does not
// cover.
func (rec *record) newPowers() []string {
	var out []string
	for _, p := range powers(&rec.manifest) {
		if !slices.Contains(rec.approvedPowers, p) {
			out = append(out, p)
		}
	}
	return out
}

// approved says whether rec may be active: no review is required, or
// the approval covers every power of its manifest.
func (rec *record) approved() bool {
	if !rec.reviewNeeded {
		return true
	}
	return rec.approvedAt != 0 && len(rec.newPowers()) == 0
}

// active says whether rec's parts are installed: enabled and approved.
func (rec *record) active() bool { return rec.enabled && rec.approved() }

// visible reports whether caller c sees rec: its own scope's, the global
// ones; root sees all.
func visible(c *kernel.Caller, rec *record) bool {
	return c.IsRoot() || rec.scope == globalScope || rec.uid == c.Uid
}

// mutable says whether c may change rec: root, or the owner of its
// (user) scope.
func mutable(c *kernel.Caller, rec *record) error {
	if c.IsRoot() || (rec.scope != globalScope && rec.uid == c.Uid) {
		return nil
	}
	if rec.scope == globalScope {
		return abi.E(abi.Path(rec.id), abi.Permission, "a global package is root's to change")
	}
	return abi.E(abi.Path(rec.id), abi.Permission, "another user's package")
}

// lookupMutable is lookup of a package c may change (mutable).
func (r *Room) lookupMutable(ctx context.Context, c *kernel.Caller, id string) (*record, error) {
	rec, err := r.lookup(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if err := mutable(c, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// lookup finds the package id (<scope>/<name>) or name (the caller's,
// then the global one) that c sees.
func (r *Room) lookup(ctx context.Context, c *kernel.Caller, id string) (*record, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, abi.E(abi.Invalid, "packageId: empty")
	}
	var ids []string
	if strings.Contains(id, "/") {
		ids = []string{id}
	} else {
		if !c.IsRoot() {
			ids = append(ids, c.Username+"/"+id)
		}
		ids = append(ids, globalScope+"/"+id)
	}
	for _, try := range ids {
		rec, err := r.get(ctx, try)
		if err != nil {
			return nil, err
		}
		if rec != nil && visible(c, rec) {
			return rec, nil
		}
		if rec != nil {
			return nil, abi.E(abi.Path(id), abi.Permission, "another user's package")
		}
	}
	return nil, abi.E(abi.Path(id), abi.NotExist, "no such package (see pkg.list)")
}

// list serves pkg.list.
func (r *Room) list(ctx context.Context, c *kernel.Caller, a *abi.PkgListArgs) (*abi.PkgListResult, error) {
	if a.Runtime != "" && a.Runtime != "gsv" {
		return &abi.PkgListResult{Packages: []abi.PkgSummary{}}, nil
	}
	where, args := `WHERE owner_uid=? OR scope=?`, []any{c.Uid, globalScope}
	if c.IsRoot() {
		where, args = "", nil
	}
	recs, err := r.listWhere(ctx, where, args...)
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(a.Name)
	out := []abi.PkgSummary{}
	for _, rec := range recs {
		if name != "" && rec.name != name || a.Enabled != nil && rec.enabled != *a.Enabled {
			continue
		}
		out = append(out, r.summary(rec))
	}
	return &abi.PkgListResult{Packages: out}, nil
}

// show serves pkg.show: the package, its manifest, and the review.
func (r *Room) show(ctx context.Context, c *kernel.Caller, a *abi.PkgIDArgs) (*abi.PkgShowResult, error) {
	rec, err := r.lookup(ctx, c, a.PackageID)
	if err != nil {
		return nil, err
	}
	res := &abi.PkgShowResult{Package: r.summary(rec), Manifest: rec.manifest, Adds: r.review(rec)}
	if rec.reviewNeeded && rec.approvedAt != 0 {
		res.NewPowers = rec.newPowers()
	}
	return res, nil
}

// review is exactly what enabling rec adds, and the rights each part
// runs with.
func (r *Room) review(rec *record) []abi.PkgAddItem {
	m := &rec.manifest
	owner := rec.scope
	if owner == globalScope {
		owner = "root"
	}
	user := "the user who spawns it (" + ownerWord(rec) + ")"
	var out []abi.PkgAddItem
	for _, p := range m.Profiles {
		src := "prompt in gsv-package.json"
		if p.PromptFile != "" {
			src = p.PromptFile
		}
		if len(p.Tools) > 0 {
			src += "; tools " + strings.Join(p.Tools, ",")
		}
		out = append(out, abi.PkgAddItem{Kind: "profile", Name: p.ID, Source: src, RunsAs: user})
	}
	for _, s := range m.Skills {
		out = append(out, abi.PkgAddItem{Kind: "skill", Name: s, Source: "skills/" + s + "/SKILL.md", RunsAs: "text read by the agent"})
	}
	for _, f := range m.Context {
		out = append(out, abi.PkgAddItem{Kind: "context", Name: path.Base(f), Source: f, RunsAs: "text given to its profiles' processes"})
	}
	for _, mod := range m.Modules {
		out = append(out, abi.PkgAddItem{Kind: "module", Name: mod.Name, Source: mod.Path, RunsAs: user + " in CodeMode"})
	}
	for _, cmd := range m.Commands {
		out = append(out, abi.PkgAddItem{Kind: "command", Name: cmd.Name, Source: cmd.Path,
			RunsAs: owner + " in exec sessions (on the PATH, " + binDirOf(owner) + ")"})
	}
	for _, s := range m.Schedules {
		out = append(out, abi.PkgAddItem{Kind: "schedule", Name: schedName(rec.name, s.Name), Source: s.Line, RunsAs: owner + " (crontab line)"})
	}
	for _, s := range m.McpServers {
		src := s.URL
		runs := owner + " (MCP server " + mcpName(rec.name, s.Name) + ")"
		if src == "" {
			src = strings.Join(s.Command, " ")
			runs = owner + " in an exec session (stdio MCP server " + mcpName(rec.name, s.Name) + ")"
		}
		out = append(out, abi.PkgAddItem{Kind: "mcpServer", Name: s.Name, Source: src, RunsAs: runs})
	}
	return out
}

// ownerWord names whose packages rec's are.
func ownerWord(rec *record) string {
	if rec.scope == globalScope {
		return "any user"
	}
	return rec.scope
}

// add serves pkg.add.
func (r *Room) add(ctx context.Context, c *kernel.Caller, a *abi.PkgAddArgs) (*abi.PkgAddResult, error) {
	if (a.Repo == "") == (a.RemoteURL == "") {
		return nil, abi.E(abi.Invalid, "give repo or remoteUrl, exactly one")
	}
	if a.Global && !c.IsRoot() {
		return nil, abi.E(abi.Permission, "global: only root adds a package for every user")
	}
	subdir, err := checkSubdir(a.Subdir)
	if err != nil {
		return nil, err
	}
	ref := a.Ref
	if ref == "" {
		ref = "main"
	}
	if err := kernel.CheckText("ref", ref, 256); err != nil {
		return nil, err
	}
	scope, uid := c.Username, c.Uid
	if c.IsRoot() {
		scope, uid = globalScope, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	repo, remote := a.Repo, ""
	if a.RemoteURL != "" {
		if repo, ref, err = r.importRemote(ctx, c, a.RemoteURL, ref); err != nil {
			return nil, err
		}
		remote = a.RemoteURL
	} else if !strings.Contains(repo, "/") {
		repo = c.Username + "/" + repo
	}
	commit, m, err := r.resolve(ctx, c, uid, repo, ref, subdir)
	if err != nil {
		return nil, err
	}
	id := scope + "/" + m.Name
	if scope != globalScope {
		if g, err := r.get(ctx, globalScope+"/"+m.Name); err != nil {
			return nil, err
		} else if g != nil && g.builtin && repo != BuiltinRepo {
			return nil, abi.E(abi.Path(m.Name), abi.Busy, "name: clashes with the builtin package "+g.id)
		}
	}
	now := r.now().UnixMilli()
	rec, err := r.get(ctx, id)
	if err != nil {
		return nil, err
	}
	changed := true
	if rec == nil {
		rec = &record{id: id, scope: scope, uid: uid, name: m.Name, installedAt: now}
		rec.reviewNeeded = repo != BuiltinRepo
	} else if rec.builtin {
		return nil, abi.E(abi.Path(id), abi.Busy, "a builtin package: pkg.sync keeps it")
	} else {
		changed = rec.repo != repo || rec.remoteURL != remote || rec.ref != ref || rec.subdir != subdir || rec.commit != commit
	}
	res := &abi.PkgAddResult{Changed: changed, Imported: abi.PkgImported{Repo: repo, RemoteURL: redacted(remote), Ref: ref, Head: &commit}}
	if changed {
		next := *rec
		next.repo, next.remoteURL, next.ref, next.subdir, next.commit, next.manifest = repo, remote, ref, subdir, commit, *m
		next.updatedAt = now
		if repo != BuiltinRepo {
			next.reviewNeeded = true
		}
		if err := r.replace(ctx, rec, &next); err != nil {
			return nil, err
		}
		rec = &next
	}
	if a.Enable && !rec.enabled && rec.approved() {
		next := *rec
		next.enabled = true
		if err := r.replace(ctx, rec, &next); err != nil {
			return nil, err
		}
		rec, changed = &next, true
		res.Changed = true
	}
	res.Package = r.summary(rec)
	if res.Changed {
		r.signal(rec, "added")
	}
	return res, nil
}

// checkout serves pkg.checkout: the package at a new ref; grants,
// enabled state and review kept; new powers wait for a new review.
func (r *Room) checkout(ctx context.Context, c *kernel.Caller, a *abi.PkgCheckoutArgs) (*abi.PkgChangeResult, error) {
	if err := kernel.CheckText("ref", a.Ref, 256); err != nil {
		return nil, err
	}
	if a.Ref == "" {
		return nil, abi.E(abi.Invalid, "ref: empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.lookupMutable(ctx, c, a.PackageID)
	if err != nil {
		return nil, err
	}
	repo, ref := rec.repo, a.Ref
	if rec.remoteURL != "" {
		if repo, ref, err = r.importRemote(ctx, c, rec.remoteURL, a.Ref); err != nil {
			return nil, err
		}
	}
	commit, m, err := r.resolve(ctx, c, rec.uid, repo, ref, rec.subdir)
	if err != nil {
		return nil, err
	}
	if m.Name != rec.name {
		return nil, abi.E(abi.Path(rec.id), abi.Invalid, fmt.Sprintf("name: the manifest at %s names %q, not %q", a.Ref, m.Name, rec.name))
	}
	if commit == rec.commit && ref == rec.ref {
		return &abi.PkgChangeResult{Package: r.summary(rec)}, nil
	}
	next := *rec
	next.repo, next.ref, next.commit, next.manifest, next.updatedAt = repo, ref, commit, *m, r.now().UnixMilli()
	if err := r.replace(ctx, rec, &next); err != nil {
		return nil, err
	}
	r.signal(&next, "checkout")
	return &abi.PkgChangeResult{Changed: true, Package: r.summary(&next)}, nil
}

// install serves pkg.install: enable, all of its parts or none.
func (r *Room) install(ctx context.Context, c *kernel.Caller, a *abi.PkgIDArgs) (*abi.PkgChangeResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.lookupMutable(ctx, c, a.PackageID)
	if err != nil {
		return nil, err
	}
	if !rec.approved() {
		msg := "review required: see pkg.show, then pkg.review.approve"
		if np := rec.newPowers(); rec.approvedAt != 0 && len(np) > 0 {
			msg = "review required again: this commit adds " + strings.Join(np, "; ")
		}
		return nil, abi.E(abi.Path(rec.id), abi.Permission, msg)
	}
	if rec.enabled {
		return &abi.PkgChangeResult{Package: r.summary(rec)}, nil
	}
	next := *rec
	next.enabled, next.updatedAt = true, r.now().UnixMilli()
	if err := r.replace(ctx, rec, &next); err != nil {
		return nil, err
	}
	r.signal(&next, "installed")
	return &abi.PkgChangeResult{Changed: true, Package: r.summary(&next)}, nil
}

// approve serves pkg.review.approve: the approval covers the current
// commit's powers; an enabled package held for review is installed.
func (r *Room) approve(ctx context.Context, c *kernel.Caller, a *abi.PkgIDArgs) (*abi.PkgChangeResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.lookupMutable(ctx, c, a.PackageID)
	if err != nil {
		return nil, err
	}
	if !rec.reviewNeeded || (rec.approved() && rec.approvedCommit == rec.commit) {
		return &abi.PkgChangeResult{Package: r.summary(rec)}, nil
	}
	next := *rec
	next.approvedAt, next.approvedBy, next.approvedCommit = r.now().UnixMilli(), c.Username, rec.commit
	next.approvedPowers = powers(&rec.manifest)
	if next.approvedPowers == nil {
		next.approvedPowers = []string{}
	}
	next.updatedAt = next.approvedAt
	if err := r.replace(ctx, rec, &next); err != nil {
		return nil, err
	}
	r.signal(&next, "approved")
	return &abi.PkgChangeResult{Changed: true, Package: r.summary(&next)}, nil
}

// remove serves pkg.remove: disable (its parts go), keep the record.
func (r *Room) remove(ctx context.Context, c *kernel.Caller, a *abi.PkgIDArgs) (*abi.PkgChangeResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, err := r.lookup(ctx, c, a.PackageID)
	if err != nil {
		return nil, err
	}
	if rec.name == managerPkg && rec.builtin {
		return nil, abi.E(abi.Path(rec.id), abi.Invalid, "the package manager's own package cannot be disabled")
	}
	if err := mutable(c, rec); err != nil {
		return nil, err
	}
	if !rec.enabled {
		return &abi.PkgChangeResult{Package: r.summary(rec)}, nil
	}
	next := *rec
	next.enabled, next.updatedAt = false, r.now().UnixMilli()
	if err := r.replace(ctx, rec, &next); err != nil {
		return nil, err
	}
	r.signal(&next, "removed")
	return &abi.PkgChangeResult{Changed: true, Package: r.summary(&next)}, nil
}
