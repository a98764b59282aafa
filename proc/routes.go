package proc

import (
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Run routes (seed 004, "Process Signal Routing"): a run's chat
// notifications (chat.delta, chat.complete) go to the connection that
// started it, when it listens (a 9P attach's /sys/events, a mount user's
// streams), else to its owner's streams. A route lives 30 minutes, or
// until its run completes.

// runRouteTTL is how long a run route lives.
const runRouteTTL = 30 * time.Minute

// runRoutes maps run ids to the identity (connection) that started them.
type runRoutes struct {
	mu     sync.Mutex // guards m and pruned
	m      map[string]runRoute
	pruned time.Time // when the expired routes last went
}

type runRoute struct {
	id *kernel.Identity
	at time.Time
}

// add routes run to the connection of c, unless c is a process or the
// kernel (whose runs have no listener of their own); it drops the routes
// past their TTL.
func (r *runRoutes) add(run string, c *kernel.Caller) {
	if c == nil || c.Identity == nil || c.Pid != "" || c.Role == "kernel" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]runRoute{}
	}
	now := time.Now()
	// The routes past their TTL go once a minute, not at every add.
	if now.Sub(r.pruned) > time.Minute {
		for k, v := range r.m {
			if now.Sub(v.at) > runRouteTTL {
				delete(r.m, k)
			}
		}
		r.pruned = now
	}
	r.m[run] = runRoute{id: c.Identity, at: now}
}

// conn is run's connection, nil if it has no live route; done forgets it.
func (r *runRoutes) conn(run string, done bool) *kernel.Identity {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt, ok := r.m[run]
	if done {
		delete(r.m, run)
	}
	if !ok || time.Since(rt.at) > runRouteTTL {
		return nil
	}
	return rt.id
}

// chatSignal publishes a chat notification of run, a signal of m, to its
// route, falling back to its owner uid (and root); complete ends the
// route.
func chatSignal[P abi.Scoped](m *engine, uid uint32, run string, sig abi.Signal[P], p P, complete bool) {
	kernel.Publish(m.k, sig, p, kernel.Audience{Uids: []uint32{uid}, Conn: m.routes.conn(run, complete)})
}
