package proc

import (
	"context"
	"errors"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// TestBlockGate: a user's starts past the burst wait for a token (here a
// context already ended stands for a wait: take fails rather than
// waits); the token of a start that gave up is given back; another
// user's bucket is its own; root is not held; no rate holds nobody.
func TestBlockGate(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	const alice, bob = 1000, 1001
	for _, c := range []struct {
		name     string
		interval time.Duration
		burst    int
		takes    []uint32 // in order
		want     []bool   // each take's: at once
	}{
		{"the burst, then a wait", time.Hour, 3, []uint32{alice, alice, alice, alice, alice}, []bool{true, true, true, false, false}},
		{"another user's bucket is its own", time.Hour, 2, []uint32{alice, alice, alice, bob, bob, bob}, []bool{true, true, false, true, true, false}},
		{"root is not held", time.Hour, 1, []uint32{0, 0, 0, alice, alice, 0}, []bool{true, true, true, true, false, true}},
		{"no rate", 0, 1, []uint32{alice, alice, alice}, []bool{true, true, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newBlockGate()
			g.interval, g.burst = c.interval, c.burst
			for i, uid := range c.takes {
				err := g.take(ended, uid)
				if got := err == nil; got != c.want[i] {
					t.Fatalf("take %d (uid %d): %v, want at once: %v", i, uid, err, c.want[i])
				}
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("take %d: %v, want the context's error", i, err)
				}
				if n := g.waitingFor(uid); n != 0 {
					t.Fatalf("take %d: %d waiting after it returned", i, n)
				}
			}
		})
	}
	if n := newBlockGate().interval; n != time.Second/blockRate {
		t.Fatalf("the default interval is %v, want %v", n, time.Second/blockRate)
	}
}

// TestCodeModeStartRate: while alice's blocks have used up her starts (a
// burst of 2, then one an hour here), her next block waits for its turn,
// and meanwhile bob's and root's blocks run at once; the waiting block
// ends at once when its caller gives up, without running, and runs when
// its token comes.
func TestCodeModeStartRate(t *testing.T) {
	h := startPT(&ptHarness{t: t, dir: t.TempDir(), provs: map[uint32]model.Provider{}})
	g := h.m.run.blockGate
	g.mu.Lock()
	g.interval, g.burst = time.Hour, 2
	g.mu.Unlock()
	ctx := context.Background()
	alice := &kernel.Caller{Identity: h.alice}
	run := func(ctx context.Context, c *kernel.Caller, code string) (*abi.CodeModeResult, error) {
		return kernel.Do(ctx, h.k, c, abi.CodemodeRun, &abi.CodeModeRunArgs{Code: code, TimeoutMs: 20_000})
	}
	for i := range 2 {
		if res, err := run(ctx, alice, "return 1"); err != nil || res.Status != "completed" {
			t.Fatalf("alice's block %d of her burst: %+v %v", i, res, err)
		}
	}
	// Her third waits; it would write ~/ran.txt.
	wctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	waited := make(chan error, 1)
	go func() {
		_, err := run(wctx, alice, `await fs.write({path: "~/ran.txt", content: "ran"}); return 1`)
		waited <- err
	}()
	eventually(t, func() bool { return g.waitingFor(h.alice.Uid) == 1 }, func() string { return "alice's third block does not wait" })
	for _, c := range []*kernel.Caller{{Identity: h.bob}, {Identity: h.root}} {
		if res, err := run(ctx, c, "return 2"); err != nil || res.Status != "completed" {
			t.Fatalf("%s's block while alice's waits: %+v %v", c.Username, res, err)
		}
	}
	giveUp()
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("alice's waiting block, given up: no error")
		}
	case <-time.After(ptWait):
		t.Fatalf("alice's waiting block did not end within %v of its caller giving up", ptWait)
	}
	if n := g.waitingFor(h.alice.Uid); n != 0 {
		t.Fatalf("%d of alice's starts still wait", n)
	}
	if r, err := kernel.Do(ctx, h.k, alice, abi.FsRead, &abi.FSReadArgs{Path: "~/ran.txt"}); err != nil || r.OK {
		t.Fatalf("the block given up ran (~/ran.txt: %+v %v)", r, err)
	}
	// Tokens come again (every 10 ms now): her next block waits its turn
	// and runs.
	g.mu.Lock()
	g.interval = 10 * time.Millisecond
	delete(g.tat, h.alice.Uid)
	g.mu.Unlock()
	for i := range 4 {
		if res, err := run(ctx, alice, `await fs.write({path: "~/ran.txt", content: "ran"}); return 3`); err != nil || res.Status != "completed" {
			t.Fatalf("alice's block %d once tokens come: %+v %v", i, res, err)
		}
	}
	if r, err := kernel.Do(ctx, h.k, alice, abi.FsRead, &abi.FSReadArgs{Path: "~/ran.txt"}); err != nil || !r.OK {
		t.Fatalf("~/ran.txt after alice's blocks ran: %+v %v", r, err)
	}
}
