package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// liveness bounds every wait for something that must happen; it guards
// liveness only (a loaded machine may be slow), never speed.
const liveness = time.Minute

// allow is a vfs.Meta that lets everyone do everything.
type allow struct {
	path string
	dir  bool
}

func (m allow) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	return vfs.Attr{Ino: vfs.PathIno(m.path), Mode: vfs.ModeOf(m.dir, 0o666), User: "gsv", Group: "gsv", Synthetic: !m.dir}, nil
}

func (m allow) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error { return nil }

// rpcKernel is a 9P server whose /sys/rpc is a vfs.Mux of test calls:
// echo answers its args; block waits until its request is cancelled and
// reports it on cancelled; big answers a string of n bytes.
type rpcKernel struct {
	addr      string
	cancelled chan string // the ids of block requests cancelled
	started   chan string // the ids of block requests started
	conns     chan net.Conn
}

func startRPCKernel(t *testing.T) *rpcKernel {
	t.Helper()
	k := &rpcKernel{cancelled: make(chan string, 16), started: make(chan string, 16), conns: make(chan net.Conn, 16)}
	serve := func(ctx context.Context, req []byte) []byte {
		r, err := abi.DecodeRequest(req)
		if err != nil {
			return abi.EncodeResponse(r.ID, r.Call, nil, err)
		}
		switch r.Call {
		case "echo":
			return abi.EncodeResponse(r.ID, r.Call, r.Args, nil)
		case "block":
			k.started <- r.ID
			<-ctx.Done()
			k.cancelled <- r.ID
			return abi.EncodeResponse(r.ID, r.Call, nil, ctx.Err())
		case "big":
			var a struct{ N int }
			json.Unmarshal(r.Args, &a)
			return abi.EncodeResponse(r.ID, r.Call, strings.Repeat("x", a.N), nil)
		case "refuse":
			return abi.EncodeResponse(r.ID, r.Call, nil, abi.E(abi.Op(r.Call), abi.Permission, "permission denied"))
		}
		return abi.EncodeResponse(r.ID, r.Call, nil, abi.E(abi.Op(r.Call), abi.Invalid, "unknown syscall"))
	}
	root := vfs.NewDir(allow{path: "/", dir: true},
		vfs.DirEntry{Name: "sys", Node: vfs.NewDir(allow{path: "/sys", dir: true},
			vfs.DirEntry{Name: "rpc", Node: &vfs.Mux{Meta: allow{path: "/sys/rpc"}, Tag: func(line []byte) (string, bool) {
				typ, id, err := abi.FrameTag(line)
				return id, err == nil && typ == abi.CancelType
			}, Do: func(ctx context.Context, cred vfs.Cred, req []byte) []byte { return serve(ctx, req) }}})})
	l := vfstest.ListenUnix(t)
	k.addr = "unix!" + l.Addr().String()
	srv := &ninep.Server{Root: root}
	vfstest.Serve(t, l, func(ctx context.Context, l net.Listener) error {
		return srv.Serve(ctx, tapListener{l, k.conns}, nil)
	})
	return k
}

// tapListener hands every connection it accepts to conns too, so that a
// test can cut one.
type tapListener struct {
	net.Listener
	conns chan net.Conn
}

func (l tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		select {
		case l.conns <- c:
		default:
		}
	}
	return c, err
}

func dialRPC(t *testing.T, k *rpcKernel) *RPC {
	t.Helper()
	r, err := Dial(ninep.Dialer{}, k.addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRPCConcurrent checks that many calls at once on one RPC each get
// their own answer, a large one whole, and that a refusal is a
// *CallError with the kernel's code and message.
func TestRPCConcurrent(t *testing.T) {
	k := startRPCKernel(t)
	r := dialRPC(t, k)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			want := fmt.Sprintf(`{"i":%d}`, i)
			got, err := r.Call(ctx, "echo", json.RawMessage(want))
			if err != nil || string(got) != want {
				errs <- fmt.Errorf("echo %s: %s %v", want, got, err)
			}
		})
	}
	wg.Go(func() {
		const n = 3 << 20 // many Treads
		got, err := r.Call(ctx, "big", json.RawMessage(fmt.Sprintf(`{"N":%d}`, n)))
		if err != nil || len(got) != n+2 {
			errs <- fmt.Errorf("big: %d bytes, %v", len(got), err)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, err := r.Call(ctx, "refuse", nil)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Code != 403 || ce.Message != "refuse: permission denied" {
		t.Fatalf("refuse: got %v, want the kernel's 403", err)
	}
	// A request over the longest line is refused here, and the
	// connection goes on.
	_, err = r.Call(ctx, "echo", json.RawMessage(`{"s":"`+strings.Repeat("y", maxLine)+`"}`))
	if !errors.As(err, &ce) || ce.Code != 400 || !strings.Contains(ce.Message, "at most") {
		t.Fatalf("a request over %d bytes: got %v, want a 400", maxLine, err)
	}
	if got, err := r.Call(ctx, "echo", json.RawMessage(`{}`)); err != nil || string(got) != `{}` {
		t.Fatalf("echo after a refused request: %s %v", got, err)
	}
}

// TestRPCCancel checks that a call whose ctx ends returns at once and
// cancels its request in the kernel (a cancel frame), and that the RPC
// goes on.
func TestRPCCancel(t *testing.T) {
	k := startRPCKernel(t)
	r := dialRPC(t, k)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Call(ctx, "block", nil)
		done <- err
	}()
	var id string
	select {
	case id = <-k.started:
	case <-time.After(liveness):
		t.Fatal("block did not start")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("block: %v, want context.Canceled", err)
		}
	case <-time.After(liveness):
		t.Fatal("a cancelled call did not return")
	}
	select {
	case got := <-k.cancelled:
		if got != id {
			t.Fatalf("request %s cancelled, want %s", got, id)
		}
	case <-time.After(liveness):
		t.Fatal("the kernel's request was not cancelled")
	}
	if got, err := r.Call(context.Background(), "echo", json.RawMessage(`{"a":1}`)); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("echo after a cancel: %s %v", got, err)
	}
}

// TestRPCConnectionEnds checks that the end of the connection fails
// every call in flight at once, and every later one, and closes Done.
func TestRPCConnectionEnds(t *testing.T) {
	k := startRPCKernel(t)
	r := dialRPC(t, k)
	conn := <-k.conns
	done := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := r.Call(context.Background(), "block", nil)
			done <- err
		}()
	}
	for range 3 {
		select {
		case <-k.started:
		case <-time.After(liveness):
			t.Fatal("block did not start")
		}
	}
	conn.Close() // the kernel goes away
	for range 3 {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "connection to the kernel ended") {
				t.Fatalf("a call in flight at the end: %v", err)
			}
		case <-time.After(liveness):
			t.Fatal("a call in flight did not fail at the connection's end")
		}
	}
	select {
	case <-r.Done():
	case <-time.After(liveness):
		t.Fatal("Done is not closed")
	}
	if _, err := r.Call(context.Background(), "echo", nil); err == nil {
		t.Fatal("a call after the end passed")
	}
}
