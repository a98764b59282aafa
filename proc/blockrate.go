package proc

import (
	"context"
	"sync"
	"time"
)

// Each user's CodeMode blocks start at most blockRate a second, after a
// burst of blockBurst (docs/codemode.md, "Limits"): a token bucket per
// user, kept as a generic cell rate (tat: the time at which the user's
// bucket is full again). A block past it is not refused: its start waits
// for its token, and the caller's context ends the wait at once (Ctrl-C,
// Tflush, the run's end). Root's blocks are not held to it. A block's
// worker is a process start and the block's own CPU, whoever asks: the
// rate bounds the work one user's blocks bring the host whatever each
// costs the user, so that a user running blocks again and again cannot
// crowd the daemon's service of the others (issue 20, the CodeMode
// flood); the blocks of different users never wait for each other.
const (
	blockRate  = 4
	blockBurst = 8
)

// blockGate is the users' buckets of block starts.
type blockGate struct {
	// interval is the time one token takes to come (1/rate); 0: no
	// rate. burst is the bucket's size. Tests change both.
	interval time.Duration
	burst    int

	mu sync.Mutex // guards tat and waiting
	// tat is each user's bucket: the time at which it is full again;
	// a user whose bucket is full has no entry (once seen by take).
	tat     map[uint32]time.Time
	waiting map[uint32]int // the starts waiting for a token, per user
}

func newBlockGate() *blockGate {
	return &blockGate{interval: time.Second / blockRate, burst: blockBurst,
		tat: map[uint32]time.Time{}, waiting: map[uint32]int{}}
}

// take returns once uid may start a block: at once while uid's bucket
// holds a token, else when the token uid is given comes. It fails with
// ctx's error if ctx ends first; the token is then given back. Root
// (uid 0) is not held.
func (g *blockGate) take(ctx context.Context, uid uint32) error {
	if uid == 0 {
		return nil
	}
	g.mu.Lock()
	if g.interval <= 0 {
		g.mu.Unlock()
		return nil
	}
	now := time.Now()
	for u, t := range g.tat {
		if !t.After(now) && g.waiting[u] == 0 {
			delete(g.tat, u) // full: forget it
		}
	}
	tat := g.tat[uid]
	if tat.Before(now) {
		tat = now
	}
	// The token is uid's when the bucket, full at tat, has room for one
	// more: burst tokens before it is full.
	at := tat.Add(-time.Duration(g.burst-1) * g.interval)
	g.tat[uid] = tat.Add(g.interval)
	wait := at.Sub(now)
	if wait <= 0 {
		g.mu.Unlock()
		return nil
	}
	g.waiting[uid]++
	interval := g.interval
	g.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.mu.Lock()
	if g.waiting[uid]--; g.waiting[uid] == 0 {
		delete(g.waiting, uid)
	}
	if err != nil {
		// Give the token back: the next start of uid's comes as soon
		// as it would have without this one.
		g.tat[uid] = g.tat[uid].Add(-interval)
	}
	g.mu.Unlock()
	return err
}

// waitingFor is how many of uid's block starts wait for a token.
func (g *blockGate) waitingFor(uid uint32) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting[uid]
}
