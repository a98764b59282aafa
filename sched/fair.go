package sched

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// The owners' queues of due schedules: fair service of the engine's runs.
//
// The engine does not start a run per due schedule at once: it puts the
// schedule in its owner's queue (enqueue), and serveLocked starts runs
// from the queues, taking owners in turn (the owner waiting whose last
// start is the oldest goes first: no owner starts two runs in a row
// while another waits, whenever either entered its queue), while fewer than
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
//
// An owner's runs also start at most at a rate (fireRate a second, after
// a burst of fireBurst; root's are not counted): each owner has a token
// bucket, kept as a generic cell rate (tat: the time at which the
// owner's bucket is full again), and a fire whose owner has no token
// left waits in its queue, deferred, until the bucket allows it; the
// engine then wakes by itself (wakeLocked). A deferred fire is never
// dropped: it runs, late, as a run merely late runs (its next time is
// the first after its start: no catch-up). One owner's rate does not
// touch another's: each owner's bucket is its own, and owners are still
// served in turn. The rate bounds the daemon's own work a schedule storm
// makes (the target calls, the work they start in proc), which the
// bounds on runs under way do not: a target call that returns at once
// frees its slot at once.

// fire is a due occurrence of a schedule waiting in its owner's queue.
type fire struct {
	id       string
	owner    uint32
	dueAt    int64
	queuedAt int64         // when it entered its owner's queue (ms)
	s        *abi.Schedule // loaded at dispatch; nil: changed since, load it at the start
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
	ring   []uint32               // owners with fires waiting, in the order they came
	served map[uint32]uint64      // each owner's last start (a sequence number; none: never)
	seq    uint64                 // the sequence of starts
	queued map[string]*fire       // the fires waiting, by schedule id
	runs   int                    // the engine's runs under way
	// The limits: maxRunning, maxRunningPerOwner, maxQueuedPerOwner
	// (tests lower them).
	maxRuns, maxPerOwner, maxQueued int
	// The owners' fire rate: one fire every interval ms, bursts of burst
	// (fireRate, fireBurst); interval 0: none (tests change them).
	interval, burst int64
	// tat is each owner's bucket: the time (ms) at which it is full
	// again; an owner whose bucket is full has no entry.
	tat map[uint32]int64
	// wakeAt is when a wake-up (wakeLocked) is armed to start deferred
	// fires (ms; 0: none).
	wakeAt int64
	// stopping is set by Close: no run starts and nothing is queued.
	stopping bool
}

func newFairState(rate bool) fairState {
	fs := fairState{queues: map[uint32]*ownerQueue{}, queued: map[string]*fire{}, tat: map[uint32]int64{}, served: map[uint32]uint64{},
		maxRuns: maxRunning, maxPerOwner: maxRunningPerOwner, maxQueued: maxQueuedPerOwner}
	if rate {
		fs.interval, fs.burst = 1000/fireRate, fireBurst
	}
	return fs
}

// The owners' fire rate (docs/scheduler.md, "The engine"): an owner's
// schedules start at most fireRate runs a second, after a burst of
// fireBurst (the bucket's size); root's schedules are not held to it.
// Above the rate, due schedules wait in their owner's queue, deferred.
// fireBurst is above maxRunningPerOwner: a crontab's many schedules due
// at one minute start as the running bound lets them; 256 (the default
// schedule limit) due at once all start within 13 s.
const (
	fireRate  = 4
	fireBurst = 128
)

// tokenLocked reports whether owner has a fire token at now (ms), and
// takes it if take is set, or reports false and when the next one comes
// (ms). m.mu is held.
func (fs *fairState) tokenLocked(owner uint32, now int64, take bool) (ok bool, at int64) {
	if fs.interval <= 0 || owner == 0 {
		return true, 0
	}
	tat := max(fs.tat[owner], now)
	if early := tat - (fs.burst-1)*fs.interval; early > now {
		return false, early
	}
	if take {
		fs.tat[owner] = tat + fs.interval
	}
	return true, 0
}

// forgetFullLocked drops the buckets that are full at now: an owner with
// nothing waiting or running whose rate has recovered. m.mu is held.
func (fs *fairState) forgetFullLocked(now int64) {
	for o, tat := range fs.tat {
		if tat <= now {
			delete(fs.tat, o)
		}
	}
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
		f := &fire{id: s.ID, owner: s.OwnerUid, dueAt: dueAt, queuedAt: m.clock.Now().UnixMilli(), s: s}
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
	m.finish(ctx, s, dueAt, now, m.clock.Now().UnixMilli(), "skipped", why, "", true, 0, -1)
}

// serveLocked starts runs from the owners' queues, owners in turn, while
// the limits allow: the engine's and each owner's runs under way, and
// each owner's fire rate. When the rate alone holds fires back, a
// wake-up is armed for the first token to come. m.mu is held.
func (m *Manager) serveLocked() {
	fs := &m.fair
	if fs.stopping || len(fs.ring) == 0 {
		return
	}
	now := m.clock.Now().UnixMilli()
	for !fs.stopping && fs.runs < fs.maxRuns && len(fs.ring) > 0 {
		i := -1
		var wake int64 // the first token of an owner held back by the rate
		for j, owner := range fs.ring {
			if fs.queues[owner].running >= fs.maxPerOwner {
				continue
			}
			if i >= 0 && fs.served[owner] >= fs.served[fs.ring[i]] {
				continue
			}
			if got, at := fs.tokenLocked(owner, now, false); !got {
				if wake == 0 || at < wake {
					wake = at
				}
				continue
			}
			i = j
		}
		if i < 0 {
			// Every owner waiting is at its own limit: a run's end
			// serves again, or the wake-up once a token comes.
			if wake != 0 {
				m.wakeLocked(wake, now)
			}
			return
		}
		owner := fs.ring[i]
		fs.tokenLocked(owner, now, true)
		fs.seq++
		fs.served[owner] = fs.seq
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
		}
		m.wg.Add(1)
		go m.runFire(f)
	}
}

// wakeLocked arms a wake-up at at (ms; now is the time) that serves the
// queues again, unless one is armed for that time or earlier. The
// wake-up is a goroutine of the engine's (Close waits for it; it ends at
// the engine's stop). m.mu is held.
func (m *Manager) wakeLocked(at, now int64) {
	fs := &m.fair
	if fs.wakeAt != 0 && fs.wakeAt <= at {
		return
	}
	fs.wakeAt = at
	after := m.clock.After(time.Duration(at-now) * time.Millisecond)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-after:
		case <-m.stop:
			return
		}
		m.mu.Lock()
		if fs.wakeAt == at {
			fs.wakeAt = 0
		}
		m.serveLocked()
		m.mu.Unlock()
	}()
}

// waitingSinceLocked is when schedule id entered its owner's queue, if
// it waits there (0: it does not). m.mu is held.
func (m *Manager) waitingSinceLocked(id string) int64 {
	if f := m.fair.queued[id]; f != nil {
		return f.queuedAt
	}
	return 0
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
			delete(m.fair.served, f.owner)
			m.fair.forgetFullLocked(m.clock.Now().UnixMilli())
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
			break
		}
	}
	if q.alive == 0 {
		delete(m.fair.queues, f.owner)
		delete(m.fair.served, f.owner)
	}
}
