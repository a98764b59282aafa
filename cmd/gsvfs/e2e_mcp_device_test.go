package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A stdio MCP server on a remote device, end to end: a kernel daemon, a
// device daemon run by alice (a second process, no root), the reference
// server from npm run on the device in alice's device session, its stdin
// and stdout over the device's connection.

// everythingPkg is the reference server, pinned (as the mcp package's
// tests pin it, sharing their npm cache).
const everythingPkg = "@modelcontextprotocol/server-everything@2026.8.31"

var (
	everythingOnce sync.Once
	everythingDir  string // holds node_modules/@modelcontextprotocol/server-everything
	everythingErr  error
)

// everythingServer installs the reference server once into the npm cache
// the tests share (os.TempDir()/gsvfs-npm-cache, under a lock, a
// finished install reused) and returns the directory holding its
// node_modules. It skips the test only if npm or node is absent.
func everythingServer(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the reference MCP servers need %s (Debian's nodejs and npm; make deps)", tool)
		}
	}
	everythingOnce.Do(func() {
		root := filepath.Join(os.TempDir(), "gsvfs-npm-cache")
		if everythingErr = os.MkdirAll(root, 0o755); everythingErr != nil {
			return
		}
		lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			everythingErr = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			everythingErr = err
			return
		}
		dir := filepath.Join(root, strings.NewReplacer("@", "", "/", "-").Replace(everythingPkg))
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			everythingDir = dir
			return
		}
		tmp, err := os.MkdirTemp(root, ".install-")
		if err != nil {
			everythingErr = err
			return
		}
		defer os.RemoveAll(tmp)
		if out, err := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", tmp, everythingPkg).CombinedOutput(); err != nil {
			everythingErr = fmt.Errorf("npm install %s: %v\n%s", everythingPkg, err, out)
			return
		}
		os.WriteFile(filepath.Join(tmp, ".done"), nil, 0o644)
		os.RemoveAll(dir)
		if everythingErr = os.Rename(tmp, dir); everythingErr == nil {
			everythingDir = dir
		}
	})
	if everythingErr != nil {
		t.Fatal(everythingErr)
	}
	return everythingDir
}

// TestE2EMCPDeviceServer: alice adds server-everything as a stdio server
// on her device (gsv mcp add --device): it runs there, as her host user
// in the device's sandbox, and answers its tools through the kernel; bob
// may not run one on her device; the device's death fails a call in
// flight at once, naming the server, and the daemon goes on.
func TestE2EMCPDeviceServer(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	pkg := everythingServer(t)
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	alice := func(args ...string) shResult { return gsvAs(aliceHost, env, args...) }
	bob := func(args ...string) shResult { return gsvAs(bobHost, env, args...) }

	// Alice's device: its export holds the server's package, hers.
	home, err := os.MkdirTemp("", "mcpbox-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	src := filepath.Join(home, "src")
	os.MkdirAll(src, 0o755)
	if out, err := exec.Command("cp", "-a", pkg, filepath.Join(src, "everything")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if err := chownTree(home, aliceHost, aliceHost); err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755)
	var tok struct {
		Token struct{ Token string }
	}
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "mcpbox"}), &tok)
	box := startDeviceAs(t, aliceHost, home, "--kernel", listen, "--id", "mcpbox", "--token", tok.Token.Token, "--root", src)
	online := func() bool {
		r := alice("call", "sys.device.get", `{"deviceId":"mcpbox"}`)
		return r.code == 0 && strings.Contains(r.stdout, `"online": true`)
	}
	waitFor(t, 15*time.Second, "mcpbox online", online)
	if r := alice("call", "sys.device.get", `{"deviceId":"mcpbox"}`); !strings.Contains(r.stdout, "process.exec.pipe") {
		t.Fatalf("the device does not announce process.exec.pipe: %v", r)
	}

	main := "/opt/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	r := alice("mcp", "add", "everything", "--device", "mcpbox", "--network", "none", "--mount", "everything:/opt/everything:ro",
		"--", "node", main, "stdio")
	if r.code != 0 || !strings.Contains(r.stdout, "everything ready") {
		t.Fatalf("gsv mcp add --device: %v", r)
	}
	if r := alice("mcp", "list"); r.code != 0 || !strings.Contains(r.stdout, "mcpbox: node") {
		t.Fatalf("gsv mcp list: %v", r)
	}
	if r := alice("mcp", "call", "everything", "echo", `{"message":"from the device"}`); r.code != 0 || !strings.Contains(r.stdout, "Echo: from the device") {
		t.Fatalf("gsv mcp call on the device: %v", r)
	}
	// It runs on the device as alice's host user (the device's user).
	var uids []string
	matches, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil || !strings.Contains(string(b), main) {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Dir(m), &st) == nil {
			uids = append(uids, strconv.Itoa(int(st.Uid)))
		}
	}
	if len(uids) == 0 {
		t.Fatal("no process of the server on the device")
	}
	for _, u := range uids {
		if u != strconv.Itoa(aliceHost) {
			t.Fatalf("the server's processes run as %v, not alice (%d)", uids, aliceHost)
		}
	}

	// bob may not run a server on alice's device.
	r = bob("mcp", "add", "sneaky", "--device", "mcpbox", "--", "true")
	if !strings.Contains(r.stdout+r.stderr, "Access denied to device") {
		t.Fatalf("bob's server on alice's device: %v", r)
	}

	// A call in flight when the device dies fails at once (503, naming
	// the server), not at its timeout; the daemon goes on. The test
	// server (written with the SDK) marks the call's start in a file of
	// the export.
	bin := filepath.Join(src, "bin")
	os.MkdirAll(bin, 0o755)
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "testserver"), "../../mcp/testdata/testserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build testserver: %v\n%s", err, out)
	}
	marks := filepath.Join(src, "marks")
	os.MkdirAll(marks, 0o755)
	if err := chownTree(src, aliceHost, aliceHost); err != nil {
		t.Fatal(err)
	}
	r = alice("mcp", "add", "probe", "--device", "mcpbox", "--network", "none", "--mount", "bin:/opt/bin:ro", "--mount", "marks:/marks:rw",
		"--", "/opt/bin/testserver")
	if r.code != 0 || !strings.Contains(r.stdout, "probe ready") {
		t.Fatalf("gsv mcp add probe --device: %v", r)
	}
	got := make(chan shResult, 1)
	go func() {
		got <- alice("mcp", "call", "probe", "sleep", `{"seconds":300,"started":"/marks/started"}`)
	}()
	waitFor(t, 30*time.Second, "the call's start on the device", func() bool {
		_, err := os.Stat(filepath.Join(marks, "started"))
		return err == nil
	})
	start := time.Now()
	box.kill()
	select {
	case r := <-got:
		if r.code == 0 || !strings.Contains(r.stderr, "MCP server probe") || !strings.Contains(r.stderr, "went away") {
			t.Fatalf("a call when its device died: %v", r)
		}
		t.Logf("the call failed %v after the device died: %s", time.Since(start), strings.TrimSpace(r.stderr))
	case <-time.After(liveness):
		t.Fatal("a call in flight did not fail when its device died")
	}
	if r := alice("mcp", "list"); r.code != 0 || !strings.Contains(r.stdout, "failed") {
		t.Fatalf("gsv mcp list after the device died: %v", r)
	}
	if r := alice("whoami"); r.code != 0 {
		t.Fatalf("the daemon after the device died: %v", r)
	}
}
