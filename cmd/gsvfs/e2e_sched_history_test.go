package main_test

// Scheduler and history correctness through the real daemon, as a user
// meets it: a failing shell command through the CLI, compaction and abort
// through the mount's ctl files and event streams, and one-shot and
// out-of-range schedules through gsv sched.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shScript is the scripted model of TestE2ESchedHistory, one line per
// model call in the order the subtests make them.
const shScript = `
{"text":"a1","expectUser":"one"}
{"text":"a2","expectUser":"two"}
{"text":"a3","expectUser":"three"}
{"text":"Reading twice.","tools":[{"name":"Read","args":{"path":"~/notes.txt"}},{"name":"Read","args":{"path":"~/notes.txt"}}],"expectUser":"read it"}
{"text":"Read it twice."}
{"text":"after","expectUser":"and then"}
{"tools":[{"name":"Delete","args":{"path":"~/notes.txt"}}],"expectUser":"delete it"}
`

func TestE2ESchedHistory(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	M := d.mnt
	addr := []string{"GSV_ADDR=unix!" + d.sock}
	run := func(sh string, args ...string) string {
		t.Helper()
		r := d.sh(sh, args...)
		if r.code != 0 {
			t.Fatalf("%s: %v", sh, r)
		}
		return r.stdout
	}
	read := func(p string) (string, error) {
		r := d.sh(`cat "$1"`, p)
		if r.code != 0 {
			return r.stdout, &opError{op: "cat", path: p, msg: r.stderr}
		}
		return r.stdout, nil
	}
	gsv := func(args ...string) shResult {
		t.Helper()
		return gsvAs(0, addr, args...)
	}

	// shell.exec: a non-zero exit is a failure that keeps its output.
	t.Run("ShellExecFailed", func(t *testing.T) {
		r := gsv("call", "shell.exec", `{"input":"echo out; exit 3"}`)
		if r.code != 0 {
			t.Fatalf("gsv call shell.exec: %v", r)
		}
		var res struct {
			Status   string `json:"status"`
			Output   string `json:"output"`
			ExitCode *int   `json:"exitCode"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("gsv call shell.exec: %q: %v", r.stdout, err)
		}
		if res.Status != "failed" || strings.TrimSpace(res.Output) != "out" || res.ExitCode == nil || *res.ExitCode != 3 {
			t.Fatalf("shell.exec of exit 3: %s", r.stdout)
		}
	})

	// A one-shot is disabled with no next time once it has run; enabling
	// it again, and intervals out of range, are 400s.
	t.Run("SchedOneShot", func(t *testing.T) {
		if r := gsv("sched", "add", "--name", "once", "--after", "1s", "--event", "init:0", "hello"); r.code != 0 {
			t.Fatalf("gsv sched add once: %v", r)
		}
		type rec struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
			State   struct {
				NextRunAtMs json.RawMessage `json:"nextRunAtMs"`
				RunCount    int64           `json:"runCount"`
			} `json:"state"`
		}
		var once rec
		deadline := time.Now().Add(liveness)
		for {
			r := gsv("sched", "list", "--all", "--json")
			if r.code != 0 {
				t.Fatalf("gsv sched list: %v", r)
			}
			var l struct {
				Schedules []rec `json:"schedules"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
				t.Fatalf("gsv sched list --json: %q: %v", r.stdout, err)
			}
			for _, s := range l.Schedules {
				if s.Name == "once" {
					once = s
				}
			}
			if once.State.RunCount > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the one-shot did not run: %s", r.stdout)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if once.Enabled || string(once.State.NextRunAtMs) != "null" {
			t.Fatalf("one-shot after its run: %+v (nextRunAtMs %s)", once, once.State.NextRunAtMs)
		}
		if r := gsv("sched", "enable", "once"); r.code != 1 || !strings.Contains(r.stderr, "(400)") {
			t.Fatalf("gsv sched enable of a spent one-shot: %v", r)
		}
		for _, every := range []string{"2000000h", "1ms"} {
			if r := gsv("sched", "add", "--name", "bad", "--every", every, "--event", "init:0", "x"); r.code != 1 || !strings.Contains(r.stderr, "(400)") {
				t.Fatalf("gsv sched add --every %s: %v", every, r)
			}
		}
		// The event's run on init:0 is over before the scripted model is set.
		epWaitIdle(t, read, M+"/proc/init:0")
	})

	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/sh.jsonl"), []byte(shScript), 0o644); err != nil {
		t.Fatal(err)
	}
	run(`echo 'buy milk' > "$1/home/root/notes.txt"`, M)
	run(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo 'set config/ai/script ~/sh.jsonl' > "$1/sys/config/ctl"`, M)
	pid := strings.TrimSpace(run(`exec 3<>"$1/proc/clone"; echo 'spawn task label=hist' >&3; read pid <&3; echo "$pid"`, M))
	P := M + "/proc/" + pid
	type meta struct {
		ID               string `json:"id"`
		FromMessageID    int64  `json:"fromMessageId"`
		SummaryMessageID *int64 `json:"summaryMessageId"`
		Messages         int    `json:"messages"`
	}
	// segment reads the one segment of conversation cid.
	segment := func(cid string) (meta, []epMsg) {
		t.Helper()
		seg := strings.TrimSpace(run(`ls "$1/conversations/$2/segments"`, P, cid))
		if !strings.HasPrefix(seg, "seg_") || strings.Contains(seg, "\n") {
			t.Fatalf("segments of %s: %q", cid, seg)
		}
		var m meta
		if err := json.Unmarshal([]byte(run(`cat "$1/conversations/$2/segments/$3/meta"`, P, cid, seg)), &m); err != nil {
			t.Fatalf("meta of %s: %v", seg, err)
		}
		return m, epHistory(t, run(`cat "$1/conversations/$2/segments/$3/messages"`, P, cid, seg))
	}

	// Compaction: the summary takes the first archived message's id, and
	// through= an assistant message takes its tool results with it.
	t.Run("Compact", func(t *testing.T) {
		run(`echo 'open kc' > "$1/conversations/ctl"`, P)
		for _, s := range []string{"one", "two", "three"} {
			run(`echo "$2" > "$1/conversations/kc/in"`, P, s)
			epWaitIdle(t, read, P)
		}
		before := epHistory(t, run(`cat "$1/conversations/kc/history"`, P))
		if epRoles(before) != "user,assistant,user,assistant,user,assistant" {
			t.Fatalf("kc history %+v", before)
		}
		run(`echo 'compact keep=2 summary=done' > "$1/conversations/kc/ctl"`, P)
		m, msgs := segment("kc")
		if m.Messages != 4 || len(msgs) != 4 || msgs[0].ID != before[0].ID {
			t.Fatalf("kc segment %+v with %+v", m, msgs)
		}
		if m.SummaryMessageID == nil || *m.SummaryMessageID != before[0].ID {
			t.Fatalf("kc segment summaryMessageId %v, want the first archived id %d", m.SummaryMessageID, before[0].ID)
		}

		run(`echo 'open tc' > "$1/conversations/ctl"`, P)
		run(`echo 'read it' > "$1/conversations/tc/in"`, P)
		epWaitIdle(t, read, P)
		run(`echo 'and then' > "$1/conversations/tc/in"`, P)
		epWaitIdle(t, read, P)
		h := epHistory(t, run(`cat "$1/conversations/tc/history"`, P))
		if epRoles(h) != "user,assistant,toolResult,toolResult,assistant,user,assistant" {
			t.Fatalf("tc history %+v", h)
		}
		run(`echo "compact through=$2 summary=s" > "$1/conversations/tc/ctl"`, P, strconv.FormatInt(h[1].ID, 10))
		m, msgs = segment("tc")
		if epRoles(msgs) != "user,assistant,toolResult,toolResult" || m.Messages != 4 || msgs[3].ID != h[3].ID {
			t.Fatalf("compact through the tool-calling assistant archived %s (%+v)", epRoles(msgs), m)
		}
		live := epHistory(t, run(`cat "$1/conversations/tc/history"`, P))
		if epRoles(live) != "system,assistant,user,assistant" {
			t.Fatalf("tc after compact: %s", epRoles(live))
		}
	})

	// An abort while the run waits on an approval is announced as
	// chat.complete, aborted: true, on the process's events.
	t.Run("AbortEvent", func(t *testing.T) {
		events := P + "/events"
		cat := exec.Command("cat", events)
		cat.Dir = d.work
		lines := catStream(t, cat)
		waitOpen(t, cat.Process.Pid, events)
		run(`echo 'delete it' > "$1/conversations/default/in"`, P)
		if _, tool := epWaitHil(t, read, P); tool != "Delete" {
			t.Fatalf("HIL tool %q", tool)
		}
		run(`echo abort > "$1/ctl"`, P)
		for {
			f := parseSig(t, nextLine(t, lines, 10*time.Second))
			if f.Signal != "chat.complete" {
				continue
			}
			if f.Payload["pid"] != pid || f.Payload["aborted"] != true || f.Payload["status"] != "aborted" {
				t.Fatalf("chat.complete after abort: %+v", f.Payload)
			}
			break
		}
		epWaitIdle(t, read, P)
		if r := d.sh(`cat "$1/home/root/notes.txt"`, M); r.code != 0 || r.stdout != "buy milk\n" {
			t.Fatalf("notes.txt after the aborted Delete: %v", r)
		}
		cat.Process.Signal(syscall.SIGTERM)
		cat.Wait()
	})
	d.stop()
}
