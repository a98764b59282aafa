package main_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"

	"gsvfs.dev/gsvfs/ninep"
)

// What peers that never authenticate, and devices that die, cannot do to
// the daemon: real daemons, real device processes, real TCP connections.

// TestE2EDeviceDiesMidRead: a FUSE read of /dev/<id>/fs in flight when
// the device dies fails at once, even when another call was the one
// reading the connection (a routed call waiting for the device): the
// device's tree learns of the connection's end from the router, not only
// from a call of its own.
func TestE2EDeviceDiesMidRead(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, listen: listen})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	var tok struct {
		Token struct{ Token string }
	}
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "dying"}), &tok)
	export := t.TempDir()
	os.Chmod(export, 0o755)
	if err := os.WriteFile(filepath.Join(export, "f.txt"), []byte("on the device\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := startDevice(t, "--kernel", listen, "--id", "dying", "--token", tok.Token.Token, "--root", export)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	waitFor(t, 15*time.Second, "the device online", func() bool {
		r := gsvAs(aliceHost, env, "call", "sys.device.get", `{"deviceId":"dying"}`)
		return r.code == 0 && strings.Contains(r.stdout, `"online": true`)
	})
	// (Not read through the mount first: the FUSE release of that read
	// may reach the device later, and would be the call reading the
	// connection.)
	if r := gsvAs(aliceHost, env, "call", "fs.read", `{"target":"dying","path":"f.txt"}`); r.code != 0 || !strings.Contains(r.stdout, "on the device") {
		t.Fatalf("fs.read on the device: %v", r)
	}
	file := d.p("/dev/dying/fs/f.txt")

	// The device stops answering; a routed call goes out first (it reads
	// the connection, waiting), then a FUSE read of the tree.
	dev.cmd.Process.Signal(syscall.SIGSTOP)
	waitFor(t, 15*time.Second, "the device stopped", func() bool { return procState(dev.cmd.Process.Pid) == "T" })
	base := unread(t, port)
	routed := make(chan shResult, 1)
	go func() { routed <- gsvAs(aliceHost, env, "call", "fs.read", `{"target":"dying","path":"f.txt"}`) }()
	waitFor(t, 15*time.Second, "the routed call sent to the device", func() bool { return unread(t, port) > base })
	sent := unread(t, port)
	read := make(chan shResult, 1)
	go func() { read <- d.shAs(aliceHost, `cat "$1"`, file) }()
	waitFor(t, 15*time.Second, "the FUSE read sent to the device", func() bool { return unread(t, port) > sent })

	dev.kill()
	start := time.Now()
	select {
	case r := <-read:
		if r.code <= 0 || r.stderr == "" {
			t.Fatalf("a FUSE read in flight when the device died: %v", r)
		}
		t.Logf("the FUSE read failed %v after the device died: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	case <-time.After(liveness): // the route timeout is 2 min
		t.Fatalf("a FUSE read in flight when the device died still waits %v later", liveness)
	}
	if r := <-routed; r.code == 0 || !strings.Contains(r.stderr, "(503)") {
		t.Fatalf("the routed call in flight when the device died: %v", r)
	}
	if !d.running() {
		t.Fatal("the daemon died")
	}
	// The device dials again: the tree reads as before.
	startDevice(t, "--kernel", listen, "--id", "dying", "--token", tok.Token.Token, "--root", export)
	waitFor(t, 15*time.Second, "the device back", func() bool {
		r := d.shAs(aliceHost, `cat "$1"`, file)
		return r.code == 0 && r.stdout == "on the device\n"
	})
	d.stop()
}

// procState is the state letter of process pid (/proc/<pid>/stat): R, S,
// D, T (stopped), Z...
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+3 <= len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// unread is how many bytes the kernel sent on the TCP connections to its
// port that their other ends have not read (the rx_queue of the sockets
// whose remote port is port, in /proc/net/tcp).
func unread(t *testing.T, port int) int64 {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	sc := bufio.NewScanner(f)
	suffix := fmt.Sprintf(":%04X", port)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || !strings.HasSuffix(fs[2], suffix) || fs[3] != "01" {
			continue
		}
		_, rx, _ := strings.Cut(fs[4], ":")
		v, err := strconv.ParseInt(rx, 16, 64)
		if err == nil {
			n += v
		}
	}
	return n
}

// TestE2EUnauthenticatedFloods: peers that connect and never
// authenticate do not lock anyone out. 80 connections of one address
// that negotiate 9P and never attach do not stop a client of the same
// address from attaching with a token (the per-address cap was 72 and
// then refused everyone behind the address); 400 device hellos that never
// finish, to a daemon allowed 256 descriptors, do not stop the listener
// (it stopped for good at the first EMFILE): a client attaches during
// the flood and after it.
func TestE2EUnauthenticatedFloods(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen, nofile: 256, args: []string{"--9p-auth-timeout", "10m"}})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	var tok struct {
		Token struct{ Token string }
	}
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": aliceUID}), &tok)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	honest := func(when string) {
		t.Helper()
		type res struct {
			s   string
			err error
		}
		got := make(chan res, 1)
		go func() {
			fsys, err := ninep.Mount(listen, "alice", []byte(tok.Token.Token))
			if err != nil {
				got <- res{err: err}
				return
			}
			defer fsys.Close()
			s, err := readAll9p(fsys, "/etc/passwd")
			got <- res{s, err}
		}()
		select {
		case r := <-got:
			if r.err != nil || !strings.Contains(r.s, "alice:") {
				t.Fatalf("alice attaches with her token %s: %q %v", when, r.s, r.err)
			}
		case <-time.After(liveness): // stallers stall until the 10 min auth timeout
			t.Fatalf("alice attaches with her token %s: no answer within %v", when, liveness)
		}
	}
	honest("before any flood")
	var held []net.Conn
	release := func() {
		for _, c := range held {
			c.Close()
		}
		held = nil
	}
	defer release()

	// 80 connections that negotiate 9P and stall.
	for range 80 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		plan9.WriteFcall(c, &plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 8192, Version: "9P2000"})
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		plan9.ReadFcall(c) // an Rversion, or the end of an evicted connection
	}
	honest("behind 80 stalled connections of her address")
	release()

	// 400 device hellos that never say who they are, past the daemon's
	// 256 descriptors.
	for range 400 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.Write([]byte("GSVDEVICE 1\n"))
	}
	honest("during a flood of 400 device hellos")
	release()
	honest("after the flood")
	if !d.running() {
		t.Fatal("the daemon died")
	}
	d.stop()
}
