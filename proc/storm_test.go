package proc

// Tests of the limits against storms (issue 20): a schedule's ticks
// coalesce in a process's queue (item 7), a user's processes are bounded
// (item 13), watches end with their process and their deliveries are
// rate-limited (item 8), and calls never delivered are reconciled at a
// start (item 14).

import (
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// TestScheduleTicksCoalesce: while a process is busy, a schedule.tick
// whose schedule (trace) has a tick waiting in the queue already is not
// queued again (proc.send answers coalesced with the waiting run's id),
// as a pending Unix signal is not; another schedule's tick, and any
// other message, still queue. Once the waiting tick has started, the
// next one queues again.
func TestScheduleTicksCoalesce(t *testing.T) {
	h := newPTHarness(t)
	gate := benchGateProvider{open: make(chan struct{})}
	h.mu.Lock()
	h.provs[1000] = gate
	h.mu.Unlock()
	pid := h.spawn(h.alice, "ticked")
	first := h.send(h.alice, pid, "", "keep busy")
	h.waitRun(first.RunID, "running")
	tick := func(trace string) abi.SendResult {
		t.Helper()
		var r abi.SendResult
		h.must(h.alice, "proc.send", map[string]any{"pid": pid, "message": "tick " + trace, "event": true, "kind": abi.EventScheduleTick, "traceId": trace}, &r)
		return r
	}
	a1 := tick("sched:a")
	if !a1.Queued || a1.Coalesced {
		t.Fatalf("the first tick of a: %+v", a1)
	}
	for range 5 {
		if a := tick("sched:a"); !a.Coalesced || a.RunID != a1.RunID || a.Status != "coalesced" {
			t.Fatalf("a tick of a while one waits: %+v, want coalesced into %s", a, a1.RunID)
		}
	}
	if b := tick("sched:b"); !b.Queued || b.Coalesced {
		t.Fatalf("a tick of b: %+v", b)
	}
	h.send(h.alice, pid, "", "a user message")
	if n := h.sqlCount(`SELECT count(*) FROM proc_queue WHERE pid=?`, pid); n != 3 {
		t.Fatalf("%d messages queued, want 3 (one tick of a, one of b, the message)", n)
	}
	close(gate.open)
	h.waitIdle(pid)
	var ticks int
	for _, m := range h.history(h.alice, pid, "").Messages {
		if m.Kind == abi.EventScheduleTick && strings.Contains(ptText(t, m), "tick sched:a") {
			ticks++
		}
	}
	if ticks != 1 {
		t.Fatalf("%d ticks of a in the conversation, want 1", ticks)
	}
}
