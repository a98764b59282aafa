package ipc

// Tests of the signal watches' limits against storms (issue 20, item 8).

import (
	"fmt"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestWatchRate: the deliveries of an owner's watches are rate-limited:
// past the bucket, a delivery waits, and the signals for the same watch
// that come meanwhile join it; when tokens come back, it goes as one
// event ("and n earlier signals").
// tick is the payload of the tests' signal test.tick: a process's.
type tick struct {
	Pid string `json:"pid"`
	N   int    `json:"n"`
}

func (t tick) SignalScope() (string, string) { return t.Pid, "" }

var testTick = abi.Signal[tick]{Name: "test.tick"}

func TestWatchRate(t *testing.T) {
	h := newHarness(t)
	r := &h.r.watch.rate
	r.Lock()
	r.burst, r.perSec = 3, 0 // three deliveries, and no refill until the test says
	r.Unlock()
	a, b := h.spawn(h.Alice, "watcher"), h.spawn(h.Alice, "watched")
	h.must(h.Alice, "signal.watch", map[string]any{"signal": "test.tick", "processId": b, "watcherPid": a, "once": false}, nil)
	for i := range 10 {
		kernel.Publish(h.K, testTick, tick{Pid: b, N: i}, kernel.Audience{Uids: []uint32{1000}})
	}
	waiting := func() (n, more int) {
		r.Lock()
		defer r.Unlock()
		if bk := r.owners[1000]; bk != nil {
			for _, d := range bk.byWatch {
				more += d.more
			}
			return len(bk.waiting), more
		}
		return 0, 0
	}
	eventually(t, func() bool { n, more := waiting(); return n == 1 && more == 6 },
		func() string {
			n, more := waiting()
			return fmt.Sprintf("%d deliveries wait, %d joined; want 1 and 6", n, more)
		})
	eventually(t, func() bool { return len(h.signalEvents(a)) == 3 },
		func() string { return fmt.Sprintf("%d signal events, want 3", len(h.signalEvents(a))) })
	r.Lock()
	r.perSec = 1000
	r.Unlock()
	h.r.flushWatches(1000)
	// The delivery is in the watcher's queue if a run of it is still
	// going (on a slower store, the run the first three started): it
	// reaches the history when that run ends.
	eventually(t, func() bool { return len(h.signalEvents(a)) == 4 },
		func() string { return fmt.Sprintf("%d signal events after the wait, want 4", len(h.signalEvents(a))) })
	ev := h.signalEvents(a)
	if len(ev) != 4 || !strings.Contains(ev[3], `"n":9`) || !strings.Contains(ev[3], "and 6 earlier signals") {
		t.Fatalf("after the wait: %d events, the last %q", len(ev), ev[len(ev)-1])
	}
}
