package ninep

import (
	"net"
	"testing"
	"time"

	"github.com/knusbaum/go9p/proto"
)

// serveGated serves srv on a fresh TCP port of 127.0.0.1 whose
// connections g holds until they attach, and returns its dial string.
func serveGated(t *testing.T, srv *Server, g *Gate) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveListener(t, srv, g.Listen(l))
	host, port, _ := net.SplitHostPort(l.Addr().String())
	return "tcp!" + host + "!" + port
}

// stall opens a TCP connection to addr, negotiates a version and attaches
// nothing: a peer that holds a connection without authenticating.
func stall(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	rc := newRaw(t, nc)
	mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, "9P2000")))
	return rc
}

// TestGateStallersDoNotLockOut: connections from one address that never
// attach (more than the server's connection cap, 72 here and on every
// address behind a NAT) do not lock out a client of the same address that
// attaches: each new connection over the gate's cap closes the oldest
// unauthenticated one, and the attached client leaves the gate.
func TestGateStallersDoNotLockOut(t *testing.T) {
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, MaxConns: 64}
	g := &Gate{MaxPerPeer: 16, Max: 32, Timeout: time.Minute}
	addr := serveGated(t, srv, g)
	var stalled []*rawConn
	for range 100 {
		stalled = append(stalled, stall(t, addr))
	}
	// The oldest are closed; the gate holds its per-peer cap.
	stalled[0].expectClosed()
	waitUntil(t, "the gate holds its per-peer cap", func() bool { return g.Held() <= 16 })
	for range 5 {
		fsys, err := Mount(addr, "glenda", []byte("good-token"))
		if err != nil {
			t.Fatalf("an honest client behind the stallers' address: %v", err)
		}
		if _, err := fsys.Stat("view"); err != nil {
			t.Fatalf("stat after attach: %v", err)
		}
		defer fsys.Close()
	}
	// Attached clients left the gate: it holds stallers only.
	if n := g.Held(); n > 16 {
		t.Fatalf("gate holds %d connections, want at most its per-peer cap 16", n)
	}
}

// TestGateTotal: at the total cap a new connection closes the oldest of
// the address holding the most.
func TestGateTotal(t *testing.T) {
	g := &Gate{Max: 4, MaxPerPeer: 4, Timeout: -1}
	conns := map[string][]*fakeConn{}
	admit := func(host string) *Ticket {
		c := &fakeConn{addr: host}
		conns[host] = append(conns[host], c)
		return g.Admit(c)
	}
	a1 := admit("10.0.0.1")
	admit("10.0.0.1")
	admit("10.0.0.1")
	b1 := admit("10.0.0.2")
	// The gate is full: 10.0.0.2's connection takes the place of
	// 10.0.0.1's oldest, not of its own.
	admit("10.0.0.2")
	if !conns["10.0.0.1"][0].closed || !a1.Evicted() || b1.Evicted() || conns["10.0.0.2"][0].closed {
		t.Fatalf("the oldest of the busiest address was not the one closed: %+v %+v", conns["10.0.0.1"], conns["10.0.0.2"])
	}
	if g.Held() != 4 {
		t.Fatalf("held %d, want 4", g.Held())
	}
	// An authenticated connection leaves the gate and is never closed by it.
	b1.Authenticated()
	admit("10.0.0.3")
	if conns["10.0.0.2"][0].closed {
		t.Fatal("an authenticated connection was closed by the gate")
	}
	if g.Held() != 4 {
		t.Fatalf("held %d, want 4", g.Held())
	}
}

// TestGateDeadline: a connection still unauthenticated at the gate's
// deadline is closed, whatever it is doing.
func TestGateDeadline(t *testing.T) {
	g := &Gate{Timeout: 100 * time.Millisecond}
	c := &fakeConn{addr: "10.0.0.1", closedC: make(chan struct{})}
	tk := g.Admit(c)
	select {
	case <-c.closedC:
	case <-time.After(rpcTimeout):
		t.Fatal("a connection that never authenticated was not closed at the deadline")
	}
	if !tk.Evicted() || g.Held() != 0 {
		t.Fatalf("evicted %v, held %d", tk.Evicted(), g.Held())
	}
	c2 := &fakeConn{addr: "10.0.0.1", closedC: make(chan struct{})}
	g.Admit(c2).Authenticated()
	time.Sleep(300 * time.Millisecond) // past the deadline: nothing may happen
	if c2.closed {
		t.Fatal("an authenticated connection was closed at the deadline")
	}
}

// waitUntil polls cond until it holds, or fails the test after rpcTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(rpcTimeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, rpcTimeout)
		}
	}
}

// fakeConn is a net.Conn of a remote address that records its Close.
type fakeConn struct {
	net.Conn
	addr    string
	closed  bool
	closedC chan struct{}
}

func (c *fakeConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP(c.addr), Port: 1}
}

func (c *fakeConn) Close() error {
	if !c.closed && c.closedC != nil {
		close(c.closedC)
	}
	c.closed = true
	return nil
}
