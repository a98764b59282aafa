package main_test

// gsv codemode against a real daemon: a block runs in the daemon's
// codemode-worker child, its fs and shell calls are syscalls made as the
// caller's init process, and a block that runs away fails alone.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestE2ECodeMode(t *testing.T) {
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{})
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) shResult { return gsvAs(0, env, args...) }

	// The result alone, as JSON.
	if r := gsv("codemode", "-e", "return 6*7"); r.code != 0 || r.stdout != "42\n" {
		t.Fatalf("return 6*7: %v", r)
	}
	// The envelope with --json, logs included.
	r := gsv("codemode", "--json", "-e", `console.log("hi"); return {a: [1, "b"]}`)
	var env1 struct {
		Status string
		Result json.RawMessage
		Logs   []string
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &env1) != nil || env1.Status != "completed" ||
		string(env1.Result) != `{"a":[1,"b"]}` && !strings.Contains(r.stdout, `"a": [`) || len(env1.Logs) != 1 || env1.Logs[0] != "hi" {
		t.Fatalf("--json: %v", r)
	}

	// fs and shell from a block, as root's init process.
	r = gsv("codemode", "-e", `
await fs.write({path: "~/cm.txt", content: "hello from codemode\n"});
const f = await fs.read({path: "~/cm.txt"});
const sh = await shell("echo $((40+2))");
return {content: f.content, out: sh.output.trim(), status: sh.status};`)
	if r.code != 0 || !strings.Contains(r.stdout, "hello from codemode") || !strings.Contains(r.stdout, `"out": "42"`) {
		t.Fatalf("fs and shell: %v", r)
	}

	// The seed's polling loop over a real background command.
	r = gsv("codemode", "--json", "-e", `
let res = await shell("for i in 1 2 3; do echo tick $i; sleep 0.2; done", {background: true});
const first = res.status;
let output = res.output;
let polls = 0;
while (res.status === "running") {
  res = await shell("", {sessionId: res.sessionId});
  output += res.output;
  polls++;
}
if (res.status === "failed") throw new Error(res.error + "\n" + output);
return {first, polls: polls > 0, exitCode: res.exitCode, output};`)
	var poll struct {
		Status string
		Result struct {
			First    string
			Polls    bool
			ExitCode int
			Output   string
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &poll) != nil || poll.Status != "completed" || poll.Result.First != "running" ||
		!poll.Result.Polls || poll.Result.ExitCode != 0 || poll.Result.Output != "tick 1\ntick 2\ntick 3\n" {
		t.Fatalf("polling a background shell: %v", r)
	}

	// A script file with argv and args.
	script := filepath.Join(base, "work", "s.js")
	if err := os.WriteFile(script, []byte(`return argv.join(",") + " " + args.mode`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := gsv("codemode", script, "--", "a1", "a2", "--arg", "mode=fast"); r.code != 0 || r.stdout != "a1,a2 fast\n" {
		t.Fatalf("script file: %v", r)
	}
	// gsv call codemode.run prints the envelope.
	if r := gsv("call", "codemode.run", `{"code":"return 6*7"}`); r.code != 0 || !strings.Contains(r.stdout, `"result": 42`) || !strings.Contains(r.stdout, `"status": "completed"`) {
		t.Fatalf("gsv call codemode.run: %v", r)
	}

	// A thrown error fails the run: exit 1, the error on stderr.
	if r := gsv("codemode", "-e", `throw new Error("boom")`); r.code != 1 || !strings.Contains(r.stderr, "Error: boom") {
		t.Fatalf("throw: %v", r)
	}
	// An infinite loop fails with its time limit (--timeout's, not the
	// default's), and the daemon answers.
	r = gsv("codemode", "--timeout", "1s", "--json", "-e", "while (true) {}")
	if r.code != 1 || !strings.Contains(r.stdout, "time limit exceeded (1s)") {
		t.Fatalf("infinite loop: %v", r)
	}
	// So do a huge allocation and deep recursion.
	if r := gsv("codemode", "-e", "const a = []; while (true) a.push(new Array(1e5).fill(1))"); r.code != 1 || !strings.Contains(r.stderr, "memory limit") {
		t.Fatalf("allocation: %v", r)
	}
	// A result that fills the memory names the limit, not "never settles".
	if r := gsv("codemode", "-e", `return "x".repeat(44e6)`); r.code != 1 || !strings.Contains(r.stderr, "memory limit exceeded") {
		t.Fatalf("a result that fills the memory: %v", r)
	}
	if r := gsv("codemode", "-e", "function f() { return f() + 1 } return f()"); r.code != 1 || !strings.Contains(r.stderr, "stack overflow") {
		t.Fatalf("recursion: %v", r)
	}
	if r := gsv("codemode", "-e", "return 1"); r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("after the failures: %v\ndaemon:\n%s", r, d.stderr.String())
	}
	if r := gsv("whoami"); r.code != 0 {
		t.Fatalf("whoami: %v", r)
	}

	// Ctrl-C of gsv codemode ends the run at once: a block that writes a
	// counter in a loop stops writing it.
	tick := filepath.Join(d.state, "fs/home/root/tick.txt")
	cmd := exec.Command(gsvBin, "codemode", "-e", `let i = 0; while (true) { await fs.write({path: "~/tick.txt", content: String(i++)}) }`)
	cmd.Env = append(os.Environ(), env[0], raceEnv)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	counter := func() string {
		b, _ := os.ReadFile(tick)
		return string(b)
	}
	for deadline := time.Now().Add(liveness); counter() == "" || counter() == "0"; {
		if time.Now().After(deadline) {
			t.Fatal("the block never wrote its counter")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("gsv codemode exited 0 after Ctrl-C")
	}
	// The counter settles: it stays the same for a second, where a block
	// that went on rewrites it every few milliseconds. (A write under way
	// at the Ctrl-C may still land.)
	for deadline := time.Now().Add(liveness); ; {
		c1 := counter()
		time.Sleep(time.Second)
		c2 := counter()
		if c1 == c2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the block went on after Ctrl-C: counter %s, then %s", c1, c2)
		}
	}
}
