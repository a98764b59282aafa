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

// TestE2ERepos drives repositories through a real daemon: the gsv CLI
// makes one, the real git client (Debian's) clones it over /git/ on
// --http as alice's host uid with her token, commits and pushes; the
// push is read back through the FUSE mount with cat, ls, grep -r and
// tar; an apply with a stale expectedHead changes nothing; bob (another
// host uid) gets EACCES on the mount and 403 over HTTP.
func TestE2ERepos(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip("no git (make deps)")
	}
	port := freePort(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, logLevel: "warn", args: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	M := d.mnt
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	bobUID := addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(host int, args ...string) (string, shResult) {
		t.Helper()
		r := gsvAs(host, env, args...)
		return r.stdout, r
	}
	token := func(uid uint32) string {
		var tok struct{ Token struct{ Token string } }
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": uid}), &tok)
		return tok.Token.Token
	}
	aliceTok, bobTok := token(aliceUID), token(bobUID)
	out, r := gsv(aliceHost, "call", "repo.create", `{"repo":"notes"}`)
	if r.code != 0 || !strings.Contains(out, `"created": true`) && !strings.Contains(out, `"created":true`) {
		t.Fatalf("repo.create: %v", r)
	}
	// A work directory of alice's host uid, outside the mount.
	work := filepath.Join(d.base, "alicework")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(work, aliceHost, aliceHost)
	git := func(host int, dir, script string) shResult {
		u := strconv.Itoa(host)
		return runCmd(dir, []string{"HOME=" + work, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}, nil,
			"setpriv", "--reuid", u, "--regid", u, "--clear-groups", "sh", "-c",
			"git -c user.name=alice -c user.email=a@x -c safe.directory='*' "+script)
	}
	url := func(user, tok, repo string) string {
		return fmt.Sprintf("http://%s:%s@127.0.0.1:%d/git/%s", user, tok, port, repo)
	}
	if r := git(aliceHost, work, "clone "+url("alice", aliceTok, "alice/notes")+" notes"); r.code != 0 {
		t.Fatalf("clone: %v", r)
	}
	wt := filepath.Join(work, "notes")
	if r := git(aliceHost, wt, `checkout -q -b main 2>/dev/null; mkdir -p d && printf 'hello\n' > a.md && printf 'deep needle\n' > d/b.txt && git add -A && git -c user.name=alice -c user.email=a@x commit -qm 'from git' && git push -q origin HEAD:main`); r.code != 0 {
		t.Fatalf("commit and push: %v", r)
	}
	tree := M + "/src/repos/alice/notes/refs/heads/main/tree"
	sh := func(host int, script string) shResult {
		u := strconv.Itoa(host)
		return runCmd("/", nil, nil, "setpriv", "--reuid", u, "--regid", u, "--clear-groups", "bash", "-c", script, "bash", M)
	}
	for _, tc := range []struct{ script, want string }{
		{"cat " + tree + "/a.md", "hello\n"},
		{"ls " + tree, "a.md\nd\n"},
		{"grep -r needle " + tree, tree + "/d/b.txt:deep needle\n"},
		{"tar -cf - -C " + tree + " . | tar -tf - | sort", "./\n./a.md\n./d/\n./d/b.txt\n"},
		{"ls " + M + "/src/repos/alice/notes/refs/heads", "main\n"},
	} {
		r := sh(aliceHost, tc.script)
		if r.code != 0 || r.stdout != tc.want {
			t.Errorf("%s: %q, want %q (%v)", tc.script, r.stdout, tc.want, r)
		}
	}
	if r := sh(aliceHost, "cat "+M+"/src/repos/alice/notes/log"); r.code != 0 || !strings.Contains(r.stdout, "    from git\n") || !strings.Contains(r.stdout, "Create alice/notes") {
		t.Errorf("log: %v", r)
	}
	// A stale expectedHead: 409, nothing changes.
	var refs struct{ Heads map[string]string }
	out, r = gsv(aliceHost, "call", "repo.refs", `{"repo":"alice/notes"}`)
	if r.code != 0 || json.Unmarshal([]byte(out), &refs) != nil {
		t.Fatalf("refs: %v", r)
	}
	head := refs.Heads["main"]
	_, r = gsv(aliceHost, "call", "repo.apply", `{"repo":"alice/notes","ref":"main","message":"m","expectedHead":"0123456789012345678901234567890123456789","ops":[{"op":"put","path":"a.md","content":"changed"}]}`)
	if r.code == 0 || !strings.Contains(r.stderr, "stale head") {
		t.Fatalf("a stale apply: %v", r)
	}
	if r := sh(aliceHost, "cat "+tree+"/a.md; cat "+M+"/src/repos/alice/notes/refs/heads/main/head"); r.stdout != "hello\n"+head+"\n" {
		t.Fatalf("after a stale apply: %v", r)
	}
	// bob: EACCES on the mount, 403 over HTTP, no push.
	if r := sh(bobHost, "ls "+M+"/src/repos/alice/notes/refs"); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("bob lists alice's private repository: %v", r)
	}
	if r := sh(bobHost, "cat "+tree+"/a.md"); r.code == 0 {
		t.Errorf("bob reads alice's private repository: %v", r)
	}
	if r := git(bobHost, "/", "ls-remote "+url("bob", bobTok, "alice/notes")); r.code == 0 || !strings.Contains(r.stderr, "403") {
		t.Errorf("bob ls-remote: %v", r)
	}
	if r := git(aliceHost, wt, "push "+url("bob", bobTok, "alice/notes")+" HEAD:refs/heads/bob"); r.code == 0 || !strings.Contains(r.stderr, "403") {
		t.Errorf("bob pushes: %v", r)
	}
}

// TestE2EHome: every change to a home is committed to USER/home within
// seconds, whoever made it (alice's shell on the mount, then a syscall as
// her agent would make it); gsv home log shows both, gsv home diff shows
// what the second changed, and gsv home restore undoes it on the mount.
func TestE2EHome(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, logLevel: "warn"})
	M := d.mnt
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(aliceHost, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %s: %v", strings.Join(args, " "), r)
		}
		return r.stdout
	}
	sh := func(script string) shResult {
		u := strconv.Itoa(aliceHost)
		return runCmd("/", nil, nil, "setpriv", "--reuid", u, "--regid", u, "--clear-groups", "bash", "-c", script, "bash", M)
	}
	// committed waits (a liveness guard only) until main's notes.txt is want.
	committed := func(want string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			r := gsvAs(aliceHost, env, "call", "repo.read", `{"repo":"alice/home","path":"notes.txt"}`)
			var f struct{ Content *string }
			if r.code == 0 && json.Unmarshal([]byte(r.stdout), &f) == nil && f.Content != nil && *f.Content == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("notes.txt %q never committed: %v", want, r)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if r := sh("echo v1 > " + M + "/home/alice/notes.txt"); r.code != 0 {
		t.Fatalf("write: %v", r)
	}
	committed("v1\n")
	gsv("call", "fs.write", `{"path":"/home/alice/notes.txt","content":"the agent wrote this\n"}`)
	committed("the agent wrote this\n")
	if log := gsv("home", "log"); strings.Count(log, "notes.txt") < 2 {
		t.Fatalf("home log:\n%s", log)
	}
	diff := gsv("home", "diff", "HEAD~1", "--", "notes.txt")
	if !strings.Contains(diff, "-v1\n") || !strings.Contains(diff, "+the agent wrote this\n") {
		t.Fatalf("home diff:\n%s", diff)
	}
	gsv("home", "restore", "HEAD~1", "--", "notes.txt")
	if r := sh("cat " + M + "/home/alice/notes.txt"); r.stdout != "v1\n" {
		t.Fatalf("after restore: %v", r)
	}
	committed("v1\n") // the restore is a change too
}

// TestE2EHomeKill: kill -9 while alice's writes and the home keeper's
// batches run loses no acknowledged write: after a restart on the same
// state, the next batch commits every file the writes acknowledged.
func TestE2EHomeKill(t *testing.T) {
	requireRoot(t)
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{mount: true, logLevel: "warn"})
	addUser(t, d.dial(t), "alice", aliceHost)
	u := strconv.Itoa(aliceHost)
	// Writes for about four seconds (more than one batch), then the kill.
	r := runCmd("/", nil, nil, "setpriv", "--reuid", u, "--regid", u, "--clear-groups", "bash", "-c",
		`mkdir -p "$1/home/alice/w" && end=$((SECONDS+4)); i=0; while [ $SECONDS -lt $end ]; do /bin/echo "file $i" > "$1/home/alice/w/$i" || exit 1; i=$((i+1)); done; echo $i`, "bash", d.mnt)
	d.kill()
	if r.code != 0 {
		t.Fatalf("writes: %v", r)
	}
	n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	if err != nil || n == 0 {
		t.Fatalf("writes: %v", r)
	}
	d2 := startDaemon(t, base, daemonOpts{mount: true, logLevel: "warn"})
	env := []string{"GSV_ADDR=unix!" + d2.sock}
	deadline := time.Now().Add(120 * time.Second) // liveness only
	for {
		r := gsvAs(aliceHost, env, "call", "repo.read", `{"repo":"alice/home","path":"w"}`)
		var tree struct{ Entries []struct{ Name string } }
		if r.code == 0 && json.Unmarshal([]byte(r.stdout), &tree) == nil && len(tree.Entries) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files written, the home's w has %d: %v", n, len(tree.Entries), r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	last := strconv.Itoa(n - 1)
	r = gsvAs(aliceHost, env, "call", "repo.read", `{"repo":"alice/home","path":"w/`+last+`"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"file `+last+`\n"`) {
		t.Fatalf("w/%s: %v", last, r)
	}
}
