package proc

// Tests of the process manager on an in-process kernel, with scripted
// model providers replaying proc/testdata/*.jsonl. They assert stored
// state: proc.history results, the proc_* rows and the archive files.

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// Tests of runs: sending, tools, approvals, abort and the FIFO queue.

func TestSendRunReply(t *testing.T) {
	h := newPTHarness(t)
	s := h.setScript(1000, "hello.jsonl")
	pid := init0(1000)
	sub := h.k.Subscribe(h.alice, func(ev *kernel.Event) bool {
		return ev.Pid == pid
	})
	defer sub.Close()

	r := h.send(h.alice, "", "", "hi there")
	if r.Queued || r.Status != "started" {
		t.Fatalf("send: %+v", r)
	}
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run status %s", st)
	}
	hist := h.history(h.alice, pid, "default")
	if got := ptRoles(hist.Messages); got != "user,assistant" {
		t.Fatalf("roles %s", got)
	}
	if got := ptText(t, hist.Messages[0]); got != "hi there" {
		t.Fatalf("user message %q", got)
	}
	const reply = "Hello from the scripted model, alice."
	if a := ptAssistant(t, hist.Messages[1]); a.Text != reply || len(a.ToolCalls) != 0 {
		t.Fatalf("reply %+v", a)
	}
	if hist.PendingHil != nil {
		t.Fatalf("pending HIL %+v", hist.PendingHil)
	}

	evs := ptEvents(t, sub, func(e ptEvent) bool { return e.Signal == "proc.run.finished" && e.Payload["runId"] == r.RunID })
	var order []string
	var streamed, chat strings.Builder
	for _, e := range evs {
		if e.Payload["runId"] != r.RunID {
			continue
		}
		if e.Signal == "chat.delta" { // the chat notification of each stream piece
			chat.WriteString(e.Payload["text"].(string))
			continue
		}
		if len(order) == 0 || order[len(order)-1] != e.Signal {
			order = append(order, e.Signal)
		}
		if e.Signal == "proc.run.stream" {
			streamed.WriteString(e.Payload["text"].(string))
		}
	}
	if want := []string{"proc.run.started", "proc.run.stream", "proc.run.usage", "proc.run.output", "proc.run.finished"}; !slices.Equal(order, want) {
		t.Fatalf("event order %v, want %v", order, want)
	}
	if streamed.String() != reply || chat.String() != reply {
		t.Fatalf("streamed %q, chat.delta %q", streamed.String(), chat.String())
	}
	if fin := evs[len(evs)-1]; fin.Payload["status"] != "done" || fin.Payload["conversationId"] != "default" {
		t.Fatalf("finished %+v", fin.Payload)
	}

	// What the model was asked.
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !strings.Contains(reqs[0].System, "pid "+pid) || !strings.Contains(reqs[0].System, "user alice") {
		t.Fatalf("system prompt %q", reqs[0].System)
	}
	if len(reqs[0].Tools) != len(tools) {
		t.Fatalf("%d tools offered", len(reqs[0].Tools))
	}
	h.waitIdle(pid)
	var state string
	h.k.Store.QueryRowContext(context.Background(), `SELECT state FROM proc_processes WHERE pid=?`, pid).Scan(&state)
	if state != "idle" {
		t.Fatalf("process state %q after the run", state)
	}
	if st, _ := h.readFile(h.alice, "/proc/"+pid+"/status"); !strings.Contains(st, "state: idle") || !strings.Contains(st, "user: alice") {
		t.Fatalf("status view:\n%s", st)
	}
}

// 2. Tools are syscalls made as the process owner.
func TestTools(t *testing.T) {
	h := newPTHarness(t)
	h.must(h.alice, "fs.write", map[string]any{"path": "~/notes.txt", "content": "buy milk\nand bread\n"}, nil)
	h.must(h.bob, "fs.write", map[string]any{"path": "~/secret.txt", "content": "bob's secret\n"}, nil)
	if err := os.Chmod(h.realPath("/home/bob/secret.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		script, prompt string
		tool           string
		isError        bool
		output         []string // the tool result contains each
		notOutput      string
		reply          string
		check          func(t *testing.T)
	}{
		{script: "tool_read.jsonl", prompt: "What is in my notes.txt?", tool: "Read",
			output: []string{"buy milk", "and bread"}, reply: "Your notes say to buy milk."},
		{script: "tool_write.jsonl", prompt: "write the report", tool: "Write",
			output: []string{`"ok":true`, "/home/alice/out/report.md"}, reply: "Written to ~/out/report.md.",
			check: func(t *testing.T) {
				var r struct {
					Content string `json:"content"`
				}
				h.must(h.alice, "fs.read", map[string]any{"path": "~/out/report.md"}, &r)
				if !strings.Contains(r.Content, "# Report") || !strings.Contains(r.Content, "all good") {
					t.Fatalf("written file: %q", r.Content)
				}
			}},
		{script: "tool_denied.jsonl", prompt: "read bob's secret", tool: "Read", isError: true,
			output: []string{"ermission denied"}, notOutput: "bob's secret", reply: "I may not read that file."},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			s := h.setScript(1000, tt.script)
			pid := h.spawn(h.alice, tt.script)
			r := h.send(h.alice, pid, "", tt.prompt)
			if st := h.waitRun(r.RunID); st != "done" {
				t.Fatalf("run %s", st)
			}
			ms := h.history(h.alice, pid, "default").Messages
			if got := ptRoles(ms); got != "user,assistant,toolResult,assistant" {
				t.Fatalf("roles %s: %s", got, ptDump(ms))
			}
			call := ptAssistant(t, ms[1]).ToolCalls
			if len(call) != 1 || call[0].Name != tt.tool {
				t.Fatalf("tool calls %+v", call)
			}
			res := ptTool(t, ms[2])
			if res.ToolCallID != call[0].ID || res.ToolName != tt.tool || res.IsError != tt.isError {
				t.Fatalf("tool result %+v for call %+v", res, call[0])
			}
			for _, o := range tt.output {
				if !strings.Contains(res.Output, o) {
					t.Fatalf("tool output %q lacks %q", res.Output, o)
				}
			}
			if tt.notOutput != "" && strings.Contains(res.Output, tt.notOutput) {
				t.Fatalf("tool output %q leaks %q", res.Output, tt.notOutput)
			}
			if a := ptAssistant(t, ms[3]); a.Text != tt.reply {
				t.Fatalf("final reply %q", a.Text)
			}
			// The model saw the tool result in its second request.
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests", len(reqs))
			}
			last := reqs[1].Messages[len(reqs[1].Messages)-1]
			if last.Role != model.Tool || last.ToolCallID != call[0].ID || last.Content != res.Output || last.IsError != tt.isError {
				t.Fatalf("model saw %+v", last)
			}
			if tt.check != nil {
				tt.check(t)
			}
		})
	}
}

// 3. Human in the loop: approve, deny, remember, stale answers.
func TestHil(t *testing.T) {
	h := newPTHarness(t)
	h.setScript(0, "hil.jsonl")
	pid := h.spawn(h.root, "hil")
	sub := h.k.Subscribe(h.root, func(ev *kernel.Event) bool {
		return ev.Pid == pid && ev.Signal == "proc.run.hil.requested"
	})
	defer sub.Close()

	// waitHil sends text and waits until its run asks a human.
	waitHil := func(text string) (string, *abi.HilRequest) {
		t.Helper()
		r := h.send(h.root, pid, "", text)
		h.waitRun(r.RunID, "waiting_hil")
		hist := h.history(h.root, pid, "default")
		if hist.PendingHil == nil {
			t.Fatal("no pending HIL request in proc.history")
		}
		if hist.PendingHil.RunID != r.RunID || hist.PendingHil.ToolName != "Shell" || hist.PendingHil.Syscall != "shell.exec" {
			t.Fatalf("pending HIL %+v", hist.PendingHil)
		}
		return r.RunID, hist.PendingHil
	}
	lastResult := func() toolResultContent {
		t.Helper()
		ms := h.history(h.root, pid, "default").Messages
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Role == "toolResult" {
				return ptTool(t, ms[i])
			}
		}
		t.Fatal("no tool result")
		return toolResultContent{}
	}

	// Approve.
	run, req := waitHil("run it")
	var args map[string]any
	json.Unmarshal(req.Args, &args)
	if args["input"] != "echo approved-$((40+2))" {
		t.Fatalf("HIL args %s", req.Args)
	}
	ev := ptEvents(t, sub, func(ptEvent) bool { return true })[0]
	if rq, _ := ev.Payload["request"].(map[string]any); rq["requestId"] != req.RequestID {
		t.Fatalf("hil.requested event %+v", ev.Payload)
	}
	// The hil view and the status view show the wait.
	view, err := h.readFile(h.root, "/proc/"+pid+"/hil")
	if err != nil {
		t.Fatal(err)
	}
	var viewed abi.HilRequest
	if err := json.Unmarshal([]byte(view), &viewed); err != nil || viewed.RequestID != req.RequestID || viewed.CallID != req.CallID {
		t.Fatalf("hil view %q (%v)", view, err)
	}
	if st, _ := h.readFile(h.root, "/proc/"+pid+"/status"); !strings.Contains(st, "state: waiting") || !strings.Contains(st, "run: "+run) {
		t.Fatalf("status while waiting:\n%s", st)
	}
	// Answers that are not to a pending request.
	if c := h.code(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": "hil_0000000000000000", "decision": "approve"}); c != 404 {
		t.Fatalf("unknown request id: code %d", c)
	}
	if c := h.code(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "maybe"}); c != 400 {
		t.Fatalf("bad decision: code %d", c)
	}
	var ans map[string]any
	h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}, &ans)
	if ans["resumed"] != true {
		t.Fatalf("approve: %+v", ans)
	}
	if st := h.waitRun(run); st != "done" {
		t.Fatalf("approved run: %s", st)
	}
	if res := lastResult(); res.IsError || !strings.Contains(res.Output, "approved-42") || !strings.Contains(res.Output, `"exitCode":0`) {
		t.Fatalf("approved result %+v", res)
	}
	if c := h.code(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}); c != 404 {
		t.Fatalf("answering an answered request: code %d", c)
	}
	if view, _ := h.readFile(h.root, "/proc/"+pid+"/hil"); view != "" {
		t.Fatalf("hil view after the answer: %q", view)
	}

	// Deny, through the process's ctl file; the run continues.
	run, req = waitHil("deny it")
	if err := h.writeFile(h.root, "/proc/"+pid+"/ctl", "hil deny "+req.RequestID+"\n"); err != nil {
		t.Fatal(err)
	}
	if st := h.waitRun(run); st != "done" {
		t.Fatalf("denied run: %s", st)
	}
	if res := lastResult(); !res.IsError || res.Output != "Tool execution denied by user" {
		t.Fatalf("denied result %+v", res)
	}
	ms := h.history(h.root, pid, "default").Messages
	if a := ptAssistant(t, ms[len(ms)-1]); a.Text != "Understood, I did not run it." {
		t.Fatalf("reply after the denial %+v", a)
	}
	if _, err := os.Stat(h.realPath("/home/root/denied.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the denied command ran: %v", err)
	}

	// Approve with remember: the run's second Shell call does not ask.
	run, req = waitHil("remember")
	h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve", "remember": true}, &ans)
	if ans["remembered"] != true {
		t.Fatalf("approve remember: %+v", ans)
	}
	if st := h.waitRun(run); st != "done" {
		t.Fatalf("remembered run: %s", st)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_hil WHERE run_id=?`, run); n != 1 {
		t.Fatalf("%d HIL requests for the remembered run, want 1", n)
	}
	ms = h.history(h.root, pid, "default").Messages
	var outs []string
	for _, m := range ms[len(ms)-5:] {
		if m.Role == "toolResult" {
			outs = append(outs, ptTool(t, m).Output)
		}
	}
	if len(outs) != 2 || !strings.Contains(outs[0], "first-call") || !strings.Contains(outs[1], "second-call") {
		t.Fatalf("remembered results %q", outs)
	}
	var allow string
	h.k.Store.QueryRowContext(context.Background(), `SELECT hil_allow FROM proc_processes WHERE pid=?`, pid).Scan(&allow)
	if allow != `["shell.exec"]` {
		t.Fatalf("hil_allow %s", allow)
	}
}

// 4. Abort with two pending tool calls and a queued message.
func TestAbortPendingToolCalls(t *testing.T) {
	h := newPTHarness(t)
	h.setScript(0, "abort.jsonl")
	pid := h.spawn(h.root, "abort")
	first := h.send(h.root, pid, "", "first")
	h.waitRun(first.RunID, "waiting_hil")
	req := h.history(h.root, pid, "").PendingHil
	second := h.send(h.root, pid, "", "second")
	if !second.Queued {
		t.Fatalf("second send while the run waits: %+v", second)
	}
	if st, _ := h.readFile(h.root, "/proc/"+pid+"/status"); !strings.Contains(st, "queued: 1") {
		t.Fatalf("status:\n%s", st)
	}
	var res struct {
		Aborted              bool   `json:"aborted"`
		RunID                string `json:"runId"`
		InterruptedToolCalls int    `json:"interruptedToolCalls"`
		ContinuedQueuedRunID string `json:"continuedQueuedRunId"`
	}
	h.must(h.root, "proc.abort", map[string]any{"pid": pid}, &res)
	if !res.Aborted || res.RunID != first.RunID || res.InterruptedToolCalls != 2 || res.ContinuedQueuedRunID != second.RunID {
		t.Fatalf("abort: %+v (first %s, second %s)", res, first.RunID, second.RunID)
	}
	if st := h.runStatus(first.RunID); st != "aborted" {
		t.Fatalf("aborted run status %q", st)
	}
	if st := h.waitRun(second.RunID); st != "done" {
		t.Fatalf("queued run: %s", st)
	}
	var hs string
	h.k.Store.QueryRowContext(context.Background(), `SELECT status FROM proc_hil WHERE request_id=?`, req.RequestID).Scan(&hs)
	if hs != "stale" {
		t.Fatalf("HIL request after abort: %q", hs)
	}
	if c := h.code(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}); c != 404 {
		t.Fatalf("approving a stale request: code %d", c)
	}
	ms := h.history(h.root, pid, "").Messages
	if got := ptRoles(ms); got != "user,assistant,toolResult,toolResult,user,assistant" {
		t.Fatalf("roles %s", got)
	}
	calls := ptAssistant(t, ms[1]).ToolCalls
	for i, m := range ms[2:4] {
		r := ptTool(t, m)
		if r.Output != "User interrupted tool execution" || !r.IsError || r.ToolCallID != calls[i].ID {
			t.Fatalf("result %d: %+v (calls %+v)", i, r, calls)
		}
	}
	if ptText(t, ms[4]) != "second" || ptAssistant(t, ms[5]).Text != "second reply" {
		t.Fatalf("continued: %s", ptDump(ms[4:]))
	}
	// Nothing to abort now.
	h.waitIdle(pid)
	var again map[string]any
	h.must(h.root, "proc.abort", map[string]any{"pid": pid}, &again)
	if again["aborted"] != false {
		t.Fatalf("second abort %+v", again)
	}
}

// 5. One run at a time per process, FIFO across its conversations.
func TestProcessSerialFIFO(t *testing.T) {
	h := newPTHarness(t)
	h.setScript(1000, "fifo.jsonl")
	pid := h.spawn(h.alice, "fifo")
	h.openConv(h.alice, pid, "B")
	a := h.send(h.alice, pid, "default", "to A")
	b := h.send(h.alice, pid, "B", "to B")
	a2 := h.send(h.alice, pid, "default", "A again")
	if a.Queued || !b.Queued || !a2.Queued {
		t.Fatalf("queued flags: %v %v %v", a.Queued, b.Queued, a2.Queued)
	}
	// B's message is queued, not yet in its conversation.
	if n := h.history(h.alice, pid, "B").MessageCount; n != 0 {
		t.Fatalf("B has %d messages while queued", n)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_queue WHERE pid=?`, pid); n != 2 {
		t.Fatalf("%d queued", n)
	}
	h.waitIdle(pid)
	type span struct{ start, end int64 }
	spans := map[string]span{}
	for _, r := range []string{a.RunID, b.RunID, a2.RunID} {
		var s span
		var status string
		h.k.Store.QueryRowContext(context.Background(), `SELECT started_at, finished_at, status FROM proc_runs WHERE run_id=?`, r).Scan(&s.start, &s.end, &status)
		if status != "done" {
			t.Fatalf("run %s: %s", r, status)
		}
		spans[r] = s
	}
	if !(spans[a.RunID].end <= spans[b.RunID].start && spans[b.RunID].end <= spans[a2.RunID].start) {
		t.Fatalf("runs overlap or out of order: %+v", spans)
	}
	var texts []string
	for _, m := range h.history(h.alice, pid, "default").Messages {
		if m.Role == "user" {
			texts = append(texts, ptText(t, m))
		} else {
			texts = append(texts, ptAssistant(t, m).Text)
		}
	}
	if want := []string{"to A", "A done", "A again", "A2 done"}; !slices.Equal(texts, want) {
		t.Fatalf("default: %q", texts)
	}
	bm := h.history(h.alice, pid, "B").Messages
	if len(bm) != 2 || ptText(t, bm[0]) != "to B" || ptAssistant(t, bm[1]).Text != "B done" {
		t.Fatalf("B: %s", ptDump(bm))
	}
}

// TestApprovalPolicy: which tool calls ask a human, named as they are
// remembered.
func TestApprovalPolicy(t *testing.T) {
	for _, tc := range []struct {
		syscall, args, want string
	}{
		{"shell.exec", `{"input":"ls"}`, "shell.exec"},
		{"fs.read", `{"path":"/sys/call"}`, ""},
		{"fs.delete", `{"path":"~/x"}`, "fs.delete"},
		{"fs.delete", `{"path":"/proc/p_1"}`, "fs.delete /proc/p_1"},
		{"fs.write", `{"path":"~/notes.md"}`, ""},
		{"fs.write", `{"path":"notes.md"}`, ""},
		{"fs.write", `{"path":"/workspaces/w/a"}`, ""},
		{"fs.write", `{"path":"/sys/call"}`, "fs.write /sys/call"},
		{"fs.write", `{"path":"../../sys/call"}`, "fs.write /sys/call"},
		{"fs.write", `{"path":"/home/../proc/p_1/ctl"}`, "fs.write /proc/p_1/ctl"},
		{"fs.edit", `{"path":"/sys/config/ctl"}`, "fs.edit /sys/config/ctl"},
		{"fs.write", `{"path":"/homework"}`, "fs.write /homework"},
		{"fs.write", `not json`, ""},
		{"fs.write", `{}`, ""},
		{"fs.delete", `{}`, "fs.delete"},
		{"fs.search", `{"query":"x","path":"/sys"}`, ""},
	} {
		if got := approval(tc.syscall, json.RawMessage(tc.args), "/home/alice", "/home/alice"); got != tc.want {
			t.Errorf("approval(%s, %s) = %q, want %q", tc.syscall, tc.args, got, tc.want)
		}
	}
}

// TestNamespaceWriteAsks: an agent's Write to a call or ctl file of the
// namespace runs syscalls as the owner, so it asks a human first, as the
// calls it could make would: a frame written to /sys/call must not
// delete a file nobody approved deleting.
func TestNamespaceWriteAsks(t *testing.T) {
	h := newPTHarness(t)
	if err := h.call(h.alice, "fs.write", map[string]any{"path": "/home/alice/precious.txt", "content": "keep"}, nil); err != nil {
		t.Fatal(err)
	}
	h.setScript(h.alice.Uid, "nswrite.jsonl")
	pid := h.spawn(h.alice, "nswrite")
	r := h.send(h.alice, pid, "", "clean up")
	h.waitRun(r.RunID, "waiting_hil")
	hist := h.history(h.alice, pid, "default")
	if hist.PendingHil == nil || hist.PendingHil.ToolName != "Write" || hist.PendingHil.Syscall != "fs.write /sys/call" {
		t.Fatalf("pending HIL %+v", hist.PendingHil)
	}
	var read abi.FSReadResult
	if err := h.call(h.alice, "fs.read", map[string]any{"path": "/home/alice/precious.txt"}, &read); err != nil || !read.OK {
		t.Fatalf("the file is gone before anyone approved: %+v, %v", read, err)
	}
}

// TestShellOutrunsWaitBudget: a Shell command that outruns shell.exec's
// wait budget answers the model with its end and its whole output (the
// model has no tool to poll a shell session).
func TestShellOutrunsWaitBudget(t *testing.T) {
	h := newPTHarness(t)
	h.setScriptText(0, `{"tools":[{"name":"Shell","args":{"command":"echo early; sleep 1; echo late"}}],"expectUser":"go"}
{"text":"ok"}
`)
	pid := h.spawn(h.root, "slowshell")
	r := h.send(h.root, pid, "", "go")
	h.waitRun(r.RunID, "waiting_hil")
	req := h.history(h.root, pid, "").PendingHil
	if req == nil {
		t.Fatal("no pending HIL request")
	}
	h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}, nil)
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run: %s", st)
	}
	ms := h.history(h.root, pid, "").Messages
	var got toolResultContent
	for _, m := range ms {
		if m.Role == "toolResult" {
			got = ptTool(t, m)
		}
	}
	var res abi.ShellExecResult
	if err := json.Unmarshal([]byte(got.Output), &res); err != nil {
		t.Fatalf("tool result %q: %v", got.Output, err)
	}
	if got.IsError || res.Status != "completed" || res.Output != "early\nlate\n" {
		t.Fatalf("tool result %+v: %+v", got, res)
	}
}
