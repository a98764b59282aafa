package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
)

// fakeCaller answers syscalls from a table, and records them.
type fakeCaller struct {
	mu    sync.Mutex
	calls []string // "name args"
	may   []string // sys.syscall.list's answer
	fail  error    // the transport's failure, if any
}

func (f *fakeCaller) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	f.mu.Lock()
	f.calls = append(f.calls, name+" "+string(args))
	f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	switch name {
	case abi.SysSyscallList.Name:
		return json.Marshal(abi.SyscallListResult{Syscalls: f.may})
	case abi.ProcList.Name:
		label := "worker"
		return json.Marshal(abi.ProcListResult{Processes: []abi.Process{{Pid: "p_1"}, {Pid: "init:1000", Label: &label}}})
	case abi.ProcStatus.Name, abi.ProcHistory.Name:
		var a abi.PidArgs
		if err := abi.DecodeArgs(args, &a); err != nil {
			return nil, &CallError{Code: 400, Message: name + ": " + err.Error()}
		}
		if a.Pid == "p_gone" {
			return nil, &CallError{Code: 404, Message: name + ": p_gone: no such process"}
		}
		return json.RawMessage(`{"ok":true,"pid":"` + a.Pid + `","from":"` + name + `"}`), nil
	case abi.FsRead.Name:
		var a abi.FSReadArgs
		if err := abi.DecodeArgs(args, &a); err != nil {
			return nil, &CallError{Code: 400, Message: name + ": " + err.Error()}
		}
		if a.Path == "/secret" {
			return json.RawMessage(`{"ok":false,"error":"permission denied: /secret"}`), nil
		}
		return json.RawMessage(`{"ok":true,"content":"hi"}`), nil
	case abi.FsDelete.Name:
		return nil, &CallError{Code: 403, Message: "fs.delete: permission denied"}
	}
	return nil, &CallError{Code: 400, Message: "unknown syscall " + name}
}

// connect serves New(c) in memory and returns a client session of it.
func connect(t *testing.T, c Caller) *mcp.ClientSession {
	t.Helper()
	s, err := New(c, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("want one content, got %d", len(r.Content))
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is a %T, not text", r.Content[0])
	}
	return tc.Text
}

// TestToolsListedByPermission checks that tools/list lists the tools of
// the table the caller's sys.syscall.list names, and only those, each
// with its syscall's doc and its args' schema.
func TestToolsListedByPermission(t *testing.T) {
	f := &fakeCaller{may: []string{"fs.read", "fs.delete", "sys.whoami", "proc.status"}}
	cs := connect(t, f)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	if want := []string{"fs.delete", "fs.read", "proc.status"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v (sys.whoami is not a tool)", names, want)
	}
	for _, tl := range res.Tools {
		if tl.Name != "fs.read" {
			continue
		}
		if tl.Description != abi.FsRead.Doc {
			t.Errorf("fs.read's description %q, want its doc %q", tl.Description, abi.FsRead.Doc)
		}
		b, _ := json.Marshal(tl.InputSchema)
		for _, want := range []string{`"type":"object"`, `"path"`, `"target"`, `"required":["path"]`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("fs.read's input schema %s lacks %s", b, want)
			}
		}
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
			t.Errorf("fs.read is not marked read-only: %+v", tl.Annotations)
		}
	}
}

// TestToolCalls checks what each kind of answer becomes: a result is
// its JSON as text; a syscall's failure (the dispatcher's answer, or
// {ok:false}) a tool error result with its message; a failure of the
// transport a protocol error.
func TestToolCalls(t *testing.T) {
	f := &fakeCaller{}
	cs := connect(t, f)
	ctx := context.Background()
	cases := []struct {
		name    string
		tool    string
		args    any
		isError bool
		text    string
	}{
		{"result", "fs.read", map[string]any{"path": "/a"}, false, `{"ok":true,"content":"hi"}`},
		{"operation failed", "fs.read", map[string]any{"path": "/secret"}, true, "fs.read: permission denied: /secret"},
		{"refused", "fs.delete", map[string]any{"path": "/a"}, true, "fs.delete: permission denied"},
		{"unknown field", "fs.read", map[string]any{"path": "/a", "uid": 0}, true, `fs.read: unknown field "uid"`},
		{"no args", "fs.read", nil, false, `{"ok":true,"content":"hi"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil {
				t.Fatalf("protocol error: %v", err)
			}
			if r.IsError != c.isError || text(t, r) != c.text {
				t.Fatalf("got isError=%v %q, want isError=%v %q", r.IsError, text(t, r), c.isError, c.text)
			}
		})
	}
	t.Run("transport failure", func(t *testing.T) {
		f.mu.Lock()
		f.fail = errors.New("the connection to the kernel ended")
		f.mu.Unlock()
		defer func() { f.mu.Lock(); f.fail = nil; f.mu.Unlock() }()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "/a"}})
		if err == nil || !strings.Contains(err.Error(), "connection to the kernel ended") {
			t.Fatalf("want a protocol error naming the transport, got %v", err)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sys.user.add", Arguments: map[string]any{}})
		if err == nil {
			t.Fatal("sys.user.add is not a tool, but its call passed")
		}
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls {
		if strings.HasPrefix(c, "sys.user.add") {
			t.Errorf("a call of a tool not in the table reached the kernel: %s", c)
		}
	}
}

// TestResources checks resources/list (each process's history and
// status, from proc.list) and resources/read of each.
func TestResources(t *testing.T) {
	cs := connect(t, &fakeCaller{})
	ctx := context.Background()
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
	}
	want := []string{"gsv://proc/p_1/history", "gsv://proc/p_1/status", "gsv://proc/init:1000/history", "gsv://proc/init:1000/status"}
	if !slices.Equal(uris, want) {
		t.Fatalf("resources %v, want %v", uris, want)
	}
	for _, c := range []struct{ uri, from, pid string }{
		{"gsv://proc/p_1/history", "proc.history", "p_1"},
		{"gsv://proc/init:1000/status", "proc.status", "init:1000"},
		{"gsv://proc/init%3A1000/status", "proc.status", "init:1000"},
	} {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: c.uri})
		if err != nil {
			t.Fatalf("%s: %v", c.uri, err)
		}
		if len(r.Contents) != 1 || !strings.Contains(r.Contents[0].Text, `"from":"`+c.from+`"`) || !strings.Contains(r.Contents[0].Text, `"pid":"`+c.pid+`"`) {
			t.Fatalf("%s: %+v", c.uri, r.Contents)
		}
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "gsv://proc/p_gone/status"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != mcp.CodeResourceNotFound || !strings.Contains(werr.Message, "p_gone: no such process") {
		t.Fatalf("a process that is not there: want resource not found with the kernel's message, got %v", err)
	}
	for _, uri := range []string{"gsv://proc/p_1/ctl", "gsv://proc/p_1", "gsv://other/p_1/status", "file:///etc/passwd"} {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("%s read, want an error", uri)
		}
	}
}

func TestProcURI(t *testing.T) {
	cases := []struct {
		uri, pid, what string
		ok             bool
	}{
		{"gsv://proc/p_1/history", "p_1", "history", true},
		{"gsv://proc/p_1/status", "p_1", "status", true},
		{"gsv://proc/init%3A0/status", "init:0", "status", true},
		{"gsv://proc/a%2Fb/status", "", "", false},
		{"gsv://proc//status", "", "", false},
		{"gsv://proc/p_1/ctl", "", "", false},
		{"gsv://proc/p_1/status/x", "", "", false},
		{"gsv://proc/p_1/status?x=1", "", "", false},
		{"gsv://dev/p_1/status", "", "", false},
		{"http://proc/p_1/status", "", "", false},
		{"gsv://proc/p_1/status#f", "", "", false},
	}
	for _, c := range cases {
		pid, what, ok := procURI(c.uri)
		if pid != c.pid || what != c.what || ok != c.ok {
			t.Errorf("procURI(%q) = %q %q %v, want %q %q %v", c.uri, pid, what, ok, c.pid, c.what, c.ok)
		}
	}
}

// FuzzProcURI checks that procURI never panics and that a pid it reads
// is one path element, and a what history or status.
func FuzzProcURI(f *testing.F) {
	for _, s := range []string{"gsv://proc/p_1/history", "gsv://proc/init%3A0/status", "gsv://proc/%2F/status", "gsv://proc/../status", "gsv:proc", "%", "gsv://proc/p/status\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		pid, what, ok := procURI(uri)
		if !ok {
			return
		}
		if pid == "" || strings.Contains(pid, "/") || (what != "history" && what != "status") {
			t.Fatalf("procURI(%q) = %q %q", uri, pid, what)
		}
	})
}

// FuzzBearer checks that bearer never panics and returns a token only
// from a Bearer header, never empty.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer gsv_user_x", "bearer  t ", "Basic abc", "Bearer", "Bearer ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		r := httptestRequest(h)
		tok, ok := bearer(r)
		if ok && (tok == "" || !strings.HasPrefix(strings.ToLower(h), "bearer ")) {
			t.Fatalf("bearer(%q) = %q", h, tok)
		}
	})
}

// TestToolSchemasHaveNoBooleans checks that no tool's input schema holds
// a boolean schema where a client wants an object (the TypeScript SDK
// refused codemode.run's {"args":true}), and that every tool of the table
// has one.
func TestToolSchemasHaveNoBooleans(t *testing.T) {
	defs, err := toolDefs()
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != len(Tools()) {
		t.Fatalf("%d tools made of %d", len(defs), len(Tools()))
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s is %v, not a schema object", path, v)
			return
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, p := range props {
				walk(path+".properties."+k, p)
			}
		}
		for _, key := range []string{"items", "additionalProperties"} {
			if c, ok := m[key]; ok && c != false {
				walk(path+"."+key, c)
			}
		}
		for _, key := range []string{"anyOf", "oneOf", "allOf"} {
			if l, ok := m[key].([]any); ok {
				for i, c := range l {
					walk(fmt.Sprintf("%s.%s[%d]", path, key, i), c)
				}
			}
		}
	}
	for _, d := range defs {
		b, err := json.Marshal(d.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		walk(d.Name, v)
		if d.Name == "codemode.run" && !strings.Contains(string(b), `"args":{"description":"any JSON value"}`) {
			t.Errorf("codemode.run's args: %s", b)
		}
	}
}
