package proc

// Tests of the limits against storms (issue 20): a schedule's ticks
// coalesce in a process's queue (item 7), a user's processes are bounded
// (item 13), watches end with their process (item 8; their rate is the
// ipc room's, ipc/watch_test.go), and calls never delivered are
// reconciled at a start (item 14).

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/vfs"
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

// TestProcessLimit: a user has at most config/proc/max_processes
// processes besides their init (256 by default; root's
// users/<uid>/proc/max_processes for one user): one more, by proc.spawn,
// a spawn line of /proc/ctl (EBUSY from the write) or a delegation that
// spawns its worker, is a 409 naming the key that stores nothing. Their
// init is always theirs; root is not counted.
func TestProcessLimit(t *testing.T) {
	h := newPTHarness(t)
	count := func(uid uint32) int {
		return h.sqlCount(`SELECT count(*) FROM proc_processes WHERE uid=?`, uid)
	}
	for range DefaultMaxProcesses {
		h.spawn(h.alice, "")
	}
	err := h.call(h.alice, "proc.spawn", map[string]any{"profile": "task"}, nil)
	if abi.Code(err) != 409 || !strings.Contains(err.Error(), "config/proc/max_processes") {
		t.Fatalf("the spawn over the default limit: %v", err)
	}
	if n := count(1000); n != DefaultMaxProcesses+1 {
		t.Fatalf("alice has %d processes, want %d and her init", n, DefaultMaxProcesses)
	}
	err = h.writeFile(h.alice, "/proc/ctl", "spawn task\n")
	if vfs.Errno(err) != syscall.EBUSY {
		t.Fatalf("a spawn line over the limit: %v, want EBUSY", err)
	}
	if code := h.code(h.alice, "proc.spawn", map[string]any{"profile": "init"}); code != 0 {
		t.Fatalf("spawning her init at the limit: code %d", code)
	}
	if code := h.code(h.alice, "proc.ipc.delegate", map[string]any{"sourcePid": init0(1000), "task": "work"}); code != 409 {
		t.Fatalf("a delegation that spawns over the limit: code %d", code)
	}

	for _, c := range []struct {
		key, value string
		want       int
	}{
		{"config/proc/max_processes", "2", 2},
		{"users/1001/proc/max_processes", "4", 4},
		{"users/1001/proc/max_processes", "-1", 2}, // not a limit: ignored
	} {
		h.must(h.root, "sys.config.set", map[string]any{"key": c.key, "value": c.value}, nil)
		for i := count(1001) - 1; i < c.want; i++ {
			h.spawn(h.bob, fmt.Sprintf("b%d", i))
		}
		if code := h.code(h.bob, "proc.spawn", map[string]any{"profile": "task"}); code != 409 {
			t.Errorf("%s=%s: the spawn over the limit: code %d", c.key, c.value, code)
		}
	}
	h.must(h.root, "sys.config.set", map[string]any{"key": "config/proc/max_processes", "value": "0"}, nil)
	for range 3 {
		h.spawn(h.root, "")
	}
}

// signalEvents are the texts of the signal events in pid's default
// conversation.
func (h *ptHarness) signalEvents(pid string) []string {
	h.t.Helper()
	var out []string
	for _, m := range h.messages(pid) {
		if m.Kind == abi.EventSignal {
			out = append(out, ptText(h.t, m))
		}
	}
	return out
}

// TestKillEndsWatches: a killed process's watches are removed with it: a
// signal they watched for no longer reaches it (and starts no run).
func TestKillEndsWatches(t *testing.T) {
	h := newPTHarness(t)
	a, b := h.spawn(h.alice, "watcher"), h.spawn(h.alice, "watched")
	h.must(h.alice, "signal.watch", map[string]any{"signal": "proc.run.finished", "processId": b, "watcherPid": a, "once": false}, nil)
	h.must(h.alice, "signal.watch", map[string]any{"signal": "process.lifecycle", "processId": b, "watcherPid": a, "key": "k"}, nil)
	h.must(h.alice, "proc.kill", map[string]any{"pid": a}, nil)
	var list abi.WatchListResult
	h.must(h.alice, "signal.list", map[string]any{"pid": a}, &list)
	if len(list.Watches) != 0 || h.sqlCount(`SELECT count(*) FROM proc_watches WHERE watcher_pid=?`, a) != 0 {
		t.Fatalf("a killed process keeps its watches: %+v", list.Watches)
	}
	r := h.send(h.alice, b, "", "finish a run")
	h.waitRun(r.RunID)
	h.waitIdle(b)
	h.waitIdle(a)
	if ev := h.signalEvents(a); len(ev) != 0 || h.sqlCount(`SELECT count(*) FROM proc_runs WHERE pid=?`, a) != 0 {
		t.Fatalf("a killed process got signals: %v", ev)
	}
}

// TestUndeliveredCallAbandoned: the state a kill -9 leaves between the
// record of a call and the delivery of its request (the call recorded,
// the request not in the target's conversation, the caller without the
// call id), taken as a snapshot of the real SQLite file, is reconciled
// at the next start: the call ends "abandoned", with its reason, and its
// source gets no ipc.timeout for an id it never had. A call delivered
// before the stop is kept and answered as before.
func TestUndeliveredCallAbandoned(t *testing.T) {
	if kerneltest.Postgres() {
		t.Skip("a crash is a snapshot of the SQLite file (VACUUM INTO)")
	}
	h := newPTHarness(t)
	gate := benchGateProvider{open: make(chan struct{})} // never opens: runs wait
	h.mu.Lock()
	h.provs[1000] = gate
	h.mu.Unlock()
	a, b := h.spawn(h.alice, "caller"), h.spawn(h.alice, "callee")
	// A call delivered in full, whose run waits for the model: it stays
	// pending, and times out after the restart (its deadline passes).
	var kept abi.IpcCallResult
	h.must(h.alice, "proc.ipc.call", map[string]any{"pid": b, "sourcePid": a, "message": "delivered", "timeoutMs": 1000}, &kept)
	h.waitRun(kept.RunID, "running")
	// The target's process held: the next call is recorded, and its
	// delivery waits.
	pr := h.m.run.proc(b, 1000)
	pr.mu.Lock()
	done := make(chan error, 1)
	go func() {
		done <- h.call(h.alice, "proc.ipc.call", map[string]any{"pid": b, "sourcePid": a, "message": "never delivered", "timeoutMs": 1000}, nil)
	}()
	eventually(t, func() bool {
		return h.sqlCount(`SELECT count(*) FROM proc_ipc_calls WHERE call_id<>?`, kept.CallID) == 1
	},
		func() string { return "the second call is not recorded" })
	snap := filepath.Join(t.TempDir(), "crash.db")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.dir, "gsv.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`VACUUM INTO ?`, snap); err != nil {
		t.Fatal(err)
	}
	db.Close()
	pr.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var lost string
	h.k.Store.QueryRowContext(context.Background(), `SELECT call_id FROM proc_ipc_calls WHERE call_id<>?`, kept.CallID).Scan(&lost)

	// The restart after the kill -9: the state on disk is the snapshot.
	h.close()
	for _, f := range []string{"gsv.db-wal", "gsv.db-shm"} {
		os.Remove(filepath.Join(h.dir, f))
	}
	if err := os.Rename(snap, filepath.Join(h.dir, "gsv.db")); err != nil {
		t.Fatal(err)
	}
	h.open()
	h.identities()
	state := func(id string) string {
		var s string
		h.k.Store.QueryRowContext(context.Background(), `SELECT state FROM proc_ipc_calls WHERE call_id=?`, id).Scan(&s)
		return s
	}
	eventually(t, func() bool { return state(kept.CallID) == "timed_out" },
		func() string { return "the delivered call: " + state(kept.CallID) + ", want timed_out" })
	if s := state(lost); s != "abandoned" {
		t.Fatalf("the call never delivered is %q, want abandoned", s)
	}
	var list abi.IpcListResult
	h.must(h.alice, "proc.ipc.list", map[string]any{"pid": a}, &list)
	for _, c := range list.Calls {
		if c.CallID == lost && !strings.Contains(c.Reason, "never got its id") {
			t.Errorf("the abandoned call's reason: %q", c.Reason)
		}
	}
	var timeouts []string
	eventually(t, func() bool {
		timeouts = timeouts[:0]
		for _, m := range h.messages(a) {
			if m.Kind == abi.EventIpcTimeout {
				timeouts = append(timeouts, ptText(t, m))
			}
		}
		return len(timeouts) > 0
	}, func() string { return "no ipc.timeout for the delivered call" })
	if len(timeouts) != 1 || !strings.Contains(timeouts[0], kept.CallID) {
		t.Fatalf("the source's ipc.timeout events: %q, want one, of %s", timeouts, kept.CallID)
	}
}
