package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCallsInFlightTogether: the calls a block makes before it awaits
// (Promise.all) are in flight together, and each is answered when it
// ends: the second call's answer overtakes the first's, which waits for
// the second to be in progress.
func TestCallsInFlightTogether(t *testing.T) {
	var inFlight atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	secondDone := make(chan struct{})
	call := func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		var a struct{ Path string }
		json.Unmarshal(args, &a)
		if inFlight.Add(1) == 2 {
			once.Do(func() { close(both) })
		}
		defer inFlight.Add(-1)
		select {
		case <-both:
		case <-time.After(liveness):
			return nil, errors.New("served one at a time")
		}
		if a.Path == "first" {
			// Answered after the second: out of order.
			select {
			case <-secondDone:
			case <-time.After(liveness):
				return nil, errors.New("the second call was not answered first")
			}
		} else {
			defer close(secondDone)
		}
		return json.Marshal(map[string]string{"content": a.Path})
	}
	res := run(t, Request{Code: `
const order = [];
const [a, b] = await Promise.all([
  fs.read({path: "first"}).then((r) => { order.push(r.content); return r.content }),
  fs.read({path: "second"}).then((r) => { order.push(r.content); return r.content }),
]);
return [a, b, order];`}, call)
	completed(t, res, `["first","second",["second","first"]]`)
}

// TestCallsNotAwaited: a call the block makes and does not wait for
// still runs to its end before Run returns; a failing call among many
// rejects its own promise only.
func TestCallsNotAwaited(t *testing.T) {
	var done atomic.Int32
	call := func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
		var a struct{ Path string }
		json.Unmarshal(args, &a)
		if a.Path == "bad" {
			return nil, errors.New("fs.read: bad: no such file")
		}
		done.Add(1)
		return json.RawMessage(`{"ok":true}`), nil
	}
	res := run(t, Request{Code: `fs.write({path: "later"}); return 1`}, call)
	completed(t, res, `1`)
	if got := done.Load(); got != 1 {
		t.Fatalf("%d calls done when Run returned, want 1", got)
	}
	// A call not awaited before a log line leaves with it.
	res = run(t, Request{Code: `fs.write({path: "now"}); console.log("x"); while (true) {}`, Limits: Limits{Wall: time.Second}}, call)
	failedWith(t, res, "time limit exceeded")
	if got := done.Load(); got != 2 {
		t.Fatalf("%d calls done, want 2: the call before the log line was not made", got)
	}
	res = run(t, Request{Code: `
const ps = [];
for (let i = 0; i < 50; i++) ps.push(fs.read({path: i === 17 ? "bad" : "p" + i}));
const r = await Promise.allSettled(ps);
return [r.filter((x) => x.status === "fulfilled").length, r[17].reason.message];`}, call)
	completed(t, res, `[49,"fs.read: bad: no such file"]`)
}
