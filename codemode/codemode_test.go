package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain makes the test binary its own worker: Run starts it with
// WorkerEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(WorkerEnv) == "1" {
		os.Exit(WorkerMain())
	}
	if os.Getenv("CODEMODE_TEST_WHOAMI") == "1" { // TestWorkerDropsRoot
		if err := dropPrivileges(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		gs, _ := os.Getgroups()
		fmt.Println(os.Geteuid(), os.Getegid(), gs)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// self is the argv of the test binary as a worker.
func self(t testing.TB) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}
}

// noCalls is a CallFunc that serves nothing.
func noCalls(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no calls here")
}

// liveness bounds every wait in these tests for something that must
// happen: a guard against a hang, never a measure of speed. The worker is
// this race-built binary, whose engine runs about 28x slower than a plain
// build (docs/codemode.md), and a 2-core machine at load 10 slows it 5x
// more.
const liveness = time.Minute

// run runs req with this binary as the worker. A request with no wall
// time gets 5 minutes, not the default 30 s: the race-built engine took
// over 30 s for a 20 MB string at load 10.
func run(t *testing.T, req Request, call CallFunc) *Result {
	t.Helper()
	if call == nil {
		call = noCalls
	}
	if req.Limits.Wall == 0 {
		req.Limits.Wall = 5 * time.Minute
	}
	res, err := Run(context.Background(), self(t), req, call)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func completed(t *testing.T, res *Result, want string) {
	t.Helper()
	if res.Status != StatusCompleted {
		t.Fatalf("status %s, error %q, logs %q", res.Status, res.Error, res.Logs)
	}
	if got := string(res.Result); got != want {
		t.Fatalf("result %s, want %s", got, want)
	}
}

func failedWith(t *testing.T, res *Result, want string) {
	t.Helper()
	if res.Status != StatusFailed {
		t.Fatalf("status %s (result %s), want failed with %q", res.Status, res.Result, want)
	}
	if !strings.Contains(res.Error, want) {
		t.Fatalf("error %q, want it to contain %q", res.Error, want)
	}
}

// alive checks that the parent still works after a run.
func alive(t *testing.T) {
	t.Helper()
	completed(t, run(t, Request{Code: "return 1"}, nil), "1")
}

func TestBasics(t *testing.T) {
	completed(t, run(t, Request{Code: "return 6*7"}, nil), "42")
	completed(t, run(t, Request{Code: ""}, nil), "null")
	completed(t, run(t, Request{Code: "const x = await Promise.resolve(2); return {x, s: 'é'}"}, nil), `{"x":2,"s":"é"}`)
	completed(t, run(t, Request{Code: "async function* g() { yield 1; yield 2 } let s = 0; for await (const v of g()) s += v; return s"}, nil), "3")
	completed(t, run(t, Request{Code: "return typeof fetch + typeof setTimeout + typeof require + typeof process"}, nil),
		`"undefinedundefinedundefinedundefined"`)
	res := run(t, Request{Code: "return await import('/etc/passwd')"}, nil)
	failedWith(t, res, "not available")
	failedWith(t, run(t, Request{Code: "return 1n"}, nil), "not JSON")
	failedWith(t, run(t, Request{Code: "return (("}, nil), "SyntaxError")
	// Text that closes the function body early runs as global code.
	completed(t, run(t, Request{Code: "})(); (function(){"}, nil), "null")
	failedWith(t, run(t, Request{Code: "await new Promise(() => {})"}, nil), "never settles")
	failedWith(t, run(t, Request{Code: "__gsv_done('{\"ok\":true,\"result\":1}'); return 2"}, nil), "ReferenceError")
}

func TestArgvArgs(t *testing.T) {
	res := run(t, Request{Code: "return {argv, args}", Argv: []string{"a", "b"}, Args: map[string]string{"mode": "fast"}}, nil)
	completed(t, res, `{"argv":["a","b"],"args":{"mode":"fast"}}`)
	res = run(t, Request{Code: "return args.n + 1", ArgsJSON: json.RawMessage(`{"n":41}`)}, nil)
	completed(t, res, "42")
	completed(t, run(t, Request{Code: "return {argv, args}"}, nil), `{"argv":[],"args":{}}`)
}

func TestLogs(t *testing.T) {
	res := run(t, Request{Code: `console.log("a", 1, {b: 2}); console.info("i"); console.warn("w"); console.error(new Error("e")); return "ok"`}, nil)
	completed(t, res, `"ok"`)
	want := []string{`a 1 {"b":2}`, "i", "warn: w", "error: Error: e"}
	if fmt.Sprint(res.Logs) != fmt.Sprint(want) {
		t.Fatalf("logs %q, want %q", res.Logs, want)
	}
	// Logs before a failure are kept.
	res = run(t, Request{Code: `console.log("before"); throw new Error("boom")`}, nil)
	failedWith(t, res, "Error: boom")
	if len(res.Logs) != 1 || res.Logs[0] != "before" {
		t.Fatalf("logs %q", res.Logs)
	}
	res = run(t, Request{Code: `for (let i = 0; i < 5000; i++) console.log(i); return 1`}, nil)
	completed(t, res, "1")
	if n := len(res.Logs); n > maxLogs+1 || res.Logs[n-1] != "… (logs truncated)" {
		t.Fatalf("%d logs, last %q", n, res.Logs[n-1])
	}
}

func TestThrow(t *testing.T) {
	failedWith(t, run(t, Request{Code: `throw new TypeError("bad thing")`}, nil), "TypeError: bad thing")
	failedWith(t, run(t, Request{Code: `throw "plain"`}, nil), "uncaught: plain")
	// quickjs throws null when it has no memory to make its error.
	failedWith(t, run(t, Request{Code: `throw null`}, nil), "uncaught: null (the block threw null, or the engine ran out of memory making its error: memory limit 64 MiB)")
	failedWith(t, run(t, Request{Code: `await Promise.reject(new Error("later"))`}, nil), "Error: later")
	alive(t)
}

func TestTimeLimit(t *testing.T) {
	for _, code := range []string{
		"while (true) {}",
		"await null; for (;;) {}",
		"try { while (true) {} } catch (e) { return 'caught' }",
	} {
		start := time.Now()
		res := run(t, Request{Code: code, Limits: Limits{Wall: 300 * time.Millisecond}}, nil)
		failedWith(t, res, "time limit exceeded")
		if d := time.Since(start); d > liveness {
			t.Errorf("%q took %v", code, d)
		}
	}
	alive(t)
}

func TestMemoryLimit(t *testing.T) {
	for _, code := range []string{
		"const a = []; while (true) a.push(new Array(100000).fill(1))",
		"let s = 'x'; while (true) s = s + s",
		"return new ArrayBuffer(1 << 30).byteLength",
	} {
		res := run(t, Request{Code: code, Limits: Limits{MemoryBytes: 16 << 20}}, nil)
		if res.Status != StatusFailed || !(strings.Contains(res.Error, "memory limit") || strings.Contains(res.Error, "RangeError") || strings.Contains(res.Error, "string too long")) {
			t.Fatalf("%q: %+v", code, res)
		}
	}
	alive(t)
}

// TestResultFillsMemory: a block whose result fills the engine's memory
// fails naming the memory limit, not "never settles" (the engine dropped
// the reaction it had no memory to queue). 16 MiB and 11 MB stand for the
// default 64 MiB and `return "x".repeat(44e6)`, which a race build runs
// slowly.
func TestResultFillsMemory(t *testing.T) {
	for _, tc := range []struct {
		code string
		mem  int64
	}{
		{`return "x".repeat(11e6)`, 16 << 20},
		{`const s = "x".repeat(11e6); return [s]`, 16 << 20},
	} {
		res := run(t, Request{Code: tc.code, Limits: Limits{MemoryBytes: tc.mem}}, nil)
		if res.Status != StatusFailed || strings.Contains(res.Error, "never settles") ||
			!(strings.Contains(res.Error, "memory limit exceeded") || strings.Contains(res.Error, "result too large")) {
			t.Errorf("%q: status %s, error %q", tc.code, res.Status, res.Error)
		}
	}
	failedWith(t, run(t, Request{Code: `const s = "x".repeat(11e6); await new Promise(() => {})`, Limits: Limits{MemoryBytes: 16 << 20}}, nil), "never settles")
	alive(t)
}

func TestStackOverflow(t *testing.T) {
	res := run(t, Request{Code: "function f(n) { return f(n + 1) + 1 } return f(0)"}, nil)
	failedWith(t, res, "stack overflow")
	res = run(t, Request{Code: "const f = async (n) => 1 + await f(n + 1); return await f(0)"}, nil)
	failedWith(t, res, "stack overflow")
	res = run(t, Request{Code: "function f(n) { return n == 0 ? 0 : 1 + f(n - 1) } return f(100)", Limits: Limits{StackDepth: 50}}, nil)
	failedWith(t, res, "stack overflow")
	alive(t)
}

// fake is a CallFunc over a tiny shell and file system, as the seed's
// examples use them.
type fake struct {
	polls atomic.Int32
}

func (f *fake) call(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, err
	}
	switch name {
	case "shell.exec":
		switch {
		case a["input"] == "pwd":
			return json.RawMessage(`{"status":"completed","output":"/home/alice\n","exitCode":0}`), nil
		case a["input"] == "npm run test":
			if a["cwd"] != "/workspace/gsv/gateway" {
				return nil, fmt.Errorf("cwd %v", a["cwd"])
			}
			return json.RawMessage(`{"status":"running","output":"start ","sessionId":"sh_1"}`), nil
		case a["sessionId"] == "sh_1":
			if f.polls.Add(1) < 3 {
				return json.RawMessage(`{"status":"running","output":"tick ","sessionId":"sh_1"}`), nil
			}
			return json.RawMessage(`{"status":"completed","output":"done","exitCode":0,"sessionId":"sh_1"}`), nil
		}
		return json.RawMessage(`{"status":"failed","output":"","error":"unknown command","exitCode":127}`), nil
	case "fs.read":
		if a["path"] == "package.json" {
			return json.RawMessage(`{"ok":true,"content":"{\"name\":\"gsv\"}"}`), nil
		}
		return nil, fmt.Errorf("fs.read: %v: no such file", a["path"])
	case "fs.write", "fs.edit", "fs.delete", "fs.search":
		return json.Marshal(map[string]any{"ok": true, "call": name, "args": a})
	}
	return nil, fmt.Errorf("%s: unknown", name)
}

func TestNestedCalls(t *testing.T) {
	f := &fake{}
	res := run(t, Request{Code: `
const pwd = await shell("pwd");
const packageJson = await fs.read({ path: "package.json" });
return { pwd: pwd.output, packageJson: packageJson.content };`}, f.call)
	completed(t, res, `{"pwd":"/home/alice\n","packageJson":"{\"name\":\"gsv\"}"}`)

	// The seed's polling loop.
	res = run(t, Request{Code: `
let res = await shell("npm run test", { cwd: "/workspace/gsv/gateway" });
let output = res.output;
while (res.status === "running") {
  res = await shell("", { sessionId: res.sessionId });
  output += res.output;
}
if (res.status === "failed") {
  throw new Error(res.error + "\n" + output);
}
return { exitCode: res.exitCode, output };`}, f.call)
	completed(t, res, `{"exitCode":0,"output":"start tick tick done"}`)

	// A failing nested call throws in the block, which may catch it.
	res = run(t, Request{Code: `try { await fs.read({path: "nope"}) } catch (e) { return e.message }`}, f.call)
	completed(t, res, `"fs.read: nope: no such file"`)
	failedWith(t, run(t, Request{Code: `await fs.read({path: "nope"})`}, f.call), "no such file")

	// Every wrapper passes its args through.
	res = run(t, Request{Code: `return [await fs.write({path:"a", content:"x"}), await fs.edit({path:"a"}), await fs.delete({path:"a"}), await fs.search({query:"q"})].map(r => r.call)`}, f.call)
	completed(t, res, `["fs.write","fs.edit","fs.delete","fs.search"]`)

	var got json.RawMessage
	capture := func(_ context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		got = args
		return json.RawMessage(`{"status":"completed","output":"","exitCode":0}`), nil
	}
	run(t, Request{Code: `return await shell("ls", {target: "laptop", cwd: "~/src", timeoutMs: 5, other: 1})`}, capture)
	if string(got) != `{"input":"ls","target":"laptop","cwd":"~/src","timeoutMs":5}` {
		t.Fatalf("shell args %s", got)
	}
}

// A nested call that outlives the wall time is cancelled, and the run
// fails with the time limit.
func TestNestedCallTimeLimit(t *testing.T) {
	slow := func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := time.Now()
	res := run(t, Request{Code: `try { await shell("sleep") } catch (e) {} while (true) {}`, Limits: Limits{Wall: 300 * time.Millisecond}}, slow)
	failedWith(t, res, "time limit exceeded")
	if d := time.Since(start); d > liveness {
		t.Errorf("took %v", d)
	}
}

func TestAbort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, self(t), Request{Code: "while (true) {}", Limits: Limits{Wall: 10 * time.Minute}}, noCalls)
	if err != nil {
		t.Fatal(err)
	}
	failedWith(t, res, "aborted")
	if d := time.Since(start); d > liveness {
		t.Errorf("took %v", d)
	}
}

func TestBadWorkers(t *testing.T) {
	ctx := context.Background()
	if _, err := Run(ctx, []string{"/nonexistent/worker"}, Request{Code: "return 1"}, noCalls); err == nil {
		t.Fatal("no error for a missing worker")
	}
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"/bin/sh", "-c", "echo garbage"}, "not the protocol"},
		{[]string{"/bin/sh", "-c", "echo oops >&2; exit 7"}, "exit status 7: oops"},
		{[]string{"/bin/sh", "-c", "kill -SEGV $$"}, "died"},
		{[]string{"/bin/sh", "-c", `echo '{"done":{"status":"completed"}}'`}, "does not say it is ready"},
		{[]string{"/bin/sh", "-c", `echo '{"ready":true}'; echo '{"done":{"status":"weird"}}'`}, "weird"},
		{[]string{"/bin/sh", "-c", `echo '{"ready":true}'; echo '{"id":1}'; sleep 5`}, "unknown message"},
		{[]string{"/bin/sh", "-c", `echo '{"ready":true}'; echo garbage`}, "not the protocol"},
	} {
		res, err := Run(ctx, c.argv, Request{Code: "return 1", Limits: Limits{Wall: time.Second}}, func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		failedWith(t, res, c.want)
	}
	// A worker that never answers is killed at the wall time.
	start := time.Now()
	res, err := Run(ctx, []string{"/bin/sh", "-c", `echo '{"ready":true}'; exec sleep 600`}, Request{Limits: Limits{Wall: 200 * time.Millisecond}}, noCalls)
	if err != nil {
		t.Fatal(err)
	}
	failedWith(t, res, "time limit exceeded")
	if d := time.Since(start); d > liveness {
		t.Errorf("took %v", d)
	}
}

// A block's result is at most MaxResult bytes of JSON, a nested call's
// args MaxCallArgs, a log line maxLogLine and an error maxErrorText: past
// them the run fails, the call throws, the text is cut. (On main a block
// could return 44 MB, and 8 at once took the daemon to 1.28 GB.)
func TestResultBounds(t *testing.T) {
	failedWith(t, run(t, Request{Code: `return "a".repeat(2 << 20)`}, nil), "result too large: 2097154 bytes as JSON")
	failedWith(t, run(t, Request{Code: `return "a".repeat(20e6)`}, nil), "result too large")
	failedWith(t, run(t, Request{Code: `return Array.from({length: 300000}, (_, i) => i)`}, nil), "result too large")
	res := run(t, Request{Code: `return "a".repeat((1 << 20) - 2)`}, nil)
	if res.Status != StatusCompleted || len(res.Result) != MaxResult {
		t.Fatalf("a result of exactly MaxResult bytes: %s, %d bytes", res.Status, len(res.Result))
	}
	calls := 0
	call := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		calls++
		return json.RawMessage(`{"ok":true}`), nil
	}
	res = run(t, Request{Code: `try { await fs.write({path: "x", content: "a".repeat(5 << 20)}) } catch (e) { return e.message }`}, call)
	completed(t, res, `"fs.write: arguments too large: 5242905 bytes as JSON (at most 4194304)"`)
	if calls != 0 {
		t.Errorf("a call with too large args was made")
	}
	res = run(t, Request{Code: `console.log("\u0001".repeat(3 << 20)); console.log("after"); return 1`}, nil)
	completed(t, res, "1")
	if len(res.Logs) != 2 || len(res.Logs[0]) > maxLogLine || !strings.HasSuffix(res.Logs[0], "… (cut)") || res.Logs[1] != "after" {
		t.Errorf("a 3 MiB log line: %d lines, the first %d bytes", len(res.Logs), len(res.Logs[0]))
	}
	res = run(t, Request{Code: `throw new Error("x".repeat(3 << 20))`}, nil)
	failedWith(t, res, "Error: xxx")
	if len(res.Error) > maxErrorText {
		t.Errorf("an error of %d bytes", len(res.Error))
	}
	alive(t)
}

// A worker that breaks the bounds (a rogue or broken one: the block
// cannot) is stopped as soon as a line passes maxLine, before the parent
// holds more of it; a result over MaxResult is refused whoever sent it.
func TestRogueWorkerBounds(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		script, want string
	}{
		// 200 MB without a newline: read up to the bound, then stopped.
		{`echo '{"ready":true}'; read req; head -c 200000000 /dev/zero | tr '\0' a; echo`, "sent a line over"},
		{`echo '{"ready":true}'; read req; printf '{"log":"%s"}\n' "$(head -c 6000000 /dev/zero | tr '\0' a)"`, "sent a line over"},
		{`echo '{"ready":true}'; read req; printf '{"done":{"status":"completed","result":"%s"}}\n' "$(head -c 2000000 /dev/zero | tr '\0' a)"`, "result too large: 2000002 bytes"},
	} {
		start := time.Now()
		res, err := Run(ctx, []string{"/bin/sh", "-c", c.script}, Request{Code: "return 1", Limits: Limits{Wall: 60 * time.Second}}, noCalls)
		if err != nil {
			t.Fatal(err)
		}
		failedWith(t, res, c.want)
		if d := time.Since(start); d > 50*time.Second {
			t.Errorf("the run took %v: the parent read on past the bound", d)
		}
	}
}

// FuzzRun feeds random code to workers under short limits: every run ends
// with a Result, and the parent lives on.
func FuzzRun(f *testing.F) {
	for _, s := range []string{
		"return 1", "while(1){}", "throw 1", "return await shell('pwd')",
		"function f(){f()} f()", "let a=[];for(;;)a.push('xxxxxxxx'+a.length)",
		"return new Proxy({}, {get(){ throw 1 }})", "await fs.read(); return {a:[1,{b:null}]}",
		"return JSON.parse('{')", "Object.prototype.toJSON = () => { throw 2 }; return {}",
		"console.log(Symbol())", "return [].constructor.constructor('return this')()",
		"globalThis.JSON = null; return 1", "Promise.prototype.then = null; return 1",
		"return 'a'.repeat(1<<21)", "throw 'x'.repeat(1<<20)", "console.log('y'.repeat(1<<20))",
	} {
		f.Add(s)
	}
	exe, err := os.Executable()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, code string) {
		call := func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"status":"completed","output":"","exitCode":0}`), nil
		}
		res, err := Run(context.Background(), []string{exe}, Request{Code: code, Limits: Limits{Wall: 500 * time.Millisecond, MemoryBytes: 8 << 20}}, call)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusCompleted && res.Status != StatusFailed {
			t.Fatalf("status %q", res.Status)
		}
		if res.Status == StatusCompleted && !json.Valid(res.Result) {
			t.Fatalf("result %q is not JSON", res.Result)
		}
		if len(res.Result) > MaxResult || len(res.Error) > maxErrorText {
			t.Fatalf("a result of %d bytes, an error of %d", len(res.Result), len(res.Error))
		}
	})
}

// A worker started by root runs as nobody, with no way back.
func TestWorkerDropsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	res, err := Run(context.Background(), self(t), Request{Code: `return 1`}, noCalls)
	if err != nil || res.Status != "completed" {
		t.Fatalf("a run as nobody: %+v %v", res, err)
	}
	cmd := exec.Command(self(t)[0])
	cmd.Env = []string{"CODEMODE_TEST_WHOAMI=1"}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "65534 65534 []" {
		t.Fatalf("the worker's credentials after the drop: %q %v", out, err)
	}
}

// A Runner keeps workers started ahead: runs after the first take them,
// each run gets a fresh one, and Close kills those waiting.
func TestRunner(t *testing.T) {
	r := NewRunner(self(t), nil)
	ctx := context.Background()
	pids := map[string]bool{}
	for i := 0; i < 4; i++ {
		// Each worker is its own process: a global set by one run is
		// not seen by the next.
		res, err := r.Run(ctx, Request{Code: `const seen = globalThis.mark; globalThis.mark = 1; return [seen === undefined, await shell("pid")]`}, func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"status":"completed","output":"","exitCode":0}`), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		completed(t, res, `[true,{"status":"completed","output":"","exitCode":0}]`)
	}
	// The warm workers are there: processes of this binary, children of this one.
	deadline := time.Now().Add(liveness)
	for len(pids) == 0 && time.Now().Before(deadline) {
		pids = childWorkers(t)
		time.Sleep(20 * time.Millisecond)
	}
	// The worker of the last run, killed, may still be on its way out
	// (its exit runs at a worker's priority): wait for exactly the warm
	// ones.
	for deadline := time.Now().Add(liveness); len(pids) != warmWorkers && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		pids = childWorkers(t)
	}
	if len(pids) != warmWorkers {
		t.Fatalf("warm workers %v, want %d", pids, warmWorkers)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if left := childWorkers(t); len(left) != 0 {
		t.Fatalf("workers left after Close: %v", left)
	}
	if _, err := r.Run(ctx, Request{Code: "return 1"}, noCalls); err == nil {
		t.Fatal("Run after Close did not fail")
	}
}

// A warm worker that died while it waited is replaced by a fresh one.
func TestRunnerDeadWarmWorker(t *testing.T) {
	r := NewRunner(self(t), nil)
	defer r.Close()
	ctx := context.Background()
	completed(t, mustRun(t, r, "return 1"), "1")
	var pids map[string]bool
	for deadline := time.Now().Add(liveness); len(pids) == 0 && time.Now().Before(deadline); {
		pids = childWorkers(t)
		time.Sleep(20 * time.Millisecond)
	}
	for pid := range pids {
		// The worker of the run, killed, may be gone already (ESRCH).
		n, _ := strconv.Atoi(pid)
		if err := syscall.Kill(n, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(liveness); ; time.Sleep(10 * time.Millisecond) {
		left := childWorkers(t)
		dead := true
		for pid := range pids {
			dead = dead && !left[pid]
		}
		if dead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers %v outlived kill -9: %v", pids, left)
		}
	}
	res, err := r.Run(ctx, Request{Code: "return 2"}, noCalls)
	if err != nil {
		t.Fatal(err)
	}
	completed(t, res, "2")
}

func mustRun(t *testing.T, r *Runner, code string) *Result {
	t.Helper()
	res, err := r.Run(context.Background(), Request{Code: code}, noCalls)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// childWorkers are the pids of this process's children that are workers
// (alive, not zombies).
func childWorkers(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command("ps", "-o", "pid=,stat=", "--ppid", fmt.Sprint(os.Getpid())).Output()
	pids := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && !strings.HasPrefix(f[1], "Z") {
			if b, err := os.ReadFile("/proc/" + f[0] + "/environ"); err == nil && strings.Contains(string(b), WorkerEnv+"=1") {
				pids[f[0]] = true
			}
		}
	}
	return pids
}

// A nested call that holds the clock (waiting for a human) may outlast
// the wall time; the run goes on with the time it had left, and is still
// bounded after.
func TestHold(t *testing.T) {
	held := func(ctx context.Context, name string, _ json.RawMessage) (json.RawMessage, error) {
		release := Hold(ctx)
		defer release()
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage(`{"status":"completed","output":"approved","exitCode":0}`), nil
	}
	// (The block's own work must fit in its wall time at load 10: 1 s.)
	res := run(t, Request{Code: `const r = await shell("x"); let n = 0; for (let i = 0; i < 1e3; i++) n++; return r.output`, Limits: Limits{Wall: time.Second}}, held)
	completed(t, res, `"approved"`)
	start := time.Now()
	res = run(t, Request{Code: `await shell("x"); while (true) {}`, Limits: Limits{Wall: time.Second}}, held)
	failedWith(t, res, "time limit exceeded")
	if d := time.Since(start); d < 2500*time.Millisecond || d > liveness {
		t.Errorf("a run held 2s with a 1s wall took %v", d)
	}
	// Without a hold, the same wait is past the wall time.
	res = run(t, Request{Code: `return await shell("x")`, Limits: Limits{Wall: time.Second}}, func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		select {
		case <-time.After(2 * time.Second):
			return json.RawMessage(`{}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	failedWith(t, res, "time limit exceeded")
}
