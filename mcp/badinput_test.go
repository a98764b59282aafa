package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// Bad input gets a clear error and changes nothing: names that could not
// be file names, a definition that is neither a URL nor a command (or
// both), plain http to anything but loopback, a malformed header, an
// unknown transport or network.
func TestAddRefusesBadInput(t *testing.T) {
	s := newSys(t)
	https := "https://mcp.example.com/mcp"
	for _, c := range []struct {
		what string
		a    abi.McpAddArgs
		want string
	}{
		{"a slash", abi.McpAddArgs{Name: "a/b", URL: https}, `holds "/"`},
		{"dot dot", abi.McpAddArgs{Name: "..", URL: https}, "not a file name"},
		{"a control character", abi.McpAddArgs{Name: "a\x07b", URL: https}, "control"},
		{"a space", abi.McpAddArgs{Name: "a b", URL: https}, "space"},
		{"no name", abi.McpAddArgs{URL: https}, "name is empty"},
		{"a long name", abi.McpAddArgs{Name: strings.Repeat("x", 129), URL: https}, "longer than 128"},
		{"neither", abi.McpAddArgs{Name: "x"}, "exactly one of url"},
		{"both", abi.McpAddArgs{Name: "x", URL: https, Stdio: &abi.McpStdio{Command: []string{"true"}}}, "exactly one of url"},
		{"plain http elsewhere", abi.McpAddArgs{Name: "x", URL: "http://mcp.example.com/mcp"}, "only to a loopback address"},
		{"a file URL", abi.McpAddArgs{Name: "x", URL: "file:///etc/passwd"}, "want an https URL"},
		{"user info", abi.McpAddArgs{Name: "x", URL: "https://u:p@mcp.example.com/"}, "user information"},
		{"no host", abi.McpAddArgs{Name: "x", URL: "https:///mcp"}, "no host"},
		{"a bad transport", abi.McpAddArgs{Name: "x", URL: https, Transport: &abi.McpTransport{Type: "carrier-pigeon"}}, "want auto"},
		{"a bad header", abi.McpAddArgs{Name: "x", URL: https, Transport: &abi.McpTransport{Headers: map[string]string{"X-A": "a\r\nHost: evil"}}}, "control character"},
		{"a bad header name", abi.McpAddArgs{Name: "x", URL: https, Transport: &abi.McpTransport{Headers: map[string]string{"a b": "c"}}}, "not a header name"},
		{"an empty command", abi.McpAddArgs{Name: "x", Stdio: &abi.McpStdio{}}, "command is empty"},
		{"a bad network", abi.McpAddArgs{Name: "x", Stdio: &abi.McpStdio{Command: []string{"true"}, NetworkMode: "some"}}, "want none or full"},
		{"headers on stdio", abi.McpAddArgs{Name: "x", Stdio: &abi.McpStdio{Command: []string{"true"}}, Transport: &abi.McpTransport{Headers: map[string]string{"A": "b"}}}, "no HTTP transport"},
		{"a plain http callback elsewhere", abi.McpAddArgs{Name: "x", URL: https, CallbackHost: "http://gsv.example.com"}, "callbackHost"},
	} {
		_, err := do(s, s.alice, abi.SysMcpAdd, &c.a)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
	}
	if l := must(s, s.alice, abi.SysMcpList, &abi.McpListArgs{}); len(l.Servers) != 0 {
		t.Fatalf("a refused add kept something: %+v", l.Servers)
	}
	// A call names a tool the same way, and takes a JSON object.
	_, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "nope", Name: "x"})
	if abi.KindOf(err) != abi.NotExist {
		t.Errorf("a call of no server: %v", err)
	}
}

// A server whose answers are not JSON-RPC fails with an error naming it,
// and is kept (failed) for a refresh or a remove; a server offering
// tools whose names could not be file names has those left out, and
// says so; other servers are not disturbed.
func TestBrokenServers(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	good := must(s, s.alice, abi.SysMcpAdd, stdioArgs("good", abi.NetworkNone)).Server
	garbage := must(s, s.alice, abi.SysMcpAdd, stdioArgs("garbage", abi.NetworkNone, "-raw", "garbage")).Server
	if garbage.State != abi.McpFailed || garbage.Error == nil || !strings.Contains(*garbage.Error, "handshake") {
		t.Fatalf("a server answering garbage: %+v %s", garbage, deref(garbage.Error))
	}
	_, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "garbage", Name: "ok"})
	if err == nil || !strings.Contains(err.Error(), "MCP server garbage") {
		t.Fatalf("a call of the garbage server: %v", err)
	}
	bad := must(s, s.alice, abi.SysMcpAdd, stdioArgs("badnames", abi.NetworkNone, "-raw", "badnames")).Server
	if bad.State != abi.McpReady || len(bad.Tools) != 1 || bad.Tools[0].Name != "ok" || bad.Error == nil ||
		!strings.Contains(*bad.Error, `"a/b"`) || !strings.Contains(*bad.Error, `".."`) {
		t.Fatalf("a server with bad tool names: %+v %s", bad, deref(bad.Error))
	}
	if _, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "badnames", Name: "a/b"}); abi.KindOf(err) != abi.Invalid {
		t.Fatalf("a call of a bad tool name: %v", err)
	}
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: good.ServerID, Name: "echo", Arguments: json.RawMessage(`{"message":"fine"}`)})
	if text(t, r) != "echo: fine" {
		t.Fatalf("the good server: %+v", r)
	}
	// An unknown tool is the server's answer, named.
	if _, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "good", Name: "nosuch"}); abi.KindOf(err) != abi.Invalid || !strings.Contains(err.Error(), "MCP server good: tool nosuch") {
		t.Fatalf("an unknown tool: %v", err)
	}
	// Arguments the tool's schema refuses are the tool's error result.
	r, err = do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "good", Name: "echo", Arguments: json.RawMessage(`{"message":3}`)})
	if err == nil && !r.IsError {
		t.Fatalf("arguments the schema refuses: %+v", r)
	}
	// Removing the failed one works, and stops nothing else.
	if rm := must(s, s.alice, abi.SysMcpRemove, &abi.McpServerArgs{ServerID: "garbage"}); !rm.Removed {
		t.Fatal("remove of the failed server")
	}
	if sv := server(t, s, "good"); sv.State != abi.McpReady {
		t.Fatalf("the good server after the remove: %+v", sv)
	}
}
