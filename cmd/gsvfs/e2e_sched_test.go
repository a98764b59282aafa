package main_test

import (
	"regexp"
	"strings"
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
	deadline := time.Now().Add(15 * time.Second)
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
