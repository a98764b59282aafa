package main_test

import (
	"math"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2ESchedRealClock drives the scheduler through the mount on the real
// clock: a crontab written with cat fires an event and a spawn, the runs
// show in the log, the event enters init's conversation, rewriting the
// crontab unchanged keeps its ids, and a bad line changes nothing.
func TestE2ESchedRealClock(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	M := d.mnt
	run := func(script string, args ...string) string {
		t.Helper()
		r := d.sh(script, args...)
		if r.err != nil || r.code != 0 {
			t.Fatalf("%s: %v", script, r)
		}
		return r.stdout
	}
	run(`cat > "$1/var/spool/cron/root" <<'EOF'
CRON_TZ=Europe/Paris
0 9 * * 1-5   spawn task summarize yesterday's logs     # name=standup
@every 2s     event init:0 check the inbox              # name=inbox
@after 1s     spawn task say hello                      # name=hello
EOF`, M)
	tab := run(`cat "$1/var/spool/cron/root"`, M)
	for _, want := range []string{"name=standup id=sch_", "name=inbox id=sch_", "name=hello id=sch_", "CRON_TZ=Europe/Paris"} {
		if !strings.Contains(tab, want) {
			t.Fatalf("crontab lacks %q:\n%s", want, tab)
		}
	}
	// The real clock: within a few seconds both fire.
	deadline := time.Now().Add(liveness)
	var log string
	for time.Now().Before(deadline) {
		log = run(`cat "$1/var/log/gsv/scheduler"`, M)
		if strings.Count(log, `"schedule":"inbox"`) >= 2 && strings.Contains(log, `"schedule":"hello"`) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Count(log, `"schedule":"inbox"`) < 2 || !strings.Contains(log, `"schedule":"hello"`) {
		t.Fatalf("runs did not happen in time; log:\n%s", log)
	}
	if strings.Contains(log, `"status":"error"`) {
		t.Fatalf("a run failed:\n%s", log)
	}
	hist := run(`cat "$1/proc/init:0/conversations/default/history"`, M)
	if !strings.Contains(hist, `[Process Event]: check the inbox`) {
		t.Fatalf("the event did not enter init's conversation:\n%s", hist)
	}
	procs := run(`ls "$1/proc"`, M)
	if !regexp.MustCompile(`(?m)^[0-9a-f]{8}-[0-9a-f]{4}$`).MatchString(procs) {
		t.Fatalf("the spawn made no process: %s", procs)
	}
	// Unchanged text keeps every id; the one-shot that ran is still listed.
	before := run(`cat "$1/var/spool/cron/root"`, M)
	run(`cat "$1/var/spool/cron/root" > "$1/../work/tab" && cat "$1/../work/tab" > "$1/var/spool/cron/root"`, M)
	if after := run(`cat "$1/var/spool/cron/root"`, M); after != before {
		t.Fatalf("rewriting the crontab unchanged changed it:\n%s\n---\n%s", before, after)
	}
	// A bad line rejects the whole write and changes nothing.
	r := d.sh(`printf '* * * * *  event init:0 ok\n61 * * * * event init:0 bad\n' | cat > "$1/var/spool/cron/root"`, M)
	if r.code == 0 {
		t.Fatalf("a bad crontab was accepted: %v", r)
	}
	if after := run(`cat "$1/var/spool/cron/root"`, M); after != before {
		t.Fatalf("a rejected crontab changed the schedules:\n%s", after)
	}
	if e := run(`cat "$1/var/spool/cron/err"`, M); !strings.Contains(e, "line 2") {
		t.Fatalf("err view: %q", e)
	}
	// ctl: disable stops the every-2s schedule.
	run(`echo 'disable inbox' > "$1/var/spool/cron/ctl"`, M)
	if tab := run(`cat "$1/var/spool/cron/root"`, M); !strings.Contains(tab, "#disabled") {
		t.Fatalf("disable did not show: %s", tab)
	}
}

// TestE2ESchedFailuresSeen: through the daemon's FUSE mount with bash,
// every scheduler failure reaches the shell that caused it: a crontab line
// that does not parse fails its echo (bash ignores close(2)) and changes
// nothing, a forced run that fails fails its ctl echo with err saying why,
// and the log is oldest first, so tail shows the latest run. Over 9P,
// sched.add refuses an interval that would wrap around, control characters
// and a target its owner cannot reach.
func TestE2ESchedFailuresSeen(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	M := d.mnt
	bash := func(script string) shResult {
		return runCmd(d.work, nil, nil, "bash", "-c", script, "bash", M)
	}
	run := func(script string) string {
		t.Helper()
		r := bash(script)
		if r.err != nil || r.code != 0 {
			t.Fatalf("%s: %v", script, r)
		}
		return r.stdout
	}
	run(`echo '@daily event init:0 fine # name=fine' > "$1/var/spool/cron/root"`)
	before := run(`cat "$1/var/spool/cron/root"`)
	r := bash(`echo 'bad line' >> "$1/var/spool/cron/root"`)
	if r.code == 0 || errnoOf(r.stderr) != syscall.EINVAL {
		t.Fatalf("echo of a bad line: %v", r)
	}
	if e := run(`cat "$1/var/spool/cron/err"`); !strings.Contains(e, `line 3: cron expression "bad line"`) {
		t.Fatalf("err: %q", e)
	}
	if after := run(`cat "$1/var/spool/cron/root"`); after != before {
		t.Fatalf("a bad line changed the crontab:\n%s", after)
	}
	// A forced run that fails.
	run(`echo '@daily spawn nosuchprofile hello # name=broken' >> "$1/var/spool/cron/root"`)
	r = bash(`echo 'run broken' > "$1/var/spool/cron/ctl"`)
	if r.code == 0 || errnoOf(r.stderr) != syscall.EINVAL {
		t.Fatalf("a failed run: %v", r)
	}
	if e := run(`cat "$1/var/spool/cron/err"`); !strings.Contains(e, "unknown profile") {
		t.Fatalf("err after a failed run: %q", e)
	}
	run(`echo 'run fine' > "$1/var/spool/cron/ctl"`)
	if last := run(`tail -n 1 "$1/var/log/gsv/scheduler"`); !strings.Contains(last, `"schedule":"fine"`) || !strings.Contains(last, `"status":"ok"`) {
		t.Fatalf("tail of the log is not the latest run: %q", last)
	}
	// sched.add over 9P.
	fsys := d.dial(t)
	for _, c := range []struct {
		why  string
		args map[string]any
		code int
	}{
		{"everyMs 2^63-1", map[string]any{"name": "loop", "expression": map[string]any{"kind": "every", "everyMs": int64(math.MaxInt64)},
			"target": map[string]any{"kind": "process.event", "pid": "init:0", "message": "x"}}, 400},
		{"a newline in a name", map[string]any{"name": "a\nb", "expression": map[string]any{"kind": "every", "everyMs": 60000},
			"target": map[string]any{"kind": "process.event", "pid": "init:0", "message": "x"}}, 400},
		{"ESC in a message", map[string]any{"name": "esc", "expression": map[string]any{"kind": "every", "everyMs": 60000},
			"target": map[string]any{"kind": "process.event", "pid": "init:0", "message": "x\x1b[2J"}}, 400},
		{"no such process", map[string]any{"name": "nosuch", "expression": map[string]any{"kind": "every", "everyMs": 60000},
			"target": map[string]any{"kind": "process.event", "pid": "0000dead-beef", "message": "x"}}, 404},
	} {
		f := call9p(t, fsys, "sched.add", c.args)
		if f.OK || f.Error == nil || f.Error.Code != c.code {
			t.Errorf("%s: %+v %s, want %d", c.why, f.Error, f.Data, c.code)
		}
	}
}
