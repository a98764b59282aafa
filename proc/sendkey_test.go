package proc

import (
	"strings"
	"sync"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// TestSendIdempotencyKey: a send with the key of an earlier send of the
// same user changes nothing and answers that send's run, across a
// restart and however many such sends race; another user's key is
// theirs; a key is refused with steer and with another process.
func TestSendIdempotencyKey(t *testing.T) {
	h := newPTHarness(t)
	send := func(who string, pid, key, mode string) (*abi.SendResult, error) {
		id := h.alice
		if who == "bob" {
			id = h.bob
		}
		var res abi.SendResult
		err := h.call(id, "proc.send", map[string]any{"pid": pid, "message": "hello " + key, "idempotencyKey": key, "mode": mode}, &res)
		return &res, err
	}
	count := func(pid, text string) int {
		var hr abi.HistoryResult
		if err := h.call(h.root, "proc.history", map[string]any{"pid": pid, "limit": 500}, &hr); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range hr.Messages {
			if strings.Contains(string(m.Content), text) {
				n++
			}
		}
		return n
	}
	first, err := send("alice", init0(1000), "k1", "")
	if err != nil || first.Status != "started" {
		t.Fatalf("first send: %+v %v", first, err)
	}
	again, err := send("alice", init0(1000), "k1", "queue")
	if err != nil || again.Status != "duplicate" || again.RunID != first.RunID {
		t.Fatalf("second send: %+v %v, want a duplicate of %s", again, err, first.RunID)
	}
	var wg sync.WaitGroup
	runs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			res, err := send("alice", init0(1000), "k2", "")
			if err != nil && abi.Code(err) != 409 {
				t.Errorf("racing send: %v", err)
				return
			}
			if err == nil {
				runs <- res.RunID
			}
		})
	}
	wg.Wait()
	close(runs)
	seen := map[string]bool{}
	for r := range runs {
		seen[r] = true
	}
	if len(seen) != 1 {
		t.Errorf("8 sends with one key answered runs %v, want one", seen)
	}
	if b, err := send("bob", init0(1001), "k1", ""); err != nil || b.Status != "started" || b.RunID == first.RunID {
		t.Errorf("bob's k1: %+v %v, want a run of his own", b, err)
	}
	for _, tc := range []struct {
		pid, key, mode string
		code           int
	}{
		{init0(1000), "k3", "steer", 400},
		{init0(1000), strings.Repeat("k", 257), "", 400},
	} {
		if _, err := send("alice", tc.pid, tc.key, tc.mode); abi.Code(err) != tc.code {
			t.Errorf("send %q mode %q: %v, want a %d", tc.key[:2], tc.mode, err, tc.code)
		}
	}
	h.close()
	h.open()
	after, err := send("alice", init0(1000), "k1", "")
	if err != nil || after.Status != "duplicate" || after.RunID != first.RunID {
		t.Fatalf("after a restart: %+v %v, want a duplicate of %s", after, err, first.RunID)
	}
	if n := count(init0(1000), "hello k1"); n != 1 {
		t.Errorf("%d messages of k1, want 1", n)
	}
}
