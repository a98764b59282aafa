package sched

// Tests of the engine (timer heap, loop) with a fake clock, and the harness
// the scheduler's tests share: an in-process kernel with the tests' proc
// room (procroom_test.go), the users alice and bob, and the scheduler on a
// fakeClock.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
)

// waitLimit bounds every real-time wait of these tests: a guard against a
// hang that holds on a 2-core machine at load 10, never a measure of speed.
const waitLimit = time.Minute

// fakeClock is a Clock whose time moves only by Advance. After returns a
// channel that Advance fires once the time reaches the deadline (a
// non-positive duration fires at once).
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	calls   int // After calls
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{c.now.Add(d), ch})
	return ch
}

// Advance moves the time forward by d and fires the waiters it reaches.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			keep = append(keep, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = keep
}

func (c *fakeClock) afterCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *fakeClock) ms() int64 { return c.Now().UnixMilli() }

// sleepsUntil says whether an After waits for the time ms (Unix ms): the
// engine's loop asleep until then.
func (c *fakeClock) sleepsUntil(ms int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.at.UnixMilli() == ms {
			return true
		}
	}
	return false
}

// harness is a kernel on a temporary state dir with the tests' proc room
// and the scheduler added; it can be closed and reopened on the same dir
// (a restart). The proc room lives across restarts.
type harness struct {
	t     testing.TB
	dir   string
	clock *fakeClock
	opts  Options

	k     *kernel.Kernel
	space *ns.Space
	proc  *procRoom
	m     *Manager

	root, alice, bob *kernel.Identity

	hmu  sync.Mutex
	hook func(ctx context.Context, s *Schedule) (string, bool, error)
}

var quietLog = kerneltest.Quiet()

// harnessStart is the fake clock's default start: a Monday, 10:00 UTC.
var harnessStart = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func newHarness(t testing.TB, start time.Time) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: newFakeClock(start), proc: newProcRoom()}
	h.open()
	t.Cleanup(h.close)
	ctx := context.Background()
	for i, name := range []string{"alice", "bob"} {
		args := fmt.Sprintf(`{"username":%q,"hostUid":%d}`, name, 1001+i)
		if _, err := h.k.Call(ctx, h.k.KernelCaller(), "sys.user.add", json.RawMessage(args)); err != nil {
			t.Fatal(err)
		}
	}
	h.identities()
	return h
}

// open opens the kernel on h.dir and adds the proc room and the
// scheduler.
func (h *harness) open() {
	h.t.Helper()
	k, err := kernel.Open(kernel.Config{StateDir: h.dir, Store: kerneltest.Store(h.t, h.dir), Logger: quietLog})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx := context.Background()
	if err := k.EnsureSetup(ctx, "root", 0); err != nil {
		h.t.Fatal(err)
	}
	space := ns.New(k)
	if err := space.Add(ctx, h.proc); err != nil {
		h.t.Fatal(err)
	}
	opts := h.opts
	opts.Clock, opts.Logger, opts.testExec = h.clock, quietLog, h.exec
	m, err := Open(space, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := space.Add(ctx, m); err != nil {
		h.t.Fatal(err)
	}
	h.k, h.space, h.m = k, space, m
}

// close closes the rooms (the scheduler first), then the kernel.
func (h *harness) close() {
	if h.k == nil {
		return
	}
	h.space.Close()
	h.k.Close()
	h.k, h.space, h.m = nil, nil, nil
}

func (h *harness) restart() {
	h.t.Helper()
	h.close()
	h.open()
	h.identities()
}

func (h *harness) identities() {
	h.t.Helper()
	ctx := context.Background()
	var err error
	if h.root, err = h.k.IdentityOf(ctx, 0); err != nil {
		h.t.Fatal(err)
	}
	if h.alice, err = h.k.IdentityOf(ctx, 1000); err != nil {
		h.t.Fatal(err)
	}
	if h.bob, err = h.k.IdentityOf(ctx, 1001); err != nil {
		h.t.Fatal(err)
	}
	if h.alice.Username != "alice" || h.bob.Username != "bob" {
		h.t.Fatalf("users: %+v %+v", h.alice, h.bob)
	}
}

// exec is the scheduler's testExec: it defers to the hook the test set.
func (h *harness) exec(ctx context.Context, s *Schedule) (string, bool, error) {
	h.hmu.Lock()
	f := h.hook
	h.hmu.Unlock()
	if f == nil {
		return "", false, nil
	}
	return f(ctx, s)
}

func (h *harness) setHook(f func(ctx context.Context, s *Schedule) (string, bool, error)) {
	h.hmu.Lock()
	h.hook = f
	h.hmu.Unlock()
}

// call makes a syscall as id with JSON args, as a request frame does, and
// decodes the result through JSON into out.
func (h *harness) call(id *kernel.Identity, name string, args any, out any) error {
	h.t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := h.k.Call(context.Background(), &kernel.Caller{Identity: id}, name, json.RawMessage(b))
	if err != nil {
		return err
	}
	if out != nil {
		rb, err := json.Marshal(res)
		if err != nil {
			h.t.Fatalf("%s: encoding result: %v", name, err)
		}
		if err := json.Unmarshal(rb, out); err != nil {
			h.t.Fatalf("%s: result %s: %v", name, rb, err)
		}
	}
	return nil
}

func (h *harness) must(id *kernel.Identity, name string, args any, out any) {
	h.t.Helper()
	if err := h.call(id, name, args, out); err != nil {
		h.t.Fatalf("%s %v: %v", name, args, err)
	}
}

// code is the syscall code of the call's error (0 on success).
func (h *harness) code(id *kernel.Identity, name string, args any) int {
	h.t.Helper()
	if err := h.call(id, name, args, nil); err != nil {
		return abi.Code(err)
	}
	return 0
}

// add makes a schedule as id through sched.add and returns it.
func (h *harness) add(id *kernel.Identity, args map[string]any) Schedule {
	h.t.Helper()
	var res struct{ Schedule Schedule }
	h.must(id, "sched.add", args, &res)
	return res.Schedule
}

// sched reads schedule id from the store.
func (h *harness) sched(id string) Schedule {
	h.t.Helper()
	s, err := h.m.get(context.Background(), id)
	if err != nil {
		h.t.Fatalf("schedule %s: %v", id, err)
	}
	return *s
}

// runs lists the run history of schedule id, oldest first.
func (h *harness) runs(id string) []Run {
	h.t.Helper()
	rows, err := h.k.Store.QueryContext(context.Background(), `SELECT id,schedule_id,name,owner_uid,scheduled_at,started_at,finished_at,status,error,summary,duration_ms
		FROM sched_runs WHERE schedule_id=? ORDER BY id`, id)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		if err := rows.Scan(&r.ID, &r.ScheduleID, &r.Name, &r.OwnerUid, &r.ScheduledAtMs, &r.StartedAtMs, &r.FinishedAtMs,
			&r.Status, &r.Error, &r.Summary, &r.DurationMs); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// armed returns the engine's fire time for id (0: not armed).
func (h *harness) armed(id string) int64 {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.m.next[id]
}

// idleSig describes the engine if it looks idle, else returns "": no kick
// pending, no run under way, every enabled schedule with a next time
// armed at exactly that time, in the future.
func (h *harness) idleSig() string {
	if len(h.m.kick) > 0 {
		return ""
	}
	h.m.mu.Lock()
	running := len(h.m.running)
	h.m.mu.Unlock()
	if running > 0 {
		return ""
	}
	now := h.clock.ms()
	rows, err := h.k.Store.QueryContext(context.Background(), `SELECT id,next_run_at FROM sched_schedules WHERE enabled=1 AND next_run_at IS NOT NULL`)
	if err != nil {
		h.t.Fatal(err)
	}
	next := map[string]int64{}
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			h.t.Fatal(err)
		}
		next[id] = at
	}
	rows.Close()
	h.m.mu.Lock()
	for id, at := range next {
		if at <= now || h.m.next[id] != at {
			h.m.mu.Unlock()
			return ""
		}
	}
	h.m.mu.Unlock()
	var runs int
	h.k.Store.QueryRowContext(context.Background(), `SELECT count(*) FROM sched_runs`).Scan(&runs)
	return fmt.Sprintf("%d/%d", h.clock.afterCalls(), runs)
}

// settle waits until the engine has dispatched and finished everything
// that is due and sleeps again: idleSig unchanged over several polls.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	last, stable := "", 0
	for {
		sig := h.idleSig()
		if sig != "" && sig == last {
			if stable++; stable >= 4 {
				return
			}
		} else {
			stable = 0
		}
		last = sig
		if time.Now().After(deadline) {
			h.t.Fatalf("the engine did not settle (clock %s)", h.clock.Now().UTC().Format(time.RFC3339))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// step lets the engine settle, advances the clock by d and settles again.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	h.settle()
	h.clock.Advance(d)
	h.settle()
}

// waitFor polls cond until it holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// hookAll makes every run succeed at once without a target syscall.
func (h *harness) hookAll() {
	h.setHook(func(ctx context.Context, s *Schedule) (string, bool, error) {
		return "hooked", true, nil
	})
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// statuses lists the statuses of runs.
func statuses(rs []Run) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Status)
	}
	return out
}

func scheduledAts(rs []Run) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.ScheduledAtMs)
	}
	return out
}

// --- the timer heap, without a loop ---

func newBareManager() *Manager {
	return &Manager{next: map[string]int64{}, kick: make(chan struct{}, 1)}
}

// due is dueLocked with m.mu taken.
func (m *Manager) due(now int64) []entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dueLocked(now)
}

// wait is waitLocked with m.mu taken.
func (m *Manager) wait(now int64) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waitLocked(now)
}

// TestEngineHeap checks arm, due and wait: entries come out in time order,
// re-arming replaces (the old entry goes stale), disarming removes, and
// wait sleeps until the earliest entry, at most maxSleep.
func TestEngineHeap(t *testing.T) {
	m := newBareManager()
	if d := m.wait(0); d != maxSleep {
		t.Fatalf("empty wait = %v, want %v", d, maxSleep)
	}
	m.arm("c", 3000)
	m.arm("a", 1000)
	m.arm("b", 2000)
	m.arm("d", 9000)
	if len(m.kick) != 1 {
		t.Fatalf("arm did not kick the engine")
	}
	if d := m.wait(400); d != 600*time.Millisecond {
		t.Fatalf("wait = %v, want 600ms", d)
	}
	m.arm("a", 2500) // re-armed: its 1000 entry is stale
	m.arm("d", 0)    // disarmed
	if d := m.wait(400); d != 1600*time.Millisecond {
		t.Fatalf("wait after re-arm = %v, want 1.6s", d)
	}
	if got := m.due(999); len(got) != 0 {
		t.Fatalf("due(999) = %v", got)
	}
	got := m.due(2500)
	if len(got) != 2 || got[0] != (entry{2000, "b"}) || got[1] != (entry{2500, "a"}) {
		t.Fatalf("due(2500) = %v, want b@2000 a@2500", got)
	}
	if got := m.due(2500); len(got) != 0 {
		t.Fatalf("due entries came out twice: %v", got)
	}
	if got := m.due(1 << 50); len(got) != 1 || got[0].id != "c" {
		t.Fatalf("due(inf) = %v, want only c (d was disarmed)", got)
	}
	if len(m.next) != 0 {
		t.Fatalf("next left %v", m.next)
	}
	m.arm("far", 10*int64(time.Hour/time.Millisecond))
	if d := m.wait(0); d != maxSleep {
		t.Fatalf("far wait = %v, want maxSleep", d)
	}
	m.arm("late", 5)
	if d := m.wait(100); d != 0 {
		t.Fatalf("overdue wait = %v, want 0", d)
	}
}

// TestEngineHeapOrder arms many entries in random order and re-arms half;
// due returns each live entry once, in time order.
func TestEngineHeapOrder(t *testing.T) {
	m := newBareManager()
	const n = 2000
	want := map[string]int64{}
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		at := int64((i * 7919) % 10007)
		m.arm(id, at+1)
		want[id] = at + 1
	}
	for i := 0; i < n; i += 2 {
		id := fmt.Sprintf("s%d", i)
		m.arm(id, want[id]+5000)
		want[id] += 5000
	}
	got := m.due(1 << 40)
	if len(got) != n {
		t.Fatalf("due returned %d entries, want %d", len(got), n)
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].at < got[j].at }) {
		t.Fatalf("due out of order")
	}
	for _, e := range got {
		if want[e.id] != e.at {
			t.Fatalf("%s fired at %d, want %d", e.id, e.at, want[e.id])
		}
	}
}

// --- the loop on a fake clock ---

// TestEngineFires: the loop fires a due schedule when the clock reaches
// it (not before), records the run in sched_runs, updates the state and
// re-arms the next occurrence.
func TestEngineFires(t *testing.T) {
	h := newHarness(t, harnessStart)
	var mu sync.Mutex
	var seen []int64 // the fake time of each target call
	h.setHook(func(ctx context.Context, s *Schedule) (string, bool, error) {
		mu.Lock()
		seen = append(seen, h.clock.ms())
		mu.Unlock()
		return "hooked", true, nil
	})
	t0 := h.clock.ms()
	s := h.add(h.alice, map[string]any{"name": "tick", "expression": map[string]any{"kind": "every", "everyMs": 60000},
		"target": map[string]any{"kind": "process.event", "pid": "init:1000", "message": "tick"}})
	if i64(s.State.NextRunAtMs) != t0+60000 || h.armed(s.ID) != t0+60000 {
		t.Fatalf("next = %v armed %d, want %d", s.State.NextRunAtMs, h.armed(s.ID), t0+60000)
	}
	h.step(59999 * time.Millisecond)
	if rs := h.runs(s.ID); len(rs) != 0 {
		t.Fatalf("ran early: %+v", rs)
	}
	h.step(time.Millisecond)
	rs := h.runs(s.ID)
	if len(rs) != 1 || rs[0].Status != "ok" || rs[0].ScheduledAtMs != t0+60000 || rs[0].StartedAtMs != t0+60000 || str(rs[0].Summary) != "hooked" {
		t.Fatalf("runs = %+v", rs)
	}
	if rs[0].OwnerUid != 1000 || rs[0].Name != "tick" {
		t.Fatalf("run owner/name = %d %q", rs[0].OwnerUid, rs[0].Name)
	}
	st := h.sched(s.ID).State
	if st.RunCount != 1 || str(st.LastStatus) != "ok" || i64(st.LastRunAtMs) != t0+60000 || i64(st.NextRunAtMs) != t0+120000 || st.RunningAtMs != nil {
		t.Fatalf("state = %+v", st)
	}
	if h.armed(s.ID) != t0+120000 {
		t.Fatalf("armed %d, want %d", h.armed(s.ID), t0+120000)
	}
	// Three more minutes, one step each: three more runs.
	for range 3 {
		h.step(time.Minute)
	}
	if got := scheduledAts(h.runs(s.ID)); fmt.Sprint(got) != fmt.Sprint([]int64{t0 + 60000, t0 + 120000, t0 + 180000, t0 + 240000}) {
		t.Fatalf("scheduled at %v", got)
	}
	if st := h.sched(s.ID).State; st.RunCount != 4 || i64(st.NextRunAtMs) != t0+300000 {
		t.Fatalf("state = %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("target called %d times, want 4", len(seen))
	}
}

// TestEngineLateNoBurst: when the engine wakes late (the clock jumps past
// several occurrences), an every schedule runs once, not once per missed
// occurrence, and its next time stays on its grid.
func TestEngineLateNoBurst(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	t0 := h.clock.ms()
	s := h.add(h.alice, map[string]any{"name": "tick", "expression": map[string]any{"kind": "every", "everyMs": 60000},
		"target": map[string]any{"kind": "process.event", "pid": "init:1000", "message": "tick"}})
	h.step(150 * time.Second) // past t0+60s and t0+120s
	rs := h.runs(s.ID)
	if len(rs) != 1 || rs[0].ScheduledAtMs != t0+60000 || rs[0].StartedAtMs != t0+150000 {
		t.Fatalf("runs = %+v", rs)
	}
	if next := i64(h.sched(s.ID).State.NextRunAtMs); next != t0+180000 {
		t.Fatalf("next = %d, want %d (the grid after now)", next, t0+180000)
	}
}

// TestEngineCloseStops: after Close the loop is gone and nothing fires.
func TestEngineCloseStops(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	s := h.add(h.alice, map[string]any{"name": "x", "expression": map[string]any{"kind": "after", "afterMs": 1000},
		"target": map[string]any{"kind": "process.event", "pid": "init:1000", "message": "x"}})
	h.settle()
	h.m.Close()
	h.m.Close() // idempotent
	h.clock.Advance(time.Hour)
	time.Sleep(50 * time.Millisecond)
	if rs := h.runs(s.ID); len(rs) != 0 {
		t.Fatalf("ran after Close: %+v", rs)
	}
}

// TestEngineSlotWaitReloads: a due schedule that waits for a free slot
// (maxRunning runs under way) is reloaded once it has one, so one
// disabled meanwhile does not fire with its old record.
func TestEngineSlotWaitReloads(t *testing.T) {
	h := newHarness(t, harnessStart)
	var mu sync.Mutex
	fired := 0
	h.setHook(func(ctx context.Context, s *Schedule) (string, bool, error) {
		mu.Lock()
		fired++
		mu.Unlock()
		return "hooked", true, nil
	})
	s := h.add(h.alice, map[string]any{"name": "tick", "expression": map[string]any{"kind": "every", "everyMs": 60000},
		"target": map[string]any{"kind": "process.event", "pid": "init:1000", "message": "tick"}})
	h.settle()
	h.m.mu.Lock()
	h.m.fair.runs = h.m.fair.maxRuns // every slot taken
	h.m.mu.Unlock()
	h.clock.Advance(time.Minute)
	h.waitFor("the schedule to wait in its owner's queue", func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return h.m.fair.queued[s.ID] != nil
	})
	h.must(h.alice, "sched.update", map[string]any{"id": s.ID, "patch": map[string]any{"enabled": false}}, nil)
	h.m.mu.Lock()
	h.m.fair.runs = 0 // the slots free
	h.m.serveLocked()
	h.m.mu.Unlock()
	h.waitFor("the wait to end", func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return len(h.m.fair.queues) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if fired != 0 {
		t.Fatalf("a schedule disabled while waiting for a slot fired %d times", fired)
	}
	if st := h.sched(s.ID); st.Enabled {
		t.Fatalf("enabled again: %+v", st)
	}
}
