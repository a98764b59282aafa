package proc

// Tests of the richer HIL answers: the digest a request is bound to, its
// expiry, approval with edited args, and substitute results, through
// proc.hil, the process's ctl file and the expiry timer.

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc/model"
)

// hilAsk spawns a process of root whose model makes the one tool call
// call (a script tool object) on "go" and then says "done"; it sends "go"
// and returns the pid, the run and the request the run waits on.
func (h *ptHarness) hilAsk(call string) (*model.Scripted, string, string, *abi.HilRequest) {
	h.t.Helper()
	s := h.scriptOf(0, `{"tools":[`+call+`],"expectUser":"go"}`+"\n"+`{"text":"done"}`)
	pid := h.spawn(h.root, "hil")
	r := h.send(h.root, pid, "", "go")
	h.waitRun(r.RunID, "waiting_hil")
	req := h.history(h.root, pid, "default").PendingHil
	if req == nil {
		h.t.Fatal("no pending HIL request")
	}
	return s, pid, r.RunID, req
}

// hilLastResult is the last tool result of pid's default conversation,
// with what an answer changed.
func (h *ptHarness) hilLastResult(pid string) hilResultContent {
	h.t.Helper()
	ms := h.history(h.root, pid, "default").Messages
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == "toolResult" {
			var c hilResultContent
			if err := json.Unmarshal(ms[i].Content, &c); err != nil {
				h.t.Fatalf("tool result %s: %v", ms[i].Content, err)
			}
			return c
		}
	}
	h.t.Fatal("no tool result")
	return hilResultContent{}
}

// lastToolMessage is the last message of the model's last request: the
// tool result the model was given.
func lastToolMessage(t *testing.T, s *model.Scripted) model.Message {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model had no request")
	}
	ms := reqs[len(reqs)-1].Messages
	if len(ms) == 0 || ms[len(ms)-1].Role != model.Tool {
		t.Fatalf("the model's last request does not end with a tool result: %+v", ms)
	}
	return ms[len(ms)-1]
}

// A request carries the digest of its args and its expiry (1 h by
// default, config/ai/hil_expiry otherwise).
func TestHilDigestExpiry(t *testing.T) {
	h := newPTHarness(t)
	for _, c := range []struct {
		cfg  string
		want time.Duration
	}{
		{"", DefaultHilExpiry},
		{"90s", 90 * time.Second},
		{"120", 120 * time.Second},
		{"nonsense", DefaultHilExpiry},
		{"-5m", DefaultHilExpiry},
	} {
		if c.cfg != "" {
			h.setCfg(h.root, "config/ai/hil_expiry", c.cfg)
		}
		_, pid, _, req := h.hilAsk(`{"name":"Shell","args":{"command":"echo x"}}`)
		if got := time.Duration(req.ExpiresAt-req.CreatedAt) * time.Millisecond; got != c.want {
			t.Errorf("hil_expiry %q: expires after %v, want %v", c.cfg, got, c.want)
		}
		if want := argsDigest(json.RawMessage(`{"input":"echo x"}`)); req.ArgsDigest != want || !strings.HasPrefix(want, "sha256:") {
			t.Errorf("digest %q, want %q", req.ArgsDigest, want)
		}
		// The view shows the digest and the expiry too.
		view, err := h.readFile(h.root, "/proc/"+pid+"/hil")
		var viewed abi.HilRequest
		if err != nil || json.Unmarshal([]byte(view), &viewed) != nil || viewed.ArgsDigest != req.ArgsDigest || viewed.ExpiresAt != req.ExpiresAt {
			t.Errorf("hil view %q (%v)", view, err)
		}
		// An answer to other args than those shown is refused.
		if code := h.code(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve", "argsDigest": "sha256:00"}); code != 409 {
			t.Errorf("approve with another digest: code %d, want 409", code)
		}
		var ans abi.HilResult
		h.must(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "deny", "argsDigest": req.ArgsDigest}, &ans)
		h.waitIdle(pid)
	}
}

// An approval with edited args runs the edited call, and the
// conversation shows what ran; a substitute gives the model the human's
// text without running the call. Through proc.hil, a ctl line with
// args=, a JSON ctl line and a ctl substitute line.
func TestHilEditSubstitute(t *testing.T) {
	h := newPTHarness(t)
	ctl := func(pid, line string) error { return h.writeFile(h.root, "/proc/"+pid+"/ctl", line+"\n") }
	for _, c := range []struct {
		name string
		call string // the model's tool call
		// answer answers req; edited are the args that must run (nil:
		// a substitute), text the substituted result.
		answer func(t *testing.T, pid string, req *abi.HilRequest) error
		edited string
		text   string
		// file must hold content afterwards; absent must not exist.
		file, content, absent string
	}{
		{
			name: "write edited by proc.hil",
			call: `{"name":"Write","args":{"path":"/sys/notes.txt","content":"original"}}`,
			answer: func(t *testing.T, pid string, req *abi.HilRequest) error {
				var ans abi.HilResult
				err := h.call(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve",
					"args": map[string]any{"path": "~/notes.txt", "content": "edited content"}}, &ans)
				if err == nil && (!ans.Edited || ans.ArgsDigest != argsDigest(json.RawMessage(`{"content":"edited content","path":"~/notes.txt"}`)) || ans.ArgsDigest == req.ArgsDigest) {
					t.Errorf("approve with edited args: %+v", ans)
				}
				return err
			},
			edited: `{"content":"edited content","path":"~/notes.txt"}`,
			file:   "/home/root/notes.txt", content: "edited content",
		},
		{
			name: "write edited by a ctl line",
			call: `{"name":"Write","args":{"path":"/sys/other.txt","content":"x"}}`,
			answer: func(t *testing.T, pid string, req *abi.HilRequest) error {
				// JSON with a space must be quoted: unquoted, it is refused.
				if err := ctl(pid, `hil approve `+req.RequestID+` args={"path": "~/ctl.txt","content":"via-ctl"}`); err == nil {
					t.Error("unquoted JSON with a space was taken")
				}
				return ctl(pid, `hil approve `+req.RequestID+` args={"path":"~/ctl.txt","content":"via-ctl"}`)
			},
			edited: `{"content":"via-ctl","path":"~/ctl.txt"}`,
			file:   "/home/root/ctl.txt", content: "via-ctl",
		},
		{
			name: "shell edited by a quoted ctl line",
			call: `{"name":"Shell","args":{"command":"echo original > quoted.txt"}}`,
			answer: func(t *testing.T, pid string, req *abi.HilRequest) error {
				return ctl(pid, `hil approve `+req.RequestID+` args='{"command": "echo quoted edit > quoted.txt"}'`)
			},
			edited: `{"input":"echo quoted edit > quoted.txt"}`,
			file:   "/home/root/quoted.txt", content: "quoted edit\n",
		},
		{
			name: "shell edited by a JSON ctl line",
			call: `{"name":"Shell","args":{"command":"echo original > json.txt"}}`,
			answer: func(t *testing.T, pid string, req *abi.HilRequest) error {
				return ctl(pid, `hil {"requestId":"`+req.RequestID+`","decision":"approve","args":{"input":"echo edited-json > json.txt"}}`)
			},
			edited: `{"input":"echo edited-json > json.txt"}`,
			file:   "/home/root/json.txt", content: "edited-json\n",
		},
		{
			name: "substitute by proc.hil",
			call: `{"name":"Shell","args":{"command":"echo ran > sub.txt"}}`,
			answer: func(t *testing.T, pid string, req *abi.HilRequest) error {
				return h.call(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "substitute", "result": "sub.txt already exists; do not write it"}, nil)
			},
			text:   "sub.txt already exists; do not write it",
			absent: "/home/root/sub.txt",
		},
		{
			name: "substitute by a ctl line",
			call: `{"name":"Delete","args":{"path":"~/keep.txt"}}`,
			answer: func(t *testing.T, pid string, req *abi.HilRequest) error {
				return ctl(pid, "hil substitute "+req.RequestID+"  deleted (not really): x=1  ok")
			},
			text: "deleted (not really): x=1  ok",
			file: "/home/root/keep.txt", content: "keep me",
		},
		{
			name: "substitute by a JSON ctl line",
			call: `{"name":"Shell","args":{"command":"echo ran > subjson.txt"}}`,
			answer: func(t *testing.T, pid string, req *abi.HilRequest) error {
				return ctl(pid, `hil {"requestId":"`+req.RequestID+`","decision":"substitute","result":"from json"}`)
			},
			text:   "from json",
			absent: "/home/root/subjson.txt",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(h.realPath("/home/root/keep.txt"), []byte("keep me"), 0o644); err != nil {
				t.Fatal(err)
			}
			s, pid, run, req := h.hilAsk(c.call)
			if err := c.answer(t, pid, req); err != nil {
				t.Fatalf("answer: %v", err)
			}
			if st := h.waitRun(run); st != "done" {
				t.Fatalf("run: %s", st)
			}
			res := h.hilLastResult(pid)
			got := lastToolMessage(t, s)
			if c.text != "" {
				if !res.Substituted || res.Edited || res.IsError || res.Output != c.text {
					t.Errorf("substituted result %+v", res)
				}
				if got.Content != c.text || got.IsError {
					t.Errorf("the model got %+v, want the text %q", got, c.text)
				}
			} else {
				// The stored message escapes <, > and & (as JSON may).
				if ran, _ := canonicalJSON(res.Args); !res.Edited || res.Substituted || string(ran) != c.edited || res.ArgsDigest != argsDigest(json.RawMessage(c.edited)) {
					t.Errorf("edited result %+v, want args %s", res, c.edited)
				}
				if res.IsError || !strings.HasPrefix(got.Content, editedNote(json.RawMessage(c.edited))) {
					t.Errorf("the model got %+v", got)
				}
				var edited string
				h.k.Store.QueryRowContext(context.Background(), `SELECT edited_args FROM proc_hil WHERE request_id=?`, req.RequestID).Scan(&edited)
				if edited != c.edited {
					t.Errorf("request's edited args %s, want %s", edited, c.edited)
				}
			}
			if c.file != "" {
				if b, err := os.ReadFile(h.realPath(c.file)); err != nil || string(b) != c.content {
					t.Errorf("%s: %q (%v), want %q", c.file, b, err, c.content)
				}
			}
			if c.absent != "" {
				if _, err := os.Stat(h.realPath(c.absent)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s exists: the call ran (%v)", c.absent, err)
				}
			}
			// The request is decided: another answer is refused.
			if code := h.code(h.root, "proc.hil", map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}); code != 404 {
				t.Errorf("answering a decided request: code %d, want 404", code)
			}
		})
	}
}

// Bad answers are refused (400, 409) and leave the request pending, with
// nothing run.
func TestHilBadAnswers(t *testing.T) {
	h := newPTHarness(t)
	_, pid, run, req := h.hilAsk(`{"name":"Write","args":{"path":"/sys/bad.txt","content":"x"}}`)
	ans := func(extra map[string]any) map[string]any {
		a := map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	for _, c := range []struct {
		name string
		args map[string]any
		code int
	}{
		{"unknown field", ans(map[string]any{"args": map[string]any{"path": "~/bad.txt", "content": "x", "mode": 1}}), 400},
		{"wrong type", ans(map[string]any{"args": map[string]any{"path": 1, "content": "x"}}), 400},
		{"no path", ans(map[string]any{"args": map[string]any{"content": "x"}}), 400},
		{"not an object", ans(map[string]any{"args": []int{1}}), 400},
		{"args with deny", ans(map[string]any{"decision": "deny", "args": map[string]any{"path": "~/bad.txt", "content": "x"}}), 400},
		{"remember with substitute", ans(map[string]any{"decision": "substitute", "result": "r", "remember": true}), 400},
		{"substitute without result", ans(map[string]any{"decision": "substitute"}), 400},
		{"result with approve", ans(map[string]any{"result": "r"}), 400},
		{"result too long", ans(map[string]any{"decision": "substitute", "result": strings.Repeat("x", MaxSubstitute+1)}), 400},
		{"unknown decision", ans(map[string]any{"decision": "edit"}), 400},
		{"other digest", ans(map[string]any{"argsDigest": "sha256:" + strings.Repeat("0", 64)}), 409},
		{"unknown request", ans(map[string]any{"requestId": "hil_0000000000000000"}), 404},
	} {
		if code := h.code(h.root, "proc.hil", c.args); code != c.code {
			t.Errorf("%s: code %d, want %d", c.name, code, c.code)
		}
	}
	for _, line := range []string{
		"hil approve " + req.RequestID + " args={nope}",
		"hil approve " + req.RequestID + " sometimes",
		"hil approve " + req.RequestID + " args={\"path\":\"~/bad.txt\",\"content\":\"x\",\"extra\":true}",
		"hil substitute " + req.RequestID,
		"hil approve",
	} {
		if err := h.writeFile(h.root, "/proc/"+pid+"/ctl", line+"\n"); abi.Code(err) != 400 {
			t.Errorf("%q: %v, want a 400", line, err)
		}
	}
	if p := h.history(h.root, pid, "default").PendingHil; p == nil || p.RequestID != req.RequestID {
		t.Fatalf("after bad answers the request is not pending: %+v", p)
	}
	if st := h.runStatus(run); st != "waiting_hil" {
		t.Fatalf("run %s after bad answers", st)
	}
	if _, err := os.Stat(h.realPath("/home/root/bad.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a bad answer ran the call: %v", err)
	}
	h.must(h.root, "proc.hil", ans(map[string]any{"decision": "deny"}), nil)
	h.waitRun(run)
}

// A request past its expiry can no longer be answered (409), whether its
// timer expired it or the answer finds it past its time; its run gets
// "approval expired" and goes on.
func TestHilExpired(t *testing.T) {
	h := newPTHarness(t)
	for _, c := range []struct {
		name   string
		expiry string // config/ai/hil_expiry
		// pastDue moves the stored expiry into the past (its timer, an
		// hour away, has not fired).
		pastDue bool
		// restart restarts the manager while the request waits: the
		// restarted manager arms its timer.
		restart bool
	}{
		{name: "by its timer", expiry: "1s"},
		{name: "at the answer", expiry: "1h", pastDue: true},
		{name: "after a restart", expiry: "1s", restart: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.setCfg(h.root, "config/ai/hil_expiry", c.expiry)
			s, pid, run, req := h.hilAsk(`{"name":"Shell","args":{"command":"echo late > late.txt"}}`)
			approve := map[string]any{"pid": pid, "requestId": req.RequestID, "decision": "approve"}
			if c.pastDue {
				if _, err := h.k.Store.Exec(t.Context(), `UPDATE proc_hil SET expires_at=? WHERE request_id=?`, now()-1, req.RequestID); err != nil {
					t.Fatal(err)
				}
				if code := h.code(h.root, "proc.hil", approve); code != 409 {
					t.Fatalf("approving past the expiry: code %d, want 409", code)
				}
			}
			if c.restart {
				h.close()
				h.open()
				h.identities()
			}
			if st := h.waitRun(run); st != "done" {
				t.Fatalf("run: %s", st)
			}
			if res := h.hilLastResult(pid); !res.IsError || res.Output != resultExpired {
				t.Fatalf("expired result %+v", res)
			}
			if got := lastToolMessage(t, s); got.Content != resultExpired || !got.IsError {
				t.Fatalf("the model got %+v", got)
			}
			err := h.call(h.root, "proc.hil", approve, nil)
			if abi.Code(err) != 409 || !strings.Contains(err.Error(), "expired") {
				t.Fatalf("approving an expired request: %v, want a 409 saying it expired", err)
			}
			var st string
			h.k.Store.QueryRowContext(context.Background(), `SELECT status FROM proc_hil WHERE request_id=?`, req.RequestID).Scan(&st)
			if st != "expired" {
				t.Fatalf("request status %q", st)
			}
			if _, err := os.Stat(h.realPath("/home/root/late.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the expired call ran: %v", err)
			}
		})
	}
}

// The hil verb of a process's ctl file.
func TestHilVerb(t *testing.T) {
	for _, c := range []struct {
		line string
		want abi.HilArgs // Pid p_1
		bad  bool
	}{
		{line: "hil approve hil_1", want: abi.HilArgs{Decision: "approve", RequestID: "hil_1"}},
		{line: "hil deny hil_1", want: abi.HilArgs{Decision: "deny", RequestID: "hil_1"}},
		{line: "hil approve hil_1 remember", want: abi.HilArgs{Decision: "approve", RequestID: "hil_1", Remember: true}},
		{line: `hil approve hil_1 args={"path":"x"}`, want: abi.HilArgs{Decision: "approve", RequestID: "hil_1", Args: json.RawMessage(`{"path":"x"}`)}},
		{line: `hil approve hil_1 remember args='{"path": "a b"}'`, want: abi.HilArgs{Decision: "approve", RequestID: "hil_1", Remember: true, Args: json.RawMessage(`{"path": "a b"}`)}},
		{line: `hil approve hil_1 args={"path": "a b"}`, bad: true},
		{line: "hil approve hil_1 maybe", bad: true},
		{line: "hil approve", bad: true},
		{line: "hil substitute hil_1 the text, verbatim: a=b  c", want: abi.HilArgs{Decision: "substitute", RequestID: "hil_1", Result: "the text, verbatim: a=b  c"}},
		{line: "hil substitute hil_1", want: abi.HilArgs{Decision: "substitute", RequestID: "hil_1"}}, // proc.hil refuses it
	} {
		l, err := ns.ParseCtl(c.line)
		if err != nil {
			t.Fatalf("%q: %v", c.line, err)
		}
		b, err := hilVerb("p_1", l)
		call, args := b.Name(), b.Args()
		if c.bad {
			if abi.Code(err) != 400 {
				t.Errorf("%q: %v, want a 400", c.line, err)
			}
			continue
		}
		c.want.Pid = "p_1"
		got, _ := args.(*abi.HilArgs)
		if err != nil || call != "proc.hil" || got == nil || got.Pid != c.want.Pid || got.Decision != c.want.Decision || got.RequestID != c.want.RequestID ||
			got.Remember != c.want.Remember || string(got.Args) != string(c.want.Args) || got.Result != c.want.Result {
			t.Errorf("%q: %s %+v %v, want %+v", c.line, call, got, err, c.want)
		}
	}
}
