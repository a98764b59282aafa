package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// A run at its checkpoints (docs/runs.md): what each checkpoint applies
// (a directive sent ahead, steering messages, a tool cap, a check-in),
// where the run parks and how it goes on, and what a restart restores.
// The run settings are control.go's; the decisions directive.go's.

// parkedCh returns a channel closed when a run of pr next parks (pr.mu
// held).
func (pr *process) parkedCh() chan struct{} {
	if pr.parkWait == nil {
		pr.parkWait = make(chan struct{})
	}
	return pr.parkWait
}

// atCheckpoint is checkpoint r.check.seq+1 of run r, before a model call
// (first: the run's first, which parks only for a budget or a stop). It
// applies the directive decided for it and the steering messages, then
// parks if a decision is asked for. It returns "aborted" when the run is
// to end.
func (m *engine) atCheckpoint(ctx context.Context, pr *process, r *activeRun, first bool) (string, error) {
	pr.mu.Lock()
	ctl := m.controlLocked(ctx, pr)
	// The first model call of a run is a checkpoint only if it parks
	// (a budget spent, a stop): its number is taken then.
	seq := r.check.seq + 1
	decided := false // by a directive sent before it was reached, whose effects are applied
	if !first || r.check.resume != "" {
		r.check.seq = seq
		decided = r.check.pending[seq]
		delete(r.check.pending, seq)
	}
	steer := pr.steer
	pr.steer = 0
	resumeReason := r.check.resume
	r.check.resume = ""
	pr.mu.Unlock()
	if steer > 0 {
		if err := m.injectSteer(ctx, pr, r); err != nil {
			return "", err
		}
	}
	if ctx.Err() != nil {
		return "aborted", nil
	}
	pr.mu.Lock()
	reason, soft := resumeReason, resumeReason == "supervised"
	if reason == "" {
		switch spent := ctl.exhausted(time.Since(r.check.started)); {
		case spent != "":
			if ctl.Budget.OnExhaust == "abort" {
				pr.mu.Unlock()
				m.processEvent(ctx, pr, r, "budget spent ("+spent+"): the run is aborted")
				return "aborted", nil
			}
			reason = "budget"
		case ctl.Stop:
			reason = "stop"
		case ctl.Supervise && !first:
			reason, soft = "supervised", true
		}
	}
	grace := ctl.grace()
	if reason != "" && r.check.seq < seq {
		r.check.seq = seq
		decided = r.check.pending[seq]
		delete(r.check.pending, seq)
	}
	pr.mu.Unlock()
	if reason == "" || decided {
		return "", nil // nothing to ask, or decided before it was reached
	}
	return m.park(ctx, pr, r, seq, reason, soft, grace, nil)
}

// park parks r at checkpoint seq until it is decided: a directive, a
// start, or (soft) its grace passing; the caller going (an abort, Close)
// ends the run.
func (m *engine) park(ctx context.Context, pr *process, r *activeRun, seq int64, reason string, soft bool, grace time.Duration, until <-chan struct{}) (string, error) {
	pr.mu.Lock()
	cp := &abi.RunCheckpoint{Seq: seq, Reason: reason, ParkedAt: now(), Snapshot: r.check.snapshot(reason)}
	if soft {
		t := cp.ParkedAt + grace.Milliseconds()
		cp.SoftContinueAt = &t
	}
	decide := make(chan abi.Directive, 1)
	r.check.parked, r.check.decide = cp, decide
	if pr.parkWait != nil {
		close(pr.parkWait)
		pr.parkWait = nil
	}
	pr.mu.Unlock()
	snap, _ := json.Marshal(cp)
	if _, err := m.st.Exec(ctx, `UPDATE proc_runs SET checkpoint=?, park=? WHERE run_id=?`, seq, string(snap), r.id); err != nil && ctx.Err() == nil {
		return "", err
	}
	if err := m.storeControl(context.WithoutCancel(ctx), pr); err != nil {
		m.log.Error("proc: save run settings", "pid", pr.pid, "err", err)
	}
	state := abi.RunPaused
	if soft {
		state = abi.RunAwaitingDecision
	}
	signal(m, pr.uid, abi.SigProcRunCheckpoint, abi.RunCheckpointed{Pid: pr.pid, RunID: r.id, Seq: seq, Reason: reason, Snapshot: cp.Snapshot,
		SoftContinueAt: cp.SoftContinueAt, State: state})
	var timer <-chan time.Time
	if soft {
		t := time.NewTimer(grace)
		defer t.Stop()
		timer = t.C
	}
	how := "directive"
	select {
	case <-decide:
	case <-until:
		won, err := m.recordDirective(context.WithoutCancel(ctx), r.id, seq, abi.Directive{Type: "continue"}, "tool-finished")
		if err != nil {
			return "", err
		}
		how = "tool-finished"
		if !won {
			select {
			case <-decide:
				how = "directive"
			case <-ctx.Done():
				return "aborted", nil
			}
		}
	case <-timer:
		won, err := m.recordDirective(context.WithoutCancel(ctx), r.id, seq, abi.Directive{Type: "continue"}, "soft-continue")
		if err != nil {
			return "", err
		}
		how = "soft-continue"
		if !won { // a directive came first: it is on its way
			select {
			case <-decide:
				how = "directive"
			case <-ctx.Done():
				return "aborted", nil
			}
		}
	case <-ctx.Done():
		return "aborted", nil
	}
	pr.mu.Lock()
	r.check.parked, r.check.decide = nil, nil
	pr.mu.Unlock()
	if _, err := m.st.Exec(ctx, `UPDATE proc_runs SET park=NULL WHERE run_id=?`, r.id); err != nil && ctx.Err() == nil {
		return "", err
	}
	signal(m, pr.uid, abi.SigProcRunResumed, abi.RunResumed{Pid: pr.pid, RunID: r.id, Seq: seq, How: how})
	if ctx.Err() != nil {
		return "aborted", nil
	}
	return "", nil
}

// snapshot is the run's state at a checkpoint (pr.mu held).
func (c *runCheck) snapshot(reason string) abi.CheckpointSnapshot {
	desc := map[string]string{
		"budget":       "a budget is spent: extend it to continue",
		"stop":         "stopped as asked: start or direct it to continue",
		"supervised":   "supervised: continues by itself after its grace",
		"tool-checkin": "a tool call runs past its check-in time; it keeps running",
	}[reason]
	return abi.CheckpointSnapshot{ElapsedMs: time.Since(c.started).Milliseconds(), Steps: c.steps, TokensIn: c.tokIn, TokensOut: c.tokOut,
		CostUSD: c.cost, ToolCalls: c.toolCalls, LastTool: c.lastTool, Description: desc}
}

// injectSteer moves the steering messages waiting for pr's run into its
// conversation, in order, as the messages they are; the narrowing each
// carries narrows the conversation before its text enters.
func (m *engine) injectSteer(ctx context.Context, pr *process, r *activeRun) error {
	rows, err := m.st.QueryContext(ctx, `SELECT id,message,role,process_cap FROM proc_queue WHERE pid=? AND mode='steer' ORDER BY id`, pr.pid)
	if err != nil {
		return err
	}
	type steer struct {
		id         int64
		text, role string
		cap        sql.NullString
	}
	var ss []steer
	for rows.Next() {
		var s steer
		if err := rows.Scan(&s.id, &s.text, &s.role, &s.cap); err != nil {
			rows.Close()
			return err
		}
		ss = append(ss, s)
	}
	rows.Close()
	for _, s := range ss {
		if err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
			if _, err := m.st.TxExec(tx, `DELETE FROM proc_queue WHERE id=?`, s.id); err != nil {
				return err
			}
			return m.narrowConvTx(tx, pr.pid, r.cid, r.gen, abi.CapFromValue(s.cap))
		}); err != nil {
			return err
		}
		if _, err := m.appendGuarded(ctx, pr.pid, r, s.role, jsonString(s.text)); err != nil {
			return err
		}
	}
	return nil
}

// restoreCheck readies r's checkpoints when its goroutine starts: the
// start time, and, for a run under way before a restart, its last
// checkpoint and the one to park at again (read from the store only
// then: a new run has none).
func (m *engine) restoreCheck(ctx context.Context, pr *process, r *activeRun) error {
	pr.mu.Lock()
	fresh := r.check.started.IsZero()
	if fresh {
		r.check.started = time.Now()
	}
	restored := r.check.restored
	pr.mu.Unlock()
	if !fresh || !restored {
		return nil
	}
	var seq int64
	var park sql.NullString
	if err := m.st.QueryRowContext(ctx, `SELECT checkpoint,park FROM proc_runs WHERE run_id=?`, r.id).Scan(&seq, &park); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	resume := ""
	if park.Valid {
		var cp abi.RunCheckpoint
		if json.Unmarshal([]byte(park.String), &cp) == nil && cp.Seq > 0 {
			seq, resume = cp.Seq-1, cp.Reason
		}
	}
	// The checkpoints decided before they were reached (their effects
	// were applied then), and the steering messages waiting: a delivery
	// survives the restart.
	decided := map[int64]bool{}
	rows, err := m.st.QueryContext(ctx, `SELECT seq FROM proc_directives WHERE run_id=? AND seq>?`, r.id, seq)
	if err != nil {
		return err
	}
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		decided[n] = true
	}
	rows.Close()
	var steer int
	if err := m.st.QueryRowContext(ctx, `SELECT count(*) FROM proc_queue WHERE pid=? AND mode='steer'`, pr.pid).Scan(&steer); err != nil {
		return err
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r.check.seq, r.check.resume = seq, resume
	r.check.pending = decided
	pr.steer = max(pr.steer, steer)
	return nil
}

// toolCapped answers tool call c without running it when the process's
// tool cap is spent, and counts it down otherwise.
func (m *engine) toolCapped(ctx context.Context, pr *process, r *activeRun, c model.ToolCall) (bool, error) {
	pr.mu.Lock()
	ctl := m.controlLocked(ctx, pr)
	capped := ctl.ToolCap != nil && *ctl.ToolCap <= 0
	if !capped {
		if ctl.ToolCap != nil {
			n := *ctl.ToolCap - 1
			ctl.ToolCap = &n
		}
		r.check.toolCalls++
		r.check.lastTool = c.Name
	}
	pr.mu.Unlock()
	if !capped {
		return false, nil
	}
	b, err := json.Marshal(toolResultContent{ToolCallID: c.ID, ToolName: c.Name, Output: "not run: the tool cap set by the manager is spent", IsError: true})
	if err != nil {
		return true, err
	}
	_, err = m.appendGuarded(ctx, pr.pid, r, "toolResult", b)
	return true, err
}

// sendMidRun is proc.send of a message in mode steer or interrupt to p
// while a run is under way (done false when none is: the message then
// starts a run as any other). steer: the message waits in the queue
// (mode 'steer') for the run's next checkpoint, which moves it into the
// run's conversation. interrupt: the message goes first in the queue and
// the run is aborted, so that it runs next.
func (m *engine) sendMidRun(ctx context.Context, c *kernel.Caller, p *abi.Process, a *abi.SendArgs, ev Event) (*abi.SendResult, bool, error) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	r := pr.run
	var cid string
	if r != nil {
		cid = r.cid
	}
	pr.mu.Unlock()
	if r == nil {
		return nil, false, nil
	}
	if strings.TrimSpace(ev.Text) == "" && len(ev.Media) == 0 {
		return nil, true, abi.E(abi.Path(p.Pid), abi.Invalid, "empty message")
	}
	role, text := "user", ev.Text
	if ev.Runtime {
		role, text = "system", EventPrefix+text
	}
	meta := eventMeta(ev)
	runID := newID("run_")
	if a.Mode == "steer" {
		if a.ConversationID != "" && a.ConversationID != cid {
			return nil, true, abi.E(abi.Path(p.Pid), abi.Invalid, fmt.Sprintf("the run under way is in conversation %s: steer it there", cid))
		}
		res, err := m.st.Exec(ctx, `INSERT INTO proc_queue(pid,cid,generation,run_id,message,role,created_at,kind,source,trace_id,process_cap,mode)
			SELECT ?,?,generation,?,?,?,?,?,?,?,?,'steer' FROM proc_conversations WHERE pid=? AND cid=?`,
			p.Pid, cid, runID, text, role, now(), meta.kind, meta.source, meta.trace, meta.cap, p.Pid, cid)
		if err == nil {
			err = oneRow(res, p.Pid+"/"+cid)
		}
		if err != nil {
			return nil, true, abi.E(abi.Path(p.Pid), err)
		}
		pr.mu.Lock()
		pr.steer++
		pr.mu.Unlock()
		return &abi.SendResult{OK: true, Status: "steered", RunID: r.id, Queued: true}, true, nil
	}
	tcid := orDefault(a.ConversationID)
	res, err := m.st.Exec(ctx, `INSERT INTO proc_queue(id,pid,cid,generation,run_id,message,role,created_at,kind,source,trace_id,process_cap,media)
		SELECT (SELECT coalesce(min(id),1)-1 FROM proc_queue),?,?,generation,?,?,?,?,?,?,?,?,? FROM proc_conversations WHERE pid=? AND cid=? AND status='open'`,
		p.Pid, tcid, runID, text, role, now(), meta.kind, meta.source, meta.trace, meta.cap, meta.media, p.Pid, tcid)
	if err == nil {
		err = oneRow(res, p.Pid+"/"+tcid)
	}
	if err != nil {
		return nil, true, abi.E(abi.Path(p.Pid), err)
	}
	m.routes.add(runID, c)
	if _, err := m.Abort(ctx, p); err != nil {
		return nil, true, err
	}
	return &abi.SendResult{OK: true, Status: "started", RunID: runID}, true, nil
}

// runToolCheckin is runTool, with the process's tool check-in: a tool
// call that runs past CheckinMs makes the run check in at a checkpoint
// (reason "tool-checkin") while the tool keeps running. The checkpoint
// is decided by a directive (an abort ends the run and the tool with
// it), by its grace, or by the tool's end, whichever comes first; the
// run then waits for the tool as before.
func (m *engine) runToolCheckin(ctx context.Context, pr *process, r *activeRun, p *abi.Process, caller *kernel.Caller, c model.ToolCall) (bool, error) {
	pr.mu.Lock()
	ctl := m.controlLocked(ctx, pr)
	checkin, grace := time.Duration(ctl.CheckinMs)*time.Millisecond, ctl.grace()
	pr.mu.Unlock()
	if checkin <= 0 {
		return m.runTool(ctx, pr, r, p, caller, c)
	}
	type outcome struct {
		waiting bool
		err     error
	}
	done := make(chan outcome, 1)
	finished := make(chan struct{})
	go func() {
		w, err := m.runTool(ctx, pr, r, p, caller, c)
		done <- outcome{w, err}
		close(finished)
	}()
	t := time.NewTimer(checkin)
	defer t.Stop()
	select {
	case o := <-done:
		return o.waiting, o.err
	case <-t.C:
	}
	pr.mu.Lock()
	r.check.seq++
	seq := r.check.seq
	pr.mu.Unlock()
	if _, err := m.park(ctx, pr, r, seq, "tool-checkin", true, grace, finished); err != nil {
		<-done
		return false, err
	}
	o := <-done // the tool ends (an abort cancels it)
	return o.waiting, o.err
}
