package sched

// Tests of targets: the proc syscalls a run makes, as whom, through the
// tests' proc room (procroom_test.go).

import (
	"context"
	"fmt"
	"reflect"
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
	if c := sends[len(sends)-1]; c.Uid != 1000 || !reflect.DeepEqual(*c.Args.(*abi.SendArgs), abi.SendArgs{Pid: aliceProc.Pid, Message: "tick", Event: true,
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
		!reflect.DeepEqual(*spawns[0].Args.(*abi.SpawnArgs), abi.SpawnArgs{Profile: "task", Label: "nightly-task", Prompt: "summarise the day"}) {
		t.Fatalf("proc.spawn calls %+v", spawns)
	}
	if pid != "p_1" {
		t.Fatalf("summary names %q, want proc's pid p_1", pid)
	}
}

// TestSpawnTargetSeedFields: the seed's process.spawn fields are the
// target's own: parentPid (one the owner can reach, else 404) and an
// assignment's context files reach proc.spawn; an attach with no
// workspaceId is a 400; mounts are a 501 "not supported yet" naming where
// they are planned, never an "unknown field" (400); a bad assignment is
// a 400.
func TestSpawnTargetSeedFields(t *testing.T) {
	h := newHarness(t, harnessStart)
	every := map[string]any{"kind": "every", "everyMs": 3_600_000}
	spawn := func(extra map[string]any) map[string]any {
		tg := map[string]any{"kind": "process.spawn", "profile": "task", "prompt": "summarise the day"}
		for k, v := range extra {
			tg[k] = v
		}
		return tg
	}
	assignment := map[string]any{"contextFiles": []map[string]any{{"name": "brief.md", "text": "the logs are in ~/logs"}}}
	s := h.add(h.alice, map[string]any{"name": "child", "expression": every,
		"target": spawn(map[string]any{"parentPid": "init:1000", "workspace": map[string]any{"mode": "none"}, "assignment": assignment})})
	h.step(time.Hour)
	if rs := h.runs(s.ID); len(rs) != 1 || rs[0].Status != "ok" {
		t.Fatalf("runs %+v", rs)
	}
	spawns := h.proc.callsOf("proc.spawn")
	want := abi.SpawnArgs{Profile: "task", Prompt: "summarise the day", ParentPid: "init:1000", Workspace: &abi.WorkspaceSpec{Mode: "none"},
		Assignment: &abi.Assignment{ContextFiles: []abi.ContextFile{{Name: "brief.md", Text: "the logs are in ~/logs"}}}}
	if len(spawns) != 1 || !reflect.DeepEqual(*spawns[0].Args.(*abi.SpawnArgs), want) {
		t.Fatalf("proc.spawn calls %+v, want %+v", spawns, want)
	}
	for _, tc := range []struct {
		name  string
		extra map[string]any
		code  int
		text  string
	}{
		{"ws-attach", map[string]any{"workspace": map[string]any{"mode": "attach"}}, 400, "workspaceId is required"},
		{"mounts", map[string]any{"mounts": []map[string]any{{"kind": "package-source", "packageId": "p"}}}, 501, "not supported yet: mounts (package mounts come with packages"},
		{"ws-bad", map[string]any{"workspace": map[string]any{"mode": "bogus"}}, 400, `workspace mode "bogus"`},
		{"assign-bad", map[string]any{"assignment": map[string]any{"contextFiles": []map[string]any{{"name": "", "text": "x"}}}}, 400, "a name is 1 to 256 bytes"},
		{"parent-bob", map[string]any{"parentPid": "init:1001"}, 404, "no such process"},
	} {
		err := h.call(h.alice, "sched.add", map[string]any{"name": tc.name, "expression": every, "target": spawn(tc.extra)}, nil)
		if abi.Code(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.text) || strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %v (code %d), want %d with %q", tc.name, err, abi.Code(err), tc.code, tc.text)
		}
	}
	ev := eventTarget("init:1000")
	ev["assignment"] = assignment
	if code := h.code(h.alice, "sched.add", map[string]any{"name": "ev", "expression": every, "target": ev}); code != 400 {
		t.Errorf("an event target with an assignment: %d, want 400", code)
	}
}
