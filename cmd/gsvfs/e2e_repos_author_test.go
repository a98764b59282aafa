package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scriptAgent has pid's scripted agent (config/ai/provider scripted,
// script ~/turns.jsonl of alice's) play script, approving what it asks,
// until the process is idle again.
func scriptAgent(t *testing.T, d *daemon, pid, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.state, "fs", "home", "alice", "turns.jsonl"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	P := d.mnt + "/proc/" + pid
	if r := d.shAs(aliceHost, `echo 'go' > "$1/conversations/default/in"`, P); r.code != 0 {
		t.Fatalf("send: %v", r)
	}
	deadline := time.Now().Add(liveness)
	for {
		st, _ := d.cat(P + "/status")
		if strings.Contains(st, "state: idle\n") && strings.Contains(st, "queued: 0\n") && strings.Contains(st, "run: -\n") {
			return
		}
		if h, err := d.cat(P + "/hil"); err == nil && strings.TrimSpace(h) != "" {
			d.sh(`echo "hil approve $2" > "$1/ctl"`, P, jsonField(h, "requestId"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not idle: %q", pid, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeScript is a script whose agent writes content to p with Write.
func writeScript(p, content string) string {
	args, _ := json.Marshal(map[string]string{"path": p, "content": content})
	return fmt.Sprintf("{\"tools\":[{\"name\":\"Write\",\"args\":%s}]}\n{\"text\":\"written\"}\n", args)
}

// TestE2EHomeAuthors: the home keeper names each change's writer. With
// the keeper switched off (config/repos/home off), alice's agent writes
// agent.txt (fs.write as its process), root writes root.txt in alice's
// home through the FUSE mount, alice writes alice.txt through it, and a
// file appears on the disk as a sandboxed shell's write would (no
// signal); switched on, one batch commits them one commit per writer:
// git log over /git/ (the real git client) and gsv home log show
// "alice (p_...)", root and alice as the authors of their files, the
// unsigned file alice's.
func TestE2EHomeAuthors(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("no git (make deps)")
	}
	port := freePort(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, logLevel: "warn", args: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	M := d.mnt
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(aliceHost, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %s: %v", strings.Join(args, " "), r)
		}
		return r.stdout
	}
	d.mustSh(t, `echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo 'set config/ai/script ~/turns.jsonl' > "$1/sys/config/ctl"`, M)
	// A value the switch refuses is a 400 and changes nothing.
	if r := d.sh(`echo 'set config/repos/home maybe' > "$1/sys/config/ctl"`, M); r.code == 0 {
		t.Fatalf("config/repos/home maybe: %v", r)
	}
	d.mustSh(t, `echo 'set config/repos/home off' > "$1/sys/config/ctl"`, M)

	pid := strings.TrimSpace(gsv("spawn", "task"))
	scriptAgent(t, d, pid, writeScript("/home/alice/agent.txt", "from the agent\n"))
	d.mustSh(t, `echo 'from root' > "$1/home/alice/root.txt"`, M)
	if r := d.shAs(aliceHost, `echo 'from alice' > "$1/home/alice/alice.txt"`, M); r.code != 0 {
		t.Fatalf("alice writes: %v", r)
	}
	shellFile := filepath.Join(d.state, "fs", "home", "alice", "shell.txt")
	if err := os.WriteFile(shellFile, []byte("from a shell\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(shellFile, aliceHost, aliceHost)
	d.mustSh(t, `echo 'set config/repos/home on' > "$1/sys/config/ctl"`, M)

	files := []string{"agent.txt", "alice.txt", "root.txt", "shell.txt"}
	deadline := time.Now().Add(liveness) // liveness only
	for {
		r := gsvAs(aliceHost, env, "call", "repo.read", `{"repo":"alice/home"}`)
		var tree struct{ Entries []struct{ Name string } }
		have := map[string]bool{}
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &tree) == nil {
			for _, e := range tree.Entries {
				have[e.Name] = true
			}
		}
		all := true
		for _, f := range files {
			all = all && have[f]
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the home's files never committed: %v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The real git client's log: each file in a commit of its writer's.
	work := filepath.Join(d.base, "alicework")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(work, aliceHost, aliceHost)
	var tok struct{ Token struct{ Token string } }
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": aliceUID}), &tok)
	u := strconv.Itoa(aliceHost)
	git := func(dir, script string) shResult {
		return runCmd(dir, []string{"HOME=" + work, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}, nil,
			"setpriv", "--reuid", u, "--regid", u, "--clear-groups", "sh", "-c", "git -c safe.directory='*' "+script)
	}
	url := fmt.Sprintf("http://alice:%s@127.0.0.1:%d/git/alice/home", tok.Token.Token, port)
	if r := git(work, "clone -q "+url+" home"); r.code != 0 {
		t.Fatalf("git clone: %v", r)
	}
	author := map[string]string{}
	for _, f := range files {
		r := git(filepath.Join(work, "home"), "log -1 --format=%an -- "+f)
		if r.code != 0 {
			t.Fatalf("git log %s: %v", f, r)
		}
		author[f] = strings.TrimSpace(r.stdout)
	}
	want := map[string]string{"agent.txt": "alice (" + pid + ")", "root.txt": "root", "alice.txt": "alice", "shell.txt": "alice"}
	for f, w := range want {
		if author[f] != w {
			t.Errorf("git log: %s's author is %q, want %q", f, author[f], w)
		}
	}
	// Each writer's commit holds only their files.
	if r := git(filepath.Join(work, "home"), "log -1 --format= --name-only -- root.txt"); strings.TrimSpace(r.stdout) != "root.txt" {
		t.Errorf("root's commit: %v", r)
	}
	log := gsv("home", "log")
	if !strings.Contains(log, "root") || !strings.Contains(log, pid) {
		t.Errorf("gsv home log:\n%s", log)
	}
}

// TestE2EWorkspaceAutosaveRemove: a file alice writes in her
// workspace through the mount is committed by the keeper within
// seconds (autosave, alice its author); a workspace whose process is
// running is a 409 to remove (gsv workspace remove and the ctl), and
// nothing is removed; once the run ends, the remove commits the working
// tree a last time, removes the directory and its listing, detaches the
// process, and the history stays readable.
func TestE2EWorkspaceAutosaveRemove(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, logLevel: "warn"})
	M := d.mnt
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(aliceHost, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %s: %v", strings.Join(args, " "), r)
		}
		return r.stdout
	}
	d.mustSh(t, `echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo 'set config/ai/script ~/turns.jsonl' > "$1/sys/config/ctl"`, M)
	pid := strings.TrimSpace(gsv("spawn", "task", "--workspace", "new"))
	var l struct {
		Workspaces []struct{ WorkspaceID, Dir, Repo string }
	}
	if err := json.Unmarshal([]byte(gsv("call", "sys.workspace.list", "{}")), &l); err != nil || len(l.Workspaces) != 1 {
		t.Fatalf("list: %+v %v", l, err)
	}
	w := l.Workspaces[0]
	if r := d.shAs(aliceHost, `echo 'saved' > "$1/auto.txt"`, M+w.Dir); r.code != 0 {
		t.Fatalf("write: %v", r)
	}
	tree := M + "/src/repos/alice/ws-" + w.WorkspaceID + "/refs/heads/main"
	deadline := time.Now().Add(liveness) // liveness only
	for {
		if r := d.shAs(aliceHost, `cat "$1/tree/auto.txt"`, tree); r.code == 0 && r.stdout == "saved\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("auto.txt never autosaved")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := d.shAs(aliceHost, `cat "$1/log"`, tree); !strings.Contains(r.stdout, "autosave: auto.txt") || !strings.Contains(r.stdout, "alice") {
		t.Errorf("the workspace's log: %v", r)
	}

	// A run in progress (a slow model turn) pins the workspace.
	script := "{\"delayMs\":120000,\"text\":\"slow\"}\n"
	if err := os.WriteFile(filepath.Join(d.state, "fs", "home", "alice", "turns.jsonl"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	P := M + "/proc/" + pid
	if r := d.shAs(aliceHost, `echo 'go' > "$1/conversations/default/in"`, P); r.code != 0 {
		t.Fatalf("send: %v", r)
	}
	deadline = time.Now().Add(liveness)
	for {
		if st, _ := d.cat(P + "/status"); strings.Contains(st, "state: running\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := gsvAs(aliceHost, env, "workspace", "remove", w.WorkspaceID); r.code == 0 || !strings.Contains(r.stderr, "409") || !strings.Contains(r.stderr, pid) {
		t.Errorf("remove while running: %v", r)
	}
	if r := d.shAs(aliceHost, `echo "remove $2" > "$1/src/workspaces/ctl"`, M, w.WorkspaceID); r.code == 0 {
		t.Errorf("ctl remove while running: %v", r)
	}
	if r := d.shAs(aliceHost, `cat "$1/src/workspaces/err"`, M); !strings.Contains(r.stdout, "in use") {
		t.Errorf("the ctl's err: %v", r)
	}
	if r := d.shAs(aliceHost, `cat "$1/auto.txt"`, M+w.Dir); r.stdout != "saved\n" {
		t.Fatalf("a refused remove removed files: %v", r)
	}
	// bob may not remove alice's.
	if r := gsvAs(bobHost, env, "workspace", "remove", w.WorkspaceID); r.code == 0 || !strings.Contains(r.stderr, "403") {
		t.Errorf("bob removes alice's workspace: %v", r)
	}
	gsv("call", "proc.abort", fmt.Sprintf(`{"pid":%q}`, pid))
	if r := d.shAs(aliceHost, `echo 'last' > "$1/last.txt"`, M+w.Dir); r.code != 0 {
		t.Fatalf("write: %v", r)
	}
	deadline = time.Now().Add(liveness)
	for {
		r := gsvAs(aliceHost, env, "workspace", "remove", w.WorkspaceID)
		if r.code == 0 {
			break
		}
		if !strings.Contains(r.stderr, "409") || time.Now().After(deadline) {
			t.Fatalf("remove: %v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := d.shAs(aliceHost, `ls "$1"`, M+w.Dir); r.code == 0 {
		t.Errorf("the working tree is still there: %v", r)
	}
	if out := gsv("call", "sys.workspace.list", "{}"); strings.Contains(out, w.WorkspaceID) {
		t.Errorf("still listed: %s", out)
	}
	if r := d.shAs(aliceHost, `cat "$1/tree/last.txt"`, tree); r.stdout != "last\n" {
		t.Errorf("the last commit lacks last.txt: %v", r)
	}
	if st, _ := d.cat(P + "/status"); strings.Contains(st, w.WorkspaceID) {
		t.Errorf("the process still names the workspace: %q", st)
	}
	if r := gsvAs(aliceHost, env, "workspace", "remove", w.WorkspaceID); r.code == 0 || !strings.Contains(r.stderr, "404") {
		t.Errorf("remove again: %v", r)
	}
}
