package main_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestE2EPackages drives packages through a real daemon, its gsv CLI and
// its FUSE mount: the builtin packages are there; alice's package in her
// repository is added (disabled, review required), shown, refused,
// approved and installed; its command runs in her exec session; its
// status and files read on the mount; bob cannot enable it; its ctl
// disables and enables it; marked public, it is in the catalog another
// user's remote fetches over --http.
func TestE2EPackages(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, logLevel: "warn", args: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	M := d.mnt
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(host int, args ...string) shResult {
		t.Helper()
		return gsvAs(host, env, args...)
	}
	ok := func(r shResult, what string, want ...string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %v", what, r)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Fatalf("%s: %q lacks %q", what, r.stdout, w)
			}
		}
		return r.stdout
	}
	sh := func(host int, script string) shResult {
		u := strconv.Itoa(host)
		return runCmd("/", nil, nil, "setpriv", "--reuid", u, "--regid", u, "--clear-groups", "bash", "-c", script)
	}

	// The builtin packages are synced once the daemon has set itself up.
	deadline := time.Now().Add(liveness)
	for !strings.Contains(gsv(aliceHost, "pkg", "list").stdout, "global/daily-digest") {
		if time.Now().After(deadline) {
			t.Fatal("no builtin packages")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ok(gsv(aliceHost, "pkg", "list"), "builtin", "global/packages", "global/code-reviewer", "not-required")

	files := map[string]string{
		"gsv-package.json": `{"name":"release-tools","version":"1.2.0","description":"Releases",
  "profiles":[{"id":"release-manager","prompt":"You cut releases."}],
  "skills":["release-notes"],
  "commands":[{"name":"relnotes","path":"bin/relnotes"}],
  "modules":[{"name":"changelog","path":"modules/changelog.js"}]}`,
		"modules/changelog.js":          "exports.title = (v) => \"Release \" + v;\n",
		"skills/release-notes/SKILL.md": "---\nname: release-notes\ndescription: Write release notes.\n---\nGroup the log.\n",
		"bin/relnotes":                  "#!/bin/sh\necho relnotes-ran \"$@\"\n",
	}
	var ops []map[string]string
	for p, c := range files {
		ops = append(ops, map[string]string{"op": "put", "path": p, "content": c})
	}
	// A binary file: it reads as its bytes on the mount.
	ops = append(ops, map[string]string{"op": "put", "path": "assets/logo.bin", "contentBase64": "AAH/iVBORw0KGgo="})
	apply, _ := json.Marshal(map[string]any{"repo": "release-tools", "message": "the package", "ops": ops})
	ok(gsv(aliceHost, "call", "repo.create", `{"repo":"release-tools"}`), "repo.create")
	ok(gsv(aliceHost, "call", "repo.apply", string(apply)), "repo.apply")

	ok(gsv(aliceHost, "pkg", "add", "alice/release-tools"), "add", "alice/release-tools", "disabled", "review required")
	ok(gsv(aliceHost, "pkg", "show", "release-tools"), "show", "command", "relnotes", "bin/relnotes", "runs as alice", "skill", "profile")
	if r := gsv(aliceHost, "pkg", "install", "release-tools"); r.code == 0 || !strings.Contains(r.stderr, "review required") {
		t.Fatalf("install unreviewed: %v", r)
	}
	if r := gsv(bobHost, "pkg", "install", "alice/release-tools"); r.code == 0 {
		t.Fatalf("bob installs alice's package: %v", r)
	}
	ok(gsv(aliceHost, "pkg", "review", "approve", "release-tools"), "approve", "approved")
	ok(gsv(aliceHost, "pkg", "install", "release-tools"), "install", "enabled")
	ok(gsv(aliceHost, "call", "proc.profile.list"), "profiles", "release-manager")
	if pid := strings.TrimSpace(ok(gsv(aliceHost, "spawn", "release-manager"), "spawn")); pid == "" {
		t.Fatal("spawn release-manager: no pid")
	} else {
		ok(gsv(aliceHost, "ps"), "ps", pid, "release-manager")
	}

	// Its command, on the PATH of alice's exec session.
	sid := strings.TrimSpace(ok(gsv(aliceHost, "session", "open"), "session open"))
	ok(gsv(aliceHost, "exec", sid, "--", "relnotes", "v1.2"), "exec relnotes", "relnotes-ran v1.2")

	// The files on the mount.
	pd := M + "/pkg/alice/release-tools"
	if r := sh(aliceHost, "cat "+pd+"/status; cat "+pd+"/files/bin/relnotes; ls "+M+"/pkg/skills"); r.code != 0 ||
		!strings.Contains(r.stdout, "active: true") || !strings.Contains(r.stdout, "relnotes-ran") || !strings.Contains(r.stdout, "release-notes") {
		t.Fatalf("mount: %v", r)
	}
	if r := sh(aliceHost, "od -An -tx1 "+pd+"/files/assets/logo.bin | tr -d ' \\n'"); r.code != 0 || r.stdout != "0001ff89504e470d0a1a0a" {
		t.Fatalf("binary file on the mount: %v", r)
	}
	// Its CodeMode module, in alice's blocks.
	block := `return typeof pkg === "object" && typeof pkg.changelog === "object" ? pkg.changelog.title("1.2") : "none"`
	ok(gsv(aliceHost, "codemode", "-e", block), "codemode module", "Release 1.2")
	ok(gsv(bobHost, "codemode", "-e", block), "bob's codemode", "none")
	if r := sh(bobHost, "ls "+M+"/pkg/skills; cat "+pd+"/status"); strings.Contains(r.stdout, "release-notes") || r.code == 0 {
		t.Fatalf("bob on the mount: %v", r)
	}
	// The ctl: remove, then install again.
	if r := sh(aliceHost, "echo remove > "+pd+"/ctl && grep -c 'active: false' "+pd+"/status && echo install > "+pd+"/ctl && grep -c 'active: true' "+pd+"/status"); r.code != 0 {
		t.Fatalf("ctl: %v", r)
	}
	if r := sh(aliceHost, "echo checkout nope > "+pd+"/ctl"); r.code == 0 {
		t.Fatalf("checkout of no ref: %v", r)
	}
	if r := sh(aliceHost, "cat "+pd+"/err"); !strings.Contains(r.stdout, "ref") {
		t.Fatalf("err: %v", r)
	}

	// A catalog over HTTP.
	ok(gsv(aliceHost, "pkg", "public", "set", "release-tools", "true"), "public set")
	ok(gsv(bobHost, "pkg", "remote", "add", "team", fmt.Sprintf("http://127.0.0.1:%d/", port)), "remote add", "team")
	ok(gsv(bobHost, "pkg", "public", "list", "team"), "public list", "release-tools", "alice/release-tools")
	if r := gsv(bobHost, "pkg", "remote", "add", "bad", "ftp://x"); r.code == 0 || !strings.Contains(r.stderr, "baseUrl") {
		t.Fatalf("remote add ftp: %v", r)
	}
	// Disabled, its module is gone from alice's blocks.
	ok(gsv(aliceHost, "pkg", "remove", "release-tools"), "remove")
	ok(gsv(aliceHost, "codemode", "-e", block), "codemode after remove", "none")
}
