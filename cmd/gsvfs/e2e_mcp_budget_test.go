package main_test

// MCP calls against a run's budget (issue 23): an agent's MCP call may
// take at most the time its run's budget has left, and a call made when
// the budget is spent is refused with the budget's error.

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestE2EMcpBudget(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(0, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %v: %v", args, r)
		}
		return r.stdout
	}
	bin, err := mcpTestServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.base, "mcpbin")
	if err := copyMCPServer(bin, dir); err != nil {
		t.Fatal(err)
	}
	gsv("mcp", "add", "t", "--network", "none", "--mount", dir+":/opt/mcp:ro", "--", "/opt/mcp/gsv-mcp-testserver")

	// A time budget of 20 s; the agent asks for a sleep of 10 minutes.
	pid := strings.TrimSpace(gsv("spawn", "task", "--label", "mcpbudget", "--budget", "time=20s,on-exhaust=pause"))
	P := d.mnt + "/proc/" + pid
	waitRun := func(want ...string) string {
		t.Helper()
		var last string
		for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			last = d.mustSh(t, `cat "$1/run"`, P)
			for _, w := range want {
				if strings.Contains(last, w) {
					return last
				}
			}
		}
		t.Fatalf("/proc/%s/run never showed %q:\n%s", pid, want, last)
		return ""
	}
	d.mustSh(t, `printf '%s\n' 'sleep long:' 'use Mcp {"server":"t","tool":"sleep","arguments":{"seconds":600}}' > "$1/conversations/default/in"`, P)
	waitRun(`"state": "waiting-hil"`)
	var req struct {
		RequestID string `json:"requestId"`
	}
	if err := json.Unmarshal([]byte(d.mustSh(t, `cat "$1/hil"`, P)), &req); err != nil {
		t.Fatal(err)
	}
	d.mustSh(t, `echo "hil approve $2" > "$1/ctl"`, P, req.RequestID)
	// The call ends within the budget's time (or, on a machine so slow
	// that the approval took it all, is refused), not after 10 minutes;
	// the run then parks on its budget.
	waitRun(`"reason": "budget"`, `"state": "completed"`)
	tr := d.mustSh(t, `cat "$1/conversations/default/transcript"`, P)
	if strings.Contains(tr, "slept") || !(strings.Contains(tr, "its process's budget had left") || strings.Contains(tr, "budget is spent (time)")) {
		t.Fatalf("the sleep was not bound by the budget:\n%s", tr)
	}
}
