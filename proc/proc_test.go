package proc

// Tests of the process manager on an in-process kernel, with scripted
// model providers replaying proc/testdata/*.jsonl. They assert stored
// state: proc.history results, the proc_* rows and the archive files.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc/model"
	"gsvfs.dev/gsvfs/vfs"
)

// ptWait bounds every wait of these tests for a run to reach a state.
const ptWait = 10 * time.Second

// ptHarness is a kernel with proc registered on a temporary state dir,
// set up with root and the users alice (uid 1000) and bob (uid 1001).
// Each user's model provider is chosen by the test (setScript).
type ptHarness struct {
	t   *testing.T
	dir string
	k   *kernel.Kernel
	m   *Manager

	root, alice, bob *kernel.Identity

	mu    sync.Mutex
	provs map[uint32]model.Provider
	// fromConfig: the models come from the kernel's config, as in the
	// daemon, not from provs.
	fromConfig bool
}

func newPTHarness(t *testing.T) *ptHarness {
	t.Helper()
	return startPT(&ptHarness{t: t, dir: t.TempDir(), provs: map[uint32]model.Provider{}})
}

// startPT opens h and adds alice and bob.
func startPT(h *ptHarness) *ptHarness {
	t := h.t
	t.Helper()
	h.open()
	t.Cleanup(h.close)
	ctx := context.Background()
	for _, name := range []string{"alice", "bob"} {
		if _, err := h.k.Call(ctx, h.k.KernelCaller(), "sys.user.add", json.RawMessage(`{"username":"`+name+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	h.identities()
	return h
}

// open opens the kernel and registers proc on h.dir (again, after close).
func (h *ptHarness) open() {
	h.t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	k, err := kernel.Open(kernel.Config{StateDir: h.dir, Logger: quiet})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := k.EnsureSetup(context.Background(), "root", 0); err != nil {
		h.t.Fatal(err)
	}
	opts := Options{Provider: h.provider, Logger: quiet}
	if h.fromConfig {
		opts.Provider = nil
	}
	m, err := register(k, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.k, h.m = k, m
}

// close stops the manager's goroutines, then the kernel.
func (h *ptHarness) close() {
	if h.k == nil {
		return
	}
	h.m.Close()
	h.k.Close()
	h.k, h.m = nil, nil
}

func (h *ptHarness) identities() {
	h.t.Helper()
	ctx := context.Background()
	var err error
	ids := []**kernel.Identity{&h.root, &h.alice, &h.bob}
	for i, uid := range []uint32{0, 1000, 1001} {
		if *ids[i], err = h.k.IdentityOf(ctx, uid); err != nil {
			h.t.Fatal(err)
		}
	}
	if h.alice.Username != "alice" || h.bob.Username != "bob" {
		h.t.Fatalf("users: %+v %+v", h.alice, h.bob)
	}
}

func (h *ptHarness) provider(ctx context.Context, uid uint32) (model.Provider, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.provs[uid]; p != nil {
		return p, "m", nil
	}
	// No script: every reply is model.ScriptExhausted.
	p := &model.Scripted{}
	h.provs[uid] = p
	return p, "m", nil
}

// setScript makes testdata/name the model of uid ("" for an empty script,
// whose every reply is model.ScriptExhausted).
func (h *ptHarness) setScript(uid uint32, name string) *model.Scripted {
	h.t.Helper()
	s := &model.Scripted{}
	if name != "" {
		var err error
		if s, err = model.NewScripted(filepath.Join("testdata", name)); err != nil {
			h.t.Fatal(err)
		}
	}
	h.mu.Lock()
	h.provs[uid] = s
	h.mu.Unlock()
	return s
}

// call makes a syscall as id the way a request frame does (JSON args) and
// decodes its result, through JSON, into out.
func (h *ptHarness) call(id *kernel.Identity, name string, args any, out any) error {
	h.t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := h.k.Call(context.Background(), &kernel.Caller{Identity: id}, name, json.RawMessage(b))
	if err != nil {
		return err
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
	return nil
}

func (h *ptHarness) must(id *kernel.Identity, name string, args any, out any) {
	h.t.Helper()
	if err := h.call(id, name, args, out); err != nil {
		h.t.Fatalf("%s %v: %v", name, args, err)
	}
}

// code is the syscall code of the call's error (0 on success).
func (h *ptHarness) code(id *kernel.Identity, name string, args any) int {
	h.t.Helper()
	err := h.call(id, name, args, nil)
	if err == nil {
		return 0
	}
	return abi.Code(err)
}

type ptSend struct {
	OK     bool   `json:"ok"`
	Status string `json:"status"`
	RunID  string `json:"runId"`
	Queued bool   `json:"queued"`
}

func (h *ptHarness) send(id *kernel.Identity, pid, cid, text string) ptSend {
	h.t.Helper()
	var r ptSend
	h.must(id, "proc.send", map[string]any{"pid": pid, "conversationId": cid, "message": text}, &r)
	if !r.OK || r.RunID == "" {
		h.t.Fatalf("proc.send: %+v", r)
	}
	return r
}

type ptHist struct {
	Messages     []abi.Message   `json:"messages"`
	MessageCount int64           `json:"messageCount"`
	PendingHil   *abi.HilRequest `json:"pendingHil"`
}

func (h *ptHarness) history(id *kernel.Identity, pid, cid string) ptHist {
	h.t.Helper()
	var r ptHist
	h.must(id, "proc.history", map[string]any{"pid": pid, "conversationId": cid}, &r)
	if int64(len(r.Messages)) != r.MessageCount {
		h.t.Fatalf("history of %s/%s: %d messages, messageCount %d", pid, cid, len(r.Messages), r.MessageCount)
	}
	return r
}

func (h *ptHarness) spawn(id *kernel.Identity, label string) string {
	h.t.Helper()
	var r struct {
		Pid string `json:"pid"`
	}
	h.must(id, "proc.spawn", map[string]any{"profile": "task", "label": label}, &r)
	return r.Pid
}

func (h *ptHarness) openConv(id *kernel.Identity, pid, cid string) {
	h.t.Helper()
	h.must(id, "proc.conversation.open", map[string]any{"pid": pid, "conversationId": cid}, nil)
}

// runStatus is the stored status of a run.
func (h *ptHarness) runStatus(runID string) string {
	h.t.Helper()
	var s string
	if err := h.k.Store.R.QueryRow(`SELECT status FROM proc_runs WHERE run_id=?`, runID).Scan(&s); err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

// waitRun waits until the run's status is one of want (default: an end:
// done, error or aborted) and returns it.
func (h *ptHarness) waitRun(runID string, want ...string) string {
	h.t.Helper()
	if len(want) == 0 {
		want = []string{"done", "error", "aborted"}
	}
	deadline := time.Now().Add(ptWait)
	for {
		s := h.runStatus(runID)
		if slices.Contains(want, s) {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %s: status %q after %v, want one of %v", runID, s, ptWait, want)
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// waitIdle waits until pid has no run, stored or in memory, and no queue.
func (h *ptHarness) waitIdle(pid string) {
	h.t.Helper()
	deadline := time.Now().Add(ptWait)
	for {
		var n int
		h.k.Store.R.QueryRow(`SELECT (SELECT count(*) FROM proc_runs WHERE pid=? AND status IN ('running','waiting_hil'))
			+ (SELECT count(*) FROM proc_queue WHERE pid=?)`, pid, pid).Scan(&n)
		h.m.mu.Lock()
		pr := h.m.procs[pid]
		h.m.mu.Unlock()
		busy := false
		if pr != nil {
			pr.mu.Lock()
			busy = pr.run != nil
			pr.mu.Unlock()
		}
		if n == 0 && !busy {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("process %s not idle after %v (%d stored runs/queue entries, run in memory %v)", pid, ptWait, n, busy)
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// chat sends texts one by one to pid/cid, each after the previous run
// ended, and requires each run to end done.
func (h *ptHarness) chat(id *kernel.Identity, pid, cid string, texts ...string) {
	h.t.Helper()
	for _, text := range texts {
		r := h.send(id, pid, cid, text)
		if r.Queued {
			h.t.Fatalf("send %q: queued on an idle process", text)
		}
		if s := h.waitRun(r.RunID); s != "done" {
			h.t.Fatalf("run of %q: %s", text, s)
		}
	}
}

// sqlCount runs a count(*) query.
func (h *ptHarness) sqlCount(q string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.k.Store.R.QueryRow(q, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// realPath is the host path of a namespace path of the data tree.
func (h *ptHarness) realPath(p string) string {
	return filepath.Join(h.dir, "fs", filepath.FromSlash(strings.TrimPrefix(p, "/")))
}

// node walks the namespace tree to p as id.
func (h *ptHarness) node(id *kernel.Identity, p string) (vfs.Node, error) {
	ctx := context.Background()
	var n vfs.Node = h.m.space.Root()
	for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
		d, ok := n.(vfs.Dir)
		if !ok {
			return nil, fmt.Errorf("%s: not a directory above %s", p, name)
		}
		var err error
		if n, err = d.Lookup(ctx, id, name); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// readFile reads the namespace file p as id, as a transport does.
func (h *ptHarness) readFile(id *kernel.Identity, p string) (string, error) {
	n, err := h.node(id, p)
	if err != nil {
		return "", err
	}
	f, ok := n.(vfs.File)
	if !ok {
		return "", fmt.Errorf("%s is not a file", p)
	}
	return ptRead(id, f)
}

// ptRead reads the file f to its end as id.
func ptRead(id *kernel.Identity, f vfs.File) (string, error) {
	ctx := context.Background()
	hd, err := f.Open(ctx, id, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer hd.Close(ctx)
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		k, err := hd.Read(ctx, buf, int64(out.Len()))
		if err != nil {
			return out.String(), err
		}
		if k == 0 {
			return out.String(), nil
		}
		out.Write(buf[:k])
	}
}

// writeFile opens p write-only as id, writes data and closes it.
func (h *ptHarness) writeFile(id *kernel.Identity, p, data string) error {
	ctx := context.Background()
	n, err := h.node(id, p)
	if err != nil {
		return err
	}
	f, ok := n.(vfs.File)
	if !ok {
		return fmt.Errorf("%s is not a file", p)
	}
	hd, err := f.Open(ctx, id, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, werr := hd.Write(ctx, []byte(data), 0)
	cerr := hd.Close(ctx)
	return errors.Join(werr, cerr)
}

// ptEvent is a signal frame.
type ptEvent struct {
	Signal  string         `json:"signal"`
	Payload map[string]any `json:"payload"`
}

// events collects the signals of sub until one satisfies stop.
func ptEvents(t *testing.T, sub vfs.Subscription, stop func(ptEvent) bool) []ptEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ptWait)
	defer cancel()
	var out []ptEvent
	for {
		rec, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("events: %v (so far %+v)", err, out)
		}
		var e ptEvent
		if err := json.Unmarshal(rec, &e); err != nil {
			t.Fatalf("event %q: %v", rec, err)
		}
		out = append(out, e)
		if stop(e) {
			return out
		}
	}
}

func ptText(t *testing.T, m abi.Message) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(m.Content, &s); err != nil {
		t.Fatalf("message %d (%s): content %s is not a string", m.ID, m.Role, m.Content)
	}
	return s
}

func ptAssistant(t *testing.T, m abi.Message) assistantContent {
	t.Helper()
	var a assistantContent
	if m.Role != "assistant" || json.Unmarshal(m.Content, &a) != nil {
		t.Fatalf("message %d is not an assistant message: %s %s", m.ID, m.Role, m.Content)
	}
	return a
}

func ptTool(t *testing.T, m abi.Message) toolResultContent {
	t.Helper()
	var r toolResultContent
	if m.Role != "toolResult" || json.Unmarshal(m.Content, &r) != nil {
		t.Fatalf("message %d is not a tool result: %s %s", m.ID, m.Role, m.Content)
	}
	return r
}

func ptRoles(ms []abi.Message) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Role)
	}
	return strings.Join(s, ",")
}

// ptGunzip reads an archive file of JSON lines.
func ptGunzip(t *testing.T, file string) []abi.Message {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []abi.Message
	dec := json.NewDecoder(zr)
	for {
		var m abi.Message
		if err := dec.Decode(&m); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, m)
	}
}

func ptSameMessages(t *testing.T, what string, got, want []abi.Message) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %d: %s\nwant %d: %s", what, len(got), ptDump(got), len(want), ptDump(want))
	}
}

func ptDump(ms []abi.Message) string {
	b, _ := json.Marshal(ms)
	return string(b)
}

func init0(uid uint32) string { return fmt.Sprintf("init:%d", uid) }

// 1. A message starts a run; the reply is stored; the events of the run
// come in order.
func TestSendRunReply(t *testing.T) {
	h := newPTHarness(t)
	s := h.setScript(1000, "hello.jsonl")
	pid := init0(1000)
	sub := h.k.Subscribe(h.alice, func(signal string, payload any) bool {
		p, ok := payload.(map[string]any)
		return ok && p["pid"] == pid
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
	var streamed strings.Builder
	for _, e := range evs {
		if e.Payload["runId"] != r.RunID {
			continue
		}
		if len(order) == 0 || order[len(order)-1] != e.Signal {
			order = append(order, e.Signal)
		}
		if e.Signal == "proc.run.stream" {
			streamed.WriteString(e.Payload["text"].(string))
		}
	}
	if want := []string{"proc.run.started", "proc.run.stream", "proc.run.output", "proc.run.finished"}; !slices.Equal(order, want) {
		t.Fatalf("event order %v, want %v", order, want)
	}
	if streamed.String() != reply {
		t.Fatalf("streamed %q", streamed.String())
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
	h.k.Store.R.QueryRow(`SELECT state FROM proc_processes WHERE pid=?`, pid).Scan(&state)
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
	sub := h.k.Subscribe(h.root, func(signal string, payload any) bool {
		p, ok := payload.(map[string]any)
		return ok && p["pid"] == pid && signal == "proc.run.hil.requested"
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
	if res := lastResult(); !res.IsError || res.Output != "denied by user" {
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
	h.k.Store.R.QueryRow(`SELECT hil_allow FROM proc_processes WHERE pid=?`, pid).Scan(&allow)
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
	h.k.Store.R.QueryRow(`SELECT status FROM proc_hil WHERE request_id=?`, req.RequestID).Scan(&hs)
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
		if r.Output != "interrupted" || !r.IsError || r.ToolCallID != calls[i].ID {
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
		h.k.Store.R.QueryRow(`SELECT started_at, finished_at, status FROM proc_runs WHERE run_id=?`, r).Scan(&s.start, &s.end, &status)
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

type ptCompactRes struct {
	OK               bool        `json:"ok"`
	Segment          abi.Segment `json:"segment"`
	ArchivedMessages int         `json:"archivedMessages"`
	ArchivedTo       string      `json:"archivedTo"`
	SummaryMessageID int64       `json:"summaryMessageId"`
}

// segments lists the segments of pid/cid.
func (h *ptHarness) segments(id *kernel.Identity, pid, cid string) []abi.Segment {
	h.t.Helper()
	var r struct {
		Segments []abi.Segment `json:"segments"`
	}
	h.must(id, "proc.conversation.segments", map[string]any{"pid": pid, "conversationId": cid}, &r)
	return r.Segments
}

// checkCompacted checks a compaction of before that archived n messages
// with summary text: the live history, the segment record, the archive
// file, segment.read paging and the segment files of the tree.
func (h *ptHarness) checkCompacted(t *testing.T, pid, cid string, before []abi.Message, n int, res ptCompactRes, summary string) {
	t.Helper()
	if !res.OK || res.ArchivedMessages != n {
		t.Fatalf("compact: %+v, want %d archived", res, n)
	}
	boundary, first := before[n-1].ID, before[0].ID
	if res.SummaryMessageID != first {
		t.Fatalf("summary id %d, want %d (the first archived id)", res.SummaryMessageID, first)
	}
	live := h.history(h.alice, pid, cid).Messages
	if len(live) != len(before)-n+1 {
		t.Fatalf("%d live messages, want %d", len(live), len(before)-n+1)
	}
	systems := 0
	for _, m := range live {
		if m.Role == "system" {
			systems++
		}
	}
	if systems != 1 || live[0].Role != "system" || live[0].ID != first {
		t.Fatalf("live history does not start with the one summary: %s", ptDump(live))
	}
	txt := ptText(t, live[0])
	if !strings.HasPrefix(txt, fmt.Sprintf("[Process Event]: Compacted %d messages", n)) || !strings.Contains(txt, summary) || !strings.Contains(txt, res.Segment.ID) {
		t.Fatalf("summary message %q", txt)
	}
	ptSameMessages(t, "live suffix", live[1:], before[n:])

	seg := res.Segment
	if seg.Kind != "compaction" || seg.ConversationID != cid || seg.Messages != int64(n) || seg.FromMessageID != before[0].ID ||
		seg.ToMessageID != boundary || seg.SummaryMessageID == nil || *seg.SummaryMessageID != first || seg.ArchivePath != res.ArchivedTo {
		t.Fatalf("segment %+v", seg)
	}
	if segs := h.segments(h.alice, pid, cid); len(segs) == 0 || segs[len(segs)-1].ID != seg.ID {
		t.Fatalf("segments %+v", segs)
	}
	want := "/var/sessions/alice/" + pid + "/" + cid + "/" + seg.ID + ".jsonl.gz"
	if seg.ArchivePath != want {
		t.Fatalf("archive path %s, want %s", seg.ArchivePath, want)
	}
	ptSameMessages(t, "archive file", ptGunzip(t, h.realPath(seg.ArchivePath)), before[:n])

	// segment.read pages the archive and restores nothing.
	var paged []abi.Message
	for off := 0; ; off += 3 {
		var r struct {
			Messages     []abi.Message `json:"messages"`
			MessageCount int           `json:"messageCount"`
			Truncated    bool          `json:"truncated"`
		}
		h.must(h.alice, "proc.conversation.segment.read", map[string]any{"pid": pid, "conversationId": cid, "segmentId": seg.ID, "offset": off, "limit": 3}, &r)
		if r.MessageCount != n || r.Truncated != (off+3 < n) {
			t.Fatalf("segment.read offset %d: count %d truncated %v (n %d)", off, r.MessageCount, r.Truncated, n)
		}
		paged = append(paged, r.Messages...)
		if !r.Truncated {
			break
		}
	}
	ptSameMessages(t, "segment.read pages", paged, before[:n])
	ptSameMessages(t, "live history after segment.read", h.history(h.alice, pid, cid).Messages, live)

	// The tree: segments/<id>/meta and messages.
	dir := "/proc/" + pid + "/conversations/" + cid + "/segments/" + seg.ID
	meta, err := h.readFile(h.alice, dir+"/meta")
	if err != nil {
		t.Fatal(err)
	}
	var sm abi.Segment
	if err := json.Unmarshal([]byte(meta), &sm); err != nil || sm.ID != seg.ID || sm.Messages != int64(n) {
		t.Fatalf("meta %q (%v)", meta, err)
	}
	msgs, err := h.readFile(h.alice, dir+"/messages")
	if err != nil {
		t.Fatal(err)
	}
	var fromFile []abi.Message
	for _, line := range strings.Split(strings.TrimSpace(msgs), "\n") {
		var m abi.Message
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("messages line %q: %v", line, err)
		}
		fromFile = append(fromFile, m)
	}
	ptSameMessages(t, "segments/<id>/messages", fromFile, before[:n])
}

// 6. Compaction.
func TestCompact(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "compact")
	texts := []string{"m1", "m2", "m3", "m4", "m5"}

	t.Run("arithmetic", func(t *testing.T) {
		intp := func(n int) *int { return &n }
		const n = 8 // messages: 4 sends and their replies
		cases := []struct {
			name    string
			keep    *int
			through int // index of the through message, when keep is nil
			want    int // archived
		}{
			{"keep=3", intp(3), 0, 5},
			{"keep=2", intp(2), 0, 6},
			{"keep=0", intp(0), 0, 8},
			{"keep=7", intp(7), 0, 1},
			{"through=4th", nil, 3, 4},
			{"through=last", nil, 7, 8},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h.setScript(1000, "")
				cid := fmt.Sprintf("arith-%d", i)
				h.openConv(h.alice, pid, cid)
				h.chat(h.alice, pid, cid, texts[:n/2]...)
				before := h.history(h.alice, pid, cid).Messages
				if len(before) != n {
					t.Fatalf("%d messages", len(before))
				}
				args := map[string]any{"pid": pid, "conversationId": cid, "summary": "summary of " + c.name}
				if c.keep != nil {
					args["keepLast"] = *c.keep
				} else {
					args["throughMessageId"] = before[c.through].ID
				}
				var res ptCompactRes
				h.must(h.alice, "proc.conversation.compact", args, &res)
				h.checkCompacted(t, pid, cid, before, c.want, res, "summary of "+c.name)
			})
		}
	})

	t.Run("ctl", func(t *testing.T) {
		h.setScript(1000, "")
		cid := "viactl"
		h.openConv(h.alice, pid, cid)
		h.chat(h.alice, pid, cid, texts[:3]...)
		before := h.history(h.alice, pid, cid).Messages
		ctl := "/proc/" + pid + "/conversations/" + cid + "/ctl"
		if err := h.writeFile(h.alice, ctl, "compact keep=2 summary='all done'\n"); err != nil {
			t.Fatal(err)
		}
		segs := h.segments(h.alice, pid, cid)
		if len(segs) != 1 {
			t.Fatalf("segments %+v", segs)
		}
		h.checkCompacted(t, pid, cid, before, 4, ptCompactRes{OK: true, Segment: segs[0], ArchivedMessages: 4, ArchivedTo: segs[0].ArchivePath, SummaryMessageID: segs[0].FromMessageID}, "all done")
		for _, line := range []string{"compact", "compact keep=2", "compact keep=x summary=s", "compact keep=2 summary=s generate", "compact keep=1 through=3 summary=s"} {
			err := h.writeFile(h.alice, ctl, line+"\n")
			if vfs.Errno(err) != 22 { // EINVAL
				t.Errorf("%q: %v (errno %d), want EINVAL", line, err, vfs.Errno(err))
			}
		}
	})

	t.Run("tool-call boundary", func(t *testing.T) {
		h.must(h.alice, "fs.write", map[string]any{"path": "~/a.txt", "content": "A\n"}, nil)
		h.must(h.alice, "fs.write", map[string]any{"path": "~/b.txt", "content": "B\n"}, nil)
		// u, a(2 calls), tr, tr, a, u, a
		cases := []struct {
			keep, through, want int // through: an index of before, or -1
		}{
			{4, -1, 1}, // would split the second result from its call: back to before the call
			{5, -1, 1}, // would split the two results: likewise
			{6, -1, 1}, // just before the call: not moved
			{3, -1, 4}, // after the group: not moved
			{0, 1, 4},  // through the call: through its results too
			{0, 2, 1},  // through the first result: back to before the call
			{0, 3, 4},  // through the last result: the group
		}
		for _, c := range cases {
			name := fmt.Sprintf("keep=%d", c.keep)
			if c.through >= 0 {
				name = fmt.Sprintf("through=%d", c.through)
			}
			t.Run(name, func(t *testing.T) {
				h.setScript(1000, "tool_boundary.jsonl")
				cid := "tools-" + strings.ReplaceAll(name, "=", "-")
				h.openConv(h.alice, pid, cid)
				h.chat(h.alice, pid, cid, "read both", "thanks")
				before := h.history(h.alice, pid, cid).Messages
				if got := ptRoles(before); got != "user,assistant,toolResult,toolResult,assistant,user,assistant" {
					t.Fatalf("roles %s", got)
				}
				args := map[string]any{"pid": pid, "conversationId": cid, "keepLast": c.keep, "summary": "s"}
				if c.through >= 0 {
					args = map[string]any{"pid": pid, "conversationId": cid, "throughMessageId": before[c.through].ID, "summary": "s"}
				}
				var res ptCompactRes
				h.must(h.alice, "proc.conversation.compact", args, &res)
				h.checkCompacted(t, pid, cid, before, c.want, res, "s")
				live := h.history(h.alice, pid, cid).Messages
				// No tool result is live without its call, and no call
				// without its results.
				calls := map[string]bool{}
				for _, m := range live {
					switch m.Role {
					case "assistant":
						for _, tc := range ptAssistant(t, m).ToolCalls {
							calls[tc.ID] = true
						}
					case "toolResult":
						if !calls[ptTool(t, m).ToolCallID] {
							t.Fatalf("a live tool result lost its call: %s", ptDump(live))
						}
						delete(calls, ptTool(t, m).ToolCallID)
					}
				}
				if len(calls) != 0 {
					t.Fatalf("live calls without results %v", calls)
				}
			})
		}
	})

	t.Run("generate", func(t *testing.T) {
		h.setScript(1000, "")
		cid := "gen"
		h.openConv(h.alice, pid, cid)
		h.chat(h.alice, pid, cid, texts[:3]...)
		before := h.history(h.alice, pid, cid).Messages
		s := h.setScript(1000, "summary.jsonl")
		var res ptCompactRes
		h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": cid, "keepLast": 2, "generateSummary": true}, &res)
		h.checkCompacted(t, pid, cid, before, 4, res, "The user said m1..m3; the model answered each.")
		reqs := s.Requests()
		if len(reqs) != 1 || !strings.Contains(reqs[0].System, "Summarize") || !strings.Contains(reqs[0].Messages[0].Content, "m1") || strings.Contains(reqs[0].Messages[0].Content, "m3") {
			t.Fatalf("summary request %+v", reqs)
		}
	})

	t.Run("bad args", func(t *testing.T) {
		h.setScript(1000, "")
		cid := "bad"
		h.openConv(h.alice, pid, cid)
		h.chat(h.alice, pid, cid, texts[:2]...)
		before := h.history(h.alice, pid, cid).Messages
		base := func(kv ...any) map[string]any {
			a := map[string]any{"pid": pid, "conversationId": cid}
			for i := 0; i < len(kv); i += 2 {
				a[kv[i].(string)] = kv[i+1]
			}
			return a
		}
		cases := []struct {
			name string
			args map[string]any
			code int
		}{
			{"no selector", base("summary", "s"), 400},
			{"two selectors", base("summary", "s", "keepLast", 1, "throughMessageId", before[0].ID), 400},
			{"no summary", base("keepLast", 1), 400},
			{"empty summary", base("keepLast", 1, "summary", ""), 400},
			{"summary and generate", base("keepLast", 1, "summary", "s", "generateSummary", true), 400},
			{"negative keep", base("keepLast", -1, "summary", "s"), 400},
			{"nothing to compact", base("keepLast", 4, "summary", "s"), 400},
			{"missing through", base("throughMessageId", 999999, "summary", "s"), 404},
			{"unknown conversation", map[string]any{"pid": pid, "conversationId": "nope", "keepLast": 1, "summary": "s"}, 404},
		}
		for _, c := range cases {
			if got := h.code(h.alice, "proc.conversation.compact", c.args); got != c.code {
				t.Errorf("%s: code %d, want %d", c.name, got, c.code)
			}
		}
		ptSameMessages(t, "history after refused compactions", h.history(h.alice, pid, cid).Messages, before)
		if segs := h.segments(h.alice, pid, cid); len(segs) != 0 {
			t.Fatalf("segments %+v", segs)
		}
	})

	t.Run("busy", func(t *testing.T) {
		h.setScript(1000, "")
		h.openConv(h.alice, pid, "idle")
		h.chat(h.alice, pid, "idle", texts[:2]...)
		h.setScript(1000, "slow.jsonl")
		h.openConv(h.alice, pid, "busy")
		r := h.send(h.alice, pid, "busy", "take your time")
		if c := h.code(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": "busy", "keepLast": 0, "summary": "s"}); c != 409 {
			t.Fatalf("compact during a run: code %d", c)
		}
		// Another conversation of the process may be compacted.
		h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": "idle", "keepLast": 1, "summary": "s"}, nil)
		h.must(h.alice, "proc.abort", map[string]any{"pid": pid}, nil)
		if st := h.runStatus(r.RunID); st != "aborted" {
			t.Fatalf("run %s", st)
		}
	})
}

// 7. Fork.
func TestFork(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "fork")
	h.chat(h.alice, pid, "default", "m1", "m2", "m3") // 6 messages
	before := h.history(h.alice, pid, "default").Messages

	type forkRes struct {
		OK                 bool             `json:"ok"`
		TargetConversation abi.Conversation `json:"targetConversation"`
		RestoredMessages   int              `json:"restoredMessages"`
		IncludedLiveSuffix bool             `json:"includedLiveSuffix"`
	}
	// stripped is ms without ids (a fork gets new ones).
	stripped := func(ms []abi.Message) []abi.Message {
		out := make([]abi.Message, len(ms))
		for i, m := range ms {
			out[i] = abi.Message{Role: m.Role, Content: m.Content, Timestamp: m.Timestamp}
		}
		return out
	}

	var fr forkRes
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": before[2].ID, "targetConversationId": "branch", "title": "Branch"}, &fr)
	if fr.RestoredMessages != 3 || fr.TargetConversation.ID != "branch" || fr.TargetConversation.MessageCount != 3 || *fr.TargetConversation.Title != "Branch" {
		t.Fatalf("fork through: %+v", fr)
	}
	ptSameMessages(t, "branch", stripped(h.history(h.alice, pid, "branch").Messages), stripped(before[:3]))
	ptSameMessages(t, "source after fork", h.history(h.alice, pid, "default").Messages, before)
	// The branch is a live conversation.
	h.chat(h.alice, pid, "branch", "branch message")
	if n := h.history(h.alice, pid, "branch").MessageCount; n != 5 {
		t.Fatalf("branch has %d messages", n)
	}

	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": 999999, "targetConversationId": "x"}); c != 404 {
		t.Fatalf("fork through a missing id: code %d", c)
	}
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "targetConversationId": "x"}); c != 400 {
		t.Fatalf("fork without a selector: code %d", c)
	}
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "segmentId": "seg_nope", "targetConversationId": "x"}); c != 404 {
		t.Fatalf("fork from a missing segment: code %d", c)
	}

	// Compact, then restore the segment with and without the live suffix.
	var cr ptCompactRes
	h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "keepLast": 2, "summary": "s"}, &cr)
	h.chat(h.alice, pid, "default", "m4") // after the compaction: not part of the suffix
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "segmentId": cr.Segment.ID, "targetConversationId": "replay"}, &fr)
	if fr.RestoredMessages != 6 || !fr.IncludedLiveSuffix {
		t.Fatalf("fork segment: %+v", fr)
	}
	ptSameMessages(t, "replay (segment + live suffix)", stripped(h.history(h.alice, pid, "replay").Messages), stripped(before))
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "segmentId": cr.Segment.ID, "targetConversationId": "replay2", "includeLiveSuffix": false}, &fr)
	if fr.RestoredMessages != 4 || fr.IncludedLiveSuffix {
		t.Fatalf("fork segment nosuffix: %+v", fr)
	}
	ptSameMessages(t, "replay2 (segment only)", stripped(h.history(h.alice, pid, "replay2").Messages), stripped(before[:4]))
	// Through the ctl file, with nosuffix.
	ctl := "/proc/" + pid + "/conversations/default/ctl"
	if err := h.writeFile(h.alice, ctl, "fork segment="+cr.Segment.ID+" as=replay3 nosuffix\n"); err != nil {
		t.Fatal(err)
	}
	ptSameMessages(t, "replay3", stripped(h.history(h.alice, pid, "replay3").Messages), stripped(before[:4]))

	// Into an existing conversation.
	live := h.history(h.alice, pid, "default").Messages
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": live[1].ID, "targetConversationId": "replay"}); c != 409 {
		t.Fatalf("fork into an existing id: code %d", c)
	}
	if err := h.writeFile(h.alice, ctl, "fork segment="+cr.Segment.ID+" as=replay\n"); vfs.Errno(err) != 16 { // EBUSY
		t.Fatalf("fork into an existing id through ctl: %v", err)
	}
	if n := h.history(h.alice, pid, "replay").MessageCount; n != 6 {
		t.Fatalf("the existing conversation changed: %d messages", n)
	}
	// A segment of another conversation is not found from this one.
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "conversationId": "branch", "segmentId": cr.Segment.ID, "targetConversationId": "y"}); c != 404 {
		t.Fatalf("fork of another conversation's segment: code %d", c)
	}
}

// archiveDirs lists the archive directories of pid (not the compaction
// directories, which are named by conversation).
func (h *ptHarness) archiveDirs(user, pid string) []string {
	h.t.Helper()
	ents, err := os.ReadDir(h.realPath(path.Join("/var/sessions", user, pid)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasSuffix(strings.SplitN(e.Name(), "-", 2)[0], "Z") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// 8. Reset of a conversation and of a process; kill.
func TestReset(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "reset")
	h.openConv(h.alice, pid, "other")
	h.openConv(h.alice, pid, "empty")
	h.chat(h.alice, pid, "default", "d1", "d2")
	h.chat(h.alice, pid, "other", "o1")
	def := h.history(h.alice, pid, "default").Messages
	other := h.history(h.alice, pid, "other").Messages

	type resetRes struct {
		OK               bool   `json:"ok"`
		Generation       int64  `json:"generation"`
		ArchivedMessages int    `json:"archivedMessages"`
		ArchivedTo       string `json:"archivedTo"`
	}
	var rr resetRes
	h.must(h.alice, "proc.conversation.reset", map[string]any{"pid": pid}, &rr)
	if !rr.OK || rr.Generation != 2 || rr.ArchivedMessages != 4 {
		t.Fatalf("reset: %+v", rr)
	}
	dirs := h.archiveDirs("alice", pid)
	if len(dirs) != 1 || rr.ArchivedTo != "/var/sessions/alice/"+pid+"/"+dirs[0] {
		t.Fatalf("archive dirs %v, archivedTo %s", dirs, rr.ArchivedTo)
	}
	if names := dirNames(t, h.realPath(rr.ArchivedTo)); !slices.Equal(names, []string{"default.gen-1.jsonl.gz"}) {
		t.Fatalf("archive dir holds %v", names)
	}
	ptSameMessages(t, "reset archive", ptGunzip(t, h.realPath(rr.ArchivedTo+"/default.gen-1.jsonl.gz")), def)
	var conv struct {
		Conversation abi.Conversation `json:"conversation"`
	}
	h.must(h.alice, "proc.conversation.get", map[string]any{"pid": pid}, &conv)
	if conv.Conversation.Generation != 2 || conv.Conversation.MessageCount != 0 || conv.Conversation.Status != "open" {
		t.Fatalf("after reset: %+v", conv.Conversation)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=? AND cid='default'`, pid); n != 0 {
		t.Fatalf("%d stored messages left in the reset conversation", n)
	}
	ptSameMessages(t, "other conversation", h.history(h.alice, pid, "other").Messages, other)
	// The generation's new messages are its own.
	h.chat(h.alice, pid, "default", "d3")
	def2 := h.history(h.alice, pid, "default").Messages
	if len(def2) != 2 || ptText(t, def2[0]) != "d3" {
		t.Fatalf("new generation: %s", ptDump(def2))
	}

	// Reset without archive writes nothing.
	h.openConv(h.alice, pid, "scratch")
	h.chat(h.alice, pid, "scratch", "s1")
	if err := h.writeFile(h.alice, "/proc/"+pid+"/conversations/scratch/ctl", "reset noarchive\n"); err != nil {
		t.Fatal(err)
	}
	if got := h.archiveDirs("alice", pid); len(got) != 1 {
		t.Fatalf("reset noarchive made an archive: %v", got)
	}
	if n := h.history(h.alice, pid, "scratch").MessageCount; n != 0 {
		t.Fatalf("scratch has %d messages", n)
	}

	// Process reset: one archive dir, one file per non-empty conversation.
	type killRes struct {
		OK               bool               `json:"ok"`
		ArchivedMessages int                `json:"archivedMessages"`
		ArchivedTo       string             `json:"archivedTo"`
		Archives         []abi.ArchiveEntry `json:"archives"`
	}
	var kr killRes
	h.must(h.alice, "proc.reset", map[string]any{"pid": pid}, &kr)
	if !kr.OK || kr.ArchivedMessages != len(def2)+len(other) || len(kr.Archives) != 2 {
		t.Fatalf("proc.reset: %+v", kr)
	}
	if names := dirNames(t, h.realPath(kr.ArchivedTo)); !slices.Equal(names, []string{"default.gen-2.jsonl.gz", "other.gen-1.jsonl.gz"}) {
		t.Fatalf("process archive holds %v", names)
	}
	ptSameMessages(t, "process reset: default", ptGunzip(t, h.realPath(kr.ArchivedTo+"/default.gen-2.jsonl.gz")), def2)
	ptSameMessages(t, "process reset: other", ptGunzip(t, h.realPath(kr.ArchivedTo+"/other.gen-1.jsonl.gz")), other)
	for _, e := range kr.Archives {
		if e.Path != kr.ArchivedTo+"/"+e.ConversationID+fmt.Sprintf(".gen-%d.jsonl.gz", e.Generation) {
			t.Fatalf("archive entry %+v", e)
		}
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=?`, pid); n != 0 {
		t.Fatalf("%d messages left after proc.reset", n)
	}
	if len(h.archiveDirs("alice", pid)) != 2 {
		t.Fatalf("archive dirs %v", h.archiveDirs("alice", pid))
	}

	// Kill archives like reset; kill noarchive writes nothing.
	h.chat(h.alice, pid, "other", "o2")
	oth := h.history(h.alice, pid, "other").Messages
	h.must(h.alice, "proc.kill", map[string]any{"pid": pid}, &kr)
	if kr.ArchivedMessages != 2 || len(kr.Archives) != 1 || kr.Archives[0].ConversationID != "other" || kr.Archives[0].Generation != 2 {
		t.Fatalf("kill: %+v", kr)
	}
	ptSameMessages(t, "kill archive", ptGunzip(t, h.realPath(kr.Archives[0].Path)), oth)
	nDirs := len(h.archiveDirs("alice", pid))
	h.chat(h.alice, pid, "other", "o3")
	if err := h.writeFile(h.alice, "/proc/"+pid+"/ctl", "kill noarchive\n"); err != nil {
		t.Fatal(err)
	}
	if got := h.archiveDirs("alice", pid); len(got) != nDirs {
		t.Fatalf("kill noarchive made an archive: %v", got)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=?`, pid); n != 0 {
		t.Fatalf("%d messages left after kill", n)
	}
	// The process itself remains (kill does not remove the registry entry).
	var st struct {
		Processes []abi.Process `json:"processes"`
	}
	h.must(h.alice, "proc.list", map[string]any{}, &st)
	found := false
	for _, p := range st.Processes {
		found = found || p.Pid == pid
	}
	if !found {
		t.Fatal("the killed process is gone from proc.list")
	}
}

// 9. A process is its owner's (and root's) only.
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
		if d := time.Since(start); d > 5*time.Second {
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
		h.k.Store.R.QueryRow(`SELECT coalesce(error,'') FROM proc_runs WHERE run_id=?`, runID).Scan(&stored)
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
		sub := h.k.Subscribe(h.alice, func(signal string, payload any) bool {
			p, ok := payload.(map[string]any)
			return ok && p["pid"] == pid && signal == "proc.run.finished"
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
		if d := time.Since(start); d > 3*time.Second {
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
	sub := h.k.Subscribe(h.root, func(signal string, payload any) bool {
		p, ok := payload.(map[string]any)
		return ok && p["pid"] == pid && signal == "proc.run.hil.requested"
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

// A Shell call of a process whose owner is not root is refused before
// anyone is asked: commands run on the host as the daemon's user. The
// model gets the refusal as the tool's result.
func TestShellRefusedForNonRoot(t *testing.T) {
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[1000] = shellLoopProvider{}
	h.mu.Unlock()
	pid := h.spawn(h.alice, "shell")
	r := h.send(h.alice, pid, "", "go")
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_hil WHERE pid=?`, pid); n != 0 {
		t.Fatalf("%d HIL requests for a refused call", n)
	}
	ms := h.history(h.alice, pid, "").Messages
	if got := ptRoles(ms); got != "user,assistant,toolResult,assistant" {
		t.Fatalf("roles %s: %s", got, ptDump(ms))
	}
	if res := ptTool(t, ms[2]); !res.IsError || !strings.HasPrefix(res.Output, "shell.exec: only root may run host commands") {
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
	if r := ptTool(t, archived[2]); r.Output != "interrupted" {
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
	h.setScript(1000, "summary_slow.jsonl")
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- h.call(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "keepLast": 2, "generateSummary": true}, nil)
	}()
	time.Sleep(200 * time.Millisecond)
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

// register opens the proc room on k and adds it to a new namespace, as
// gsvfs does.
func register(k *kernel.Kernel, opts Options) (*Manager, error) {
	space := ns.New(k)
	m, err := Open(space, opts)
	if err != nil {
		return nil, err
	}
	if err := space.Add(context.Background(), m); err != nil {
		return nil, err
	}
	return m, nil
}
