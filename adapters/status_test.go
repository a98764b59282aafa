package adapters

import (
	"context"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// TestDaemonStatusAdapters: sys.status (gsv status) lists the adapter
// accounts the caller may see, online or offline with the bridge's last
// error and the deliveries waiting in the outbox; another user sees none
// of alice's.
func TestDaemonStatusAdapters(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	status := func(id *kernel.Identity) *abi.DaemonStatus {
		t.Helper()
		st, err := kernel.Do(ctx, h.K, kerneltest.Caller(id), abi.SysStatus, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, id := range []*kernel.Identity{h.Alice, h.Root} {
		st := status(id)
		if len(st.Adapters) != 1 || st.Adapters[0].Adapter != "irc" || st.Adapters[0].AccountID != "net" || !st.Adapters[0].Online {
			t.Fatalf("status as %s: adapters %+v, want irc/net online", id.Username, st.Adapters)
		}
	}
	if st := status(h.Bob); len(st.Adapters) != 0 {
		t.Fatalf("bob sees alice's accounts: %+v", st.Adapters)
	}
	h.mustDo(abi.AdapterStateUpdate.Name, h.bridge, &abi.AdapterStateArgs{Adapter: "irc", AccountID: "net",
		Status: abi.AdapterAccountStatus{AccountID: "net", Connected: false, Error: "connection refused"}})
	// A delivery no bridge has taken waits in the outbox (the send waits
	// for a bridge's report meanwhile; it is cancelled when seen).
	sctx, cancel := context.WithCancel(ctx)
	sent := make(chan error, 1)
	go func() {
		_, err := kernel.Do(sctx, h.K, kerneltest.Caller(h.Alice), abi.AdapterSend, &abi.AdapterSendArgs{Adapter: "irc", AccountID: "net",
			Surface: abi.AdapterSurface{Kind: "dm", ID: "al"}, Text: "hi"})
		sent <- err
	}()
	defer func() { cancel(); <-sent }()
	var st *abi.DaemonStatus
	for t0 := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if st = status(h.Alice); st.OutboxPending == 1 || time.Since(t0) > 30*time.Second {
			break
		}
	}
	if len(st.Adapters) != 1 || st.Adapters[0].Online || st.Adapters[0].Error != "connection refused" || st.Adapters[0].Pending != 1 || st.OutboxPending != 1 {
		t.Fatalf("status after the bridge went offline, a delivery waiting: %+v", st)
	}
}
