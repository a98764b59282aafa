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
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/ipc"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc/model"
	"gsvfs.dev/gsvfs/vfs"
)

// ptWait bounds every wait of these tests for a run to reach a state: a
// guard against a hang that holds on a 2-core machine at load 10, never a
// measure of speed.
const ptWait = time.Minute

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
	// codeModeBlocks is Options.CodeModeBlocks (0: the default).
	codeModeBlocks int
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
	k, err := kernel.Open(kernel.Config{StateDir: h.dir, Store: kerneltest.Store(h.t, h.dir), Logger: quiet})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := k.EnsureSetup(context.Background(), "root", 0); err != nil {
		h.t.Fatal(err)
	}
	opts := Options{Provider: h.provider, Logger: quiet, CodeModeWorker: codeModeWorker(h.t), CodeModeBlocks: h.codeModeBlocks}
	if h.fromConfig {
		opts.Provider = nil
	}
	m, err := register(k, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.k, h.m = k, m
}

// close closes the rooms (the manager's goroutines, the devices room),
// then the kernel.
func (h *ptHarness) close() {
	if h.k == nil {
		return
	}
	h.m.space.Close() // proc, then the devices room (its sandboxes and their scratch mounts)
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
	if err := h.k.Store.QueryRowContext(context.Background(), `SELECT status FROM proc_runs WHERE run_id=?`, runID).Scan(&s); err != nil {
		return "(" + err.Error() + ")"
	}
	return s
}

// eventually polls cond every 10 ms until it holds; when ptWait passes
// first it fails t with what().
func eventually(t testing.TB, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(ptWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", ptWait, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRun waits until the run's status is one of want (default: an end:
// done, error or aborted) and returns it.
func (h *ptHarness) waitRun(runID string, want ...string) string {
	h.t.Helper()
	if len(want) == 0 {
		want = []string{"done", "error", "aborted"}
	}
	var s string
	eventually(h.t, func() bool { s = h.runStatus(runID); return slices.Contains(want, s) },
		func() string { return fmt.Sprintf("run %s: status %q, want one of %v", runID, s, want) })
	return s
}

// waitIdle waits until pid has no run, stored or in memory, and no queue.
func (h *ptHarness) waitIdle(pid string) {
	h.t.Helper()
	var n int
	busy := false
	eventually(h.t, func() bool {
		h.k.Store.QueryRowContext(context.Background(), `SELECT (SELECT count(*) FROM proc_runs WHERE pid=? AND status IN ('running','waiting_hil'))
			+ (SELECT count(*) FROM proc_queue WHERE pid=?)`, pid, pid).Scan(&n)
		h.m.run.mu.Lock()
		pr := h.m.run.procs[pid]
		h.m.run.mu.Unlock()
		busy = false
		if pr != nil {
			pr.mu.Lock()
			busy = pr.run != nil
			pr.mu.Unlock()
		}
		return n == 0 && !busy
	}, func() string {
		return fmt.Sprintf("process %s not idle (%d stored runs/queue entries, run in memory %v)", pid, n, busy)
	})
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
	if err := h.k.Store.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
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

// register opens the proc room on k and adds it, after the devices room
// (the data tree) and before the ipc room (mail, calls and watches
// between processes), to a new namespace, as gsvfs does. space.Close (by
// the Manager's harness, or the kernel's end) closes them.
func register(k *kernel.Kernel, opts Options) (*Manager, error) {
	space := ns.New(k)
	// A short wait budget, so that a Shell command of a test may outrun it.
	dev, err := devices.New(k, devices.Options{Local: local.Options{Logger: opts.Logger, ShellWait: 300 * time.Millisecond}})
	if err != nil {
		return nil, err
	}
	if err := space.Add(context.Background(), dev); err != nil {
		return nil, err
	}
	dev.SetRoot(space.Root())
	m, err := Open(space, opts)
	if err != nil {
		return nil, err
	}
	if err := space.Add(context.Background(), m); err != nil {
		return nil, err
	}
	r, err := ipc.Open(space, ipc.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	if err := space.Add(context.Background(), r); err != nil {
		return nil, err
	}
	return m, nil
}
