package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer is a local HTTP server speaking one provider's wire format;
// handle answers each request and the request bodies are recorded.
type fakeServer struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	calls   atomic.Int32
	release chan struct{} // closed at cleanup, freeing hanging handlers
}

func newFakeServer(t *testing.T, path string, handle func(f *fakeServer, w http.ResponseWriter, r *http.Request)) *fakeServer {
	t.Helper()
	f := &fakeServer{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != path {
			t.Errorf("request %s %s, want POST %s", r.Method, r.URL.Path, path)
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading body: %v", err)
		}
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("request body is not JSON: %v: %s", err, data)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		f.mu.Unlock()
		handle(f, w, r)
	}))
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(f.release) }) // runs before Close
	return f
}

func (f *fakeServer) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

// sse writes the events as a text/event-stream, flushing after each.
// An event is "name\ndata" (Anthropic style) or just the data.
func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for _, ev := range events {
		if name, data, ok := strings.Cut(ev, "\n"); ok {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		} else {
			fmt.Fprintf(w, "data: %s\n\n", ev)
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// hang sends headers (if headersFirst) and then blocks until the client
// goes away or the test ends.
func hang(headersFirst bool) func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
	return func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		if headersFirst {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-f.release:
		}
	}
}

func fail500(f *fakeServer, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After-Ms", "1")
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, `{"error":{"type":"api_error","message":"the fake server is broken"}}`)
}

// jsonPath digs into decoded JSON: keys for objects, ints for arrays.
func jsonPath(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func checkJSON(t *testing.T, what string, v any, want any, path ...any) {
	t.Helper()
	got := jsonPath(v, path...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s %v = %v, want %v", what, path, got, want)
	}
}

// toolConversation is a request with a system prompt, a tool call, its
// (error) result and a follow-up event.
func toolConversation() Request {
	return Request{
		System: "You are a test.",
		Messages: []Message{
			{Role: User, Content: "read /etc/motd"},
			{Role: Assistant, Content: "Reading.", ToolCalls: []ToolCall{{ID: "call_1", Name: "Read", Args: json.RawMessage(`{"path":"/etc/motd"}`)}}},
			{Role: Tool, ToolCallID: "call_1", ToolName: "Read", Content: "permission denied", IsError: true},
			{Role: User, Content: "[Process Event]: try again"},
		},
		Tools: []ToolDef{{
			Name:        "Read",
			Description: "Read a file.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		}},
		MaxTokens: 100,
	}
}

// failureCase runs Complete against a misbehaving server and checks the
// error, and that it came back promptly.
type failureCase struct {
	name    string
	handle  func(f *fakeServer, w http.ResponseWriter, r *http.Request)
	cfg     func(*Config)
	cancel  time.Duration // cancel the caller's ctx after this long
	errIs   error
	errHas  []string
	calls   int32
	maxTime time.Duration
}

func runFailures(t *testing.T, provider, path string, cases []failureCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, path, tc.handle)
			cfg := Config{Provider: provider, BaseURL: f.URL, APIKey: "test-key", Model: "test-model", MaxRetries: -1}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(tc.cancel, cancel)
				defer cancel()
			}
			start := time.Now()
			resp, err := p.Complete(ctx, userReq("hi"), nil)
			took := time.Since(start)
			t.Logf("err after %v: %v", took, err)
			if err == nil {
				t.Fatalf("Complete succeeded: %+v", resp)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.errIs)
			}
			for _, w := range tc.errHas {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
			if tc.calls > 0 && f.calls.Load() != tc.calls {
				t.Errorf("server saw %d requests, want %d", f.calls.Load(), tc.calls)
			}
			// Every case ends (a hang by its cancel or timeout): maxTime
			// guards that at load 10 too, never the speed of the end.
			maxTime := max(tc.maxTime, time.Minute)
			if took > maxTime {
				t.Errorf("Complete took %v, want under %v", took, maxTime)
			}
		})
	}
}
