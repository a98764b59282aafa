package main

// BenchmarkAdapter: the chat path in one process, as gsvfs wires it: a
// kernel with the devices, proc (the offline model) and adapters rooms,
// and the bridge runtime (adapters/bridge) of a fake platform whose
// requests are frames answered by the kernel's Serve as the bridge's
// service token (what a 9P connection's /sys/rpc carries, without the
// socket). Figures, never asserted:
//
//   - inbound->started: from a message handed to the bridge's Sink to
//     its run's proc.run.started (targets: p99 < 50 ms);
//   - final->sent: from a run's proc.run.finished to the bridge asking
//     the platform to post its reply (target: < 50 ms);
//   - burst: 100 messages a second for 10 s across 10 linked users:
//     how many replies came back (target: all), and the end to end p99.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/adapters"
	"gsvfs.dev/gsvfs/adapters/bridge"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/mcpserve"
	"gsvfs.dev/gsvfs/ns"
	gproc "gsvfs.dev/gsvfs/proc"
	"gsvfs.dev/gsvfs/proc/model"
)

// benchPlatform is a fake platform: it keeps the bridge's Sink and the
// time each reply was posted, by the text's first line.
type benchPlatform struct {
	sink chan bridge.Sink
	mu   sync.Mutex
	sent map[string]time.Time
	wake chan struct{}
}

func (*benchPlatform) Kind() string          { return "bench" }
func (*benchPlatform) Limits() bridge.Limits { return bridge.Limits{MaxText: 64 << 10} }
func (p *benchPlatform) Run(ctx context.Context, s bridge.Sink) error {
	s.State(abi.AdapterAccountStatus{Connected: true})
	p.sink <- s
	<-ctx.Done()
	return nil
}
func (p *benchPlatform) Send(ctx context.Context, out bridge.Outbound) (bridge.Sent, error) {
	p.mu.Lock()
	p.sent[out.ReplyToID] = time.Now()
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return bridge.Sent{MessageID: "x"}, nil
}

// framesConn is a bridge.Conn over the kernel's Serve as one identity.
type framesConn struct {
	f    mcpserve.Frames
	done chan struct{}
}

func (c framesConn) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	res, err := c.f.Call(ctx, name, args)
	if ce, ok := err.(*mcpserve.CallError); ok {
		return nil, &bridge.KernelError{Code: ce.Code, Message: ce.Message}
	}
	return res, err
}
func (c framesConn) Done() <-chan struct{} { return c.done }
func (c framesConn) Close() error          { return nil }

func BenchmarkAdapter(b *testing.B) {
	ctx := context.Background()
	k, err := kernel.Open(kernel.Config{StateDir: b.TempDir(), Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	if err := k.EnsureSetup(ctx, "root", 0); err != nil {
		b.Fatal(err)
	}
	space := ns.New(k)
	defer space.Close()
	dev, err := devices.New(k, devices.Options{Local: local.Options{Logger: quietLogger()}})
	if err != nil {
		b.Fatal(err)
	}
	space.Add(ctx, dev)
	dev.SetRoot(space.Root())
	offline := func(context.Context, uint32) (model.Provider, string, error) { return model.Offline{}, "offline", nil }
	pm, err := gproc.Open(space, gproc.Options{Logger: quietLogger(), Provider: offline})
	if err != nil {
		b.Fatal(err)
	}
	space.Add(ctx, pm)
	room, err := adapters.Open(space, adapters.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	space.Add(ctx, room)

	// Ten users, each linked as actor u<i>, and root's bridge token.
	root := k.KernelCaller()
	var uids []uint32
	for i := 0; i < 10; i++ {
		u, err := kernel.Do(ctx, k, root, abi.SysUserAdd, &abi.UserAddArgs{Username: fmt.Sprintf("user%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		uids = append(uids, u.Uid)
	}
	kind := "bench"
	tok, err := kernel.Do(ctx, k, root, abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "service", AllowedAdapter: &kind, Uid: &uids[0]})
	if err != nil {
		b.Fatal(err)
	}
	id, err := k.Authenticate(ctx, kernel.Peer{Transport: "bench", HostUID: -1, Secret: []byte(tok.Token.Token)})
	if err != nil {
		b.Fatal(err)
	}
	bc := &kernel.Caller{Identity: id}
	conn := framesConn{f: func(ctx context.Context, frame []byte) []byte { return k.Serve(ctx, bc, frame) }, done: make(chan struct{})}
	plat := &benchPlatform{sink: make(chan bridge.Sink, 1), sent: map[string]time.Time{}, wake: make(chan struct{}, 1)}
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	go bridge.Run(bctx, bridge.Options{Adapter: plat, Account: "acct", Logger: quietLogger(),
		Dial: func(context.Context) (bridge.Conn, error) { return conn, nil }})
	sink := <-plat.sink
	waitAccount := time.Now().Add(time.Minute)
	for {
		st, _ := kernel.Do(ctx, k, root, abi.AdapterStatus, &abi.AdapterStatusArgs{Adapter: kind})
		if st != nil && len(st.Accounts) == 1 || time.Now().After(waitAccount) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, uid := range uids {
		u := uid
		if _, err := kernel.Do(ctx, k, root, abi.SysLink, &abi.LinkArgs{Adapter: kind, AccountID: "acct", ActorID: fmt.Sprintf("u%d", i), Uid: &u}); err != nil {
			b.Fatal(err)
		}
	}

	// The run signals, by run id.
	var smu sync.Mutex
	started := map[string]time.Time{}
	finished := map[string]time.Time{}
	k.Observe(func(ev *kernel.Event, _ kernel.Audience) {
		switch p := ev.Payload.(type) {
		case abi.RunStarted:
			smu.Lock()
			started[p.RunID] = time.Now()
			smu.Unlock()
		case abi.RunFinished:
			smu.Lock()
			finished[p.RunID] = time.Now()
			smu.Unlock()
		}
	})
	msg := func(n int, user int) abi.AdapterMessage {
		a := fmt.Sprintf("u%d", user)
		return abi.AdapterMessage{MessageID: fmt.Sprint("m", n), Surface: abi.AdapterSurface{Kind: "dm", ID: a}, Actor: &abi.AdapterActor{ID: a}, Text: "hello"}
	}
	runOf := func(n int) string {
		// The run is found from the receipt, through the replay answer.
		res, err := kernel.Do(ctx, k, bc, abi.AdapterInbound, &abi.AdapterInboundArgs{Adapter: kind, AccountID: "acct", Message: msg(n, n%10)})
		if err != nil || res.Delivered == nil {
			return ""
		}
		return res.Delivered.RunID
	}
	waitSent := func(ids []string, within time.Duration) int {
		deadline := time.Now().Add(within)
		for {
			plat.mu.Lock()
			got := 0
			for _, id := range ids {
				if _, ok := plat.sent[id]; ok {
					got++
				}
			}
			plat.mu.Unlock()
			if got == len(ids) || time.Now().After(deadline) {
				return got
			}
			select {
			case <-plat.wake:
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	// One message at a time: inbound -> started, final -> sent.
	var inToStart, finalToSent []time.Duration
	n := 0
	for i := 0; i < max(b.N, 200); i++ {
		n++
		t0 := time.Now()
		if err := sink.Deliver(ctx, msg(n, n%10)); err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprint("m", n)
		if waitSent([]string{id}, time.Minute) != 1 {
			b.Fatalf("no reply to %s", id)
		}
		run := runOf(n)
		smu.Lock()
		st, fin := started[run], finished[run]
		smu.Unlock()
		plat.mu.Lock()
		sent := plat.sent[id]
		plat.mu.Unlock()
		if !st.IsZero() {
			inToStart = append(inToStart, st.Sub(t0))
		}
		if !fin.IsZero() {
			finalToSent = append(finalToSent, sent.Sub(fin))
		}
	}
	report := func(name string, ds []time.Duration) {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		if len(ds) == 0 {
			return
		}
		p := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
		b.ReportMetric(float64(p(0.5).Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(p(0.99).Microseconds())/1000, name+"-p99-ms")
		fmt.Printf("adapter: %s over %d: p50 %v, p99 %v, max %v\n", name, len(ds), p(0.5), p(0.99), ds[len(ds)-1])
	}
	report("inbound->started", inToStart)
	report("final->sent", finalToSent)

	// The burst: 100 a second for 10 s across the 10 users.
	var ids []string
	var sends sync.WaitGroup
	t0 := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	sendAt := map[string]time.Time{}
	for i := 0; i < 1000; i++ {
		<-tick.C
		n++
		m := msg(n, n%10)
		ids = append(ids, m.MessageID)
		sendAt[m.MessageID] = time.Now()
		sends.Add(1)
		go func() {
			defer sends.Done()
			if err := sink.Deliver(ctx, m); err != nil {
				b.Error(err)
			}
		}()
	}
	tick.Stop()
	sends.Wait()
	offered := time.Since(t0)
	got := waitSent(ids, 5*time.Minute)
	var e2e []time.Duration
	plat.mu.Lock()
	for _, id := range ids {
		if s, ok := plat.sent[id]; ok {
			e2e = append(e2e, s.Sub(sendAt[id]))
		}
	}
	plat.mu.Unlock()
	fmt.Printf("adapter: burst: %d messages offered in %v (%.0f/s), %d replies (lost %d)\n", len(ids), offered.Round(time.Millisecond),
		float64(len(ids))/offered.Seconds(), got, len(ids)-got)
	b.ReportMetric(float64(len(ids)-got), "burst-lost")
	report("burst-end-to-end", e2e)
}
