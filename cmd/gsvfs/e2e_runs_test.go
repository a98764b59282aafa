package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Deliberable runs end to end with the scripted model: a budget spent
// parks the run (/proc/<pid>/run says so), a continue line on its ctl
// extends it; a supervised run waits at its checkpoint until gsv continue
// refocuses it; the run ends completed.
func TestE2ERuns(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	M := d.mnt
	script := `{"tools":[{"name":"Read","args":{"path":"~"}}]}
{"tools":[{"name":"Read","args":{"path":"~"}}]}
{"text":"done one"}
{"tools":[{"name":"Read","args":{"path":"~"}}]}
{"text":"done two"}
`
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/runs.jsonl"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(r shResult) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		return r.stdout
	}
	must(d.sh(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo 'set config/ai/script ~/runs.jsonl' > "$1/sys/config/ctl"`, M))
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(0, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %v: %v", args, r)
		}
		return r.stdout
	}
	pid := strings.TrimSpace(gsv("spawn", "task", "--label", "worker", "--budget", "turns=1,on-exhaust=pause"))
	P := M + "/proc/" + pid
	waitRun := func(want string) string {
		t.Helper()
		var last string
		for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			last = must(d.sh(`cat "$1/run"`, P))
			if strings.Contains(last, want) {
				return last
			}
		}
		t.Fatalf("/proc/%s/run never showed %q:\n%s", pid, want, last)
		return ""
	}
	must(d.sh(`echo 'send work' > "$1/ctl"`, P))
	run := waitRun(`"state": "paused"`)
	if !strings.Contains(run, `"reason": "budget"`) || !strings.Contains(run, `"turns": 1`) {
		t.Fatalf("the parked run:\n%s", run)
	}
	must(d.sh(`echo 'continue extend-budget turns=5' > "$1/ctl"`, P))
	waitRun(`"state": "completed"`)

	must(d.sh(`echo 'supervise grace=60000' > "$1/ctl"`, P))
	must(d.sh(`echo 'send more work' > "$1/ctl"`, P))
	run = waitRun(`"state": "awaiting-decision"`)
	if !strings.Contains(run, `"reason": "supervised"`) {
		t.Fatalf("the supervised run:\n%s", run)
	}
	if out := gsv("continue", pid, "--refocus", "look at the cache table"); !strings.Contains(out, "delivered") {
		t.Fatalf("gsv continue: %q", out)
	}
	waitRun(`"state": "completed"`)
	if h := must(d.sh(`cat "$1/conversations/default/transcript"`, P)); !strings.Contains(h, "Refocus: look at the cache table") || !strings.Contains(h, "done two") {
		t.Fatalf("the transcript:\n%s", h)
	}
	if out := gsv("run", pid); !strings.Contains(out, "completed") {
		t.Fatalf("gsv run: %q", out)
	}
}
