package devices

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/vfs"
)

// Rogue devices on the call channel: a rogue with an rpc file answers
// each request on it with what its answer func makes, read as the kernel
// reads it, the id of the request put in place of the "1" of the frames
// of rogue_test.go.

// rogueRPC is the rogue's rpc file.
type rogueRPC struct {
	openMeta
	g *rogue
}

func (f *rogueRPC) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	return &rogueRPCHandle{g: f.g, ready: make(chan struct{}, 1)}, nil
}

type rogueRPCHandle struct {
	g     *rogue
	mu    sync.Mutex
	line  []byte      // a request line being written
	queue []io.Reader // answers not yet begun
	cur   io.Reader   // the answer being read
	ready chan struct{}
}

func (h *rogueRPCHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.line = append(h.line, p...)
	for {
		i := bytes.IndexByte(h.line, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := h.line[:i]
		h.line = h.line[i+1:]
		if typ, _, _ := abi.FrameTag(line); typ == abi.CancelType {
			continue
		}
		req, err := abi.DecodeRequest(line)
		if err != nil {
			return 0, err
		}
		h.queue = append(h.queue, withID(h.g.answer(req), req.ID))
		select {
		case h.ready <- struct{}{}:
		default:
		}
	}
}

func (h *rogueRPCHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	for {
		h.mu.Lock()
		if h.cur == nil && len(h.queue) > 0 {
			h.cur, h.queue = h.queue[0], h.queue[1:]
		}
		if h.cur != nil {
			n, err := h.cur.Read(p)
			h.g.served.Add(int64(n))
			if err != nil {
				h.cur = nil
			}
			h.mu.Unlock()
			if n > 0 {
				return n, nil
			}
			continue
		}
		h.mu.Unlock()
		select {
		case <-h.ready:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (h *rogueRPCHandle) Close(ctx context.Context) error { return nil }

// withID is the answer r with the first "id":"1" of its beginning made
// "id":"<id>".
func withID(r io.Reader, id string) io.Reader {
	head := make([]byte, 64)
	n, _ := io.ReadFull(r, head)
	head = bytes.Replace(head[:n], []byte(`"id":"1"`), []byte(`"id":"`+id+`"`), 1)
	return io.MultiReader(bytes.NewReader(head), r)
}

// TestRogueRPC: on the call channel too, what a device answers is
// bounded and checked: an answer over MaxAnswer fails its call, the
// kernel reading no more than it, and ends the connection (the channel
// cannot be read past it); a field out of bounds fails its call only; an
// answer that names a request the kernel did not send is dropped; one
// that is not a frame ends the connection.
func TestRogueRPC(t *testing.T) {
	e := newDevEnv(t)
	ctx := context.Background()
	alice := kerneltest.Caller(e.Alice)
	var mu sync.Mutex
	next := func(abi.Request) io.Reader { return frameOf(`{}`) }
	set := func(f func(abi.Request) io.Reader) {
		mu.Lock()
		next = f
		mu.Unlock()
	}
	dial := func(t *testing.T, id string) *rogue {
		g := &rogue{rpc: true, answer: func(req abi.Request) io.Reader {
			mu.Lock()
			defer mu.Unlock()
			return next(req)
		}}
		set(func(abi.Request) io.Reader { return frameOf(`{}`) })
		g.dial(t, e, id, e.nodeToken(t, e.Alice, id))
		if d := e.r.remote(id); d == nil || d.ch == nil {
			t.Fatal("the rogue's connection has no call channel")
		}
		return g
	}
	read := func(ctx context.Context, id string) (*abi.FSReadResult, error) {
		return kernel.Do(ctx, e.K, alice, abi.FsRead, &abi.FSReadArgs{Target: id, Path: "f"})
	}
	good := `{"ok":true,"path":"/f","content":"x\n","lines":1,"size":2}`

	t.Run("Size", func(t *testing.T) {
		g := dial(t, "r-size")
		set(func(abi.Request) io.Reader { return endless(40 << 20) })
		_, err := read(ctx, "r-size")
		if err == nil || abi.KindOf(err) != abi.Other || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bytes", MaxAnswer)) {
			t.Fatalf("a 40 MiB answer: %v, want a 500 refusing it", err)
		}
		if n := g.served.Load(); n > MaxAnswer+channelUnit {
			t.Fatalf("the kernel read %d bytes of an answer bounded at %d", n, MaxAnswer)
		}
		waitCond(t, "the connection ended", func() bool { return e.r.remote("r-size") == nil })
	})

	t.Run("Fields", func(t *testing.T) {
		dial(t, "r-fields")
		set(func(abi.Request) io.Reader {
			return frameOf(`{"ok":true,"path":"/d","files":["ok","evil\nname"],"directories":[]}`)
		})
		if _, err := read(ctx, "r-fields"); err == nil || abi.KindOf(err) != abi.Other || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("a name with a newline: %v, want a 500 refusing it", err)
		}
		set(func(abi.Request) io.Reader { return frameOf(good) })
		if res, err := read(ctx, "r-fields"); err != nil || res.Content != "x\n" {
			t.Fatalf("the next call: %+v %v", res, err)
		}
	})

	t.Run("OtherID", func(t *testing.T) {
		dial(t, "r-id")
		set(func(abi.Request) io.Reader {
			return strings.NewReader(`{"type":"res","id":"999","ok":true,"data":` + good + "}\n")
		})
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if res, err := read(short, "r-id"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call answered with another id: %+v %v, want no answer", res, err)
		}
		set(func(abi.Request) io.Reader { return frameOf(good) })
		if res, err := read(ctx, "r-id"); err != nil || res.Content != "x\n" {
			t.Fatalf("the next call: %+v %v", res, err)
		}
	})

	t.Run("NotAFrame", func(t *testing.T) {
		dial(t, "r-frame")
		set(func(abi.Request) io.Reader { return strings.NewReader("garbage\n") })
		if _, err := read(ctx, "r-frame"); abi.KindOf(err) != abi.Offline {
			t.Fatalf("an answer that is not a frame: %v, want a 503", err)
		}
		waitCond(t, "the connection ended", func() bool { return e.r.remote("r-frame") == nil })
	})
}
