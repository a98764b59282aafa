package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestE2EMCPServeSubscribe: an SDK client of `gsvfs mcp serve`
// subscribes to a process's status (resources/subscribe) and is sent
// notifications/resources/updated when the process runs; bob's
// subscription to alice's process sends him nothing; after an
// unsubscribe nothing more comes.
func TestE2EMCPServeSubscribe(t *testing.T) {
	e := startMCPEnv(t)
	connect := func(uid int, updated chan string) *mcp.ClientSession {
		cmd := e.serveCmd(t, uid)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				select {
				case updated <- req.Params.URI:
				default:
				}
			},
		}).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect to gsvfs mcp serve as host uid %d: %v", uid, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	updated, bobUpdated := make(chan string, 64), make(chan string, 64)
	alice, bob := connect(aliceHost, updated), connect(bobHost, bobUpdated)
	if caps := alice.InitializeResult().Capabilities; caps == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("the server does not say it takes subscriptions: %+v", caps)
	}
	ctx := context.Background()
	pid := fmt.Sprintf("init:%d", e.aliceUID)
	uri := "gsv://proc/" + pid + "/status"
	// bob's subscription to alice's process is refused (the SDK's
	// client, on the stateless protocol, is not told: he is sent
	// nothing).
	bob.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	if err := alice.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("alice subscribes to %s: %v", uri, err)
	}
	send := func() {
		if txt, isErr := callText(t, alice, "proc.send", map[string]any{"pid": pid, "message": "hello"}); isErr {
			t.Fatalf("proc.send: %s", txt)
		}
	}
	send()
	select {
	case got := <-updated:
		if got != uri {
			t.Fatalf("updated %q, want %q", got, uri)
		}
	case <-time.After(liveness):
		t.Fatalf("no notifications/resources/updated for %s within %v", uri, liveness)
	}
	// Unsubscribed: the process's stream ends; wait for its run to end so
	// that nothing of it is still on the way, then nothing comes.
	if err := alice.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	waitFor(t, liveness, "the run's end", func() bool {
		txt, _ := callText(t, alice, "proc.status", map[string]any{"pid": pid})
		return strings.Contains(txt, `"state":"idle"`) && strings.Contains(txt, `"queued":0`)
	})
	for len(updated) > 0 {
		<-updated
	}
	send()
	waitFor(t, liveness, "the second run's end", func() bool {
		txt, _ := callText(t, alice, "proc.status", map[string]any{"pid": pid})
		return strings.Contains(txt, `"state":"idle"`) && strings.Contains(txt, `"queued":0`)
	})
	if n := len(updated); n != 0 {
		t.Fatalf("%d notifications after the unsubscribe", n)
	}
	if n := len(bobUpdated); n != 0 {
		t.Fatalf("bob was sent %d notifications of alice's process", n)
	}
}
