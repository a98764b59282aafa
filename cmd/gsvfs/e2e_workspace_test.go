package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EWorkspace drives workspaces through a real daemon and its FUSE
// mount: gsv spawn --workspace new makes /workspaces/<id>, alice's and
// not bob's (EACCES as bob's host uid), the process's cwd, where its
// (scripted) agent writes a file by a relative path; gsv fork twice puts
// two processes on branches of their own, each made from the
// workspace's files; both agents change the same file; the first merge
// brings its change into the workspace's directory, the second is a 409
// naming the file, and both branches keep their commits; gsv kill
// checkpoints the workspace first (the continuity files and a file
// alice's shell wrote are in the commit).
func TestE2EWorkspace(t *testing.T) {
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
	alice := func(script string, args ...string) shResult { return d.shAs(aliceHost, script, args...) }
	read := func(p string) (string, error) {
		r := alice(`cat "$1"`, p)
		if r.code != 0 {
			return "", fmt.Errorf("%v", r)
		}
		return r.stdout, nil
	}
	if r := d.sh(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo 'set config/ai/script ~/turns.jsonl' > "$1/sys/config/ctl"`, M); r.code != 0 {
		t.Fatalf("set the script: %v", r)
	}
	// agentWrites has pid's agent write content to the relative path p
	// (its cwd's), approving what it asks.
	agentWrites := func(pid, p, content string) {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"path": p, "content": content})
		script := fmt.Sprintf("{\"tools\":[{\"name\":\"Write\",\"args\":%s}]}\n{\"text\":\"written\"}\n", args)
		if err := os.WriteFile(filepath.Join(d.state, "fs", "home", "alice", "turns.jsonl"), []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		P := M + "/proc/" + pid
		if r := alice(`echo 'write it' > "$1/conversations/default/in"`, P); r.code != 0 {
			t.Fatalf("send: %v", r)
		}
		deadline := time.Now().Add(liveness)
		for {
			st, _ := read(P + "/status")
			if strings.Contains(st, "state: idle\n") && strings.Contains(st, "queued: 0\n") && strings.Contains(st, "run: -\n") {
				return
			}
			if h, err := read(P + "/hil"); err == nil && strings.TrimSpace(h) != "" {
				alice(`echo "hil approve $2" > "$1/ctl"`, P, jsonField(h, "requestId"))
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not idle: %q", pid, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	type ws struct {
		WorkspaceID, Root, DefaultBranch, Dir, Repo string
		OwnerUid                                    uint32
		ProcessCount                                int
		ActiveProcess                               *struct{ Pid, Cwd string }
	}
	list := func() []ws {
		t.Helper()
		var l struct{ Workspaces []ws }
		if err := json.Unmarshal([]byte(gsv("call", "sys.workspace.list", "{}")), &l); err != nil {
			t.Fatal(err)
		}
		return l.Workspaces
	}
	onBranch := func(b string) ws {
		t.Helper()
		for _, w := range list() {
			if w.DefaultBranch == b {
				return w
			}
		}
		t.Fatalf("no workspace on %s: %+v", b, list())
		return ws{}
	}

	pid := strings.TrimSpace(gsv("spawn", "task", "--workspace", "new"))
	main := onBranch("main")
	W := M + main.Dir
	if main.Dir != "/workspaces/"+main.WorkspaceID || main.Repo != "alice/ws-"+main.WorkspaceID ||
		main.ProcessCount != 1 || main.ActiveProcess == nil || main.ActiveProcess.Pid != pid || main.ActiveProcess.Cwd != main.Dir {
		t.Fatalf("the workspace: %+v", main)
	}
	if out := gsv("ps"); !strings.Contains(out, pid) {
		t.Fatalf("gsv ps: %s", out)
	}
	if r := alice(`stat -c '%u %a' "$1"`, W); r.code != 0 || r.stdout != fmt.Sprintf("%d 700\n", aliceHost) {
		t.Fatalf("the workspace directory: %v", r)
	}
	agentWrites(pid, "notes.txt", "base\n")
	if s, err := read(W + "/notes.txt"); err != nil || s != "base\n" {
		t.Fatalf("the agent's file in its cwd: %q %v", s, err)
	}
	// bob: EACCES on the mount, and not in his list.
	for _, sh := range []string{`ls "$1"`, `cat "$1/notes.txt"`, `echo x > "$1/bob.txt"`} {
		if r := d.shAs(bobHost, sh, W); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("bob: %s: %v", sh, r)
		}
	}
	if r := gsvAs(bobHost, env, "call", "sys.workspace.list", "{}"); r.code != 0 || strings.Contains(r.stdout, main.WorkspaceID) {
		t.Errorf("bob's list: %v", r)
	}
	if r := gsvAs(bobHost, env, "workspace", "merge", main.WorkspaceID, "x"); r.code == 0 || !strings.Contains(r.stderr, "another user's workspace") {
		t.Errorf("bob merges alice's workspace: %v", r)
	}

	// Two forks, each from the workspace's files, each on a branch.
	try := strings.TrimSpace(gsv("fork", pid, "--branch", "try"))
	alt := strings.TrimSpace(gsv("fork", pid, "--branch", "alt"))
	wTry, wAlt := onBranch("try"), onBranch("alt")
	if wTry.Root != main.WorkspaceID || wAlt.Root != main.WorkspaceID || wTry.WorkspaceID == main.WorkspaceID {
		t.Fatalf("the forks: %+v %+v", wTry, wAlt)
	}
	for _, w := range []ws{wTry, wAlt} {
		if s, err := read(M + w.Dir + "/notes.txt"); err != nil || s != "base\n" {
			t.Fatalf("a fork's copy: %q %v", s, err)
		}
	}
	agentWrites(try, "notes.txt", "from try\n")
	agentWrites(alt, "notes.txt", "from alt\n")
	if s, _ := read(W + "/notes.txt"); s != "base\n" {
		t.Fatalf("a fork wrote into the workspace: %q", s)
	}

	// The first merge wins: its change is in the workspace's directory.
	if out := gsv("workspace", "merge", main.WorkspaceID, "try"); !strings.Contains(out, "notes.txt") {
		t.Fatalf("merge try: %q", out)
	}
	if s, err := read(W + "/notes.txt"); err != nil || s != "from try\n" {
		t.Fatalf("after merging try: %q %v", s, err)
	}
	// The second is a conflict, reported, and nothing is lost.
	r := gsvAs(aliceHost, env, "workspace", "merge", main.WorkspaceID, "alt")
	if r.code == 0 || !strings.Contains(r.stderr, "merge conflict: notes.txt") || !strings.Contains(r.stderr, "409") {
		t.Fatalf("merge alt: %v", r)
	}
	refs := M + "/src/repos/alice/ws-" + main.WorkspaceID + "/refs/heads"
	for p, want := range map[string]string{
		W + "/notes.txt":              "from try\n",
		M + wAlt.Dir + "/notes.txt":   "from alt\n",
		refs + "/alt/tree/notes.txt":  "from alt\n",
		refs + "/try/tree/notes.txt":  "from try\n",
		refs + "/main/tree/notes.txt": "from try\n",
	} {
		if s, err := read(p); err != nil || s != want {
			t.Errorf("after the conflict, %s: %q %v, want %q", p, s, err, want)
		}
	}

	// Bad input: a branch name git refuses, an unknown branch, a mode
	// that is none of the seed's; each a 4xx that makes nothing.
	before := len(list())
	for _, args := range [][]string{{"fork", pid, "--branch", "a..b"}, {"workspace", "merge", main.WorkspaceID, "no-such"},
		{"call", "proc.spawn", `{"profile":"task","workspace":{"mode":"shared"}}`}} {
		if r := gsvAs(aliceHost, env, args...); r.code == 0 || !strings.Contains(r.stderr, "(4") {
			t.Errorf("gsv %v: %v", args, r)
		}
	}
	if n := len(list()); n != before {
		t.Errorf("bad input made workspaces: %d, was %d", n, before)
	}

	// gsv kill checkpoints the workspace first.
	if r := alice(`echo late > "$1/late.txt"`, W); r.code != 0 {
		t.Fatalf("write late.txt: %v", r)
	}
	gsv("kill", pid)
	if s, err := read(refs + "/main/tree/late.txt"); err != nil || s != "late\n" {
		t.Fatalf("the kill's checkpoint lacks late.txt: %q %v", s, err)
	}
	if s, err := read(refs + "/main/tree/.gsv/summary.md"); err != nil || !strings.Contains(s, "# Process "+pid) {
		t.Fatalf("the kill's checkpoint lacks the summary: %q %v", s, err)
	}
	if s, err := read(refs + "/main/log"); err != nil || !strings.Contains(s, "proc.kill "+pid) {
		t.Fatalf("the log: %q %v", s, err)
	}
	// gsv reset does too, on the fork's branch.
	if r := alice(`echo reset > "$1/reset.txt"`, M+wTry.Dir); r.code != 0 {
		t.Fatalf("write reset.txt: %v", r)
	}
	gsv("reset", "--pid", try)
	if s, err := read(refs + "/try/tree/reset.txt"); err != nil || s != "reset\n" {
		t.Fatalf("the reset's checkpoint lacks reset.txt: %q %v", s, err)
	}
	if s, err := read(refs + "/try/tree/.gsv/processes/" + try + "/conversations/default/chat.jsonl"); err != nil || !strings.Contains(s, "write it") {
		t.Fatalf("the reset's checkpoint lacks the chat: %q %v", s, err)
	}
	// Both sides' checkpoints wrote .gsv/summary.md: merging try again
	// keeps the workspace's summary and takes try's new file and chat.
	if out := gsv("workspace", "merge", main.WorkspaceID, "try"); !strings.Contains(out, "reset.txt") || strings.Contains(out, "summary.md") {
		t.Fatalf("merge try after kill and reset: %q", out)
	}
	for p, want := range map[string]string{W + "/reset.txt": "reset\n", W + "/late.txt": "late\n"} {
		if s, err := read(p); err != nil || s != want {
			t.Errorf("after the second merge, %s: %q %v", p, s, err)
		}
	}
	if s, err := read(W + "/.gsv/summary.md"); err != nil || !strings.Contains(s, "# Process "+pid) {
		t.Errorf("the workspace's summary after the merge: %q %v", s, err)
	}
}
