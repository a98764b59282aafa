package sched

import (
	"context"
	"reflect"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestScheduleNarrowing: a schedule added or changed by a narrowed caller
// (a token made with --process) keeps the narrowing, across a restart,
// and every run of it makes its target call with that narrowing (so that
// proc carries it into the work: docs/processes.md); a run forced by a
// narrowed caller is narrowed by it; a schedule nobody narrowed runs as
// its owner with no narrowing.
func TestScheduleNarrowing(t *testing.T) {
	h := newHarness(t, harnessStart)
	ci := &abi.ProcessCap{Networks: []string{abi.NetworkNone}, Mounts: []abi.CapMount{{Prefix: "~/ci", Mode: abi.MountRW}}}
	// token is alice attached with a token made with --process ci.
	token := func() *kernel.Identity { id := *h.alice; id.Process = ci; return &id }
	every := map[string]any{"kind": "every", "everyMs": 3_600_000}
	// lastCap is the narrowing of the last target call of schedule s.
	lastCap := func(s Schedule) *abi.ProcessCap {
		t.Helper()
		var last *procCall
		for _, c := range h.proc.callsOf("proc.send") {
			if c.Args.(*abi.SendArgs).TraceID == "sched:"+s.ID {
				last = &c
			}
		}
		for _, c := range h.proc.callsOf("proc.spawn") {
			if c.Args.(*abi.SpawnArgs).Label == s.Name {
				last = &c
			}
		}
		if last == nil {
			t.Fatalf("%s made no target call", s.Name)
		}
		if last.Uid != 1000 {
			t.Fatalf("%s's target call was made as uid %d", s.Name, last.Uid)
		}
		return last.Cap
	}
	type result struct{ Results []RunResult }
	force := func(id *kernel.Identity, s Schedule) {
		t.Helper()
		var r result
		h.must(id, "sched.run", map[string]any{"id": s.ID, "mode": "force"}, &r)
		if len(r.Results) != 1 || r.Results[0].Status != "ok" {
			t.Fatalf("forced run of %s: %+v", s.Name, r.Results)
		}
	}

	byToken := h.add(token(), map[string]any{"name": "by-token", "expression": every, "target": eventTarget("init:1000")})
	spawnByToken := h.add(token(), map[string]any{"name": "spawn-by-token", "expression": every,
		"target": map[string]any{"kind": "process.spawn", "profile": "task", "label": "spawn-by-token", "prompt": "go"}})
	changed := h.add(h.alice, map[string]any{"name": "changed", "expression": every, "target": eventTarget("init:1000")})
	h.must(token(), "sched.update", map[string]any{"id": changed.ID, "patch": map[string]any{"description": "touched by the token"}}, nil)
	wide := h.add(h.alice, map[string]any{"name": "wide", "expression": every, "target": eventTarget("init:1000")})
	// A crontab written with the token: its new line is narrowed, the
	// lines left as they were are not changed.
	var tab abi.CrontabGetResult
	h.must(h.alice, "sched.crontab.get", map[string]any{}, &tab)
	h.must(token(), "sched.crontab.set", map[string]any{"text": tab.Text + "@every 1h event init:1000 from-cron # name=cron\n"}, nil)
	ss, err := h.m.query(context.Background(), `WHERE owner_uid=? AND name='cron'`, 1000)
	if err != nil || len(ss) != 1 {
		t.Fatalf("the crontab's schedule: %+v %v", ss, err)
	}
	cron := ss[0]
	narrowed := []Schedule{byToken, spawnByToken, changed, cron}

	check := func(when string) {
		t.Helper()
		for _, s := range narrowed {
			if got := h.sched(s.ID).Cap; !reflect.DeepEqual(got, ci) {
				t.Errorf("%s: %s stores the narrowing %+v, want %+v", when, s.Name, got, ci)
			}
			if got := lastCap(s); !reflect.DeepEqual(got, ci) {
				t.Errorf("%s: %s's run narrowed by %+v, want %+v", when, s.Name, got, ci)
			}
		}
		if got := h.sched(wide.ID).Cap; got != nil {
			t.Errorf("%s: a schedule nobody narrowed stores %+v", when, got)
		}
		if got := lastCap(wide); got != nil {
			t.Errorf("%s: a schedule nobody narrowed ran narrowed by %+v", when, got)
		}
	}
	h.step(time.Hour)
	check("the engine's run")
	h.restart()
	h.step(time.Hour)
	check("after a restart")
	for _, s := range narrowed {
		force(h.alice, s)
	}
	check("forced by the owner")

	// The token forces a run of the wide schedule: that run is narrowed,
	// the schedule is not.
	force(token(), wide)
	if got := lastCap(wide); !reflect.DeepEqual(got, ci) {
		t.Errorf("a run forced with the token narrowed by %+v, want %+v", got, ci)
	}
	if got := h.sched(wide.ID).Cap; got != nil {
		t.Errorf("a forced run narrowed the schedule: %+v", got)
	}
	h.step(time.Hour)
	if got := lastCap(wide); got != nil {
		t.Errorf("the engine's next run of the wide schedule narrowed by %+v", got)
	}
}
