package ipc

// The ipc room's tests stand a system up as gsvfs does: a real kernel on
// a fresh state directory, the devices room (the data tree), the process
// room (the processes that talk), and the ipc room, reached only through
// the dispatcher. The processes' model answers nothing (every run ends at
// once): these tests read what enters their conversations.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc"
	"gsvfs.dev/gsvfs/proc/model"
)

// waitFor bounds every wait of these tests: a guard against a hang that
// holds on a 2-core machine at load 10, never a measure of speed.
const waitFor = time.Minute

// harness is a kernel with the devices, proc and ipc rooms.
type harness struct {
	t *testing.T
	*kerneltest.Env
	r *Room
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	e := kerneltest.Open(t)
	ctx := context.Background()
	space := ns.New(e.K)
	t.Cleanup(func() { space.Close() }) // before the kernel closes
	dev, err := devices.New(e.K, devices.Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, dev); err != nil {
		t.Fatal(err)
	}
	dev.SetRoot(space.Root())
	silent := func(context.Context, uint32) (model.Provider, string, error) { return &model.Scripted{}, "m", nil }
	pm, err := proc.Open(space, proc.Options{Logger: kerneltest.Quiet(), Provider: silent})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, pm); err != nil {
		t.Fatal(err)
	}
	r, err := Open(space, Options{Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, r); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, Env: e, r: r}
}

// must makes a syscall as id the way a request frame does (JSON args) and
// decodes its result, through JSON, into out.
func (h *harness) must(id *kernel.Identity, name string, args any, out any) {
	h.t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := h.K.Call(context.Background(), &kernel.Caller{Identity: id}, name, json.RawMessage(b))
	if err != nil {
		h.t.Fatalf("%s %s: %v", name, b, err)
	}
	if out != nil {
		rb, err := json.Marshal(res)
		if err != nil {
			h.t.Fatalf("%s: encoding result: %v", name, err)
		}
		if err := json.Unmarshal(rb, out); err != nil {
			h.t.Fatalf("%s: result %s: %v", name, rb, err)
		}
	}
}

// spawn makes a process of id's labelled label.
func (h *harness) spawn(id *kernel.Identity, label string) string {
	h.t.Helper()
	var r abi.SpawnResult
	h.must(id, "proc.spawn", map[string]any{"profile": "task", "label": label}, &r)
	return r.Pid
}

// signalEvents are the texts of the signal events in pid's default
// conversation (pid is alice's).
func (h *harness) signalEvents(pid string) []string {
	h.t.Helper()
	var r abi.HistoryResult
	h.must(h.Alice, "proc.history", map[string]any{"pid": pid}, &r)
	var out []string
	for _, m := range r.Messages {
		if m.Kind != abi.EventSignal {
			continue
		}
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			h.t.Fatalf("message %d (%s): content %s is not a string", m.ID, m.Role, m.Content)
		}
		out = append(out, s)
	}
	return out
}

// eventually polls cond every 10 ms until it holds; when waitFor passes
// first it fails t with what().
func eventually(t testing.TB, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", waitFor, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
