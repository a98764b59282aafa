package mcp_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// httpServer starts the test server on a loopback port over streamable
// HTTP and returns its URL and the process.
func httpServer(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(testServer(t), "-http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(liveness)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the HTTP test server did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + addr + "/mcp", cmd
}

// A streamable HTTP server on loopback: added, discovered, called, and a
// server killed while a call waits fails that call at once.
func TestHTTPServer(t *testing.T) {
	s := newSys(t)
	url, cmd := httpServer(t)
	sv := must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "web", URL: url}).Server
	if sv.State != abi.McpReady || len(sv.Tools) != 6 || sv.Transport != abi.McpAuto || sv.URL != url {
		t.Fatalf("add: %+v %s", sv, deref(sv.Error))
	}
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "web", Name: "echo", Arguments: json.RawMessage(`{"message":"over http"}`)})
	if got := text(t, r); got != "echo: over http" {
		t.Fatalf("echo: %q", got)
	}
	started := filepath.Join(t.TempDir(), "started")
	done := make(chan error, 1)
	go func() {
		_, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "web", Name: "sleep",
			Arguments: json.RawMessage(fmt.Sprintf(`{"seconds":600,"started":%q}`, started))})
		done <- err
	}()
	waitFile(t, started)
	cmd.Process.Kill()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "MCP server web") {
			t.Fatalf("the call whose server was killed: %v", err)
		}
	case <-time.After(liveness):
		t.Fatal("the call did not fail when its server was killed")
	}
}

// Redirects are followed only to https, or to plain http on loopback: a
// server that redirects elsewhere fails with the refusal named.
func TestHTTPRedirects(t *testing.T) {
	s := newSys(t)
	url, _ := httpServer(t)
	to := func(target string) string {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(ts.Close)
		return ts.URL + "/mcp"
	}
	sv := must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "away", URL: to("http://10.1.2.3/mcp"),
		Transport: &abi.McpTransport{Type: abi.McpStreamableHTTP}}).Server
	if sv.State != abi.McpFailed || !strings.Contains(deref(sv.Error), "redirect refused") || !strings.Contains(deref(sv.Error), "loopback") {
		t.Fatalf("a redirect to plain http elsewhere: %+v %s", sv, deref(sv.Error))
	}
	sv = must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "local", URL: to(url), Transport: &abi.McpTransport{Type: abi.McpStreamableHTTP}}).Server
	if sv.State != abi.McpReady {
		t.Fatalf("a redirect to loopback: %+v %s", sv, deref(sv.Error))
	}
}

// Headers go with every request, and are never shown.
func TestHTTPHeaders(t *testing.T) {
	s := newSys(t)
	seen := make(chan string, 100)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(ts.Close)
	sv := must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "authed", URL: ts.URL + "/mcp",
		Transport: &abi.McpTransport{Type: abi.McpStreamableHTTP, Headers: map[string]string{"Authorization": "Bearer sekrit"}}}).Server
	if got := <-seen; got != "Bearer sekrit" {
		t.Fatalf("the header sent: %q", got)
	}
	if sv.State != abi.McpFailed {
		t.Fatalf("a server answering 401: %+v", sv)
	}
	b, _ := json.Marshal(must(s, s.alice, abi.SysMcpList, &abi.McpListArgs{}))
	if strings.Contains(string(b), "sekrit") {
		t.Fatalf("the list shows a header: %s", b)
	}
}

// Nobody reaches through a server more than their process capability
// allows: a URL server is the host's network, made for its owner, so a
// caller narrowed to no network (a token's, a process's) may not add or
// call one.
func TestHTTPNeedsTheNetwork(t *testing.T) {
	s := newSys(t)
	url, _ := httpServer(t)
	must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "web", URL: url})
	narrow := *s.alice
	narrow.Process = &abi.ProcessCap{Networks: []string{abi.NetworkNone}, Mounts: []abi.CapMount{{Prefix: "/", Mode: abi.MountRW}}}
	if _, err := do(s, &narrow, abi.SysMcpAdd, &abi.McpAddArgs{Name: "web2", URL: url}); abi.KindOf(err) != abi.Permission {
		t.Fatalf("a narrowed add: %v", err)
	}
	if _, err := do(s, &narrow, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "web", Name: "echo", Arguments: json.RawMessage(`{"message":"x"}`)}); abi.KindOf(err) != abi.Permission {
		t.Fatalf("a narrowed call: %v", err)
	}
}
