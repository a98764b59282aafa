package pkgs

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// dirPath is where the room's files are bound.
const dirPath = "/pkg"

// The files of /pkg. Every listing and read is a syscall as the reader.
//
//	/pkg/<scope>/<name>/manifest   its gsv-package.json, as stored (JSON)
//	/pkg/<scope>/<name>/status     key: value lines (enabled, review, commit...)
//	/pkg/<scope>/<name>/review     what enabling it adds, one line each
//	/pkg/<scope>/<name>/ctl        install | remove | approve | checkout <ref>
//	/pkg/<scope>/<name>/files/...  its files at its commit, read-only
//	/pkg/skills/<skill>/...        the skills of the reader's active packages

// topDir is /pkg: skills, and a directory per scope the reader sees.
func (r *Room) topDir() vfs.Dir {
	skills := r.skillsDir()
	return &vfs.FuncDir{Meta: ns.RootMeta(dirPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.PkgList, &abi.PkgListArgs{})
			if err != nil {
				return nil, err
			}
			out := []vfs.DirEntry{{Name: "skills", Node: skills}}
			seen := map[string]bool{"skills": true}
			for _, p := range res.Packages {
				if !seen[p.Scope] {
					seen[p.Scope] = true
					out = append(out, vfs.DirEntry{Name: p.Scope, Node: r.scopeDir(p.Scope)})
				}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if name == "skills" {
				return skills, nil
			}
			if checkName("scope", name) != nil {
				return nil, vfs.ErrNotExist
			}
			return r.scopeDir(name), nil
		}}
}

// scopeDir is /pkg/<scope>: its packages the reader sees.
func (r *Room) scopeDir(scope string) vfs.Dir {
	path := dirPath + "/" + scope
	return &vfs.FuncDir{Meta: ns.RootMeta(path, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.PkgList, &abi.PkgListArgs{})
			if err != nil {
				return nil, err
			}
			var out []vfs.DirEntry
			for _, p := range res.Packages {
				if p.Scope == scope {
					out = append(out, vfs.DirEntry{Name: p.Name, Node: r.pkgDir(p.ID)})
				}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			id := scope + "/" + name
			if _, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.PkgShow, &abi.PkgIDArgs{PackageID: id}); err != nil {
				return nil, err
			}
			return r.pkgDir(id), nil
		}}
}

// pkgDir is /pkg/<scope>/<name>.
func (r *Room) pkgDir(id string) vfs.Dir {
	path := dirPath + "/" + id
	show := func(ctx context.Context, cred vfs.Cred) (*abi.PkgShowResult, error) {
		return kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.PkgShow, &abi.PkgIDArgs{PackageID: id})
	}
	meta := ns.RootMeta(path, fs.ModeDir|0o555).WithChanged(func(context.Context, vfs.Cred) time.Time {
		return r.changes.At(time.Time{}, id)
	})
	ents := []vfs.DirEntry{
		{Name: "manifest", Node: &vfs.View{Meta: ns.RootMeta(path+"/manifest", 0o444), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			s, err := show(ctx, cred)
			if err != nil {
				return nil, err
			}
			b, err := json.MarshalIndent(s.Manifest, "", "  ")
			return append(b, '\n'), err
		}}},
		{Name: "status", Node: &vfs.View{Meta: ns.RootMeta(path+"/status", 0o444), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			s, err := show(ctx, cred)
			if err != nil {
				return nil, err
			}
			return renderStatus(s), nil
		}}},
		{Name: "review", Node: &vfs.View{Meta: ns.RootMeta(path+"/review", 0o444), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			s, err := show(ctx, cred)
			if err != nil {
				return nil, err
			}
			return renderReview(s), nil
		}}},
		{Name: "ctl", Node: r.space.Ctl(path, ns.RootMeta(path+"/ctl", 0o666), pkgVerbs(id))},
		{Name: "err", Node: r.space.ErrView(path)},
		{Name: "files", Node: r.treeDir(id, path+"/files", "")},
	}
	d := &vfs.FuncDir{Meta: meta, List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
		if _, err := show(ctx, cred); err != nil {
			return nil, err
		}
		return ents, nil
	}}
	return d
}

// pkgVerbs are the verbs of a package's ctl.
func pkgVerbs(id string) map[string]ns.CtlVerb {
	one := func(call abi.Call[abi.PkgIDArgs, *abi.PkgChangeResult]) ns.CtlVerb {
		return func(l ns.CtlLine) (kernel.Bound, error) {
			if err := l.Args(0, 0, call.Name); err != nil {
				return kernel.Bound{}, err
			}
			return kernel.Bind(call, &abi.PkgIDArgs{PackageID: id}), nil
		}
	}
	return map[string]ns.CtlVerb{
		"install": one(abi.PkgInstall),
		"remove":  one(abi.PkgRemove),
		"approve": one(abi.PkgReviewApprove),
		"checkout": func(l ns.CtlLine) (kernel.Bound, error) {
			if err := l.Args(1, 1, "checkout <ref>"); err != nil {
				return kernel.Bound{}, err
			}
			return kernel.Bind(abi.PkgCheckout, &abi.PkgCheckoutArgs{PackageID: id, Ref: l.Words[0]}), nil
		},
	}
}

// renderStatus is a package's status file.
func renderStatus(s *abi.PkgShowResult) []byte {
	p := s.Package
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s: %v\n", k, v) }
	line("package", p.ID)
	line("version", p.Version)
	line("builtin", p.Builtin)
	line("enabled", p.Enabled)
	line("active", p.Active)
	line("review", reviewWord(p.Review))
	line("repo", p.Repo)
	if p.RemoteURL != "" {
		line("remote", p.RemoteURL)
	}
	line("ref", p.Ref)
	line("subdir", p.Subdir)
	line("commit", p.Commit)
	if len(s.NewPowers) > 0 {
		line("new", strings.Join(s.NewPowers, "; "))
	}
	return []byte(b.String())
}

// reviewWord says a review state in a word or two.
func reviewWord(r abi.PkgReview) string {
	switch {
	case !r.Required:
		return "not required"
	case r.Approved:
		return "approved by " + r.ApprovedBy
	case r.ApprovedAt != 0:
		return "required again (new powers)"
	}
	return "required"
}

// renderReview is a package's review file: one line per part.
func renderReview(s *abi.PkgShowResult) []byte {
	var b strings.Builder
	for _, a := range s.Adds {
		fmt.Fprintf(&b, "%-9s %-24s %s  (runs as %s)\n", a.Kind, a.Name, a.Source, a.RunsAs)
	}
	return []byte(b.String())
}

// treeDir is a directory of a package's files at rel ("" its root).
func (r *Room) treeDir(id, path, rel string) vfs.Dir {
	read := func(ctx context.Context, cred vfs.Cred, p string) (*abi.RepoReadResult, error) {
		return kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.PkgFile, &abi.PkgFileArgs{PackageID: id, Path: p})
	}
	node := func(e abi.RepoTreeEntry) vfs.Node {
		sub := strings.TrimPrefix(rel+"/"+e.Name, "/")
		if e.Type == "tree" {
			return r.treeDir(id, path+"/"+e.Name, sub)
		}
		mode := fs.FileMode(0o444)
		if e.Mode == "100755" {
			mode = 0o555
		}
		return &vfs.View{Meta: ns.RootMeta(path+"/"+e.Name, mode), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			res, err := read(ctx, cred, sub)
			if err != nil || res.Content == nil {
				return nil, err
			}
			return []byte(*res.Content), nil
		}}
	}
	return &vfs.FuncDir{Meta: ns.RootMeta(path, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := read(ctx, cred, rel)
			if err != nil {
				return nil, err
			}
			var out []vfs.DirEntry
			for _, e := range res.Entries {
				out = append(out, vfs.DirEntry{Name: e.Name, Node: node(e)})
			}
			return out, nil
		}}
}

// skillsDir is /pkg/skills: a directory per skill of the reader's active
// packages (its own first), holding the skill's files.
func (r *Room) skillsDir() vfs.Dir {
	return &vfs.FuncDir{Meta: ns.RootMeta(dirPath+"/skills", fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			skills, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.PkgSkills, &struct{}{})
			if err != nil {
				return nil, err
			}
			var out []vfs.DirEntry
			for _, s := range skills {
				out = append(out, vfs.DirEntry{Name: s.Name, Node: r.skillDir(s)})
			}
			return out, nil
		}}
}

// skillDir is one skill's directory: the package's skills/<name>.
func (r *Room) skillDir(s abi.PkgSkill) vfs.Dir {
	return r.treeDir(s.PackageID, dirPath+"/skills/"+s.Name, "skills/"+s.Name)
}

// file serves pkg.file: the package's tree or file at path, read as its
// owner once the caller is known to see it.
func (r *Room) file(ctx context.Context, c *kernel.Caller, a *abi.PkgFileArgs) (*abi.RepoReadResult, error) {
	rec, err := r.lookup(ctx, c, a.PackageID)
	if err != nil {
		return nil, err
	}
	if a.Path != "" {
		if err := checkPath("path", a.Path); err != nil {
			return nil, err
		}
	}
	owner, err := r.ownerCaller(ctx, rec.uid)
	if err != nil {
		return nil, err
	}
	p := rec.subdir
	if a.Path != "" {
		p = inPkg(rec.subdir, a.Path)
	}
	if p == "." {
		p = ""
	}
	return kernel.Do(ctx, r.k, owner, abi.RepoRead, &abi.RepoReadArgs{Repo: rec.repo, Ref: rec.commit, Path: p})
}

// skills serves pkg.skills: the skills of the caller's active packages,
// its own first; a name two packages give is the first's.
func (r *Room) skills(ctx context.Context, c *kernel.Caller, _ *struct{}) ([]abi.PkgSkill, error) {
	recs, err := r.activeFor(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []abi.PkgSkill
	seen := map[string]bool{}
	for _, rec := range recs {
		for _, s := range rec.manifest.Skills {
			if !seen[s] {
				seen[s] = true
				out = append(out, abi.PkgSkill{Name: s, PackageID: rec.id})
			}
		}
	}
	return out, nil
}

// session serves pkg.session: the read-only mount of the caller's
// package commands and the PATH that puts them first, when it has any.
func (r *Room) session(ctx context.Context, c *kernel.Caller, _ *struct{}) (*abi.PkgSessionResult, error) {
	mount := &abi.PkgSessionResult{Mount: &abi.ProcessMount{HostPath: binDirOf(c.Username), GuestPath: BinGuest, Mode: "ro"},
		Path: BinGuest + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	r.pendingMu.Lock()
	pending := r.pending[c.Uid] > 0
	r.pendingMu.Unlock()
	if pending {
		return mount, nil
	}
	recs, err := r.listWhere(ctx, `WHERE owner_uid=? AND enabled=1`, c.Uid)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if rec.active() && len(rec.installed.Commands) > 0 && (rec.scope != globalScope || c.Uid == 0) {
			return mount, nil
		}
	}
	return &abi.PkgSessionResult{}, nil
}
