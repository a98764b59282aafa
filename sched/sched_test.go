package sched

// Tests of the scheduler through its syscalls (sched.* via k.Call as the
// users alice and bob) on a fake clock: expressions, re-arming, overlap,
// misfire across a restart, retry, permissions and the targets.

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func everyArgs(name string, everyMs int64, anchor *int64) map[string]any {
	e := map[string]any{"kind": "every", "everyMs": everyMs}
	if anchor != nil {
		e["anchorMs"] = *anchor
	}
	return map[string]any{"name": name, "expression": e,
		"target": map[string]any{"kind": "process.event", "pid": "init:1000", "message": "tick"}}
}

func eventTarget(pid string) map[string]any {
	return map[string]any{"kind": "process.event", "pid": pid, "message": "tick"}
}

// TestEveryAnchoring: next = anchor + k*every, the first such time strictly
// after the last scheduled time (or now when adding); no anchor means the
// creation time.
func TestEveryAnchoring(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()

	anchor := t0 - 90_000
	s := h.add(h.alice, everyArgs("grid", 60_000, &anchor))
	if got := i64(s.State.NextRunAtMs); got != t0+30_000 { // anchor + 2*60s
		t.Fatalf("next = %d, want anchor+120s = t0+30s (%d)", got-t0, 30_000)
	}
	odd := t0 - time.Hour.Milliseconds() - 17_000
	s2 := h.add(h.alice, everyArgs("hourly", time.Hour.Milliseconds(), &odd))
	if got := i64(s2.State.NextRunAtMs); got != odd+2*time.Hour.Milliseconds() {
		t.Fatalf("hourly next = t0%+d ms, want anchor+2h = t0%+d", got-t0, odd+2*time.Hour.Milliseconds()-t0)
	}
	noAnchor := h.add(h.alice, everyArgs("plain", 45_000, nil))
	if got := i64(noAnchor.State.NextRunAtMs); got != t0+45_000 {
		t.Fatalf("no anchor: next = t0%+d, want t0+45000", got-t0)
	}
	exact := t0 - 120_000 // now is on the grid: the next is strictly after
	s3 := h.add(h.alice, everyArgs("exact", 60_000, &exact))
	if got := i64(s3.State.NextRunAtMs); got != t0+60_000 {
		t.Fatalf("anchor on now's grid: next = t0%+d, want t0+60000", got-t0)
	}

	h.step(30 * time.Second)
	if got := scheduledAts(h.runs(s.ID)); len(got) != 1 || got[0] != t0+30_000 {
		t.Fatalf("grid runs at %v", got)
	}
	if got := i64(h.sched(s.ID).State.NextRunAtMs); got != t0+90_000 {
		t.Fatalf("after a run: next = t0%+d, want t0+90000", got-t0)
	}
	h.step(60 * time.Second)
	if got := scheduledAts(h.runs(s.ID)); len(got) != 2 || got[1] != t0+90_000 {
		t.Fatalf("grid runs at %v", got)
	}
	if got := scheduledAts(h.runs(s3.ID)); len(got) != 1 || got[0] != t0+60_000 {
		t.Fatalf("exact runs at %v", got)
	}
	// The step from t0+30s to t0+90s passed t0+45s and t0+90s: one (late)
	// run, and the next on the grid after now.
	if got := scheduledAts(h.runs(noAnchor.ID)); len(got) != 1 || got[0] != t0+45_000 {
		t.Fatalf("plain runs at %v", got)
	}
	if got := i64(h.sched(noAnchor.ID).State.NextRunAtMs); got != t0+135_000 {
		t.Fatalf("plain next = t0%+d, want t0+135000", got-t0)
	}
}

// TestEveryAnchorInFuture: an anchor in the future is the first run.
func TestEveryAnchorInFuture(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()
	anchor := t0 + 5*60_000 + 123
	s := h.add(h.alice, everyArgs("later", 60_000, &anchor))
	if got := i64(s.State.NextRunAtMs); got != anchor {
		t.Fatalf("next = t0%+d, want the anchor t0%+d", got-t0, anchor-t0)
	}
	h.step(time.Duration(anchor-t0-1) * time.Millisecond)
	if rs := h.runs(s.ID); len(rs) != 0 {
		t.Fatalf("ran before the anchor: %+v", rs)
	}
	h.step(time.Millisecond)
	if got := scheduledAts(h.runs(s.ID)); len(got) != 1 || got[0] != anchor {
		t.Fatalf("runs at %v, want [anchor]", got)
	}
	if got := i64(h.sched(s.ID).State.NextRunAtMs); got != anchor+60_000 {
		t.Fatalf("next = anchor%+d, want anchor+60000", got-anchor)
	}
}

// TestAfter: an after schedule runs once, afterMs after it was made.
func TestAfter(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()
	s := h.add(h.alice, map[string]any{"name": "soon", "expression": map[string]any{"kind": "after", "afterMs": 30_000}, "target": eventTarget("init:1000")})
	if got := i64(s.State.NextRunAtMs); got != t0+30_000 {
		t.Fatalf("next = t0%+d", got-t0)
	}
	h.step(29 * time.Second)
	if len(h.runs(s.ID)) != 0 {
		t.Fatal("ran early")
	}
	h.step(time.Second)
	h.step(time.Hour)
	rs := h.runs(s.ID)
	if len(rs) != 1 || rs[0].Status != "ok" || rs[0].ScheduledAtMs != t0+30_000 {
		t.Fatalf("runs = %+v", rs)
	}
	st := h.sched(s.ID).State
	if st.NextRunAtMs != nil || st.RunCount != 1 || str(st.LastStatus) != "ok" || h.armed(s.ID) != 0 {
		t.Fatalf("state after the one-shot: %+v armed %d", st, h.armed(s.ID))
	}
}

// TestAt: an at schedule runs at its time; one in the past (or now) is
// rejected with 400, as are the other malformed schedules.
func TestAt(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()
	at := t0 + 90_000
	s := h.add(h.alice, map[string]any{"name": "once", "expression": map[string]any{"kind": "at", "atMs": at}, "target": eventTarget("init:1000")})
	if i64(s.State.NextRunAtMs) != at || h.armed(s.ID) != at {
		t.Fatalf("next = %v armed %d", s.State.NextRunAtMs, h.armed(s.ID))
	}
	h.step(2 * time.Minute)
	if got := scheduledAts(h.runs(s.ID)); len(got) != 1 || got[0] != at {
		t.Fatalf("runs at %v", got)
	}

	now := h.clock.ms()
	bad := []struct {
		why  string
		args map[string]any
		code int
	}{
		{"at in the past", map[string]any{"expression": map[string]any{"kind": "at", "atMs": now - 1000}, "target": eventTarget("init:1000")}, 400},
		{"at now", map[string]any{"expression": map[string]any{"kind": "at", "atMs": now}, "target": eventTarget("init:1000")}, 400},
		{"after 0", map[string]any{"expression": map[string]any{"kind": "after", "afterMs": 0}, "target": eventTarget("init:1000")}, 400},
		{"every 500ms", map[string]any{"expression": map[string]any{"kind": "every", "everyMs": 500}, "target": eventTarget("init:1000")}, 400},
		{"bad cron", map[string]any{"expression": map[string]any{"kind": "cron", "expr": "61 * * * *"}, "target": eventTarget("init:1000")}, 400},
		{"bad zone", map[string]any{"expression": map[string]any{"kind": "cron", "expr": "0 * * * *", "timezone": "Mars/Olympus"}, "target": eventTarget("init:1000")}, 400},
		{"bad kind", map[string]any{"expression": map[string]any{"kind": "sometimes"}, "target": eventTarget("init:1000")}, 400},
		{"bad target", map[string]any{"expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": map[string]any{"kind": "package.event"}}, 400},
		{"event without message", map[string]any{"expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": map[string]any{"kind": "process.event", "pid": "init:1000"}}, 400},
		{"spawn without prompt", map[string]any{"expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": map[string]any{"kind": "process.spawn"}}, 400},
		{"bad lifecycle action", map[string]any{"expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": map[string]any{"kind": "process.lifecycle", "pid": "init:1000", "action": "kill"}}, 400},
		{"bad misfire", map[string]any{"expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": eventTarget("init:1000"), "misfirePolicy": "always"}, 400},
		{"bad retry", map[string]any{"expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": eventTarget("init:1000"), "retryPolicy": map[string]any{"maxAttempts": 3, "baseMs": 2000, "maxMs": 1000}}, 400},
		{"bad name", map[string]any{"name": "a b", "expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": eventTarget("init:1000")}, 400},
		{"duplicate name", map[string]any{"name": "once", "expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": eventTarget("init:1000")}, 409},
	}
	for _, b := range bad {
		if got := h.code(h.alice, "sched.add", b.args); got != b.code {
			t.Errorf("%s: code %d, want %d", b.why, got, b.code)
		}
	}
}

// TestCronZone: cron next times are computed on the zone's wall clock,
// across the zone's DST change.
func TestCronZone(t *testing.T) {
	// Friday 2026-03-06 10:00 EST; US DST starts Sunday 2026-03-08.
	h := newHarness(t, time.Date(2026, 3, 6, 15, 0, 0, 0, time.UTC))
	h.hookAll()
	s := h.add(h.alice, map[string]any{"name": "standup", "expression": map[string]any{"kind": "cron", "expr": "0 9 * * 1-5", "timezone": "America/New_York"},
		"target": eventTarget("init:1000")})
	want := time.Date(2026, 3, 9, 13, 0, 0, 0, time.UTC) // Monday 09:00 EDT
	if got := i64(s.State.NextRunAtMs); got != ms(want) {
		t.Fatalf("next = %s, want %s", time.UnixMilli(got).UTC(), want)
	}
	h.step(time.Duration(ms(want)-h.clock.ms()) * time.Millisecond)
	if got := scheduledAts(h.runs(s.ID)); len(got) != 1 || got[0] != ms(want) {
		t.Fatalf("runs at %v", got)
	}
	if got := i64(h.sched(s.ID).State.NextRunAtMs); got != ms(want.Add(24*time.Hour)) {
		t.Fatalf("next = %s, want Tuesday 13:00Z", time.UnixMilli(got).UTC())
	}
	// A zone given per schedule: the same expression in UTC.
	u := h.add(h.alice, map[string]any{"name": "standup-utc", "expression": map[string]any{"kind": "cron", "expr": "0 9 * * 1-5"},
		"target": eventTarget("init:1000")})
	if got := i64(u.State.NextRunAtMs); got != ms(time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("UTC next = %s", time.UnixMilli(got).UTC())
	}
}

// TestCronSpringForward runs, through the engine, the spring-forward day
// of Europe/Amsterdam (2026-03-29, 02:00 CET becomes 03:00 CEST) with the
// rule documented on Cron: a wall-clock time in the gap runs at the gap's
// end, once; "0 * * * *" runs 01:00 CET, 03:00 CEST, 04:00 CEST.
func TestCronSpringForward(t *testing.T) {
	h := newHarness(t, time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC)) // 00:30 CET
	h.hookAll()
	ams := "Europe/Amsterdam"
	hourly := h.add(h.alice, map[string]any{"name": "hourly", "expression": map[string]any{"kind": "cron", "expr": "0 * * * *", "timezone": ams}, "target": eventTarget("init:1000")})
	gap := h.add(h.alice, map[string]any{"name": "gap", "expression": map[string]any{"kind": "cron", "expr": "30 2 * * *", "timezone": ams}, "target": eventTarget("init:1000")})
	quarter := h.add(h.alice, map[string]any{"name": "quarter", "expression": map[string]any{"kind": "cron", "expr": "*/15 2 * * *", "timezone": ams}, "target": eventTarget("init:1000")})
	utc := func(hh, mm int) int64 { return ms(time.Date(2026, 3, 29, hh, mm, 0, 0, time.UTC)) }
	if got := i64(gap.State.NextRunAtMs); got != utc(1, 0) {
		t.Fatalf("02:30 in the gap: next = %s, want 01:00Z (03:00 CEST)", time.UnixMilli(got).UTC())
	}
	for range 12 { // to 02:30Z (04:30 CEST), in 15-minute steps
		h.step(15 * time.Minute)
	}
	if got, want := scheduledAts(h.runs(hourly.ID)), []int64{utc(0, 0), utc(1, 0), utc(2, 0)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("hourly ran at %v, want %v (01:00 CET, 03:00 CEST, 04:00 CEST)", got, want)
	}
	if got, want := scheduledAts(h.runs(gap.ID)), []int64{utc(1, 0)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("02:30 ran at %v, want once at 01:00Z", got)
	}
	// 02:00-02:45 all fall in the gap: one run at its end.
	if got, want := scheduledAts(h.runs(quarter.ID)), []int64{utc(1, 0)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("*/15 2 ran at %v, want once at 01:00Z", got)
	}
	if got := i64(h.sched(gap.ID).State.NextRunAtMs); got != ms(time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC)) {
		t.Errorf("02:30 next = %s, want 2026-03-30 00:30Z (02:30 CEST)", time.UnixMilli(got).UTC())
	}
}

// TestUpdateRearmsRemoveDisarms: a new expression re-arms the engine (the
// old fire time goes stale), disabling disarms, re-enabling arms the next
// future occurrence (not a catch-up run), removing disarms.
func TestUpdateRearmsRemoveDisarms(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()
	s := h.add(h.alice, everyArgs("tick", 60_000, nil))
	var res struct{ Schedule Schedule }
	h.must(h.alice, "sched.update", map[string]any{"id": s.ID, "patch": map[string]any{"expression": map[string]any{"kind": "every", "everyMs": 300_000}}}, &res)
	if got := i64(res.Schedule.State.NextRunAtMs); got != t0+300_000 || h.armed(s.ID) != t0+300_000 {
		t.Fatalf("updated next = t0%+d armed t0%+d, want t0+300000", got-t0, h.armed(s.ID)-t0)
	}
	h.step(time.Minute)
	if rs := h.runs(s.ID); len(rs) != 0 {
		t.Fatalf("the old expression fired: %+v", rs)
	}
	h.step(4 * time.Minute)
	if got := scheduledAts(h.runs(s.ID)); len(got) != 1 || got[0] != t0+300_000 {
		t.Fatalf("runs at %v, want [t0+300000]", got)
	}

	// Update by name, metadata only: the fire time stays.
	h.must(h.alice, "sched.update", map[string]any{"id": "tick", "patch": map[string]any{"description": "five-minutely"}}, &res)
	if str(res.Schedule.Description) != "five-minutely" || h.armed(s.ID) != t0+600_000 {
		t.Fatalf("metadata update: %+v armed t0%+d", res.Schedule, h.armed(s.ID)-t0)
	}

	h.must(h.alice, "sched.update", map[string]any{"id": s.ID, "patch": map[string]any{"enabled": false}}, &res)
	if h.armed(s.ID) != 0 {
		t.Fatalf("disabled but armed")
	}
	h.step(12 * time.Minute) // t0+17m: t0+10m and t0+15m pass while disabled
	if n := len(h.runs(s.ID)); n != 1 {
		t.Fatalf("a disabled schedule ran: %d runs", n)
	}
	h.must(h.alice, "sched.update", map[string]any{"id": s.ID, "patch": map[string]any{"enabled": true}}, &res)
	if got := i64(res.Schedule.State.NextRunAtMs); got != t0+20*60_000 || h.armed(s.ID) != got {
		t.Fatalf("re-enabled: next = t0%+d armed t0%+d, want t0+20m", got-t0, h.armed(s.ID)-t0)
	}
	h.settle()
	if n := len(h.runs(s.ID)); n != 1 {
		t.Fatalf("re-enabling ran a catch-up: %d runs", n)
	}

	var rm struct{ Removed bool }
	h.must(h.alice, "sched.remove", map[string]any{"id": s.ID}, &rm)
	if !rm.Removed || h.armed(s.ID) != 0 {
		t.Fatalf("remove: %+v armed %d", rm, h.armed(s.ID))
	}
	h.step(time.Hour)
	if n := len(h.runs(s.ID)); n != 1 {
		t.Fatalf("a removed schedule ran: %d runs", n)
	}
	var list struct {
		Schedules []Schedule
		Count     int
	}
	h.must(h.alice, "sched.list", map[string]any{}, &list)
	if list.Count != 0 {
		t.Fatalf("list after remove: %+v", list)
	}
}

// blocker is a testExec hook that holds runs of schedules whose name
// starts with "slow" until released.
type blocker struct {
	entered chan string
	release chan struct{}
}

func newBlocker(h *harness) *blocker {
	b := &blocker{entered: make(chan string, 16), release: make(chan struct{})}
	// Registered after the harness's: runs first, so that a failed test
	// does not leave Close waiting on a held run.
	h.t.Cleanup(b.unblock)
	h.setHook(func(ctx context.Context, s *Schedule) (string, bool, error) {
		if strings.HasPrefix(s.Name, "slow") {
			b.entered <- s.ID
			select {
			case <-b.release:
			case <-ctx.Done():
				return "", true, ctx.Err()
			}
		}
		return "done", true, nil
	})
	return b
}

func (b *blocker) unblock() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *blocker) waitEntered(t *testing.T) string {
	t.Helper()
	select {
	case id := <-b.entered:
		return id
	case <-time.After(waitLimit):
		t.Fatal("the run did not start")
	}
	return ""
}

// TestOverlapForce: a forced run while a run of the same schedule is under
// way is recorded skipped and does not count.
func TestOverlapForce(t *testing.T) {
	h := newHarness(t, harnessStart)
	b := newBlocker(h)
	s := h.add(h.alice, everyArgs("slow", time.Hour.Milliseconds(), nil))
	type result struct {
		Ran     int
		Results []RunResult
	}
	first := make(chan result, 1)
	go func() {
		var r result
		h.call(h.alice, "sched.run", map[string]any{"id": s.ID, "mode": "force"}, &r)
		first <- r
	}()
	b.waitEntered(t)
	if st := h.sched(s.ID).State; st.RunningAtMs == nil {
		t.Fatalf("running but runningAtMs is null: %+v", st)
	}
	var second result
	h.must(h.alice, "sched.run", map[string]any{"id": "slow", "mode": "force"}, &second)
	if second.Ran != 1 || second.Results[0].Status != "skipped" {
		t.Fatalf("second run: %+v", second)
	}
	rs := h.runs(s.ID)
	if len(rs) != 1 || rs[0].Status != "skipped" || str(rs[0].Error) != "previous run still going" {
		t.Fatalf("runs while the first goes on: %+v", rs)
	}
	if st := h.sched(s.ID).State; st.RunCount != 0 || st.RunningAtMs == nil {
		t.Fatalf("state after the skip: %+v", st)
	}
	b.unblock()
	r := <-first
	if r.Ran != 1 || r.Results[0].Status != "ok" || r.Results[0].Summary != "done" {
		t.Fatalf("first run: %+v", r)
	}
	if got := statuses(h.runs(s.ID)); fmt.Sprint(got) != "[skipped ok]" {
		t.Fatalf("statuses %v", got)
	}
	if st := h.sched(s.ID).State; st.RunCount != 1 || st.RunningAtMs != nil || str(st.LastStatus) != "ok" {
		t.Fatalf("final state: %+v", st)
	}
}

// TestOverlapEngine: an occurrence that falls due while the previous run
// of its schedule is still going is recorded skipped (overlap policy skip)
// and the schedule stays on its grid.
func TestOverlapEngine(t *testing.T) {
	h := newHarness(t, harnessStart)
	b := newBlocker(h)
	t0 := h.clock.ms()
	s := h.add(h.alice, everyArgs("slow", 60_000, nil))
	h.settle()
	h.clock.Advance(time.Minute) // the t0+1m run starts and blocks
	b.waitEntered(t)
	h.waitFor("the next occurrence to be armed", func() bool { return h.armed(s.ID) == t0+120_000 })
	var list struct{ Schedules []Schedule }
	h.must(h.alice, "sched.list", map[string]any{}, &list)
	if st := list.Schedules[0].State; i64(st.RunningAtMs) != t0+60_000 || i64(st.NextRunAtMs) != t0+120_000 {
		t.Fatalf("state during the run: runningAtMs t0%+d nextRunAtMs t0%+d, want t0+60000, t0+120000", i64(st.RunningAtMs)-t0, i64(st.NextRunAtMs)-t0)
	}
	h.waitFor("the loop asleep until t0+2m", func() bool { return h.clock.sleepsUntil(t0 + 120_000) })
	h.clock.Advance(time.Minute) // t0+2m falls due while t0+1m runs
	h.waitFor("the skipped run", func() bool { return len(h.runs(s.ID)) == 1 })
	if rs := h.runs(s.ID); rs[0].Status != "skipped" || rs[0].ScheduledAtMs != t0+120_000 {
		t.Fatalf("runs = %+v", rs)
	}
	h.waitFor("the re-arm after the skip", func() bool { return h.armed(s.ID) == t0+180_000 })
	if st := h.sched(s.ID).State; st.RunCount != 0 {
		t.Fatalf("runCount %d after a skip", st.RunCount)
	}
	b.unblock()
	h.settle()
	rs := h.runs(s.ID)
	if fmt.Sprint(statuses(rs)) != "[skipped ok]" || rs[1].ScheduledAtMs != t0+60_000 {
		t.Fatalf("runs = %+v", rs)
	}
	st := h.sched(s.ID).State
	if st.RunCount != 1 || i64(st.NextRunAtMs) != t0+180_000 {
		t.Fatalf("state = %+v", st)
	}
	h.step(time.Minute)
	if got := statuses(h.runs(s.ID)); fmt.Sprint(got) != "[skipped ok ok]" {
		t.Fatalf("statuses %v", got)
	}
}

// TestChangeDuringRun: a schedule removed, given a new expression, or
// updated during its run ends up as the change says, not as the run's
// stale copy says.
func TestChangeDuringRun(t *testing.T) {
	h := newHarness(t, harnessStart)
	b := newBlocker(h)
	t0 := h.clock.ms()
	gone := h.add(h.alice, everyArgs("slow-gone", 60_000, nil))
	moved := h.add(h.alice, everyArgs("slow-moved", 60_000, nil))
	once := h.add(h.alice, map[string]any{"name": "slow-once", "expression": map[string]any{"kind": "at", "atMs": t0 + 60_000}, "target": eventTarget("init:1000")})
	h.settle()
	h.clock.Advance(time.Minute)
	for range 3 {
		b.waitEntered(t)
	}
	var rm struct{ Removed bool }
	h.must(h.alice, "sched.remove", map[string]any{"id": gone.ID}, &rm)
	var up struct{ Schedule Schedule }
	h.must(h.alice, "sched.update", map[string]any{"id": moved.ID, "patch": map[string]any{"expression": map[string]any{"kind": "every", "everyMs": 600_000}}}, &up)
	if got := i64(up.Schedule.State.NextRunAtMs); got != t0+660_000 {
		t.Fatalf("moved: next t0%+d, want t0+660000", got-t0)
	}
	h.must(h.alice, "sched.update", map[string]any{"id": once.ID, "patch": map[string]any{"description": "renamed while running"}}, &up)
	time.Sleep(20 * time.Millisecond) // a spurious re-fire would happen now
	b.unblock()
	h.settle()
	if a := h.armed(gone.ID); a != 0 {
		t.Errorf("removed during its run, armed again at t0%+d", a-t0)
	}
	if got := i64(h.sched(moved.ID).State.NextRunAtMs); got != t0+660_000 || h.armed(moved.ID) != got {
		t.Errorf("moved: next t0%+d armed t0%+d, want t0+660000 (the new expression's)", got-t0, h.armed(moved.ID)-t0)
	}
	if got := statuses(h.runs(once.ID)); fmt.Sprint(got) != "[ok]" {
		t.Errorf("one-shot updated during its run: runs %v, want [ok]", got)
	}
	h.step(2 * time.Minute)
	if n := len(h.runs(moved.ID)); n != 1 {
		t.Errorf("moved: %d runs by t0+3m, want 1 (the old expression fired)", n)
	}
}

// TestMisfire closes the kernel and the scheduler, moves the clock past
// several occurrences and reopens on the same state dir: misfire skip runs
// nothing and arms the next future occurrence (a missed one-shot is
// recorded skipped); run-once runs exactly one catch-up at start.
func TestMisfire(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()
	ev := func(name, misfire string, expr map[string]any) Schedule {
		return h.add(h.alice, map[string]any{"name": name, "misfirePolicy": misfire, "expression": expr, "target": eventTarget("init:1000")})
	}
	every := map[string]any{"kind": "every", "everyMs": 600_000}
	at := map[string]any{"kind": "at", "atMs": t0 + 15*60_000}
	skipEvery := ev("skip-every", "skip", every)
	onceEvery := ev("once-every", "run-once", every)
	skipAt := ev("skip-at", "skip", at)
	onceAt := ev("once-at", "run-once", at)
	defEvery := h.add(h.alice, everyArgs("default", 600_000, nil))
	if skipEvery.MisfirePolicy != "skip" || defEvery.MisfirePolicy != "skip" || onceEvery.MisfirePolicy != "run-once" {
		t.Fatalf("policies %q %q %q", skipEvery.MisfirePolicy, defEvery.MisfirePolicy, onceEvery.MisfirePolicy)
	}
	h.settle()

	h.close()
	h.clock.Advance(35 * time.Minute) // t0+10m, +15m, +20m, +30m missed
	h.open()
	h.identities()
	h.settle()
	restart := t0 + 35*60_000

	for _, s := range []Schedule{skipEvery, defEvery} {
		if rs := h.runs(s.ID); len(rs) != 0 {
			t.Errorf("%s: ran %+v", s.Name, rs)
		}
		if got := i64(h.sched(s.ID).State.NextRunAtMs); got != t0+40*60_000 || h.armed(s.ID) != got {
			t.Errorf("%s: next t0%+d armed t0%+d, want t0+40m", s.Name, got-t0, h.armed(s.ID)-t0)
		}
	}
	rs := h.runs(onceEvery.ID)
	if len(rs) != 1 || rs[0].Status != "ok" || rs[0].StartedAtMs != restart {
		t.Errorf("once-every: runs %+v, want one catch-up at the restart", rs)
	}
	if st := h.sched(onceEvery.ID).State; st.RunCount != 1 || i64(st.NextRunAtMs) != t0+40*60_000 {
		t.Errorf("once-every: state %+v", st)
	}
	rs = h.runs(skipAt.ID)
	if len(rs) != 1 || rs[0].Status != "skipped" || rs[0].ScheduledAtMs != t0+15*60_000 {
		t.Errorf("skip-at: runs %+v, want one skipped", rs)
	}
	if st := h.sched(skipAt.ID).State; st.RunCount != 0 || st.NextRunAtMs != nil || str(st.LastStatus) != "skipped" || h.armed(skipAt.ID) != 0 {
		t.Errorf("skip-at: state %+v", st)
	}
	rs = h.runs(onceAt.ID)
	if len(rs) != 1 || rs[0].Status != "ok" {
		t.Errorf("once-at: runs %+v, want one catch-up", rs)
	}
	if st := h.sched(onceAt.ID).State; st.RunCount != 1 || st.NextRunAtMs != nil {
		t.Errorf("once-at: state %+v", st)
	}

	// Back on the grid: all three every schedules run at t0+40m.
	h.step(5 * time.Minute)
	for _, s := range []Schedule{skipEvery, onceEvery, defEvery} {
		rs := h.runs(s.ID)
		if len(rs) == 0 || rs[len(rs)-1].ScheduledAtMs != t0+40*60_000 {
			t.Errorf("%s: runs %+v, want the last at t0+40m", s.Name, rs)
		}
	}
	// A second restart with nothing missed changes nothing.
	h.restart()
	h.settle()
	if n := len(h.runs(onceEvery.ID)); n != 2 {
		t.Errorf("once-every: %d runs after a clean restart, want 2", n)
	}
}

// TestRetry: a one-shot whose target fails is retried with capped
// exponential backoff and stops after maxAttempts attempts; every attempt
// records the one occurrence as its scheduled time, and the schedule ends
// disabled.
func TestRetry(t *testing.T) {
	h := newHarness(t, harnessStart)
	t0 := h.clock.ms()
	h.setHook(func(ctx context.Context, s *Schedule) (string, bool, error) {
		return "", true, fmt.Errorf("no such process")
	})
	retry := func(name string, attempts int) Schedule {
		return h.add(h.alice, map[string]any{"name": name, "expression": map[string]any{"kind": "at", "atMs": t0 + 10_000},
			"target":      eventTarget("init:1000"),
			"retryPolicy": map[string]any{"maxAttempts": attempts, "baseMs": 1000, "maxMs": 2000}})
	}
	three := retry("three", 3)
	four := retry("four", 4)
	h.step(10 * time.Second) // attempt 1
	if rs := h.runs(three.ID); len(rs) != 1 || rs[0].Status != "error" || !strings.Contains(str(rs[0].Error), "no such process") {
		t.Fatalf("first attempt: %+v", rs)
	}
	if st := h.sched(three.ID).State; i64(st.NextRunAtMs) != t0+11_000 || st.Attempt != 1 {
		t.Fatalf("after attempt 1: %+v", st)
	}
	h.step(time.Second) // t0+11s: attempt 2, next after 2s
	if st := h.sched(three.ID).State; len(h.runs(three.ID)) != 2 || i64(st.NextRunAtMs) != t0+13_000 || st.Attempt != 2 {
		t.Fatalf("after attempt 2: %+v", st)
	}
	h.step(time.Second) // t0+12s: nothing
	if n := len(h.runs(three.ID)); n != 2 {
		t.Fatalf("%d runs at t0+12s", n)
	}
	h.step(time.Second) // t0+13s: attempt 3, the last
	st := h.sched(three.ID).State
	if rs := h.runs(three.ID); len(rs) != 3 || fmt.Sprint(startedAts(rs)) != fmt.Sprint([]int64{t0 + 10_000, t0 + 11_000, t0 + 13_000}) ||
		fmt.Sprint(scheduledAts(rs)) != fmt.Sprint([]int64{t0 + 10_000, t0 + 10_000, t0 + 10_000}) {
		t.Fatalf("three: runs at %v, scheduled %v", startedAts(rs), scheduledAts(rs))
	}
	if s := h.sched(three.ID); st.NextRunAtMs != nil || st.RunCount != 3 || str(st.LastStatus) != "error" || h.armed(three.ID) != 0 || s.Enabled {
		t.Fatalf("three: final state %+v enabled %v", st, s.Enabled)
	}
	// The fourth attempt's backoff, 4s, is capped at maxMs (2s).
	if next := i64(h.sched(four.ID).State.NextRunAtMs); next != t0+15_000 {
		t.Fatalf("four: attempt 4 at t0%+d, want t0+15000", next-t0)
	}
	h.step(time.Hour)
	if n := len(h.runs(three.ID)); n != 3 {
		t.Fatalf("three: %d runs, want 3", n)
	}
	if rs := h.runs(four.ID); len(rs) != 4 || rs[3].ScheduledAtMs != t0+10_000 {
		t.Fatalf("four: runs %+v", rs)
	}
}

func startedAts(rs []Run) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.StartedAtMs)
	}
	return out
}

// TestRetryCapped: a retry policy makes at most MaxRetryAttempts attempts
// with a backoff of at most MaxRetryMs; a policy beyond either is a 400,
// and a huge base never overflows into a retry at once.
func TestRetryCapped(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.setHook(func(ctx context.Context, s *Schedule) (string, bool, error) {
		return "", true, fmt.Errorf("down")
	})
	t0 := h.clock.ms()
	add := func(name string, retry map[string]any) int {
		return h.code(h.alice, "sched.add", map[string]any{"name": name, "expression": map[string]any{"kind": "at", "atMs": t0 + 1000},
			"target": eventTarget("init:1000"), "retryPolicy": retry})
	}
	for _, bad := range []map[string]any{
		{"maxAttempts": 11, "baseMs": 1000, "maxMs": 1000},
		{"maxAttempts": 1 << 40, "baseMs": 1000, "maxMs": 1000},
		{"maxAttempts": 3, "baseMs": 1000, "maxMs": int64(1) << 62},
		{"maxAttempts": 3, "baseMs": 0, "maxMs": 1000},
	} {
		if code := add("bad", bad); code != 400 {
			t.Errorf("retry %v: code %d, want 400", bad, code)
		}
	}
	if code := add("ten", map[string]any{"maxAttempts": 10, "baseMs": 1000, "maxMs": MaxRetryMs}); code != 0 {
		t.Fatalf("ten attempts: code %d", code)
	}
	for range 12 {
		h.step(MaxRetryMs * time.Millisecond)
	}
	var list struct{ Schedules []Schedule }
	h.must(h.alice, "sched.list", map[string]any{}, &list)
	rs := h.runs(list.Schedules[0].ID)
	if len(rs) != MaxRetryAttempts {
		t.Fatalf("%d attempts, want %d", len(rs), MaxRetryAttempts)
	}
	for i := 1; i < len(rs); i++ {
		if gap := rs[i].StartedAtMs - rs[i-1].StartedAtMs; gap <= 0 || gap > MaxRetryMs {
			t.Fatalf("attempt %d after %d ms", i+1, gap)
		}
	}
	// The backoff itself saturates.
	r := Retry{MaxAttempts: 10, BaseMs: math.MaxInt64 / 2, MaxMs: math.MaxInt64}
	for n := 1; n <= 70; n++ {
		if b := backoff(&r, n); b < 1 || b > MaxRetryMs {
			t.Fatalf("backoff(%d) = %d", n, b)
		}
	}
}

// TestRetrySucceeds: a retry that succeeds ends the schedule.
func TestRetrySucceeds(t *testing.T) {
	h := newHarness(t, harnessStart)
	fails := 1
	h.setHook(func(ctx context.Context, s *Schedule) (string, bool, error) {
		if fails > 0 {
			fails--
			return "", true, fmt.Errorf("flaky")
		}
		return "fine", true, nil
	})
	t0 := h.clock.ms()
	s := h.add(h.alice, map[string]any{"name": "flaky", "expression": map[string]any{"kind": "after", "afterMs": 5000},
		"target": eventTarget("init:1000"), "retryPolicy": map[string]any{"maxAttempts": 5, "baseMs": 500, "maxMs": 60000}})
	h.step(5 * time.Second)
	h.step(500 * time.Millisecond)
	h.step(time.Hour)
	rs := h.runs(s.ID)
	if fmt.Sprint(statuses(rs)) != "[error ok]" || rs[1].ScheduledAtMs != t0+5000 || rs[1].StartedAtMs != t0+5500 {
		t.Fatalf("runs %+v", rs)
	}
	if st := h.sched(s.ID).State; st.NextRunAtMs != nil || st.Attempt != 0 || st.RunCount != 2 {
		t.Fatalf("state %+v", st)
	}
}

// TestPermissions: bob can neither see nor change nor run alice's
// schedules; root can, naming ownerUid.
func TestPermissions(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	s := h.add(h.alice, everyArgs("mine", time.Hour.Milliseconds(), nil))
	if s.OwnerUid != 1000 || s.CreatorUid != 1000 || s.RunAsUid != 1000 {
		t.Fatalf("principals %d %d %d", s.OwnerUid, s.CreatorUid, s.RunAsUid)
	}
	var list struct {
		Schedules []Schedule
		Count     int
	}
	h.must(h.bob, "sched.list", map[string]any{}, &list)
	if list.Count != 0 {
		t.Fatalf("bob sees %+v", list.Schedules)
	}
	for _, c := range []struct {
		call string
		args map[string]any
		want int
	}{
		{"sched.list", map[string]any{"ownerUid": 1000}, 403},
		{"sched.update", map[string]any{"id": s.ID, "patch": map[string]any{"enabled": false}}, 404},
		{"sched.update", map[string]any{"id": "mine", "patch": map[string]any{"enabled": false}}, 404},
		{"sched.update", map[string]any{"id": s.ID, "ownerUid": 1000, "patch": map[string]any{"enabled": false}}, 404},
		{"sched.run", map[string]any{"id": s.ID, "mode": "force"}, 404},
		{"sched.run", map[string]any{"id": s.ID}, 404},
		{"sched.run", map[string]any{"mode": "due", "ownerUid": 1000}, 403},
		{"sched.add", map[string]any{"ownerUid": 1000, "expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": eventTarget("init:1000")}, 403},
	} {
		if got := h.code(h.bob, c.call, c.args); got != c.want {
			t.Errorf("bob %s %v: code %d, want %d", c.call, c.args, got, c.want)
		}
	}
	var rm struct{ Removed bool }
	h.must(h.bob, "sched.remove", map[string]any{"id": s.ID}, &rm)
	if rm.Removed {
		t.Fatalf("bob removed alice's schedule")
	}
	if got := h.sched(s.ID); !got.Enabled || len(h.runs(s.ID)) != 0 {
		t.Fatalf("alice's schedule changed: %+v", got)
	}

	// Root sees and changes it, naming ownerUid (or the id).
	h.must(h.root, "sched.list", map[string]any{"ownerUid": 1000}, &list)
	if list.Count != 1 || list.Schedules[0].ID != s.ID {
		t.Fatalf("root list: %+v", list)
	}
	h.must(h.root, "sched.list", map[string]any{"ownerUid": 1001}, &list)
	if list.Count != 0 {
		t.Fatalf("root list of bob: %+v", list)
	}
	var up struct{ Schedule Schedule }
	h.must(h.root, "sched.update", map[string]any{"id": "mine", "ownerUid": 1000, "patch": map[string]any{"description": "by root"}}, &up)
	if str(up.Schedule.Description) != "by root" {
		t.Fatalf("root update: %+v", up)
	}
	var run struct {
		Ran     int
		Results []RunResult
	}
	h.must(h.root, "sched.run", map[string]any{"id": s.ID, "mode": "force"}, &run)
	if run.Ran != 1 || run.Results[0].Status != "ok" {
		t.Fatalf("root run: %+v", run)
	}
	if rs := h.runs(s.ID); len(rs) != 1 || rs[0].OwnerUid != 1000 {
		t.Fatalf("runs %+v", rs)
	}
	// Root makes a schedule for alice: alice owns it and it runs as her.
	var made struct{ Schedule Schedule }
	h.must(h.root, "sched.add", map[string]any{"ownerUid": 1000, "name": "for-alice", "expression": map[string]any{"kind": "after", "afterMs": 1000}, "target": eventTarget("init:1000")}, &made)
	if made.Schedule.OwnerUid != 1000 || made.Schedule.CreatorUid != 0 || made.Schedule.RunAsUid != 1000 {
		t.Fatalf("root-made schedule: %+v", made.Schedule)
	}
	h.must(h.alice, "sched.list", map[string]any{}, &list)
	if list.Count != 2 {
		t.Fatalf("alice sees %d schedules, want 2", list.Count)
	}
	h.must(h.root, "sched.remove", map[string]any{"id": s.ID}, &rm)
	if !rm.Removed {
		t.Fatalf("root could not remove")
	}
}
