package mcpserve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func httptestRequest(authorization string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, Path, nil)
	r.Header.Set("Authorization", authorization)
	return r
}

// testHandler serves Handler on a test server: the token "good" is a
// fakeCaller's; every other fails.
func testHandler(t *testing.T) (*httptest.Server, *fakeCaller) {
	t.Helper()
	f := &fakeCaller{may: []string{"fs.read"}}
	h, err := Handler(HTTPOptions{Options: Options{Version: "test"}, Authenticate: func(ctx context.Context, token string) (Caller, error) {
		if token != "good" {
			return nil, errors.New("authentication failed")
		}
		return f, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, f
}

// TestHandlerAuth checks that a request without a bearer token, or with
// one that does not authenticate, is a 401 that runs nothing, and that a
// body that is not JSON-RPC is a 400.
func TestHandlerAuth(t *testing.T) {
	srv, f := testHandler(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs.read","arguments":{"path":"/a"}}}`
	cases := []struct {
		name, auth, body string
		status           int
		wwwAuth          string
	}{
		{"no token", "", body, 401, `Bearer realm="gsvfs"`},
		{"not bearer", "Basic Zm9vOmJhcg==", body, 401, `Bearer realm="gsvfs"`},
		{"empty bearer", "Bearer ", body, 401, `Bearer realm="gsvfs"`},
		{"bad token", "Bearer bad", body, 401, `Bearer realm="gsvfs", error="invalid_token"`},
		{"malformed JSON-RPC", "Bearer good", `{"jsonrpc":"2.0","id":1,"method":`, 400, ""},
		{"good", "Bearer good", body, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, c.status)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != c.wwwAuth {
				t.Fatalf("WWW-Authenticate %q, want %q", got, c.wwwAuth)
			}
			if c.status == 200 && !strings.Contains(string(b), `\"content\":\"hi\"`) {
				t.Fatalf("answer %s", b)
			}
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) != 1 {
		t.Fatalf("want the one authenticated call to reach the kernel, got %q", f.calls)
	}
}

// TestHandlerSDKClient drives Handler with the SDK's own streamable
// HTTP client, the token in its Authorization header.
func TestHandlerSDKClient(t *testing.T) {
	srv, _ := testHandler(t)
	ctx := context.Background()
	hc := &http.Client{Transport: bearerTransport{"good", http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + Path, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "fs.read" {
		t.Fatalf("tools %+v", tools.Tools)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "/secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.IsError || text(t, r) != "fs.read: permission denied: /secret" {
		t.Fatalf("got %+v", r)
	}
	// A bad token fails the client's connect.
	bad := &http.Client{Transport: bearerTransport{"bad", http.DefaultTransport}}
	if cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + Path, HTTPClient: bad}, nil); err == nil {
		cs.Close()
		t.Fatal("a bad token connected")
	}
}

// bearerTransport adds Authorization: Bearer token to every request.
type bearerTransport struct {
	token string
	rt    http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// leasedFake is a Caller whose lease a test ends.
type leasedFake struct {
	*fakeCaller
	done chan struct{}
}

func (l leasedFake) Done() <-chan struct{} { return l.done }

// TestHandlerAuthCache checks that a token's Caller serves its later
// requests without a new check, until its lease ends: then the token is
// checked again (and, revoked, refused).
func TestHandlerAuthCache(t *testing.T) {
	f := &fakeCaller{may: []string{"fs.read"}}
	lease := leasedFake{f, make(chan struct{})}
	var mu sync.Mutex
	checks, revoked := 0, false
	h, err := Handler(HTTPOptions{Authenticate: func(ctx context.Context, token string) (Caller, error) {
		mu.Lock()
		defer mu.Unlock()
		checks++
		if token != "good" || revoked {
			return nil, errors.New("authentication failed")
		}
		return lease, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func() int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs.read","arguments":{"path":"/a"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer good")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 3 {
		if code := post(); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	mu.Lock()
	if checks != 1 {
		t.Errorf("%d checks for 3 requests of one token, want 1", checks)
	}
	revoked = true
	mu.Unlock()
	close(lease.done)
	if code := post(); code != 401 {
		t.Fatalf("a request after the lease ended: %d, want 401", code)
	}
}
