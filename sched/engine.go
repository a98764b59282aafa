package sched

import (
	"container/heap"
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

// arm sets id's next fire time (0: none) and wakes the engine.
func (m *Manager) arm(id string, at int64) {
	m.emu.Lock()
	if at == 0 {
		delete(m.next, id)
	} else {
		m.next[id] = at
		heap.Push(&m.heap, entry{at, id})
	}
	m.emu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// armChange arms id for a change made by a syscall (update, remove, a
// crontab write). If a run of id is under way, it marks the run touched:
// the run's own arms (armOwn), computed from the schedule as it was, then
// leave the engine alone.
func (m *Manager) armChange(id string, at int64) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if _, ok := m.running[id]; ok {
		m.touched[id] = true
	}
	m.arm(id, at)
}

// armOwn arms id for its run under way (the next occurrence, computed at
// the run's start or end), unless a change re-armed it since the run
// began.
//
// The next occurrence armed at the start of a run, from a goroutine
// beside the target call, can land after a sched.update made during the
// run armed the new expression's time: it must not replace it (the engine
// would run the old expression once more).
func (m *Manager) armOwn(id string, at int64) {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	if !m.touched[id] {
		m.arm(id, at)
	}
}

// due pops the schedules due at or before now.
func (m *Manager) due(now int64) []entry {
	m.emu.Lock()
	defer m.emu.Unlock()
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

// wait returns how long until the earliest entry, at most maxSleep.
func (m *Manager) wait(now int64) time.Duration {
	m.emu.Lock()
	defer m.emu.Unlock()
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
		if due := m.due(now); len(due) > 0 {
			m.dispatch(due, now)
		}
		select {
		case <-m.stop:
			return
		case <-m.kick:
		case <-m.clock.After(m.wait(m.clock.Now().UnixMilli())):
		}
	}
}
