package mcpserve

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watchCaller is a fakeCaller whose processes' events are pipes the
// test writes.
type watchCaller struct {
	fakeCaller
	opened chan *io.PipeWriter
}

func (w *watchCaller) Events(ctx context.Context, pid string) (io.ReadCloser, error) {
	r, wr := io.Pipe()
	w.opened <- wr
	return r, nil
}

// TestSubscribe: a subscription to a process's resource follows its
// signals (a text delta is not an update); one to a process the caller
// may not see, or to no resource, is refused; an unsubscribe ends the
// stream.
func TestSubscribe(t *testing.T) {
	w := &watchCaller{opened: make(chan *io.PipeWriter, 4)}
	s, err := New(w, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	updated := make(chan string, 16)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// Refused: under the stateless protocol the SDK's client is not told
	// (its subscriptions/listen runs on its own), but nothing is
	// followed.
	for _, uri := range []string{"gsv://proc/p_gone/status", "gsv://proc/p_1/nothing", "file:///etc/passwd"} {
		cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	}
	uri := "gsv://proc/p_1/status"
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	ev := <-w.opened
	if len(w.opened) != 0 {
		t.Fatalf("%d more streams followed: a refused subscription was taken", len(w.opened))
	}
	io.WriteString(ev, `{"type":"sig","signal":"proc.run.stream","payload":{"text":"x"}}`+"\n")
	io.WriteString(ev, `{"type":"sig","signal":"proc.run.finished","payload":{}}`+"\n")
	select {
	case got := <-updated:
		if got != uri {
			t.Fatalf("updated %q", got)
		}
	case <-ctx.Done():
		t.Fatal("no update")
	}
	if len(updated) != 0 {
		t.Fatalf("a text delta was an update too")
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	// The unsubscribe reaches the server on its own: the stream is
	// closed then.
	for {
		_, err := io.WriteString(ev, "{}\n")
		if err != nil {
			if !strings.Contains(err.Error(), "closed") {
				t.Fatal(err)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the stream is still followed after the unsubscribe")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
