package ninep

import (
	"container/list"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"time"
)

// The gate of connections that have not authenticated yet (TCP, TLS and
// WebSocket listeners: a peer known only by its address). Every such
// connection holds a Ticket from the moment it is accepted until it
// authenticates (a 9P Tattach that succeeds, a device's node token
// accepted) or closes. The gate bounds them three ways:
//
//   - a deadline: a connection still unauthenticated Timeout after it was
//     accepted is closed, whatever stage it is at (a TLS or WebSocket
//     handshake, the first bytes, a device's hello, a 9P attach);
//   - per peer address: a peer holds at most MaxPerPeer tickets; one more
//     connection of that peer closes the peer's oldest unauthenticated
//     one;
//   - in total: at most Max tickets; one more connection closes the oldest
//     unauthenticated connection of the peer holding the most tickets.
//
// A new connection is never refused for being over a cap: the oldest one
// goes instead, so that a peer that opens connections and stalls cannot
// lock out a client behind the same address (loopback, NAT, a proxy) that
// authenticates promptly; that client needs only to authenticate before
// MaxPerPeer more connections of its address arrive. An authenticated
// connection leaves the gate and is bounded by the 9P server's limits per
// principal (a token's connections) or by the devices' (one connection
// per device, devices per user).

// Defaults of a Gate.
const (
	// DefaultMaxPreAuth is how many unauthenticated connections a Gate
	// holds at once.
	DefaultMaxPreAuth = 256
	// DefaultMaxPreAuthPerPeer is how many unauthenticated connections
	// one peer address holds at once.
	DefaultMaxPreAuthPerPeer = 64
)

// Gate bounds the unauthenticated connections of the listeners it wraps
// (see Listen): Max of them at once, MaxPerPeer per peer address, each for
// at most Timeout. Its zero value is ready to use with the defaults. A
// Gate's fields must not change once it is in use.
type Gate struct {
	// Max is how many unauthenticated connections the gate holds at
	// once; zero means DefaultMaxPreAuth, a negative value no limit.
	Max int
	// MaxPerPeer is how many unauthenticated connections one peer
	// address holds at once; zero means DefaultMaxPreAuthPerPeer, a
	// negative value no limit (but never more than Max).
	MaxPerPeer int
	// Timeout is how long a connection may stay unauthenticated; zero
	// means DefaultAuthTimeout, a negative value no deadline.
	Timeout time.Duration
	// Logger receives a warning (at most once a minute) when a cap closes
	// a connection, and debug logs of each. Nil means discard.
	Logger *slog.Logger

	mu     sync.Mutex
	total  int
	seq    uint64
	peers  map[string]*list.List // the tickets of each peer address, oldest first
	warned time.Time             // the last warning
}

// Ticket is one unauthenticated connection's place in a Gate.
type Ticket struct {
	g     *Gate
	peer  string
	c     net.Conn // closed when the ticket is evicted
	seq   uint64   // the order of admission
	elem  *list.Element
	timer *time.Timer
	// guarded by g.mu
	left    bool // it has left the gate (authenticated, closed or evicted)
	evicted bool
}

// max is the total cap; not positive means none.
func (g *Gate) max() int { return orDefault(g.Max, DefaultMaxPreAuth) }

// maxPerPeer is the cap per peer; not positive means none.
func (g *Gate) maxPerPeer() int {
	n := orDefault(g.MaxPerPeer, DefaultMaxPreAuthPerPeer)
	if m := g.max(); m > 0 && (n <= 0 || n > m) {
		n = m
	}
	return n
}

func (g *Gate) timeout() time.Duration { return orDefault(g.Timeout, DefaultAuthTimeout) }

func (g *Gate) logger() *slog.Logger {
	if g.Logger != nil {
		return g.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// peerAddr is the address a connection counts against: the host of its
// remote address.
func peerAddr(c net.Conn) string {
	addr := ""
	if a := c.RemoteAddr(); a != nil {
		addr = a.String()
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	if addr == "" {
		addr = "unknown"
	}
	return addr
}

// Admit gives c a ticket, closing older unauthenticated connections if a
// cap is reached (see the comment on Gate). The ticket closes c when it is
// evicted or its deadline passes; call Authenticated when c authenticates
// and Leave when c closes (a connection of Listen does both itself).
func (g *Gate) Admit(c net.Conn) *Ticket {
	t := &Ticket{g: g, peer: peerAddr(c), c: c}
	g.admit(t)
	return t
}

// admit takes t into the gate (see Admit).
func (g *Gate) admit(t *Ticket) {
	var evict []*Ticket
	g.mu.Lock()
	if g.peers == nil {
		g.peers = map[string]*list.List{}
	}
	for m := g.maxPerPeer(); m > 0; {
		q := g.peers[t.peer]
		if q == nil || q.Len() < m {
			break
		}
		evict = append(evict, g.evictLocked(q, "per-peer"))
	}
	for m := g.max(); m > 0 && g.total >= m; {
		evict = append(evict, g.evictLocked(g.busiestLocked(), "total"))
	}
	q := g.peers[t.peer]
	if q == nil {
		q = list.New()
		g.peers[t.peer] = q
	}
	g.seq++
	t.seq = g.seq
	t.elem = q.PushBack(t)
	g.total++
	if d := g.timeout(); d > 0 {
		t.timer = time.AfterFunc(d, t.expire)
	}
	g.mu.Unlock()
	for _, e := range evict {
		e.c.Close()
	}
}

// busiestLocked returns the queue of the peer holding the most tickets
// (of two with as many, the one whose oldest is older). g.mu is held and
// g.total > 0.
func (g *Gate) busiestLocked() *list.List {
	var best *list.List
	for _, q := range g.peers {
		if q.Len() == 0 {
			continue
		}
		if best == nil || q.Len() > best.Len() ||
			q.Len() == best.Len() && q.Front().Value.(*Ticket).seq < best.Front().Value.(*Ticket).seq {
			best = q
		}
	}
	return best
}

// evictLocked takes the oldest ticket of q out of the gate and returns it,
// for its connection to be closed once g.mu is released. g.mu is held.
func (g *Gate) evictLocked(q *list.List, cap string) *Ticket {
	t := q.Front().Value.(*Ticket)
	t.evicted = true
	g.leaveLocked(t)
	now := time.Now()
	log := g.logger()
	if now.Sub(g.warned) >= time.Minute {
		g.warned = now
		log.Warn("unauthenticated connections at their cap: closing the oldest", "cap", cap, "peer", t.peer,
			"max", g.max(), "max_per_peer", g.maxPerPeer())
	}
	log.Debug("unauthenticated connection evicted", "cap", cap, "peer", t.peer)
	return t
}

// leaveLocked takes t out of the gate once. g.mu is held.
func (g *Gate) leaveLocked(t *Ticket) {
	if t.left {
		return
	}
	t.left = true
	if t.timer != nil {
		t.timer.Stop()
	}
	q := g.peers[t.peer]
	q.Remove(t.elem)
	if q.Len() == 0 {
		delete(g.peers, t.peer)
	}
	g.total--
}

// expire closes t's connection if it has not authenticated by its
// deadline.
func (t *Ticket) expire() {
	t.g.mu.Lock()
	if t.left {
		t.g.mu.Unlock()
		return
	}
	t.evicted = true
	t.g.leaveLocked(t)
	t.g.mu.Unlock()
	t.g.logger().Debug("unauthenticated connection closed at its deadline", "peer", t.peer, "timeout", t.g.timeout())
	t.c.Close()
}

// Authenticated takes t's connection out of the gate: it has
// authenticated. It is a no-op on a nil ticket, and after the first call.
func (t *Ticket) Authenticated() { t.Leave() }

// Leave takes t out of the gate (its connection closed). It is a no-op
// on a nil ticket, and after the first call.
func (t *Ticket) Leave() {
	if t == nil {
		return
	}
	t.g.mu.Lock()
	t.g.leaveLocked(t)
	t.g.mu.Unlock()
}

// Evicted reports whether the gate closed t's connection (a cap or the
// deadline).
func (t *Ticket) Evicted() bool {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	return t.evicted
}

// Held reports how many unauthenticated connections the gate holds.
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total
}

// Listen returns a listener whose connections are l's, each admitted to
// the gate as it is accepted (Admit). A connection leaves the gate when
// it is closed, or when whoever serves it calls Authenticated on its
// ticket (TicketOf). Wrap the listener that accepts the sockets, beneath
// any TLS or WebSocket listener, so that their handshakes are gated too.
func (g *Gate) Listen(l net.Listener) net.Listener { return &gateListener{Listener: l, g: g} }

type gateListener struct {
	net.Listener
	g *Gate
}

func (l *gateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &gatedConn{Conn: c}
	gc.t = &Ticket{g: l.g, peer: peerAddr(c), c: gc}
	l.g.admit(gc.t)
	return gc, nil
}

// gatedConn is a connection of a gate's listener.
type gatedConn struct {
	net.Conn
	t *Ticket
}

// PreAuth returns the connection's ticket.
func (c *gatedConn) PreAuth() *Ticket { return c.t }

// NetConn returns the connection the listener accepted (a socket whose
// hang-up a caller may watch).
func (c *gatedConn) NetConn() net.Conn { return c.Conn }

// Close closes the connection and takes it out of the gate.
func (c *gatedConn) Close() error {
	c.t.Leave()
	return c.Conn.Close()
}

// A PreAuther is a connection that holds a gate's ticket (or wraps one
// that does).
type PreAuther interface {
	PreAuth() *Ticket
}

// TicketOf returns the ticket of c, or of the connection c wraps (a TLS
// connection's, or one with a NetConn method), or nil if it has none.
func TicketOf(c net.Conn) *Ticket {
	for range 8 {
		switch x := c.(type) {
		case PreAuther:
			return x.PreAuth()
		case *tls.Conn:
			c = x.NetConn()
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}
