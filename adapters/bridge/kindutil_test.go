package bridge

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// liveness bounds every wait in the kinds' tests: it only guards
// against a hang and holds on a machine at load 10.
const liveness = 60 * time.Second

// fakeSink records what an Adapter's Run hands it. Deliver fails while
// fail > 0 (counting down), and blocks while gate is set until gate is
// closed.
type fakeSink struct {
	mu     sync.Mutex // guards the fields below
	msgs   []abi.AdapterMessage
	states []abi.AdapterAccountStatus
	fail   int
	gate   chan struct{}

	got     chan abi.AdapterMessage       // each Deliver call's message (also failed ones)
	stateCh chan abi.AdapterAccountStatus // each State
}

func newFakeSink() *fakeSink {
	return &fakeSink{got: make(chan abi.AdapterMessage, 100), stateCh: make(chan abi.AdapterAccountStatus, 100)}
}

func (s *fakeSink) Deliver(ctx context.Context, in abi.AdapterMessage) error {
	s.mu.Lock()
	gate := s.gate
	fail := s.fail > 0
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	s.got <- in
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("kernel refused")
	}
	s.mu.Lock()
	s.msgs = append(s.msgs, in)
	s.mu.Unlock()
	return nil
}

func (s *fakeSink) State(st abi.AdapterAccountStatus) {
	s.mu.Lock()
	s.states = append(s.states, st)
	s.mu.Unlock()
	select {
	case s.stateCh <- st:
	default:
	}
}

func (s *fakeSink) delivered() []abi.AdapterMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]abi.AdapterMessage(nil), s.msgs...)
}

// next waits for the next Deliver call.
func (s *fakeSink) next(t *testing.T) abi.AdapterMessage {
	t.Helper()
	select {
	case m := <-s.got:
		return m
	case <-time.After(liveness):
		t.Fatal("no message delivered")
	}
	return abi.AdapterMessage{}
}

// waitState waits for a State with Connected set.
func (s *fakeSink) waitConnected(t *testing.T) abi.AdapterAccountStatus {
	t.Helper()
	deadline := time.After(liveness)
	for {
		select {
		case st := <-s.stateCh:
			if st.Connected {
				return st
			}
		case <-deadline:
			t.Fatal("never connected")
		}
	}
}

// runAdapter runs a.Run in the background; the returned func cancels it
// and returns Run's result.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func startRun(a Adapter, sink Sink) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx, sink) }()
	return r
}

// stop cancels Run and waits for it; Run returns nil on cancel.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(liveness):
		t.Fatal("Run did not return after cancel")
	}
}

// wait waits for Run to return by itself and returns its error.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	defer r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(liveness):
		t.Fatal("Run did not return")
	}
	return nil
}

// eventually polls cond until it holds (liveness guard only).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFitInbound: media the kernel would refuse are mended or named in
// the text, never handed over to be refused (and redelivered) forever.
func TestFitInbound(t *testing.T) {
	data := base64.StdEncoding.EncodeToString([]byte("bytes"))
	in := abi.AdapterMessage{Text: "hi \xff", Media: []abi.MediaInput{
		{Type: "audio", MimeType: "application/ogg", Data: data, Size: 5, Filename: "dir/v\x01.ogg"},
		{Type: "image", MimeType: "not a type", Data: data, Size: 5},
		{Type: "document", MimeType: "text/plain", Data: "", Filename: "empty.txt"},
	}}
	fitInbound(&in)
	if _, err := abi.CheckMedia(in.Media); err != nil {
		t.Fatalf("fitted media refused: %v", err)
	}
	if len(in.Media) != 2 || in.Media[0].Filename != "v.ogg" || in.Media[0].Type != "document" ||
		in.Media[1].MimeType != "application/octet-stream" || !strings.Contains(in.Text, `"empty.txt" not carried`) ||
		!utf8.ValidString(in.Text) {
		t.Errorf("fitted %+v", in)
	}
	many := abi.AdapterMessage{}
	many.Text = strings.Repeat("é", inboundMaxText)
	many.MessageID = strings.Repeat("m", 300)
	for range inboundMaxMedia + 2 {
		many.Media = append(many.Media, abi.MediaInput{Type: "document", MimeType: "text/plain", Data: data, Size: 5, Filename: "f"})
	}
	fitInbound(&many)
	if len(many.Media) != inboundMaxMedia || len(many.Text) > inboundMaxText || !utf8.ValidString(many.Text) ||
		!strings.HasSuffix(many.Text, "[text cut: over the message limit]") || len(many.MessageID) > inboundMaxID {
		t.Errorf("%d media kept, text of %d bytes, id %q", len(many.Media), len(many.Text), many.MessageID)
	}
}
