package main_test

// The process capability binds every way to run a command: shell.exec and
// a CodeMode block's shell, with a narrowed token or root's
// users/<uid>/process/cap, as it binds an exec session.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
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

	t.Run("WiderSessions", func(t *testing.T) {
		// A session alice started without the token (her whole
		// capability) runs no command of the token's: no exec in her
		// exec session, no input to her background shell.
		r := gsvAs(aliceHost, own, "session", "open", "--network", "full")
		if r.code != 0 {
			t.Fatalf("alice's session: %v", r)
		}
		sid := strings.TrimSpace(r.stdout)
		if r := gsvAs(0, tok, "exec", sid, "--", "cat", "/proc/net/dev"); r.code == 0 || !strings.Contains(r.stderr, "(403)") ||
			!strings.Contains(r.stderr, "process capability") || strings.Contains(r.stdout, "Inter-") {
			t.Errorf("the token's exec in alice's session: %v, want a 403", r)
		}
		if r := gsvAs(aliceHost, own, "exec", sid, "--", "true"); r.code != 0 {
			t.Errorf("alice's own exec in her session: %v", r)
		}
		r = gsvAs(aliceHost, own, "call", "shell.exec", `{"input":"sh","cwd":"~","background":true}`)
		var bg struct{ SessionID string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &bg) != nil || bg.SessionID == "" {
			t.Fatalf("alice's background shell: %v", r)
		}
		input := func(env []string, line string) shResult {
			return gsvAs(aliceHost, env, "call", "shell.exec", fmt.Sprintf(`{"sessionId":%q,"input":%q}`, bg.SessionID, line))
		}
		if r := input(tok, "cat ~/secret.txt\n"); r.code == 0 || !strings.Contains(r.stderr, "(403)") || strings.Contains(r.stdout, "s3cret") {
			t.Errorf("the token's input to alice's shell: %v, want a 403", r)
		}
		if r := input(own, "echo mine; exit\n"); r.code != 0 || strings.Contains(r.stdout, "s3cret") {
			t.Errorf("alice's own input: %v", r)
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

// TestE2EAgentCapability: a token narrowed with --process binds what an
// agent does for its holder, not only the holder's own calls. The holder
// (the real gsv over TCP with GSV_TOKEN) sends a message to one of alice's
// processes, adds a schedule whose fire sends to another, spawns a third
// with a prompt; each run's model (the scripted provider) calls Shell
// with a probe that reads alice's home and lists the network; alice
// herself (no token) approves each call. Each command gets loopback only
// and ~/ci, as the token's own shell.exec does; the same probe sent by
// alice herself reads her secret. The narrowing is stored with the work:
// a daemon restart between the holder's message and alice's approval
// keeps it.
func TestE2EAgentCapability(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", freePort(t))
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{listen: listen})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	own := []string{"GSV_ADDR=unix!" + d.sock} // alice on the unix socket: no token
	probe := `awk -F: 'NR>2{gsub(/ /,"",$1); print "if:" $1}' /proc/net/dev; cat ~/secret.txt || echo nosecret; echo made > out.txt`
	shell, err := json.Marshal(map[string]any{"tools": []any{map[string]any{"name": "Shell", "args": map[string]any{"command": probe, "cwd": "~/ci"}}}})
	if err != nil {
		t.Fatal(err)
	}
	// One turn pair per run, in the order the runs come.
	var script strings.Builder
	for range 5 {
		fmt.Fprintf(&script, "%s\n{\"text\":\"probed\"}\n", shell)
	}
	for _, w := range [][2]string{{"~/ci/keep", ""}, {"~/secret.txt", "s3cret\n"}, {"~/agent.jsonl", script.String()}} {
		if r := gsvAs(aliceHost, own, "call", "fs.write", fmt.Sprintf(`{"path":%q,"content":%q}`, w[0], w[1])); r.code != 0 {
			t.Fatalf("fs.write %s: %v", w[0], r)
		}
	}
	d.mustGsv(t, "config", "set", "config/ai/provider", "scripted")
	d.mustGsv(t, "config", "set", "config/ai/script", "~/agent.jsonl")
	r := gsvAs(0, own, "token", "create", "--uid", strconv.Itoa(int(aliceUID)),
		"--process", `{"networks":["none"],"mounts":[{"prefix":"~/ci","mode":"rw"}]}`)
	if r.code != 0 {
		t.Fatalf("gsv token create --process: %v", r)
	}
	tok := []string{"GSV_ADDR=" + listen, "GSV_USER=alice", "GSV_TOKEN=" + strings.TrimSpace(r.stdout)}
	out := filepath.Join(d.state, "fs", "home", "alice", "ci", "out.txt")

	// call makes a syscall with gsv call as alice (env: own or tok) and
	// decodes its result into v.
	call := func(env []string, name string, args, v any) {
		t.Helper()
		b, _ := json.Marshal(args)
		r := gsvAs(aliceHost, env, "call", name, string(b))
		if r.code != 0 {
			t.Fatalf("gsv call %s %s: %v", name, b, r)
		}
		if v != nil {
			if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
				t.Fatalf("gsv call %s: %q: %v", name, r.stdout, err)
			}
		}
	}
	spawn := func(env []string, label, prompt string) string {
		t.Helper()
		var sp struct{ Pid string }
		call(env, "proc.spawn", map[string]any{"profile": "task", "label": label, "prompt": prompt}, &sp)
		return sp.Pid
	}
	// approve waits for pid's run to ask alice, and approves as alice.
	approve := func(pid string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; {
			var h abi.HistoryResult
			call(own, "proc.history", map[string]any{"pid": pid}, &h)
			if h.PendingHil != nil {
				call(own, "proc.hil", map[string]any{"pid": pid, "requestId": h.PendingHil.RequestID, "decision": "approve"}, nil)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s asks nothing: %+v", pid, h)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// ran waits for pid to be idle and returns what its Shell printed.
	ran := func(pid string) string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; {
			var st abi.StatusResult
			call(own, "proc.status", map[string]any{"pid": pid}, &st)
			if st.Status.State == "idle" && st.Status.Queued == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is not idle: %+v", pid, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var h abi.HistoryResult
		call(own, "proc.history", map[string]any{"pid": pid}, &h)
		for i := len(h.Messages) - 1; i >= 0; i-- {
			var res struct {
				ToolName string `json:"toolName"`
				Output   string `json:"output"`
			}
			var sh abi.ShellExecResult
			if h.Messages[i].Role == "toolResult" && json.Unmarshal(h.Messages[i].Content, &res) == nil && res.ToolName == "Shell" {
				if err := json.Unmarshal([]byte(res.Output), &sh); err != nil {
					return res.Output
				}
				return sh.Output + sh.Error
			}
		}
		t.Fatalf("%s ran no Shell: %+v", pid, h.Messages)
		return ""
	}
	bound := func(what, output string) {
		t.Helper()
		if !strings.Contains(output, "if:lo") || strings.Contains(output, "if:eth") || strings.Contains(output, "s3cret") ||
			!strings.Contains(output, "nosecret") {
			t.Errorf("%s: the agent's command had more than the token's capability: %q", what, output)
		}
		if _, err := os.Stat(out); err != nil {
			t.Errorf("%s: the write in ~/ci did not land: %v (%q)", what, err, output)
		}
		os.Remove(out)
	}

	// Alice's own message: her command reads her secret.
	pid := spawn(own, "alices", "")
	call(own, "proc.send", map[string]any{"pid": pid, "message": "probe"}, nil)
	approve(pid)
	if got := ran(pid); !strings.Contains(got, "s3cret") {
		t.Fatalf("alice's own agent: %q", got)
	}
	os.Remove(out)

	// The token's message to a process alice spawned.
	pid = spawn(own, "messaged", "")
	call(tok, "proc.send", map[string]any{"pid": pid, "message": "probe"}, nil)
	approve(pid)
	bound("a message sent with the token", ran(pid))

	// A schedule added with the token: its fire sends to a process of
	// alice's.
	pid = spawn(own, "scheduled", "")
	call(tok, "sched.add", map[string]any{"name": "probe", "expression": map[string]any{"kind": "after", "afterMs": 1000},
		"target": map[string]any{"kind": "process.event", "pid": pid, "message": "probe"}}, nil)
	approve(pid)
	bound("a schedule added with the token", ran(pid))

	// A process spawned with the token, whose run asks before a restart.
	pid = spawn(tok, "spawned", "probe")
	for deadline := time.Now().Add(60 * time.Second); ; {
		var h abi.HistoryResult
		call(own, "proc.history", map[string]any{"pid": pid}, &h)
		if h.PendingHil != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s asks nothing", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The next daemon's model starts its script again: it answers.
	if r := gsvAs(aliceHost, own, "call", "fs.write", `{"path":"~/agent.jsonl","content":"{\"text\":\"probed\"}\n"}`); r.code != 0 {
		t.Fatalf("fs.write: %v", r)
	}
	d.stop()
	d = startDaemon(t, base, daemonOpts{listen: listen})
	approve(pid)
	bound("a process spawned with the token, after a restart", ran(pid))
}
