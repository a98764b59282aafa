package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/proc/model"
)

// readTurn is a scripted turn that reads a file (a tool call, so that a
// checkpoint follows it).
const readTurn = `{"tools":[{"name":"Read","args":{"path":"~"}}]}`

// spawnWith spawns a task process of alice's with run settings.
func (h *ptHarness) spawnWith(args map[string]any) string {
	h.t.Helper()
	args["profile"] = "task"
	var r struct {
		Pid string `json:"pid"`
	}
	h.must(h.alice, "proc.spawn", args, &r)
	return r.Pid
}

// runInfo is proc.run.get of pid as alice.
func (h *ptHarness) runInfo(pid string) abi.RunInfo {
	h.t.Helper()
	var ri abi.RunInfo
	h.must(h.alice, "proc.run.get", map[string]any{"pid": pid}, &ri)
	return ri
}

// waitParked waits until pid's run is parked and returns its info.
func (h *ptHarness) waitParked(pid string) abi.RunInfo {
	h.t.Helper()
	return h.waitParkedAt(pid, 0)
}

// waitParkedAt waits until pid's run is parked at checkpoint seq or a
// later one (0: any) and returns its info: a run just decided at one
// checkpoint shows it until it moves on.
func (h *ptHarness) waitParkedAt(pid string, seq int64) abi.RunInfo {
	h.t.Helper()
	var ri abi.RunInfo
	eventually(h.t, func() bool { ri = h.runInfo(pid); return ri.Pending != nil && ri.Pending.Seq >= seq },
		func() string {
			return fmt.Sprintf("%s never parked at checkpoint %d or later: %+v %+v", pid, seq, ri, ri.Pending)
		})
	return ri
}

// directive sends a directive as alice and returns its result.
func (h *ptHarness) directive(pid string, d map[string]any) abi.DirectiveResult {
	h.t.Helper()
	var r abi.DirectiveResult
	h.must(h.alice, "proc.directive", map[string]any{"pid": pid, "directive": d}, &r)
	return r
}

// A spent budget parks the run (paused, no soft-continue); extend-budget
// resumes it, and the next model request shows the new budget.
func TestRunBudgetParksAndExtends(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawnWith(map[string]any{"budget": map[string]any{"turns": 2}, "graceMs": 100})
	s := h.scriptOf(1000, readTurn+"\n"+readTurn+"\n"+`{"text":"done"}`)
	r := h.send(h.alice, pid, "", "work")
	ri := h.waitParked(pid)
	if ri.State != abi.RunPaused || ri.Pending.Reason != "budget" || ri.Pending.Seq != 2 || ri.Used.Turns != 2 || ri.Pending.SoftContinueAt != nil {
		t.Fatalf("parked: %+v %+v", ri, ri.Pending)
	}
	time.Sleep(300 * time.Millisecond) // past the grace: a paused run does not continue by itself
	if ri := h.runInfo(pid); ri.Pending == nil || len(s.Requests()) != 2 {
		t.Fatalf("a paused run went on: %+v, %d requests", ri, len(s.Requests()))
	}
	d := h.directive(pid, map[string]any{"type": "extend-budget", "turns": 5})
	if d.Result != "delivered" || d.Checkpoint != 2 || len(d.EffectsApplied) != 1 || d.EffectsApplied[0] != "extend-budget" {
		t.Fatalf("extend-budget: %+v", d)
	}
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || !strings.Contains(reqs[2].System, "2 of 7 turns") {
		t.Fatalf("the request after the extension: %d requests; system %q", len(reqs), reqs[len(reqs)-1].System)
	}
	// The checkpoint is decided for good: a second directive for it is
	// already-decided, even with the run over; one it passed with no
	// decision is stale (409).
	var late abi.DirectiveResult
	h.must(h.alice, "proc.directive", map[string]any{"pid": pid, "checkpoint": 2, "directive": map[string]any{"type": "continue"}}, &late)
	if late.Result != "already-decided" || late.Checkpoint != 2 {
		t.Fatalf("a second directive for a decided checkpoint of a finished run: %+v", late)
	}
	if code := h.code(h.alice, "proc.directive", map[string]any{"pid": pid, "checkpoint": 1, "directive": map[string]any{"type": "continue"}}); code != 409 {
		t.Fatalf("a directive for a checkpoint passed with no decision: %d, want 409", code)
	}
}

// A supervised process's checkpoints wait for a directive: inject-message
// and swap-model reach the next model request; 50 concurrent directives
// for one checkpoint deliver exactly one, the others are already-decided,
// then and after the run has passed it.
func TestRunDirectiveEffectsAndFirstWins(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawnWith(map[string]any{"supervise": true, "graceMs": 60000})
	s := h.scriptOf(1000, readTurn+"\n"+readTurn+"\n"+`{"text":"done"}`)
	r := h.send(h.alice, pid, "", "work")
	ri := h.waitParked(pid)
	if ri.State != abi.RunAwaitingDecision || ri.Pending.Reason != "supervised" || ri.Pending.Seq != 1 || ri.Pending.Snapshot.ToolCalls != 1 {
		t.Fatalf("parked: %+v %+v", ri, ri.Pending)
	}
	var wg sync.WaitGroup
	results := make([]abi.DirectiveResult, 50)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			eff := []map[string]any{{"op": "inject-message", "role": "user", "content": "focus on the cache table"}, {"op": "swap-model", "model": "model-b"}, {"op": "no-such-op"}}
			// A loser finds the checkpoint decided, whether the run is
			// still parked at it or has passed it: already-decided.
			if err := h.call(h.alice, "proc.directive", map[string]any{"pid": pid, "checkpoint": 1, "directive": map[string]any{"type": "continue", "effects": eff}}, &results[i]); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	delivered := 0
	for _, res := range results {
		if res.Result == "delivered" {
			delivered++
			if strings.Join(res.EffectsApplied, ",") != "inject-message,swap-model" {
				t.Errorf("effects applied: %v", res.EffectsApplied)
			}
		} else if res.Result != "already-decided" {
			t.Errorf("result %q", res.Result)
		}
	}
	if delivered != 1 {
		t.Fatalf("%d directives delivered for one checkpoint, want 1", delivered)
	}
	ri = h.waitParkedAt(pid, 2)
	if ri.Pending.Seq != 2 {
		t.Fatalf("the next checkpoint: %+v", ri.Pending)
	}
	reqs := s.Requests()
	last := reqs[len(reqs)-1]
	if last.Model != "model-b" || !strings.Contains(lastUserOf(last), "focus on the cache table") {
		t.Fatalf("the request after the directive: model %q, last user %q", last.Model, lastUserOf(last))
	}
	var late abi.DirectiveResult
	h.must(h.alice, "proc.directive", map[string]any{"pid": pid, "checkpoint": 1, "directive": map[string]any{"type": "continue"}}, &late)
	if late.Result != "already-decided" {
		t.Fatalf("a directive for a decided checkpoint the run passed: %+v", late)
	}
	h.directive(pid, map[string]any{"type": "continue"})
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
}

// lastUserOf is the last user message of a request.
func lastUserOf(req model.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.User {
			return req.Messages[i].Content
		}
	}
	return ""
}

// A supervised checkpoint continues by itself after its grace; an
// unsupervised run passes its checkpoints without waiting.
func TestRunSoftContinue(t *testing.T) {
	h := newPTHarness(t)
	sup := h.spawnWith(map[string]any{"supervise": true, "graceMs": 200})
	h.scriptOf(1000, readTurn+"\n"+`{"text":"done"}`)
	r := h.send(h.alice, sup, "", "work")
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_directives WHERE run_id=? AND how='soft-continue'`, r.RunID); n != 1 {
		t.Fatalf("%d soft-continues, want 1", n)
	}
	free := h.spawn(h.alice, "free")
	h.scriptOf(1000, readTurn+"\n"+readTurn+"\n"+`{"text":"done"}`)
	t0 := time.Now()
	r = h.send(h.alice, free, "", "work")
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	if d := time.Since(t0); d > ptWait { // (parked, it would record soft-continues, counted below)
		t.Fatalf("an unsupervised run took %v", d)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_directives WHERE run_id=?`, r.RunID); n != 0 {
		t.Fatalf("an unsupervised run parked %d times", n)
	}
	if n := h.sqlCount(`SELECT checkpoint FROM proc_runs WHERE run_id=?`, r.RunID); n != 0 {
		t.Fatalf("an unsupervised run recorded checkpoint %d", n)
	}
}

// A paused run survives a restart: after it the run is parked at the
// same checkpoint, and a directive resumes it.
func TestRunPauseSurvivesRestart(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawnWith(map[string]any{"budget": map[string]any{"turns": 1}})
	h.scriptOf(1000, readTurn+"\n"+`{"text":"done"}`)
	r := h.send(h.alice, pid, "", "work")
	before := h.waitParked(pid)
	h.close()
	h.open()
	h.identities()
	after := h.waitParked(pid)
	if after.Pending.Seq != before.Pending.Seq || after.Pending.Reason != "budget" || after.RunID != r.RunID {
		t.Fatalf("after the restart: %+v, before %+v", after.Pending, before.Pending)
	}
	h.scriptOf(1000, `{"text":"done after the restart"}`)
	if d := h.directive(pid, map[string]any{"type": "extend-budget", "turns": 1}); d.Result != "delivered" {
		t.Fatalf("directive: %+v", d)
	}
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
}

// steer: a message sent in mode steer enters the running run at its next
// checkpoint; interrupt aborts the run and runs the message next.
func TestRunSteerAndInterrupt(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "w")
	s := h.scriptOf(1000, `{"tools":[{"name":"Read","args":{"path":"~"}}],"delayMs":400}
{"text":"done"}`)
	r := h.send(h.alice, pid, "", "work")
	var sr abi.SendResult
	h.must(h.alice, "proc.send", map[string]any{"pid": pid, "message": "also check the README", "mode": "steer"}, &sr)
	if sr.Status != "steered" || sr.RunID != r.RunID {
		t.Fatalf("steer: %+v", sr)
	}
	h.waitRun(r.RunID)
	reqs := s.Requests()
	if len(reqs) != 2 || lastUserOf(reqs[1]) != "also check the README" {
		t.Fatalf("the request after the steer: %d requests, last user %q", len(reqs), lastUserOf(reqs[len(reqs)-1]))
	}

	h.scriptOf(1000, `{"text":"slow","delayMs":3000}
{"text":"the interrupting answer"}`)
	r = h.send(h.alice, pid, "", "a long question")
	h.send(h.alice, pid, "", "queued before")
	var ir abi.SendResult
	h.must(h.alice, "proc.send", map[string]any{"pid": pid, "message": "urgent", "mode": "interrupt"}, &ir)
	if st := h.waitRun(r.RunID); st != "aborted" {
		t.Fatalf("the interrupted run: %s", st)
	}
	if st := h.waitRun(ir.RunID); st != "done" {
		t.Fatalf("the interrupting run: %s", st)
	}
	var first string
	h.k.Store.QueryRowContext(context.Background(), `SELECT content FROM proc_messages WHERE id=(SELECT first_message FROM proc_runs WHERE run_id=?)`, ir.RunID).Scan(&first)
	var text string
	json.Unmarshal([]byte(first), &text)
	if text != "urgent" {
		t.Fatalf("the interrupting run started with %q", text)
	}
}

// A tool call that runs past the process's check-in time makes the run
// check in at a checkpoint while the tool keeps running: the tool's end
// decides it; an abort directive ends the run and the tool with it.
func TestRunToolCheckin(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "w")
	if _, err := h.k.Store.Exec(context.Background(), `UPDATE proc_processes SET hil_allow='["shell.exec"]' WHERE pid=?`, pid); err != nil {
		t.Fatal(err)
	}
	ms := int64(150)
	h.must(h.alice, "proc.run.control", map[string]any{"pid": pid, "checkinMs": ms, "graceMs": 60000}, nil)
	// (The first tool runs long enough for the check-in to be seen at
	// load 10; the last would run 10 min.)
	h.scriptOf(1000, `{"tools":[{"name":"Shell","args":{"command":"sleep 3; echo slept"}}]}
{"text":"done"}
{"tools":[{"name":"Shell","args":{"command":"sleep 600"}}]}`)
	r := h.send(h.alice, pid, "", "work")
	ri := h.waitParked(pid)
	if ri.Pending.Reason != "tool-checkin" || ri.Pending.Snapshot.LastTool != "Shell" || ri.State != abi.RunAwaitingDecision {
		t.Fatalf("the check-in: %+v %+v", ri, ri.Pending)
	}
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_directives WHERE run_id=? AND how='tool-finished'`, r.RunID); n != 1 {
		t.Fatalf("the tool's end did not decide the check-in (%d)", n)
	}
	r = h.send(h.alice, pid, "", "more")
	h.waitParked(pid)
	t0 := time.Now()
	if d := h.directive(pid, map[string]any{"type": "abort", "reason": "too slow"}); d.Result != "delivered" {
		t.Fatalf("abort: %+v", d)
	}
	if st := h.waitRun(r.RunID); st != "aborted" || time.Since(t0) > ptWait {
		t.Fatalf("run %s after %v", st, time.Since(t0))
	}
}
