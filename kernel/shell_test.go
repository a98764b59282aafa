package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/vfs"
)

// shellExec calls shell.exec as id and returns its data.
func shellExec(t *testing.T, k *Kernel, id *Identity, a *shellExecArgs) map[string]any {
	t.Helper()
	res, err := k.Call(context.Background(), &Caller{Identity: id}, "shell.exec", a)
	if err != nil {
		t.Fatalf("shell.exec %q: %v", a.Input, err)
	}
	return res.(map[string]any)
}

func TestShellExec(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	r := shellExec(t, k, alice, &shellExecArgs{Input: "echo hello; echo oops >&2"})
	if r["status"] != "completed" || r["exitCode"] != 0 || r["output"] != "hello\noops\n" {
		t.Fatalf("echo: %v", r)
	}
	if _, ok := r["truncated"]; ok {
		t.Fatalf("echo truncated: %v", r)
	}
	r = shellExec(t, k, alice, &shellExecArgs{Input: "echo before; exit 3"})
	if r["status"] != "completed" || r["exitCode"] != 3 || r["output"] != "before\n" {
		t.Fatalf("exit 3: %v", r)
	}
	r = shellExec(t, k, alice, &shellExecArgs{Input: "kill -TERM $$"})
	if r["status"] != "completed" || r["exitCode"] != 128+15 {
		t.Fatalf("killed by SIGTERM: %v", r)
	}
	// stdin is /dev/null: cat ends at once.
	r = shellExec(t, k, alice, &shellExecArgs{Input: "cat; echo done"})
	if r["output"] != "done\n" {
		t.Fatalf("stdin: %v", r)
	}
}

func TestShellExecFrames(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	r := frame(t, k, alice, `{"call":"shell.exec","args":{"target":"gsv","input":"printf ok"}}`)
	data, _ := r.Data.(map[string]any)
	if !r.OK || data["status"] != "completed" || data["output"] != "ok" || data["exitCode"] != float64(0) {
		t.Fatalf("gsv: %+v", r)
	}
	r = frame(t, k, alice, `{"call":"shell.exec","args":{"target":"laptop","input":"true"}}`)
	if r.OK || r.Error.Code != 503 {
		t.Fatalf("laptop: %+v", r)
	}
	r = frame(t, k, alice, `{"call":"shell.exec","args":{"sessionId":"sh_1","input":""}}`)
	data, _ = r.Data.(map[string]any)
	if !r.OK || data["ok"] != false || data["error"] != "shell sessions are not supported yet" {
		t.Fatalf("session: %+v", r)
	}
	r = frame(t, k, alice, `{"call":"shell.exec","args":{"input":"  "}}`)
	data, _ = r.Data.(map[string]any)
	if !r.OK || data["ok"] != false {
		t.Fatalf("empty input: %+v", r)
	}
	// The capability gates the call.
	noShell := *alice
	noShell.Capabilities = []string{"fs.*"}
	r = frame(t, k, &noShell, `{"call":"shell.exec","args":{"input":"true"}}`)
	if r.OK || r.Error.Code != 403 {
		t.Fatalf("without the capability: %+v", r)
	}
}

func TestShellCwd(t *testing.T) {
	k, root, alice, bob := newKernel(t)
	ctx := context.Background()
	real := func(rel string) string {
		p, err := filepath.EvalSymlinks(filepath.Join(k.dataPath, rel))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Default: the caller's cwd (its home).
	r := shellExec(t, k, alice, &shellExecArgs{Input: "pwd -P"})
	if r["output"] != real("home/alice")+"\n" {
		t.Fatalf("default cwd: %v", r)
	}
	r = shellExec(t, k, alice, &shellExecArgs{Cwd: "~", Input: "pwd -P"})
	if r["output"] != real("home/alice")+"\n" {
		t.Fatalf("cwd ~: %v", r)
	}
	if w := shellExec(t, k, alice, &shellExecArgs{Input: "mkdir -p proj/src && echo x > proj/src/a.txt"}); w["exitCode"] != 0 {
		t.Fatalf("mkdir: %v", w)
	}
	for _, cwd := range []string{"~/proj", "/home/alice/proj", "proj"} {
		r = shellExec(t, k, alice, &shellExecArgs{Cwd: cwd, Input: "pwd -P; ls; echo $PWD"})
		want := real("home/alice/proj") + "\nsrc\n" + k.dataPath + "/home/alice/proj\n"
		if r["output"] != want {
			t.Fatalf("cwd %s: %q, want %q", cwd, r["output"], want)
		}
	}
	// Not a directory, missing, outside the data tree, "..".
	for _, cwd := range []string{"~/proj/src/a.txt", "~/absent", "/etc", "/home/alice/../bob"} {
		r = shellExec(t, k, alice, &shellExecArgs{Cwd: cwd, Input: "pwd"})
		if r["ok"] != false || !strings.HasPrefix(r["error"].(string), "cwd: ") {
			t.Errorf("cwd %s: %v", cwd, r)
		}
	}
	// A directory alice may not search.
	mode := fs.FileMode(0o700)
	if _, err := k.Call(ctx, &Caller{Identity: bob}, "fs.setattr", &fsSetattrArgs{Path: "home/bob", Set: vfs.SetAttr{Mode: &mode}}); err != nil {
		t.Fatal(err)
	}
	r = shellExec(t, k, alice, &shellExecArgs{Cwd: "/home/bob", Input: "touch /tmp/should-not-run"})
	if r["ok"] != false || !strings.Contains(r["error"].(string), "permission denied") {
		t.Fatalf("alice in bob's 0700 home: %v", r)
	}
	if r := shellExec(t, k, bob, &shellExecArgs{Cwd: "~", Input: "true"}); r["status"] != "completed" {
		t.Fatalf("bob in his home: %v", r)
	}
	if r := shellExec(t, k, root, &shellExecArgs{Cwd: "/home/bob", Input: "true"}); r["status"] != "completed" {
		t.Fatalf("root in bob's home: %v", r)
	}
}

func TestShellEnv(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	t.Setenv("GSV_SHELL_TEST_SECRET", "hunter2")
	r := shellExec(t, k, alice, &shellExecArgs{Input: "env"})
	out := r["output"].(string)
	if strings.Contains(out, "GSV_SHELL_TEST_SECRET") || strings.Contains(out, "hunter2") {
		t.Fatalf("daemon env leaked: %q", out)
	}
	for _, want := range []string{
		"PATH=/usr/local/bin:/usr/bin:/bin\n",
		"HOME=" + k.dataPath + "/home/alice\n",
		"USER=alice\n",
		"GSV_UID=" + strconv.FormatUint(uint64(alice.Uid), 10) + "\n",
		"LANG=C.UTF-8\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %q: %q", want, out)
		}
	}
}

func TestShellOutputCap(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	var full bytes.Buffer
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	r := shellExec(t, k, alice, &shellExecArgs{Input: "seq 1 100000"})
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
	if len(rest) != maxShellOutput || n+len(rest) != full.Len() {
		t.Fatalf("kept %d bytes, dropped %d, of %d", len(rest), n, full.Len())
	}
	if !strings.HasSuffix(full.String(), rest) || !strings.HasSuffix(rest, "99999\n100000\n") {
		t.Fatalf("tail is not the output's end: ...%q", rest[len(rest)-40:])
	}
}

func TestTailBuffer(t *testing.T) {
	var all bytes.Buffer
	b := &tailBuffer{max: 10}
	for _, s := range []string{"abc", "", "defgh", "ij", "k", "lmnopqrstuvwxyz0123", "45", "6789"} {
		b.Write([]byte(s))
		all.WriteString(s)
		got, trunc := b.text()
		want := all.String()
		if len(want) > 10 {
			want = fmt.Sprintf("[... %d bytes truncated ...]\n%s", len(want)-10, want[len(want)-10:])
		}
		if got != want || trunc != (all.Len() > 10) {
			t.Fatalf("after %q: %q %v, want %q", s, got, trunc, want)
		}
	}
	// A character cut by the ring's edge is dropped whole.
	b = &tailBuffer{max: 4}
	b.Write([]byte("aé€")) // 1+2+3 bytes: the last 4 are é's second byte and €
	if got, _ := b.text(); got != "[... 3 bytes truncated ...]\n€" {
		t.Fatalf("cut rune: %q", got)
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

func TestShellTimeoutKillsGroup(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	start := time.Now()
	r := shellExec(t, k, alice, &shellExecArgs{TimeoutMs: 500,
		Input: "echo pgid=$$; sleep 100 & echo child=$!; wait"})
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("timeout took %v", el)
	}
	if r["status"] != "failed" || r["error"] != "timed out after 0.5s" {
		t.Fatalf("timeout: %v", r)
	}
	if _, ok := r["exitCode"]; ok {
		t.Fatalf("timed-out command has an exit code: %v", r)
	}
	m := regexp.MustCompile(`pgid=(\d+)\nchild=(\d+)\n`).FindStringSubmatch(r["output"].(string))
	if m == nil {
		t.Fatalf("output so far: %q", r["output"])
	}
	pgid, _ := strconv.Atoi(m[1])
	var live []string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if live = liveInGroup(pgid); len(live) == 0 {
			return
		}
	}
	t.Fatalf("group %d survived the timeout: %v", pgid, live)
}

func TestShellCancelledContextLeavesCommand(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := k.Call(ctx, &Caller{Identity: alice}, "shell.exec",
		&shellExecArgs{Input: "sleep 0.3; echo done > marker"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 250*time.Millisecond {
		t.Fatalf("call returned after %v", el)
	}
	marker := filepath.Join(k.dataPath, "home/alice/marker")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("marker written before the command's sleep")
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(marker); string(b) == "done\n" {
			return
		}
	}
	t.Fatal("the command did not run on after the caller left")
}

func TestShellAlreadyCancelled(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := k.Call(ctx, &Caller{Identity: alice}, "shell.exec", &shellExecArgs{Input: "echo x > marker"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(k.dataPath, "home/alice/marker")); err == nil {
		t.Fatal("a command was started for a caller already gone")
	}
}

func TestShellBackgroundChildDoesNotHold(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	start := time.Now()
	// The background sleep keeps the output pipe open; the call still ends
	// soon after the shell does.
	r := shellExec(t, k, alice, &shellExecArgs{Input: "echo pgid=$$; sleep 3 & echo started"})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("call waited %v for a background child", el)
	}
	if r["status"] != "completed" || r["exitCode"] != 0 || !strings.HasSuffix(r["output"].(string), "started\n") {
		t.Fatalf("background: %v", r)
	}
	// The child was left running; end it.
	m := regexp.MustCompile(`pgid=(\d+)`).FindStringSubmatch(r["output"].(string))
	if m == nil {
		t.Fatalf("output: %q", r["output"])
	}
	pgid, _ := strconv.Atoi(m[1])
	if len(liveInGroup(pgid)) == 0 {
		t.Fatal("background child did not survive the shell")
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}
