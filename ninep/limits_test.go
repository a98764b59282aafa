package ninep

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// mountN attaches n times to addr as glenda with token (see Mount),
// failing the test if any attach fails, and closes the mounts at cleanup.
func mountN(t *testing.T, addr string, token []byte, n int) []*client.Fsys {
	t.Helper()
	var out []*client.Fsys
	for i := range n {
		fsys, err := Mount(addr, "glenda", token)
		if err != nil {
			t.Fatalf("mount %d of %d: %v", i+1, n, err)
		}
		t.Cleanup(func() { fsys.Close() })
		out = append(out, fsys)
	}
	return out
}

// TestAuthDeadline: a connection that has not attached within
// Server.AuthTimeout is closed, on a unix socket and on TCP, whether it
// sent nothing, only a Tversion, or reset its session with a Tversion
// after attaching; an attached connection outlives the deadline.
func TestAuthDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, AuthTimeout: timeout}
	sock := serveUnix(t, srv)
	tcp := serveTCP(t, srv)
	// A server whose deadline is far off, for what must happen at once.
	slow := &Server{Root: tt.root, Auth: testAuth{}, AuthTimeout: 10 * time.Minute}
	slowAddr := map[string]string{"unix": serveUnix(t, slow), "tcp": serveTCP(t, slow)}

	closedWithin := func(t *testing.T, rc *rawConn, within time.Duration) {
		t.Helper()
		start := time.Now()
		rc.expectClosed()
		if d := time.Since(start); d > within {
			t.Errorf("closed after %v, want within %v", d, within)
		}
	}
	for _, network := range []string{"unix", "tcp"} {
		addr := sock
		if network == "tcp" {
			addr = tcp
		}
		dial := func(t *testing.T) *rawConn {
			nc, err := Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			return newRaw(t, nc)
		}
		t.Run(network+"/silent", func(t *testing.T) {
			closedWithin(t, dial(t), rpcTimeout)
		})
		t.Run(network+"/version only", func(t *testing.T) {
			rc := dial(t)
			mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, "9P2000")))
			closedWithin(t, rc, rpcTimeout)
		})
		t.Run(network+"/refused attach", func(t *testing.T) {
			// A peer that cannot authenticate is closed at once, not at
			// the deadline (10 min on this server).
			nc, err := Dial(slowAddr[network])
			if err != nil {
				t.Fatal(err)
			}
			rc := newRaw(t, nc)
			mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, "9P2000")))
			mustErr(t, rc.rpc(tattach(1, 0, NOFID, "evil")), "permission denied")
			closedWithin(t, rc, rpcTimeout)
		})
	}
	t.Run("attached", func(t *testing.T) {
		rc := dialRaw(t, sock)
		rc.setup(8192)
		// A refused attach on an attached connection does not close it.
		mustErr(t, rc.rpc(tattach(2, 1, NOFID, "evil")), "permission denied")
		time.Sleep(3 * timeout)
		mustR[*proto.RStat](t, rc.rpc(tstat(2, 0)))
		// A Tversion resets the session: the deadline runs again.
		mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, "9P2000")))
		closedWithin(t, rc, rpcTimeout)
	})
}

// TestConnCap: a host uid at Server.MaxConns gets a clear error for one
// more connection, while another uid connects and reads as before; a flood
// of connections by the first uid is closed at once and holds nothing.
func TestConnCap(t *testing.T) {
	const max = 3
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, MaxConns: max}
	sockA := serveAsUID(t, srv, 1001)
	sockB := serveAsUID(t, srv, 1002)

	held := mountN(t, sockA, nil, max)
	_, err := Mount(sockA, "glenda", nil)
	if err == nil || err.Error() != "too many connections for uid 1001" {
		t.Fatalf("mount %d as uid 1001: err = %v, want too many connections for uid 1001", max+1, err)
	}
	// A flood: a few connections are kept long enough to be told why;
	// the rest are closed as soon as they are accepted.
	var flood []*rawConn
	for range 50 {
		nc, err := net.Dial("unix", sockA)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, newRaw(t, nc))
	}
	closed := 0
	for _, rc := range flood {
		select {
		case _, ok := <-rc.in:
			if !ok {
				closed++
			}
		case <-time.After(2 * time.Second):
		}
	}
	if closed < 50-refuseSlack {
		t.Errorf("%d of 50 flood connections were closed at once, want at least %d", closed, 50-refuseSlack)
	}
	// uid 1002 is not affected.
	for _, fsys := range mountN(t, sockB, nil, max) {
		if got := vfstest.ReadFile(t, fsys, "view"); got != "hello\n" {
			t.Fatalf("uid 1002 reads view: %q", got)
		}
	}
	// uid 1001's own connections still work, and closing one frees its slot.
	if got := vfstest.ReadFile(t, held[0], "view"); got != "hello\n" {
		t.Fatalf("uid 1001 reads view on a held connection: %q", got)
	}
	for _, rc := range flood {
		rc.nc.Close()
	}
	held[0].Close()
	var fsys *client.Fsys
	deadline := time.Now().Add(rpcTimeout)
	for {
		fsys, err = Mount(sockA, "glenda", nil)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("mount as uid 1001 after closing a connection: %v", err)
	}
	fsys.Close()
}

// TestFidCap: one principal holds at most Server.MaxFids fids across its
// connections; clunking one frees it; another principal is unaffected.
func TestFidCap(t *testing.T) {
	const max = 6
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, MaxFids: max}
	sockA := serveAsUID(t, srv, 1001)
	sockB := serveAsUID(t, srv, 1002)

	a1, a2 := dialRaw(t, sockA), dialRaw(t, sockA)
	a1.setup(8192) // fid 0
	a2.setup(8192) // fid 0
	tag := uint16(10)
	for i := range max - 2 {
		tag++
		mustR[*proto.RWalk](t, a1.rpc(twalk(tag, 0, uint32(100+i), "view")))
	}
	want := "too many fids for uid 1001"
	mustErr(t, a1.rpc(twalk(tag+1, 0, 200, "view")), want)
	mustErr(t, a2.rpc(twalk(tag+2, 0, 200, "view")), want)
	mustErr(t, a2.rpc(tattach(tag+3, 1, NOFID, "glenda")), want)
	mustErr(t, a2.rpc(tauth(tag+4, 2, "glenda")), want)

	// Another uid attaches, walks and reads.
	b := dialRaw(t, sockB)
	b.setup(8192)
	mustR[*proto.RWalk](t, b.rpc(twalk(2, 0, 1, "view")))
	mustR[*proto.ROpen](t, b.rpc(topen(3, 1, proto.Oread)))
	if r := mustR[*proto.RRead](t, b.rpc(tread(4, 1, 0, 100))); string(r.Data) != "hello\n" {
		t.Fatalf("uid 1002 reads view: %q", r.Data)
	}

	// A clunk frees a fid; a closed connection frees all of its own.
	mustR[*proto.RClunk](t, a1.rpc(tclunk(tag+5, 100)))
	mustR[*proto.RWalk](t, a2.rpc(twalk(tag+6, 0, 200, "view")))
	mustErr(t, a2.rpc(twalk(tag+7, 0, 201, "view")), want)
	a1.nc.Close()
	a1.expectClosed()
	var r proto.FCall
	for deadline := time.Now().Add(rpcTimeout); ; {
		tag++
		r = a2.rpc(twalk(tag, 0, 201, "view"))
		if _, ok := r.(*proto.RWalk); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustR[*proto.RWalk](t, r)
}

// leaseCred is a Cred that is a vfs.Lease.
type leaseCred struct {
	vfs.Peer
	grant string
	done  chan struct{}
}

func (c leaseCred) Grant() string         { return c.grant }
func (c leaseCred) Done() <-chan struct{} { return c.done }

// leaseAuth accepts the secrets it has grants for; the Cred is a
// leaseCred of that grant.
type leaseAuth struct {
	mu     sync.Mutex
	grants map[string]chan struct{}
}

func (a *leaseAuth) Authenticate(ctx context.Context, p vfs.Peer) (vfs.Cred, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	done, ok := a.grants[string(p.Secret)]
	if !ok {
		return nil, errors.New("authentication failed")
	}
	return leaseCred{Peer: p, grant: "token " + string(p.Secret), done: done}, nil
}

// TestLease: over TCP, connections are counted per grant (a token), and a
// grant that ends ends every session attached with it at once, including
// one blocked in a read, while sessions of other grants go on.
func TestLease(t *testing.T) {
	tt := newTestTree()
	auth := &leaseAuth{grants: map[string]chan struct{}{"t1": make(chan struct{}), "t2": make(chan struct{})}}
	srv := &Server{Root: tt.root, Auth: auth, MaxConns: 2}
	addr := serveTCP(t, srv)

	t1 := mountN(t, addr, []byte("t1"), 2)
	if _, err := Mount(addr, "glenda", []byte("t1")); err == nil || err.Error() != "too many connections for token t1" {
		t.Fatalf("third mount with t1: err = %v, want too many connections for token t1", err)
	}
	t2, err := Mount(addr, "glenda", []byte("t2"))
	if err != nil {
		t.Fatalf("mount with t2 while t1 is at its cap: %v", err)
	}
	defer t2.Close()

	// A read blocked on a t1 session ends when t1 ends.
	fid, err := t1[0].Open("stream", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := fid.Read(make([]byte, 100))
		readErr <- err
	}()
	for tt.waiting.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	close(auth.grants["t1"])
	start := time.Now()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("blocked read on a session of an ended grant succeeded")
		}
	case <-time.After(rpcTimeout):
		t.Fatalf("a session of an ended grant still reads %v later", rpcTimeout)
	}
	// Each connection watches the grant on its own: the second one ends
	// too, not necessarily before the first.
	for {
		fid, err := t1[1].Open("view", plan9.OREAD)
		if err != nil {
			break
		}
		fid.Close()
		if time.Since(start) > rpcTimeout {
			t.Fatalf("the second session of an ended grant still opens files %v later", rpcTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("sessions ended %v after the grant", time.Since(start))
	if got := vfstest.ReadFile(t, t2, "view"); got != "hello\n" {
		t.Fatalf("t2 reads view after t1 ended: %q", got)
	}
	// An ended grant attaches no more.
	if _, err := Mount(addr, "glenda", []byte("t1")); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("mount with ended t1: err = %v", err)
	}
}

// TestRefusedConnError: the refusal of a connection over the cap is an
// Rerror answering its first request after Tversion, then the connection
// closes.
func TestRefusedConnError(t *testing.T) {
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, MaxConns: 1}
	sock := serveAsUID(t, srv, 4321)
	mountN(t, sock, nil, 1)
	rc := dialRaw(t, sock)
	mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, "9P2000")))
	mustErr(t, rc.rpc(tattach(1, 0, NOFID, "glenda")), fmt.Sprintf("too many connections for uid %d", 4321))
	rc.expectClosed()
}

// TestRequestCap: one principal has at most Server.MaxPrincipalInflight
// requests in flight across its connections; one more is refused at once
// with an Rerror, while another principal reads as before; a Tflush is
// always answered, and the request it ends frees its place; a Tclunk is
// never refused.
func TestRequestCap(t *testing.T) {
	const max = 4
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, MaxPrincipalInflight: max}
	sockA := serveAsUID(t, srv, 1001)
	sockB := serveAsUID(t, srv, 1002)

	// uid 1001 blocks max stream reads, half on each of two connections.
	a1, a2 := dialRaw(t, sockA), dialRaw(t, sockA)
	for _, rc := range []*rawConn{a1, a2} {
		rc.setup(8192)
		mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 2, "view")))
		// One stream fid per read: a stream handle reads one record
		// at a time.
		for tag := uint16(1); tag <= max/2; tag++ {
			fid := 10 + uint32(tag)
			mustR[*proto.RWalk](t, rc.rpc(twalk(9, 0, fid, "stream")))
			mustR[*proto.ROpen](t, rc.rpc(topen(9, fid, proto.Oread)))
			rc.send(tread(tag, fid, 0, 100))
		}
	}
	for deadline := time.Now().Add(rpcTimeout); tt.waiting.Load() < max; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reads blocked", tt.waiting.Load(), max)
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := "too many requests in flight for uid 1001"
	mustErr(t, a1.rpc(tstat(10, 0)), want)
	mustErr(t, a2.rpc(tread(10, 11, 0, 100)), want)
	mustErr(t, a2.rpc(tattach(11, 3, NOFID, "glenda")), want)

	// uid 1002 is not affected.
	b := dialRaw(t, sockB)
	b.setup(8192)
	mustR[*proto.RWalk](t, b.rpc(twalk(2, 0, 1, "view")))
	mustR[*proto.ROpen](t, b.rpc(topen(3, 1, proto.Oread)))
	if r := mustR[*proto.RRead](t, b.rpc(tread(4, 1, 0, 100))); string(r.Data) != "hello\n" {
		t.Fatalf("uid 1002 reads view: %q", r.Data)
	}

	// A Tclunk at the cap is answered, and so is a Tflush of a finished
	// request.
	mustR[*proto.RClunk](t, a2.rpc(tclunk(12, 2)))
	mustR[*proto.RFlush](t, a2.rpc(tflush(13, 12)))

	// A Tflush of a blocked read is answered, and frees one place: the
	// next request runs, the one after it is refused again.
	if f := mustR[*proto.RFlush](t, a1.rpc(tflush(20, 1))); f.Tag != 20 {
		t.Fatalf("got %v, want rflush tag 20", f)
	}
	mustR[*proto.RStat](t, a1.rpc(tstat(21, 0)))
	a1.send(tread(1, 11, 0, 100))
	for deadline := time.Now().Add(rpcTimeout); tt.waiting.Load() < max; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d reads blocked", tt.waiting.Load(), max)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mustErr(t, a1.rpc(tstat(22, 0)), want)

	// A closed connection frees its requests.
	a1.nc.Close()
	a1.expectClosed()
	var r proto.FCall
	for deadline := time.Now().Add(rpcTimeout); ; {
		r = a2.rpc(tstat(30, 0))
		if _, ok := r.(*proto.RStat); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustR[*proto.RStat](t, r)
}
