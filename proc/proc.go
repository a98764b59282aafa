// Package proc is GSV's agent processes: durable agents with conversations,
// a FIFO message queue, an agent loop whose tools are syscalls made as the
// process's owner, human-in-the-loop approvals, and a history lifecycle
// (compact, fork, segments, reset, kill) that never loses a message.
//
// Register adds the proc.* syscalls to the kernel's dispatcher and the
// /proc subtree to its namespace. Every read and write of /proc is one of
// those syscalls; all state lives in the kernel's SQLite store.
package proc

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc/model"
)

// Options configure the process manager.
type Options struct {
	// Provider, if set, returns the model provider for a process owned by
	// uid (tests inject a scripted provider). By default the provider comes
	// from the kernel's config: config/ai/* overridden by users/<uid>/ai/*.
	Provider func(ctx context.Context, uid uint32) (model.Provider, string, error)
	Logger   *slog.Logger
	// MaxSteps bounds the model calls of one run (default 40).
	MaxSteps int
}

// Manager runs the processes of one kernel.
type Manager struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	opts  Options

	mu    sync.Mutex
	procs map[string]*process
	// closed is set by Close: no run goroutine starts after it (guarded
	// by mu, like wg.Add, so that Close's wg.Wait sees every goroutine).
	closed bool
	wg     sync.WaitGroup // the run goroutines

	provMu    sync.Mutex
	provCache map[string]model.Provider // see provider

	cache *renderCache // history and transcript files (cache.go)
}

// process is the runtime state of one process: at most one active run.
type process struct {
	pid string
	uid uint32
	mu  sync.Mutex
	run *activeRun // nil when idle
	// compacting holds the conversations a proc.conversation.compact is
	// working on (without holding mu): messages to them queue meanwhile.
	compacting map[string]bool
}

// activeRun is the run a process is executing or waiting on (for HIL).
type activeRun struct {
	id, cid string
	gen     int64
	cancel  context.CancelFunc
	done    chan struct{} // closed when its goroutine exits; nil while waiting on HIL
	aborted bool
	// shutdown is set by Close: the goroutine ends without recording an
	// end, so that the next Register resumes the run.
	shutdown bool
}

// Register migrates the proc schema, makes every user's init process
// (kernel.OnUserCreated, and for the users that have none yet, at once),
// registers the proc.* syscalls and the /proc tree, and resumes the runs that were under way when the
// daemon stopped.
func Register(space *ns.Space, opts Options) (*Manager, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxSteps == 0 {
		opts.MaxSteps = 40
	}
	if err := k.Store.Migrate("proc", migrations); err != nil {
		return nil, err
	}
	m := &Manager{k: k, space: space, st: k.Store, log: opts.Logger, opts: opts, procs: map[string]*process{}}
	// Every user has an init process from the moment they exist: users
	// made from now on get it in the transaction that makes them, users
	// made before (root, older states) get it here.
	k.OnUserCreated(m.makeInitTx)
	if err := m.backfillInits(context.Background()); err != nil {
		return nil, err
	}
	m.registerSyscalls()
	m.registerCheckpoint()
	if err := m.registerNamespace(); err != nil {
		return nil, err
	}
	space.Bind("/proc", m.tree())
	if err := m.resume(context.Background()); err != nil {
		return nil, err
	}
	return m, nil
}

func now() int64 { return time.Now().UnixMilli() }

func newID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// proc returns the runtime of pid (the process must exist).
func (m *Manager) proc(pid string, uid uint32) *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.procs[pid]
	if p == nil {
		p = &process{pid: pid, uid: uid}
		m.procs[pid] = p
	}
	return p
}

// Process is a process record, as proc.list shows it.
type Process struct {
	Pid         string  `json:"pid"`
	Uid         uint32  `json:"uid"`
	Profile     string  `json:"profile"`
	ParentPid   *string `json:"parentPid"`
	State       string  `json:"state"`
	Label       *string `json:"label"`
	CreatedAt   int64   `json:"createdAt"`
	WorkspaceID *string `json:"workspaceId"`
	Cwd         string  `json:"cwd"`
}

// Conversation is the seed's ProcConversation.
type Conversation struct {
	ID           string  `json:"id"`
	Generation   int64   `json:"generation"`
	Status       string  `json:"status"`
	Title        *string `json:"title"`
	MessageCount int64   `json:"messageCount"`
	CreatedAt    int64   `json:"createdAt"`
	UpdatedAt    int64   `json:"updatedAt"`
}

// Message is one stored message: role user, assistant, system or
// toolResult; content is JSON (a string for user and system messages).
type Message struct {
	ID        int64           `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Timestamp int64           `json:"timestamp"`
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
}

// HilRequest is the seed's ProcHilRequest.
type HilRequest struct {
	RequestID      string          `json:"requestId"`
	RunID          string          `json:"runId"`
	ConversationID string          `json:"conversationId"`
	CallID         string          `json:"callId"`
	ToolName       string          `json:"toolName"`
	Syscall        string          `json:"syscall"`
	Args           json.RawMessage `json:"args"`
	CreatedAt      int64           `json:"createdAt"`
}

// lookup returns pid's record if c may touch it: its owner or root.
// Another user's process is reported as not existing.
func (m *Manager) lookup(ctx context.Context, c *kernel.Caller, pid string) (*Process, error) {
	if pid == "" {
		pid = initPid(c.Uid)
	}
	p, err := m.get(ctx, pid)
	if err != nil {
		return nil, err
	}
	if p.Uid != c.Uid && !c.IsRoot() {
		return nil, abi.E(abi.Path(pid), abi.NotExist, "no such process")
	}
	return p, nil
}

// get returns the record of pid. It only reads: a process that is not
// stored, an init process included, does not exist.
func (m *Manager) get(ctx context.Context, pid string) (*Process, error) {
	var p Process
	err := m.st.QueryRowContext(ctx, `SELECT pid,uid,profile,parent_pid,state,label,created_at,workspace_id,cwd FROM proc_processes WHERE pid=?`, pid).
		Scan(&p.Pid, &p.Uid, &p.Profile, &p.ParentPid, &p.State, &p.Label, &p.CreatedAt, &p.WorkspaceID, &p.Cwd)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(pid), abi.NotExist, "no such process")
	}
	if err != nil {
		return nil, abi.E(abi.Path(pid), err)
	}
	return &p, nil
}

// initPid is the pid of uid's init process.
func initPid(uid uint32) string { return fmt.Sprintf("init:%d", uid) }

// makeInitTx makes u's init process in tx, the transaction that creates u
// (a hook of kernel.OnUserCreated): every user has an init process from the
// moment they exist.
func (m *Manager) makeInitTx(tx *sql.Tx, u *kernel.User) error {
	return m.createTx(tx, initPid(u.Uid), u.Uid, "init", nil, nil, u.Home, now())
}

// backfillInits makes the init process of every user who has none (users
// created before proc registered its hook: root, and the users of a state
// made before every user had one), in one transaction. When every user
// has one, it writes nothing.
func (m *Manager) backfillInits(ctx context.Context) error {
	us, err := m.k.Users(ctx)
	if err != nil {
		return err
	}
	rows, err := m.st.QueryContext(ctx, `SELECT pid FROM proc_processes WHERE profile='init'`)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var pid string
		if err := rows.Scan(&pid); err != nil {
			rows.Close()
			return err
		}
		have[pid] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var missing []kernel.User
	for _, u := range us {
		if !have[initPid(u.Uid)] {
			missing = append(missing, u)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return m.st.Tx(ctx, func(tx *sql.Tx) error {
		for i := range missing {
			if err := m.makeInitTx(tx, &missing[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// create inserts a process with its default conversation, unless pid
// exists (then it changes nothing).
func (m *Manager) create(ctx context.Context, pid string, uid uint32, profile string, label, parent *string, cwd string) error {
	t := now()
	return m.st.Tx(ctx, func(tx *sql.Tx) error {
		return m.createTx(tx, pid, uid, profile, label, parent, cwd, t)
	})
}

// createTx is create in tx, a transaction of the store, at time t.
func (m *Manager) createTx(tx *sql.Tx, pid string, uid uint32, profile string, label, parent *string, cwd string, t int64) error {
	res, err := m.st.TxExec(tx, `INSERT OR IGNORE INTO proc_processes(pid,uid,profile,label,parent_pid,cwd,created_at) VALUES(?,?,?,?,?,?,?)`,
		pid, uid, profile, label, parent, cwd, t)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	_, err = m.st.TxExec(tx, `INSERT OR IGNORE INTO proc_conversations(pid,cid,created_at,updated_at) VALUES(?,?,?,?)`, pid, "default", t, t)
	return err
}

// conv returns one conversation of pid.
func (m *Manager) conv(ctx context.Context, pid, cid string) (*Conversation, error) {
	var c Conversation
	err := m.st.QueryRowContext(ctx, `SELECT cid,generation,status,title,created_at,updated_at,
		(SELECT count(*) FROM proc_messages m WHERE m.pid=c.pid AND m.cid=c.cid AND m.generation=c.generation)
		FROM proc_conversations c WHERE pid=? AND cid=?`, pid, cid).
		Scan(&c.ID, &c.Generation, &c.Status, &c.Title, &c.CreatedAt, &c.UpdatedAt, &c.MessageCount)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(pid+"/"+cid), abi.NotExist, "no such conversation")
	}
	if err != nil {
		return nil, abi.E(err)
	}
	return &c, nil
}

// convRecord returns one conversation of pid without its messageCount
// (counting the messages of a long conversation is most of the cost of a
// lookup).
func (m *Manager) convRecord(ctx context.Context, pid, cid string) (*Conversation, error) {
	c := Conversation{}
	err := m.st.QueryRowContext(ctx, `SELECT cid,generation,status,title,created_at,updated_at FROM proc_conversations WHERE pid=? AND cid=?`, pid, cid).
		Scan(&c.ID, &c.Generation, &c.Status, &c.Title, &c.CreatedAt, &c.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(pid+"/"+cid), abi.NotExist, "no such conversation")
	}
	if err != nil {
		return nil, abi.E(err)
	}
	return &c, nil
}

// readMessages returns the messages a query of id,role,content,created_at
// selects.
func (m *Manager) readMessages(ctx context.Context, query string, args ...any) ([]Message, error) {
	rows, err := m.st.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	msgs := []Message{}
	for rows.Next() {
		var msg Message
		var content string
		rows.Scan(&msg.ID, &msg.Role, &content, &msg.Timestamp)
		msg.Content = json.RawMessage(content)
		msgs = append(msgs, msg)
	}
	return msgs, rows.Err()
}

// querier reads: the store (its read pool, with cached statements), or a
// *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// signal publishes a process signal to the owner (and root).
func (m *Manager) signal(uid uint32, name string, payload map[string]any) {
	m.k.Signal(name, payload, kernel.Audience{Uids: []uint32{uid}})
}

// changed announces a durable state change of pid.
func (m *Manager) changed(uid uint32, pid, what string, extra map[string]any) {
	p := map[string]any{"pid": pid, "change": what}
	for k, v := range extra {
		p[k] = v
	}
	m.signal(uid, "proc.changed", p)
}

// EventPrefix marks runtime events in a conversation.
const EventPrefix = "[Process Event]: "

// Send delivers message to conversation cid of p: it starts a run when
// the process is idle, else queues the message (FIFO across the process's
// conversations). The message is durable when Send returns. An event (a
// scheduled or system event, not the user speaking) enters the
// conversation as a visible system message "[Process Event]: <text>".
func (m *Manager) Send(ctx context.Context, p *Process, cid, text string, event bool) (runID string, queued bool, err error) {
	if cid == "" {
		cid = "default"
	}
	if strings.TrimSpace(text) == "" {
		return "", false, abi.E(abi.Invalid, "empty message")
	}
	role := "user"
	if event {
		role, text = "system", EventPrefix+text
	}
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	runID = newID("run_")
	var gen int64
	err = m.st.Tx(ctx, func(tx *sql.Tx) error {
		// Only generation and status: counting the conversation's
		// messages here would make every send scan it.
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
		if pr.run != nil || m.queued(tx, p.Pid) || pr.compacting[cid] {
			queued = true
			_, err = m.st.TxExec(tx, `INSERT INTO proc_queue(pid,cid,generation,run_id,message,role,created_at) VALUES(?,?,?,?,?,?,?)`, p.Pid, cid, gen, runID, text, role, t)
			return err
		}
		return m.startRunTx(ctx, tx, p.Pid, cid, gen, runID, role, jsonString(text), t)
	})
	if err != nil {
		return "", false, err
	}
	if queued {
		m.changed(p.Uid, p.Pid, "queue", map[string]any{"conversationId": cid, "runId": runID})
		return runID, true, nil
	}
	m.launch(pr, &activeRun{id: runID, cid: cid, gen: gen})
	return runID, false, nil
}

// queued says whether pid has messages queued (in tx, a transaction of
// the store's Tx).
func (m *Manager) queued(tx *sql.Tx, pid string) bool {
	var n int
	m.st.TxQueryRow(tx, `SELECT EXISTS(SELECT 1 FROM proc_queue WHERE pid=?)`, pid).Scan(&n)
	return n > 0
}

// startRunTx appends the message that starts a run and records the run.
func (m *Manager) startRunTx(ctx context.Context, tx *sql.Tx, pid, cid string, gen int64, runID, role string, content json.RawMessage, t int64) error {
	if _, err := m.st.TxExec(tx, `INSERT INTO proc_messages(pid,cid,generation,role,content,created_at) VALUES(?,?,?,?,?,?)`, pid, cid, gen, role, string(content), t); err != nil {
		return err
	}
	if _, err := m.st.TxExec(tx, `UPDATE proc_conversations SET updated_at=? WHERE pid=? AND cid=?`, t, pid, cid); err != nil {
		return err
	}
	if _, err := m.st.TxExec(tx, `INSERT INTO proc_runs(run_id,pid,cid,generation,status,started_at) VALUES(?,?,?,?,'running',?)`, runID, pid, cid, gen, t); err != nil {
		return err
	}
	_, err := m.st.TxExec(tx, `UPDATE proc_processes SET state='running' WHERE pid=?`, pid)
	return err
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// launch starts the goroutine of run r on pr (pr.mu held). After Close it
// starts nothing: r stays recorded as running, and the next Register
// resumes it.
func (m *Manager) launch(pr *process, r *activeRun) {
	pr.run = r
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		r.done, r.cancel = nil, nil
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	done := make(chan struct{})
	r.done = done
	m.signal(pr.uid, "proc.run.started", map[string]any{"pid": pr.pid, "runId": r.id, "conversationId": r.cid})
	go func() {
		defer m.wg.Done()
		defer close(done)
		status, rerr := m.execute(ctx, pr, r)
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if r.aborted || r.shutdown || pr.run != r {
			return // abort, reset or Close ended the run
		}
		if status == "waiting_hil" {
			r.done, r.cancel = nil, nil
			// proc.hil may have answered the request between runTool
			// storing it and this goroutine taking pr.mu: it then saw
			// a run still executing (done != nil) and did not relaunch
			// it, so this goroutine does, or the run would wait forever
			// with nothing pending.
			if !m.hilPending(r.id) {
				m.st.Exec(context.Background(), `UPDATE proc_runs SET status='running' WHERE run_id=? AND status='waiting_hil'`, r.id)
				m.launch(pr, r)
			}
			return // else proc.hil resumes it
		}
		m.finish(pr, r, status, rerr)
	}()
}

// hilPending says whether run runID has a HIL request waiting for an
// answer.
func (m *Manager) hilPending(runID string) bool {
	var n int
	m.st.QueryRowContext(context.Background(), `SELECT count(*) FROM proc_hil WHERE run_id=? AND status='pending'`, runID).Scan(&n)
	return n > 0
}

// Close stops the manager for a shutdown: it cancels every executing run
// and waits until their goroutines have ended, leaving their stored state
// (run "running", queue, pending HIL) as it is, so that Register on the
// same store resumes them. Call it before closing the kernel. Runs are not
// started after Close.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	procs := make([]*process, 0, len(m.procs))
	for _, pr := range m.procs {
		procs = append(procs, pr)
	}
	m.mu.Unlock()
	for _, pr := range procs {
		pr.mu.Lock()
		if r := pr.run; r != nil && r.cancel != nil {
			r.shutdown = true
			r.cancel()
		}
		pr.mu.Unlock()
	}
	m.wg.Wait()
	return nil
}

// finish records the end of r and starts the next queued message (pr.mu
// held): one transaction does both.
func (m *Manager) finish(pr *process, r *activeRun, status string, rerr error) {
	ctx := context.Background()
	errText := ""
	if rerr != nil {
		errText = rerr.Error()
	}
	pr.run = nil
	next, err := m.advance(ctx, pr, func(tx *sql.Tx) error {
		_, err := m.st.TxExec(tx, `UPDATE proc_runs SET status=?, finished_at=?, error=? WHERE run_id=?`, status, now(), nullIf(errText), r.id)
		return err
	})
	if err != nil {
		m.log.Error("proc: finish run", "pid", pr.pid, "run", r.id, "err", err)
	}
	payload := map[string]any{"pid": pr.pid, "runId": r.id, "conversationId": r.cid, "status": status}
	if status == "aborted" {
		payload["aborted"] = true
	}
	if errText != "" {
		payload["error"] = errText
	}
	m.signal(pr.uid, "proc.run.finished", payload)
	// chat.complete is the seed's notification that a chat run ended;
	// an aborted one says so (aborted: true).
	m.signal(pr.uid, "chat.complete", map[string]any{"pid": pr.pid, "runId": r.id, "conversationId": r.cid,
		"status": status, "aborted": status == "aborted"})
	if next != nil {
		m.launch(pr, next)
	}
}

func nullIf(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// promote starts the oldest queued message of pr, if any (pr.mu held).
func (m *Manager) promote(ctx context.Context, pr *process) {
	next, err := m.advance(ctx, pr, nil)
	if err != nil {
		m.log.Error("proc: promote", "pid", pr.pid, "err", err)
	}
	if next != nil {
		m.launch(pr, next)
	}
}

// advance runs before (if not nil) and then, in the same transaction,
// takes the oldest queued message of pr and records the run it starts,
// returning that run for the caller to launch; with nothing to start it
// marks the process idle and returns nil. Entries of an old generation or
// of a closed conversation are dropped: their conversation was reset or
// closed. A message queued behind a compaction of its conversation waits
// for it (FIFO); the compaction promotes it. pr.mu is held.
func (m *Manager) advance(ctx context.Context, pr *process, before func(*sql.Tx) error) (*activeRun, error) {
	var next *activeRun
	err := m.st.Tx(ctx, func(tx *sql.Tx) error {
		next = nil
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		for {
			var id, gen int64
			var cid, runID, text, role string
			err := m.st.TxQueryRow(tx, `SELECT id,cid,generation,run_id,message,role FROM proc_queue WHERE pid=? ORDER BY id LIMIT 1`, pr.pid).
				Scan(&id, &cid, &gen, &runID, &text, &role)
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
			if err := m.st.TxQueryRow(tx, `SELECT generation,status FROM proc_conversations WHERE pid=? AND cid=?`, pr.pid, cid).Scan(&cur, &status); err != nil || cur != gen || status != "open" {
				continue
			}
			if err := m.startRunTx(ctx, tx, pr.pid, cid, gen, runID, role, jsonString(text), now()); err != nil {
				return err
			}
			next = &activeRun{id: runID, cid: cid, gen: gen}
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}

// resume restarts, after a daemon restart, the runs that were under way:
// a running run continues from its stored history; a run waiting on a
// human keeps waiting; a process with only queued messages starts one.
func (m *Manager) resume(ctx context.Context) error {
	rows, err := m.st.QueryContext(ctx, `SELECT r.run_id,r.pid,r.cid,r.generation,r.status,p.uid FROM proc_runs r
		JOIN proc_processes p ON p.pid=r.pid WHERE r.status IN ('running','waiting_hil') ORDER BY r.started_at`)
	if err != nil {
		return err
	}
	type pending struct {
		run    activeRun
		status string
		uid    uint32
		pid    string
	}
	var ps []pending
	for rows.Next() {
		var x pending
		if err := rows.Scan(&x.run.id, &x.pid, &x.run.cid, &x.run.gen, &x.status, &x.uid); err != nil {
			rows.Close()
			return err
		}
		ps = append(ps, x)
	}
	rows.Close()
	busy := map[string]bool{}
	for _, x := range ps {
		pr := m.proc(x.pid, x.uid)
		pr.mu.Lock()
		r := x.run
		if pr.run != nil {
			// Two live runs for one process cannot be: end the later.
			m.st.Exec(ctx, `UPDATE proc_runs SET status='error', error='superseded at restart' WHERE run_id=?`, r.id)
		} else if x.status == "waiting_hil" {
			pr.run = &r
		} else {
			m.launch(pr, &r)
		}
		busy[x.pid] = true
		pr.mu.Unlock()
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
		rows.Scan(&x.pid, &x.uid)
		qs = append(qs, x)
	}
	rows.Close()
	for _, x := range qs {
		if busy[x.pid] {
			continue
		}
		pr := m.proc(x.pid, x.uid)
		pr.mu.Lock()
		m.promote(ctx, pr)
		pr.mu.Unlock()
	}
	return nil
}

// Abort ends p's active run: its pending tool calls end as "interrupted",
// a pending HIL request goes stale, and the next queued message starts.
func (m *Manager) Abort(ctx context.Context, p *Process) (map[string]any, error) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	r := pr.run
	if r == nil {
		pr.mu.Unlock()
		return map[string]any{"ok": true, "pid": p.Pid, "aborted": false}, nil
	}
	r.aborted = true
	if r.cancel != nil {
		r.cancel()
	}
	done := r.done
	pr.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			m.log.Warn("proc: abort: run did not stop in 10s", "pid", p.Pid, "run", r.id)
		}
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.run != r {
		return map[string]any{"ok": true, "pid": p.Pid, "aborted": false}, nil
	}
	n, err := m.interruptPending(ctx, p.Pid, r)
	if err != nil {
		return nil, err
	}
	m.finish(pr, r, "aborted", nil)
	res := map[string]any{"ok": true, "pid": p.Pid, "aborted": true, "runId": r.id, "interruptedToolCalls": n}
	if pr.run != nil {
		res["continuedQueuedRunId"] = pr.run.id
	}
	return res, nil
}

// interruptPending writes "interrupted" results for the tool calls of r
// that have none, and makes r's HIL requests stale.
func (m *Manager) interruptPending(ctx context.Context, pid string, r *activeRun) (int, error) {
	n := 0
	err := m.st.Tx(ctx, func(tx *sql.Tx) error {
		calls, err := pendingCalls(ctx, tx, pid, r.cid, r.gen)
		if err != nil {
			return err
		}
		t := now()
		for _, c := range calls {
			b, _ := json.Marshal(toolResultContent{ToolCallID: c.ID, ToolName: c.Name, Output: "interrupted", IsError: true})
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
	json.Unmarshal([]byte(content), &ac)
	if len(ac.ToolCalls) == 0 {
		return nil, nil
	}
	done := map[string]bool{}
	rows, err := q.QueryContext(ctx, `SELECT content FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND role='toolResult' AND id>?`, pid, cid, gen, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		rows.Scan(&c)
		var tr toolResultContent
		json.Unmarshal([]byte(c), &tr)
		done[tr.ToolCallID] = true
	}
	var out []model.ToolCall
	for _, c := range ac.ToolCalls {
		if !done[c.ID] {
			out = append(out, c)
		}
	}
	return out, rows.Err()
}
