package pkgs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/packages"
)

// shipped is the builtin packages of the repository as a MapFS a test
// may change.
func shipped(t *testing.T) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	err := fs.WalkDir(packages.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(packages.FS, p)
		out[p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPkgBuiltin: the shipped packages are global and need no review;
// packages is enabled and cannot be disabled, the others wait for root;
// a user can neither enable one globally nor take a builtin's name; a
// user may add a builtin to their own scope without a review; pkg.sync
// keeps the enabled state and removes a package no longer shipped.
func TestPkgBuiltin(t *testing.T) {
	files := shipped(t)
	s := newSys(t, files)
	l := do(s, s.alice, abi.PkgList, &abi.PkgListArgs{})
	state := map[string]abi.PkgSummary{}
	for _, p := range l.Packages {
		state[p.Name] = p
	}
	if len(state) != 3 || !state["packages"].Active || !state["packages"].Builtin || state["packages"].Review.Required ||
		state["code-reviewer"].Enabled || state["daily-digest"].Enabled || state["code-reviewer"].Scope != "global" {
		t.Fatalf("builtin: %+v", l.Packages)
	}
	// The manager's skill is every user's; its command is root's.
	if sk := do(s, s.bob, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/skills/packages/SKILL.md", Raw: true}); !strings.Contains(sk.Content, "name: packages") {
		t.Fatalf("packages skill: %+v", sk)
	}
	if _, err := os.Stat(filepath.Join(s.data, "home", "root", ".gsv", "pkg", "bin", "pkg-init")); err != nil {
		entries, _ := os.ReadDir(s.data)
		t.Fatalf("pkg-init: %v (%v)", err, entries)
	}
	fails(s, s.root, abi.PkgRemove, &abi.PkgIDArgs{PackageID: "packages"}, abi.Invalid, "cannot be disabled")
	fails(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "code-reviewer"}, abi.Permission, "root")
	fails(s, s.bob, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "global/daily-digest"}, abi.Permission)
	// A user's package may not take a builtin's name...
	clash := releaseTools()
	clash["gsv-package.json"] = strings.Replace(clash["gsv-package.json"], `"name": "release-tools"`, `"name": "code-reviewer"`, 1)
	s.commit(s.alice, "mine", "main", clash)
	fails(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "mine"}, abi.Busy, "name", "builtin")
	// ... but may add the builtin itself to their scope, with no review.
	own := do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "root/gsv-packages", Subdir: "code-reviewer", Enable: true})
	if own.Package.ID != "alice/code-reviewer" || own.Package.Review.Required || !own.Package.Active {
		t.Fatalf("alice's code-reviewer: %+v", own.Package)
	}
	if p := do(s, s.alice, abi.PkgProfileGet, &abi.PkgProfileArgs{ID: "code-reviewer"}); !strings.Contains(p.ContextFiles[0].Text, "code reviewer") {
		t.Fatalf("code-reviewer profile: %+v", p)
	}
	// root enables one globally: bob sees its profile.
	do(s, s.root, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "code-reviewer"})
	if ps := do(s, s.bob, abi.PkgProfiles, &struct{}{}); len(ps) != 1 || ps[0].ID != "code-reviewer" {
		t.Fatalf("bob's profiles: %+v", ps)
	}
	// A sync of the same files changes nothing.
	before := do(s, s.root, abi.PkgShow, &abi.PkgIDArgs{PackageID: "packages"}).Package.Commit
	do(s, s.root, abi.PkgSync, &struct{}{})
	if after := do(s, s.root, abi.PkgShow, &abi.PkgIDArgs{PackageID: "packages"}).Package.Commit; after != before {
		t.Fatalf("an unchanged sync moved packages from %s to %s", before, after)
	}
	// A new shipped version syncs, keeping the enabled state; a package
	// no longer shipped goes.
	files["code-reviewer/profiles/code-reviewer.md"] = &fstest.MapFile{Data: []byte("You are a code reviewer, version 2.\n")}
	for p := range files {
		if strings.HasPrefix(p, "daily-digest/") {
			delete(files, p)
		}
	}
	fails(s, s.alice, abi.PkgSync, &struct{}{}, abi.Permission)
	res := do(s, s.root, abi.PkgSync, &struct{}{})
	if len(res.Packages) != 2 {
		t.Fatalf("sync: %+v", res.Packages)
	}
	for _, p := range res.Packages {
		if p.Name == "code-reviewer" && !p.Active || p.Name == "packages" && !p.Active {
			t.Fatalf("after sync: %+v", p)
		}
	}
	if p := do(s, s.bob, abi.PkgProfileGet, &abi.PkgProfileArgs{ID: "code-reviewer"}); !strings.Contains(p.ContextFiles[0].Text, "version 2") {
		t.Fatalf("profile after sync: %+v", p)
	}
	if l := do(s, s.root, abi.PkgList, &abi.PkgListArgs{Name: "daily-digest"}); len(l.Packages) != 0 {
		t.Fatalf("stale builtin: %+v", l.Packages)
	}
}

// TestPkgRestart: after a restart on the same state, an installed
// package is still active with its parts (installed once: no second
// crontab line), the builtin packages keep their commits and state, and
// disabling it still removes what the first daemon installed.
func TestPkgRestart(t *testing.T) {
	dir := t.TempDir()
	s := newSysAt(t, dir, shipped(t), nil)
	s.commit(s.alice, "release-tools", "main", releaseTools())
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.root, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "code-reviewer"})
	builtin := do(s, s.root, abi.PkgShow, &abi.PkgIDArgs{PackageID: "packages"}).Package.Commit
	s.space.Close()
	s.k.Close()

	s = newSysAt(t, dir, shipped(t), nil)
	p := do(s, s.alice, abi.PkgShow, &abi.PkgIDArgs{PackageID: "release-tools"}).Package
	if !p.Active || !p.Review.Approved {
		t.Fatalf("after a restart: %+v", p)
	}
	if tab := s.crontab(s.alice); strings.Count(tab, "name=pkg.release-tools.weekly") != 1 {
		t.Fatalf("crontab after a restart: %q", tab)
	}
	if cr := do(s, s.root, abi.PkgShow, &abi.PkgIDArgs{PackageID: "code-reviewer"}).Package; !cr.Active || cr.Commit != builtin {
		t.Fatalf("code-reviewer after a restart: %+v (was at %s)", cr, builtin)
	}
	do(s, s.alice, abi.PkgRemove, &abi.PkgIDArgs{PackageID: "release-tools"})
	if tab := s.crontab(s.alice); strings.Contains(tab, "release") {
		t.Fatalf("crontab after remove: %q", tab)
	}
	if _, err := os.Stat(filepath.Join(s.data, "home", "alice", ".gsv", "pkg", "bin", "relnotes")); !os.IsNotExist(err) {
		t.Fatalf("command after remove: %v", err)
	}
}
