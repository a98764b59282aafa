package proc

// Tests of issue 20's input rules in proc: a refused number changes
// nothing (item 11), another user's pid is an unknown pid (item 16), and
// a ctl line that says two things or more than its verb takes is refused
// (item 18).

import (
	"context"
	"math"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// A NaN or an infinity, on a ctl line or from an in-process caller, is a
// 400 and changes nothing: the run's settings read back as before, and
// root's proc.run.list still answers. (On main, `budget usd=NaN` failed
// with EIO and stayed in memory: /proc/<pid>/run was then EIO.)
func TestRefusedNumbersChangeNothing(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "numbers")
	ctl := "/proc/" + pid + "/ctl"
	h.must(h.alice, "proc.run.control", map[string]any{"pid": pid, "budget": map[string]any{"usd": 0.5, "turns": 3}}, nil)
	run := func() string {
		t.Helper()
		s, err := h.readFile(h.alice, "/proc/"+pid+"/run")
		if err != nil {
			t.Fatalf("read /proc/%s/run: %v", pid, err)
		}
		return s
	}
	before := run()
	for _, line := range []string{
		"budget usd=NaN", "budget usd=nan turns=4", "budget usd=+Inf", "budget usd=-Inf", "budget usd=1e400",
		"budget usd=0x1p3", "set-temperature NaN", "set-temperature Inf", "set-temperature -nan",
		"extend-budget usd=NaN", "extend-budget usd=Infinity", "continue extend-budget usd=-inf",
	} {
		err := h.writeFile(h.alice, ctl, line+"\n")
		if abi.Code(err) != 400 {
			t.Errorf("%q: %v (code %d), want a 400", line, err, abi.Code(err))
		}
		if got := run(); got != before {
			t.Fatalf("after %q /proc/%s/run reads\n%s\nwant\n%s", line, pid, got, before)
		}
		h.must(h.root, "proc.run.list", map[string]any{}, nil)
	}
	// In-process callers may hold a NaN; the syscall refuses it first.
	for _, b := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := h.k.Call(context.Background(), &kernel.Caller{Identity: h.alice}, "proc.run.control",
			&abi.RunControlArgs{Pid: pid, Budget: &abi.RunBudget{USD: b}})
		if abi.Code(err) != 400 {
			t.Errorf("proc.run.control with budget usd %v: %v, want a 400", b, err)
		}
		if got := run(); got != before {
			t.Fatalf("after a budget of %v /proc/%s/run reads\n%s", b, pid, got)
		}
	}
	// A conversation's pressure: NaN passed its (0, 1] check.
	policy := "/proc/" + pid + "/conversations/default/policy"
	pol, err := h.readFile(h.alice, policy)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"policy pressure=NaN", "policy pressure=Inf", "policy pressure=-Inf"} {
		if err := h.writeFile(h.alice, "/proc/"+pid+"/conversations/default/ctl", line+"\n"); abi.Code(err) != 400 {
			t.Errorf("%q: %v, want a 400", line, err)
		}
		if got, err := h.readFile(h.alice, policy); err != nil || got != pol {
			t.Fatalf("after %q the policy reads %q, %v; want %q", line, got, err, pol)
		}
	}
	nan := math.NaN()
	if _, err := h.k.Call(context.Background(), &kernel.Caller{Identity: h.alice}, "proc.conversation.policy.set",
		&abi.PolicyArgs{Pid: pid, ConversationID: "default", CompactAtPressure: &nan}); abi.Code(err) != 400 {
		t.Errorf("policy.set with a NaN pressure: %v, want a 400", err)
	}
	if got, err := h.readFile(h.alice, policy); err != nil || got != pol {
		t.Fatalf("after a NaN pressure the policy reads %q, %v", got, err)
	}
}

// IPC, delegate and signal.watch naming another user's process answer
// exactly as for a pid that does not exist: 404, the same message (the
// pid aside). Root, who sees every process, gets the rule's 403. (On
// main: 403 for another user's pid, 404 for an unknown one, an oracle of
// which pids exist.)
func TestOtherUsersPidIsUnknown(t *testing.T) {
	h := newPTHarness(t)
	alicePid := h.spawn(h.alice, "a")
	bobPid := h.spawn(h.bob, "b")
	const unknown = "0000dead-beef"
	calls := []struct {
		name string
		args func(target string) map[string]any
	}{
		{"proc.ipc.send", func(p string) map[string]any {
			return map[string]any{"sourcePid": alicePid, "pid": p, "message": "hi"}
		}},
		{"proc.ipc.call", func(p string) map[string]any {
			return map[string]any{"sourcePid": alicePid, "pid": p, "message": "hi"}
		}},
		{"proc.ipc.delegate", func(p string) map[string]any {
			return map[string]any{"sourcePid": alicePid, "pid": p, "task": "t"}
		}},
		{"signal.watch", func(p string) map[string]any {
			return map[string]any{"watcherPid": alicePid, "signal": "proc.run.finished", "processId": p}
		}},
		{"proc.status", func(p string) map[string]any { return map[string]any{"pid": p} }},
		{"proc.run.get", func(p string) map[string]any { return map[string]any{"pid": p} }},
		{"proc.send", func(p string) map[string]any { return map[string]any{"pid": p, "message": "hi"} }},
		{"proc.spawn", func(p string) map[string]any { return map[string]any{"profile": "task", "parentPid": p} }},
	}
	shape := func(err error, pid string) string {
		if err == nil {
			return "<nil>"
		}
		return strings.ReplaceAll(err.Error(), pid, "<pid>")
	}
	for _, c := range calls {
		errBob := h.call(h.alice, c.name, c.args(bobPid), nil)
		errUnknown := h.call(h.alice, c.name, c.args(unknown), nil)
		if abi.Code(errBob) != 404 || abi.Code(errUnknown) != 404 || shape(errBob, bobPid) != shape(errUnknown, unknown) {
			t.Errorf("%s as alice: bob's pid: %v; an unknown pid: %v; want the same 404", c.name, errBob, errUnknown)
		}
	}
	// The ctl lines of alice's process say the same.
	ctl := "/proc/" + alicePid + "/ctl"
	for _, line := range []string{"mail %s hi", "call %s hi", "delegate task pid=%s do it", "watch proc.run.finished process=%s"} {
		errBob := h.writeFile(h.alice, ctl, strings.Replace(line, "%s", bobPid, 1)+"\n")
		errUnknown := h.writeFile(h.alice, ctl, strings.Replace(line, "%s", unknown, 1)+"\n")
		if abi.Code(errBob) != 404 || shape(errBob, bobPid) != shape(errUnknown, unknown) {
			t.Errorf("%q as alice: bob's pid: %v; an unknown pid: %v; want the same 404", line, errBob, errUnknown)
		}
	}
	// Nothing reached bob's process.
	if n := h.sqlCount(`SELECT count(*) FROM proc_watches WHERE process_id=?`, bobPid); n != 0 {
		t.Errorf("alice's refused watch left %d watches on bob's process", n)
	}
	// Root sees bob's process: the rule's own 403.
	rootPid := h.spawn(h.root, "r")
	if err := h.call(h.root, "proc.ipc.send", map[string]any{"sourcePid": rootPid, "pid": bobPid, "message": "hi"}, nil); abi.Code(err) != 403 {
		t.Errorf("root's IPC to bob's process: %v, want a 403", err)
	}
}

// A ctl line that gives an option twice, or words to a verb that takes
// none, is refused whole: nothing of it runs (issue 20, item 18).
func TestCtlLinesSayOneThing(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "lines")
	ctl := "/proc/" + pid + "/ctl"
	run := func() string {
		t.Helper()
		s, err := h.readFile(h.alice, "/proc/"+pid+"/run")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := run()
	for _, line := range []string{
		"budget usd=1 usd=2", "budget turns=1 turns=1", "budget now usd=1", "stop now", "start please",
		"supervise grace=1s grace=2s", "supervise maybe", "supervise grace=99999h", "extend-budget more usd=1",
		"send mode=steer mode=queue hi", "call " + pid + " timeout=1s timeout=2s hi", "abort everything", "reset all",
		"watch proc.run.finished process=a process=b",
	} {
		if err := h.writeFile(h.alice, ctl, line+"\n"); abi.Code(err) != 400 {
			t.Errorf("%q: %v, want a 400", line, err)
		}
		if got := run(); got != before {
			t.Fatalf("after %q /proc/%s/run reads\n%s\nwant\n%s", line, pid, got, before)
		}
	}
	conv := "/proc/" + pid + "/conversations/default/ctl"
	for _, line := range []string{"policy keep=1 keep=2", "policy now keep=1", "reset later", "close it"} {
		if err := h.writeFile(h.alice, conv, line+"\n"); abi.Code(err) != 400 {
			t.Errorf("%q: %v, want a 400", line, err)
		}
	}
	if err := h.writeFile(h.alice, "/proc/"+pid+"/conversations/ctl", "close default now\n"); abi.Code(err) != 400 {
		t.Errorf("close default now: %v, want a 400", err)
	}
	// Free text keeps its own key=value words, repeated or not.
	if err := h.writeFile(h.alice, ctl, "send a=1 a=2\n"); err != nil {
		t.Errorf("send a=1 a=2: %v", err)
	}
}
