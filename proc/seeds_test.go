package proc

// Where the seeds were contradicted (issue 21, section 3): the seed's own
// fields and answers, as the seed has them.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/proc/model"
)

// TestSpawnSeedFields: proc.spawn and proc.send take the seed's fields.
// A workspace of mode new or attach is refused with a 501 saying where
// workspaces are planned (it was accepted and ignored); mounts and
// media are 501s too, never "unknown field"; none and inherit spawn; an
// assignment's context files are in the process's instructions and
// autoStart starts its run; a parent the caller cannot reach is a 404.
func TestSpawnSeedFields(t *testing.T) {
	h := newPTHarness(t)
	for _, tc := range []struct {
		name string
		args map[string]any
		code int
		text string
	}{
		{"new", map[string]any{"workspace": map[string]any{"mode": "new", "label": "w", "kind": "thread"}}, 501, "not supported yet: workspace mode new (workspaces come with repositories; see docs/processes.md"},
		{"attach", map[string]any{"workspace": map[string]any{"mode": "attach", "workspaceId": "ws_1"}}, 501, "not supported yet: workspace mode attach"},
		{"mounts", map[string]any{"mounts": []map[string]any{{"kind": "package-source", "packageId": "pkg_1"}}}, 501, "not supported yet: mounts (package mounts come with packages"},
		{"bad mode", map[string]any{"workspace": map[string]any{"mode": "shared"}}, 400, `workspace mode "shared"`},
		{"bad field", map[string]any{"workspace": map[string]any{"mode": "none", "bogus": 1}}, 400, "bogus"},
		{"two names", map[string]any{"assignment": map[string]any{"contextFiles": []map[string]any{{"name": "a", "text": "1"}, {"name": "a", "text": "2"}}}}, 400, "given twice"},
		{"bob's parent", map[string]any{"parentPid": "init:1001"}, 404, "no such process"},
	} {
		tc.args["profile"] = "task"
		err := h.call(h.alice, "proc.spawn", tc.args, nil)
		if abi.Code(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.text) || (tc.code == 501 && strings.Contains(err.Error(), "unknown field")) {
			t.Errorf("%s: %v (code %d), want %d with %q", tc.name, err, abi.Code(err), tc.code, tc.text)
		}
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_processes WHERE uid=1000 AND profile='task'`); n != 0 {
		t.Fatalf("refused spawns made %d processes", n)
	}
	for _, ws := range []any{"none", map[string]any{"mode": "none"}, map[string]any{"mode": "inherit"}} {
		h.must(h.alice, "proc.spawn", map[string]any{"profile": "task", "parentPid": "init:1000", "workspace": ws}, nil)
	}

	s := h.scriptOf(1000, `{"text":"on it"}`)
	var r abi.SpawnResult
	h.must(h.alice, "proc.spawn", map[string]any{"profile": "task", "parentPid": "init:1000", "assignment": map[string]any{
		"contextFiles": []map[string]any{{"name": "task.md", "text": "count the cache misses"}, {"name": "notes.md", "text": "the table is hits"}},
		"autoStart":    true}}, &r)
	h.waitIdle(r.Pid)
	reqs := s.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].System, "## task.md\ncount the cache misses") || !strings.Contains(reqs[0].System, "## notes.md\nthe table is hits") {
		t.Fatalf("autoStart: %d requests: %+v", len(reqs), reqs)
	}
	if ev := h.findEvent(r.Pid, abi.EventProcessEvent); ev == nil || !strings.Contains(string(ev.Content), "assignment") {
		t.Fatalf("the autoStart event: %+v", ev)
	}
	var st abi.StatusResult
	h.must(h.alice, "proc.status", map[string]any{"pid": r.Pid}, &st)
	if st.Status.Parent != "init:1000" {
		t.Fatalf("parent %q", st.Status.Parent)
	}

	// Media are built (media_test.go): one without a mime type is a 400.
	err := h.call(h.alice, "proc.send", map[string]any{"pid": r.Pid, "message": "look", "media": []map[string]any{{"type": "image", "data": "iVBORw0KGgo="}}}, nil)
	if abi.Code(err) != 400 || !strings.Contains(err.Error(), "media[0]: mimeType is required") {
		t.Fatalf("proc.send with media: %v", err)
	}
}

// TestDirectiveFirstWinsForGood (seed 002): the first decision of a
// checkpoint stands: a second directive for it is already-decided while
// the run is parked at it, after the run has moved past it and after the
// run has ended; a checkpoint passed with no decision is stale (409).
// dollars is the seed's name of usd, in directives and in effects; the
// effects listed as applied are those that changed something.
func TestDirectiveFirstWinsForGood(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawnWith(map[string]any{"budget": map[string]any{"usd": 1, "turns": 3}})
	h.scriptOf(1000, strings.Repeat(readTurn+"\n", 4)+`{"text":"done"}`)
	r := h.send(h.alice, pid, "", "work")
	if ri := h.waitParked(pid); ri.Pending.Seq != 3 || ri.Pending.Reason != "budget" {
		t.Fatalf("parked: %+v", ri.Pending)
	}
	dir := func(seq int, d map[string]any) (abi.DirectiveResult, error) {
		var res abi.DirectiveResult
		err := h.call(h.alice, "proc.directive", map[string]any{"pid": pid, "checkpoint": seq, "directive": d}, &res)
		return res, err
	}
	if _, err := dir(1, map[string]any{"type": "continue"}); abi.Code(err) != 409 || !strings.Contains(err.Error(), "passed it with no decision") {
		t.Fatalf("a checkpoint passed with no decision: %v, want 409 stale", err)
	}
	res, err := dir(3, map[string]any{"type": "extend-budget", "dollars": 0.5, "turns": 1})
	if err != nil || res.Result != "delivered" || strings.Join(res.EffectsApplied, ",") != "extend-budget" {
		t.Fatalf("extend-budget with dollars: %+v, %v", res, err)
	}
	ri := h.waitParkedAt(pid, 4) // the extra turn is spent
	if ri.Budget.USD != 1.5 || ri.Budget.Turns != 4 {
		t.Fatalf("the budget after extend-budget dollars=0.5 turns=1: %+v", ri.Budget)
	}
	// The run has moved past checkpoint 3: a second directive for it is
	// already-decided, not stale.
	if res, err := dir(3, map[string]any{"type": "abort"}); err != nil || res.Result != "already-decided" || res.Checkpoint != 3 {
		t.Fatalf("a second directive for checkpoint 3, parked at 4: %+v, %v", res, err)
	}
	if res, err := dir(4, map[string]any{"type": "extend-budget", "usd": 1, "dollars": 2}); abi.Code(err) != 400 {
		t.Fatalf("usd and dollars that differ: %+v, %v, want 400", res, err)
	}
	eff := []map[string]any{
		{"op": "extend-budget", "tokens": 100},               // no token limit: changes nothing
		{"op": "extend-budget", "dollars": 0.25, "turns": 1}, // the seed's name
		{"op": "set-temperature", "temp": 1},
		{"op": "set-temperature", "temp": 1}, // the same again: nothing
		{"op": "swap-model", "model": "m2"},
		{"op": "no-such-op"},
	}
	res, err = dir(4, map[string]any{"type": "continue", "effects": eff})
	if err != nil || res.Result != "delivered" || strings.Join(res.EffectsApplied, ",") != "extend-budget,set-temperature,swap-model" {
		t.Fatalf("effects applied: %+v, %v", res, err)
	}
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	if ri := h.runInfo(pid); ri.Budget.USD != 1.75 || ri.Budget.Turns != 5 || ri.Model != "m2" {
		t.Fatalf("after the run: budget %+v, model %q", ri.Budget, ri.Model)
	}
	// The run has ended: its decisions still stand.
	if res, err := dir(4, map[string]any{"type": "continue"}); err != nil || res.Result != "already-decided" {
		t.Fatalf("a directive for a decided checkpoint of an ended run: %+v, %v", res, err)
	}
}

// gateProvider is a model whose first reply waits until release is
// closed (entered is closed when it starts waiting); every reply is
// text, so a run ends at its first answer.
type gateProvider struct {
	entered, release chan struct{}
	mu               sync.Mutex
	reqs             []model.Request
}

func (g *gateProvider) Name() string { return "gate" }

func (g *gateProvider) Complete(ctx context.Context, req model.Request, delta func(string)) (model.Response, error) {
	g.mu.Lock()
	g.reqs = append(g.reqs, req)
	first := len(g.reqs) == 1
	g.mu.Unlock()
	if first {
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			return model.Response{}, ctx.Err()
		}
	}
	return model.Response{Text: "done", StopReason: "end_turn"}, nil
}

func (g *gateProvider) requests() []model.Request {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.reqs)
}

// TestDirectiveBetweenCheckpoints (seed 002): a directive sent while the
// run is between checkpoints (its model call under way) is delivered
// and happens even when the run ends before another checkpoint: its
// settings at once, its message at the next model call (which starts
// the next run). It was answered "delivered" and lost.
func TestDirectiveBetweenCheckpoints(t *testing.T) {
	h := newPTHarness(t)
	g := &gateProvider{entered: make(chan struct{}), release: make(chan struct{})}
	h.mu.Lock()
	h.provs[1000] = g
	h.mu.Unlock()
	pid := h.spawn(h.alice, "w")
	r := h.send(h.alice, pid, "", "work")
	select {
	case <-g.entered:
	case <-time.After(ptWait):
		t.Fatal("the model was never called")
	}
	res := h.directive(pid, map[string]any{"type": "continue", "effects": []map[string]any{
		{"op": "swap-model", "model": "model-b"}, {"op": "inject-message", "role": "user", "content": "also check the README"}}})
	if res.Result != "delivered" || strings.Join(res.EffectsApplied, ",") != "swap-model,inject-message" {
		t.Fatalf("a directive between checkpoints: %+v", res)
	}
	if ri := h.runInfo(pid); ri.Model != "model-b" {
		t.Fatalf("the model after the directive: %q", ri.Model)
	}
	close(g.release)
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	var reqs []model.Request
	eventually(t, func() bool { reqs = g.requests(); return len(reqs) >= 2 },
		func() string {
			return fmt.Sprintf("%d model calls: the directive's message never reached the model", len(reqs))
		})
	if reqs[1].Model != "model-b" || lastUserOf(reqs[1]) != "also check the README" {
		t.Fatalf("the next model call: model %q, last user %q", reqs[1].Model, lastUserOf(reqs[1]))
	}
	h.waitIdle(pid)
}

// TestIPCFromNoProcessIs403 (seed 003): proc.ipc.send, proc.ipc.call,
// proc.ipc.delegate, signal.watch and signal.unwatch are a process's: a
// user who is no process and names none gets a 403 that says how to
// make the call (it was a 400).
func TestIPCFromNoProcessIs403(t *testing.T) {
	h := newPTHarness(t)
	worker := h.spawn(h.alice, "worker")
	for _, tc := range []struct {
		call string
		args map[string]any
		name string
	}{
		{"proc.ipc.send", map[string]any{"pid": worker, "message": "hi"}, "sourcePid"},
		{"proc.ipc.call", map[string]any{"pid": worker, "message": "hi"}, "sourcePid"},
		{"proc.ipc.send", map[string]any{"message": "hi"}, "sourcePid"},
		{"proc.ipc.delegate", map[string]any{"task": "count"}, "sourcePid"},
		{"signal.watch", map[string]any{"signal": "proc.run.finished", "processId": worker}, "watcherPid"},
		{"signal.unwatch", map[string]any{"key": "k"}, "watcherPid"},
	} {
		err := h.call(h.alice, tc.call, tc.args, nil)
		if abi.Code(err) != 403 || !strings.Contains(err.Error(), "the caller must be a process: call from a process, or name your process as "+tc.name) {
			t.Errorf("%s %v as a user: %v (code %d), want 403 saying how", tc.call, tc.args, err, abi.Code(err))
		}
	}
	// Named, the call is its owner's to make.
	src := h.spawn(h.alice, "source")
	h.must(h.alice, "signal.watch", map[string]any{"signal": "proc.run.finished", "processId": worker, "watcherPid": src}, nil)
}
