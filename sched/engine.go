package sched

import (
	"container/heap"
	"context"
	"time"
)

// Clock is the engine's source of time; tests use a fake one.
type Clock interface {
	Now() time.Time
	// After is time.After: a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// maxSleep bounds one wait of the engine: after a wall-clock jump the
// engine re-reads the clock within this long. It is not a polling loop:
// one wake a minute costs nothing, whatever the number of schedules.
const maxSleep = time.Minute

// entry is one schedule in the timer heap.
type entry struct {
	at int64 // next fire time, ms
	id string
}

// timerHeap is a min-heap of entries by time. Entries go stale when a
// schedule changes; the engine's next map says which entry is current.
type timerHeap []entry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// runState is a run under way: its start (ms), and whether a change to
// its schedule (a syscall) re-armed the engine since it began.
type runState struct {
	start      int64
	superseded bool
}

// The engine's limits (docs/scheduler.md, "The engine"). A due schedule
// waits in its owner's queue (fair.go) until a run of it may start: fewer
// than maxRunning runs of the engine are under way, and fewer than
// maxRunningPerOwner of its owner's. Owners with runs waiting are served
// in turn (round robin), so one owner's storm of due schedules does not
// delay another's. A schedule waits at most once (a due occurrence of a
// schedule that already waits, or runs, is recorded skipped), and an
// owner's queue holds at most maxQueuedPerOwner schedules; a due
// schedule past it is recorded skipped.
//
// maxRunning bounds the engine's goroutines and target calls: a burst of
// 100,000 due schedules holds at most that many at once. The bound is
// above the 10,000 schedules the lateness benchmark
// (BenchmarkLateness10k) fires at one instant.
const (
	maxRunning         = 1 << 14
	maxRunningPerOwner = 64
	maxQueuedPerOwner  = 4096
)

// armLocked sets id's next fire time (0: none) and reports whether it
// changed. The caller then kicks the engine (kickEngine) once it has let
// go of m.mu.
func (m *Manager) armLocked(id string, at int64) bool {
	if at == 0 {
		_, armed := m.next[id]
		delete(m.next, id)
		return armed
	}
	if t, ok := m.next[id]; ok && t == at {
		// Armed already (a run arms its next time at its start and
		// again once recorded): the heap holds a current entry for it.
		return false
	}
	m.next[id] = at
	heap.Push(&m.heap, entry{at, id})
	return true
}

// kickEngine wakes the engine to look at its heap again.
func (m *Manager) kickEngine() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// arm sets id's next fire time (0: none) for the engine and wakes it.
func (m *Manager) arm(id string, at int64) {
	m.mu.Lock()
	m.armLocked(id, at)
	m.mu.Unlock()
	m.kickEngine()
}

// armChanged arms id after a syscall changed it (update, remove, a crontab
// write). A run of id under way is superseded: its own arming (armFromRun),
// computed from the schedule as it was, leaves the engine alone.
func (m *Manager) armChanged(id string, at int64) {
	m.mu.Lock()
	if r := m.running[id]; r != nil {
		r.superseded = true
	}
	m.changedLocked(id)
	m.armLocked(id, at)
	m.mu.Unlock()
	m.kickEngine()
}

// armFromRun arms id's next occurrence as a run computed it (at the run's
// start or end), unless the run under way is superseded: a sched.update
// made during the run armed the new expression's time, which the old
// expression's must not replace.
func (m *Manager) armFromRun(id string, at int64) {
	m.mu.Lock()
	changed := false
	if r := m.running[id]; r == nil || !r.superseded {
		changed = m.armLocked(id, at)
	}
	m.mu.Unlock()
	if changed {
		m.kickEngine()
	}
}

// dueLocked pops the schedules due at or before now.
func (m *Manager) dueLocked(now int64) []entry {
	var out []entry
	for m.heap.Len() > 0 && m.heap[0].at <= now {
		e := heap.Pop(&m.heap).(entry)
		if m.next[e.id] != e.at {
			continue // stale
		}
		delete(m.next, e.id)
		out = append(out, e)
	}
	return out
}

// waitLocked returns how long until the earliest entry, at most maxSleep.
func (m *Manager) waitLocked(now int64) time.Duration {
	for m.heap.Len() > 0 && m.next[m.heap[0].id] != m.heap[0].at {
		heap.Pop(&m.heap) // drop stale heads
	}
	if m.heap.Len() == 0 {
		return maxSleep
	}
	d := time.Duration(m.heap[0].at-now) * time.Millisecond
	return min(max(d, 0), maxSleep)
}

// loop is the engine: it sleeps until the earliest fire time (or a kick:
// a schedule changed), then dispatches every due schedule.
func (m *Manager) loop() {
	defer close(m.stopped)
	for {
		now := m.clock.Now().UnixMilli()
		m.mu.Lock()
		due := m.dueLocked(now)
		m.mu.Unlock()
		if len(due) > 0 {
			m.dispatch(due, now)
		}
		m.mu.Lock()
		wait := m.waitLocked(m.clock.Now().UnixMilli())
		m.mu.Unlock()
		select {
		case <-m.stop:
			return
		case <-m.kick:
		case <-m.clock.After(wait):
		}
	}
}

// dispatchChunk is how many due schedules dispatch loads per query.
const dispatchChunk = 256

// dispatch puts the due schedules in their owners' queues (enqueue), from
// which they start as slots free up (serveLocked).
//
// The due schedules are loaded by one query per chunk of dispatchChunk,
// and each waits with its schedule in hand: a query per run (about 90 µs
// of CPU each) would queue 10,000 queries on the read pool before the
// last of 10,000 due targets could start. A schedule changed while it
// waits is loaded again when it starts (armChanged).
func (m *Manager) dispatch(due []entry, now int64) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx := context.Background()
		for len(due) > 0 {
			chunk := due[:min(len(due), dispatchChunk)]
			due = due[len(chunk):]
			loaded := m.getMany(ctx, chunk) // nil on error: each is loaded alone
			for _, e := range chunk {
				select {
				case <-m.stop:
					return // not dispatched: still due at the next start
				default:
				}
				s := loaded[e.id]
				if s == nil {
					var err error
					if s, err = m.get(ctx, e.id); err != nil {
						m.log.Error("sched: load a due schedule", "schedule", e.id, "err", err)
						continue
					}
				}
				m.enqueue(ctx, s, e.at, now)
			}
		}
	}()
}
