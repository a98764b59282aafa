package sched

import (
	"context"
	"fmt"
	"sync"

	"gsvfs.dev/gsvfs/abi"
)

// The owners' queues of due schedules: fair service of the engine's runs.
//
// The engine does not start a run per due schedule at once: it puts the
// schedule in its owner's queue (enqueue), and serveLocked starts runs
// from the queues, taking owners in turn (round robin), while fewer than
// maxRunning runs of the engine are under way and fewer than
// maxRunningPerOwner of that owner's. So one owner with a thousand
// schedules due at once runs maxRunningPerOwner of them at a time, and
// another owner's schedule due at the same instant starts with the first
// of them, not after the thousand.
//
// A schedule waits in a queue at most once: a due occurrence of a
// schedule that already waits, or whose run is under way, is recorded
// skipped (the overlap policy) and its next time armed. An owner's queue
// holds at most maxQueuedPerOwner schedules; a due schedule past it is
// recorded skipped the same way. A queue is therefore never longer than
// the number of its owner's schedules (config/sched/max_schedules).

// fire is a due occurrence of a schedule waiting in its owner's queue.
type fire struct {
	id    string
	owner uint32
	dueAt int64
	s     *abi.Schedule // loaded at dispatch; nil: changed since, load it at the start
}

// ownerQueue is one owner's schedules waiting, and the number of its
// target calls under way that the engine started.
type ownerQueue struct {
	fires   []*fire
	running int // target calls under way
	alive   int // runs under way (until recorded)
}

// fairState is the engine's queues, under Manager.mu.
type fairState struct {
	queues map[uint32]*ownerQueue // owners with fires waiting or runs under way
	ring   []uint32               // owners with fires waiting, in the order they are served
	cursor int                    // the index in ring of the owner served next
	queued map[string]*fire       // the fires waiting, by schedule id
	runs   int                    // the engine's runs under way
	// The limits: maxRunning, maxRunningPerOwner, maxQueuedPerOwner
	// (tests lower them).
	maxRuns, maxPerOwner, maxQueued int
	// stopping is set by Close: no run starts and nothing is queued.
	stopping bool
}

func newFairState() fairState {
	return fairState{queues: map[uint32]*ownerQueue{}, queued: map[string]*fire{},
		maxRuns: maxRunning, maxPerOwner: maxRunningPerOwner, maxQueued: maxQueuedPerOwner}
}

// enqueue puts the due occurrence dueAt of s in its owner's queue and
// starts what may start. An occurrence of a schedule that waits already,
// or runs, or whose owner's queue is full, is recorded skipped. now is
// the dispatch time.
func (m *Manager) enqueue(ctx context.Context, s *abi.Schedule, dueAt, now int64) {
	m.mu.Lock()
	if m.fair.stopping {
		m.mu.Unlock()
		return
	}
	why := ""
	q := m.fair.queues[s.OwnerUid]
	once := oneShot(s.Expression)
	switch {
	case m.fair.queued[s.ID] != nil && once:
		// A one-shot given a new time while it waits: the one waiting
		// runs it (loaded again: armChanged), once.
		m.mu.Unlock()
		return
	case m.fair.queued[s.ID] != nil:
		why = "its previous occurrence still waits in its owner's queue"
	case m.running[s.ID] != nil:
		why = "previous run still going"
	case q != nil && len(q.fires) >= m.fair.maxQueued && !once:
		// A one-shot always waits: skipped, it would never run.
		why = fmt.Sprintf("its owner's queue of due schedules is full (%d)", m.fair.maxQueued)
	}
	if why == "" {
		if q == nil {
			q = &ownerQueue{}
			m.fair.queues[s.OwnerUid] = q
		}
		f := &fire{id: s.ID, owner: s.OwnerUid, dueAt: dueAt, s: s}
		if len(q.fires) == 0 {
			m.fair.ring = append(m.fair.ring, s.OwnerUid)
		}
		q.fires = append(q.fires, f)
		m.fair.queued[s.ID] = f
		m.serveLocked()
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	if s.Broken != "" {
		m.skipBroken(s.ID, s.Broken)
		return
	}
	// Skipped, as the overlap policy skips: recorded, not counted, and
	// the next time armed.
	if at := occurrence(s); at != 0 {
		dueAt = at
	}
	m.finish(ctx, s, dueAt, now, m.clock.Now().UnixMilli(), "skipped", why, "", true, 0)
}

// serveLocked starts runs from the owners' queues, owners in turn, while
// the limits allow. m.mu is held.
func (m *Manager) serveLocked() {
	fs := &m.fair
	for !fs.stopping && fs.runs < fs.maxRuns && len(fs.ring) > 0 {
		i, ok := 0, false
		for n := range len(fs.ring) {
			i = (fs.cursor + n) % len(fs.ring)
			if fs.queues[fs.ring[i]].running < fs.maxPerOwner {
				ok = true
				break
			}
		}
		if !ok {
			return // every owner waiting is at its own limit
		}
		owner := fs.ring[i]
		q := fs.queues[owner]
		f := q.fires[0]
		q.fires[0] = nil
		q.fires = q.fires[1:]
		delete(fs.queued, f.id)
		q.running++
		q.alive++
		fs.runs++
		if len(q.fires) == 0 {
			fs.ring = append(fs.ring[:i], fs.ring[i+1:]...)
			fs.cursor = i // the next owner has moved to i
		} else {
			fs.cursor = i + 1
		}
		if len(fs.ring) > 0 {
			fs.cursor %= len(fs.ring)
		} else {
			fs.cursor = 0
		}
		m.wg.Add(1)
		go m.runFire(f)
	}
}

// runFire runs f. Its owner's slot is free once its target call returns
// (the next of the owner's schedules may start while this one is
// recorded), the engine's once it is recorded; then what may start
// starts.
func (m *Manager) runFire(f *fire) {
	defer m.wg.Done()
	var once sync.Once
	ownerDone := func() {
		once.Do(func() {
			m.mu.Lock()
			m.fair.queues[f.owner].running--
			m.serveLocked()
			m.mu.Unlock()
		})
	}
	defer func() {
		ownerDone()
		m.mu.Lock()
		m.fair.runs--
		q := m.fair.queues[f.owner]
		if q.alive--; q.alive == 0 && len(q.fires) == 0 {
			delete(m.fair.queues, f.owner)
		}
		m.serveLocked()
		m.mu.Unlock()
	}()
	ctx := context.Background()
	start := m.clock.Now().UnixMilli()
	if f.s == nil {
		m.runScheduled(ctx, f.id, f.dueAt, start, false, ownerDone)
		return
	}
	m.run(ctx, f.s, f.dueAt, start, false, ownerDone)
}

// changedLocked notes that schedule id changed (a syscall): if it waits
// in a queue, it is loaded again when it starts. m.mu is held.
func (m *Manager) changedLocked(id string) {
	if f := m.fair.queued[id]; f != nil {
		f.s = nil
	}
}

// unqueueLocked takes schedule id out of its owner's queue, if it waits
// there (sched.run runs it itself). m.mu is held.
func (m *Manager) unqueueLocked(id string) {
	f := m.fair.queued[id]
	if f == nil {
		return
	}
	delete(m.fair.queued, id)
	q := m.fair.queues[f.owner]
	for i, g := range q.fires {
		if g == f {
			q.fires = append(q.fires[:i], q.fires[i+1:]...)
			break
		}
	}
	if len(q.fires) > 0 {
		return
	}
	for i, o := range m.fair.ring {
		if o == f.owner {
			m.fair.ring = append(m.fair.ring[:i], m.fair.ring[i+1:]...)
			if m.fair.cursor > i {
				m.fair.cursor--
			}
			break
		}
	}
	if len(m.fair.ring) > 0 {
		m.fair.cursor %= len(m.fair.ring)
	} else {
		m.fair.cursor = 0
	}
	if q.alive == 0 {
		delete(m.fair.queues, f.owner)
	}
}
