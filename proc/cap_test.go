package proc

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// capProbe is a model that probes the process capability its run acts
// with: for a message (a user's, an event's) it calls Shell with `echo
// ran` in the home, which a run narrowed to ~/ci is refused (403 "process
// capability") and a wide one runs; a message "MAIL:<pid>" or
// "CALL:<pid>" makes it mail or call that process instead; a tool
// result, it answers "done".
type capProbe struct{}

func (capProbe) Name() string { return "cap-probe" }

func (capProbe) Complete(ctx context.Context, req model.Request, delta func(string)) (model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.Tool {
		return model.Response{Text: "done"}, nil
	}
	call := model.ToolCall{ID: "call_1", Name: "Shell", Args: json.RawMessage(`{"command":"echo ran","cwd":"~"}`)}
	for _, verb := range []string{"MAIL", "CALL"} {
		if _, rest, ok := strings.Cut(last.Content, verb+":"); ok {
			pid, _, _ := strings.Cut(rest, " ")
			call.Name = map[string]string{"MAIL": "Mail", "CALL": "Call"}[verb]
			call.Args, _ = json.Marshal(map[string]string{"pid": strings.TrimSpace(pid), "message": "probe please"})
		}
	}
	return model.Response{ToolCalls: []model.ToolCall{call}}, nil
}

// The narrowing of the process capability travels with the work: a
// process spawned with a narrowed token, a message it sends (and so the
// conversation the message enters, until a reset), a mail or call from a
// narrowed run and the reply of one, an answer to a HIL request, a
// steering message, each across a restart: the agent's Shell then acts
// within the narrowing, whoever approved the call; nothing narrowed stays
// wide. Every probe is a Shell call in the home, which the token's
// narrowing (~/ci only) refuses.
func TestNarrowingTravels(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[1000] = capProbe{}
	h.mu.Unlock()
	ci := &abi.ProcessCap{Networks: []string{abi.NetworkNone}, Mounts: []abi.CapMount{{Prefix: "~/ci", Mode: abi.MountRW}}}
	// token is alice attached with a token made with --process ci.
	token := func() *kernel.Identity { id := *h.alice; id.Process = ci; return &id }
	// spawn makes a process of alice's as id, whose Shell calls alice has
	// approved for good (remember).
	spawn := func(id *kernel.Identity, label string, remember bool) string {
		t.Helper()
		pid := h.spawn(id, label)
		if remember {
			if _, err := h.k.Store.Exec(context.Background(), `UPDATE proc_processes SET hil_allow='["shell.exec"]' WHERE pid=?`, pid); err != nil {
				t.Fatal(err)
			}
		}
		return pid
	}
	// probes are what the Shell calls of pid's conversation cid met, in
	// order: "narrowed" (refused by the process capability), "wide"
	// (ran), or the output.
	probes := func(pid, cid string) []string {
		t.Helper()
		var out []string
		var hist ptHist // read while the run may go on: its count may lag
		h.must(h.alice, "proc.history", map[string]any{"pid": pid, "conversationId": cid}, &hist)
		for _, m := range hist.Messages {
			if m.Role != "toolResult" {
				continue
			}
			r := ptTool(t, m)
			switch {
			case r.ToolName != "Shell":
				continue
			case strings.Contains(r.Output, "process capability"):
				out = append(out, "narrowed")
			case strings.Contains(r.Output, `"output":"ran`):
				out = append(out, "wide")
			default:
				out = append(out, r.Output)
			}
		}
		return out
	}
	expect := func(what, pid, cid string, want ...string) {
		t.Helper()
		eventually(t, func() bool { return len(probes(pid, cid)) >= len(want) },
			func() string { return what + ": " + strings.Join(probes(pid, cid), ", ") })
		h.waitIdle(pid)
		if got := probes(pid, cid); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the Shell probes of %s/%s met %q, want %q", what, pid, cid, got, want)
		}
	}
	pending := func(pid string) string {
		t.Helper()
		var id string
		eventually(t, func() bool {
			return h.k.Store.QueryRowContext(context.Background(), `SELECT request_id FROM proc_hil WHERE pid=? AND status='pending'`, pid).Scan(&id) == nil
		}, func() string { return pid + " asks nothing" })
		return id
	}
	approve := func(id *kernel.Identity, pid string) {
		t.Helper()
		h.must(id, "proc.hil", map[string]any{"pid": pid, "requestId": pending(pid), "decision": "approve"}, nil)
	}

	t.Run("Message", func(t *testing.T) {
		pid := spawn(h.alice, "msg", true)
		h.openConv(h.alice, pid, "other")
		h.send(h.alice, pid, "", "probe")
		expect("alice's own message", pid, "default", "wide")
		h.send(token(), pid, "", "probe")
		expect("the token's message", pid, "default", "wide", "narrowed")
		// The token's words stay in the conversation: alice's next
		// message there runs within their narrowing; another
		// conversation does not hold them.
		h.send(h.alice, pid, "", "probe")
		expect("alice's message after the token's", pid, "default", "wide", "narrowed", "narrowed")
		h.send(h.alice, pid, "other", "probe")
		expect("another conversation", pid, "other", "wide")
		var conv abi.ConversationGetResult
		h.must(h.alice, "proc.conversation.get", map[string]any{"pid": pid}, &conv)
		if conv.Conversation == nil || !reflect.DeepEqual(conv.Conversation.Cap, ci) {
			t.Errorf("the conversation shows %+v, want its narrowing", conv.Conversation)
		}
		// A reset archives the words and their narrowing.
		h.must(h.alice, "proc.conversation.reset", map[string]any{"pid": pid}, nil)
		h.send(h.alice, pid, "", "probe")
		expect("after a reset", pid, "default", "wide")
	})

	t.Run("Spawn", func(t *testing.T) {
		var sp struct{ Pid string }
		h.must(token(), "proc.spawn", map[string]any{"profile": "task", "label": "spawned", "prompt": "probe"}, &sp)
		// The spawn's own prompt ran as soon as it was sent: alice had
		// approved nothing yet, so it asks.
		approve(h.alice, sp.Pid)
		expect("the spawn's prompt", sp.Pid, "default", "narrowed")
		// The process is narrowed for its life: alice's own message, in
		// a conversation of her own, is too.
		h.openConv(h.alice, sp.Pid, "mine")
		h.send(h.alice, sp.Pid, "mine", "probe")
		approve(h.alice, sp.Pid)
		expect("alice's message to the spawned process", sp.Pid, "mine", "narrowed")
		var list struct{ Processes []abi.Process }
		h.must(h.alice, "proc.list", map[string]any{}, &list)
		for _, p := range list.Processes {
			if want := p.Pid == sp.Pid; want != (p.Cap != nil) || want && !reflect.DeepEqual(p.Cap, ci) {
				t.Errorf("proc.list shows %s with the narrowing %+v", p.Pid, p.Cap)
			}
		}
	})

	t.Run("IPC", func(t *testing.T) {
		// A narrowed run's mail narrows its target's conversation.
		target := spawn(h.alice, "mail-target", true)
		source := spawn(h.alice, "mail-source", true)
		h.send(token(), source, "", "MAIL:"+target)
		expect("mail from a narrowed run", target, "default", "narrowed")
		// A call's reply carries the narrowing of the run that answered.
		caller := spawn(h.alice, "caller", true)
		var sp struct{ Pid string }
		h.must(token(), "proc.spawn", map[string]any{"profile": "task", "label": "callee"}, &sp)
		if _, err := h.k.Store.Exec(context.Background(), `UPDATE proc_processes SET hil_allow='["shell.exec"]' WHERE pid=?`, sp.Pid); err != nil {
			t.Fatal(err)
		}
		h.send(h.alice, caller, "", "CALL:"+sp.Pid)
		expect("the narrowed callee", sp.Pid, "default", "narrowed")
		expect("the reply to a wide caller", caller, "default", "narrowed")
	})

	t.Run("Answer", func(t *testing.T) {
		// alice's own run asks; the token's approval runs the call
		// within the token's narrowing.
		pid := spawn(h.alice, "answer", false)
		h.send(h.alice, pid, "", "probe")
		approve(token(), pid)
		expect("a call the token approved", pid, "default", "narrowed")
	})

	t.Run("Steer", func(t *testing.T) {
		// The token steers alice's run (waiting on her approval): the
		// call alice approves ran before the steering message entered;
		// the probe the steering message asks for is narrowed.
		pid := spawn(h.alice, "steer", false)
		h.send(h.alice, pid, "", "probe")
		pending(pid)
		var r ptSend
		h.must(token(), "proc.send", map[string]any{"pid": pid, "message": "probe again", "mode": "steer"}, &r)
		if r.Status != "steered" {
			t.Fatalf("steer: %+v", r)
		}
		approve(h.alice, pid)
		approve(h.alice, pid)
		expect("a steered run", pid, "default", "wide", "narrowed")
	})

	t.Run("Restart", func(t *testing.T) {
		// A run of the token's message waits on alice's approval, and
		// another message of the token's waits in the queue of a
		// process busy with alice's run, when the daemon stops.
		asked := spawn(h.alice, "asked", false)
		h.send(token(), asked, "", "probe")
		pending(asked)
		busy := spawn(h.alice, "busy", false)
		h.send(h.alice, busy, "", "probe")
		pending(busy)
		h.openConv(h.alice, busy, "later")
		if r := h.send(token(), busy, "later", "probe"); !r.Queued {
			t.Fatalf("not queued: %+v", r)
		}
		h.close()
		h.open()
		h.mu.Lock()
		h.provs[1000] = capProbe{}
		h.mu.Unlock()
		approve(h.alice, asked)
		expect("a narrowed run resumed", asked, "default", "narrowed")
		approve(h.alice, busy)
		approve(h.alice, busy)
		expect("alice's run resumed", busy, "default", "wide")
		expect("a narrowed message queued across the restart", busy, "later", "narrowed")
	})
}

// What else brings words into a conversation narrows it as a message
// does: a fork (of live messages, or of a segment whose conversation was
// reset since), a summary written in a compaction, a directive, a watch's
// delivery; a watch armed with no narrowing leaves its watcher's
// conversation as it was.
func TestNarrowingConversationOps(t *testing.T) {
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[1000] = capProbe{} // every message asks to run a command: the run waits
	h.mu.Unlock()
	ci := &abi.ProcessCap{Networks: []string{abi.NetworkNone}, Mounts: []abi.CapMount{{Prefix: "~/ci", Mode: abi.MountRW}}}
	token := func() *kernel.Identity { id := *h.alice; id.Process = ci; return &id }
	convCap := func(pid, cid string) *abi.ProcessCap {
		t.Helper()
		var r abi.ConversationGetResult
		h.must(h.alice, "proc.conversation.get", map[string]any{"pid": pid, "conversationId": cid}, &r)
		if r.Conversation == nil {
			t.Fatalf("no conversation %s/%s", pid, cid)
		}
		return r.Conversation.Cap
	}
	want := func(what string, got, want *abi.ProcessCap) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: narrowed by %+v, want %+v", what, got, want)
		}
	}
	// ask sends text to pid as id and waits for its run to ask alice.
	ask := func(id *kernel.Identity, pid, text string) ptSend {
		t.Helper()
		r := h.send(id, pid, "", text)
		h.waitRun(r.RunID, "waiting_hil")
		return r
	}
	// deny denies what r asks until it ends (a message injected into it
	// makes it ask again).
	deny := func(pid string, r ptSend) {
		t.Helper()
		eventually(t, func() bool {
			switch h.runStatus(r.RunID) {
			case "done", "error", "aborted":
				return true
			}
			var id string
			if h.k.Store.QueryRowContext(context.Background(), `SELECT request_id FROM proc_hil WHERE pid=? AND status='pending'`, pid).Scan(&id) == nil {
				h.must(h.alice, "proc.hil", map[string]any{"pid": pid, "requestId": id, "decision": "deny"}, nil)
			}
			return false
		}, func() string { return "run " + r.RunID + " is " + h.runStatus(r.RunID) })
		if st := h.runStatus(r.RunID); st != "done" {
			t.Fatalf("run %s: %s", r.RunID, st)
		}
	}

	// Fork of live messages.
	a := h.spawn(h.alice, "fork")
	deny(a, ask(token(), a, "probe"))
	want("a conversation the token wrote to", convCap(a, "default"), ci)
	last := h.history(h.alice, a, "").Messages
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": a, "throughMessageId": last[len(last)-1].ID, "targetConversationId": "f1"}, nil)
	want("its fork", convCap(a, "f1"), ci)

	// A summary written with the token; its segment keeps the
	// narrowing past a reset, and a fork of it carries it.
	b := h.spawn(h.alice, "compact")
	deny(b, ask(h.alice, b, "probe"))
	want("alice's own conversation", convCap(b, "default"), nil)
	var cr abi.CompactResult
	h.must(token(), "proc.conversation.compact", map[string]any{"pid": b, "keepLast": 0, "summary": "the token's summary"}, &cr)
	want("a conversation the token summarised", convCap(b, "default"), ci)
	h.must(h.alice, "proc.conversation.reset", map[string]any{"pid": b}, nil)
	want("after a reset", convCap(b, "default"), nil)
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": b, "segmentId": cr.Segment.ID, "targetConversationId": "f2"}, nil)
	want("a fork of the segment", convCap(b, "f2"), ci)

	// A directive given with the token to alice's run.
	c := h.spawn(h.alice, "directive")
	r := ask(h.alice, c, "probe")
	h.must(token(), "proc.directive", map[string]any{"pid": c, "directive": map[string]any{"type": "continue",
		"effects": []any{map[string]any{"op": "inject-message", "content": "the token's words"}}}}, nil)
	want("a run the token directed", convCap(c, "default"), ci)
	deny(c, r)

	// Watches armed with the token, and by alice.
	for _, x := range []struct {
		who  *kernel.Identity
		want *abi.ProcessCap
	}{{token(), ci}, {h.alice, nil}} {
		watcher, watched := h.spawn(h.alice, "watcher"), h.spawn(h.alice, "watched")
		h.must(x.who, "signal.watch", map[string]any{"watcherPid": watcher, "signal": "proc.run.finished", "processId": watched}, nil)
		deny(watched, ask(h.alice, watched, "probe"))
		eventually(t, func() bool { return h.sqlCount(`SELECT count(*) FROM proc_runs WHERE pid=?`, watcher) > 0 },
			func() string { return "the watch delivered nothing" })
		want("a watch's delivery", convCap(watcher, "default"), x.want)
	}
}
