package mcp_test

import (
	"encoding/json"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// TestResourceSubscriptions: alice subscribes to a resource of her
// server (resources/subscribe); each notifications/resources/updated
// for it is a signal to her (mcp.resource.updated), never to bob, who
// may not subscribe to her server; a reconnect subscribes again; after
// an unsubscribe nothing more comes; a server that takes no
// subscriptions is a 400.
func TestResourceSubscriptions(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	must(s, s.alice, abi.SysMcpAdd, stdioArgs("subs", abi.NetworkNone, "-subscribe"))
	must(s, s.alice, abi.SysMcpAdd, stdioArgs("plain", abi.NetworkNone))
	subA := s.k.Subscribe(s.alice, nil)
	defer subA.Close()
	subB := s.k.Subscribe(s.bob, nil)
	defer subB.Close()
	args := &abi.McpSubscribeArgs{ServerID: "subs", URI: "test://readme"}
	if r := must(s, s.alice, abi.SysMcpResourceSubscribe, args); !r.Subscribed || !r.Changed {
		t.Fatalf("subscribe: %+v", r)
	}
	if r := must(s, s.alice, abi.SysMcpResourceSubscribe, args); !r.Subscribed || r.Changed {
		t.Fatalf("subscribe again: %+v", r)
	}
	if _, err := do(s, s.bob, abi.SysMcpResourceSubscribe, &abi.McpSubscribeArgs{Uid: ptr(uint32(1000)), ServerID: "subs", URI: "test://readme"}); abi.KindOf(err) != abi.Permission && abi.KindOf(err) != abi.NotExist {
		t.Fatalf("bob subscribes to alice's server: %v", err)
	}
	if _, err := do(s, s.alice, abi.SysMcpResourceSubscribe, &abi.McpSubscribeArgs{ServerID: "plain", URI: "test://readme"}); abi.KindOf(err) != abi.Invalid {
		t.Fatalf("a subscription to a server that takes none: %v", err)
	}
	if _, err := do(s, s.alice, abi.SysMcpResourceSubscribe, &abi.McpSubscribeArgs{ServerID: "subs", URI: "a\nb"}); abi.KindOf(err) != abi.Invalid {
		t.Fatalf("a URI of two lines: %v", err)
	}
	touch := func(uri string) {
		t.Helper()
		r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "subs", Name: "touch", Arguments: json.RawMessage(`{"uri":"` + uri + `"}`)})
		if r.IsError {
			t.Fatalf("touch: %+v", r)
		}
	}
	// touched touches uri until alice's mcp.resource.updated of it comes:
	// a server's notification is best effort (the SDK's server may drop
	// one it cannot send in time), so a touch whose notice never came is
	// made again; a subscription the room lost would never be told.
	touched := func(uri string) {
		t.Helper()
		deadline := time.Now().Add(liveness)
		for time.Now().Before(deadline) {
			touch(uri)
			again := time.Now().Add(2 * time.Second)
			for time.Now().Before(again) {
				rec, ok := subA.Poll()
				if !ok {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				var f struct {
					Signal  string
					Payload abi.McpResourceUpdated
				}
				if json.Unmarshal(rec, &f) == nil && f.Signal == abi.SigMcpResourceUpdated.Name {
					if f.Payload.URI != uri || f.Payload.Server != "subs" || f.Payload.ServerID == "" {
						t.Fatalf("the signal: %s", rec)
					}
					return
				}
			}
		}
		t.Fatalf("no %s of %s", abi.SigMcpResourceUpdated.Name, uri)
	}
	touched("test://readme")
	// A URI not subscribed to is not told.
	touch("test://other")
	// A reconnect subscribes again.
	must(s, s.alice, abi.SysMcpRefresh, &abi.McpServerArgs{ServerID: "subs"})
	touched("test://readme")
	if r := must(s, s.alice, abi.SysMcpResourceUnsubscribe, args); r.Subscribed || !r.Changed {
		t.Fatalf("unsubscribe: %+v", r)
	}
	// What was published before the unsubscribe answered (a touch made
	// twice may be told twice) is not counted against it.
	for {
		if _, ok := subA.Poll(); !ok {
			break
		}
	}
	touch("test://readme")
	// The touch's answer comes after its notification on the one
	// connection: a signal it made is published by now.
	must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "subs", Name: "echo", Arguments: json.RawMessage(`{"message":"x"}`)})
	for {
		rec, ok := subA.Poll()
		if !ok {
			break
		}
		var f struct{ Signal string }
		if json.Unmarshal(rec, &f) == nil && f.Signal == abi.SigMcpResourceUpdated.Name {
			t.Fatalf("a signal after the unsubscribe (or of a URI not subscribed to): %s", rec)
		}
	}
	for {
		rec, ok := subB.Poll()
		if !ok {
			break
		}
		var f struct{ Signal string }
		if json.Unmarshal(rec, &f) == nil && f.Signal == abi.SigMcpResourceUpdated.Name {
			t.Fatalf("bob got alice's %s", rec)
		}
	}
}

func ptr[T any](v T) *T { return &v }
