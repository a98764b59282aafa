package main_test

// shell.exec through the real daemon: who may run host commands, and that
// no command's process outlives its caller or the daemon.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/ninep"
)

// shellTree is a command whose process group has several processes that
// survive SIGTERM (an ignoring shell, a trapping one, their sleeps). It
// writes its pgid to ~/pgid once they all run.
const shellTree = `trap "" TERM
sh -c 'trap "" TERM; sleep 600' &
sh -c 'trap "echo caught" TERM; while :; do sleep 1; done' &
sleep 0.2; echo $$ > pgid.tmp && mv pgid.tmp pgid
sleep 600`

// groupLive lists the processes of process group pgid that are not
// zombies.
func groupLive(pgid int) []string {
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

// waitPgid waits for the pgid file the shellTree command writes.
func waitPgid(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
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

// requireGroupGone waits up to d (at least liveness) for group pgid to be
// empty.
func requireGroupGone(t *testing.T, pgid int, d time.Duration) {
	t.Helper()
	d = max(d, liveness)
	var live []string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if live = groupLive(pgid); len(live) == 0 {
			return
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	t.Fatalf("group %d still has %v after %v", pgid, live, d)
}

// A non-root user's shell.exec runs in a sandbox with their grant: as
// their uid inside, their home writable, /etc/shadow and the state
// directory out of reach; root's runs on the host.
func TestE2EShellSandboxed(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	unixAddr := "GSV_ADDR=unix!" + d.sock
	marker := filepath.Join(d.state, "marker")

	r := gsvAs(aliceHost, []string{unixAddr}, "call", "shell.exec", `{"input":"id -u; echo hi > ~/made; head -1 /etc/shadow; touch `+marker+`"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"status": "failed"`) || !strings.Contains(r.stdout, "Permission denied") ||
		strings.Contains(r.stdout+r.stderr, "uid=0") || strings.Contains(r.stdout+r.stderr, "root:") {
		t.Fatalf("alice: gsv call shell.exec: %v", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("alice's command wrote in the state directory")
	}
	if b, err := os.ReadFile(filepath.Join(d.state, "fs", "home", "alice", "made")); err != nil || string(b) != "hi\n" {
		t.Fatalf("alice's write to her home: %q, %v", b, err)
	}
	r = gsvAs(0, []string{unixAddr}, "call", "shell.exec", `{"input":"id -u; exit 4"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"output": "0\n"`) || !strings.Contains(r.stdout, `"status": "failed"`) ||
		!strings.Contains(r.stdout, `"exitCode": 4`) {
		t.Fatalf("root: gsv call shell.exec: %v", r)
	}
}

// A command's whole group dies when the daemon is killed outright.
func TestE2EShellDiesWithDaemon(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	root := d.dial(t)
	go callRaw9p(root, "shell.exec", map[string]any{"input": shellTree})
	pgid := waitPgid(t, filepath.Join(d.state, "fs", "home", "root", "pgid"))
	waitFor(t, liveness, "the whole group before the kill", func() bool { return len(groupLive(pgid)) >= 5 })
	d.kill()
	requireGroupGone(t, pgid, 2*time.Second)
}

// A command's whole group dies when the daemon stops.
func TestE2EShellDiesWithDaemonStop(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	root := d.dial(t)
	go callRaw9p(root, "shell.exec", map[string]any{"input": shellTree})
	pgid := waitPgid(t, filepath.Join(d.state, "fs", "home", "root", "pgid"))
	d.stop()
	requireGroupGone(t, pgid, 500*time.Millisecond)
}

// A 9P client that goes away while its call runs takes the command with
// it: the connection's end cancels the call, which kills the group.
func TestE2EShellClientGone(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	root := d.dial(t)
	nc, err := ninep.Dial("unix!" + d.sock)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	caller, err := c.Attach(nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		callRaw9p(caller, "shell.exec", map[string]any{"input": shellTree})
		close(done)
	}()
	pgid := waitPgid(t, filepath.Join(d.state, "fs", "home", "root", "pgid"))
	nc.Close() // the client is gone, its call unanswered
	requireGroupGone(t, pgid, 3*time.Second)
	<-done
	// The daemon serves on.
	mustOK(t, call9p(t, root, "sys.whoami", nil), nil)
}

// shell.exec sessions through `gsv call`: a background command polled to
// its end, stdin written to cat, and the 404 of a session already read.
func TestE2EShellSession(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	env := []string{"GSV_ADDR=unix!" + d.sock}
	call := func(args string) map[string]any {
		t.Helper()
		r := gsvAs(0, env, "call", "shell.exec", args)
		var m map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil {
			t.Fatalf("gsv call shell.exec %s: %v", args, r)
		}
		return m
	}
	r := call(`{"input":"sleep 0.5; echo done","background":true}`)
	sid, _ := r["sessionId"].(string)
	if r["status"] != "running" || !strings.HasPrefix(sid, "sh_") {
		t.Fatalf("background start: %v", r)
	}
	poll := `{"sessionId":"` + sid + `","input":""}`
	var out strings.Builder
	for deadline := time.Now().Add(liveness); r["status"] == "running"; {
		if time.Now().After(deadline) {
			t.Fatalf("session %s still running: %v", sid, r)
		}
		r = call(poll)
		out.WriteString(r["output"].(string))
	}
	if r["status"] != "completed" || r["exitCode"] != float64(0) || r["sessionId"] != sid || out.String() != "done\n" {
		t.Fatalf("final %v, output %q", r, out.String())
	}
	res := gsvAs(0, env, "call", "shell.exec", poll)
	if res.code != 1 || !strings.Contains(res.stderr, "Unknown shell session: "+sid) || !strings.Contains(res.stderr, "(404)") {
		t.Fatalf("poll after the end: %v", res)
	}

	r = call(`{"input":"cat","background":true,"timeoutMs":10000}`)
	sid = r["sessionId"].(string)
	r = call(`{"sessionId":"` + sid + `","input":"hello\n"}`)
	if r["status"] != "running" || r["output"] != "hello\n" {
		t.Fatalf("stdin to cat: %v", r)
	}
}
