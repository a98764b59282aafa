package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
)

// shellExec calls shell.exec as id and returns its data.
func shellExec(t *testing.T, k *env, id *kernel.Identity, a *abi.ShellExecArgs) map[string]any {
	t.Helper()
	res, err := k.Call(context.Background(), &kernel.Caller{Identity: id}, "shell.exec", a)
	if err != nil {
		t.Fatalf("shell.exec %q: %v", a.Input, err)
	}
	return asMap(res)
}

func TestShellExec(t *testing.T) {
	k, root, _, _ := newKernel(t)
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo hello; echo oops >&2"})
	if r["status"] != "completed" || r["exitCode"] != 0 || r["output"] != "hello\noops\n" {
		t.Fatalf("echo: %v", r)
	}
	for _, f := range []string{"truncated", "error"} {
		if _, ok := r[f]; ok {
			t.Fatalf("echo has %s: %v", f, r)
		}
	}
	// stdin is /dev/null: cat ends at once.
	r = shellExec(t, k, root, &abi.ShellExecArgs{Input: "cat; echo done"})
	if r["output"] != "done\n" {
		t.Fatalf("stdin: %v", r)
	}
	// A timeout too large for a time.Duration is the longest one.
	r = shellExec(t, k, root, &abi.ShellExecArgs{Input: "sleep 0.1; echo slept", TimeoutMs: math.MaxInt64})
	if r["status"] != "completed" || r["output"] != "slept\n" {
		t.Fatalf("huge timeout: %v", r)
	}
}

// A non-zero exit is a failure that keeps its output and exit code.
func TestShellExecFailed(t *testing.T) {
	k, root, _, _ := newKernel(t)
	for _, c := range []struct {
		input, output, error string
		code                 int
	}{
		{"echo before; exit 3", "before\n", "exit code 3", 3},
		{"echo out; echo err >&2; false", "out\nerr\n", "exit code 1", 1},
		{"echo term; kill -TERM $$", "term\n", "killed by SIGTERM (exit code 143)", 128 + 15},
	} {
		r := shellExec(t, k, root, &abi.ShellExecArgs{Input: c.input})
		if r["status"] != "failed" || r["exitCode"] != c.code || r["output"] != c.output || r["error"] != c.error {
			t.Errorf("%q: %v", c.input, r)
		}
	}
}

func TestShellExecFrames(t *testing.T) {
	k, root, _, _ := newKernel(t)
	r := frame(t, k, root, `{"call":"shell.exec","args":{"target":"gsv","input":"printf ok"}}`)
	data, _ := r.Data.(map[string]any)
	if !r.OK || data["status"] != "completed" || data["output"] != "ok" || data["exitCode"] != float64(0) {
		t.Fatalf("gsv: %+v", r)
	}
	r = frame(t, k, root, `{"call":"shell.exec","args":{"input":"printf no; exit 2"}}`)
	data, _ = r.Data.(map[string]any)
	if !r.OK || data["status"] != "failed" || data["output"] != "no" || data["exitCode"] != float64(2) {
		t.Fatalf("exit 2: %+v", r)
	}
	r = frame(t, k, root, `{"call":"shell.exec","args":{"sessionId":"sh_1","input":""}}`)
	if r.OK || r.Error.Code != 404 || r.Error.Message != "shell.exec: Unknown shell session: sh_1" {
		t.Fatalf("unknown session: %+v", r)
	}
	r = frame(t, k, root, `{"call":"shell.exec","args":{"input":"  "}}`)
	data, _ = r.Data.(map[string]any)
	if !r.OK || data["ok"] != false {
		t.Fatalf("empty input: %+v", r)
	}
	// The capability gates the call.
	noShell := *root
	noShell.Capabilities = []string{"fs.*"}
	r = frame(t, k, &noShell, `{"call":"shell.exec","args":{"input":"true"}}`)
	if r.OK || r.Error.Code != 403 {
		t.Fatalf("without the capability: %+v", r)
	}
}

// Anyone but root runs commands in a sandbox with their own grant: their
// home read-write, as an unprivileged uid, without the host's secrets,
// the state directory or other users' homes; what they write lands in
// their home in the namespace.
func TestShellSandboxedForNonRoot(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	os.MkdirAll(filepath.Join(k.dataPath, "home/bob/private"), 0o700)
	res, err := k.Call(context.Background(), &kernel.Caller{Identity: alice}, "shell.exec",
		&abi.ShellExecArgs{Cwd: "/home/alice", Input: "id -u; pwd; echo made > made.txt; head -1 /etc/shadow || echo noshadow; " +
			"ls /home/bob/private || echo nobob; ls " + k.StateDir() + " || echo nostate; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	r := res.(*abi.ShellExecResult)
	for _, want := range []string{"1000\n/home/alice\n", "noshadow", "nobob", "nostate"} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("output lacks %q: %q", want, r.Output)
		}
	}
	if r.Status != "failed" || r.ExitCode == nil || *r.ExitCode != 3 || strings.Contains(r.Output, "root:") {
		t.Fatalf("result %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(k.dataPath, "home/alice/made.txt")); err != nil || string(b) != "made\n" {
		t.Fatalf("made.txt: %q, %v", b, err)
	}
	// The capability still gates the call.
	noShell := *alice
	noShell.Capabilities = []string{"fs.*"}
	if r := frame(t, k, &noShell, `{"call":"shell.exec","args":{"input":"true"}}`); r.OK || r.Error.Code != 403 {
		t.Fatalf("without the capability: %+v", r)
	}
}

// rootSees is the path at which root's host commands see the data tree's
// rel: its namespace path when the daemon may give them a mount namespace
// (it runs as root), else its real path.
func rootSees(t *testing.T, k *env, rel string) string {
	t.Helper()
	if os.Geteuid() == 0 {
		return "/" + rel
	}
	p, err := filepath.EvalSymlinks(filepath.Join(k.dataPath, rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShellCwd: root's commands run in the namespace directory cwd names
// (by default root's home), which they see at its namespace path.
func TestShellCwd(t *testing.T) {
	k, root, _, _ := newKernel(t)
	real := func(rel string) string { return rootSees(t, k, rel) }
	// Default: the caller's cwd (its home).
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "pwd -P"})
	if r["output"] != real("home/root")+"\n" {
		t.Fatalf("default cwd: %v", r)
	}
	r = shellExec(t, k, root, &abi.ShellExecArgs{Cwd: "~", Input: "pwd -P"})
	if r["output"] != real("home/root")+"\n" {
		t.Fatalf("cwd ~: %v", r)
	}
	if w := shellExec(t, k, root, &abi.ShellExecArgs{Input: "mkdir -p proj/src && echo x > proj/src/a.txt"}); w["exitCode"] != 0 {
		t.Fatalf("mkdir: %v", w)
	}
	for _, cwd := range []string{"~/proj", "/home/root/proj", "proj"} {
		r = shellExec(t, k, root, &abi.ShellExecArgs{Cwd: cwd, Input: "pwd -P; ls; echo $PWD"})
		pwd := k.dataPath + "/home/root/proj" // $PWD: as given, links not resolved
		if os.Geteuid() == 0 {
			pwd = "/home/root/proj"
		}
		want := real("home/root/proj") + "\nsrc\n" + pwd + "\n"
		if r["output"] != want {
			t.Fatalf("cwd %s: %q, want %q", cwd, r["output"], want)
		}
	}
	if r := shellExec(t, k, root, &abi.ShellExecArgs{Cwd: "/home/bob", Input: "true"}); r["status"] != "completed" {
		t.Fatalf("root in bob's home: %v", r)
	}
	// Not a directory, missing, outside the data tree, "..".
	for _, cwd := range []string{"~/proj/src/a.txt", "~/absent", "/etc", "/home/alice/../bob"} {
		r = shellExec(t, k, root, &abi.ShellExecArgs{Cwd: cwd, Input: "pwd"})
		if r["ok"] != false || !strings.HasPrefix(r["error"].(string), "cwd: ") {
			t.Errorf("cwd %s: %v", cwd, r)
		}
	}
}

func TestShellEnv(t *testing.T) {
	k, root, _, _ := newKernel(t)
	t.Setenv("GSV_SHELL_TEST_SECRET", "hunter2")
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "env"})
	out := r["output"].(string)
	if strings.Contains(out, "GSV_SHELL_TEST_SECRET") || strings.Contains(out, "hunter2") {
		t.Fatalf("daemon env leaked: %q", out)
	}
	for _, want := range []string{
		"PATH=/usr/local/bin:/usr/bin:/bin\n",
		"HOME=" + rootSees(t, k, "home/root") + "\n",
		"USER=root\n",
		"GSV_UID=0\n",
		"LANG=C.UTF-8\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %q: %q", want, out)
		}
	}
}

func TestShellOutputCap(t *testing.T) {
	k, root, _, _ := newKernel(t)
	var full bytes.Buffer
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "seq 1 100000"})
	if r["status"] != "completed" || r["exitCode"] != 0 || r["truncated"] != true {
		t.Fatalf("seq: status %v exit %v truncated %v", r["status"], r["exitCode"], r["truncated"])
	}
	out := r["output"].(string)
	first, rest, _ := strings.Cut(out, "\n")
	m := regexp.MustCompile(`^\[\.\.\. (\d+) bytes truncated \.\.\.\]$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line %q", first)
	}
	n, _ := strconv.Atoi(m[1])
	if len(rest) != local.MaxShellOutput || n+len(rest) != full.Len() {
		t.Fatalf("kept %d bytes, dropped %d, of %d", len(rest), n, full.Len())
	}
	if !strings.HasSuffix(full.String(), rest) || !strings.HasSuffix(rest, "99999\n100000\n") {
		t.Fatalf("tail is not the output's end: ...%q", rest[len(rest)-40:])
	}
}

// liveInGroup lists the processes of process group pgid that are not
// zombies (an orphan's zombie may linger when pid 1 does not reap).
func liveInGroup(pgid int) []string {
	ents, _ := os.ReadDir("/proc")
	var live []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp ...
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			live = append(live, e.Name()+" "+s[:i+1])
		}
	}
	return live
}

// waitGroupGone waits up to d (at least liveness) for process group pgid
// to have no live process and fails the test otherwise.
func waitGroupGone(t *testing.T, pgid int, d time.Duration) {
	t.Helper()
	d = max(d, liveness)
	var live []string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if live = liveInGroup(pgid); len(live) == 0 {
			return
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	t.Fatalf("group %d still has %v after %v", pgid, live, d)
}

// stubbornTree is a command whose process group has several processes
// that survive SIGTERM: the shell itself, a child shell that ignores it,
// a child that traps it, and their sleeps. It writes its pgid to the file
// pgid once they all run.
const stubbornTree = `trap "" TERM
sh -c 'trap "" TERM; sleep 600' &
sh -c 'trap "echo caught" TERM; while :; do sleep 1; done' &
sleep 0.2; echo $$ > pgid.tmp && mv pgid.tmp pgid
sleep 600`

// readPgid waits for the file pgid in dir and returns its number.
func readPgid(t *testing.T, dir string) int {
	t.Helper()
	for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "pgid"))
		// The shell creates the file (empty) before echo writes to it.
		if err == nil && strings.HasSuffix(string(b), "\n") {
			n, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pgid file %q", b)
			}
			return n
		}
	}
	t.Fatal("the command did not write its pgid")
	return 0
}

func TestShellTimeoutKillsGroup(t *testing.T) {
	k, root, _, _ := newKernel(t)
	start := time.Now()
	r := shellExec(t, k, root, &abi.ShellExecArgs{TimeoutMs: 500, Input: "echo pgid=$$\n" + stubbornTree})
	if el := time.Since(start); el > 500*time.Millisecond+local.ShellKillGrace+liveness { // its processes sleep 600 s
		t.Fatalf("timeout took %v", el)
	}
	if r["status"] != "failed" || r["error"] != "Command timed out" {
		t.Fatalf("timeout: %v", r)
	}
	if _, ok := r["exitCode"]; ok {
		t.Fatalf("timed-out command has an exit code: %v", r)
	}
	m := regexp.MustCompile(`^pgid=(\d+)\n`).FindStringSubmatch(r["output"].(string))
	if m == nil {
		t.Fatalf("output so far: %q", r["output"])
	}
	pgid, _ := strconv.Atoi(m[1])
	waitGroupGone(t, pgid, 500*time.Millisecond)
}

// A caller gone (ctx cancelled) kills the command's whole group, children
// that ignore or trap SIGTERM included.
func TestShellCancelKillsGroup(t *testing.T) {
	k, root, _, _ := newKernel(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := k.Call(ctx, &kernel.Caller{Identity: root}, "shell.exec", &abi.ShellExecArgs{Input: stubbornTree})
		errc <- err
	}()
	pgid := readPgid(t, filepath.Join(k.dataPath, "home/root"))
	waitCond(t, "the whole group before the cancel", func() bool { return len(liveInGroup(pgid)) >= 5 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(liveness):
		t.Fatal("the call did not return when its ctx ended")
	}
	waitGroupGone(t, pgid, local.ShellKillGrace+time.Second)
}

// Close kills every running command's group and reaps its shell before it
// returns.
func TestShellCloseKillsGroup(t *testing.T) {
	k, root, _, _ := newKernel(t)
	res := make(chan map[string]any, 1)
	go func() {
		r, _ := k.Call(context.Background(), &kernel.Caller{Identity: root}, "shell.exec", &abi.ShellExecArgs{Input: stubbornTree})
		res <- asMap(r)
	}()
	pgid := readPgid(t, filepath.Join(k.dataPath, "home/root"))
	start := time.Now()
	k.Close()
	if el := time.Since(start); el > local.ShellKillGrace+liveness { // its processes sleep 600 s
		t.Fatalf("Close took %v", el)
	}
	waitGroupGone(t, pgid, 500*time.Millisecond) // SIGKILLed: dying, if not dead yet
	if r := <-res; r["status"] != "failed" || r["error"] != "the daemon is shutting down" {
		t.Fatalf("result: %v", r)
	}
	r, err := k.Call(context.Background(), &kernel.Caller{Identity: root}, "shell.exec", &abi.ShellExecArgs{Input: "true"})
	if err != nil || asMap(r)["ok"] != false {
		t.Fatalf("after Close: %v %v", r, err)
	}
}

func TestShellAlreadyCancelled(t *testing.T) {
	k, root, _, _ := newKernel(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := k.Call(ctx, &kernel.Caller{Identity: root}, "shell.exec", &abi.ShellExecArgs{Input: "echo x > marker"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(k.dataPath, "home/root/marker")); err == nil {
		t.Fatal("a command was started for a caller already gone")
	}
}

// Background children still running when the shell exits neither hold the
// call nor outlive it.
func TestShellBackgroundChildKilled(t *testing.T) {
	k, root, _, _ := newKernel(t)
	start := time.Now()
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo pgid=$$; sleep 30 & echo started"})
	if el := time.Since(start); el > liveness { // (one that waited would say "running" after the 10 s budget)
		t.Fatalf("call waited %v for a background child", el)
	}
	if r["status"] != "completed" || r["exitCode"] != 0 || !strings.HasSuffix(r["output"].(string), "started\n") {
		t.Fatalf("background: %v", r)
	}
	m := regexp.MustCompile(`pgid=(\d+)`).FindStringSubmatch(r["output"].(string))
	if m == nil {
		t.Fatalf("output: %q", r["output"])
	}
	pgid, _ := strconv.Atoi(m[1])
	waitGroupGone(t, pgid, 500*time.Millisecond) // SIGKILLed: dying, if not dead yet
}

// shell.exec obeys the caller's process capability, as an exec session
// does: its network, the mounts it allows (the home only as it allows
// it; a cwd outside its mounts is a 403), max_timeout_ns and
// max_processes; root's narrowed capability puts root's commands in a
// sandbox too.
func TestShellCapability(t *testing.T) {
	needSandbox(t)
	k, root, alice, _ := newKernel(t)
	for _, d := range []string{"home/alice/ci", "home/alice/docs", "home/root/ci", "workspaces/w"} {
		os.MkdirAll(filepath.Join(k.dataPath, d), 0o755)
	}
	os.WriteFile(filepath.Join(k.dataPath, "home/alice/secret.txt"), []byte("s3cret\n"), 0o600)
	os.WriteFile(filepath.Join(k.dataPath, "home/alice/docs/d.txt"), []byte("doc\n"), 0o644)
	if err := k.d.Reown("."); err != nil { // made on disk as root: given their owners' disk ids
		t.Fatal(err)
	}
	set := func(key, val string) {
		t.Helper()
		if _, err := k.Call(context.Background(), &kernel.Caller{Identity: root}, "sys.config.set",
			&abi.ConfigSetArgs{Key: key, Value: []byte(strconv.Quote(val))}); err != nil {
			t.Fatal(err)
		}
	}
	set("users/1000/process/cap", `{"networks":["none"],"mounts":[{"prefix":"~/ci","mode":"rw"},{"prefix":"~/docs","mode":"ro"}],"max_timeout_ns":2000000000,"max_processes":32}`)
	set("users/0/process/cap", `{"networks":["none"],"mounts":[{"prefix":"~/ci","mode":"rw"}]}`)
	netIfs := `awk -F: 'NR>2{gsub(/ /,"",$1); print $1}' /proc/net/dev | tr '\n' ' '; echo`
	for _, c := range []struct {
		name     string
		id       *kernel.Identity
		cwd      string
		input    string
		timeout  int64
		want     []string // in the output
		wantNot  []string
		status   string
		kind     abi.Kind // of a refusal
		fileWant string   // a file of the data tree the command writes, with its content
	}{
		{name: "network and mounts", id: alice, cwd: "~/ci", input: netIfs + `; echo made > out.txt; cat ~/secret.txt || echo nosecret; awk '/Max processes/{print $3}' /proc/self/limits; ls /workspaces || echo nows`,
			want: []string{"lo \n", "nosecret", "32\n", "nows"}, wantNot: []string{"s3cret"}, status: "completed", fileWant: "home/alice/ci/out.txt"},
		{name: "read-only mount", id: alice, cwd: "~/docs", input: `cat d.txt; echo x > new.txt || echo ro`, want: []string{"doc\n", "ro\n"}, status: "completed"},
		{name: "home not allowed", id: alice, cwd: "~", input: "true", kind: abi.Permission},
		{name: "workspace not allowed", id: alice, cwd: "/workspaces/w", input: "true", kind: abi.Permission},
		{name: "timeout", id: alice, cwd: "~/ci", input: "sleep 30", timeout: 60_000, want: []string{}, status: "failed"},
		{name: "root sandboxed", id: root, cwd: "~/ci", input: netIfs + "; id -u; test -e " + k.StateDir() + " || echo nostate; echo r > r.txt",
			want: []string{"lo \n", "0\n", "nostate"}, status: "completed", fileWant: "home/root/ci/r.txt"},
		{name: "root home not allowed", id: root, cwd: "~", input: "true", kind: abi.Permission},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := k.Call(context.Background(), &kernel.Caller{Identity: c.id}, "shell.exec", &abi.ShellExecArgs{Cwd: c.cwd, Input: c.input, TimeoutMs: c.timeout})
			if c.kind != 0 {
				if kindOf(err) != c.kind || !strings.Contains(fmt.Sprint(err), "process capability") {
					t.Fatalf("shell.exec: %v %+v, want a %d naming the capability", err, res, c.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := res.(*abi.ShellExecResult)
			if r.Status != c.status {
				t.Fatalf("status %q, want %q: %+v", r.Status, c.status, r)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Output, w) {
					t.Errorf("output lacks %q: %q", w, r.Output)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(r.Output, w) {
					t.Errorf("output has %q: %q", w, r.Output)
				}
			}
			if c.name == "timeout" && r.Error != "Command timed out" {
				t.Errorf("a command past max_timeout_ns: %+v", r)
			}
			if c.fileWant != "" {
				if _, err := os.Stat(filepath.Join(k.dataPath, c.fileWant)); err != nil {
					t.Errorf("the command's write: %v", err)
				}
			}
		})
	}
}
