package proc

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
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
