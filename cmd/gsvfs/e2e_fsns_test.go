package main_test

// fs.* over the whole namespace as the caller: through the dispatcher in
// process, and through the gsv CLI against a real daemon.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	gproc "gsvfs.dev/gsvfs/proc"
)

// The dispatcher's fs.read and fs.write reach /proc as the caller: the
// owner reads a process's status and history and sends it a message by
// writing its ctl file; another user is refused by the files' modes.
func TestE2EVFSFSProcDispatcher(t *testing.T) {
	e := kerneltest.Open(t)
	ctx := context.Background()
	space := ns.New(e.K)
	dev, err := devices.New(e.K, devices.Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, dev); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	dev.SetRoot(space.Root())
	pm, err := gproc.Open(space, gproc.Options{Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, pm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pm.Close() })
	alice, bob := kerneltest.Caller(e.Alice), kerneltest.Caller(e.Bob)
	res, err := e.K.Call(ctx, alice, "proc.spawn", json.RawMessage(`{"profile":"task","label":"fsns"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	var sp struct{ Pid string }
	if err := json.Unmarshal(b, &sp); err != nil || sp.Pid == "" {
		t.Fatalf("spawn: %s %v", b, err)
	}
	P := "/proc/" + sp.Pid
	read := func(c *kernel.Caller, p string) *abi.FSReadResult {
		t.Helper()
		r, err := kernel.Do(ctx, e.K, c, abi.FsRead, &abi.FSReadArgs{Path: p})
		if err != nil {
			t.Fatalf("fs.read %s: %v", p, err)
		}
		return r
	}
	if r := read(alice, P+"/status"); !r.OK || !strings.Contains(r.Content, "label: fsns") {
		t.Fatalf("owner's status: %+v", r)
	}
	// Another user's process is not there for bob, as on the mount.
	if r := read(bob, P+"/status"); r.OK || !strings.Contains(r.Error, P+"/status: file does not exist") {
		t.Fatalf("bob read alice's status: %+v", r)
	}
	if r := read(kerneltest.Caller(e.Root), P+"/status"); !r.OK {
		t.Fatalf("root read alice's status: %+v", r)
	}
	if r := read(alice, "/etc/passwd"); !r.OK || !strings.Contains(r.Content, "alice:x:") {
		t.Fatalf("/etc/passwd: %+v", r)
	}
	w, err := kernel.Do(ctx, e.K, alice, abi.FsWrite, &abi.FSWriteArgs{Path: P + "/ctl", Content: "send hi from fs.write\n"})
	if err != nil || !w.OK {
		t.Fatalf("ctl write: %+v %v", w, err)
	}
	if w, err := kernel.Do(ctx, e.K, bob, abi.FsWrite, &abi.FSWriteArgs{Path: P + "/ctl", Content: "kill\n"}); err != nil || w.OK {
		t.Fatalf("bob wrote alice's ctl: %+v %v", w, err)
	}
	deadline := time.Now().Add(liveness)
	for {
		r := read(alice, P+"/conversations/default/history")
		if r.OK && strings.Contains(r.Content, "You said: hi from fs.write") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gsv call fs.read and fs.write against a daemon: a ctl file written
// runs its line, a process's history reads back, and a target that names
// no device is the router's error.
func TestE2EVFSFSCallCLI(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	env := []string{"GSV_ADDR=unix!" + d.sock, "LC_ALL=C"}
	r := gsvAs(0, env, "spawn", "task", "--label", "cli-fs")
	pid := strings.TrimSpace(r.stdout)
	if r.code != 0 || pid == "" {
		t.Fatalf("spawn: %v", r)
	}
	P := "/proc/" + pid
	arg := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	if r := gsvAs(0, env, "call", "fs.write", arg(map[string]any{"path": P + "/ctl", "content": "send hello cli\n"})); r.code != 0 || !strings.Contains(r.stdout, `"ok": true`) {
		t.Fatalf("fs.write ctl: %v", r)
	}
	deadline := time.Now().Add(liveness)
	for {
		r := gsvAs(0, env, "call", "fs.read", arg(map[string]any{"path": P + "/conversations/default/history"}))
		if r.code == 0 && strings.Contains(r.stdout, "You said: hello cli") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fs.read history: %v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := gsvAs(0, env, "call", "fs.read", arg(map[string]any{"path": P + "/status"})); r.code != 0 || !strings.Contains(r.stdout, "label: cli-fs") {
		t.Fatalf("fs.read status: %v", r)
	}
	if r := gsvAs(0, env, "call", "fs.read", arg(map[string]any{"path": "/etc/passwd", "target": "laptop"})); r.code == 0 || !strings.Contains(r.stderr, `fs.read: laptop: Device offline: "laptop"`) {
		t.Fatalf("unknown target: %v", r)
	}
}
