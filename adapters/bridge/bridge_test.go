package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		text string
		max  int
		want []string
	}{
		{"", 10, nil},
		{"short", 10, []string{"short"}},
		{"one two three", 7, []string{"one two", "three"}},
		{"line one\nline two", 12, []string{"line one", "line two"}},
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"ééé", 3, []string{"é", "é", "é"}},
		{"x", 0, []string{"x"}},
	} {
		if got := Split(tc.text, tc.max); strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("Split(%q, %d) = %q, want %q", tc.text, tc.max, got, tc.want)
		}
	}
}

// FuzzSplit: every piece fits, is whole UTF-8 when the text is, and the
// pieces keep every character but the breaks they were cut at.
func FuzzSplit(f *testing.F) {
	f.Add("hello world, this is a long line\nand another", 8)
	f.Add("ééééé", 1)
	f.Fuzz(func(t *testing.T, text string, max int) {
		max = max%200 + 1
		if max < 1 {
			max = -max + 1
		}
		pieces := Split(text, max)
		total := 0
		for _, p := range pieces {
			if len(p) > max && utf8.RuneCountInString(p) > 1 {
				t.Fatalf("a piece of %d bytes, max %d", len(p), max)
			}
			if utf8.ValidString(text) && !utf8.ValidString(p) {
				t.Fatalf("a piece cut inside a character: %q", p)
			}
			total += len(p)
		}
		if total > len(text) || total < len(text)-len(pieces) {
			t.Fatalf("%d bytes in pieces of %d", total, len(text))
		}
	})
}

// FuzzWebhookBody: an inbound body either parses into a message with an
// id, a surface and an actor, or is refused; it never panics.
func FuzzWebhookBody(f *testing.F) {
	f.Add([]byte(`{"messageId":"1","surface":{"kind":"dm","id":"u"},"actor":{"id":"u"},"text":"hi"}`))
	f.Add([]byte(`{"messageId":"1","surface":{"kind":"dm","id":"u"},"actor":{"id":"u"},"text":"hi","extra":1}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseWebhook(body)
		if err != nil {
			return
		}
		if m.MessageID == "" || m.Surface.Kind == "" || m.Surface.ID == "" || m.Actor == nil || m.Actor.ID == "" {
			t.Fatalf("%q parsed into %+v", body, m)
		}
	})
}

func TestSignature(t *testing.T) {
	body := []byte(`{"a":1}`)
	sig := Sign([]byte("k"), body)
	if !verify([]byte("k"), body, sig) || verify([]byte("other"), body, sig) || verify([]byte("k"), []byte(`{"a":2}`), sig) || verify([]byte("k"), body, "") {
		t.Fatal("signatures")
	}
}

// fakeAdapter records what it is asked to post.
type fakeAdapter struct {
	mu   sync.Mutex
	sent []Outbound
	fail map[string]error // by text
}

func (*fakeAdapter) Kind() string   { return "fake" }
func (*fakeAdapter) Limits() Limits { return Limits{MaxText: 10, CanEdit: true} }
func (a *fakeAdapter) Run(ctx context.Context, sink Sink) error {
	sink.State(abi.AdapterAccountStatus{Connected: true})
	<-ctx.Done()
	return nil
}
func (a *fakeAdapter) Send(ctx context.Context, out Outbound) (Sent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.fail[out.Text]; err != nil {
		return Sent{}, err
	}
	a.sent = append(a.sent, out)
	return Sent{MessageID: fmt.Sprint("m", len(a.sent))}, nil
}

// fakeKernel is a Conn answering from a script of outbox.next results and
// keeping the reports.
type fakeKernel struct {
	mu      sync.Mutex
	nexts   []abi.AdapterOutboxNextResult
	reports []abi.AdapterOutboxDoneArgs
	done    chan struct{}
}

func (k *fakeKernel) Done() <-chan struct{} { return k.done }
func (k *fakeKernel) Close() error          { return nil }
func (k *fakeKernel) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch name {
	case abi.AdapterOutboxNext.Name:
		if len(k.nexts) == 0 {
			k.mu.Unlock()
			<-ctx.Done()
			k.mu.Lock()
			return nil, ctx.Err()
		}
		n := k.nexts[0]
		k.nexts = k.nexts[1:]
		return json.Marshal(n)
	case abi.AdapterOutboxDone.Name:
		var r abi.AdapterOutboxDoneArgs
		json.Unmarshal(args, &r)
		k.reports = append(k.reports, r)
	}
	return json.RawMessage(`{"ok":true}`), nil
}

// TestBridgeOutbox: a streamed reply is posted and edited; a final text
// too long for one message is split; an ambiguous failure is reported,
// not tried again.
func TestBridgeOutbox(t *testing.T) {
	a := &fakeAdapter{fail: map[string]error{"boom": Ambiguous(errors.New("timeout"))}}
	s := abi.AdapterSurface{Kind: "dm", ID: "u"}
	k := &fakeKernel{done: make(chan struct{}), nexts: []abi.AdapterOutboxNextResult{
		{Streams: []abi.AdapterStream{{StreamKey: "r1", Surface: s, Text: "hel"}}},
		{Deliveries: []abi.AdapterDelivery{{DeliveryID: "short", Surface: s, Text: "hello", StreamKey: "r1"}}},
		{Deliveries: []abi.AdapterDelivery{{DeliveryID: "long", Surface: s, Text: "hello world again"}, {DeliveryID: "amb", Surface: s, Text: "boom"}}},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Options{Adapter: a, Account: "acct", Dial: func(context.Context) (Conn, error) { return k, nil }})
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		k.mu.Lock()
		n := len(k.reports)
		k.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports: %+v", k.reports)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	var texts []string
	for _, o := range a.sent {
		texts = append(texts, o.Text+"/"+o.Edit)
	}
	if got := strings.Join(texts, " "); got != "hel/ hello/m1 hello/ world/ again/" {
		t.Fatalf("posted: %s", got)
	}
	byID := map[string]abi.AdapterOutboxDoneArgs{}
	for _, r := range k.reports {
		byID[r.DeliveryID] = r
	}
	if r := byID["long"]; r.Error != "" || len(r.MessageIDs) != 3 {
		t.Fatalf("long: %+v", r)
	}
	if r := byID["amb"]; !r.Ambiguous || r.Error == "" {
		t.Fatalf("amb: %+v", r)
	}
}

// flakyAdapter's Run fails (a platform answering garbage) until its
// fails run out, then serves until ctx ends.
type flakyAdapter struct {
	fakeAdapter
	mu2   sync.Mutex
	runs  int
	fails int
}

func (a *flakyAdapter) Run(ctx context.Context, sink Sink) error {
	a.mu2.Lock()
	a.runs++
	fail := a.runs <= a.fails
	a.mu2.Unlock()
	if fail {
		return errors.New("garbage from the platform")
	}
	sink.State(abi.AdapterAccountStatus{Connected: true})
	<-ctx.Done()
	return nil
}

// countingKernel counts state reports; each connection ends when its
// outbox is first asked (the kernel going away) until ends run out.
type countingKernel struct {
	mu      sync.Mutex
	reports int
	ends    int
	done    chan struct{}
}

func (k *countingKernel) Done() <-chan struct{} { return k.done }
func (k *countingKernel) Close() error          { return nil }
func (k *countingKernel) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.done:
		return nil, errors.New("the connection ended") // as a real one fails at once
	default:
	}
	switch name {
	case abi.AdapterStateUpdate.Name:
		k.reports++
	case abi.AdapterOutboxNext.Name:
		if k.ends > 0 {
			k.ends--
			close(k.done)
			return nil, errors.New("connection reset")
		}
		k.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-k.done:
		}
		k.mu.Lock()
		return nil, errors.New("ended")
	}
	return json.RawMessage(`{"ok":true}`), nil
}

// TestBridgeReconnects: a platform that fails and a kernel that goes
// away (or cannot be dialed) are each tried again with backoff; each new
// connection reports the account's state first.
func TestBridgeReconnects(t *testing.T) {
	a := &flakyAdapter{fails: 3}
	var dmu sync.Mutex
	dials, ends := 0, 2
	dial := func(context.Context) (Conn, error) {
		dmu.Lock()
		defer dmu.Unlock()
		dials++
		if dials == 1 {
			return nil, errors.New("connection refused")
		}
		k := &countingKernel{done: make(chan struct{})}
		if ends > 0 {
			ends--
			k.ends = 1
		}
		return k, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Options{Adapter: a, Account: "acct", Dial: dial, FirstBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		dmu.Lock()
		d := dials
		dmu.Unlock()
		a.mu2.Lock()
		r := a.runs
		a.mu2.Unlock()
		if d >= 4 && r >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dials %d, runs %d", d, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end with its ctx")
	}
}
