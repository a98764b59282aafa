package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// A server that dies in the middle of a call fails that call at once,
// naming the server and saying how its command ended (its exit status
// and the end of its stderr); another server of the same user goes on,
// and the dead one comes back at the next call.
func TestServerDyingFailsItsCall(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	must(s, s.alice, abi.SysMcpAdd, stdioArgs("dies", abi.NetworkNone))
	must(s, s.alice, abi.SysMcpAdd, stdioArgs("lives", abi.NetworkNone))

	_, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "dies", Name: "die"})
	if abi.KindOf(err) != abi.Offline || !strings.Contains(err.Error(), "MCP server dies") ||
		!strings.Contains(err.Error(), "status 3") || !strings.Contains(err.Error(), "dying as asked") {
		t.Fatalf("a call whose server died: %v", err)
	}
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "lives", Name: "echo", Arguments: json.RawMessage(`{"message":"still here"}`)})
	if got := text(t, r); got != "echo: still here" {
		t.Fatalf("the other server: %q", got)
	}
	// The list says what happened, and the server comes back by itself
	// (the backoff's first retry), before anything calls it.
	deadline := time.Now().Add(liveness)
	sawFailed := false
	for {
		sv := server(t, s, "dies")
		if sv.State == abi.McpFailed && strings.Contains(deref(sv.Error), "status 3") {
			sawFailed = true
		}
		if sv.State == abi.McpReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back: %+v %s", sv, deref(sv.Error))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sawFailed {
		t.Log("the reconnect came before a list saw the failure")
	}
	r = must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "dies", Name: "echo", Arguments: json.RawMessage(`{"message":"back"}`)})
	if got := text(t, r); got != "echo: back" {
		t.Fatalf("after a reconnect: %q", got)
	}
}

// A server killed from outside (its session signalled) while a call waits
// on it fails the call at once, not when the call would have ended.
func TestServerKilledMidCall(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	mark := s.markDir()
	a := stdioArgs("victim", abi.NetworkNone)
	a.Stdio.Mounts = append(a.Stdio.Mounts, abi.ProcessMount{HostPath: "~/mark", GuestPath: "/mark", Mode: "rw"})
	must(s, s.alice, abi.SysMcpAdd, a)
	done := make(chan error, 1)
	go func() {
		_, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "victim", Name: "sleep", Arguments: json.RawMessage(`{"seconds":600,"started":"/mark/started"}`)})
		done <- err
	}()
	waitFile(t, filepath.Join(mark, "started"))
	sid := mcpSession(t, s, "victim")
	if r := must(s, s.alice, abi.ProcessSessionSignal, &abi.SessionSignalArgs{SessionID: sid, Signal: abi.SignalKill}); r.Status != abi.SignalSignaled {
		t.Fatalf("kill: %+v", r)
	}
	select {
	case err := <-done:
		if abi.KindOf(err) != abi.Offline || !strings.Contains(err.Error(), "MCP server victim") {
			t.Fatalf("the call whose server was killed: %v", err)
		}
	case <-time.After(liveness):
		t.Fatal("the call did not fail when its server was killed")
	}
}

// mcpSession is the id of the exec session alice's server name runs in.
func mcpSession(t *testing.T, s *sys, name string) string {
	t.Helper()
	list := must(s, s.alice, abi.ProcessSessionList, &abi.SessionListArgs{})
	for _, x := range list.Sessions {
		if x.Labels["mcp"] == name && x.State != "ended" {
			return x.SessionID
		}
	}
	t.Fatalf("no session of server %s in %+v", name, list.Sessions)
	return ""
}

// server is alice's server name as sys.mcp.list shows it.
func server(t *testing.T, s *sys, name string) abi.McpServerSummary {
	t.Helper()
	for _, sv := range must(s, s.alice, abi.SysMcpList, &abi.McpListArgs{}).Servers {
		if sv.Name == name {
			return sv
		}
	}
	t.Fatalf("no server %s", name)
	return abi.McpServerSummary{}
}

// A call that outruns its timeout fails with 504 naming the server, and
// the call is cancelled on the server (notifications/cancelled: the
// test server's handler sees its context end and leaves a mark).
func TestCallTimeoutCancels(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	mark := s.markDir()
	a := stdioArgs("slow", abi.NetworkNone)
	a.Stdio.Mounts = append(a.Stdio.Mounts, abi.ProcessMount{HostPath: "~/mark", GuestPath: "/mark", Mode: "rw"})
	must(s, s.alice, abi.SysMcpAdd, a)
	ms := int64(300)
	_, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "slow", Name: "sleep", TimeoutMs: &ms,
		Arguments: json.RawMessage(`{"seconds":600,"mark":"/mark/cancelled"}`)})
	if abi.KindOf(err) != abi.Timeout || !strings.Contains(err.Error(), "MCP server slow") || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("a call past its timeout: %v", err)
	}
	waitFile(t, filepath.Join(mark, "cancelled"))
	// The caller going away cancels the same way.
	os.Remove(filepath.Join(mark, "cancelled"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := kernelDo(ctx, s, &abi.McpCallArgs{ServerID: "slow", Name: "sleep",
			Arguments: json.RawMessage(`{"seconds":600,"mark":"/mark/cancelled","started":"/mark/started"}`)})
		done <- err
	}()
	waitFile(t, filepath.Join(mark, "started"))
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	waitFile(t, filepath.Join(mark, "cancelled"))
}

// markDir makes ~alice/mark, a directory her servers may write (mounted
// at /mark) to say what they saw, and returns its path on the host.
func (s *sys) markDir() string {
	s.t.Helper()
	mark := filepath.Join(s.data, "home/alice/mark")
	if err := os.MkdirAll(mark, 0o755); err != nil {
		s.t.Fatal(err)
	}
	os.Lchown(mark, diskBase+1000, diskBase+100)
	return mark
}

// waitFile waits until the file p exists.
func waitFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never came", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A result over 1 MiB is kept as a file of the server's: the call
// returns its path, its size and a preview, and its owner reads it whole.
func TestLargeResultKept(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	must(s, s.alice, abi.SysMcpAdd, stdioArgs("big", abi.NetworkNone))
	small := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "big", Name: "big", Arguments: json.RawMessage(`{"bytes":1000}`)})
	if small.Blob != nil || len(text(t, small)) != 1000 {
		t.Fatalf("a small result: %+v", small.Blob)
	}
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "big", Name: "big", Arguments: json.RawMessage(`{"bytes":2097152}`)})
	if r.Blob == nil || r.Content != nil || len(r.Blob.Preview) != 4096 || !strings.HasPrefix(r.Blob.Preview, "0123456789abcdef") ||
		!strings.HasPrefix(r.Blob.Path, "/mcp/alice/big/results/") || r.Blob.SizeBytes < 2097152 {
		t.Fatalf("a large result: %+v", r.Blob)
	}
	digest := filepath.Base(r.Blob.Path)
	f, err := do(s, s.alice, abi.SysMcpResultOpen, &abi.McpResultArgs{Uid: 1000, ServerID: "big", Digest: digest})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var whole abi.McpCallResult
	if err := json.NewDecoder(f).Decode(&whole); err != nil || len(text(t, &whole)) != 2097152 {
		t.Fatalf("the kept result: %v", err)
	}
	if _, err := do(s, s.bob, abi.SysMcpResultOpen, &abi.McpResultArgs{Uid: 1000, ServerID: "big", Digest: digest}); abi.KindOf(err) != abi.NotExist {
		t.Fatalf("bob opens alice's result: %v", err)
	}
}
