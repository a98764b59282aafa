package sched

// Tests of the limits against a schedule storm (issue 20, item 7): the
// number of schedules a user may have, and the owners' queues of due
// schedules (fair.go): a bound on each owner's runs under way and on its
// queue, owners served in turn, and a schedule waiting at most once.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestScheduleLimit: a user has at most config/sched/max_schedules
// schedules (256 by default; root's override users/<uid>/... for one
// user): the add over it is a 409 that changes nothing, a crontab that
// would go over it is refused whole, and root's own schedules are not
// counted.
func TestScheduleLimit(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.hookAll()
	count := func(uid uint32) int {
		var n int
		h.k.Store.QueryRowContext(context.Background(), `SELECT count(*) FROM sched_schedules WHERE owner_uid=?`, uid).Scan(&n)
		return n
	}
	// The default.
	for i := range DefaultMaxSchedules {
		h.add(h.bob, bobArgs(fmt.Sprintf("b%d", i)))
	}
	err := h.call(h.bob, "sched.add", bobArgs("one-more"), nil)
	if err == nil || !strings.Contains(err.Error(), "config/sched/max_schedules") || h.code(h.bob, "sched.add", bobArgs("x")) != 409 {
		t.Fatalf("the add over the default limit: %v", err)
	}
	if n := count(1001); n != DefaultMaxSchedules {
		t.Fatalf("bob has %d schedules", n)
	}

	cases := []struct {
		key, value string
		want       int
	}{
		{"config/sched/max_schedules", "3", 3},
		{"users/1000/sched/max_schedules", "5", 5},    // root's override for alice
		{"users/1000/sched/max_schedules", "lots", 3}, // not a number: ignored
	}
	for _, c := range cases {
		h.must(h.root, "sys.config.set", map[string]any{"key": c.key, "value": c.value}, nil)
		for i := count(1000); i < c.want; i++ {
			h.add(h.alice, everyArgs(fmt.Sprintf("a%d", i), 60_000, nil))
		}
		if code := h.code(h.alice, "sched.add", everyArgs("over", 60_000, nil)); code != 409 {
			t.Errorf("%s=%s: the add over the limit: code %d, want 409", c.key, c.value, code)
		}
		if n := count(1000); n < c.want {
			t.Errorf("%s=%s: alice has %d schedules", c.key, c.value, n)
		}
	}
	// alice has 5, over her limit of 3: a crontab that adds is refused
	// whole; one that only keeps or removes is taken.
	var tab struct{ Text string }
	h.must(h.alice, "sched.crontab.get", map[string]any{}, &tab)
	before := tab.Text
	err = h.call(h.alice, "sched.crontab.set", map[string]any{"text": before + "@every 1m event init:1000 more # name=more\n"}, nil)
	if err == nil || !strings.Contains(err.Error(), "max_schedules") {
		t.Fatalf("a crontab over the limit: %v", err)
	}
	if h.must(h.alice, "sched.crontab.get", map[string]any{}, &tab); tab.Text != before {
		t.Fatalf("a refused crontab changed the schedules:\n%s", tab.Text)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(before, "\n"), "\n")
	h.must(h.alice, "sched.crontab.set", map[string]any{"text": strings.Join(lines[:2], "")}, nil)
	if n := count(1000); n != 2 {
		t.Fatalf("alice has %d schedules after a crontab of 2", n)
	}
	// Root's own are not counted.
	h.must(h.root, "sys.config.set", map[string]any{"key": "config/sched/max_schedules", "value": "0"}, nil)
	for i := range 3 {
		h.add(h.root, map[string]any{"name": fmt.Sprintf("r%d", i), "expression": map[string]any{"kind": "every", "everyMs": 60_000},
			"target": eventTarget("init:0")})
	}
	if code := h.code(h.bob, "sched.add", bobArgs("zero")); code != 409 {
		t.Errorf("bob with a limit of 0: code %d", code)
	}
}

// bobArgs are sched.add's args of an every-minute schedule of bob's.
func bobArgs(name string) map[string]any {
	return map[string]any{"name": name, "expression": map[string]any{"kind": "every", "everyMs": 60_000}, "target": eventTarget("init:1001")}
}

// storm is a hook that holds the runs of the owners in hold until
// release is closed, recording for each owner the runs under way (and
// the most at once) and the order in which runs started.
type storm struct {
	mu      sync.Mutex
	hold    map[uint32]bool
	release chan struct{}
	now     map[uint32]int
	most    map[uint32]int
	ran     map[uint32]int
	order   []uint32
}

func newStorm(hold ...uint32) *storm {
	st := &storm{hold: map[uint32]bool{}, release: make(chan struct{}), now: map[uint32]int{}, most: map[uint32]int{}, ran: map[uint32]int{}}
	for _, u := range hold {
		st.hold[u] = true
	}
	return st
}

func (st *storm) hook(ctx context.Context, s *Schedule) (string, bool, error) {
	st.mu.Lock()
	st.now[s.OwnerUid]++
	st.most[s.OwnerUid] = max(st.most[s.OwnerUid], st.now[s.OwnerUid])
	st.order = append(st.order, s.OwnerUid)
	hold := st.hold[s.OwnerUid]
	st.mu.Unlock()
	if hold {
		<-st.release
	}
	st.mu.Lock()
	st.now[s.OwnerUid]--
	st.ran[s.OwnerUid]++
	st.mu.Unlock()
	return "hooked", true, nil
}

func (st *storm) get(f func() int) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return f()
}

// queueLen is how many schedules of uid wait in its queue.
func (h *harness) queueLen(uid uint32) int {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if q := h.m.fair.queues[uid]; q != nil {
		return len(q.fires)
	}
	return 0
}

// TestFairStorm: alice's storm of schedules due at one instant runs at
// most maxRunningPerOwner at a time, the rest waiting in her queue, while
// bob's schedule due at the same instant runs at once; once alice's runs
// go on, every one of hers runs, none lost.
func TestFairStorm(t *testing.T) {
	h := newHarness(t, harnessStart)
	st := newStorm(1000)
	h.setHook(st.hook)
	n := maxRunningPerOwner + 20
	for i := range n {
		h.add(h.alice, everyArgs(fmt.Sprintf("a%d", i), 60_000, nil))
	}
	bob := h.add(h.bob, bobArgs("b"))
	h.settle()
	h.clock.Advance(time.Minute)
	h.waitFor("bob's run, with alice's storm under way", func() bool { return len(h.runs(bob.ID)) == 1 })
	h.waitFor("alice's runs to fill her share", func() bool { return st.get(func() int { return st.now[1000] }) == maxRunningPerOwner })
	if q := h.queueLen(1000); q != n-maxRunningPerOwner {
		t.Errorf("alice's queue holds %d, want %d", q, n-maxRunningPerOwner)
	}
	close(st.release)
	h.waitFor("every run of alice's", func() bool { return st.get(func() int { return st.ran[1000] }) == n })
	h.settle()
	if most := st.get(func() int { return st.most[1000] }); most != maxRunningPerOwner {
		t.Errorf("alice had %d runs at once, want %d", most, maxRunningPerOwner)
	}
	var recorded int
	h.k.Store.QueryRowContext(context.Background(), `SELECT count(*) FROM sched_runs WHERE owner_uid=1000 AND status='ok'`).Scan(&recorded)
	if recorded != n {
		t.Errorf("%d of alice's %d runs recorded", recorded, n)
	}
}

// TestFireRate: an owner's schedules start at most fireRate runs a
// second after a burst of fireBurst (lowered here to 4): the schedules
// due past it wait in her queue, deferred (sched.list shows
// waitingSinceMs), and start one per token as the clock brings them,
// every one, none skipped, their wait in their records; meanwhile another
// owner's schedule due at the same instant starts at once, and root's are
// not held to the rate.
func TestFireRate(t *testing.T) {
	h := newHarness(t, harnessStart)
	st := newStorm()
	h.setHook(st.hook)
	h.m.mu.Lock()
	h.m.fair.burst = 4
	interval := h.m.fair.interval
	h.m.mu.Unlock()
	if interval != 1000/fireRate {
		t.Fatalf("the fire interval is %d ms, want %d", interval, 1000/fireRate)
	}
	const n = 10
	var alice []string
	for i := range n {
		alice = append(alice, h.add(h.alice, everyArgs(fmt.Sprintf("a%d", i), 60_000, nil)).ID)
	}
	bob := h.add(h.bob, bobArgs("b"))
	for i := range 6 {
		h.add(h.root, map[string]any{"name": fmt.Sprintf("r%d", i), "expression": map[string]any{"kind": "every", "everyMs": 60_000},
			"target": eventTarget("init:0")})
	}
	h.settle()
	t1 := h.clock.ms() + 60_000
	ran := func(uid uint32) int { return st.get(func() int { return st.ran[uid] }) }
	// waiting lists alice's schedules that show they wait, and since when.
	waiting := func() map[string]int64 {
		var list struct{ Schedules []Schedule }
		h.must(h.alice, "sched.list", map[string]any{}, &list)
		out := map[string]int64{}
		for _, s := range list.Schedules {
			if s.State.WaitingSinceMs != nil {
				out[s.ID] = *s.State.WaitingSinceMs
			}
		}
		return out
	}
	h.clock.Advance(time.Minute)
	h.waitFor("the burst's runs, and the engine asleep until alice's next token", func() bool {
		return ran(1000) == 4 && ran(1001) == 1 && ran(0) == 6 && h.clock.sleepsUntil(t1+interval)
	})
	if q := h.queueLen(1000); q != n-4 {
		t.Fatalf("alice's queue holds %d, want %d", q, n-4)
	}
	w := waiting()
	if len(w) != n-4 {
		t.Fatalf("%d of alice's schedules show waitingSinceMs, want %d: %v", len(w), n-4, w)
	}
	for id, at := range w {
		if at != t1 {
			t.Errorf("%s waits since t1%+d ms, want t1", id, at-t1)
		}
	}
	// Each token the time brings, one run: the rest, one by one.
	for k := 5; k <= n; k++ {
		h.clock.Advance(time.Duration(interval) * time.Millisecond)
		at := t1 + int64(k-3)*interval // the token after this one
		h.waitFor(fmt.Sprintf("alice's run %d of %d", k, n), func() bool {
			return ran(1000) == k && (k == n || h.clock.sleepsUntil(at))
		})
		if q := h.queueLen(1000); q != n-k {
			t.Fatalf("alice's queue holds %d after %d runs, want %d", q, k, n-k)
		}
	}
	h.settle()
	if w := waiting(); len(w) != 0 {
		t.Errorf("schedules still show waitingSinceMs: %v", w)
	}
	late := 0
	for _, id := range alice {
		rs := h.runs(id)
		if len(rs) != 1 || rs[0].Status != "ok" || rs[0].ScheduledAtMs != t1 {
			t.Fatalf("%s: runs %+v, want one ok run of the occurrence t1", id, rs)
		}
		if rs[0].StartedAtMs > rs[0].ScheduledAtMs {
			late++
		}
	}
	if late != n-4 {
		t.Errorf("%d of alice's runs recorded late, want the %d deferred", late, n-4)
	}
	if rs := h.runs(bob.ID); len(rs) != 1 || rs[0].StartedAtMs != t1 {
		t.Errorf("bob's run: %+v, want one started at t1", rs)
	}
}

// TestFairRoundRobin: with one slot for the whole engine, the owners with
// schedules waiting are served in turn: no owner starts two runs in a
// row while another waits.
func TestFairRoundRobin(t *testing.T) {
	h := newHarness(t, harnessStart)
	st := newStorm(1000, 1001) // the first run holds until all are queued
	h.setHook(st.hook)
	h.m.mu.Lock()
	h.m.fair.maxRuns = 1
	h.m.mu.Unlock()
	for i := range 6 {
		h.add(h.alice, everyArgs(fmt.Sprintf("a%d", i), 60_000, nil))
	}
	for i := range 3 {
		h.add(h.bob, bobArgs(fmt.Sprintf("b%d", i)))
	}
	h.settle()
	h.clock.Advance(time.Minute)
	h.waitFor("one run under way, eight waiting", func() bool {
		return h.queueLen(1000)+h.queueLen(1001) == 8 && st.get(func() int { return len(st.order) }) == 1
	})
	// gsv status shows the scheduler's queue (sched.stats).
	var ds abi.DaemonStatus
	h.must(h.root, "sys.status", map[string]any{}, &ds)
	if ds.SchedQueued != 8 || ds.SchedRunning != 1 {
		t.Errorf("sys.status: scheduler %d waiting, %d running; want 8, 1", ds.SchedQueued, ds.SchedRunning)
	}
	close(st.release)
	h.settle()
	st.mu.Lock()
	got := append([]uint32(nil), st.order...)
	st.mu.Unlock()
	if len(got) != 9 {
		t.Fatalf("%d runs: %v", len(got), got)
	}
	// Alternating while both wait, then alice's last three.
	left := map[uint32]int{1000: 6, 1001: 3}
	for i, u := range got {
		left[u]--
		if i > 0 && u == got[i-1] && left[1000] > 0 && left[1001] > 0 {
			t.Fatalf("run %d: uid %d twice in a row while the other waits: %v", i, u, got)
		}
	}
}

// TestFairQueueBound: an owner's queue holds at most maxQueuedPerOwner
// schedules; a due schedule past it is recorded skipped (not counted),
// armed for its next time; a schedule waiting is not queued twice.
func TestFairQueueBound(t *testing.T) {
	h := newHarness(t, harnessStart)
	st := newStorm(1000)
	h.setHook(st.hook)
	h.m.mu.Lock()
	h.m.fair.maxPerOwner, h.m.fair.maxQueued = 1, 2
	h.m.mu.Unlock()
	var ids []string
	for i := range 5 {
		ids = append(ids, h.add(h.alice, everyArgs(fmt.Sprintf("a%d", i), 60_000, nil)).ID)
	}
	h.settle()
	t1 := h.clock.ms() + 60_000
	h.clock.Advance(time.Minute)
	var skipped []Run
	h.waitFor("one running, two waiting, two skipped", func() bool {
		skipped = skipped[:0]
		for _, id := range ids {
			for _, r := range h.runs(id) {
				if r.Status == "skipped" {
					skipped = append(skipped, r)
				}
			}
		}
		return st.get(func() int { return st.now[1000] }) == 1 && h.queueLen(1000) == 2 && len(skipped) == 2
	})
	for _, r := range skipped {
		if !strings.Contains(str(r.Error), "queue of due schedules is full") {
			t.Errorf("skipped run: %q", str(r.Error))
		}
		// Armed once the record is written.
		h.waitFor("a skipped schedule armed for its next time", func() bool { return h.armed(r.ScheduleID) == t1+60_000 })
		if s := h.sched(r.ScheduleID); s.State.RunCount != 0 || i64(s.State.NextRunAtMs) != t1+60_000 {
			t.Errorf("a skipped schedule: runs %d next %v, want next %d", s.State.RunCount, s.State.NextRunAtMs, t1+60_000)
		}
	}
	// A waiting schedule given a new time that comes due while it still
	// waits is not queued again: that occurrence is skipped.
	h.m.mu.Lock()
	var waiting string
	for id := range h.m.fair.queued {
		waiting = id
	}
	h.m.mu.Unlock()
	h.must(h.alice, "sched.update", map[string]any{"id": waiting, "patch": map[string]any{"expression": map[string]any{"kind": "every", "everyMs": 1000}}}, nil)
	h.clock.Advance(time.Second)
	h.waitFor("the occurrence of a waiting schedule to be skipped", func() bool {
		for _, r := range h.runs(waiting) {
			if r.Status == "skipped" && strings.Contains(str(r.Error), "still waits") {
				return true
			}
		}
		return false
	})
	if q := h.queueLen(1000); q != 2 {
		t.Errorf("alice's queue holds %d, want 2", q)
	}
	close(st.release)
	h.waitFor("the queue to drain", func() bool { return h.queueLen(1000) == 0 && st.get(func() int { return st.now[1000] }) == 0 })
}

// TestTickCoalescedIsSkipped: a process.event run whose tick proc
// coalesced (one of the schedule's ticks still waits in the target's
// queue) is recorded skipped, not counted, and the schedule goes on.
func TestTickCoalescedIsSkipped(t *testing.T) {
	h := newHarness(t, harnessStart)
	h.proc.mu.Lock()
	h.proc.coalesce = true
	h.proc.mu.Unlock()
	s := h.add(h.alice, everyArgs("tick", 60_000, nil))
	h.step(time.Minute)
	rs := h.runs(s.ID)
	if len(rs) != 1 || rs[0].Status != "skipped" || !strings.Contains(str(rs[0].Error), "still waits in the target's queue (run r_0)") {
		t.Fatalf("runs %+v", rs)
	}
	if st := h.sched(s.ID).State; st.RunCount != 0 || i64(st.NextRunAtMs) != h.clock.ms()+60_000 {
		t.Fatalf("state %+v", st)
	}
	h.proc.mu.Lock()
	h.proc.coalesce = false
	h.proc.mu.Unlock()
	h.step(time.Minute)
	if rs := h.runs(s.ID); len(rs) != 2 || rs[1].Status != "ok" {
		t.Fatalf("runs %+v", rs)
	}
}

// FuzzDecodeSchedule: whatever a row of sched_schedules holds (text,
// numbers, NULLs, JSON that does not decode), its decoding never panics,
// and a record it does not call broken has an expression of a known kind
// and a uid in range.
func FuzzDecodeSchedule(f *testing.F) {
	f.Add(`{"kind":"every","everyMs":60000}`, `{"kind":"process.event","pid":"init:0","message":"x"}`, "", "1", int64(5), true, "")
	f.Add(`{not json`, `[1,2`, `{"maxAttempts":"x"}`, "soon", int64(-1), false, `{"networks":["none"]}`)
	f.Add(`{"kind":"cron","expr":"61 * * * *"}`, `null`, "null", "", int64(1)<<40, true, `{"networks":`)
	f.Add(`{"kind":"sometimes"}`, `{}`, "", "1.5", int64(0), false, `{"mounts":[{"prefix":"~/ci","mode":"rw"}],"wider":true}`)
	f.Fuzz(func(t *testing.T, expr, target, retry, text string, n int64, asText bool, pc string) {
		var num any = n
		if asText {
			num = text
		}
		var rv any
		if retry != "" {
			rv = retry
		}
		var pcv any
		if pc != "" {
			pcv = pc
		}
		raw := []any{"sch_x", num, int64(0), float64(n), text, nil, num, expr, target, "skip", "skip", rv,
			num, int64(0), num, nil, nil, nil, nil, nil, num, num, pcv}
		s := decodeSchedule(raw)
		if s.Broken != "" {
			return
		}
		// A stored narrowing is read whole or the record is broken:
		// never read as no narrowing.
		if (pc != "") != (s.Cap != nil) {
			t.Fatalf("process_cap %q read as %+v", pc, s.Cap)
		}
		switch s.Expression.Kind {
		case "at", "after", "every", "cron":
		default:
			t.Fatalf("a record not broken has the expression %+v", s.Expression)
		}
		if v, ok := num.(int64); ok && (v < 0 || v > 1<<32-1) {
			t.Fatalf("a record not broken has the uid %d", v)
		}
	})
}

// TestCrontabFileLimit: a crontab file written through the FUSE mount
// that would leave its owner more schedules than the limit fails where
// the shell sees it (cat's close: EBUSY), err says why, and the crontab
// keeps its schedules.
func TestCrontabFileLimit(t *testing.T) {
	h := newFTHarness(t)
	sh, mustSh := h.mountShell()
	root, err := h.k.IdentityOf(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.k.Call(context.Background(), &kernel.Caller{Identity: root}, "sys.config.set",
		&abi.ConfigSetArgs{Key: "config/sched/max_schedules", Value: []byte(`"2"`)}); err != nil {
		t.Fatal(err)
	}
	mustSh(1001, "printf '@every 1h event init:1000 a # name=a\\n@every 1h event init:1000 b # name=b\\n' > $D/alice")
	before := h.schedules(1000)
	out, err := sh(1001, "printf '@every 1h event init:1000 a # name=a\\n@every 1h event init:1000 b # name=b\\n@every 1h event init:1000 c # name=c\\n' | cat > $D/alice")
	if err == nil || !strings.Contains(out, "Device or resource busy") {
		t.Fatalf("a crontab over the limit: %v %s", err, out)
	}
	if msg := mustSh(1001, "cat $D/err"); !strings.Contains(msg, "config/sched/max_schedules") {
		t.Errorf("err: %q", msg)
	}
	sameSchedules(t, before, h.schedules(1000))
	// A shell ignores close(2)'s error: the write that brings the line
	// past the limit fails, whether it rewrites or appends.
	for _, script := range []string{
		"printf '@every 1h event init:1000 a # name=a\\n@every 1h event init:1000 b # name=b\\n@every 1h event init:1000 c # name=c\\n' > $D/alice",
		"echo '@every 1h event init:1000 d # name=d' >> $D/alice",
	} {
		if out, err := sh(1001, script); err == nil {
			t.Errorf("%s: a crontab over the limit written by the shell succeeded: %s", script, out)
		}
		sameSchedules(t, before, h.schedules(1000))
	}
}
