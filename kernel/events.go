package kernel

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"gsvfs.dev/gsvfs/abi"
)

// audience says who may see a signal. Root always may.
type audience struct {
	all  bool
	uids []uint32
	conn *Identity
}

// Audience is who may see a signal: everyone (All), or the users Uids
// (and root). Conn, if set, routes it: the signal goes only to the
// subscriptions of that identity (the connection that started the work:
// a 9P attach, a mount's user) when it has any, and to the rest of the
// audience only when it has none.
type Audience struct {
	All  bool
	Uids []uint32
	Conn *Identity
}

func (a audience) sees(id *Identity) bool {
	return a.all || id.IsRoot() || slices.Contains(a.uids, id.Uid)
}

// subQueue is the most records a Subscription buffers; past it the oldest are
// dropped and the reader is told how many with an "events.lost" frame.
const subQueue = 4096

// Event is a signal's envelope on the bus: its name, the process and
// conversation it belongs to (from an abi.Scoped payload; "" when it
// belongs to none) and its payload. Filters and observers read the
// envelope, never the payload, to route it.
type Event struct {
	Signal  string
	Pid     string
	Conv    string
	Payload any
}

type bus struct {
	mu        sync.Mutex
	seq       uint64
	subs      map[*Subscription]struct{}
	observers []func(ev *Event, a Audience)
}

// Observe adds f to the observers of the signal bus: f sees every signal
// with its audience, in the order published, before any subscriber. It
// runs with the bus locked: it must return at once (hand the signal to a
// goroutine of its own) and must not publish.
func (k *Kernel) Observe(f func(ev *Event, a Audience)) {
	k.bus.mu.Lock()
	defer k.bus.mu.Unlock()
	k.bus.observers = append(k.bus.observers, f)
}

// Subscription is one reader's queue of the signal bus: the records of the
// signals its identity may see, from the moment it subscribed. It has the
// methods of a vfs.Subscription, which a stream file serves.
type Subscription struct {
	id     *Identity
	filter func(ev *Event) bool
	mu     sync.Mutex
	q      [][]byte
	lost   uint64
	wake   chan struct{}
	closed bool
	bus    *bus
}

// Publish publishes the signal sig with payload p to every Subscription
// in the audience a. A payload that is abi.Scoped puts its pid and
// conversation on the envelope.
func Publish[P any](k *Kernel, sig abi.Signal[P], p P, a Audience) {
	k.send(event(sig, p), audience{all: a.All, uids: a.Uids, conn: a.Conn})
}

// publish is Publish with the kernel's own audience.
func publish[P any](k *Kernel, sig abi.Signal[P], p P, a audience) { k.send(event(sig, p), a) }

func event[P any](sig abi.Signal[P], p P) *Event {
	ev := &Event{Signal: sig.Name, Payload: p}
	if s, ok := any(p).(abi.Scoped); ok {
		ev.Pid, ev.Conv = s.SignalScope()
	}
	return ev
}

func (k *Kernel) send(ev *Event, a audience) {
	b := &k.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	for _, f := range b.observers {
		f(ev, Audience{All: a.all, Uids: a.uids, Conn: a.conn})
	}
	if len(b.subs) == 0 {
		return
	}
	rec, err := json.Marshal(abi.SignalFrame{Type: "sig", Signal: ev.Signal, Payload: ev.Payload, Seq: b.seq})
	if err != nil {
		k.log.Error("signal encode", "signal", ev.Signal, "err", err)
		return
	}
	rec = append(rec, '\n')
	wants := func(s *Subscription) bool { return s.filter == nil || s.filter(ev) }
	if a.conn != nil {
		routed := false
		for s := range b.subs {
			if s.id == a.conn && a.sees(s.id) && wants(s) {
				s.push(rec)
				routed = true
			}
		}
		if routed {
			return
		}
	}
	for s := range b.subs {
		if a.sees(s.id) && wants(s) {
			s.push(rec)
		}
	}
}

func (s *Subscription) push(rec []byte) {
	s.mu.Lock()
	if len(s.q) >= subQueue {
		s.q = s.q[1:]
		s.lost++
	}
	s.q = append(s.q, rec)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Subscribe returns a subscription to the signals id may see, starting now.
// filter, if not nil, narrows them further.
func (k *Kernel) Subscribe(id *Identity, filter func(ev *Event) bool) *Subscription {
	s := &Subscription{id: id, filter: filter, wake: make(chan struct{}, 1), bus: &k.bus}
	k.bus.mu.Lock()
	if k.bus.subs == nil {
		k.bus.subs = map[*Subscription]struct{}{}
	}
	k.bus.subs[s] = struct{}{}
	k.bus.mu.Unlock()
	return s
}

// Poll returns the next record without waiting; false if there is none.
func (s *Subscription) Poll() ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost > 0 {
		n := s.lost
		s.lost = 0
		b, _ := json.Marshal(abi.SignalFrame{Type: "sig", Signal: abi.SigEventsLost.Name, Payload: abi.EventsLost{Dropped: n}})
		return append(b, '\n'), true
	}
	if len(s.q) == 0 {
		return nil, false
	}
	rec := s.q[0]
	s.q[0] = nil
	s.q = s.q[1:]
	return rec, true
}

// Next waits for the next record, for ctx, or for the bus to close.
func (s *Subscription) Next(ctx context.Context) ([]byte, error) {
	for {
		if rec, ok := s.Poll(); ok {
			return rec, nil
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, abi.E(abi.Other, "event stream closed")
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close ends the subscription; a waiting Next returns.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
	s.mu.Lock()
	s.closed = true
	s.q = nil
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (b *bus) closeAll() {
	b.mu.Lock()
	subs := b.subs
	b.subs = nil
	b.mu.Unlock()
	for s := range subs {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// eventSyscalls is the table of the signal bus's and err views'
// syscalls. Both are Internal: sys.events's result is a live
// subscription, which only the namespace can serve, and sys.lasterror
// serves the err views.
func (k *Kernel) eventSyscalls() []Syscall {
	return []Syscall{
		Handle(abi.SysEvents, k.events),
		Handle(abi.SysLastError, k.lastErrorCall),
	}
}

// events serves sys.events: a subscription to the signals the caller may
// see, from now on.
func (k *Kernel) events(ctx context.Context, c *Caller, _ *struct{}) (abi.EventStream, error) {
	return k.Subscribe(c.Identity, nil), nil
}

// LastErrorArgs are sys.lasterror's args (abi.LastErrorArgs).
type LastErrorArgs = abi.LastErrorArgs

// lastErrorCall serves sys.lasterror: the message of the caller's last
// failure in a.Dir, or "".
func (k *Kernel) lastErrorCall(ctx context.Context, c *Caller, a *LastErrorArgs) (string, error) {
	return k.lastError(c.Uid, a.Dir), nil
}
