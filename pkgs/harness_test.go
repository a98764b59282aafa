package pkgs_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/mcp"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/pkgs"
	"gsvfs.dev/gsvfs/proc"
	"gsvfs.dev/gsvfs/proc/model"
	"gsvfs.dev/gsvfs/repos"
	"gsvfs.dev/gsvfs/sched"
)

// sys is a system as gsvfs stands it up for packages: a kernel (root,
// alice, bob), the devices room (the data tree, exec sessions), the
// repositories, the scheduler, MCP, and the package room last.
type sys struct {
	t                *testing.T
	k                *kernel.Kernel
	space            *ns.Space
	room             *pkgs.Room
	root, alice, bob *kernel.Caller
	data             string
}

// newSys stands a system up with builtin packages builtin (nil: none);
// it closes when the test ends.
func newSys(t *testing.T, builtin fstest.MapFS) *sys {
	t.Helper()
	return newSysWith(t, builtin, nil)
}

// newSysWith is newSys with the process room too, its model provider
// prov, when prov is set.
func newSysWith(t *testing.T, builtin fstest.MapFS, prov model.Provider) *sys {
	t.Helper()
	return newSysAt(t, t.TempDir(), builtin, prov)
}

// newSysAt is newSysWith on the state directory dir (a state already
// there is opened as it is).
func newSysAt(t *testing.T, dir string, builtin fstest.MapFS, prov model.Provider) *sys {
	t.Helper()
	e := kerneltest.OpenAt(t, dir)
	space := ns.New(e.K)
	t.Cleanup(func() { space.Close() })
	ctx := context.Background()
	dev, err := devices.New(e.K, devices.Options{Space: space, Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, dev); err != nil {
		t.Fatal(err)
	}
	dev.SetRoot(space.Root())
	rp, err := repos.Open(space, repos.Options{Logger: kerneltest.Quiet(), HomeEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, rp); err != nil {
		t.Fatal(err)
	}
	sc, err := sched.Open(space, sched.Options{Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, sc); err != nil {
		t.Fatal(err)
	}
	mc, err := mcp.Open(space, mcp.Options{Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, mc); err != nil {
		t.Fatal(err)
	}
	if prov != nil {
		pm, err := proc.Open(space, proc.Options{Logger: kerneltest.Quiet(),
			Provider: func(context.Context, uint32) (model.Provider, string, error) { return prov, "test", nil }})
		if err != nil {
			t.Fatal(err)
		}
		if err := space.Add(ctx, pm); err != nil {
			t.Fatal(err)
		}
	}
	opts := pkgs.Options{Logger: kerneltest.Quiet()}
	if builtin != nil {
		opts.Builtin = builtin
	}
	room, err := pkgs.Open(space, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, room); err != nil {
		t.Fatal(err)
	}
	return &sys{t: t, k: e.K, space: space, room: room, root: kerneltest.Caller(e.Root),
		alice: kerneltest.Caller(e.Alice), bob: kerneltest.Caller(e.Bob), data: filepath.Join(e.K.StateDir(), "fs")}
}

// do makes call as c and fails the test on an error.
func do[A, R any](s *sys, c *kernel.Caller, call abi.Call[A, R], a *A) R {
	s.t.Helper()
	res, err := kernel.Do(context.Background(), s.k, c, call, a)
	if err != nil {
		s.t.Fatalf("%s: %v", call.Name, err)
	}
	return res
}

// fails makes call as c and wants an error of kind, whose text holds
// each of want.
func fails[A, R any](s *sys, c *kernel.Caller, call abi.Call[A, R], a *A, kind abi.Kind, want ...string) {
	s.t.Helper()
	_, err := kernel.Do(context.Background(), s.k, c, call, a)
	if err == nil {
		s.t.Fatalf("%s: succeeded, want %d", call.Name, kind)
	}
	var e *abi.Error
	if !errors.As(err, &e) || abi.KindOf(err) != kind {
		s.t.Fatalf("%s: %v (kind %d), want kind %d", call.Name, err, abi.KindOf(err), kind)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			s.t.Fatalf("%s: %q does not say %q", call.Name, err, w)
		}
	}
}

func str(s string) *string { return &s }

// commit writes files (path -> content) to c's repository repo on ref
// (made if need be) and returns the new head.
func (s *sys) commit(c *kernel.Caller, repo, ref string, files map[string]string) string {
	s.t.Helper()
	do(s, c, abi.RepoCreate, &abi.RepoCreateArgs{Repo: repo, Ref: ref})
	var ops []abi.RepoOp
	for p, body := range files {
		ops = append(ops, abi.RepoOp{Type: "put", Path: p, Content: str(body)})
	}
	res := do(s, c, abi.RepoApply, &abi.RepoApplyArgs{Repo: repo, Ref: ref, Message: "package files", Ops: ops})
	return *res.Head
}

// tag puts a branch of repo at files (tests use branches as versions).
func (s *sys) branch(c *kernel.Caller, repo, ref string, files map[string]string) string {
	s.t.Helper()
	return s.commit(c, repo, ref, files)
}

// releaseTools is a package with a profile, a skill, context, a command
// and a schedule.
func releaseTools() map[string]string {
	return map[string]string{
		"gsv-package.json": `{
  "name": "release-tools",
  "version": "1.2.0",
  "description": "Cut and announce releases",
  "profiles": [{"id": "release-manager", "description": "Cuts releases", "promptFile": "profiles/release-manager.md", "budget": {"turns": 20}}],
  "skills": ["release-notes"],
  "context": ["CONTEXT.md"],
  "commands": [{"name": "relnotes", "path": "bin/relnotes"}],
  "schedules": [{"name": "weekly", "line": "0 9 * * 1 spawn task draft the release notes"}]
}`,
		"profiles/release-manager.md":   "You are the release manager. Follow the release checklist.\n",
		"skills/release-notes/SKILL.md": "---\nname: release-notes\ndescription: Write release notes from the log.\n---\nRead repo.log and group the changes.\n",
		"CONTEXT.md":                    "Releases are cut on Mondays.\n",
		"bin/relnotes":                  "#!/bin/sh\necho relnotes-ran \"$@\"\n",
	}
}
