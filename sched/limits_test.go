package sched

// Tests of the limits that keep a schedule from firing in a loop, of
// one-shots ending disabled, of the zone a cron record states and of the
// text a schedule may hold.

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRanges: expressions out of range are refused (400) by sched.add and
// sched.update.
func TestRanges(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	now := h.clock.ms()
	neg := int64(math.MinInt64)
	far := now + HorizonMs + 1
	bad := []struct {
		why  string
		expr map[string]any
	}{
		{"every max int64", map[string]any{"kind": "every", "everyMs": int64(math.MaxInt64)}},
		{"every over 100 years", map[string]any{"kind": "every", "everyMs": HorizonMs + 1}},
		{"every 999ms", map[string]any{"kind": "every", "everyMs": 999}},
		{"every negative", map[string]any{"kind": "every", "everyMs": -1000}},
		{"anchor min int64", map[string]any{"kind": "every", "everyMs": 1000, "anchorMs": neg}},
		{"anchor beyond 100 years", map[string]any{"kind": "every", "everyMs": 1000, "anchorMs": far}},
		{"after max int64", map[string]any{"kind": "after", "afterMs": int64(math.MaxInt64)}},
		{"after beyond 100 years", map[string]any{"kind": "after", "afterMs": HorizonMs + 1}},
		{"at max int64", map[string]any{"kind": "at", "atMs": int64(math.MaxInt64)}},
		{"at beyond 100 years", map[string]any{"kind": "at", "atMs": far}},
	}
	ok := h.add(h.alice, everyArgs("ok", 60_000, nil))
	for _, b := range bad {
		args := map[string]any{"name": "x", "expression": b.expr, "target": eventTarget("init:1000")}
		if code := h.code(h.alice, "sched.add", args); code != 400 {
			t.Errorf("add %s: code %d, want 400", b.why, code)
		}
		if code := h.code(h.alice, "sched.update", map[string]any{"id": ok.ID, "patch": map[string]any{"expression": b.expr}}); code != 400 {
			t.Errorf("update %s: code %d, want 400", b.why, code)
		}
	}
	// The limits themselves are allowed.
	for _, e := range []map[string]any{
		{"kind": "every", "everyMs": HorizonMs},
		{"kind": "every", "everyMs": MinEveryMs, "anchorMs": now - HorizonMs},
		{"kind": "after", "afterMs": HorizonMs},
		{"kind": "at", "atMs": now + HorizonMs},
	} {
		args := map[string]any{"expression": e, "target": eventTarget("init:1000")}
		if code := h.code(h.alice, "sched.add", args); code != 0 {
			t.Errorf("add %v: code %d", e, code)
		}
	}
}

// TestHugeIntervalNoLoop: a schedule stored with an interval no check
// would let in now (everyMs 2^63-1) runs at most once: its next time
// saturates to none instead of wrapping into the past.
func TestHugeIntervalNoLoop(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	s := h.add(h.alice, everyArgs("huge", 60_000, nil))
	if _, err := h.m.st.Exec(context.Background(), `UPDATE sched_schedules SET expression=? WHERE id=?`,
		`{"kind":"every","everyMs":9223372036854775807}`, s.ID); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		h.step(time.Minute)
	}
	if n := len(h.runs(s.ID)); n != 1 {
		t.Fatalf("%d runs in 5 minutes, want 1", n)
	}
	if st := h.sched(s.ID).State; st.NextRunAtMs != nil {
		t.Fatalf("next = %d, want none", *st.NextRunAtMs)
	}
}

// TestOneShotEnds: at and after schedules are disabled with no next time
// once they have run; enabling an at whose time has passed is a 400, and
// enabling one whose time is still to come arms it.
func TestOneShotEnds(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()
	at := h.add(h.alice, map[string]any{"name": "at", "expression": map[string]any{"kind": "at", "atMs": t0 + 10_000}, "target": eventTarget("init:1000")})
	after := h.add(h.alice, map[string]any{"name": "after", "expression": map[string]any{"kind": "after", "afterMs": 5_000}, "target": eventTarget("init:1000")})
	later := h.add(h.alice, map[string]any{"name": "later", "enabled": false, "expression": map[string]any{"kind": "at", "atMs": t0 + 3_600_000}, "target": eventTarget("init:1000")})
	h.step(10 * time.Second)
	for _, id := range []string{at.ID, after.ID} {
		var res struct{ Schedules []Schedule }
		h.must(h.alice, "sched.list", map[string]any{}, &res)
		for _, s := range res.Schedules {
			if s.ID == id && (s.Enabled || s.State.NextRunAtMs != nil || s.State.RunCount != 1) {
				t.Errorf("%s after its run: enabled %v next %v runs %d", s.Name, s.Enabled, s.State.NextRunAtMs, s.State.RunCount)
			}
		}
	}
	if code := h.code(h.alice, "sched.update", map[string]any{"id": at.ID, "patch": map[string]any{"enabled": true}}); code != 400 {
		t.Errorf("enabling a past at: code %d, want 400", code)
	}
	if code := h.code(h.alice, "sched.update", map[string]any{"id": after.ID, "patch": map[string]any{"enabled": true}}); code != 400 {
		t.Errorf("enabling a past after: code %d, want 400", code)
	}
	// A new time with the enabling: allowed.
	var res struct{ Schedule Schedule }
	h.must(h.alice, "sched.update", map[string]any{"id": at.ID, "patch": map[string]any{"enabled": true,
		"expression": map[string]any{"kind": "at", "atMs": h.clock.ms() + 1000}}}, &res)
	if !res.Schedule.Enabled || i64(res.Schedule.State.NextRunAtMs) != h.clock.ms()+1000 {
		t.Errorf("re-timed at: %+v", res.Schedule)
	}
	h.must(h.alice, "sched.update", map[string]any{"id": later.ID, "patch": map[string]any{"enabled": true}}, &res)
	if !res.Schedule.Enabled || i64(res.Schedule.State.NextRunAtMs) != t0+3_600_000 || h.armed(later.ID) != t0+3_600_000 {
		t.Errorf("enabling a future at: %+v armed %d", res.Schedule, h.armed(later.ID))
	}
	// Missed while the daemon was down (misfire skip): disabled too.
	missed := h.add(h.alice, map[string]any{"name": "missed", "expression": map[string]any{"kind": "after", "afterMs": 60_000}, "target": eventTarget("init:1000")})
	h.close()
	h.clock.Advance(time.Hour)
	h.open()
	h.identities()
	if s := h.sched(missed.ID); s.Enabled || s.State.NextRunAtMs != nil {
		t.Errorf("missed one-shot: enabled %v next %v", s.Enabled, s.State.NextRunAtMs)
	}
}

// TestCronZoneStated: a cron record without a zone gets the system's
// (config/system/timezone, else UTC) and shows it.
func TestCronZoneStated(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	s := h.add(h.alice, map[string]any{"name": "c", "expression": map[string]any{"kind": "cron", "expr": "0 9 * * *"}, "target": eventTarget("init:1000")})
	if s.Expression.Timezone != "UTC" {
		t.Fatalf("zone %q, want UTC", s.Expression.Timezone)
	}
	h.must(h.root, "sys.config.set", map[string]any{"key": "config/system/timezone", "value": "Europe/Paris"}, nil)
	p := h.add(h.alice, map[string]any{"name": "p", "expression": map[string]any{"kind": "cron", "expr": "0 9 * * *"}, "target": eventTarget("init:1000")})
	if p.Expression.Timezone != "Europe/Paris" {
		t.Fatalf("zone %q, want Europe/Paris", p.Expression.Timezone)
	}
	if want := time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC).UnixMilli(); i64(p.State.NextRunAtMs) != want {
		t.Fatalf("next %s, want 09:00 Paris", time.UnixMilli(i64(p.State.NextRunAtMs)).UTC())
	}
	// An update to a cron expression without a zone gets the system's too.
	var up struct{ Schedule Schedule }
	h.must(h.alice, "sched.update", map[string]any{"id": s.ID, "patch": map[string]any{"expression": map[string]any{"kind": "cron", "expr": "0 10 * * *"}}}, &up)
	if up.Schedule.Expression.Timezone != "Europe/Paris" {
		t.Fatalf("updated zone %q, want Europe/Paris", up.Schedule.Expression.Timezone)
	}
	var res struct{ Schedules []Schedule }
	h.must(h.alice, "sched.list", map[string]any{}, &res)
	for _, s := range res.Schedules {
		if s.Expression.Timezone == "" {
			t.Errorf("%s listed without a zone", s.Name)
		}
	}
}

// TestScheduleText: names and text shown in views and logs carry no
// control characters (400); newline and tab in free text are kept (a
// crontab renders them escaped).
func TestScheduleText(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	every := map[string]any{"kind": "every", "everyMs": 60_000}
	bad := []struct {
		why  string
		args map[string]any
	}{
		{"newline in a name", map[string]any{"name": "a\nuid: 0", "expression": every, "target": eventTarget("init:1000")}},
		{"ESC in a message", map[string]any{"name": "m", "expression": every, "target": map[string]any{"kind": "process.event", "pid": "init:1000", "message": "hi \x1b[2J"}}},
		{"NUL in a prompt", map[string]any{"name": "p", "expression": every, "target": map[string]any{"kind": "process.spawn", "prompt": "a\x00b"}}},
		{"CR in a prompt", map[string]any{"name": "p", "expression": every, "target": map[string]any{"kind": "process.spawn", "prompt": "a\rb"}}},
		{"newline in a label", map[string]any{"name": "l", "expression": every, "target": map[string]any{"kind": "process.spawn", "prompt": "x", "label": "a\nuid: 0"}}},
		{"newline in a profile", map[string]any{"name": "l", "expression": every, "target": map[string]any{"kind": "process.spawn", "prompt": "x", "profile": "task\n"}}},
		{"newline in a pid", map[string]any{"name": "l", "expression": every, "target": map[string]any{"kind": "process.event", "pid": "init:1000\n", "message": "x"}}},
		{"U+2028 in a summary", map[string]any{"name": "s", "expression": every, "target": map[string]any{"kind": "process.lifecycle", "pid": "init:1000", "action": "compact", "options": map[string]any{"summary": "a\u2028b"}}}},
		{"ESC in a description", map[string]any{"name": "d", "description": "\x1b]0;x\x07", "expression": every, "target": eventTarget("init:1000")}},
		{"a huge prompt", map[string]any{"name": "p", "expression": every, "target": map[string]any{"kind": "process.spawn", "prompt": strings.Repeat("x", MaxText+1)}}},
	}
	for _, b := range bad {
		if code := h.code(h.alice, "sched.add", b.args); code != 400 {
			t.Errorf("%s: code %d, want 400", b.why, code)
		}
	}
	s := h.add(h.alice, map[string]any{"name": "multi", "expression": every, "target": map[string]any{"kind": "process.spawn", "prompt": "line one\n\tline two"}})
	if code := h.code(h.alice, "sched.update", map[string]any{"id": s.ID, "patch": map[string]any{"description": "a\x1bb"}}); code != 400 {
		t.Errorf("update with ESC in the description: code %d", code)
	}
	var tab struct{ Text string }
	h.must(h.alice, "sched.crontab.get", map[string]any{}, &tab)
	if strings.Count(tab.Text, "\n") != 1 || !strings.Contains(tab.Text, "line one\\n\tline two") {
		t.Errorf("crontab %q", tab.Text)
	}
}

// FuzzSchedule: whatever an expression and the time, the next fire time
// is none or strictly after the time and within HorizonMs of it, so no
// schedule fires twice at once, and a retry is never due at once either.
// Both for expressions that pass validation and for any stored values.
func FuzzSchedule(f *testing.F) {
	f.Add(uint8(2), int64(math.MaxInt64), int64(0), false, "", "", time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC).UnixMilli())
	f.Add(uint8(2), int64(1000), int64(math.MinInt64), true, "", "", int64(math.MaxInt64))
	f.Add(uint8(0), int64(math.MaxInt64), int64(0), false, "", "", int64(0))
	f.Add(uint8(1), int64(math.MaxInt64), int64(0), false, "", "", int64(1)<<62)
	f.Add(uint8(3), int64(0), int64(0), false, "*/15 * * * *", "Europe/Amsterdam", time.Date(2026, 3, 29, 0, 59, 0, 0, time.UTC).UnixMilli())
	f.Add(uint8(3), int64(0), int64(0), false, "0 0 30 2 *", "", int64(math.MinInt64))
	f.Add(uint8(4), int64(1), int64(math.MaxInt64), true, "", "", int64(math.MaxInt64-5))
	f.Fuzz(func(t *testing.T, kind uint8, a, b int64, anchor bool, expr, tz string, now int64) {
		if len(expr) > 200 || len(tz) > 64 {
			return
		}
		var e Expression
		switch kind % 5 {
		case 0:
			e = Expression{Kind: "at", AtMs: a}
		case 1:
			e = Expression{Kind: "after", AfterMs: a}
		case 2:
			e = Expression{Kind: "every", EveryMs: a}
			if anchor {
				e.AnchorMs = &b
			}
		case 3:
			e = Expression{Kind: "cron", Expr: expr, Timezone: tz}
		case 4:
			// A one-shot with a retry policy of any values.
			e = Expression{Kind: "at", AtMs: a}
		}
		s := &Schedule{Expression: e, CreatedAtMs: now, RetryPolicy: &Retry{MaxAttempts: int(b % 20), BaseMs: a, MaxMs: b}}
		check := func(from, next int64) {
			if next != 0 && (next <= from || next > addSat(from, HorizonMs)) {
				t.Fatalf("%+v from %d: next %d", e, from, next)
			}
		}
		// Stored values, validated or not: a chain of next times.
		from := now
		for range 4 {
			next := nextAfter(s, from)
			check(from, next)
			if next == 0 {
				break
			}
			from = next
		}
		for attempt := range 12 {
			s.State.Attempt = attempt
			next, n := following(s, now, now, true, 0)
			check(now, next)
			if n > MaxRetryAttempts {
				t.Fatalf("attempt %d", n)
			}
		}
		if now < cronMinMs || now > cronMaxMs {
			return
		}
		// Validated: accepted expressions have a next time in range.
		if err := validateExpression(&e, time.UnixMilli(now)); err == nil && e.Kind != "cron" {
			if next := nextAfter(s, now); next == 0 {
				t.Fatalf("%+v accepted at %d has no next time", e, now)
			}
		}
	})
}
