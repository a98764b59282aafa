package pkgs_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// crontab is c's crontab text.
func (s *sys) crontab(c *kernel.Caller) string {
	s.t.Helper()
	return do(s, c, abi.SchedCrontabGet, &abi.CrontabGetArgs{}).Text
}

// TestPkgLifecycle: a package in alice's repository added (disabled,
// review required), shown, refused install until approved, installed
// (its command in her bin directory, executable; its schedule in her
// crontab; its skill under /pkg/skills; its profile listed), removed
// (all of it gone, the record kept), installed again.
func TestPkgLifecycle(t *testing.T) {
	s := newSys(t, nil)
	head := s.commit(s.alice, "release-tools", "main", releaseTools())
	add := do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "alice/release-tools", Enable: true})
	p := add.Package
	if !add.Changed || p.ID != "alice/release-tools" || p.Enabled || !p.Review.Required || p.Commit != head || p.Ref != "main" || p.Subdir != "." {
		t.Fatalf("add: %+v", add)
	}
	show := do(s, s.alice, abi.PkgShow, &abi.PkgIDArgs{PackageID: "release-tools"})
	var kinds []string
	for _, a := range show.Adds {
		kinds = append(kinds, a.Kind+":"+a.Name)
		if a.RunsAs == "" {
			t.Errorf("review item %+v says no rights", a)
		}
	}
	want := []string{"profile:release-manager", "skill:release-notes", "context:CONTEXT.md", "command:relnotes", "schedule:pkg.release-tools.weekly"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("review: %v, want %v", kinds, want)
	}
	fails(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"}, abi.Permission, "review required")
	// bob can neither approve nor install alice's package, nor see it.
	fails(s, s.bob, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "alice/release-tools"}, abi.Permission)
	fails(s, s.bob, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "alice/release-tools"}, abi.Permission)
	if l := do(s, s.bob, abi.PkgList, &abi.PkgListArgs{}); len(l.Packages) != 0 {
		t.Fatalf("bob sees %+v", l.Packages)
	}
	ap := do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	if !ap.Changed || !ap.Package.Review.Approved || ap.Package.Review.ApprovedBy != "alice" || ap.Package.Enabled {
		t.Fatalf("approve: %+v", ap)
	}
	in := do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})
	if !in.Changed || !in.Package.Enabled || !in.Package.Active {
		t.Fatalf("install: %+v", in)
	}
	if again := do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"}); again.Changed {
		t.Fatalf("install again changed: %+v", again)
	}
	bin := filepath.Join(s.data, "home", "alice", ".gsv", "pkg", "bin", "relnotes")
	fi, err := os.Stat(bin)
	if err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("command: %v %v", fi, err)
	}
	if tab := s.crontab(s.alice); !strings.Contains(tab, "spawn task draft the release notes") || !strings.Contains(tab, "name=pkg.release-tools.weekly") {
		t.Fatalf("crontab: %q", tab)
	}
	skills := do(s, s.alice, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/skills"})
	if !skills.OK || !slices.Contains(skills.Directories, "release-notes/") && !slices.Contains(skills.Directories, "release-notes") {
		t.Fatalf("/pkg/skills: %+v", skills)
	}
	body := do(s, s.alice, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/skills/release-notes/SKILL.md"})
	if !strings.Contains(body.Content, "Write release notes") {
		t.Fatalf("SKILL.md: %+v", body)
	}
	if bs := do(s, s.bob, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/skills"}); len(bs.Directories) != 0 {
		t.Fatalf("bob's /pkg/skills: %+v", bs)
	}
	profs := do(s, s.alice, abi.PkgProfiles, &struct{}{})
	if len(profs) != 1 || profs[0].ID != "release-manager" || !profs[0].Startable {
		t.Fatalf("profiles: %+v", profs)
	}
	prof := do(s, s.alice, abi.PkgProfileGet, &abi.PkgProfileArgs{ID: "release-manager"})
	if len(prof.ContextFiles) != 2 || !strings.Contains(prof.ContextFiles[0].Text, "release manager") || prof.Budget.Turns != 20 {
		t.Fatalf("profile: %+v", prof)
	}
	sess := do(s, s.alice, abi.PkgSession, &struct{}{})
	if sess.Mount == nil || sess.Mount.HostPath != "/home/alice/.gsv/pkg/bin" || !strings.HasPrefix(sess.Path, sess.Mount.GuestPath+":") {
		t.Fatalf("session: %+v", sess)
	}
	// The files under /pkg.
	status := do(s, s.alice, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/alice/release-tools/status"})
	if !strings.Contains(status.Content, "active: true") || !strings.Contains(status.Content, "review: approved by alice") {
		t.Fatalf("status: %q", status.Content)
	}
	cmd := do(s, s.alice, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/alice/release-tools/files/bin/relnotes"})
	if !strings.Contains(cmd.Content, "relnotes-ran") {
		t.Fatalf("files: %+v", cmd)
	}
	// Disable: every part goes; the record stays.
	rm := do(s, s.alice, abi.PkgRemove, &abi.PkgIDArgs{PackageID: "release-tools"})
	if !rm.Changed || rm.Package.Enabled || rm.Package.Active {
		t.Fatalf("remove: %+v", rm)
	}
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Fatalf("command left: %v", err)
	}
	if tab := s.crontab(s.alice); strings.Contains(tab, "release") {
		t.Fatalf("crontab left: %q", tab)
	}
	if skills := do(s, s.alice, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/skills"}); len(skills.Directories) != 0 {
		t.Fatalf("skills left: %+v", skills)
	}
	if profs := do(s, s.alice, abi.PkgProfiles, &struct{}{}); len(profs) != 0 {
		t.Fatalf("profiles left: %+v", profs)
	}
	if l := do(s, s.alice, abi.PkgList, &abi.PkgListArgs{}); len(l.Packages) != 1 || l.Packages[0].Enabled {
		t.Fatalf("list after remove: %+v", l)
	}
	// The review stays: install again needs no new approval.
	if in := do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "alice/release-tools"}); !in.Package.Active {
		t.Fatalf("install again: %+v", in)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
}

// TestPkgCheckoutNeedsReview: a checkout to a ref that only changes text
// keeps the package active; one that adds a command holds it (enabled,
// not active, its parts gone) until a new approval, which installs it.
func TestPkgCheckoutNeedsReview(t *testing.T) {
	s := newSys(t, nil)
	files := releaseTools()
	s.commit(s.alice, "release-tools", "main", files)
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})

	// v1.3: the prompt changes only.
	files["profiles/release-manager.md"] = "You are the release manager, v1.3.\n"
	s.branch(s.alice, "release-tools", "v1.3", files)
	co := do(s, s.alice, abi.PkgCheckout, &abi.PkgCheckoutArgs{PackageID: "release-tools", Ref: "v1.3"})
	if !co.Changed || !co.Package.Active || co.Package.Ref != "v1.3" {
		t.Fatalf("checkout v1.3: %+v", co)
	}
	prof := do(s, s.alice, abi.PkgProfileGet, &abi.PkgProfileArgs{ID: "release-manager"})
	if !strings.Contains(prof.ContextFiles[0].Text, "v1.3") {
		t.Fatalf("profile after checkout: %+v", prof)
	}
	// v1.4: a new command.
	files["gsv-package.json"] = strings.Replace(files["gsv-package.json"], `"commands": [{"name": "relnotes", "path": "bin/relnotes"}]`,
		`"commands": [{"name": "relnotes", "path": "bin/relnotes"}, {"name": "ship", "path": "bin/ship"}]`, 1)
	files["bin/ship"] = "#!/bin/sh\necho shipped\n"
	s.branch(s.alice, "release-tools", "v1.4", files)
	co = do(s, s.alice, abi.PkgCheckout, &abi.PkgCheckoutArgs{PackageID: "release-tools", Ref: "v1.4"})
	if !co.Package.Enabled || co.Package.Active || co.Package.Review.Approved {
		t.Fatalf("checkout v1.4: %+v", co)
	}
	show := do(s, s.alice, abi.PkgShow, &abi.PkgIDArgs{PackageID: "release-tools"})
	if len(show.NewPowers) != 1 || !strings.Contains(show.NewPowers[0], "command ship") {
		t.Fatalf("new powers: %+v", show.NewPowers)
	}
	bin := filepath.Join(s.data, "home", "alice", ".gsv", "pkg", "bin")
	if _, err := os.Stat(filepath.Join(bin, "relnotes")); !os.IsNotExist(err) {
		t.Fatalf("held package's command left: %v", err)
	}
	fails(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"}, abi.Permission, "command ship")
	ap := do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	if !ap.Package.Active {
		t.Fatalf("approve v1.4: %+v", ap)
	}
	for _, c := range []string{"relnotes", "ship"} {
		if _, err := os.Stat(filepath.Join(bin, c)); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
}

// TestPkgBadInput: each bad input is a clear 4xx naming its field, and
// nothing is added or installed.
func TestPkgBadInput(t *testing.T) {
	s := newSys(t, nil)
	put := func(repo string, manifest string, extra map[string]string) {
		files := map[string]string{"gsv-package.json": manifest}
		for k, v := range extra {
			files[k] = v
		}
		s.commit(s.alice, repo, "main", files)
	}
	put("unknown", `{"name":"unknown","colour":"red"}`, nil)
	put("wrongtype", `{"name":"wrongtype","commands":"bin/x"}`, nil)
	put("escape", `{"name":"escape","commands":[{"name":"x","path":"../../etc/passwd"}]}`, nil)
	put("missing", `{"name":"missing","commands":[{"name":"x","path":"bin/x"}]}`, nil)
	put("badline", `{"name":"badline","schedules":[{"name":"s","line":"99 * * * * spawn task x"}]}`, nil)
	tests := []struct {
		name string
		args abi.PkgAddArgs
		kind abi.Kind
		want []string
	}{
		{"unknown key", abi.PkgAddArgs{Repo: "unknown"}, abi.Invalid, []string{"colour"}},
		{"wrong type", abi.PkgAddArgs{Repo: "wrongtype"}, abi.Invalid, []string{"commands"}},
		{"escaping command", abi.PkgAddArgs{Repo: "escape"}, abi.Invalid, []string{"commands[0].path", "escapes"}},
		{"missing file", abi.PkgAddArgs{Repo: "missing"}, abi.Invalid, []string{"commands[0].path", "bin/x"}},
		{"schedule line", abi.PkgAddArgs{Repo: "badline"}, abi.Invalid, []string{"schedules[0].line"}},
		{"no source", abi.PkgAddArgs{}, abi.Invalid, []string{"repo or remoteUrl"}},
		{"both sources", abi.PkgAddArgs{Repo: "x", RemoteURL: "https://x/y"}, abi.Invalid, []string{"repo or remoteUrl"}},
		{"subdir escapes", abi.PkgAddArgs{Repo: "unknown", Subdir: "../x"}, abi.Invalid, []string{"subdir"}},
		{"no manifest", abi.PkgAddArgs{Repo: "unknown", Subdir: "nothere"}, abi.Invalid, []string{"subdir", "gsv-package.json"}},
		{"no ref", abi.PkgAddArgs{Repo: "unknown", Ref: "v9"}, abi.NotExist, []string{"ref"}},
		{"file url", abi.PkgAddArgs{RemoteURL: "file:///etc"}, abi.Invalid, []string{"remoteUrl"}},
		{"another's repo", abi.PkgAddArgs{Repo: "bob/nothing"}, abi.NotExist, nil},
		{"global by a user", abi.PkgAddArgs{Repo: "unknown", Global: true}, abi.Permission, []string{"global"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fails(s, s.alice, abi.PkgAdd, &tt.args, tt.kind, tt.want...)
		})
	}
	if l := do(s, s.alice, abi.PkgList, &abi.PkgListArgs{}); len(l.Packages) != 0 {
		t.Fatalf("added: %+v", l.Packages)
	}
	if tab := s.crontab(s.alice); strings.TrimSpace(tab) != "" {
		t.Fatalf("crontab: %q", tab)
	}
	// Remotes: a name and an http(s) URL.
	fails(s, s.alice, abi.PkgRemoteAdd, &abi.PkgRemoteAddArgs{Name: "team", BaseURL: "ftp://x"}, abi.Invalid, "baseUrl")
	fails(s, s.alice, abi.PkgRemoteAdd, &abi.PkgRemoteAddArgs{Name: "te am", BaseURL: "https://x"}, abi.Invalid, "name")
	fails(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "nothing"}, abi.NotExist)
	_ = context.Background
}

// TestPkgInstallAllOrNothing: an install whose schedule clashes with a
// line of the owner's crontab fails, and its command written before
// the failure is removed again.
func TestPkgInstallAllOrNothing(t *testing.T) {
	s := newSys(t, nil)
	s.commit(s.alice, "release-tools", "main", releaseTools())
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	// alice's own line already has the name the package's would.
	do(s, s.alice, abi.SchedCrontabSet, &abi.CrontabSetArgs{Text: "@every 1h spawn task mine # name=pkg.release-tools.weekly\n"})
	fails(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"}, abi.Invalid)
	if _, err := os.Stat(filepath.Join(s.data, "home", "alice", ".gsv", "pkg", "bin", "relnotes")); !os.IsNotExist(err) {
		t.Fatalf("command left after a failed install: %v", err)
	}
	p := do(s, s.alice, abi.PkgShow, &abi.PkgIDArgs{PackageID: "release-tools"}).Package
	if p.Enabled || p.Active {
		t.Fatalf("after a failed install: %+v", p)
	}
	if tab := s.crontab(s.alice); !strings.Contains(tab, "spawn task mine") || strings.Count(tab, "name=") != 1 {
		t.Fatalf("crontab: %q", tab)
	}
}
