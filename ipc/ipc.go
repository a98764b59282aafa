package ipc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// IPC between processes (seed 000, "IPC Primitives"; 003, proc.ipc.*):
// proc.ipc.send (mail), proc.ipc.call (a bounded request whose answer
// comes back), proc.ipc.delegate (ours: a worker spawned for a task, then
// called), all delivered through the kernel-only proc.ipc.deliver.
//
// Rules:
//   - Same owner only: the source and the target have the same uid (403).
//   - The source is a registered process: the process the caller acts as
//     (kernel.Identity.Pid: its own tool calls), or, for its owner, the
//     process named by sourcePid (a line of that process's ctl file).
//   - A call is recorded (proc_ipc_calls) and its deadline armed before
//     the request is delivered; a delivery that fails leaves no call.
//     The request starts (or queues behind) a run of the target whose id
//     the call knows from the start; when that run ends, its final answer
//     goes back to the source as an ipc.reply event. If the deadline
//     passes first the source gets ipc.timeout, and the answer, when it
//     comes, is dropped: a call ends once (its state leaves "pending" in
//     one UPDATE). A reply or timeout is dropped too when the source's
//     conversation was reset (another generation) or closed since, or
//     the run that made the call was aborted.

const (
	// defaultCallTimeout is a call's deadline when none is given;
	// defaultDelegateTimeout a delegation's. Both clamp to
	// [minCallTimeout, maxCallTimeout].
	defaultCallTimeout     = 60 * time.Second
	defaultDelegateTimeout = 5 * time.Minute
	minCallTimeout         = time.Second
	maxCallTimeout         = time.Hour
	// maxIpcMessage bounds a message's size; maxReply the answer a reply
	// carries.
	maxIpcMessage = 256 << 10
	maxReply      = 64 << 10
	// ipcListLimit is how many calls proc.ipc.list shows.
	ipcListLimit = 100
)

// ipcState is the room's live part of the calls: the deadline timer of
// each pending call and the target run each waits for.
type ipcState struct {
	mu     sync.Mutex             // guards timers and runs
	timers map[string]*time.Timer // by call id
	runs   map[string]string      // target run id -> call id
}

// pendingCall is what a call's end needs of its record.
type pendingCall struct {
	id                   string
	uid                  uint32
	sourcePid, sourceCid string
	sourceGen            int64
	sourceRun            sql.NullString
	targetPid, targetRun string
	deadline             int64
}

// actingProcess is the process c acts for: the process c is (its own
// tool calls), else named (field names it in the args), which c must own
// (root: any). A caller that is no process and names none is a 403, as
// the seed has it (these calls are a process's), with how to make one;
// a process naming another is a 403.
func (m *Room) actingProcess(ctx context.Context, c *kernel.Caller, named, field string) (*abi.Process, error) {
	pid := c.Pid
	if pid == "" {
		pid = named
	} else if named != "" && named != pid {
		return nil, abi.E(abi.Permission, fmt.Sprintf("a process acts as itself: %s names another", field))
	}
	if pid == "" {
		return nil, abi.E(abi.Permission, fmt.Sprintf("the caller must be a process: call from a process, or name your process as %s (its ctl does)", field))
	}
	p, err := m.get(ctx, pid)
	if err != nil {
		return nil, err
	}
	if p.Uid != c.Uid && !c.IsRoot() {
		return nil, noProcess(pid)
	}
	return p, nil
}

// ipcPair returns the source and target of an IPC call by c: both
// processes, of the same owner. A target of another owner is, for a
// caller who is not root, the same 404 as a pid that does not exist
// (otherProcess): its existence is not the caller's to learn; root, who
// may see every process, gets the 403 of the rule.
func (m *Room) ipcPair(ctx context.Context, c *kernel.Caller, sourcePid, targetPid string) (src, tgt *abi.Process, err error) {
	if c.Pid == "" && sourcePid == "" {
		_, err := m.actingProcess(ctx, c, "", "sourcePid") // the 403 of a caller that is no process
		return nil, nil, err
	}
	if targetPid == "" {
		return nil, nil, abi.E(abi.Invalid, "pid: which process?")
	}
	if c.Pid != "" && (sourcePid == "" || sourcePid == c.Pid) {
		// A process's own call: the kernel set its pid, and a process is
		// its owner's, so the source needs no read.
		src = &abi.Process{Pid: c.Pid, Uid: c.Uid, Cwd: c.Cwd}
	} else if src, err = m.actingProcess(ctx, c, sourcePid, "sourcePid"); err != nil {
		return nil, nil, err
	}
	if tgt, err = m.get(ctx, targetPid); err != nil {
		return nil, nil, err
	}
	if tgt.Uid != src.Uid {
		return nil, nil, m.otherProcess(c, targetPid, "IPC is between processes of the same owner")
	}
	return src, tgt, nil
}

// checkIpcMessage checks a message and its metadata (a JSON object).
func checkIpcMessage(msg string, meta json.RawMessage) error {
	switch {
	case strings.TrimSpace(msg) == "":
		return abi.E(abi.Invalid, "empty message")
	case len(msg) > maxIpcMessage:
		return abi.E(abi.Invalid, fmt.Sprintf("message is over %d bytes", maxIpcMessage))
	}
	if len(meta) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(meta, &obj) != nil || obj == nil {
			return abi.E(abi.Invalid, "metadata must be a JSON object")
		}
		if len(meta) > 16<<10 {
			return abi.E(abi.Invalid, "metadata is over 16 KiB")
		}
	}
	return nil
}

// sysIpcSend serves proc.ipc.send: mail from the source process to a
// process of the same owner, delivered through proc.ipc.deliver; it
// starts a run of the target or queues behind its running one.
func (m *Room) sysIpcSend(ctx context.Context, c *kernel.Caller, a *abi.IpcSendArgs) (*abi.IpcSendResult, error) {
	src, tgt, err := m.ipcPair(ctx, c, a.SourcePid, a.Pid)
	if err != nil {
		return nil, err
	}
	if err := checkIpcMessage(a.Message, a.Metadata); err != nil {
		return nil, err
	}
	return kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.ProcIpcDeliver, &abi.IpcDeliverArgs{
		Pid: tgt.Pid, SourcePid: src.Pid, Source: m.identityOf(ctx, c, src), SourceLabel: labelOf(src), ConversationID: a.ConversationID,
		Message: a.Message, Metadata: a.Metadata, SentAt: now(), Process: c.Identity.Process,
	})
}

// identityOf is the ProcessIdentity of process p, called by c: c's own
// when c is p's owner, else its owner's record.
func (m *Room) identityOf(ctx context.Context, c *kernel.Caller, p *abi.Process) abi.ProcessIdentity {
	id := abi.ProcessIdentity{Uid: p.Uid, Cwd: p.Cwd}
	if c.Uid == p.Uid && c.Role == "user" {
		id.Username, id.Home, id.Gid, id.Gids = c.Username, c.Home, c.Gid, c.Gids
		return id
	}
	if u, err := m.k.UserOf(ctx, p.Uid); err == nil {
		id.Username, id.Home, id.Gid = u.Username, u.Home, u.Gid
	}
	return id
}

// labelOf is p's label, "" if none.
func labelOf(p *abi.Process) string {
	if p.Label == nil {
		return ""
	}
	return *p.Label
}

// sysIpcCall serves proc.ipc.call: it records the call and arms its
// deadline, then delivers the request; it returns at acceptance. The
// answer comes later to the source (ipc.reply or ipc.timeout).
func (m *Room) sysIpcCall(ctx context.Context, c *kernel.Caller, a *abi.IpcCallArgs) (*abi.IpcCallResult, error) {
	src, tgt, err := m.ipcPair(ctx, c, a.SourcePid, a.Pid)
	if err != nil {
		return nil, err
	}
	if err := checkIpcMessage(a.Message, a.Metadata); err != nil {
		return nil, err
	}
	timeout, err := callTimeout(a.TimeoutMs, defaultCallTimeout)
	if err != nil {
		return nil, err
	}
	return m.call(ctx, c, src, tgt, a.ConversationID, a.Message, a.Metadata, timeout)
}

// callTimeout is ms as a call's timeout (def when 0), which must lie in
// [minCallTimeout, maxCallTimeout].
func callTimeout(ms int64, def time.Duration) (time.Duration, error) {
	if ms == 0 {
		return def, nil
	}
	d := time.Duration(ms) * time.Millisecond
	if ms < 0 || d < minCallTimeout || d > maxCallTimeout {
		return 0, abi.E(abi.Invalid, fmt.Sprintf("timeoutMs %d: want %d to %d", ms, minCallTimeout.Milliseconds(), maxCallTimeout.Milliseconds()))
	}
	return d, nil
}

// call makes a call from src to tgt: recorded, armed, then delivered.
func (m *Room) call(ctx context.Context, c *kernel.Caller, src, tgt *abi.Process, cid, msg string, meta json.RawMessage, timeout time.Duration) (*abi.IpcCallResult, error) {
	callID, runID := newID("call_"), newID("run_")
	t := now()
	deadline := t + timeout.Milliseconds()
	// The source's waiting conversation: the one its current run is in
	// when the process itself calls; else its default.
	at, err := m.convState(ctx, src.Pid, "", c.Pid == src.Pid)
	if err != nil {
		return nil, abi.E(abi.Path(src.Pid), err)
	}
	srcCid, srcRun, srcGen := at.ConversationID, sql.NullString{String: at.RunID, Valid: at.RunID != ""}, at.Generation
	if at.Status == "" {
		return nil, abi.E(abi.Path(src.Pid+"/"+srcCid), abi.NotExist, "no such conversation")
	}
	// Recorded "sending": the delivery makes it "pending" in the
	// transaction that puts the request in the target's conversation, so
	// a call still "sending" at a start is one whose request never
	// arrived, whose id its caller never got (resumeCalls).
	if _, err := m.st.Exec(ctx, `INSERT INTO proc_ipc_calls(call_id,uid,source_pid,source_cid,source_gen,source_run,target_pid,target_cid,target_run,deadline_at,created_at,state)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,'sending')`, callID, src.Uid, src.Pid, srcCid, srcGen, srcRun, tgt.Pid, orDefault(cid), runID, deadline, t); err != nil {
		return nil, abi.E(abi.Path(callID), err)
	}
	m.changes.Touch(src.Pid+"/ipc", tgt.Pid+"/ipc")
	pc := pendingCall{id: callID, uid: src.Uid, sourcePid: src.Pid, sourceCid: srcCid, sourceGen: srcGen, sourceRun: srcRun,
		targetPid: tgt.Pid, targetRun: runID, deadline: deadline}
	if !m.arm(pc) {
		m.forgetCall(ctx, callID)
		return nil, abi.E(abi.Path(callID), abi.Offline, "the daemon is shutting down")
	}
	res, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.ProcIpcDeliver, &abi.IpcDeliverArgs{
		Pid: tgt.Pid, SourcePid: src.Pid, Source: m.identityOf(ctx, c, src), SourceLabel: labelOf(src), ConversationID: cid, Message: msg, Metadata: meta,
		SentAt: t, Call: &abi.IpcCallRef{CallID: callID, ReplyToPid: src.Pid, DeadlineAt: deadline}, TraceID: callID, RunID: runID,
		Process: c.Identity.Process,
	})
	if err != nil {
		m.disarm(callID, runID)
		m.forgetCall(ctx, callID)
		return nil, err
	}
	return &abi.IpcCallResult{OK: true, Status: "started", CallID: callID, Pid: tgt.Pid, SourcePid: src.Pid,
		ConversationID: res.ConversationID, RunID: res.RunID, DeadlineAt: deadline, Queued: res.Queued}, nil
}

// forgetCall deletes the record of a call that was never delivered. Its
// caller's error is what the caller hears; a record left behind (the
// store failing too) is logged, and the next start ends it "abandoned",
// as every call still "sending" (resumeCalls).
func (m *Room) forgetCall(ctx context.Context, callID string) {
	if _, err := m.st.Exec(context.WithoutCancel(ctx), `DELETE FROM proc_ipc_calls WHERE call_id=?`, callID); err != nil {
		m.log.Warn("ipc: forgetting an undelivered call", "call", callID, "err", err)
	}
}

// sysIpcDeliver serves proc.ipc.deliver (kernel-only): the envelope,
// validated by the public call, enters the target's conversation as a
// visible user message of kind process.message (mail) or process.call.
func (m *Room) sysIpcDeliver(ctx context.Context, c *kernel.Caller, a *abi.IpcDeliverArgs) (*abi.IpcSendResult, error) {
	// The public call checked both processes (the same owner): the
	// target is that owner's; a target gone since has no conversation.
	tgt := &abi.Process{Pid: a.Pid, Uid: a.Source.Uid}
	label := ""
	if a.SourceLabel != "" {
		label = " (" + a.SourceLabel + ")"
	}
	ev := event{Kind: abi.EventProcessMessage, TraceID: a.TraceID, RunID: a.RunID, Cap: a.Process,
		Source: abi.EventSource{Kind: "process", Uid: a.Source.Uid, Username: a.Source.Username, Pid: a.SourcePid}}
	if a.Call != nil {
		ev.Kind, ev.within = abi.EventProcessCall, m.callDelivered(a.Call.CallID)
		ev.Text = fmt.Sprintf("Call %s from process %s%s, answer by %s. Your final answer in this run goes back to the caller.\n\n%s",
			a.Call.CallID, a.SourcePid, label, time.UnixMilli(a.Call.DeadlineAt).UTC().Format(time.RFC3339), a.Message)
	} else {
		ev.Text = fmt.Sprintf("Message from process %s%s:\n\n%s", a.SourcePid, label, a.Message)
	}
	cid := orDefault(a.ConversationID)
	runID, queued, err := m.deliver(ctx, tgt, cid, ev)
	if err != nil {
		return nil, err
	}
	return &abi.IpcSendResult{OK: true, Status: "started", Pid: tgt.Pid, SourcePid: a.SourcePid, ConversationID: cid, RunID: runID, Queued: queued}, nil
}

// sysIpcDelegate serves proc.ipc.delegate: it spawns a worker (a child of
// the source, labelled) or takes the worker named, then calls it with the
// task; the answer comes back as a call's does.
func (m *Room) sysIpcDelegate(ctx context.Context, c *kernel.Caller, a *abi.IpcDelegateArgs) (*abi.IpcDelegateResult, error) {
	src, err := m.actingProcess(ctx, c, a.SourcePid, "sourcePid")
	if err != nil {
		return nil, err
	}
	if err := checkIpcMessage(a.Task, nil); err != nil {
		return nil, err
	}
	timeout, err := callTimeout(a.TimeoutMs, defaultDelegateTimeout)
	if err != nil {
		return nil, err
	}
	spawned := false
	workerPid := a.Pid
	if workerPid == "" {
		profile := a.Profile
		if profile == "" {
			profile = "task"
		}
		label := a.Label
		if label == "" {
			label = "worker of " + src.Pid
		}
		owner, err := m.k.IdentityOf(ctx, src.Uid)
		if err != nil {
			return nil, err
		}
		owner.Process = c.Identity.Process // a narrowed delegator's worker is narrowed for its life
		sp, err := kernel.Do(ctx, m.k, &kernel.Caller{Identity: owner}, abi.ProcSpawn,
			&abi.SpawnArgs{Profile: profile, Label: label, ParentPid: src.Pid})
		if err != nil {
			return nil, err
		}
		workerPid, spawned = sp.Pid, true
	}
	_, tgt, err := m.ipcPair(ctx, c, src.Pid, workerPid)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout).UTC().Format(time.RFC3339)
	task := fmt.Sprintf("Task delegated by process %s, to be answered by %s:\n\n%s", src.Pid, deadline, a.Task)
	res, err := m.call(ctx, c, src, tgt, "", task, nil, timeout)
	if err != nil {
		return nil, err
	}
	return &abi.IpcDelegateResult{IpcCallResult: *res, WorkerPid: tgt.Pid, Spawned: spawned}, nil
}

// sysIpcList serves proc.ipc.list (ours): the calls a process made or
// was made, newest first; /proc/<pid>/ipc renders it.
func (m *Room) sysIpcList(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.IpcListResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	rows, err := m.st.QueryContext(ctx, `SELECT call_id,source_pid,target_pid,coalesce(target_run,''),deadline_at,state,created_at,finished_at
		FROM proc_ipc_calls WHERE source_pid=? OR target_pid=? ORDER BY created_at DESC, call_id LIMIT ?`, p.Pid, p.Pid, ipcListLimit)
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	defer rows.Close()
	out := &abi.IpcListResult{Calls: []abi.IpcCall{}}
	for rows.Next() {
		var ic abi.IpcCall
		var fin sql.NullInt64
		if err := rows.Scan(&ic.CallID, &ic.SourcePid, &ic.TargetPid, &ic.TargetRun, &ic.DeadlineAt, &ic.State, &ic.CreatedAt, &fin); err != nil {
			return nil, abi.E(abi.Path(p.Pid), err)
		}
		ic.Direction = "out"
		if ic.TargetPid == p.Pid && ic.SourcePid != p.Pid {
			ic.Direction = "in"
		}
		if fin.Valid {
			ic.FinishedAt = &fin.Int64
		}
		ic.Reason = callReasons[ic.State]
		out.Calls = append(out.Calls, ic)
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	return out, nil
}

// callReasons say why a call is in a state that needs telling.
var callReasons = map[string]string{
	"sending":   "its request is being delivered",
	"abandoned": "the daemon stopped before its request was delivered: its caller never got its id, and nobody was told",
	"dropped":   "the caller's conversation was reset or closed, or the run that made the call was aborted: the answer was not delivered",
}

// arm starts pc's deadline timer and records the run it waits for; false
// after Close.
func (m *Room) arm(pc pendingCall) bool {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return false
	}
	m.ipc.mu.Lock()
	defer m.ipc.mu.Unlock()
	if m.ipc.timers == nil {
		m.ipc.timers, m.ipc.runs = map[string]*time.Timer{}, map[string]string{}
	}
	wait := time.Until(time.UnixMilli(pc.deadline))
	m.ipc.runs[pc.targetRun] = pc.id
	m.ipc.timers[pc.id] = time.AfterFunc(max(wait, 0), func() { m.background(func() { m.callTimedOut(pc.id) }) })
	return true
}

// disarm forgets call id and the run it waits for.
func (m *Room) disarm(id, run string) {
	m.ipc.mu.Lock()
	defer m.ipc.mu.Unlock()
	if t := m.ipc.timers[id]; t != nil {
		t.Stop()
	}
	delete(m.ipc.timers, id)
	delete(m.ipc.runs, run)
}

// background runs f in a goroutine the room owns (Close waits for it);
// after Close it does not run.
func (m *Room) background(f func()) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// stopCalls stops every deadline timer (Close): the calls stay pending in
// the store, and Start arms them again.
func (m *Room) stopCalls() {
	m.ipc.mu.Lock()
	defer m.ipc.mu.Unlock()
	for _, t := range m.ipc.timers {
		t.Stop()
	}
	m.ipc.timers, m.ipc.runs = nil, nil
}

// runEnded answers the call that waited for run, if one did (ok): its
// final answer goes back to the source.
func (m *Room) runEnded(run, status, errText string) (ok bool) {
	m.ipc.mu.Lock()
	id, ok := m.ipc.runs[run]
	m.ipc.mu.Unlock()
	if ok {
		m.background(func() { m.callAnswered(id, status, errText) })
	}
	return ok
}

// loadCall reads pending call id.
func (m *Room) loadCall(ctx context.Context, id string) (*pendingCall, error) {
	pc := &pendingCall{id: id}
	err := m.st.QueryRowContext(ctx, `SELECT uid,source_pid,source_cid,source_gen,source_run,target_pid,coalesce(target_run,''),deadline_at
		FROM proc_ipc_calls WHERE call_id=? AND state IN ('sending','pending')`, id).
		Scan(&pc.uid, &pc.sourcePid, &pc.sourceCid, &pc.sourceGen, &pc.sourceRun, &pc.targetPid, &pc.targetRun, &pc.deadline)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return pc, err
}

// callAnswered ends call id with the final answer of its target run.
func (m *Room) callAnswered(id, status, errText string) {
	ctx := context.Background()
	pc, err := m.loadCall(ctx, id)
	if err != nil || pc == nil {
		if err != nil {
			m.log.Error("ipc: reply", "call", id, "err", err)
		}
		return
	}
	run, err := m.runState(ctx, pc.targetRun, true)
	if err != nil {
		m.log.Error("ipc: reply", "call", id, "err", err)
		return
	}
	answer := finalAnswer(run.Answer)
	text := fmt.Sprintf("ipc.reply from process %s (call %s): ", pc.targetPid, id)
	switch {
	case status == "done" && answer != "":
		text += answer
	case status == "done":
		text += "(the run ended with no answer)"
	case errText != "":
		text += fmt.Sprintf("the run ended %s: %s", status, errText)
	default:
		text += "the run ended " + status
	}
	// The answer carries the narrowing its run acted within.
	m.endCall(ctx, pc, "replied", event{Kind: abi.EventIpcReply, Text: text, Runtime: true, TraceID: id,
		Source: abi.EventSource{Kind: "process", Uid: pc.uid, Pid: pc.targetPid}, Cap: run.Cap})
}

// callTimedOut ends call id at its deadline: the source gets ipc.timeout.
func (m *Room) callTimedOut(id string) {
	ctx := context.Background()
	pc, err := m.loadCall(ctx, id)
	if err != nil || pc == nil {
		if err != nil {
			m.log.Error("ipc: timeout", "call", id, "err", err)
		}
		return
	}
	text := fmt.Sprintf("ipc.timeout: call %s to process %s got no answer by %s", id, pc.targetPid,
		time.UnixMilli(pc.deadline).UTC().Format(time.RFC3339))
	m.endCall(ctx, pc, "timed_out", event{Kind: abi.EventIpcTimeout, Text: text, Runtime: true, TraceID: id,
		Source: abi.EventSource{Kind: "kernel"}})
}

// endCall ends pc once: to state, with ev delivered to the source, or
// "dropped" when the source's conversation changed generation or closed,
// or the run that made the call was aborted. A call already ended (the
// other of reply and timeout came first) is left as it is.
func (m *Room) endCall(ctx context.Context, pc *pendingCall, state string, ev event) {
	m.disarm(pc.id, pc.targetRun)
	conv, err := m.convState(ctx, pc.sourcePid, pc.sourceCid, false)
	deliver := err == nil && conv.Generation == pc.sourceGen && conv.Status == "open"
	if deliver && pc.sourceRun.Valid {
		if run, err := m.runState(ctx, pc.sourceRun.String, false); err == nil && run.Status == "aborted" {
			deliver = false
		}
	}
	var src *abi.Process
	if deliver {
		if src, err = m.get(ctx, pc.sourcePid); err != nil {
			deliver = false // the source is gone
		}
	}
	const end = `UPDATE proc_ipc_calls SET state=?, finished_at=? WHERE call_id=? AND state IN ('sending','pending')`
	if !deliver {
		res, err := m.st.Exec(ctx, end, "dropped", now(), pc.id)
		if err != nil {
			m.log.Error("ipc: end a call", "call", pc.id, "err", err)
			return
		}
		if n, _ := res.RowsAffected(); n > 0 {
			m.changes.Touch(pc.sourcePid+"/ipc", pc.targetPid+"/ipc")
		}
		return
	}
	// The call ends in the transaction that puts its answer in the
	// source's conversation: it is "replied" (or "timed_out") exactly when
	// the answer is there. A call the other of reply and timeout ended
	// first stops the delivery.
	ended := false
	ev.within = func(tx abi.StoreTx) error {
		res, err := tx.Exec(end, state, now(), pc.id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errCallEnded
		}
		ended = true
		return nil
	}
	if _, _, err := m.deliver(ctx, src, pc.sourceCid, ev); err != nil && !ended {
		if !errors.Is(err, errCallEnded) && !strings.Contains(err.Error(), errCallEnded.Error()) {
			m.log.Warn("ipc: deliver an answer", "call", pc.id, "source", pc.sourcePid, "err", err)
		}
		return
	}
	m.changes.Touch(pc.sourcePid+"/ipc", pc.targetPid+"/ipc")
}

// errCallEnded stops the delivery of an answer to a call already ended.
var errCallEnded = errors.New("the call has ended")

// finalAnswer is a run's final answer (raw: the text of the last answer
// of the model in it, proc.run.state) as a reply carries it: trimmed, at
// most maxReply bytes.
func finalAnswer(raw string) string {
	text := strings.TrimSpace(raw)
	if len(text) > maxReply {
		text = text[:maxReply] + fmt.Sprintf("… [%d bytes]", len(raw))
	}
	return text
}

// resumeCalls reconciles the calls at Start. A call still "sending" was
// recorded but its request never reached the target (the daemon stopped
// between the two): its caller never got its id, so it ends "abandoned",
// and nobody is told (no ipc.timeout for an id nobody has). The pending
// calls are armed again: one whose deadline passed times out now; one
// whose target run already ended is answered.
func (m *Room) resumeCalls(ctx context.Context) error {
	res, err := m.st.Exec(ctx, `UPDATE proc_ipc_calls SET state='abandoned', finished_at=? WHERE state='sending'`, now())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		m.log.Info("ipc: calls whose request was never delivered are abandoned", "calls", n)
	}
	rows, err := m.st.QueryContext(ctx, `SELECT call_id,uid,source_pid,source_cid,source_gen,source_run,target_pid,coalesce(target_run,''),deadline_at
		FROM proc_ipc_calls WHERE state='pending'`)
	if err != nil {
		return err
	}
	var pending []pendingCall
	for rows.Next() {
		var pc pendingCall
		if err := rows.Scan(&pc.id, &pc.uid, &pc.sourcePid, &pc.sourceCid, &pc.sourceGen, &pc.sourceRun, &pc.targetPid, &pc.targetRun, &pc.deadline); err != nil {
			rows.Close()
			return err
		}
		pending = append(pending, pc)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	type ended struct{ id, status, errText string }
	var done []ended
	for _, pc := range pending {
		// How its target run stands: the process room's to say.
		run, err := m.runState(ctx, pc.targetRun, false)
		if err != nil {
			return err
		}
		m.arm(pc)
		switch run.Status {
		case "", "running", "waiting_hil":
		default:
			done = append(done, ended{pc.id, run.Status, run.Error})
		}
	}
	for _, e := range done {
		e := e
		m.background(func() { m.callAnswered(e.id, e.status, e.errText) })
	}
	return nil
}

// callDelivered is what the delivery of call id's request runs in the
// transaction that puts it in the target's conversation (proc.deliver's
// Within): the call is delivered, "pending", exactly when its request is.
func (m *Room) callDelivered(id string) func(tx abi.StoreTx) error {
	return func(tx abi.StoreTx) error {
		_, err := tx.Exec(`UPDATE proc_ipc_calls SET state='pending' WHERE call_id=? AND state='sending'`, id)
		return err
	}
}
