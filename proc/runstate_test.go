package proc

// Tests of the run state machine where an abort, a reset, a HIL answer
// and a send's commit meet.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// holdStore makes the store's committer wait (in a transaction of its
// own) until the returned release is called: the transactions made
// meanwhile wait in its queue, in order.
func (h *ptHarness) holdStore() (release func()) {
	h.t.Helper()
	entered, free := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- h.k.Store.Tx(context.Background(), func(tx *kernel.Tx) error {
			close(entered)
			<-free
			return nil
		})
	}()
	<-entered
	return func() {
		close(free)
		if err := <-errc; err != nil {
			h.t.Errorf("the holding transaction: %v", err)
		}
	}
}

// waitTxQueued waits until a goroutine whose stack contains fn waits in
// Store.Tx for its transaction's answer (it is queued).
func waitTxQueued(t *testing.T, fn string) {
	t.Helper()
	deadline := time.Now().Add(ptWait)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[chan receive") && strings.Contains(g, "kernel.(*Store).Tx(") && strings.Contains(g, fn) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine of %s waits in Store.Tx after %v", fn, ptWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// setScriptText makes the script text the model of uid.
func (h *ptHarness) setScriptText(uid uint32, text string) {
	h.t.Helper()
	s, err := model.ParseScript([]byte(text))
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.provs[uid] = s
	h.mu.Unlock()
}

// An abort whose ctx has ended (a 9P flush, a run aborting itself) still
// records the run's end: the process is free for the next message.
func TestAbortEndedCtx(t *testing.T) {
	h := newPTHarness(t)
	h.setScript(0, "abort.jsonl")
	pid := h.spawn(h.root, "abortctx")
	first := h.send(h.root, pid, "", "first")
	h.waitRun(first.RunID, "waiting_hil")
	p, err := h.m.get(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := h.m.run.Abort(ctx, p)
	if err != nil {
		t.Fatalf("abort with an ended ctx: %v", err)
	}
	if !res.Aborted || res.RunID != first.RunID || res.InterruptedToolCalls == nil || *res.InterruptedToolCalls != 2 {
		t.Fatalf("abort: %+v", res)
	}
	if st := h.runStatus(first.RunID); st != "aborted" {
		t.Fatalf("aborted run: %s", st)
	}
	second := h.send(h.root, pid, "", "second")
	if second.Queued {
		t.Fatal("the process is stuck: the next message queued")
	}
	if st := h.waitRun(second.RunID); st != "done" {
		t.Fatalf("next run: %s", st)
	}
}

// A run that aborts or resets its own process (its Write tool writes to
// /proc/<pid>/ctl) ends at once, recorded aborted, and the process takes
// the next message.
func TestRunStopsItself(t *testing.T) {
	// A run that waited for itself would wait abortWait: 10 min here, past
	// the ptWait bound below.
	defer func(w time.Duration) { abortWait = w }(abortWait)
	abortWait = 10 * time.Minute
	for _, verb := range []string{"abort", "reset"} {
		t.Run(verb, func(t *testing.T) {
			h := newPTHarness(t)
			pid := h.spawn(h.root, "self")
			h.setScriptText(0, `{"tools":[{"name":"Write","args":{"path":"/proc/`+pid+`/ctl","content":"`+verb+`\n"}}],"expectUser":"stop"}
{"text":"after","expectUser":"again"}
`)
			r := h.send(h.root, pid, "", "stop")
			// A write to a ctl file asks first; the approved write stops
			// the run that made it.
			h.waitRun(r.RunID, "waiting_hil")
			req := h.history(h.root, pid, "").PendingHil
			if req == nil || req.Syscall != "fs.write /proc/"+pid+"/ctl" {
				t.Fatalf("pending HIL %+v", req)
			}
			start := time.Now()
			if err := h.call(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}, nil); err != nil {
				t.Fatal(err)
			}
			if st := h.waitRun(r.RunID); st != "aborted" {
				t.Fatalf("run: %s", st)
			}
			h.waitIdle(pid)
			if d := time.Since(start); d > ptWait {
				t.Fatalf("the run took %v to stop itself", d)
			}
			n := h.history(h.root, pid, "").MessageCount
			if verb == "reset" && n != 0 {
				t.Fatalf("%d messages after the reset", n)
			}
			next := h.send(h.root, pid, "", "again")
			if next.Queued {
				t.Fatal("the process is stuck: the next message queued")
			}
			if st := h.waitRun(next.RunID); st != "done" {
				t.Fatalf("next run: %s", st)
			}
		})
	}
}

// rollBackTheBatch queues a transaction that rolls back the whole batch
// it is in. (A function of its own, so that waitTxQueued tells it from
// the test's other goroutines.)
func rollBackTheBatch(ctx context.Context, h *ptHarness) error {
	return h.k.Store.Tx(ctx, func(tx *kernel.Tx) error {
		_, err := tx.Exec(`ROLLBACK`)
		return err
	})
}

// A send whose transaction the store does not commit starts no run.
func TestSendCommitFails(t *testing.T) {
	h := newPTHarness(t)
	h.setScript(0, "slow.jsonl")
	pid := h.spawn(h.root, "commitfail")
	ctx := context.Background()
	p, err := h.m.get(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	release := h.holdStore()
	sendc := make(chan error, 1)
	go func() {
		_, _, err := h.m.run.Send(ctx, p, "", "hello", false)
		sendc <- err
	}()
	waitTxQueued(t, "(*engine).Send(")
	// The next transaction, in the same batch, rolls the whole batch
	// back: Send's function ran, its changes are gone.
	rollc := make(chan error, 1)
	go func() { rollc <- rollBackTheBatch(ctx, h) }()
	waitTxQueued(t, "rollBackTheBatch(")
	release()
	if err := <-sendc; err == nil {
		t.Fatal("send: no error from a rolled back transaction")
	}
	<-rollc
	pr := h.m.run.proc(pid, 0)
	pr.mu.Lock()
	run, state := pr.run, pr.state
	pr.mu.Unlock()
	if run != nil || state != idle {
		t.Fatalf("after the failed send: run %+v, state %v", run, state)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_runs WHERE pid=?`, pid); n != 0 {
		t.Fatalf("%d runs stored", n)
	}
	if r := h.send(h.root, pid, "", "again"); r.Queued {
		t.Fatal("the next message queued")
	}
}

// An answer to a HIL request does not resume a run an abort is ending:
// the approved call never runs.
func TestHilAfterAbortStarted(t *testing.T) {
	h := newPTHarness(t)
	h.setScriptText(0, `{"tools":[{"name":"Shell","args":{"command":"echo ran > ran.txt"}}],"expectUser":"go"}
{"text":"ran"}
`)
	pid := h.spawn(h.root, "hilabort")
	r := h.send(h.root, pid, "", "go")
	h.waitRun(r.RunID, "waiting_hil")
	req := h.history(h.root, pid, "").PendingHil
	// An abort has marked the run (as it does before it records the
	// end).
	pr := h.m.run.proc(pid, 0)
	pr.mu.Lock()
	pr.run.stop = stopAbort
	pr.mu.Unlock()
	var ans map[string]any
	h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}, &ans)
	if ans["resumed"] != false {
		t.Fatalf("the answer resumed an aborted run: %+v", ans)
	}
	var res map[string]any
	h.must(h.root, "proc.abort", map[string]any{"pid": pid}, &res)
	if res["aborted"] != true {
		t.Fatalf("abort: %+v", res)
	}
	h.waitIdle(pid)
	if st := h.runStatus(r.RunID); st != "aborted" {
		t.Fatalf("run: %s", st)
	}
	if _, err := os.Stat(h.realPath("/home/root/ran.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the approved call of the aborted run ran: %v", err)
	}
	ms := h.history(h.root, pid, "").Messages
	if got := ptRoles(ms); got != "user,assistant,toolResult" || ptTool(t, ms[2]).Output != "User interrupted tool execution" {
		t.Fatalf("history %s", ptDump(ms))
	}
}

// A reset that meets a send being recorded in its conversation waits for
// it, then aborts its run: the run ends with its finish signal, and the
// message is archived with the old generation.
func TestResetDuringSendCommit(t *testing.T) {
	h := newPTHarness(t)
	h.setScript(0, "slow.jsonl")
	pid := h.spawn(h.root, "resetsend")
	ctx := context.Background()
	p, err := h.m.get(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	sub := h.k.Subscribe(h.root, func(ev *kernel.Event) bool {
		return ev.Pid == pid && ev.Signal == "proc.run.finished"
	})
	defer sub.Close()
	release := h.holdStore()
	type sent struct {
		run string
		err error
	}
	sendc := make(chan sent, 1)
	go func() {
		run, _, err := h.m.run.Send(ctx, p, "", "hello", false)
		sendc <- sent{run, err}
	}()
	waitTxQueued(t, "(*engine).Send(")
	resetc := make(chan error, 1)
	go func() {
		resetc <- h.call(h.root, "proc.conversation.reset", map[string]any{"pid": pid, "conversationId": "default"}, nil)
	}()
	waitTxQueued(t, "(*engine).resetConvs(")
	release()
	s := <-sendc
	if s.err != nil {
		t.Fatal(s.err)
	}
	if err := <-resetc; err != nil {
		t.Fatal(err)
	}
	ev := ptEvents(t, sub, func(e ptEvent) bool { return e.Payload["runId"] == s.run })
	if last := ev[len(ev)-1]; last.Payload["status"] != "aborted" {
		t.Fatalf("finish signal %+v", last.Payload)
	}
	if st := h.runStatus(s.run); st != "aborted" {
		t.Fatalf("run: %s", st)
	}
	if n := h.history(h.root, pid, "").MessageCount; n != 0 {
		t.Fatalf("%d messages in the new generation", n)
	}
	h.waitIdle(pid)
}

// abortRun ends only the run it is given: a reset of one conversation
// never aborts the run of another that became current meanwhile.
func TestAbortRunOnlyItsRun(t *testing.T) {
	h := newPTHarness(t)
	h.setScript(0, "slow.jsonl")
	pid := h.spawn(h.root, "other")
	h.openConv(h.root, pid, "other")
	b := h.send(h.root, pid, "other", "slow")
	stale := &activeRun{id: "run_0000000000000000", cid: "default"}
	res, err := h.m.run.abortRun(context.Background(), h.m.run.proc(pid, 0), stale)
	if err != nil {
		t.Fatal(err)
	}
	if res.Aborted {
		t.Fatalf("abort of a run that is not current: %+v", res)
	}
	if st := h.runStatus(b.RunID); st != "running" {
		t.Fatalf("the other conversation's run: %s", st)
	}
}
