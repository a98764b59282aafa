package proc

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// TestMain makes the test binary its own CodeMode worker.
func TestMain(m *testing.M) {
	if os.Getenv(codemode.WorkerEnv) == "1" {
		os.Exit(codemode.WorkerMain())
	}
	os.Exit(m.Run())
}

// codeModeWorker is the argv of the test binary as a CodeMode worker.
func codeModeWorker(t testing.TB) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}
}

func cmResult(t *testing.T, res any, err error) *abi.CodeModeResult {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(*abi.CodeModeResult)
	if !ok {
		t.Fatalf("result %T", res)
	}
	return r
}

// codemode.run runs as the caller's init; its fs calls are the process's.
func TestCodeModeRun(t *testing.T) {
	h := newPTHarness(t)
	ctx := context.Background()
	alice := &kernel.Caller{Identity: h.alice}
	res, err := h.k.Call(ctx, alice, "codemode.run", json.RawMessage(`{"code":"await fs.write({path: \"~/cm.txt\", content: \"hi\"}); const f = await fs.read({path: \"~/cm.txt\"}); console.log(f.path); return {c: f.content, argv, args}","argv":["a"],"args":{"k":"v"}}`))
	r := cmResult(t, res, err)
	if r.Status != "completed" || !strings.Contains(string(r.Result), "hi") || !strings.Contains(string(r.Result), `"argv":["a"],"args":{"k":"v"}`) {
		t.Fatalf("%+v %s", r, r.Result)
	}
	// Bob may not run as alice's init.
	bob := &kernel.Caller{Identity: h.bob}
	if _, err := h.k.Call(ctx, bob, "codemode.run", json.RawMessage(`{"pid":"init:1000","code":"return 1"}`)); abi.Code(err) != 404 {
		t.Fatalf("bob as alice's init: %v", err)
	}
	// Only shell and fs calls leave a block, and the strict args hold.
	res, err = h.k.Call(ctx, alice, "codemode.run", json.RawMessage(`{"code":"return await fs.read({path: \"~\", bogus: 1})"}`))
	if r := cmResult(t, res, err); r.Status != "failed" || !strings.Contains(r.Error, "bogus") {
		t.Fatalf("strict args: %+v", r)
	}
	// codemode.exec is no frame's.
	if _, err := h.k.Call(ctx, alice, "codemode.exec", json.RawMessage(`{"code":"return 1"}`)); abi.Code(err) != 400 {
		t.Fatalf("codemode.exec by frame: %v", err)
	}
}

// codemode.exec (the CodeMode tool) holds the approval policy: a nested
// call that needs approval runs only if the process remembers it.
func TestCodeModeExecApproval(t *testing.T) {
	h := newPTHarness(t)
	ctx := context.Background()
	id := *h.alice
	id.Pid = "init:1000"
	proc := &kernel.Caller{Identity: &id}
	res, err := h.k.Call(ctx, proc, "codemode.exec", &abi.CodeModeExecArgs{Code: `await fs.write({path: "~/d.txt", content: "x"}); return await fs.delete({path: "~/d.txt"})`})
	if r := cmResult(t, res, err); r.Status != "failed" || !strings.Contains(r.Error, `needs approval: approve "fs.delete"`) {
		t.Fatalf("without approval: %+v", r)
	}
	if _, err := h.m.st.Exec(ctx, `UPDATE proc_processes SET hil_allow='["fs.delete"]' WHERE pid='init:1000'`); err != nil {
		t.Fatal(err)
	}
	res, err = h.k.Call(ctx, proc, "codemode.exec", &abi.CodeModeExecArgs{Code: `return await fs.delete({path: "~/d.txt"})`})
	if r := cmResult(t, res, err); r.Status != "completed" {
		t.Fatalf("with approval: %+v", r)
	}
	// A user (no pid) may not make the process's own call.
	alice := &kernel.Caller{Identity: h.alice}
	if _, err := h.k.Call(ctx, alice, "codemode.exec", &abi.CodeModeExecArgs{Code: "return 1"}); abi.Code(err) != 403 {
		t.Fatalf("codemode.exec by a user: %v", err)
	}
}

// pendingNot waits for pid's pending HIL request other than not, and
// returns it.
func (h *ptHarness) pendingNot(pid, not string) *abi.HilRequest {
	h.t.Helper()
	var req *abi.HilRequest
	eventually(h.t, func() bool {
		req = h.history(h.root, pid, "default").PendingHil
		return req != nil && req.RequestID != not
	}, func() string { return pid + ": no new pending HIL request" })
	return req
}

// A nested call of the CodeMode tool that needs approval waits for it,
// as a direct tool call does: the run waits on a request shown with the
// tool's name, the block's wall clock stops meanwhile, and the answer
// (approve, edited args, deny, substitute) decides the call in the block.
func TestCodeModeApprovalWaits(t *testing.T) {
	h := newPTHarness(t)
	code := `const out = [];
const r = await shell("echo from-block > blk.txt && cat blk.txt");
out.push(r.output.trim());
try { await shell("echo no > no.txt") } catch (e) { out.push(e.message) }
out.push((await shell("echo original")).output.trim());
out.push(await shell("echo substituted"));
return out`
	args, _ := json.Marshal(map[string]any{"code": code, "timeoutMs": 3000}) // what the block does itself fits in 3 s at load 10
	s := h.scriptOf(0, `{"tools":[{"name":"CodeMode","args":`+string(args)+`}],"expectUser":"go"}`+"\n"+`{"text":"done"}`)
	pid := h.spawn(h.root, "cm-hil")
	run := h.send(h.root, pid, "", "go")
	h.waitRun(run.RunID, "waiting_hil")

	// 1: approved, after the block's 3 s wall time has passed.
	req := h.pendingNot(pid, "")
	if req.ToolName != "Shell" || req.Syscall != "shell.exec" || req.RunID != run.RunID || !strings.Contains(req.CallID, "/codemode/1") ||
		!strings.Contains(string(req.Args), "from-block") {
		t.Fatalf("the block's request: %+v", req)
	}
	time.Sleep(3500 * time.Millisecond)
	if err := h.call(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}, nil); err != nil {
		t.Fatal(err)
	}
	// 2: denied by a ctl line; the block catches the refusal.
	req2 := h.pendingNot(pid, req.RequestID)
	if !strings.Contains(req2.CallID, "/codemode/2") {
		t.Fatalf("second request: %+v", req2)
	}
	if err := h.writeFile(h.root, "/proc/"+pid+"/ctl", "hil deny "+req2.RequestID+"\n"); err != nil {
		t.Fatal(err)
	}
	// 3: approved with edited args.
	req3 := h.pendingNot(pid, req2.RequestID)
	if err := h.call(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req3.RequestID, "decision": "approve",
		"args": map[string]any{"command": "echo edited"}}, nil); err != nil {
		t.Fatal(err)
	}
	// 4: substituted: the call resolves to the human's text, unrun.
	req4 := h.pendingNot(pid, req3.RequestID)
	if err := h.call(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req4.RequestID, "decision": "substitute", "result": "not now"}, nil); err != nil {
		t.Fatal(err)
	}
	if st := h.waitRun(run.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	msg := lastToolMessage(t, s)
	var res abi.CodeModeResult
	if err := json.Unmarshal([]byte(msg.Content), &res); err != nil {
		t.Fatalf("tool result %q: %v", msg.Content, err)
	}
	if res.Status != "completed" || string(res.Result) != `["from-block","shell.exec: Tool execution denied by user","edited","not now"]` {
		t.Fatalf("the block: %+v %s", res, res.Result)
	}
	if _, err := os.Stat(h.dir + "/fs/home/root/no.txt"); err == nil {
		t.Error("the denied command ran")
	}
}

// A run aborted while its block waits for an approval ends at once; the
// request is stale.
func TestCodeModeApprovalAbort(t *testing.T) {
	h := newPTHarness(t)
	h.scriptOf(0, `{"tools":[{"name":"CodeMode","args":{"code":"return await shell(\"echo never\")"}}],"expectUser":"go"}`+"\n"+`{"text":"done"}`)
	pid := h.spawn(h.root, "cm-abort")
	run := h.send(h.root, pid, "", "go")
	h.waitRun(run.RunID, "waiting_hil")
	req := h.pendingNot(pid, "")
	if err := h.call(h.root, "proc.abort", map[string]any{"pid": pid}, nil); err != nil {
		t.Fatal(err)
	}
	if st := h.waitRun(run.RunID); st != "aborted" {
		t.Fatalf("run %s", st)
	}
	var status string
	if err := h.m.st.QueryRowContext(context.Background(), `SELECT status FROM proc_hil WHERE request_id=?`, req.RequestID).Scan(&status); err != nil || status != "stale" {
		t.Fatalf("request %s: %q %v", req.RequestID, status, err)
	}
	if err := h.call(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}, nil); abi.Code(err) != 404 {
		t.Fatalf("answering a stale request: %v", err)
	}
}

// A user runs at most Options.CodeModeBlocks blocks at once: one more is
// refused at once (409), another user's is not, and the user's next block
// after one ends runs.
func TestCodeModeBlocksPerUser(t *testing.T) {
	h := startPT(&ptHarness{t: t, dir: t.TempDir(), provs: map[uint32]model.Provider{}, codeModeBlocks: 2})
	ctx := context.Background()
	alice := &kernel.Caller{Identity: h.alice}
	// Each block waits until ~/go.txt exists.
	wait := `while (true) { const f = await fs.read({path: "~/go.txt"}); if (f.ok) return f.content }`
	results := make(chan *abi.CodeModeResult, 2)
	for range 2 {
		go func() {
			res, err := kernel.Do(ctx, h.k, alice, abi.CodemodeRun, &abi.CodeModeRunArgs{Code: wait, TimeoutMs: 20_000})
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	eventually(t, func() bool {
		h.m.run.blockMu.Lock()
		defer h.m.run.blockMu.Unlock()
		return h.m.run.blockRuns[h.alice.Uid] == 2
	}, func() string { return "alice's two blocks are not both running" })
	if _, err := kernel.Do(ctx, h.k, alice, abi.CodemodeRun, &abi.CodeModeRunArgs{Code: "return 1"}); abi.Code(err) != 409 || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("a third block of alice: %v", err)
	}
	bob := &kernel.Caller{Identity: h.bob}
	if res, err := kernel.Do(ctx, h.k, bob, abi.CodemodeRun, &abi.CodeModeRunArgs{Code: "return 1"}); err != nil || res.Status != "completed" {
		t.Fatalf("bob's block: %+v %v", res, err)
	}
	if _, err := kernel.Do(ctx, h.k, alice, abi.FsWrite, &abi.FSWriteArgs{Path: "~/go.txt", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := <-results; r == nil || r.Status != "completed" || !strings.Contains(string(r.Result), "go") {
			t.Fatalf("a waiting block: %+v", r)
		}
	}
	if res, err := kernel.Do(ctx, h.k, alice, abi.CodemodeRun, &abi.CodeModeRunArgs{Code: "return 1"}); err != nil || res.Status != "completed" {
		t.Fatalf("alice's block after hers ended: %+v %v", res, err)
	}
}

// TestCodeModeArgsRaw: a block's fs.read is raw unless it says otherwise;
// other calls' args pass as they are.
func TestCodeModeArgsRaw(t *testing.T) {
	for _, c := range []struct {
		name, args, target string
		raw                any // the decoded args' raw: true, false, or nil for none
	}{
		{"fs.read", `{"path":"~/a"}`, "", true},
		{"fs.read", `{}`, "", true},
		{"fs.read", ` { } `, "", true},
		{"fs.read", `{"path":"~/a","raw":false}`, "", false},
		{"fs.read", `{"path":"~/raw"}`, "", true},
		{"fs.read", `{"path":"~/a"}`, "laptop", true},
		{"fs.write", `{"path":"~/a","content":"x"}`, "", nil},
	} {
		got, err := codeModeArgs(c.name, json.RawMessage(c.args), c.target, "")
		if err != nil {
			t.Fatalf("%s %s: %v", c.name, c.args, err)
		}
		var a map[string]any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("%s %s: %q is not JSON: %v", c.name, c.args, got, err)
		}
		if a["raw"] != c.raw {
			t.Errorf("%s %s: %s, want raw %v", c.name, c.args, got, c.raw)
		}
		if c.target != "" && a["target"] != c.target {
			t.Errorf("%s %s: %s, want target %s", c.name, c.args, got, c.target)
		}
	}
}
