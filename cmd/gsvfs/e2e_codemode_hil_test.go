package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codeModeHilScript: the agent runs a CodeMode block whose shell call
// needs approval.
const codeModeHilScript = `
{"tools":[{"name":"CodeMode","args":{"code":"const r = await shell(\"echo from-the-block > e2e-block.txt && cat e2e-block.txt\"); return r.output.trim()","timeoutMs":3000}}],"expectUser":"block please"}
{"text":"block done"}
`

// A Shell call inside the agent's CodeMode block that needs approval
// waits for it as a direct call does: the run shows the pending request
// (the process's hil file, gsv run), a person approves it with gsv hil,
// and the block goes on, its wall time not spent by the wait.
func TestE2ECodeModeApproval(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/cm-hil.jsonl"), []byte(codeModeHilScript), 0o644); err != nil {
		t.Fatal(err)
	}
	M := d.mnt
	run := func(sh string, args ...string) string { t.Helper(); return d.mustSh(t, sh, args...) }
	read := d.cat
	gsv := func(args ...string) string { t.Helper(); return d.mustGsv(t, args...) }
	run(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo "set config/ai/script /home/root/cm-hil.jsonl" > "$1/sys/config/ctl"`, M)
	pid := strings.TrimSpace(run(`exec 3<>"$1/proc/clone"; echo 'spawn task label=cmhil' >&3; read pid <&3; echo "$pid"`, M))
	P := M + "/proc/" + pid
	run(`echo 'block please' > "$1/conversations/default/in"`, P)

	reqID, tool := epWaitHil(t, read, P)
	var req struct {
		CallID string          `json:"callId"`
		Args   json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal([]byte(run(`cat "$1/hil"`, P)), &req); err != nil || tool != "Shell" || !strings.Contains(req.CallID, "/codemode/1") || !strings.Contains(string(req.Args), "from-the-block") {
		t.Fatalf("the block's request: tool %q %+v (%v)", tool, req, err)
	}
	if out := gsv("run", pid); !strings.Contains(out, "waiting-hil") || !strings.Contains(out, "approval:") || !strings.Contains(out, reqID) || !strings.Contains(out, "from-the-block") {
		t.Fatalf("gsv run while the block waits: %q", out)
	}
	if r := d.sh(`test -e "$1/home/root/e2e-block.txt"`, M); r.code == 0 {
		t.Fatal("the call ran before its approval")
	}
	// The wait outlasts the block's 3 s wall time (what the block does
	// itself must fit in it at load 10).
	if out := run(`sleep 3.5; echo x`); out != "x\n" {
		t.Fatal(out)
	}
	if out := gsv("hil", "--pid", pid, "approve", reqID); !strings.Contains(out, "approve") {
		t.Fatalf("gsv hil approve: %q", out)
	}
	epWaitIdle(t, read, P)
	if got := run(`cat "$1/home/root/e2e-block.txt"`, M); got != "from-the-block\n" {
		t.Fatalf("e2e-block.txt %q", got)
	}
	h := epHistory(t, run(`cat "$1/conversations/default/history"`, P))
	var result string
	for i := len(h) - 1; i >= 0 && result == ""; i-- {
		if h[i].Role == "toolResult" {
			result = h[i].text()
		}
	}
	if !strings.Contains(result, `"status":"completed"`) || !strings.Contains(result, `"result":"from-the-block"`) {
		t.Fatalf("the CodeMode tool's result: %q", result)
	}
}
