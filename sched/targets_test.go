package sched

// Tests of targets: the proc syscalls a run makes, as whom, through the
// tests' proc room (procroom_test.go).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// TestRunsAsOwner: a schedule's target syscall is made as its owner, so
// alice's process.event to bob's process is refused when it is added
// (404, also when root adds it for her) and fails with proc's error if it
// gets there anyway, while the same to her own process works.
func TestRunsAsOwner(t *testing.T) {
	h := newHarness(t, harnessStart)
	var bobProc struct{ Pid string }
	h.must(h.bob, "proc.spawn", map[string]any{"profile": "task", "label": "bobs"}, &bobProc)
	var aliceProc struct{ Pid string }
	h.must(h.alice, "proc.spawn", map[string]any{"profile": "task", "label": "alices"}, &aliceProc)

	type result struct {
		Ran     int
		Results []RunResult
	}
	run := func(s Schedule) RunResult {
		var r result
		h.must(h.alice, "sched.run", map[string]any{"id": s.ID, "mode": "force"}, &r)
		return r.Results[0]
	}
	toBobArgs := map[string]any{"name": "to-bob", "expression": map[string]any{"kind": "every", "everyMs": 3_600_000}, "target": eventTarget(bobProc.Pid)}
	if code := h.code(h.alice, "sched.add", toBobArgs); code != 404 {
		t.Fatalf("alice adds an event to bob's process: code %d, want 404", code)
	}
	toBobArgs["ownerUid"] = 1000
	if code := h.code(h.root, "sched.add", toBobArgs); code != 404 {
		t.Fatalf("root adds for alice an event to bob's process: code %d, want 404", code)
	}
	delete(toBobArgs, "ownerUid")
	toBobArgs["target"] = eventTarget("init:1000")
	toBob := h.add(h.alice, toBobArgs)
	if code := h.code(h.alice, "sched.update", map[string]any{"id": toBob.ID, "patch": map[string]any{"target": eventTarget(bobProc.Pid)}}); code != 404 {
		t.Fatalf("alice updates her target to bob's process: code %d, want 404", code)
	}
	// Stored anyway (as by an older version): the run, made as alice, fails.
	if _, err := h.m.st.Exec(context.Background(), `UPDATE sched_schedules SET target=? WHERE id=?`,
		fmt.Sprintf(`{"kind":"process.event","pid":%q,"message":"tick"}`, bobProc.Pid), toBob.ID); err != nil {
		t.Fatal(err)
	}
	r := run(toBob)
	if r.Status != "error" || !strings.Contains(r.Error, "no such process") {
		t.Fatalf("alice -> bob's process: %+v, want proc's 'no such process'", r)
	}
	if st := h.sched(toBob.ID).State; str(st.LastStatus) != "error" || !strings.Contains(str(st.LastError), bobProc.Pid) {
		t.Fatalf("state %+v", st)
	}
	toSelf := h.add(h.alice, map[string]any{"name": "to-self", "expression": map[string]any{"kind": "every", "everyMs": 3_600_000}, "target": eventTarget(aliceProc.Pid)})
	if r := run(toSelf); r.Status != "ok" || r.Summary != "proc.send ok" {
		t.Fatalf("alice -> her process: %+v", r)
	}
	// proc.send {event:true}, made as alice, delivers it as a process event
	// of kind schedule.tick, traced to its schedule.
	sends := h.proc.callsOf("proc.send")
	if len(sends) == 0 {
		t.Fatalf("no proc.send reached proc")
	}
	if c := sends[len(sends)-1]; c.Uid != 1000 || *c.Args.(*abi.SendArgs) != (abi.SendArgs{Pid: aliceProc.Pid, Message: "tick", Event: true,
		Kind: abi.EventScheduleTick, TraceID: "sched:" + toSelf.ID}) {
		t.Fatalf("proc.send %+v as uid %d", c.Args, c.Uid)
	}
	// A lifecycle target, also as alice: reset of her own conversation.
	reset := h.add(h.alice, map[string]any{"name": "reset", "expression": map[string]any{"kind": "every", "everyMs": 3_600_000},
		"target": map[string]any{"kind": "process.lifecycle", "pid": aliceProc.Pid, "action": "reset"}})
	if r := run(reset); r.Status != "ok" || r.Summary != "proc.conversation.reset ok" {
		t.Fatalf("reset: %+v", r)
	}
	resetBob := map[string]any{"name": "reset-bob", "expression": map[string]any{"kind": "every", "everyMs": 3_600_000},
		"target": map[string]any{"kind": "process.lifecycle", "pid": bobProc.Pid, "action": "reset"}}
	if code := h.code(h.alice, "sched.add", resetBob); code != 404 {
		t.Fatalf("reset of bob's process as alice: code %d, want 404", code)
	}
	missingConv := map[string]any{"name": "reset-conv", "expression": map[string]any{"kind": "every", "everyMs": 3_600_000},
		"target": map[string]any{"kind": "process.lifecycle", "pid": aliceProc.Pid, "conversationId": "nosuch", "action": "reset"}}
	if code := h.code(h.alice, "sched.add", missingConv); code != 404 {
		t.Fatalf("reset of a conversation that does not exist: code %d, want 404", code)
	}
}

// TestSpawnTarget: a process.spawn target makes a process owned by the
// schedule's owner.
func TestSpawnTarget(t *testing.T) {
	h := newHarness(t, harnessStart)
	s := h.add(h.alice, map[string]any{"name": "nightly", "expression": map[string]any{"kind": "every", "everyMs": 3_600_000},
		"target": map[string]any{"kind": "process.spawn", "profile": "task", "label": "nightly-task", "prompt": "summarise the day"}})
	if s.Target.Profile != "task" {
		t.Fatalf("target %+v", s.Target)
	}
	h.step(time.Hour)
	rs := h.runs(s.ID)
	if len(rs) != 1 || rs[0].Status != "ok" || !strings.HasPrefix(str(rs[0].Summary), "spawned ") {
		t.Fatalf("runs %+v", rs)
	}
	pid := strings.TrimPrefix(str(rs[0].Summary), "spawned ")
	spawns := h.proc.callsOf("proc.spawn")
	if len(spawns) != 1 || spawns[0].Uid != 1000 ||
		*spawns[0].Args.(*abi.SpawnArgs) != (abi.SpawnArgs{Profile: "task", Label: "nightly-task", Prompt: "summarise the day"}) {
		t.Fatalf("proc.spawn calls %+v", spawns)
	}
	if pid != "p_1" {
		t.Fatalf("summary names %q, want proc's pid p_1", pid)
	}
}
