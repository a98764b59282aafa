package main_test

// Richer HIL answers through the real daemon: an approval with edited
// args written to a process's ctl file on the FUSE mount, and the gsv
// CLI's substitute and approve --args.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hilAnswersScript = `
{"tools":[{"name":"Shell","args":{"command":"echo original > e2e-edit.txt"}}],"expectUser":"edit please"}
{"text":"edited ran"}
{"tools":[{"name":"Shell","args":{"command":"echo ran > e2e-sub.txt"}}],"expectUser":"sub please"}
{"text":"substituted"}
{"tools":[{"name":"Write","args":{"path":"/sys/e2e.txt","content":"x"}}],"expectUser":"cli edit"}
{"text":"cli edited"}
`

func TestE2EProcHilAnswers(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/hil.jsonl"), []byte(hilAnswersScript), 0o644); err != nil {
		t.Fatal(err)
	}
	M := d.mnt
	run := func(sh string, args ...string) string { t.Helper(); return d.mustSh(t, sh, args...) }
	read := d.cat
	gsv := func(args ...string) string { t.Helper(); return d.mustGsv(t, args...) }
	run(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo "set config/ai/script /home/root/hil.jsonl" > "$1/sys/config/ctl"`, M)
	pid := strings.TrimSpace(run(`exec 3<>"$1/proc/clone"; echo 'spawn task label=hil' >&3; read pid <&3; echo "$pid"`, M))
	P := M + "/proc/" + pid
	lastResult := func() string {
		t.Helper()
		h := epHistory(t, run(`cat "$1/conversations/default/history"`, P))
		for i := len(h) - 1; i >= 0; i-- {
			if h[i].Role == "toolResult" {
				return h[i].text()
			}
		}
		t.Fatalf("no tool result: %+v", h)
		return ""
	}

	// Edited args, on a ctl line (JSON with blanks, rc-quoted).
	run(`echo 'edit please' > "$1/conversations/default/in"`, P)
	reqID, _ := epWaitHil(t, read, P)
	var req struct {
		ArgsDigest string `json:"argsDigest"`
		CreatedAt  int64  `json:"createdAt"`
		ExpiresAt  int64  `json:"expiresAt"`
	}
	if err := json.Unmarshal([]byte(run(`cat "$1/hil"`, P)), &req); err != nil || !strings.HasPrefix(req.ArgsDigest, "sha256:") || req.ExpiresAt-req.CreatedAt != 3600_000 {
		t.Fatalf("hil view %+v (%v)", req, err)
	}
	run(`echo "hil approve $2 args='{\"command\": \"echo edited > e2e-edit.txt\"}'" > "$1/ctl"`, P, reqID)
	epWaitIdle(t, read, P)
	if got := run(`cat "$1/home/root/e2e-edit.txt"`, M); got != "edited\n" {
		t.Fatalf("e2e-edit.txt %q", got)
	}
	if r := lastResult(); !strings.HasPrefix(r, `[the user approved this call with edited arguments: {"input":"echo edited > e2e-edit.txt"}]`) {
		t.Fatalf("edited result %q", r)
	}

	// Substitute, by the CLI.
	run(`echo 'sub please' > "$1/conversations/default/in"`, P)
	reqID, _ = epWaitHil(t, read, P)
	if out := gsv("hil", "--pid", pid, "substitute", reqID, "nothing", "to", "do"); !strings.Contains(out, "answered with your text") {
		t.Fatalf("gsv hil substitute: %q", out)
	}
	epWaitIdle(t, read, P)
	if r := lastResult(); r != "nothing to do" {
		t.Fatalf("substituted result %q", r)
	}
	if r := d.sh(`test -e "$1/home/root/e2e-sub.txt"`, M); r.code == 0 {
		t.Fatal("the substituted call ran")
	}

	// Edited args, by the CLI.
	run(`echo 'cli edit' > "$1/conversations/default/in"`, P)
	reqID, _ = epWaitHil(t, read, P)
	if out := gsv("hil", "--pid", pid, "approve", reqID, "--args", `{"path":"~/e2e-cli.txt","content":"from cli"}`); !strings.Contains(out, "approved with edited args") {
		t.Fatalf("gsv hil approve --args: %q", out)
	}
	epWaitIdle(t, read, P)
	if got := run(`cat "$1/home/root/e2e-cli.txt"`, M); got != "from cli" {
		t.Fatalf("e2e-cli.txt %q", got)
	}
}
