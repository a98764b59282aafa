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
)

// Remote devices end to end: a kernel daemon with a TCP listener, and
// device daemons (gsvfs device) as real second processes dialing it.

// deviceProc is one gsvfs device process.
type deviceProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

// startDevice starts gsvfs device with args, as the test's own user.
func startDevice(t *testing.T, args ...string) *deviceProc {
	t.Helper()
	cmd := exec.Command(gsvfsBin, append([]string{"device", "--log-level", "debug"}, args...)...)
	cmd.Env = append(os.Environ(), raceEnv)
	return startProc(t, "device", args, cmd)
}

// startDeviceAs starts gsvfs device with args as the host uid (and gid)
// uid, with home as its $HOME: a device run by its user, without root.
func startDeviceAs(t *testing.T, uid int, home string, args ...string) *deviceProc {
	t.Helper()
	u := strconv.Itoa(uid)
	cmd := exec.Command("setpriv", append([]string{"--reuid", u, "--regid", u, "--clear-groups", gsvfsBin, "device", "--log-level", "debug"}, args...)...)
	cmd.Env = append(os.Environ(), raceEnv, "HOME="+home, "TMPDIR="+home)
	return startProc(t, "device", args, cmd)
}

// startProc starts cmd, a gsvfs process (what, started with args),
// keeping its stderr; at the test's end it is killed (continued first,
// if a test stopped it) and, if the test failed, its log is shown.
func startProc(t *testing.T, what string, args []string, cmd *exec.Cmd) *deviceProc {
	t.Helper()
	p := &deviceProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s %v log:\n%s", what, args, p.stderr.String())
		}
	})
	return p
}

// kill ends the device process at once.
func (p *deviceProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// waitFor polls cond every 50 ms until it holds or within (at least
// liveness) passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	within = max(within, liveness)
	for deadline := time.Now().Add(within); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

func TestE2EDevices(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, listen: listen, args: []string{"--device-route-timeout", "2s"}})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	unixAddr := "GSV_ADDR=unix!" + d.sock
	var tok struct {
		Token struct{ Token string }
	}
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "laptop"}), &tok)
	node := tok.Token.Token

	export := t.TempDir()
	os.MkdirAll(filepath.Join(export, "project"), 0o755)
	os.WriteFile(filepath.Join(export, "project", "README.md"), []byte("hello from the laptop\n"), 0o644)
	devArgs := []string{"--kernel", listen, "--id", "laptop", "--token", node, "--root", export}
	top := t // devices that outlive a subtest belong to the test
	dev := startDevice(top, devArgs...)
	alice := func(args ...string) shResult { return gsvAs(aliceHost, []string{unixAddr}, args...) }
	online := func() bool {
		r := alice("call", "sys.device.get", `{"deviceId":"laptop"}`)
		return r.code == 0 && strings.Contains(r.stdout, `"online": true`)
	}
	waitFor(t, 15*time.Second, "the device online", online)
	if r := alice("device", "list"); r.code != 0 || !strings.Contains(r.stdout, "laptop") || !strings.Contains(r.stdout, "yes") {
		t.Fatalf("gsv device list: %v", r)
	}
	if r := gsvAs(bobHost, []string{unixAddr}, "device", "list", "--all"); r.code != 0 || strings.Contains(r.stdout, "laptop") {
		t.Fatalf("bob lists alice's device: %v", r)
	}

	t.Run("Files", func(t *testing.T) {
		r := alice("call", "fs.read", `{"target":"laptop","path":"project/README.md"}`)
		if r.code != 0 || !strings.Contains(r.stdout, "hello from the laptop") {
			t.Fatalf("fs.read on the device: %v", r)
		}
		r = d.shAs(aliceHost, `ls "$1"/dev; cat "$1"/dev/laptop/status; cat "$1"/dev/laptop/fs/project/README.md`, d.mnt)
		if r.code != 0 || !strings.Contains(r.stdout, "laptop") || !strings.Contains(r.stdout, "online: true") ||
			!strings.Contains(r.stdout, "hello from the laptop") {
			t.Fatalf("/dev/laptop over the mount: %v", r)
		}
		r = d.shAs(aliceHost, `echo written > "$1"/dev/laptop/fs/project/new.txt`, d.mnt)
		if b, err := os.ReadFile(filepath.Join(export, "project", "new.txt")); r.code != 0 || err != nil || string(b) != "written\n" {
			t.Fatalf("a write through /dev/laptop/fs: %v, %q %v", r, b, err)
		}
		// bob may not use alice's device: 403, and /dev/laptop is closed to him.
		r = gsvAs(bobHost, []string{unixAddr}, "call", "fs.read", `{"target":"laptop","path":"project/README.md"}`)
		if r.code == 0 || !strings.Contains(r.stderr, "(403)") || !strings.Contains(r.stderr, "Access denied to device") {
			t.Fatalf("bob's fs.read on alice's device: %v", r)
		}
		if r := d.shAs(bobHost, `cat "$1"/dev/laptop/fs/project/README.md`, d.mnt); r.code == 0 {
			t.Fatalf("bob read /dev/laptop/fs: %v", r)
		}
		// /dev shows bob no device of alice's, and /dev/laptop is not
		// there for him (ENOENT, as for an id nobody has); root sees it.
		if r := d.shAs(bobHost, `ls "$1"/dev`, d.mnt); r.code != 0 || strings.Contains(r.stdout, "laptop") || !strings.Contains(r.stdout, "gsv") {
			t.Fatalf("ls /dev as bob: %v", r)
		}
		for _, p := range []string{"/dev/laptop", "/dev/nosuch"} {
			if r := d.shAs(bobHost, `ls "$1"`, d.p(p)); r.code == 0 || errnoOf(r.stderr) != syscall.ENOENT {
				t.Fatalf("ls %s as bob: %v, want ENOENT", p, r)
			}
		}
		if r := d.sh(`ls "$1"/dev`, d.mnt); r.code != 0 || !strings.Contains(r.stdout, "laptop") {
			t.Fatalf("ls /dev as root: %v", r)
		}
	})

	t.Run("Shell", func(t *testing.T) {
		r := alice("call", "shell.exec", `{"target":"laptop","input":"echo hi; pwd","cwd":"project"}`)
		if r.code != 0 || !strings.Contains(r.stdout, `"status": "completed"`) || !strings.Contains(r.stdout, `hi\n`+filepath.Join(export, "project")) {
			t.Fatalf("shell.exec on the device: %v", r)
		}
		// A session started on the device is polled without a target.
		r = alice("call", "shell.exec", `{"target":"laptop","input":"sleep 0.5; echo later","background":true}`)
		sid := jsonField(r.stdout, "sessionId")
		if r.code != 0 || sid == "" {
			t.Fatalf("a background start on the device: %v", r)
		}
		waitFor(t, 10*time.Second, "the session's end", func() bool {
			r = alice("call", "shell.exec", `{"sessionId":"`+sid+`","input":""}`)
			return r.code == 0 && strings.Contains(r.stdout, `"status": "completed"`)
		})
		if !strings.Contains(r.stdout, "later") {
			t.Fatalf("the poll's result: %v", r)
		}
		// A device's shell runs unsandboxed there: a narrowed process
		// capability refuses it (and then allows it again, as wide as the
		// default).
		key := fmt.Sprintf("users/%d/process/cap", aliceUID)
		d.mustGsv(t, "config", "set", key, `{"networks":["none"],"mounts":[{"prefix":"~","mode":"rw"}]}`)
		r = alice("call", "shell.exec", `{"target":"laptop","input":"echo ran"}`)
		if r.code == 0 || !strings.Contains(r.stderr, "(403)") || !strings.Contains(r.stderr, "process capability") {
			t.Errorf("shell.exec on a device under a narrowed capability: %v", r)
		}
		d.mustGsv(t, "config", "set", key, `{"networks":["none","full"],"mounts":[{"prefix":"/","mode":"rw"}]}`)
		if r = alice("call", "shell.exec", `{"target":"laptop","input":"echo ran"}`); r.code != 0 || !strings.Contains(r.stdout, "ran") {
			t.Errorf("shell.exec on a device under a capability as wide as the default: %v", r)
		}
	})

	// CodeMode blocks of alice's, through the gsv CLI, whose nested calls
	// go to a device of hers run as her host user (a device of its own, so
	// that it can be killed here): the block's --target, and a call's own
	// target, over the default; bob's and a missing device fail with the
	// device's error; a killed device fails a block at once.
	t.Run("CodeMode", func(t *testing.T) {
		home, err := os.MkdirTemp("", "cm-home-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(home) })
		devRoot := filepath.Join(home, "root")
		os.MkdirAll(filepath.Join(devRoot, "sub"), 0o755)
		// marker.txt is on both sides, with different contents: a call
		// that went to the wrong side reads the other one.
		os.WriteFile(filepath.Join(devRoot, "marker.txt"), []byte("marker on the device cmdev\n"), 0o644)
		if err := chownTree(home, aliceHost, aliceHost); err != nil {
			t.Fatal(err)
		}
		os.Chmod(home, 0o755)
		if r := alice("call", "fs.write", `{"path":"~/marker.txt","content":"marker on the kernel\n"}`); r.code != 0 {
			t.Fatalf("the kernel's marker: %v", r)
		}
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "cmdev"}), &tok)
		cm := startDeviceAs(t, aliceHost, home, "--kernel", listen, "--id", "cmdev", "--token", tok.Token.Token, "--root", devRoot)
		cmOnline := func() bool {
			r := alice("call", "sys.device.get", `{"deviceId":"cmdev"}`)
			return r.code == 0 && strings.Contains(r.stdout, `"online": true`)
		}
		waitFor(t, 15*time.Second, "cmdev online", cmOnline)
		codemode := func(args ...string) shResult { return alice(append([]string{"codemode"}, args...)...) }

		// --target: shell runs on the device, in its root (and in --cwd,
		// relative to it), as the device's user.
		r := codemode("--target", "cmdev", "-e", `const r = await shell("pwd; cat marker.txt; id -u"); return r.output`)
		if want := devRoot + "\nmarker on the device cmdev\n" + strconv.Itoa(aliceHost) + "\n\n"; r.code != 0 || r.stdout != want {
			t.Fatalf("shell from a block with --target cmdev: %v\nwant stdout %q", r, want)
		}
		r = codemode("--target", "cmdev", "--cwd", "sub", "-e", `return (await shell("pwd")).output`)
		if want := filepath.Join(devRoot, "sub") + "\n\n"; r.code != 0 || r.stdout != want {
			t.Fatalf("shell from a block with --target cmdev --cwd sub: %v\nwant stdout %q", r, want)
		}
		// fs with the call's own target, and without: each side's file.
		// (A block's fs.read gives the file's bytes, on a device too.)
		r = codemode("-e", `const d = await fs.read({path: "marker.txt", target: "cmdev"});
const k = await fs.read({path: "~/marker.txt"});
return d.content + "|" + k.content`)
		if r.code != 0 || r.stdout != "marker on the device cmdev\n|marker on the kernel\n\n" {
			t.Fatalf("fs.read from a block, target cmdev and none: %v", r)
		}
		// A write with --target lands in the device's root, as its user;
		// a call naming target gsv goes to the kernel over the default.
		r = codemode("--target", "cmdev", "-e", `await fs.write({path: "from-block.txt", content: "written by a block\n"});
const k = await fs.read({path: "~/marker.txt", target: "gsv"});
return k.content`)
		if r.code != 0 || r.stdout != "marker on the kernel\n\n" {
			t.Fatalf("fs.write with --target cmdev, fs.read with target gsv: %v", r)
		}
		if b, err := os.ReadFile(filepath.Join(devRoot, "from-block.txt")); err != nil || string(b) != "written by a block\n" {
			t.Fatalf("the block's file on the device: %q %v", b, err)
		} else if fi, _ := os.Stat(filepath.Join(devRoot, "from-block.txt")); fi.Sys().(*syscall.Stat_t).Uid != uint32(aliceHost) {
			t.Fatalf("the block's file on the device is owned by uid %d", fi.Sys().(*syscall.Stat_t).Uid)
		}

		// bob may not use alice's device, and nobody has one called nosuch:
		// the block fails with the router's error naming the device.
		r = gsvAs(bobHost, []string{unixAddr}, "codemode", "--target", "cmdev", "-e", `return await shell("pwd")`)
		if r.code != 1 || !strings.Contains(r.stderr, `Access denied to device "cmdev"`) || r.stdout != "" {
			t.Fatalf("bob's block on alice's device: %v", r)
		}
		r = codemode("-e", `return await fs.read({path: "marker.txt", target: "nosuch"})`)
		if r.code != 1 || !strings.Contains(r.stderr, `Access denied to device "nosuch"`) || r.stdout != "" {
			t.Fatalf("a block on a missing device: %v", r)
		}
		// The error is thrown in the block, which may catch it.
		r = codemode("-e", `try { await shell("pwd", {target: "nosuch"}) } catch (e) { return "caught: " + e.message }`)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "caught: ") || !strings.Contains(r.stdout, `Access denied to device "nosuch"`) {
			t.Fatalf("a caught device error: %v", r)
		}
		if r := codemode("--target", "cmdev", "-e", `return (await fs.read({path: "marker.txt"})).content`); r.code != 0 || r.stdout != "marker on the device cmdev\n\n" {
			t.Fatalf("the device after the refusals: %v", r)
		}

		// The device goes: a block on it fails at once with 503, and the
		// daemon goes on.
		cm.kill()
		waitFor(t, 5*time.Second, "cmdev offline", func() bool { return !cmOnline() })
		for _, args := range [][]string{
			{"--target", "cmdev", "-e", `return await shell("pwd")`},
			{"-e", `return await fs.read({path: "marker.txt", target: "cmdev"})`},
		} {
			start := time.Now()
			r := codemode(args...)
			took := time.Since(start)
			// (The 503 offline below, not the route timeout's 504, shows
			// it did not wait for the device.)
			t.Logf("a block on the killed device failed in %v", took.Round(time.Millisecond))
			if r.code != 1 || !strings.Contains(r.stderr, `Device offline: "cmdev"`) || r.stdout != "" {
				t.Fatalf("a block on a killed device %q: %v", args, r)
			}
		}
		if r := codemode("-e", `return (await fs.read({path: "~/marker.txt"})).content`); r.code != 0 || r.stdout != "marker on the kernel\n\n" || !d.running() {
			t.Fatalf("a local block after the device died: %v", r)
		}
	})

	// Exec sessions on a device run by alice without root: opened with
	// target.device, used through gsv and through /dev/box/shell, each exec
	// in a rootless sandbox of the device that sees only its mounts; bob
	// may not reach them; they fail when the device goes.
	t.Run("Sessions", func(t *testing.T) {
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Skip("bubblewrap is not installed")
		}
		home, err := os.MkdirTemp("", "box-home-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(home) })
		os.MkdirAll(filepath.Join(home, "src", "project"), 0o755)
		os.WriteFile(filepath.Join(home, "src", "project", "go.mod"), []byte("module example.com/project\n"), 0o644)
		os.WriteFile(filepath.Join(home, "src", "secret.txt"), []byte("not mounted\n"), 0o600)
		if err := chownTree(home, aliceHost, aliceHost); err != nil {
			t.Fatal(err)
		}
		os.Chmod(home, 0o755)
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "box"}), &tok)
		box := startDeviceAs(t, aliceHost, home, "--kernel", listen, "--id", "box", "--token", tok.Token.Token, "--root", filepath.Join(home, "src"))
		boxOnline := func() bool {
			r := alice("call", "sys.device.get", `{"deviceId":"box"}`)
			return r.code == 0 && strings.Contains(r.stdout, `"online": true`)
		}
		waitFor(t, 15*time.Second, "box online", boxOnline)
		if r := alice("call", "sys.device.get", `{"deviceId":"box"}`); !strings.Contains(r.stdout, "process.session.open") {
			t.Fatalf("box does not announce exec sessions: %v", r)
		}

		r := alice("session", "open", "--device", "box", "--mount", "project:/work")
		sid := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(sid, "ps_") {
			t.Fatalf("gsv session open --device box: %v", r)
		}
		r = alice("exec", sid, "--", "sh", "-c", `id -u; cat go.mod; echo made > out.txt; cat ../secret.txt 2>&1 || true; ls /`)
		if r.code != 0 || !strings.Contains(r.stdout, strconv.Itoa(aliceHost)+"\n") || !strings.Contains(r.stdout, "module example.com/project") ||
			strings.Contains(r.stdout, "not mounted") || strings.Contains(r.stdout, "src") {
			t.Fatalf("gsv exec in a device session: %v", r)
		}
		if fi, err := os.Stat(filepath.Join(home, "src", "project", "out.txt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(aliceHost) {
			t.Fatalf("the exec's file on the device: %v %v", fi, err)
		}
		r = alice("session", "status", sid)
		if r.code != 0 || !strings.Contains(r.stdout, `"device": "box"`) || !strings.Contains(r.stdout, "the device's user") {
			t.Fatalf("gsv session status of a device session: %v", r)
		}
		// Large output comes back from the device's blob.
		r = alice("exec", sid, "--", "sh", "-c", `head -c 100000 /dev/zero | tr '\0' x`)
		if r.code != 0 || len(r.stdout) != 100000 {
			t.Fatalf("large output of a device exec: exit %d, %d bytes, %q", r.code, len(r.stdout), r.stderr)
		}

		// The same files as /dev/gsv/shell, under /dev/box/shell.
		r = d.shAs(aliceHost, `S="$1"/dev/box/shell
			exec 3<>"$S"/clone && echo 'open mount=project:/w:ro' >&3 && read sid <&3 && exec 3<&- &&
			ls "$S" | grep -qx "$sid" &&
			echo 'exec sh -c "echo via-files; touch /w/nope 2>&1 || true"' > "$S/$sid/ctl" &&
			cat "$S/$sid/wait" >/dev/null && cat "$S/$sid/stdout"`, d.mnt)
		if r.code != 0 || !strings.Contains(r.stdout, "via-files") || !strings.Contains(r.stdout, "Read-only") {
			t.Fatalf("/dev/box/shell: %v", r)
		}
		if r := d.shAs(aliceHost, `ls "$1"/dev/gsv/shell`, d.mnt); strings.Contains(r.stdout, sid) {
			t.Fatalf("a device session is listed under /dev/gsv/shell: %v", r)
		}

		// bob may neither open sessions on alice's device nor see hers.
		if r := gsvAs(bobHost, []string{unixAddr}, "session", "open", "--device", "box"); r.code == 0 || !strings.Contains(r.stderr, "(403)") {
			t.Fatalf("bob opens a session on alice's device: %v", r)
		}
		if r := gsvAs(bobHost, []string{unixAddr}, "session", "status", sid); r.code == 0 || !strings.Contains(r.stderr, "(404)") {
			t.Fatalf("bob sees alice's device session: %v", r)
		}

		// The device goes: its sessions fail, from the kernel's record.
		box.kill()
		waitFor(t, 5*time.Second, "box offline", func() bool { return !boxOnline() })
		r = alice("session", "status", sid)
		if r.code != 0 || !strings.Contains(r.stdout, `"state": "failed"`) || !strings.Contains(r.stdout, "Device disconnected") {
			t.Fatalf("a session of a gone device: %v", r)
		}
		if r := alice("exec", sid, "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "(503)") || !strings.Contains(r.stderr, "Device disconnected") {
			t.Fatalf("an exec in a session of a gone device: %v", r)
		}
		if r := d.shAs(aliceHost, `ls "$1"/dev/box/shell`, d.mnt); r.code == 0 || !strings.Contains(r.stderr, "down") {
			t.Fatalf("/dev/box/shell while offline: %v", r)
		}
	})

	// A scripted agent of alice's reads a device file and runs a device
	// command; its instructions name the device, its approval the target.
	t.Run("Agent", func(t *testing.T) {
		M := d.mnt
		if r := d.sh(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo 'set config/ai/script ~/turns.jsonl' > "$1/sys/config/ctl"`, M); r.code != 0 {
			t.Fatalf("set the script: %v", r)
		}
		defer d.sh(`echo 'set config/ai/provider offline' > "$1/sys/config/ctl"`, M)
		script := `{"tools":[{"name":"Read","args":{"target":"laptop","path":"project/README.md"}},{"name":"Shell","args":{"target":"laptop","command":"echo ran-in-$(pwd)","cwd":"project"}}],"expectUser":"check the laptop","expectSystem":"- laptop (linux/amd64): fs.read fs.write fs.edit fs.delete fs.search shell.exec"}
{"text":"The laptop is fine."}
`
		if err := os.WriteFile(filepath.Join(d.state, "fs", "home", "alice", "turns.jsonl"), []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		sp := alice("spawn", "task", "--label", "devices")
		pid := strings.TrimSpace(sp.stdout)
		if sp.code != 0 || pid == "" {
			t.Fatalf("gsv spawn: %v", sp)
		}
		P := M + "/proc/" + pid
		read := func(p string) (string, error) {
			r := d.shAs(aliceHost, `cat "$1"`, p)
			if r.code != 0 {
				return "", fmt.Errorf("%v", r)
			}
			return r.stdout, nil
		}
		if r := d.shAs(aliceHost, `echo 'check the laptop' > "$1/conversations/default/in"`, P); r.code != 0 {
			t.Fatalf("send: %v", r)
		}
		hil, err := waitHil(t, read, P)
		if err != nil {
			t.Fatal(err)
		}
		if jsonField(hil, "target") != "laptop" {
			t.Fatalf("the approval does not name the target: %s", hil)
		}
		id := jsonField(hil, "requestId")
		if r := d.shAs(aliceHost, `echo "hil approve $2" > "$1/ctl"`, P, id); r.code != 0 {
			t.Fatalf("approve: %v", r)
		}
		epWaitIdle(t, read, P)
		h, _ := read(P + "/conversations/default/history")
		if !strings.Contains(h, "hello from the laptop") || !strings.Contains(h, "ran-in-"+filepath.Join(export, "project")) {
			t.Fatalf("the agent's history lacks the device's file or command:\n%s", h)
		}
	})

	// The kernel's namespace mounted elsewhere with alice's user token
	// over TCP: her device and its files are there.
	t.Run("RemoteMount", func(t *testing.T) {
		var ut struct {
			Token struct{ Token string }
		}
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": aliceUID}), &ut)
		rm := startRemoteMount(t, d, listen, "--token", ut.Token.Token, "--user", "alice")
		r := rm.sh(`cat "$1"/dev/laptop/status && cat "$1"/dev/laptop/fs/project/README.md && cat "$1"/proc/self/status 2>/dev/null; ls "$1"/home`, rm.mnt)
		if r.code != 0 || !strings.Contains(r.stdout, "online: true") || !strings.Contains(r.stdout, "hello from the laptop") {
			t.Fatalf("the remote mount: %v", r)
		}
	})

	t.Run("Disconnect", func(t *testing.T) {
		r := alice("call", "shell.exec", `{"target":"laptop","input":"sleep 30","background":true}`)
		sid := jsonField(r.stdout, "sessionId")
		if sid == "" {
			t.Fatalf("a background start: %v", r)
		}
		// A handle open on the device's file when it dies fails at once.
		// (It reads on once gate exists, after the device has gone.)
		gate := filepath.Join(d.work, "disconnect-gate")
		held := exec.Command("setpriv", "--reuid", strconv.Itoa(aliceHost), "--regid", strconv.Itoa(aliceHost), "--clear-groups",
			"bash", "-c", `exec 3<"$1"; read -r first <&3; echo "$first"; while [ ! -e "$2" ]; do sleep 0.05; done; cat <&3 && echo read-on || echo read-failed`, "sh",
			filepath.Join(d.mnt, "dev/laptop/fs/project/README.md"), gate)
		var heldOut syncBuffer
		held.Stdout, held.Stderr = &heldOut, &heldOut
		if err := held.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the handle open", func() bool { return strings.Contains(heldOut.String(), "hello") })
		dev.kill()
		waitFor(t, 5*time.Second, "the device offline", func() bool { return !online() })
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		heldDone := make(chan struct{})
		go func() { held.Wait(); close(heldDone) }()
		select {
		case <-heldDone:
		case <-time.After(liveness):
			held.Process.Kill()
			t.Fatalf("a read on a dead device's handle hangs: %q", heldOut.String())
		}
		r = alice("call", "fs.read", `{"target":"laptop","path":"project/README.md"}`)
		if r.code == 0 || !strings.Contains(r.stderr, "(503)") {
			t.Fatalf("fs.read on a killed device: %v", r)
		}
		r = alice("call", "shell.exec", `{"sessionId":"`+sid+`","input":""}`)
		if r.code != 0 || !strings.Contains(r.stdout, `"status": "failed"`) || !strings.Contains(r.stdout, "Device disconnected") {
			t.Fatalf("a poll of a session of a disconnected device: %v", r)
		}
		if r := d.shAs(aliceHost, `cat "$1"/dev/laptop/fs/project/README.md`, d.mnt); r.code == 0 || !strings.Contains(r.stderr, "down") {
			t.Fatalf("/dev/laptop/fs while offline: %v", r)
		}
		if r := d.shAs(aliceHost, `cat "$1"/dev/laptop/status`, d.mnt); r.code != 0 || !strings.Contains(r.stdout, "online: false") {
			t.Fatalf("/dev/laptop/status while offline: %v", r)
		}
		dev = startDevice(top, devArgs...)
		waitFor(t, 15*time.Second, "the device online again", online)
		if r := alice("call", "fs.read", `{"target":"laptop","path":"project/README.md"}`); r.code != 0 {
			t.Fatalf("fs.read after the reconnect: %v", r)
		}
	})

	t.Run("Supersede", func(t *testing.T) {
		other := top.TempDir()
		os.MkdirAll(filepath.Join(other, "project"), 0o755)
		os.WriteFile(filepath.Join(other, "project", "README.md"), []byte("the second connection\n"), 0o644)
		second := startDevice(top, "--kernel", listen, "--id", "laptop", "--token", node, "--root", other)
		waitFor(t, 15*time.Second, "the second connection serving", func() bool {
			r := alice("call", "fs.read", `{"target":"laptop","path":"project/README.md"}`)
			return r.code == 0 && strings.Contains(r.stdout, "the second connection")
		})
		dev.kill() // before its reconnect supersedes the second in turn
		if r := alice("call", "fs.read", `{"target":"laptop","path":"project/README.md"}`); r.code != 0 || !strings.Contains(r.stdout, "the second connection") {
			t.Fatalf("after the first device died: %v", r)
		}
		dev = second
	})

	t.Run("Timeout", func(t *testing.T) {
		dev.cmd.Process.Signal(syscall.SIGSTOP)
		start := time.Now()
		r := alice("call", "fs.read", `{"target":"laptop","path":"project/README.md"}`)
		dev.cmd.Process.Signal(syscall.SIGCONT)
		if r.code == 0 || !strings.Contains(r.stderr, "(504)") || !strings.Contains(r.stderr, "timed out") {
			t.Fatalf("fs.read on a stopped device: %v", r)
		}
		if took := time.Since(start); took > liveness { // the default route timeout is 2 min
			t.Fatalf("the 504 took %v", took)
		}
	})

	t.Run("NoShell", func(t *testing.T) {
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "nas"}), &tok)
		startDevice(t, "--kernel", listen, "--id", "nas", "--token", tok.Token.Token, "--root", export, "--no-shell")
		waitFor(t, 15*time.Second, "nas online", func() bool {
			r := alice("call", "sys.device.get", `{"deviceId":"nas"}`)
			return strings.Contains(r.stdout, `"online": true`)
		})
		r := alice("call", "shell.exec", `{"target":"nas","input":"true"}`)
		if r.code == 0 || !strings.Contains(r.stderr, "(400)") || !strings.Contains(r.stderr, "does not implement shell.exec") {
			t.Fatalf("shell.exec on a device without shell: %v", r)
		}
	})

	// A device that says garbage, or answers 9P with garbage, loses its
	// connection; the kernel and the other devices go on.
	t.Run("BadInput", func(t *testing.T) {
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "rogue"}), &tok)
		rogue := tok.Token.Token
		dial := func() net.Conn {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(liveness))
			return c
		}
		welcome := func(c net.Conn) string {
			line, _ := bufio.NewReader(c).ReadString('\n')
			return line
		}
		for name, hello := range map[string]string{
			"not json":       "{garbage\n",
			"unknown field":  `{"id":"rogue","token":"` + rogue + `","platform":"x","version":"1","implements":[],"extra":1}` + "\n",
			"bad implements": `{"id":"rogue","token":"` + rogue + `","platform":"x","version":"1","implements":["sys.user.add"]}` + "\n",
			"bad id":         `{"id":"../etc","token":"` + rogue + `","platform":"x","version":"1","implements":[]}` + "\n",
		} {
			c := dial()
			c.Write([]byte("GSVDEVICE 1\n" + hello))
			if w := welcome(c); !strings.Contains(w, `"ok":false`) {
				t.Errorf("%s: welcome %q", name, w)
			}
			c.Close()
		}
		// A good hello, then garbage where the 9P replies go.
		c := dial()
		c.Write([]byte("GSVDEVICE 1\n" + `{"id":"rogue","token":"` + rogue + `","platform":"x","version":"1","implements":["fs.read"]}` + "\n"))
		if w := welcome(c); !strings.Contains(w, `"ok":true`) {
			t.Fatalf("welcome %q", w)
		}
		c.Write([]byte("\x03\x00\x00\x00garbage garbage garbage"))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				break // the kernel ended the connection
			}
		}
		c.Close()
		waitFor(t, 5*time.Second, "rogue offline", func() bool {
			r := alice("call", "sys.device.get", `{"deviceId":"rogue"}`)
			return r.code == 0 && !strings.Contains(r.stdout, `"online": true`)
		})
		if r := alice("call", "fs.read", `{"target":"laptop","path":"project/README.md"}`); r.code != 0 || !d.running() {
			t.Fatalf("the other device after the rogue one: %v", r)
		}
	})

	t.Run("BadTokens", func(t *testing.T) {
		// A token bound to another id, and no token at all: refused, and
		// the device never comes online.
		p := startDevice(t, "--kernel", listen, "--id", "phone", "--token", node, "--root", export)
		q := startDevice(t, "--kernel", listen, "--id", "tablet", "--token", "gsv_node_aaaaaaaaaaaaaaaaaaaa", "--root", export)
		waitFor(t, 10*time.Second, "the refusals", func() bool {
			return strings.Contains(p.stderr.String(), "bound to device") && strings.Contains(q.stderr.String(), "authentication failed")
		})
		r := gsvAs(0, []string{unixAddr}, "call", "sys.device.list", `{"includeOffline":true}`)
		if strings.Contains(r.stdout, "phone") || strings.Contains(r.stdout, "tablet") {
			t.Fatalf("a refused device is registered: %v", r)
		}
		if !d.running() {
			t.Fatal("the kernel died")
		}
	})
}

// jsonField is the string value of "key": "value" in pretty JSON text.
func jsonField(s, key string) string {
	i := strings.Index(s, `"`+key+`": "`)
	if i < 0 {
		return ""
	}
	s = s[i+len(key)+5:]
	j := strings.IndexByte(s, '"')
	if j < 0 {
		return ""
	}
	return s[:j]
}

// waitHil polls a process's hil view until it shows a request, and
// returns it.
func waitHil(t *testing.T, read func(p string) (string, error), base string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		s, err := read(base + "/hil")
		if err == nil && strings.TrimSpace(s) != "" {
			return s, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no HIL request at %s: %q %v", base, s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
