package sched

import (
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestLatenessSignal: a run the engine fires late reports, on
// sched.run.finished, how long after its due time it started (the seam
// the daemon's metrics read: gsv_schedule_lateness_seconds); a run made
// by hand reports none.
func TestLatenessSignal(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	var mu sync.Mutex
	var got []abi.SchedRunFinished
	h.k.Observe(func(ev *kernel.Event, _ kernel.Audience) {
		if p, ok := ev.Payload.(abi.SchedRunFinished); ok {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		}
	})
	s := h.add(h.alice, map[string]any{"name": "tick", "expression": map[string]any{"kind": "every", "everyMs": 60000},
		"target": map[string]any{"kind": "process.event", "pid": "init:1000", "message": "tick"}})
	h.step(150 * time.Second) // due at +60 s, fired at +150 s
	var r abi.SchedRunResult
	h.must(h.alice, "sched.run", map[string]any{"id": s.ID, "mode": "force"}, &r)
	h.waitFor("two sched.run.finished signals", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if got[0].LatenessMs == nil || *got[0].LatenessMs != 90000 {
		t.Errorf("the fired run's signal %+v, want latenessMs 90000", got[0])
	}
	if got[1].LatenessMs != nil {
		t.Errorf("the run by hand's signal %+v, want no latenessMs", got[1])
	}
}
