package main_test

// The process capability binds every way to run a command: shell.exec and
// a CodeMode block's shell, with a narrowed token or root's
// users/<uid>/process/cap, as it binds an exec session.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestE2EShellCapability(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", freePort(t))
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	unixAddr := "GSV_ADDR=unix!" + d.sock
	own := []string{unixAddr} // alice on the unix socket: no token
	// alice's files, made as alice.
	for _, w := range [][2]string{{"~/ci/keep", ""}, {"~/secret.txt", "s3cret\n"}} {
		if r := gsvAs(aliceHost, own, "call", "fs.write", fmt.Sprintf(`{"path":%q,"content":%q}`, w[0], w[1])); r.code != 0 {
			t.Fatalf("fs.write %s: %v", w[0], r)
		}
	}
	r := gsvAs(0, []string{unixAddr}, "token", "create", "--uid", strconv.Itoa(int(aliceUID)),
		"--process", `{"networks":["none"],"mounts":[{"prefix":"~/ci","mode":"rw"}],"max_timeout_ns":3000000000}`)
	if r.code != 0 {
		t.Fatalf("gsv token create --process: %v", r)
	}
	tok := []string{"GSV_ADDR=" + listen, "GSV_USER=alice", "GSV_TOKEN=" + strings.TrimSpace(r.stdout)}
	probe := `awk -F: 'NR>2{gsub(/ /,"",$1); print "if:" $1}' /proc/net/dev; cat ~/secret.txt || echo nosecret; echo made > out.txt`
	out := filepath.Join(d.state, "fs", "home", "alice", "ci", "out.txt")

	// checkBound checks what a bound command printed and wrote.
	checkBound := func(t *testing.T, what, output string) {
		t.Helper()
		if !strings.Contains(output, "if:lo") || strings.Contains(output, "if:eth") || strings.Contains(output, "s3cret") ||
			!strings.Contains(output, "nosecret") {
			t.Errorf("%s: the network or the home is not the capability's: %q", what, output)
		}
		if _, err := os.Stat(out); err != nil {
			t.Errorf("%s: the write in ~/ci did not land: %v", what, err)
		}
		os.Remove(out)
	}

	t.Run("TokenShell", func(t *testing.T) {
		r := gsvAs(0, tok, "call", "shell.exec", fmt.Sprintf(`{"input":%q,"cwd":"~/ci"}`, probe))
		if r.code != 0 {
			t.Fatalf("shell.exec in ~/ci with the token: %v", r)
		}
		checkBound(t, "shell.exec", r.stdout)
		for _, cwd := range []string{"", "~", "/workspaces", "/home/alice"} {
			args := `{"input":"echo ran"}`
			if cwd != "" {
				args = fmt.Sprintf(`{"input":"echo ran","cwd":%q}`, cwd)
			}
			r := gsvAs(0, tok, "call", "shell.exec", args)
			if r.code == 0 || !strings.Contains(r.stderr, "(403)") || !strings.Contains(r.stderr, "process capability") || strings.Contains(r.stdout, "ran") {
				t.Errorf("shell.exec with cwd %q outside the token's mounts: %v, want a 403", cwd, r)
			}
		}
		// max_timeout_ns bounds the command's timeout.
		r = gsvAs(0, tok, "call", "shell.exec", `{"input":"sleep 60","cwd":"~/ci","timeoutMs":600000}`)
		if r.code != 0 || !strings.Contains(r.stdout, "Command timed out") {
			t.Errorf("a command past the token's max_timeout_ns: %v", r)
		}
	})

	t.Run("TokenCodeMode", func(t *testing.T) {
		r := gsvAs(0, tok, "codemode", "--cwd", "~/ci", "-e", fmt.Sprintf(`const r = await shell(%q); return r.output`, probe))
		if r.code != 0 {
			t.Fatalf("gsv codemode with the token: %v", r)
		}
		checkBound(t, "codemode shell", r.stdout)
		r = gsvAs(0, tok, "codemode", "-e", `const r = await shell("echo ran", {cwd: "~"}); return r`)
		if strings.Contains(r.stdout, "ran") || !strings.Contains(r.stdout+r.stderr, "process capability") {
			t.Errorf("a block's shell in the home, outside the token's mounts: %v", r)
		}
	})

	t.Run("Config", func(t *testing.T) {
		// Without the token, alice's own capability: the host's network, her home.
		r := gsvAs(aliceHost, own, "call", "shell.exec", fmt.Sprintf(`{"input":%q,"cwd":"~/ci"}`, probe))
		if r.code != 0 || !strings.Contains(r.stdout, "s3cret") {
			t.Fatalf("alice's own shell.exec: %v", r)
		}
		os.Remove(out)
		// Root narrows it in config: the same bounds bind her own calls.
		key := fmt.Sprintf("users/%d/process/cap", aliceUID)
		d.mustGsv(t, "config", "set", key, `{"networks":["none"],"mounts":[{"prefix":"~/ci","mode":"rw"}]}`)
		r = gsvAs(aliceHost, own, "call", "shell.exec", fmt.Sprintf(`{"input":%q,"cwd":"~/ci"}`, probe))
		if r.code != 0 {
			t.Fatalf("shell.exec under root's users/<uid>/process/cap: %v", r)
		}
		checkBound(t, "shell.exec (config)", r.stdout)
		r = gsvAs(aliceHost, own, "codemode", "--cwd", "~/ci", "-e", fmt.Sprintf(`const r = await shell(%q); return r.output`, probe))
		if r.code != 0 {
			t.Fatalf("gsv codemode under root's users/<uid>/process/cap: %v", r)
		}
		checkBound(t, "codemode shell (config)", r.stdout)
		r = gsvAs(aliceHost, own, "call", "shell.exec", `{"input":"echo ran"}`)
		if r.code == 0 || !strings.Contains(r.stderr, "(403)") {
			t.Errorf("shell.exec in the home under root's users/<uid>/process/cap: %v", r)
		}
	})
}
