package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// A process runs at most one run at a time. Its runtime (process) holds
// the run and where it is (runState); pr.mu guards both, and every
// function whose name ends in Locked needs pr.mu held. startLocked is the
// one place a run's goroutine starts: from Send (a message to an idle
// process), nextLocked (the oldest queued message, when a run ends or a
// compaction or reset frees the process), and resumeLocked (a run waiting
// on a human, once answered, and the runs a restart interrupted).

// runState is where a process's run is.
type runState int

const (
	// idle: no run; a message starts one.
	idle runState = iota
	// starting: Send is recording a new run (pr.run is set, without a
	// goroutine yet): other messages queue behind it. Only Send ends this
	// state; abort and reset wait for it (activeRun.recorded).
	starting
	// running: the run's goroutine executes it.
	running
	// waiting: the run waits on a human's answer (proc.hil); no goroutine.
	waiting
)

// String is the state as /proc/<pid>/status shows it.
func (s runState) String() string {
	switch s {
	case starting, running:
		return "running"
	case waiting:
		return "waiting"
	}
	return "idle"
}

// stopReason says why a run's goroutine was told to stop.
type stopReason int

const (
	notStopped stopReason = iota
	// stopAbort: abort or reset ended the run: whichever of the aborter
	// and the run's goroutine takes pr.mu first with the run still
	// current records its end (endAbortedLocked). A run stopped so never
	// starts again.
	stopAbort
	// stopShutdown: Close stopped the run; nothing records an end, so
	// that Start on the same store resumes it.
	stopShutdown
)

// process is the runtime state of one process.
type process struct {
	pid string
	uid uint32

	// mu guards state, run and what the run records (activeRun's fields
	// but its id, cid and gen), compacting, ctl, parkWait and steer.
	mu    sync.Mutex
	state runState
	run   *activeRun // nil when idle
	// compacting holds the conversations a proc.conversation.compact is
	// working on (without holding mu): messages to them queue meanwhile.
	compacting map[string]bool
	// ctl is the process's run settings (control.go); parkWait is closed
	// when a run of it next parks; steer counts the steering messages
	// waiting for its run's next checkpoint.
	ctl      *runCtl
	parkWait chan struct{}
	steer    int
	saveMu   sync.Mutex // guards the stored ctl: its stores (storeControl) land one at a time, in order
}

// activeRun is the run a process is executing or waiting on (for HIL).
type activeRun struct {
	id, cid string
	gen     int64
	// cancel stops the goroutine and done is closed when it exits (both
	// set by startLocked, for the latest goroutine of the run).
	cancel context.CancelFunc
	done   chan struct{}
	stop   stopReason
	// recorded is closed by Send once it has committed (or failed to
	// commit) the run and published the outcome; nil for a run that
	// did not start in Send.
	recorded chan struct{}
	// ended, interrupted and next are set by endAbortedLocked: the run is
	// recorded aborted, with interrupted tool calls, and next is the run
	// of the queued message that started after it ("" if none).
	ended       bool
	interrupted int
	next        string
	// check is what the run's checkpoints keep (control.go).
	check runCheck
	// blockAsks counts the nested calls of its CodeMode blocks waiting
	// for a human's answer (askInBlock): the run waits on a human then.
	blockAsks atomic.Int32
	// trace is the kernel trace the run's calls carry (kernel.WithTrace):
	// that of the call that started it, or its queued event's.
	trace string
	// provider and model are those of its latest model call (account).
	provider, model string
}

// EventPrefix marks runtime events in a conversation.
const EventPrefix = "[Process Event]: "

// Event is a message entering a conversation: its kind (abi.Event*),
// the principal it came from, the trace it belongs to, and its text. A
// runtime event (Runtime) enters as a visible system message
// "[Process Event]: <text>"; any other as a user message.
type Event struct {
	Kind    string
	Source  abi.EventSource
	TraceID string
	Text    string
	Runtime bool
	// Media are the stored media the message carries (storeMedia).
	Media []abi.MediaRef
	// RunID, if set, is the id of the run the message starts (or will
	// start from the queue): a call knows the run it waits for before
	// the message is delivered.
	RunID string
	// Cap is the narrowing of the process capability the message
	// carries (its sender's; nil: none). It narrows the conversation the
	// message enters, and so every run of it (cap.go).
	Cap *abi.ProcessCap
	// within, if set, runs in the transaction that enters the message
	// (proc.deliver's Within: the ipc room makes a call pending there).
	within func(tx abi.StoreTx) error
}

// Send delivers text to conversation cid of p as its owner's
// user.message, or, with event, as a process.event (see SendEvent).
func (m *engine) Send(ctx context.Context, p *abi.Process, cid, text string, event bool) (runID string, queued bool, err error) {
	ev := Event{Kind: abi.EventUserMessage, Source: abi.EventSource{Kind: "user", Uid: p.Uid}, Text: text, Runtime: event}
	if event {
		ev.Kind = abi.EventProcessEvent
	}
	return m.SendEvent(ctx, p, cid, ev)
}

// errTickCoalesced is SendEvent's answer to a schedule.tick whose
// schedule (its trace) has a tick waiting in the process's queue already:
// nothing is queued, and the run id is the waiting tick's.
var errTickCoalesced = errors.New("a tick of this schedule still waits in the queue")

// SendEvent delivers ev to conversation cid of p: it starts a run when
// the process is idle, else queues the message (FIFO across the
// process's conversations). The message, with its kind, source and
// trace, is durable when SendEvent returns. A schedule.tick that would
// queue behind a tick of the same trace (schedule) still waiting is not
// queued: SendEvent returns that tick's run id and errTickCoalesced.
//
// pr.mu is not held while the store commits: SendEvent reserves the
// process (starting) under the lock, commits, and publishes under the
// lock again.
func (m *engine) SendEvent(ctx context.Context, p *abi.Process, cid string, ev Event) (runID string, queued bool, err error) {
	if cid == "" {
		cid = "default"
	}
	text := ev.Text
	if strings.TrimSpace(text) == "" && len(ev.Media) == 0 {
		return "", false, abi.E(abi.Path(p.Pid), abi.Invalid, "empty message")
	}
	role := "user"
	if ev.Runtime {
		role, text = "system", EventPrefix+text
	}
	trace := kernel.TraceOf(ctx)
	if ev.TraceID == "" && !ev.Runtime {
		// A message with no trace of its own belongs to the call that
		// sent it (a user's message starts a trace).
		ev.TraceID = trace
	}
	meta := eventMeta(ev)
	runID = ev.RunID
	if runID == "" {
		runID = newID("run_")
	}
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	var r *activeRun
	if pr.state == idle && !pr.compacting[cid] {
		r = &activeRun{id: runID, cid: cid, recorded: make(chan struct{}), trace: trace}
		pr.run, pr.state = r, starting
	}
	pr.mu.Unlock()

	started, coalesced := false, ""
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		started, coalesced = false, ""
		// Only generation and status: counting the conversation's
		// messages here would make every send scan it.
		var gen int64
		var status string
		err := m.st.TxQueryRow(tx, `SELECT generation,status FROM proc_conversations WHERE pid=? AND cid=?`, p.Pid, cid).Scan(&gen, &status)
		if errors.Is(err, sql.ErrNoRows) {
			return abi.E(abi.Path(p.Pid+"/"+cid), abi.NotExist, "no such conversation")
		}
		if err != nil {
			return err
		}
		if status != "open" {
			return abi.E(abi.Path(p.Pid+"/"+cid), abi.Busy, "conversation is closed: open it again to send")
		}
		t := now()
		if ev.within != nil {
			if err := ev.within(tx); err != nil {
				return err
			}
		}
		hasQueue, err := m.queuedTx(tx, p.Pid)
		if err != nil {
			return err
		}
		if r == nil || hasQueue {
			if ev.Kind == abi.EventScheduleTick && ev.TraceID != "" {
				// Ticks coalesce, as a Unix signal already pending is
				// not queued again: a schedule's tick still waiting in
				// the queue stands for this one too.
				var waiting string
				var qid int64
				var qcap sql.NullString
				err := m.st.TxQueryRow(tx, `SELECT id,run_id,process_cap FROM proc_queue WHERE pid=? AND trace_id=? AND kind=? LIMIT 1`, p.Pid, ev.TraceID, ev.Kind).
					Scan(&qid, &waiting, &qcap)
				if err == nil {
					coalesced = waiting
					if ev.Cap == nil {
						return nil
					}
					// The waiting tick stands for this one: it carries
					// this one's narrowing too.
					_, err := m.st.TxExec(tx, `UPDATE proc_queue SET process_cap=? WHERE id=?`, abi.CapValue(abi.NarrowCap(abi.CapFromValue(qcap), ev.Cap)), qid)
					return err
				}
				if !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			_, err = m.st.TxExec(tx, `INSERT INTO proc_queue(pid,cid,generation,run_id,message,role,created_at,kind,source,trace_id,process_cap,media) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`,
				p.Pid, cid, gen, runID, text, role, t, meta.kind, meta.source, meta.trace, meta.cap, meta.media)
			return err
		}
		if err := m.startRunTx(tx, p.Pid, cid, gen, runID, role, jsonString(text), meta, t); err != nil {
			return err
		}
		r.gen, started = gen, true
		return nil
	})

	// A failed commit records nothing, even if the function got as far
	// as the run.
	started = started && err == nil
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if r != nil {
		// Nothing but Send ends a starting run (abort and reset wait on
		// recorded), so pr.run is still r.
		if started {
			m.startLocked(pr, r)
		} else {
			pr.run, pr.state = nil, idle
		}
		close(r.recorded)
	}
	if pr.state == idle {
		// What queued while this send held the process (or while a run
		// ended before the queued message was committed) starts now.
		m.nextLocked(context.WithoutCancel(ctx), pr, nil)
	}
	if err != nil {
		return "", false, err
	}
	if coalesced != "" {
		return coalesced, true, errTickCoalesced
	}
	if !started {
		m.changed(p.Uid, abi.ProcChanged{Pid: p.Pid, Change: "queue", ConversationID: cid, RunID: runID})
		return runID, true, nil
	}
	return runID, false, nil
}

// queuedTx says whether pid has messages queued (in tx, a transaction of
// the store's Tx).
func (m *engine) queuedTx(tx *kernel.Tx, pid string) (bool, error) {
	var queued bool // a bool: Postgres's EXISTS is a boolean, SQLite's 1 or 0
	err := m.st.TxQueryRow(tx, `SELECT EXISTS(SELECT 1 FROM proc_queue WHERE pid=?)`, pid).Scan(&queued)
	return queued, err
}

// eventRow is an Event's columns in the store: its kind, its source as
// JSON, its trace id (NULL when empty), the narrowing it carries (JSON;
// NULL for none).
type eventRow struct {
	kind, source, trace, cap, media sql.NullString
}

// eventMeta is ev's columns.
func eventMeta(ev Event) eventRow {
	src, _ := json.Marshal(ev.Source)
	return eventRow{
		kind:   sql.NullString{String: ev.Kind, Valid: ev.Kind != ""},
		source: sql.NullString{String: string(src), Valid: ev.Source.Kind != ""},
		trace:  sql.NullString{String: ev.TraceID, Valid: ev.TraceID != ""},
		cap:    abi.CapValue(ev.Cap),
		media:  nullString(mediaColumn(ev.Media)),
	}
}

// startRunTx appends the message that starts a run, with its event's
// columns, and records the run and its first message. The narrowing the
// message carries narrows its conversation first.
func (m *engine) startRunTx(tx *kernel.Tx, pid, cid string, gen int64, runID, role string, content json.RawMessage, meta eventRow, t int64) error {
	if err := m.narrowConvTx(tx, pid, cid, gen, abi.CapFromValue(meta.cap)); err != nil {
		return err
	}
	var first int64
	err := m.st.TxQueryRow(tx, `INSERT INTO proc_messages(pid,cid,generation,role,content,created_at,kind,source,trace_id,media) VALUES(?,?,?,?,?,?,?,?,?,?) RETURNING id`,
		pid, cid, gen, role, string(content), t, meta.kind, meta.source, meta.trace, meta.media).Scan(&first)
	if err != nil {
		return err
	}
	if _, err := m.st.TxExec(tx, `UPDATE proc_conversations SET updated_at=? WHERE pid=? AND cid=?`, t, pid, cid); err != nil {
		return err
	}
	if _, err := m.st.TxExec(tx, `INSERT INTO proc_runs(run_id,pid,cid,generation,status,started_at,first_message) VALUES(?,?,?,?,'running',?,?)`, runID, pid, cid, gen, t, first); err != nil {
		return err
	}
	_, err = m.st.TxExec(tx, `UPDATE proc_processes SET state='running' WHERE pid=?`, pid)
	return err
}

// startLocked starts the goroutine of run r, recorded as running in the
// store, on pr: the one place a run starts. After Close it starts no
// goroutine: r stays recorded as running, and the next Start resumes it.
// A run stopped by an abort (stopAbort) never starts again: its aborter
// records its end.
func (m *engine) startLocked(pr *process, r *activeRun) {
	if r.stop == stopAbort {
		return
	}
	pr.run, pr.state = r, running
	done := make(chan struct{})
	r.done = done
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		r.cancel = func() {}
		close(done)
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	if r.trace == "" {
		r.trace = kernel.NewTraceID()
	}
	ctx, cancel := context.WithCancel(kernel.WithTrace(context.Background(), r.trace))
	r.cancel = cancel
	signal(m, pr.uid, abi.SigProcRunStarted, abi.RunStarted{Pid: pr.pid, RunID: r.id, ConversationID: r.cid})
	go func() {
		defer m.wg.Done()
		defer close(done)
		defer cancel()
		status, rerr := m.execute(ctx, pr, r)
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if pr.run != r || r.stop == stopShutdown {
			return // its end is recorded, or Close left it to the next Start
		}
		if r.stop == stopAbort {
			// The aborter may have stopped waiting (its ctx ended, as
			// when the run aborts itself): the end is recorded here.
			if err := m.endAbortedLocked(pr, r); err != nil {
				m.log.Error("proc: run: record an aborted run", "pid", pr.pid, "run", r.id, "err", err)
			}
			return
		}
		if status == "waiting_hil" {
			pr.state = waiting
			// proc.hil may have answered the request between runTool
			// storing it and this goroutine taking pr.mu: it then saw
			// the run still running and left it to this goroutine, which
			// resumes it, or the run would wait with nothing pending.
			pending, err := m.hilPending(r.id)
			if err != nil {
				m.log.Error("proc: run: read its HIL request", "pid", pr.pid, "run", r.id, "err", err)
				return
			}
			if !pending {
				if err := m.resumeLocked(pr, r); err != nil {
					m.log.Error("proc: run: resume after an answer", "pid", pr.pid, "run", r.id, "err", err)
				}
			}
			return // else proc.hil resumes it
		}
		m.finishLocked(pr, r, status, rerr)
	}()
}

// resumeLocked starts r again after its wait on a human: it records r as
// running and starts it.
func (m *engine) resumeLocked(pr *process, r *activeRun) error {
	if _, err := m.st.Exec(context.Background(), `UPDATE proc_runs SET status='running' WHERE run_id=? AND status='waiting_hil'`, r.id); err != nil {
		return err
	}
	m.startLocked(pr, r)
	return nil
}

// hilPending says whether run runID has a HIL request waiting for an
// answer.
func (m *engine) hilPending(runID string) (bool, error) {
	var n int
	err := m.st.QueryRowContext(context.Background(), `SELECT count(*) FROM proc_hil WHERE run_id=? AND status='pending'`, runID).Scan(&n)
	return n > 0, err
}

// finishLocked records the end of r and starts the next queued message:
// one transaction does both.
func (m *engine) finishLocked(pr *process, r *activeRun, status string, rerr error) {
	errText := ""
	if rerr != nil {
		errText = rerr.Error()
	}
	pr.run, pr.state = nil, idle
	m.runEndedControl(pr, r)
	m.nextLocked(context.Background(), pr, func(tx *kernel.Tx) error {
		_, err := m.st.TxExec(tx, `UPDATE proc_runs SET status=?, finished_at=?, error=? WHERE run_id=?`, status, now(), nullIf(errText), r.id)
		return err
	})
	signal(m, pr.uid, abi.SigProcRunFinished, abi.RunFinished{Pid: pr.pid, RunID: r.id, ConversationID: r.cid, Status: status,
		Aborted: status == "aborted", Error: errText})
	// chat.complete is the seed's notification that a chat run ended;
	// an aborted one says so (aborted: true).
	chatSignal(m, pr.uid, r.id, abi.SigChatComplete, abi.ChatComplete{Pid: pr.pid, RunID: r.id, ConversationID: r.cid,
		Status: status, Aborted: status == "aborted"}, true)
	m.runEnded(r.id, status, errText)
}

// nextLocked runs before (if not nil) and then, in the same transaction,
// takes the oldest queued message of pr and records the run it starts,
// and starts it; with nothing to start it marks the process idle. pr is
// idle. Entries of an old generation or of a closed conversation are
// dropped: their conversation was reset or closed. A message queued
// behind a compaction of its conversation waits for it (FIFO); the
// compaction starts it when it ends. A failure is logged: the queue stays
// as it was, for the next message or restart.
func (m *engine) nextLocked(ctx context.Context, pr *process, before func(*kernel.Tx) error) {
	var next *activeRun
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		next = nil
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		for {
			var id, gen int64
			var cid, runID, text, role string
			var meta eventRow
			err := m.st.TxQueryRow(tx, `SELECT id,cid,generation,run_id,message,role,kind,source,trace_id,process_cap,media FROM proc_queue WHERE pid=? ORDER BY id LIMIT 1`, pr.pid).
				Scan(&id, &cid, &gen, &runID, &text, &role, &meta.kind, &meta.source, &meta.trace, &meta.cap, &meta.media)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && pr.compacting[cid]) {
				_, err = m.st.TxExec(tx, `UPDATE proc_processes SET state='idle' WHERE pid=? AND state='running'`, pr.pid)
				return err
			}
			if err != nil {
				return err
			}
			if _, err := m.st.TxExec(tx, `DELETE FROM proc_queue WHERE id=?`, id); err != nil {
				return err
			}
			var cur int64
			var status string
			err = m.st.TxQueryRow(tx, `SELECT generation,status FROM proc_conversations WHERE pid=? AND cid=?`, pr.pid, cid).Scan(&cur, &status)
			if errors.Is(err, sql.ErrNoRows) || err == nil && (cur != gen || status != "open") {
				continue
			}
			if err != nil {
				return err
			}
			if err := m.startRunTx(tx, pr.pid, cid, gen, runID, role, jsonString(text), meta, now()); err != nil {
				return err
			}
			next = &activeRun{id: runID, cid: cid, gen: gen, trace: runTrace(meta.trace.String)}
			return nil
		}
	})
	if err != nil {
		m.log.Error("proc: start the next queued message", "pid", pr.pid, "err", err)
		return
	}
	if next != nil {
		m.startLocked(pr, next)
	}
}

// resume restarts, after a daemon restart, the runs that were under way:
// a running run continues from its stored history; a run waiting on a
// human keeps waiting; a process with only queued messages starts one.
func (m *engine) resume(ctx context.Context) error {
	// A block's nested call that waited for a human ended with the
	// daemon: its request is stale, and its run runs again.
	if err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := m.st.TxExec(tx, `UPDATE proc_runs SET status='running' WHERE status='waiting_hil' AND run_id IN
			(SELECT run_id FROM proc_hil WHERE status='pending' AND call_id LIKE '%/codemode/%')`); err != nil {
			return err
		}
		_, err := m.st.TxExec(tx, `UPDATE proc_hil SET status='stale' WHERE status='pending' AND call_id LIKE '%/codemode/%'`)
		return err
	}); err != nil {
		return err
	}
	rows, err := m.st.QueryContext(ctx, `SELECT r.run_id,r.pid,r.cid,r.generation,r.status,p.uid FROM proc_runs r
		JOIN proc_processes p ON p.pid=r.pid WHERE r.status IN ('running','waiting_hil') ORDER BY r.started_at`)
	if err != nil {
		return err
	}
	type pending struct {
		run    *activeRun
		status string
		uid    uint32
		pid    string
	}
	var ps []pending
	for rows.Next() {
		x := pending{run: &activeRun{}}
		if err := rows.Scan(&x.run.id, &x.pid, &x.run.cid, &x.run.gen, &x.status, &x.uid); err != nil {
			rows.Close()
			return err
		}
		ps = append(ps, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	busy := map[string]bool{}
	for _, x := range ps {
		pr := m.proc(x.pid, x.uid)
		pr.mu.Lock()
		r := x.run
		r.check.restored = true // its checkpoints are in the store (restoreCheck)
		var err error
		switch {
		case pr.run != nil:
			// Two live runs for one process cannot be: end the later.
			_, err = m.st.Exec(ctx, `UPDATE proc_runs SET status='error', error='superseded at restart' WHERE run_id=?`, r.id)
		case x.status == "waiting_hil":
			pr.run, pr.state = r, waiting
		default:
			m.startLocked(pr, r)
		}
		busy[x.pid] = true
		pr.mu.Unlock()
		if err != nil {
			return err
		}
	}
	rows, err = m.st.QueryContext(ctx, `SELECT DISTINCT q.pid, p.uid FROM proc_queue q JOIN proc_processes p ON p.pid=q.pid`)
	if err != nil {
		return err
	}
	type qp struct {
		pid string
		uid uint32
	}
	var qs []qp
	for rows.Next() {
		var x qp
		if err := rows.Scan(&x.pid, &x.uid); err != nil {
			rows.Close()
			return err
		}
		qs = append(qs, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, x := range qs {
		if busy[x.pid] {
			continue
		}
		pr := m.proc(x.pid, x.uid)
		pr.mu.Lock()
		if pr.state == idle {
			m.nextLocked(ctx, pr, nil)
		}
		pr.mu.Unlock()
	}
	return nil
}

// Abort ends p's active run: its pending tool calls end as interrupted (resultInterrupted),
// a pending HIL request goes stale, and the next queued message starts. A
// run still being recorded (starting) is aborted once Send has recorded
// it.
func (m *engine) Abort(ctx context.Context, p *abi.Process) (*abi.AbortResult, error) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	r := pr.run
	pr.mu.Unlock()
	if r == nil {
		return &abi.AbortResult{OK: true, Pid: p.Pid}, nil
	}
	return m.abortRun(ctx, pr, r)
}

// abortWait bounds how long an abort waits for a run's goroutine to stop
// (a variable for the tests, which make it longer than any wait of theirs).
var abortWait = 10 * time.Second

// abortRun ends run r of pr, and does nothing unless r is pr's run (once
// Send has recorded it). A waiting run ends without pr.mu being released,
// so that no answer resumes it meanwhile. A running run's goroutine is
// cancelled and waited for, until it ends, ctx ends (as when the run
// aborts itself: its own tool call is the caller) or abortWait passes;
// the end is then recorded by whichever of the goroutine and abortRun
// comes first. The bookkeeping does not depend on ctx.
func (m *engine) abortRun(ctx context.Context, pr *process, r *activeRun) (*abi.AbortResult, error) {
	notAborted := &abi.AbortResult{OK: true, Pid: pr.pid}
	if r.recorded != nil {
		select {
		case <-r.recorded:
		default:
			select {
			case <-r.recorded:
			case <-ctx.Done():
				return nil, abi.E(abi.Path(pr.pid), ctx.Err())
			}
		}
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.run != r {
		return aborted(pr.pid, r, notAborted), nil
	}
	r.stop = stopAbort
	if pr.state == running {
		r.cancel()
		done := r.done
		pr.mu.Unlock()
		t := time.NewTimer(abortWait)
		select {
		case <-done:
		case <-ctx.Done():
		case <-t.C:
			m.log.Warn("proc: abort: run did not stop", "pid", pr.pid, "run", r.id, "after", abortWait)
		}
		t.Stop()
		pr.mu.Lock()
		if pr.run != r {
			return aborted(pr.pid, r, notAborted), nil
		}
	}
	if err := m.endAbortedLocked(pr, r); err != nil {
		return nil, abi.E(abi.Path(pr.pid), err)
	}
	return aborted(pr.pid, r, notAborted), nil
}

// aborted is the result of an abort of r: notAborted unless r ended
// aborted.
func aborted(pid string, r *activeRun, notAborted *abi.AbortResult) *abi.AbortResult {
	if !r.ended {
		return notAborted
	}
	n := r.interrupted
	return &abi.AbortResult{OK: true, Pid: pid, Aborted: true, RunID: r.id, InterruptedToolCalls: &n, ContinuedQueuedRunID: r.next}
}

// endAbortedLocked records the end of r, pr's run, as aborted (its pending
// tool calls interrupted, its HIL requests stale, the finish signals
// sent) and starts the next queued message. On a failure r stays pr's
// run, so that another abort can end it.
func (m *engine) endAbortedLocked(pr *process, r *activeRun) error {
	n, err := m.interruptPending(context.Background(), pr.pid, r)
	if err != nil {
		return err
	}
	m.finishLocked(pr, r, "aborted", nil)
	r.ended, r.interrupted = true, n
	if pr.run != nil {
		r.next = pr.run.id
	}
	return nil
}

// interruptPending writes interrupted results (resultInterrupted) for the tool calls of r
// that have none, and makes r's HIL requests stale.
func (m *engine) interruptPending(ctx context.Context, pid string, r *activeRun) (int, error) {
	n := 0
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		n = 0
		calls, err := pendingCalls(ctx, tx, pid, r.cid, r.gen)
		if err != nil {
			return err
		}
		t := now()
		for _, c := range calls {
			b, err := json.Marshal(toolResultContent{ToolCallID: c.ID, ToolName: c.Name, Output: resultInterrupted, IsError: true})
			if err != nil {
				return err
			}
			if _, err := m.st.TxExec(tx, `INSERT INTO proc_messages(pid,cid,generation,role,content,created_at) VALUES(?,?,?,'toolResult',?,?)`, pid, r.cid, r.gen, string(b), t); err != nil {
				return err
			}
			n++
		}
		_, err = m.st.TxExec(tx, `UPDATE proc_hil SET status='stale' WHERE pid=? AND run_id=? AND status='pending'`, pid, r.id)
		return err
	})
	return n, err
}

// assistantContent is the content of an assistant message.
type assistantContent struct {
	Text      string           `json:"text"`
	ToolCalls []model.ToolCall `json:"toolCalls,omitempty"`
}

// toolResultContent is the content of a toolResult message.
type toolResultContent struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Output     string `json:"output"`
	IsError    bool   `json:"isError,omitempty"`
	// Media are the images the tool gave (an fs.read of an image file),
	// kept in the owner's media store.
	Media []abi.MediaRef `json:"media,omitempty"`
}

// pendingCalls returns the tool calls of the conversation's last assistant
// message that have no result yet.
func pendingCalls(ctx context.Context, q querier, pid, cid string, gen int64) ([]model.ToolCall, error) {
	var id int64
	var content string
	err := q.QueryRowContext(ctx, `SELECT id,content FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND role='assistant' ORDER BY id DESC LIMIT 1`, pid, cid, gen).Scan(&id, &content)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ac assistantContent
	if err := json.Unmarshal([]byte(content), &ac); err != nil {
		return nil, abi.E(abi.Path(pid+"/"+cid), abi.Other, fmt.Sprintf("message %d: %v", id, err))
	}
	if len(ac.ToolCalls) == 0 {
		return nil, nil
	}
	done := map[string]bool{}
	rows, err := q.QueryContext(ctx, `SELECT id,content FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND role='toolResult' AND id>?`, pid, cid, gen, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var rid int64
		var c string
		if err := rows.Scan(&rid, &c); err != nil {
			return nil, err
		}
		var tr toolResultContent
		if err := json.Unmarshal([]byte(c), &tr); err != nil {
			return nil, abi.E(abi.Path(pid+"/"+cid), abi.Other, fmt.Sprintf("message %d: %v", rid, err))
		}
		done[tr.ToolCallID] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []model.ToolCall
	for _, c := range ac.ToolCalls {
		if !done[c.ID] {
			out = append(out, c)
		}
	}
	return out, nil
}
