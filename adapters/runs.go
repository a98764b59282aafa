package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Run routes (seed 004 run_routes): a run started from a chat answers in
// that chat. The route is written when adapter.inbound starts the run;
// the room watches the bus (Kernel.Observe) for the run's signals: its
// approval requests and parked checkpoints are posted to the chat, and
// its final answer is, once the run ends. Each goes through the outbound
// ledger under a delivery id of its own ("reply:<run>", "hil:<request>",
// "checkpoint:<run>:<seq>"), so a signal seen twice (and the scan Start
// makes after a restart) posts nothing twice.

// Route states.
const (
	routeOpen = "open"
	routeDone = "done"
)

// chatTurns is how many more model calls "continue" in a chat gives a
// run that spent its budget.
const chatTurns = 10

// maxRecent is how many signals of unrouted runs the room remembers.
const maxRecent = 1024

// routeTTL is how long a run route stays open: a run older than this
// answers nowhere.
const routeTTL = 24 * time.Hour

// runRoute is an open run route.
type runRoute struct {
	RunID     string
	Uid       uint32
	Pid       string
	Trace     string
	Adapter   string
	Account   string
	Surface   abi.AdapterSurface
	ReplyToID string
	// Hil is the approval request the run waits on ("": none);
	// Checkpoint the checkpoint it is parked at (0: none).
	Hil        string
	Checkpoint int64
	// Reason is why the run parked at Checkpoint ("budget", ...).
	Reason string
}

// recentSignal is a signal of a run no route named when it came.
type recentSignal struct {
	run string
	ev  any
}

// job is one piece of the worker's work: a signal of a routed run.
type job struct {
	rt *runRoute
	ev any
}

// addRoute writes rt and opens it; the signals of its run already seen
// are queued.
func (r *Room) addRoute(ctx context.Context, rt *runRoute) error {
	surface, err := json.Marshal(rt.Surface)
	if err != nil {
		return abi.E(err)
	}
	now := r.now()
	err = r.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := r.st.TxExec(tx, `DELETE FROM adapter_run_routes WHERE run_id IN (SELECT run_id FROM adapter_run_routes
			WHERE created_at<? LIMIT 256)`, now.Add(-routeTTL).UnixMilli()); err != nil {
			return err
		}
		_, err := r.st.TxExec(tx, `INSERT INTO adapter_run_routes(run_id, uid, pid, trace_id, adapter, account_id, surface, reply_to_id, state, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open', ?) ON CONFLICT DO NOTHING`,
			rt.RunID, rt.Uid, rt.Pid, rt.Trace, rt.Adapter, rt.Account, string(surface), rt.ReplyToID, now.UnixMilli())
		return err
	})
	if err != nil {
		return abi.E(err)
	}
	r.mu.Lock()
	r.routes[rt.RunID] = rt
	kept := r.recent[:0]
	for _, s := range r.recent {
		if s.run == rt.RunID {
			r.jobs = append(r.jobs, job{rt: rt, ev: s.ev})
		} else {
			kept = append(kept, s)
		}
	}
	r.recent = kept
	r.mu.Unlock()
	r.poke()
	return nil
}

// loadRoutes opens the routes the store holds open and queues, for each,
// what its run owes its chat now: its answer if it ended, its approval
// request or checkpoint if it waits on one.
func (r *Room) loadRoutes(ctx context.Context) error {
	rows, err := r.st.QueryContext(ctx, `SELECT run_id, uid, pid, trace_id, adapter, account_id, surface, reply_to_id, hil_request_id
		FROM adapter_run_routes WHERE state='open' AND created_at>=?`, r.now().Add(-routeTTL).UnixMilli())
	if err != nil {
		return abi.E(err)
	}
	var open []*runRoute
	for rows.Next() {
		rt := &runRoute{}
		var surface string
		if err := rows.Scan(&rt.RunID, &rt.Uid, &rt.Pid, &rt.Trace, &rt.Adapter, &rt.Account, &surface, &rt.ReplyToID, &rt.Hil); err != nil {
			rows.Close()
			return abi.E(err)
		}
		if json.Unmarshal([]byte(surface), &rt.Surface) == nil {
			open = append(open, rt)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return abi.E(err)
	}
	r.mu.Lock()
	for _, rt := range open {
		r.routes[rt.RunID] = rt
		r.jobs = append(r.jobs, job{rt: rt, ev: scanRun{}})
	}
	r.mu.Unlock()
	r.poke()
	return nil
}

// scanRun is the job of a route loaded at Start: ask proc where its run
// stands.
type scanRun struct{}

// observe is the room's observer of the bus: it runs with the bus
// locked, so it only queues the signals of routed runs (and remembers
// those of runs not routed yet).
func (r *Room) observe(ev *kernel.Event, _ kernel.Audience) {
	var run string
	switch p := ev.Payload.(type) {
	case abi.RunFinished:
		run = p.RunID
	case abi.HilRequested:
		if p.Request == nil {
			return
		}
		run = p.Request.RunID
	case abi.RunCheckpointed:
		run = p.RunID
	case abi.RunText:
		if ev.Signal != abi.SigProcRunStream.Name {
			return
		}
		r.mu.Lock()
		if rt := r.routes[p.RunID]; rt != nil {
			r.streamLocked(rt, p.Text)
		}
		r.mu.Unlock()
		return
	default:
		return
	}
	r.mu.Lock()
	if rt := r.routes[run]; rt != nil {
		r.jobs = append(r.jobs, job{rt: rt, ev: ev.Payload})
	} else {
		if len(r.recent) >= maxRecent { // the older half goes, at once
			r.recent = append(r.recent[:0], r.recent[maxRecent/2:]...)
		}
		r.recent = append(r.recent, recentSignal{run: run, ev: ev.Payload})
	}
	r.mu.Unlock()
	r.poke()
}

// streamLocked adds text to the stream of rt's answer and wakes its
// bridge. r.mu is held.
func (r *Room) streamLocked(rt *runRoute, text string) {
	key := accountKey(rt.Adapter, rt.Account)
	m := r.streams[key]
	if m == nil {
		m = map[string]*abi.AdapterStream{}
		r.streams[key] = m
	}
	s := m[rt.RunID]
	if s == nil {
		if len(m) >= 64 {
			return // a bridge that does not ask keeps no more than this
		}
		s = &abi.AdapterStream{StreamKey: rt.RunID, Surface: rt.Surface, ReplyToID: rt.ReplyToID, Text: r.streamed[rt.RunID]}
		m[rt.RunID] = s
	}
	if len(s.Text)+len(text) <= maxOutText {
		s.Text += text
	}
	r.streamed[rt.RunID] = s.Text
	if ch := r.waiters[key]; ch != nil {
		close(ch)
		delete(r.waiters, key)
	}
}

// poke wakes the worker.
func (r *Room) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// worker does the queued jobs, in order, until Close.
func (r *Room) worker() {
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.stop
		cancel()
	}()
	for {
		r.mu.Lock()
		var j job
		ok := len(r.jobs) > 0
		if ok {
			j = r.jobs[0]
			r.jobs[0] = job{}
			r.jobs = r.jobs[1:]
		}
		r.mu.Unlock()
		if !ok {
			select {
			case <-r.stop:
				return
			case <-r.wake:
			}
			continue
		}
		if err := r.do(ctx, j); err != nil && ctx.Err() == nil {
			r.log.Warn("adapters: a run's message to its chat", "run", j.rt.RunID, "err", err)
		}
	}
}

// do does one job.
func (r *Room) do(ctx context.Context, j job) error {
	rt := j.rt
	switch p := j.ev.(type) {
	case abi.RunFinished:
		return r.finish(ctx, rt, p.ConversationID, p.Status, p.Error)
	case abi.HilRequested:
		return r.askHil(ctx, rt, p.Request)
	case abi.RunCheckpointed:
		return r.askCheckpoint(ctx, rt, p)
	case scanRun:
		return r.scan(ctx, rt)
	}
	return nil
}

// as is the caller acting as the route's user.
func (r *Room) as(ctx context.Context, uid uint32) (*kernel.Caller, error) {
	id, err := r.k.IdentityOf(ctx, uid)
	if err != nil {
		return nil, err
	}
	return &kernel.Caller{Identity: id}, nil
}

// scan asks proc where a route's run stands after a restart: running
// (its signals will come), waiting on an approval (asked again, under
// the same delivery id), or ended (answered).
func (r *Room) scan(ctx context.Context, rt *runRoute) error {
	as, err := r.as(ctx, rt.Uid)
	if err != nil {
		return err
	}
	info, err := kernel.Do(ctx, r.k, as, abi.ProcRunGet, &abi.PidArgs{Pid: rt.Pid})
	if err != nil {
		return err
	}
	if info.RunID == rt.RunID && info.FinishedAt == nil {
		if info.Hil != nil {
			return r.askHil(ctx, rt, info.Hil)
		}
		return nil
	}
	// Not the process's current run: it ended, or waits in the queue
	// (its message is not in the conversation yet).
	text, found, err := r.answerText(ctx, rt, info.ConversationID)
	if err != nil || !found {
		return err
	}
	return r.finishWith(ctx, rt, text, abi.RunCompleted, "")
}

// finish posts a run's answer to its chat and closes its route.
func (r *Room) finish(ctx context.Context, rt *runRoute, conv, status, runErr string) error {
	text, _, err := r.answerText(ctx, rt, conv)
	if err != nil {
		return err
	}
	return r.finishWith(ctx, rt, text, status, runErr)
}

// finishWith posts text (or what the run's end says when there is none)
// to the route's chat and closes the route.
func (r *Room) finishWith(ctx context.Context, rt *runRoute, text, status, runErr string) error {
	switch {
	case text != "":
	case runErr != "":
		text = "(the run failed: " + runErr + ")"
	case status == abi.RunAborted:
		text = "(the run was aborted)"
	default:
		text = "(no answer)"
	}
	if _, err := r.enqueue(ctx, delivery{ID: "reply:" + rt.RunID, Adapter: rt.Adapter, Account: rt.Account, Surface: rt.Surface,
		Text: text, ReplyToID: rt.ReplyToID, StreamKey: rt.RunID}); err != nil {
		return err
	}
	if _, err := r.st.Exec(ctx, `UPDATE adapter_run_routes SET state='done' WHERE run_id=?`, rt.RunID); err != nil {
		return abi.E(err)
	}
	r.mu.Lock()
	delete(r.routes, rt.RunID)
	delete(r.streamed, rt.RunID)
	if m := r.streams[accountKey(rt.Adapter, rt.Account)]; m != nil {
		delete(m, rt.RunID)
	}
	r.mu.Unlock()
	return nil
}

// answerText is the run's answer: the text of the last assistant message
// after the message that started it (its trace), read from the
// conversation's history as the route's user; found is false when that
// message is not in the conversation.
func (r *Room) answerText(ctx context.Context, rt *runRoute, conv string) (text string, found bool, err error) {
	as, err := r.as(ctx, rt.Uid)
	if err != nil {
		return "", false, err
	}
	head, err := kernel.Do(ctx, r.k, as, abi.ProcHistory, &abi.HistoryArgs{Pid: rt.Pid, ConversationID: conv, Limit: 1})
	if err != nil {
		return "", false, err
	}
	off := 0
	if head.MessageCount != nil && *head.MessageCount > 200 {
		off = int(*head.MessageCount) - 200
	}
	h, err := kernel.Do(ctx, r.k, as, abi.ProcHistory, &abi.HistoryArgs{Pid: rt.Pid, ConversationID: conv, Offset: off, Limit: 200})
	if err != nil {
		return "", false, err
	}
	start := -1
	for i, m := range h.Messages {
		if m.TraceID == rt.Trace {
			start = i
		}
	}
	if start < 0 {
		return "", false, nil
	}
	for _, m := range h.Messages[start+1:] {
		if m.Kind != "" && m.Role == "user" {
			break // the next message's run
		}
		if m.Role != "assistant" {
			continue
		}
		var ac struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &ac) == nil && strings.TrimSpace(ac.Text) != "" {
			text = ac.Text
		}
	}
	return text, true, nil
}

// askHil posts a run's approval request to its chat and notes that the
// chat's next yes / no / always from the route's user answers it.
func (r *Room) askHil(ctx context.Context, rt *runRoute, req *abi.HilRequest) error {
	if req == nil {
		return nil
	}
	if _, err := r.st.Exec(ctx, `UPDATE adapter_run_routes SET hil_request_id=? WHERE run_id=?`, req.RequestID, rt.RunID); err != nil {
		return abi.E(err)
	}
	r.mu.Lock()
	rt.Hil = req.RequestID
	r.mu.Unlock()
	_, err := r.enqueue(ctx, delivery{ID: "hil:" + req.RequestID, Adapter: rt.Adapter, Account: rt.Account, Surface: rt.Surface,
		Text: hilPrompt(req), ReplyToID: rt.ReplyToID})
	return err
}

// hilPrompt is an approval request as a chat shows it.
func hilPrompt(req *abi.HilRequest) string {
	args := string(req.Args)
	if len(args) > 300 {
		args = args[:300] + "…"
	}
	where := ""
	if req.Target != "" {
		where = " on " + req.Target
	}
	return fmt.Sprintf("Run %s `%s`%s? yes / no / always", req.ToolName, args, where)
}

// askCheckpoint posts a supervised run's parked checkpoint to its chat:
// continue / stop from the route's user decides it.
func (r *Room) askCheckpoint(ctx context.Context, rt *runRoute, p abi.RunCheckpointed) error {
	if p.State != abi.RunPaused {
		return nil
	}
	r.mu.Lock()
	rt.Checkpoint, rt.Reason = p.Seq, p.Reason
	r.mu.Unlock()
	_, err := r.enqueue(ctx, delivery{ID: fmt.Sprintf("checkpoint:%s:%d", rt.RunID, p.Seq), Adapter: rt.Adapter, Account: rt.Account,
		Surface: rt.Surface, Text: fmt.Sprintf("The run paused (%s). continue / stop", p.Reason), ReplyToID: rt.ReplyToID})
	return err
}

// answer decides, as the linked user, the approval request or parked
// checkpoint of this user's run started from this chat: false when none
// waits (the message is then an ordinary one). Another user's word in the
// same chat is never an answer: it finds no route of theirs.
func (r *Room) answer(ctx context.Context, as *kernel.Caller, kind, account string, s abi.AdapterSurface, ans string) (string, bool) {
	r.mu.Lock()
	var rt *runRoute
	var hil string
	var seq int64
	for _, x := range r.routes {
		if x.Uid == as.Uid && x.Adapter == kind && x.Account == account && x.Surface.Kind == s.Kind && x.Surface.ID == s.ID &&
			(x.Hil != "" || x.Checkpoint != 0) {
			rt, hil, seq = x, x.Hil, x.Checkpoint
			break
		}
	}
	r.mu.Unlock()
	if rt == nil {
		return "", false
	}
	switch {
	case hil != "" && (ans == answerApprove || ans == answerDeny || ans == answerAlways):
		a := &abi.HilArgs{Pid: rt.Pid, RequestID: hil, Decision: "approve", Remember: ans == answerAlways}
		if ans == answerDeny {
			a.Decision = "deny"
		}
		r.mu.Lock()
		rt.Hil = ""
		r.mu.Unlock()
		if _, err := r.st.Exec(ctx, `UPDATE adapter_run_routes SET hil_request_id='' WHERE run_id=?`, rt.RunID); err != nil {
			r.log.Warn("adapters: clearing an answered request", "err", err)
		}
		if _, err := kernel.Do(ctx, r.k, as, abi.ProcHil, a); err != nil {
			return "error: " + err.Error(), true
		}
		if a.Decision == "deny" {
			return "Denied.", true
		}
		if a.Remember {
			return "Approved, and allowed from now on.", true
		}
		return "Approved.", true
	case seq != 0 && (ans == answerContinue || ans == answerStop):
		r.mu.Lock()
		rt.Checkpoint = 0
		reason := rt.Reason
		r.mu.Unlock()
		// stop aborts the run; continue goes on, past a spent budget with
		// chatTurns more model calls.
		d := abi.Directive{Type: "continue"}
		switch {
		case ans == answerStop:
			d = abi.Directive{Type: "abort", Reason: "stopped from the chat"}
		case reason == "budget":
			d = abi.Directive{Type: "extend-budget", Turns: chatTurns}
		}
		if _, err := kernel.Do(ctx, r.k, as, abi.ProcDirective, &abi.DirectiveArgs{Pid: rt.Pid, Checkpoint: &seq, Directive: d}); err != nil {
			return "error: " + err.Error(), true
		}
		if ans == answerStop {
			return "Stopping.", true
		}
		return "Continuing.", true
	}
	return "", false
}
