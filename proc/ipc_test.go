package proc

import (
	"context"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/proc/model"
)

// scriptOf makes uid's model the inline script (one JSON turn a line).
func (h *ptHarness) scriptOf(uid uint32, script string) *model.Scripted {
	h.t.Helper()
	s, err := model.ParseScript([]byte(script))
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.provs[uid] = s
	h.mu.Unlock()
	return s
}

// findEvent returns the first message of pid's default conversation of
// kind, or nil.
func (h *ptHarness) findEvent(pid, kind string) *abi.Message {
	h.t.Helper()
	for _, m := range h.messages(pid) {
		if m.Kind == kind {
			return &m
		}
	}
	return nil
}

// messages is pid's default conversation as proc.history pages it (no
// count check: events may arrive while it is read).
func (h *ptHarness) messages(pid string) []abi.Message {
	h.t.Helper()
	var r ptHist
	h.must(h.alice, "proc.history", map[string]any{"pid": pid}, &r)
	return r.Messages
}

// callState is the stored state of an IPC call.
func (h *ptHarness) callState(id string) string {
	var s string
	if err := h.k.Store.QueryRowContext(context.Background(), `SELECT state FROM proc_ipc_calls WHERE call_id=?`, id).Scan(&s); err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

// waitCall waits until call id leaves pending and returns its state.
func (h *ptHarness) waitCall(id string) string {
	h.t.Helper()
	var s string
	eventually(h.t, func() bool { s = h.callState(id); return s != "pending" },
		func() string { return "call " + id + " still pending" })
	return s
}

// Mail and a call between alice's processes: the target sees a typed
// process.message / process.call from the source; the call's answer comes
// back to the source as an ipc.reply event; proc.ipc.list shows it.
func TestIPCSendAndCall(t *testing.T) {
	h := newPTHarness(t)
	a, b := h.spawn(h.alice, "manager"), h.spawn(h.alice, "worker")

	var sent abi.IpcSendResult
	h.must(h.alice, "proc.ipc.send", map[string]any{"pid": b, "sourcePid": a, "message": "please review notes.md"}, &sent)
	if !sent.OK || sent.Pid != b || sent.SourcePid != a || sent.RunID == "" {
		t.Fatalf("proc.ipc.send = %+v", sent)
	}
	h.waitIdle(b)
	msg := h.findEvent(b, abi.EventProcessMessage)
	if msg == nil || msg.Source == nil || msg.Source.Kind != "process" || msg.Source.Pid != a || !strings.Contains(ptText(t, *msg), "please review notes.md") {
		t.Fatalf("the mail in %s: %+v", b, msg)
	}

	h.scriptOf(1000, `{"text":"the answer is 42","expectUser":"summarize the notes"}
{"text":"noted"}`)
	var call abi.IpcCallResult
	h.must(h.alice, "proc.ipc.call", map[string]any{"pid": b, "sourcePid": a, "message": "summarize the notes", "timeoutMs": 30000}, &call)
	if !call.OK || call.CallID == "" || call.DeadlineAt <= time.Now().UnixMilli() || call.RunID == "" {
		t.Fatalf("proc.ipc.call = %+v", call)
	}
	if s := h.waitCall(call.CallID); s != "replied" {
		t.Fatalf("call state %s, want replied", s)
	}
	h.waitIdle(a)
	reply := h.findEvent(a, abi.EventIpcReply)
	if reply == nil || reply.Role != "system" || !strings.Contains(ptText(t, *reply), "the answer is 42") || reply.TraceID != call.CallID {
		t.Fatalf("the reply in %s: %+v", a, reply)
	}
	if in := h.findEvent(b, abi.EventProcessCall); in == nil || in.TraceID != call.CallID {
		t.Fatalf("the call in %s: %+v", b, in)
	}
	var list abi.IpcListResult
	h.must(h.alice, "proc.ipc.list", map[string]any{"pid": a}, &list)
	if len(list.Calls) != 1 || list.Calls[0].CallID != call.CallID || list.Calls[0].State != "replied" || list.Calls[0].Direction != "out" {
		t.Fatalf("proc.ipc.list = %+v", list)
	}
}

// Who may send: a process of the same owner only; the source must be a
// process the caller owns; bad input changes nothing.
func TestIPCRules(t *testing.T) {
	h := newPTHarness(t)
	a := h.spawn(h.alice, "a")
	bobs := h.spawn(h.bob, "b")
	for _, c := range []struct {
		name string
		call string
		args map[string]any
		code int
	}{
		// Another owner's process is, for alice, a pid that does not
		// exist (TestOtherUsersPidIsUnknown).
		{"cross-owner", "proc.ipc.send", map[string]any{"pid": bobs, "sourcePid": a, "message": "hi"}, 404},
		{"cross-owner call", "proc.ipc.call", map[string]any{"pid": bobs, "sourcePid": a, "message": "hi"}, 404},
		{"no source", "proc.ipc.send", map[string]any{"pid": a, "message": "hi"}, 403},
		{"another's source", "proc.ipc.send", map[string]any{"pid": a, "sourcePid": bobs, "message": "hi"}, 404},
		{"empty", "proc.ipc.send", map[string]any{"pid": a, "sourcePid": a, "message": "  "}, 400},
		{"bad metadata", "proc.ipc.send", map[string]any{"pid": a, "sourcePid": a, "message": "x", "metadata": []int{1}}, 400},
		{"short timeout", "proc.ipc.call", map[string]any{"pid": a, "sourcePid": a, "message": "x", "timeoutMs": 10}, 400},
		{"no target", "proc.ipc.call", map[string]any{"pid": "p_none", "sourcePid": a, "message": "x"}, 404},
		{"deliver is the kernel's", "proc.ipc.deliver", map[string]any{"pid": a, "sourcePid": a, "message": "x"}, 403},
		{"watch itself", "signal.watch", map[string]any{"signal": "proc.run.finished", "processId": a, "watcherPid": a}, 400},
		{"watch another's", "signal.watch", map[string]any{"signal": "proc.run.finished", "processId": bobs, "watcherPid": a}, 404},
		{"watch without process", "signal.watch", map[string]any{"signal": "proc.run.finished", "watcherPid": a}, 400},
	} {
		if got := h.code(h.alice, c.call, c.args); got != c.code {
			t.Errorf("%s: code %d, want %d", c.name, got, c.code)
		}
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_ipc_calls`); n != 0 {
		t.Errorf("%d calls recorded by refused calls", n)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=?`, a); n != 0 {
		t.Errorf("%d messages delivered by refused calls", n)
	}
}

// A call whose target does not answer in time: the source gets
// ipc.timeout, and the answer that comes later is dropped.
func TestIPCTimeout(t *testing.T) {
	h := newPTHarness(t)
	a, b := h.spawn(h.alice, "a"), h.spawn(h.alice, "b")
	slow := h.scriptOf(1000, `{"text":"too late","delayMs":600000}
{"text":"ok"}`) // until Release
	var call abi.IpcCallResult
	h.must(h.alice, "proc.ipc.call", map[string]any{"pid": b, "sourcePid": a, "message": "slow work", "timeoutMs": 1000}, &call)
	if s := h.waitCall(call.CallID); s != "timed_out" {
		t.Fatalf("call state %s, want timed_out", s)
	}
	slow.Release()
	h.waitRun(call.RunID)
	h.waitIdle(a)
	if ev := h.findEvent(a, abi.EventIpcTimeout); ev == nil || !strings.Contains(ptText(t, *ev), call.CallID) {
		t.Fatalf("no ipc.timeout in %s", a)
	}
	time.Sleep(100 * time.Millisecond)
	if ev := h.findEvent(a, abi.EventIpcReply); ev != nil || h.callState(call.CallID) != "timed_out" {
		t.Fatalf("a reply after the timeout: %+v, state %s", ev, h.callState(call.CallID))
	}
}

// A reply to a source whose conversation was reset since is dropped; a
// busy target queues the call.
func TestIPCResetDropsAndBusyQueues(t *testing.T) {
	h := newPTHarness(t)
	a, b := h.spawn(h.alice, "a"), h.spawn(h.alice, "b")
	h.scriptOf(1000, `{"text":"first, slowly","delayMs":1200}
{"text":"second"}`)
	first := h.send(h.alice, b, "", "keep busy")
	var call abi.IpcCallResult
	h.must(h.alice, "proc.ipc.call", map[string]any{"pid": b, "sourcePid": a, "message": "answer later", "timeoutMs": 30000}, &call)
	if !call.Queued {
		t.Fatalf("a call to a busy process: %+v, want queued", call)
	}
	h.must(h.alice, "proc.reset", map[string]any{"pid": a}, nil)
	h.waitRun(first.RunID)
	if s := h.waitCall(call.CallID); s != "dropped" {
		t.Fatalf("call state %s, want dropped", s)
	}
	h.waitIdle(a)
	if ev := h.findEvent(a, abi.EventIpcReply); ev != nil {
		t.Fatalf("a reply reached the reset conversation: %+v", ev)
	}
}

// delegate spawns a worker (child of the source, labelled), gives it the
// task and brings its answer back.
func TestIPCDelegate(t *testing.T) {
	h := newPTHarness(t)
	a := h.spawn(h.alice, "manager")
	h.scriptOf(1000, `{"text":"the flaky test is TestFoo","expectUser":"find the flaky test"}
{"text":"thanks"}`)
	var d abi.IpcDelegateResult
	h.must(h.alice, "proc.ipc.delegate", map[string]any{"sourcePid": a, "task": "find the flaky test", "label": "flaky-hunter"}, &d)
	if !d.Spawned || d.WorkerPid == "" || d.CallID == "" {
		t.Fatalf("proc.ipc.delegate = %+v", d)
	}
	var st abi.StatusResult
	h.must(h.alice, "proc.status", map[string]any{"pid": d.WorkerPid}, &st)
	if st.Status.Label != "flaky-hunter" || st.Status.Parent != a {
		t.Fatalf("the worker: %+v", st.Status)
	}
	if s := h.waitCall(d.CallID); s != "replied" {
		t.Fatalf("call state %s", s)
	}
	h.waitIdle(a)
	if ev := h.findEvent(a, abi.EventIpcReply); ev == nil || !strings.Contains(ptText(t, *ev), "TestFoo") {
		t.Fatalf("no answer from the worker in %s: %+v", a, ev)
	}
	task := h.findEvent(d.WorkerPid, abi.EventProcessCall)
	if task == nil || !strings.Contains(ptText(t, *task), "delegated by process "+a) {
		t.Fatalf("the task message: %+v", task)
	}
}

// A once-watch delivers the first matching signal to the watcher as a
// signal event, then is gone.
func TestSignalWatchOnce(t *testing.T) {
	h := newPTHarness(t)
	a, b := h.spawn(h.alice, "watcher"), h.spawn(h.alice, "watched")
	var w abi.WatchResult
	h.must(h.alice, "signal.watch", map[string]any{"signal": "proc.run.finished", "processId": b, "watcherPid": a, "state": map[string]any{"why": "test"}}, &w)
	if !w.Created || w.WatchID == "" || w.ExpiresAt == nil || *w.ExpiresAt-w.CreatedAt != 24*3600*1000 {
		t.Fatalf("signal.watch = %+v", w)
	}
	r := h.send(h.alice, b, "", "work")
	h.waitRun(r.RunID)
	eventually(t, func() bool { return h.findEvent(a, abi.EventSignal) != nil }, func() string { return "no signal event in " + a })
	ev := h.findEvent(a, abi.EventSignal)
	if text := ptText(t, *ev); !strings.Contains(text, "proc.run.finished") || !strings.Contains(text, b) || !strings.Contains(text, `"why":"test"`) {
		t.Fatalf("the signal event: %s", text)
	}
	eventually(t, func() bool { return h.sqlCount(`SELECT count(*) FROM proc_watches WHERE watch_id=?`, w.WatchID) == 0 },
		func() string { return "the once-watch is still there after its delivery" })
	h.waitIdle(a)
	r = h.send(h.alice, b, "", "more work")
	h.waitRun(r.RunID)
	time.Sleep(200 * time.Millisecond)
	n := 0
	for _, m := range h.messages(a) {
		if m.Kind == abi.EventSignal {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d signal events after a once-watch, want 1", n)
	}
	// TTL clamps: 1 ms is 1 s, a year is 30 days.
	for _, c := range []struct{ ttl, want int64 }{{1, 1000}, {365 * 24 * 3600 * 1000, 30 * 24 * 3600 * 1000}} {
		h.must(h.alice, "signal.watch", map[string]any{"signal": "x", "processId": b, "watcherPid": a, "ttlMs": c.ttl}, &w)
		if *w.ExpiresAt-w.CreatedAt != c.want {
			t.Errorf("ttlMs %d: expires after %d ms, want %d", c.ttl, *w.ExpiresAt-w.CreatedAt, c.want)
		}
	}
	var un abi.UnwatchResult
	h.must(h.alice, "signal.unwatch", map[string]any{"watchId": w.WatchID, "watcherPid": a}, &un)
	if un.Removed != 1 {
		t.Fatalf("signal.unwatch = %+v", un)
	}
}

// An agent calls another process with its Call tool: the source is the
// calling process itself, and the answer comes back to it as ipc.reply.
func TestIPCAgentCallTool(t *testing.T) {
	h := newPTHarness(t)
	a, b := h.spawn(h.alice, "manager"), h.spawn(h.alice, "worker")
	// After the tool call, a's continuation and b's run ask the model at
	// once, in either order: both turns answer the same.
	h.scriptOf(1000, `{"tools":[{"name":"Call","args":{"pid":"`+b+`","message":"what is six times seven?"}}]}
{"text":"forty-two"}
{"text":"forty-two"}
{"text":"the worker says forty-two"}`)
	r := h.send(h.alice, a, "", "ask the worker")
	h.waitRun(r.RunID)
	var list abi.IpcListResult
	h.must(h.alice, "proc.ipc.list", map[string]any{"pid": a}, &list)
	if len(list.Calls) != 1 || list.Calls[0].SourcePid != a || list.Calls[0].TargetPid != b {
		t.Fatalf("the agent's call: %+v", list)
	}
	if s := h.waitCall(list.Calls[0].CallID); s != "replied" {
		t.Fatalf("call state %s", s)
	}
	h.waitIdle(a)
	ev := h.findEvent(a, abi.EventIpcReply)
	if ev == nil || !strings.Contains(ptText(t, *ev), "forty-two") {
		t.Fatalf("no reply in the agent's conversation: %+v", ev)
	}
	in := h.findEvent(b, abi.EventProcessCall)
	if in == nil || in.Source == nil || in.Source.Pid != a {
		t.Fatalf("the call as b saw it: %+v", in)
	}
}
