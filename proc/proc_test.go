package proc

// Tests of the process manager on an in-process kernel, with scripted
// model providers replaying proc/testdata/*.jsonl. They assert stored
// state: proc.history results, the proc_* rows and the archive files.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
	"gsvfs.dev/gsvfs/vfs"
)

// Tests of permissions, restarts, bad input and concurrency rules.

func TestPermissions(t *testing.T) {
	h := newPTHarness(t)
	bobPid := h.spawn(h.bob, "bob's")
	h.chat(h.bob, bobPid, "", "hello")
	alicePid := h.spawn(h.alice, "alice's")

	calls := []struct {
		name string
		args map[string]any
	}{
		{"proc.send", map[string]any{"pid": bobPid, "message": "hi"}},
		{"proc.history", map[string]any{"pid": bobPid}},
		{"proc.abort", map[string]any{"pid": bobPid}},
		{"proc.kill", map[string]any{"pid": bobPid}},
		{"proc.reset", map[string]any{"pid": bobPid}},
		{"proc.hil", map[string]any{"pid": bobPid, "requestId": "x", "decision": "approve"}},
		{"proc.conversation.open", map[string]any{"pid": bobPid, "conversationId": "x"}},
		{"proc.conversation.list", map[string]any{"pid": bobPid}},
		{"proc.conversation.compact", map[string]any{"pid": bobPid, "keepLast": 0, "summary": "s"}},
		{"proc.conversation.fork", map[string]any{"pid": bobPid, "throughMessageId": 1}},
		{"proc.history", map[string]any{"pid": "init:1001"}},
		{"proc.spawn", map[string]any{"profile": "task", "parentPid": bobPid}},
	}
	for _, c := range calls {
		if got := h.code(h.alice, c.name, c.args); got != 404 {
			t.Errorf("alice %s on bob's process: code %d, want 404", c.name, got)
		}
	}
	if n := h.history(h.bob, bobPid, "").MessageCount; n != 2 {
		t.Fatalf("bob's history changed: %d messages", n)
	}
	if got := h.code(h.alice, "proc.list", map[string]any{"uid": 1001}); got != 403 {
		t.Fatalf("alice lists bob's processes: code %d", got)
	}
	pids := func(id *kernel.Identity) []string {
		var r struct {
			Processes []abi.Process `json:"processes"`
		}
		h.must(id, "proc.list", map[string]any{}, &r)
		var out []string
		for _, p := range r.Processes {
			if id.Uid != 0 && p.Uid != id.Uid {
				t.Fatalf("%s sees %+v", id.Username, p)
			}
			out = append(out, p.Pid)
		}
		sort.Strings(out)
		return out
	}
	if got, want := pids(h.alice), []string{alicePid, "init:1000"}; !slices.Equal(got, sortedCopy(want)) {
		t.Fatalf("alice's list %v", got)
	}
	// Root sees every process, and init:<uid> exists for every user.
	all := pids(h.root)
	for _, want := range []string{"init:0", "init:1000", "init:1001", alicePid, bobPid} {
		if !slices.Contains(all, want) {
			t.Fatalf("root's list %v lacks %s", all, want)
		}
	}
	// Root may act on bob's process.
	h.setScript(1001, "")
	r := h.send(h.root, bobPid, "", "from root")
	h.waitRun(r.RunID)
	if n := h.history(h.root, bobPid, "").MessageCount; n != 4 {
		t.Fatalf("root's send: %d messages", n)
	}
	// The tree: alice neither sees nor reaches bob's process.
	ents, err := h.m.space.Root().Lookup(context.Background(), h.alice, "proc")
	if err != nil {
		t.Fatal(err)
	}
	list, err := ents.(vfs.Dir).ReadDir(context.Background(), h.alice)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.Name == bobPid || e.Name == "init:1001" {
			t.Fatalf("alice's /proc lists %s", e.Name)
		}
	}
	for _, p := range []string{"/proc/" + bobPid, "/proc/" + bobPid + "/status", "/proc/init:1001/hil"} {
		if _, err := h.node(h.alice, p); vfs.Errno(err) != 2 { // ENOENT
			t.Errorf("alice walks to %s: %v", p, err)
		}
	}
	if _, err := h.readFile(h.root, "/proc/"+bobPid+"/status"); err != nil {
		t.Fatalf("root reads bob's status: %v", err)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// 10. A restart resumes the interrupted run and the queue; a pending HIL
// request survives it.
func TestRestart(t *testing.T) {
	t.Run("run and queue", func(t *testing.T) {
		h := newPTHarness(t)
		s := h.setScript(1000, "slow.jsonl")
		pid := h.spawn(h.alice, "restart")
		first := h.send(h.alice, pid, "", "first")
		second := h.send(h.alice, pid, "", "second")
		third := h.send(h.alice, pid, "", "third")
		if !second.Queued || !third.Queued {
			t.Fatal("not queued")
		}
		for deadline := time.Now().Add(ptWait); len(s.Requests()) == 0; time.Sleep(15 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the model was not called")
			}
		}
		start := time.Now()
		h.close()
		if d := time.Since(start); d > ptWait { // the turn waits 10 min
			t.Fatalf("close took %v", d)
		}
		// The model of the restarted daemon; Register resumes at once.
		h.setScript(1000, "restart_after.jsonl")
		h.open()
		h.identities()
		h.waitIdle(pid)
		for _, r := range []string{first.RunID, second.RunID, third.RunID} {
			if st := h.runStatus(r); st != "done" {
				t.Fatalf("run %s: %s", r, st)
			}
		}
		var texts []string
		for _, m := range h.history(h.alice, pid, "").Messages {
			if m.Role == "user" {
				texts = append(texts, ptText(t, m))
			} else {
				texts = append(texts, m.Role+":"+ptAssistant(t, m).Text)
			}
		}
		if want := []string{"first", "assistant:resumed first", "second", "assistant:reply second", "third", "assistant:reply third"}; !slices.Equal(texts, want) {
			t.Fatalf("after the restart: %q", texts)
		}
	})

	t.Run("pending HIL", func(t *testing.T) {
		h := newPTHarness(t)
		h.setScript(0, "restart_hil.jsonl")
		pid := h.spawn(h.root, "restart-hil")
		r := h.send(h.root, pid, "", "shell please")
		h.waitRun(r.RunID, "waiting_hil")
		req := h.history(h.root, pid, "").PendingHil
		h.close()
		h.setScript(0, "restart_hil_after.jsonl")
		h.open()
		h.identities()
		hist := h.history(h.root, pid, "")
		if hist.PendingHil == nil || hist.PendingHil.RequestID != req.RequestID {
			t.Fatalf("pending HIL after the restart: %+v, want %+v", hist.PendingHil, req)
		}
		if st := h.runStatus(r.RunID); st != "waiting_hil" {
			t.Fatalf("run %s", st)
		}
		if st, _ := h.readFile(h.root, "/proc/"+pid+"/status"); !strings.Contains(st, "state: waiting") {
			t.Fatalf("status:\n%s", st)
		}
		var ans map[string]any
		h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}, &ans)
		if ans["resumed"] != true {
			t.Fatalf("approve after restart: %+v", ans)
		}
		// The new script's Shell call (numbered call_1 again) asks anew.
		h.waitRun(r.RunID, "waiting_hil")
		req2 := h.history(h.root, pid, "").PendingHil
		if req2 == nil || req2.RequestID == req.RequestID {
			t.Fatalf("second Shell call of the run did not ask: %+v", req2)
		}
		h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req2.RequestID, "decision": "approve"}, nil)
		if st := h.waitRun(r.RunID); st != "done" {
			t.Fatalf("run %s", st)
		}
		ms := h.history(h.root, pid, "").Messages
		if got := ptRoles(ms); got != "user,assistant,toolResult,assistant,toolResult,assistant" {
			t.Fatalf("roles %s: %s", got, ptDump(ms))
		}
		if o := ptTool(t, ms[2]).Output; !strings.Contains(o, "before-restart") {
			t.Fatalf("first result %q", o)
		}
		if o := ptTool(t, ms[4]).Output; !strings.Contains(o, "after-restart") {
			t.Fatalf("second result %q", o)
		}
	})
}

// 11. Bad input and failures.
func TestBadInput(t *testing.T) {
	h := newPTHarness(t)

	t.Run("closed conversation", func(t *testing.T) {
		pid := h.spawn(h.alice, "closed")
		h.openConv(h.alice, pid, "tmp")
		h.must(h.alice, "proc.conversation.close", map[string]any{"pid": pid, "conversationId": "tmp"}, nil)
		err := h.call(h.alice, "proc.send", map[string]any{"pid": pid, "conversationId": "tmp", "message": "hello?"}, nil)
		if abi.Code(err) != 409 || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("send to a closed conversation: %v", err)
		}
		if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=?`, pid); n != 0 {
			t.Fatalf("%d messages stored", n)
		}
		if n := h.sqlCount(`SELECT count(*) FROM proc_queue WHERE pid=?`, pid); n != 0 {
			t.Fatalf("%d messages queued", n)
		}
		// Closed but not deleted: listed with includeClosed, reopened by open.
		var l struct {
			Conversations []abi.Conversation `json:"conversations"`
		}
		h.must(h.alice, "proc.conversation.list", map[string]any{"pid": pid}, &l)
		if len(l.Conversations) != 1 {
			t.Fatalf("open conversations %+v", l.Conversations)
		}
		h.openConv(h.alice, pid, "tmp")
		h.chat(h.alice, pid, "tmp", "hello again")
		for _, c := range []struct {
			args map[string]any
			code int
		}{
			{map[string]any{"pid": pid, "message": "   "}, 400},
			{map[string]any{"pid": pid, "conversationId": "nope", "message": "x"}, 404},
			{map[string]any{"pid": "nope-0000", "message": "x"}, 404},
		} {
			if got := h.code(h.alice, "proc.send", c.args); got != c.code {
				t.Errorf("send %v: code %d, want %d", c.args, got, c.code)
			}
		}
		if got := h.code(h.alice, "proc.conversation.open", map[string]any{"pid": pid, "conversationId": "../x"}); got != 400 {
			t.Errorf("open ../x: code %d", got)
		}
	})

	failed := func(t *testing.T, pid, runID, errText string) {
		t.Helper()
		if st := h.waitRun(runID); st != "error" {
			t.Fatalf("run %s", st)
		}
		var stored string
		h.k.Store.QueryRowContext(context.Background(), `SELECT coalesce(error,'') FROM proc_runs WHERE run_id=?`, runID).Scan(&stored)
		if !strings.Contains(stored, errText) {
			t.Fatalf("stored run error %q, want %q", stored, errText)
		}
		ms := h.history(h.alice, pid, "").Messages
		if len(ms) < 2 || ms[len(ms)-2].Role != "user" || ms[len(ms)-1].Role != "system" {
			t.Fatalf("history %s", ptDump(ms))
		}
		if txt := ptText(t, ms[len(ms)-1]); !strings.HasPrefix(txt, "[Process Event]: model error: ") || !strings.Contains(txt, errText) {
			t.Fatalf("process event %q", txt)
		}
	}

	t.Run("model error", func(t *testing.T) {
		h.setScript(1000, "model_error.jsonl")
		pid := h.spawn(h.alice, "model-error")
		sub := h.k.Subscribe(h.alice, func(ev *kernel.Event) bool {
			return ev.Pid == pid && ev.Signal == "proc.run.finished"
		})
		defer sub.Close()
		r := h.send(h.alice, pid, "", "fail please")
		failed(t, pid, r.RunID, "provider overloaded (scripted)")
		fin := ptEvents(t, sub, func(ptEvent) bool { return true })[0]
		if fin.Payload["status"] != "error" || !strings.Contains(fmt.Sprint(fin.Payload["error"]), "provider overloaded") {
			t.Fatalf("finished event %+v", fin.Payload)
		}
		if ms := h.history(h.alice, pid, "").Messages; ptText(t, ms[0]) != "fail please" {
			t.Fatalf("the user's message was not kept: %s", ptDump(ms))
		}
		// The process goes on.
		h.chat(h.alice, pid, "", "again")
		ms := h.history(h.alice, pid, "").Messages
		if ptAssistant(t, ms[len(ms)-1]).Text != "recovered" {
			t.Fatalf("after the error: %s", ptDump(ms))
		}
	})

	t.Run("timeout", func(t *testing.T) {
		s := h.setScript(1000, "timeout.jsonl")
		s.Timeout = 100 * time.Millisecond
		pid := h.spawn(h.alice, "timeout")
		start := time.Now()
		r := h.send(h.alice, pid, "", "slow please")
		failed(t, pid, r.RunID, "no complete reply within 100ms")
		if d := time.Since(start); d > ptWait { // the turn waits 10 min
			t.Fatalf("the timeout took %v", d)
		}
	})

	t.Run("bad tool calls", func(t *testing.T) {
		h.setScript(1000, "bad_tools.jsonl")
		pid := h.spawn(h.alice, "bad-tools")
		h.chat(h.alice, pid, "", "bad tools")
		ms := h.history(h.alice, pid, "").Messages
		if got := ptRoles(ms); got != "user,assistant,toolResult,toolResult,assistant" {
			t.Fatalf("roles %s", got)
		}
		bad, unknown := ptTool(t, ms[2]), ptTool(t, ms[3])
		if !bad.IsError || bad.ToolName != "Read" || !strings.Contains(bad.Output, "bad args") {
			t.Fatalf("invalid arguments: %+v", bad)
		}
		if !unknown.IsError || unknown.ToolName != "Teleport" || !strings.Contains(unknown.Output, "unknown tool") {
			t.Fatalf("unknown tool: %+v", unknown)
		}
		if ptAssistant(t, ms[4]).Text != "Those tools failed." {
			t.Fatalf("final %s", ms[4].Content)
		}
	})

	t.Run("arguments that are not JSON", func(t *testing.T) {
		// A provider whose tool arguments are not JSON (the scripted one
		// cannot say that): they become {}.
		h.mu.Lock()
		h.provs[1000] = &rawArgsProvider{}
		h.mu.Unlock()
		pid := h.spawn(h.alice, "raw-args")
		h.chat(h.alice, pid, "", "raw")
		ms := h.history(h.alice, pid, "").Messages
		if got := ptRoles(ms); got != "user,assistant,toolResult,assistant" {
			t.Fatalf("roles %s", got)
		}
		if a := ptAssistant(t, ms[1]); string(a.ToolCalls[0].Args) != "{}" || a.ToolCalls[0].ID == "" {
			t.Fatalf("stored call %+v", a.ToolCalls)
		}
		if r := ptTool(t, ms[2]); !r.IsError {
			t.Fatalf("Write with no arguments: %+v", r)
		}
	})
}

// rawArgsProvider calls Write with arguments that are not JSON and no
// call id, then answers.
type rawArgsProvider struct{ n int }

func (p *rawArgsProvider) Name() string { return "raw" }
func (p *rawArgsProvider) Complete(ctx context.Context, req model.Request, delta func(string)) (model.Response, error) {
	p.n++
	if p.n == 1 {
		return model.Response{ToolCalls: []model.ToolCall{{Name: "Write", Args: json.RawMessage(`{"path":`)}}}, nil
	}
	return model.Response{Text: "ok"}, nil
}

// Reading every file of /proc (but the event streams) starts no model
// work and changes no run.
func TestReadsAreFree(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "reads")
	h.openConv(h.alice, pid, "other")
	h.chat(h.alice, pid, "other", "m1", "m2")
	h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": "other", "keepLast": 2, "summary": "s"}, nil)
	s := h.setScript(1000, "hil_delete.jsonl")
	r := h.send(h.alice, pid, "", "run it")
	h.waitRun(r.RunID, "waiting_hil")
	reqs := len(s.Requests())
	runs := h.sqlCount(`SELECT count(*) FROM proc_runs`)
	msgs := h.sqlCount(`SELECT count(*) FROM proc_messages`)

	var walk func(id *kernel.Identity, p string, d vfs.Dir) int
	walk = func(id *kernel.Identity, p string, d vfs.Dir) int {
		ents, err := d.ReadDir(context.Background(), id)
		if err != nil {
			t.Fatalf("readdir %s: %v", p, err)
		}
		n := 0
		for _, e := range ents {
			name := p + "/" + e.Name
			switch node := e.Node.(type) {
			case vfs.Dir:
				n += walk(id, name, node)
			case vfs.File:
				if e.Name == "events" {
					continue
				}
				if _, err := node.Attr(context.Background(), id); err != nil {
					t.Fatalf("stat %s: %v", name, err)
				}
				if _, err := ptRead(id, node); err == nil {
					n++
				}
			}
		}
		return n
	}
	procDir, _ := h.m.space.Root().Lookup(context.Background(), h.alice, "proc")
	read := walk(h.alice, "/proc", procDir.(vfs.Dir))
	read += walk(h.root, "/proc", procDir.(vfs.Dir))
	if read < 20 {
		t.Fatalf("read only %d files", read)
	}
	if len(s.Requests()) != reqs || h.sqlCount(`SELECT count(*) FROM proc_runs`) != runs || h.sqlCount(`SELECT count(*) FROM proc_messages`) != msgs {
		t.Fatalf("reading /proc changed things: requests %d→%d", reqs, len(s.Requests()))
	}
	if st := h.runStatus(r.RunID); st != "waiting_hil" {
		t.Fatalf("run %s", st)
	}
}

// shellLoopProvider asks for a Shell command when the last message is the
// user's, and answers when it is a tool result.
type shellLoopProvider struct{}

func (shellLoopProvider) Name() string { return "shell-loop" }
func (shellLoopProvider) Complete(ctx context.Context, req model.Request, delta func(string)) (model.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == model.Tool {
		return model.Response{Text: "ran it"}, nil
	}
	return model.Response{ToolCalls: []model.ToolCall{{ID: "call_1", Name: "Shell", Args: json.RawMessage(`{"command":"true"}`)}}}, nil
}

// An answer that arrives at once, before the run's goroutine has parked
// the run, still resumes it.
func TestHilImmediateAnswer(t *testing.T) {
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[0] = shellLoopProvider{}
	h.mu.Unlock()
	pid := h.spawn(h.root, "hil-race")
	sub := h.k.Subscribe(h.root, func(ev *kernel.Event) bool {
		return ev.Pid == pid && ev.Signal == "proc.run.hil.requested"
	})
	defer sub.Close()
	for i := 0; i < 12; i++ {
		r := h.send(h.root, pid, "", fmt.Sprintf("go %d", i))
		ev := ptEvents(t, sub, func(ptEvent) bool { return true })[0]
		id := ev.Payload["request"].(map[string]any)["requestId"].(string)
		h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": id, "decision": "approve"}, nil)
		if st := h.waitRun(r.RunID); st != "done" {
			t.Fatalf("iteration %d: run %s", i, st)
		}
	}
}

// shellCmdProvider asks for the Shell command cmd when the last message
// is the user's, and answers when it is a tool result.
type shellCmdProvider struct{ cmd string }

func (shellCmdProvider) Name() string { return "shell-cmd" }
func (p shellCmdProvider) Complete(ctx context.Context, req model.Request, delta func(string)) (model.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == model.Tool {
		return model.Response{Text: "ran it"}, nil
	}
	args, _ := json.Marshal(map[string]string{"command": p.cmd})
	return model.Response{ToolCalls: []model.ToolCall{{ID: "call_1", Name: "Shell", Args: args}}}, nil
}

// A non-root owner's agent, approved to run `cat /etc/shadow`, gets a
// failure: its commands run in a sandbox with the owner's grant.
func TestShellSandboxedForNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[1000] = shellCmdProvider{cmd: "cat /etc/shadow"}
	h.mu.Unlock()
	pid := h.spawn(h.alice, "shell")
	sub := h.k.Subscribe(h.alice, func(ev *kernel.Event) bool {
		return ev.Pid == pid && ev.Signal == "proc.run.hil.requested"
	})
	defer sub.Close()
	r := h.send(h.alice, pid, "", "go")
	ev := ptEvents(t, sub, func(ptEvent) bool { return true })[0]
	id := ev.Payload["request"].(map[string]any)["requestId"].(string)
	h.must(h.alice, "proc.hil", map[string]any{"pid": pid, "requestId": id, "decision": "approve"}, nil)
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	ms := h.history(h.alice, pid, "").Messages
	if got := ptRoles(ms); got != "user,assistant,toolResult,assistant" {
		t.Fatalf("roles %s: %s", got, ptDump(ms))
	}
	if res := ptTool(t, ms[2]); !strings.Contains(res.Output, `"status":"failed"`) || strings.Contains(res.Output, "root:") || !strings.Contains(res.Output, "Permission denied") {
		t.Fatalf("tool result %+v", res)
	}
}

// Resetting the conversation of the active run aborts the run, drops the
// conversation's queued messages without running them, and lets another
// conversation's queued message run.
func TestResetBusyConversation(t *testing.T) {
	h := newPTHarness(t)
	s := h.setScript(0, "reset_busy.jsonl")
	pid := h.spawn(h.root, "reset-busy")
	h.openConv(h.root, pid, "other")
	first := h.send(h.root, pid, "", "first")
	h.waitRun(first.RunID, "waiting_hil")
	dropped := h.send(h.root, pid, "", "queued for default")
	other := h.send(h.root, pid, "other", "for other")
	if !dropped.Queued || !other.Queued {
		t.Fatal("not queued")
	}
	var rr struct {
		Generation       int64  `json:"generation"`
		ArchivedMessages int    `json:"archivedMessages"`
		ArchivedTo       string `json:"archivedTo"`
	}
	h.must(h.root, "proc.conversation.reset", map[string]any{"pid": pid}, &rr)
	if st := h.waitRun(other.RunID); st != "done" {
		t.Fatalf("other's run: %s", st)
	}
	h.waitIdle(pid)
	if st := h.runStatus(first.RunID); st != "aborted" {
		t.Fatalf("the reset conversation's run: %s", st)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_runs WHERE run_id=?`, dropped.RunID); n != 0 {
		t.Fatalf("the dropped message started a run (status %s)", h.runStatus(dropped.RunID))
	}
	archived := ptGunzip(t, h.realPath(rr.ArchivedTo+"/default.gen-1.jsonl.gz"))
	if got := ptRoles(archived); got != "user,assistant,toolResult" || rr.ArchivedMessages != 3 {
		t.Fatalf("archived %s: %s", got, ptDump(archived))
	}
	if r := ptTool(t, archived[2]); r.Output != "User interrupted tool execution" {
		t.Fatalf("archived result %+v", r)
	}
	if n := len(s.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2 (the dropped message must not reach the model)", n)
	}
	if n := h.history(h.root, pid, "").MessageCount; n != 0 {
		t.Fatalf("default has %d messages after the reset", n)
	}
	om := h.history(h.root, pid, "other").Messages
	if len(om) != 2 || ptAssistant(t, om[1]).Text != "other reply" {
		t.Fatalf("other: %s", ptDump(om))
	}
}

// A compaction waiting on its generated summary blocks neither the
// process's status, nor sends, nor an abort; a message to the conversation
// being compacted waits in the queue until the compaction is done.
func TestCompactDoesNotBlockProcess(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "compact-slow")
	h.chat(h.alice, pid, "", "m1", "m2")
	h.openConv(h.alice, pid, "other")
	s := h.setScript(1000, "summary_slow.jsonl") // until Release
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- h.call(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "keepLast": 2, "generateSummary": true}, nil)
	}()
	eventually(t, func() bool { return len(s.Requests()) > 0 }, func() string { return "the summary was never asked for" })
	if _, err := h.readFile(h.alice, "/proc/"+pid+"/status"); err != nil {
		t.Fatal(err)
	}
	// A second compaction of the same conversation is refused.
	if c := h.code(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "keepLast": 1, "summary": "s"}); c != 409 {
		t.Fatalf("concurrent compaction: code %d", c)
	}
	// A message to the conversation being compacted queues; one to another
	// conversation queues behind it (FIFO).
	q := h.send(h.alice, pid, "", "during compaction")
	o := h.send(h.alice, pid, "other", "other during compaction")
	h.must(h.alice, "proc.abort", map[string]any{"pid": pid}, nil)
	select {
	case <-done:
		t.Fatalf("status, sends and abort waited for the compaction (%v)", time.Since(start))
	default:
	}
	if !q.Queued || !o.Queued {
		t.Fatalf("sends during the compaction: %+v %+v", q, o)
	}
	s.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.setScript(1000, "")
	h.waitIdle(pid)
	ms := h.history(h.alice, pid, "").Messages
	if got := ptRoles(ms); got != "system,user,assistant,user,assistant" || ptText(t, ms[3]) != "during compaction" {
		t.Fatalf("after the compaction: %s", ptDump(ms))
	}
	if !strings.Contains(ptText(t, ms[0]), "slow summary") {
		t.Fatalf("summary %q", ptText(t, ms[0]))
	}
	if n := h.history(h.alice, pid, "other").MessageCount; n != 2 {
		t.Fatalf("other has %d messages", n)
	}
}

// The context policy: auto-compact compacts in the run's preflight; fail
// refuses the run; manual (the default) does neither.
func TestPolicy(t *testing.T) {
	h := newPTHarness(t)
	// A window the compacted tail (the summary, two short messages) fits.
	h.must(h.root, "sys.config.set", map[string]any{"key": "config/ai/context_window", "value": "80"}, nil)
	pid := h.spawn(h.alice, "policy")
	for _, cid := range []string{"auto", "fail", "manual"} {
		h.openConv(h.alice, pid, cid)
	}
	if err := h.writeFile(h.alice, "/proc/"+pid+"/conversations/auto/ctl", "policy overflow=auto-compact pressure=0.3 keep=2\n"); err != nil {
		t.Fatal(err)
	}
	h.must(h.alice, "proc.conversation.policy.set", map[string]any{"pid": pid, "conversationId": "fail", "overflow": "fail", "compactAtPressure": 0.3}, nil)
	view, err := h.readFile(h.alice, "/proc/"+pid+"/conversations/auto/policy")
	var pol abi.Policy
	if err != nil || json.Unmarshal([]byte(view), &pol) != nil || pol != (abi.Policy{Overflow: "auto-compact", CompactAtPressure: 0.3, KeepLast: 2}) {
		t.Fatalf("policy view %q (%v)", view, err)
	}
	for _, bad := range []map[string]any{{"overflow": "sometimes"}, {"compactAtPressure": 1.5}, {"keepLast": -1}} {
		bad["pid"] = pid
		if c := h.code(h.alice, "proc.conversation.policy.set", bad); c != 400 {
			t.Errorf("policy %v: code %d", bad, c)
		}
	}

	texts := []string{"m1", "m2", "m3", "m4", "m5"}
	h.chat(h.alice, pid, "auto", texts...)
	h.chat(h.alice, pid, "manual", texts...)
	if segs := h.segments(h.alice, pid, "manual"); len(segs) != 0 {
		t.Fatalf("manual compacted: %+v", segs)
	}
	segs := h.segments(h.alice, pid, "auto")
	if len(segs) == 0 {
		t.Fatal("auto-compact did not compact")
	}
	live := h.history(h.alice, pid, "auto").Messages
	if live[0].Role != "system" || !strings.Contains(ptText(t, live[0]), "[Process Event]: Compacted") {
		t.Fatalf("auto: %s", ptDump(live))
	}
	// Nothing was lost: every user message is archived or live.
	seen := map[string]bool{}
	for _, s := range segs {
		for _, m := range ptGunzip(t, h.realPath(s.ArchivePath)) {
			if m.Role == "user" {
				seen[ptText(t, m)] = true
			}
		}
	}
	for _, m := range live {
		if m.Role == "user" {
			seen[ptText(t, m)] = true
		}
	}
	for _, x := range texts {
		if !seen[x] {
			t.Fatalf("%s is neither archived nor live", x)
		}
	}

	var refused string
	for _, x := range texts {
		r := h.send(h.alice, pid, "fail", x)
		if st := h.waitRun(r.RunID); st == "error" {
			refused = r.RunID
			break
		}
	}
	if refused == "" {
		t.Fatal("the fail policy never refused a run")
	}
	ms := h.history(h.alice, pid, "fail").Messages
	if txt := ptText(t, ms[len(ms)-1]); !strings.HasPrefix(txt, "[Process Event]: run refused: context pressure") {
		t.Fatalf("refusal %q", txt)
	}
}

// TestCloneIsACtl: /proc/clone follows the rules of every ctl file: an
// option or JSON field spawn does not read is a 400 naming it and the
// syscall, nothing is spawned, and the failure shows in /proc/err.
func TestCloneIsACtl(t *testing.T) {
	h := newPTHarness(t)
	ctx := context.Background()
	n, err := h.node(h.alice, "/proc/clone")
	if err != nil {
		t.Fatal(err)
	}
	ctl := n.(*vfs.Ctl)
	count := func() int { return h.sqlCount(`SELECT count(*) FROM proc_processes WHERE uid=?`, h.alice.Uid) }
	before := count()
	for _, tc := range []struct{ line, want string }{
		{"spawn task colour=red", `proc.spawn: /proc/clone: unknown option "colour"`},
		{`spawn {"profile":"task","colour":"red"}`, `proc.spawn: /proc/clone: unknown field "colour"`},
		{"fork task", `/proc/clone: unknown verb "fork" (want one of spawn)`},
	} {
		_, err := ctl.Exec(ctx, h.alice, tc.line)
		if err == nil || err.Error() != tc.want || abi.Code(err) != 400 {
			t.Errorf("%q: %v, want 400 %q", tc.line, err, tc.want)
		}
		if got, _ := h.readFile(h.alice, "/proc/err"); strings.TrimSpace(got) != tc.want {
			t.Errorf("%q: /proc/err says %q", tc.line, got)
		}
	}
	if after := count(); after != before {
		t.Fatalf("%d processes spawned by refused lines", after-before)
	}
	pid, err := ctl.Exec(ctx, h.alice, "spawn task label=ok")
	if err != nil || pid == "" || strings.ContainsAny(pid, "{\"") {
		t.Fatalf("clone read back %q, %v", pid, err)
	}
}
