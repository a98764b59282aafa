package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Runs can be tried without a key: with the default (offline) model, a
// message's "use <Tool> <json>" lines are a step each, so a run parks at
// a budget checkpoint, waits on an approval, and takes a directive, all
// through the mount (docs/processes.md, "The offline model").
func TestE2EOfflineSteps(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	M := d.mnt
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(0, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %v: %v", args, r)
		}
		return r.stdout
	}
	if got := d.mustSh(t, `cat "$1/sys/config/config/ai/provider"`, M); strings.TrimSpace(got) != "offline" {
		t.Fatalf("the default provider is %q, want offline", got)
	}
	notes := filepath.Join(d.state, "fs/home/root/notes.txt")
	d.mustSh(t, `echo 'hello notes' > "$1/home/root/notes.txt"`, M)

	pid := strings.TrimSpace(gsv("spawn", "task", "--label", "tryout", "--budget", "turns=1"))
	P := M + "/proc/" + pid
	waitRun := func(want string) string {
		t.Helper()
		var last string
		for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			last = d.mustSh(t, `cat "$1/run"`, P)
			if strings.Contains(last, want) {
				return last
			}
		}
		t.Fatalf("/proc/%s/run never showed %q:\n%s", pid, want, last)
		return ""
	}

	// Two steps: a Read, then a Delete (which asks first). The budget of
	// one model call parks the run at the checkpoint after the Read.
	d.mustSh(t, `printf '%s\n' 'read, then delete:' 'use Read {"path":"~/notes.txt"}' 'use Delete {"path":"~/notes.txt"}' > "$1/conversations/default/in"`, P)
	run := waitRun(`"state": "paused"`)
	if !strings.Contains(run, `"reason": "budget"`) {
		t.Fatalf("the parked run:\n%s", run)
	}
	if _, err := os.Stat(notes); err != nil {
		t.Fatalf("notes.txt before the approval: %v", err)
	}
	d.mustSh(t, `echo 'continue extend-budget turns=5' > "$1/ctl"`, P)

	// The Delete waits for a human.
	waitRun(`"state": "waiting-hil"`)
	var req struct {
		RequestID string          `json:"requestId"`
		Syscall   string          `json:"syscall"`
		ToolName  string          `json:"toolName"`
		Args      json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal([]byte(d.mustSh(t, `cat "$1/hil"`, P)), &req); err != nil {
		t.Fatal(err)
	}
	if req.ToolName != "Delete" || req.Syscall != "fs.delete" || !strings.Contains(string(req.Args), "notes.txt") {
		t.Fatalf("the request: %+v", req)
	}
	if _, err := os.Stat(notes); err != nil {
		t.Fatalf("notes.txt before the approval: %v", err)
	}
	d.mustSh(t, `echo "hil approve $2" > "$1/ctl"`, P, req.RequestID)
	waitRun(`"state": "completed"`)
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		t.Fatalf("notes.txt after the approval: %v", err)
	}
	tr := d.mustSh(t, `cat "$1/conversations/default/transcript"`, P)
	for _, want := range []string{"step 1 of 2: Read", "step 2 of 2: Delete", "You said: read, then delete:", "Read: ", "hello notes", "Delete: "} {
		if !strings.Contains(tr, want) {
			t.Fatalf("the transcript lacks %q:\n%s", want, tr)
		}
	}

	// A supervised checkpoint takes a directive: the refocus message is
	// the new last message, which the offline model answers.
	gsv("supervise", pid, "--grace", "10m")
	d.mustSh(t, `echo 'use Read {"path":"~"}' > "$1/conversations/default/in"`, P)
	run = waitRun(`"state": "awaiting-decision"`)
	if !strings.Contains(run, `"reason": "supervised"`) {
		t.Fatalf("the supervised run:\n%s", run)
	}
	if out := gsv("continue", pid, "--refocus", "look at the cache table"); !strings.Contains(out, "delivered") {
		t.Fatalf("gsv continue: %q", out)
	}
	waitRun(`"state": "completed"`)
	if h := gsv("history", "--pid", pid, "--limit", "1"); !strings.Contains(h, "You said: [Process Event]: Refocus: look at the cache table") {
		t.Fatalf("the last answer:\n%s", h)
	}
}
