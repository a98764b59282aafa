package sched

import (
	"container/heap"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// Options configure the scheduler.
type Options struct {
	Logger *slog.Logger
	// Clock is the engine's clock; nil means the real one.
	Clock Clock
	// RunTimeout bounds one run's target syscall (default 5 minutes).
	RunTimeout time.Duration

	// testExec, when set (tests only: it is unexported), is called by
	// execute before the target: if it reports handled, its summary and
	// error are the run's and the target syscall is not made. It is an
	// option, not a Manager field, so that it is in place before the engine
	// (and reload's catch-up runs) start.
	testExec func(ctx context.Context, s *Schedule) (summary string, handled bool, err error)
}

// Manager is the kernel scheduler.
type Manager struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	clock Clock
	opts  Options

	emu  sync.Mutex // guards heap and next
	heap timerHeap
	next map[string]int64

	rmu     sync.Mutex
	running map[string]int64 // schedules with a run under way: its start (ms)
	touched map[string]bool  // running schedules re-armed by a change since their run began

	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	wg      sync.WaitGroup
}

var migrations = []string{
	`CREATE TABLE sched_schedules (
		id TEXT PRIMARY KEY,
		owner_uid INTEGER NOT NULL,
		creator_uid INTEGER NOT NULL,
		run_as_uid INTEGER NOT NULL,
		name TEXT NOT NULL,
		description TEXT,
		enabled INTEGER NOT NULL DEFAULT 1,
		expression TEXT NOT NULL,
		target TEXT NOT NULL,
		overlap TEXT NOT NULL DEFAULT 'skip',
		misfire TEXT NOT NULL DEFAULT 'skip',
		retry TEXT,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		next_run_at INTEGER,
		running_at INTEGER,
		last_run_at INTEGER,
		last_status TEXT,
		last_error TEXT,
		last_duration_ms INTEGER,
		run_count INTEGER NOT NULL DEFAULT 0,
		attempt INTEGER NOT NULL DEFAULT 0,
		UNIQUE (owner_uid, name)
	);
	CREATE INDEX sched_schedules_next ON sched_schedules(enabled, next_run_at);
	CREATE TABLE sched_runs (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		schedule_id TEXT NOT NULL,
		name TEXT NOT NULL,
		owner_uid INTEGER NOT NULL,
		scheduled_at INTEGER NOT NULL,
		started_at INTEGER NOT NULL,
		finished_at INTEGER NOT NULL,
		status TEXT NOT NULL,
		error TEXT,
		summary TEXT,
		duration_ms INTEGER NOT NULL
	);
	CREATE INDEX sched_runs_owner ON sched_runs(owner_uid, id);`,
}

// Register migrates the scheduler's schema, registers the sched.*
// syscalls and its files, reloads every enabled schedule (applying each
// one's misfire policy to what was missed while the daemon was down) and
// starts the engine.
func Register(space *ns.Space, opts Options) (*Manager, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.RunTimeout == 0 {
		opts.RunTimeout = 5 * time.Minute
	}
	if err := k.Store.Migrate("sched", migrations); err != nil {
		return nil, err
	}
	m := &Manager{k: k, space: space, st: k.Store, log: opts.Logger, clock: opts.Clock, opts: opts,
		next: map[string]int64{}, running: map[string]int64{}, touched: map[string]bool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	m.registerSyscalls()
	m.registerCrontabSyscalls()
	m.mountFiles()
	if err := m.reload(context.Background()); err != nil {
		return nil, err
	}
	go m.loop()
	return m, nil
}

// Close stops the engine and waits for runs under way.
func (m *Manager) Close() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.stopped
	m.wg.Wait()
}

func newID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "sch_" + hex.EncodeToString(b)
}

// nextAfter is the first fire time of s strictly after after (ms), or 0
// for none. Its arithmetic saturates: whatever the stored values, the
// answer is 0 or a time in (after, after+HorizonMs], never a time at or
// before after (which would fire again at once, in a loop).
func nextAfter(s *Schedule, after int64) int64 {
	e := s.Expression
	var next int64
	switch e.Kind {
	case "at", "after":
		next = s.occurrence()
	case "every":
		if e.EveryMs < MinEveryMs {
			return 0
		}
		anchor := s.CreatedAtMs
		if e.AnchorMs != nil {
			anchor = *e.AnchorMs
		}
		if after < anchor {
			next = anchor
			break
		}
		// after-anchor as unsigned cannot overflow; the next grid time
		// is after + (every - (after-anchor) mod every), in (after,
		// after+every].
		r := (uint64(after) - uint64(anchor)) % uint64(e.EveryMs)
		next = addSat(after, e.EveryMs-int64(r))
	case "cron":
		if after < cronMinMs || after > cronMaxMs {
			return 0
		}
		c, err := parseCronCached(e.Expr, e.Timezone)
		if err != nil {
			return 0
		}
		if t, ok := c.Next(time.UnixMilli(after)); ok {
			next = t.UnixMilli()
		}
	}
	if next <= after || next == math.MaxInt64 || next > addSat(after, HorizonMs) {
		return 0
	}
	return next
}

// The times (ms) cron expressions are evaluated between: years 1 to 9000.
const (
	cronMinMs = -62135596800000
	cronMaxMs = 221845392000000
)

// addSat is a+b, saturated at the int64 bounds.
func addSat(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return math.MaxInt64
	case b < 0 && c > a:
		return math.MinInt64
	}
	return c
}

// cronCache holds parsed cron expressions by expression and zone, so
// that nextAfter (twice per run) does not parse its schedule's expression
// each time (about 0.2 ms of CPU: cronexpr's parser, the zone file read).
// A *Cron is safe for concurrent use.
var cronCache struct {
	sync.Mutex
	m map[[2]string]*Cron
}

// cronCacheMax bounds cronCache: it is emptied when it reaches this size.
const cronCacheMax = 4096

func parseCronCached(expr, tz string) (*Cron, error) {
	key := [2]string{expr, tz}
	cronCache.Lock()
	c := cronCache.m[key]
	cronCache.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := ParseCron(expr, tz)
	if err != nil {
		return nil, err
	}
	cronCache.Lock()
	if cronCache.m == nil || len(cronCache.m) >= cronCacheMax {
		cronCache.m = map[[2]string]*Cron{}
	}
	cronCache.m[key] = c
	cronCache.Unlock()
	return c, nil
}

// reload arms every enabled schedule. A schedule whose next time passed
// while the daemon was down follows its misfire policy: skip (the missed
// occurrences collapse and the next future one is armed; a missed one-shot
// is recorded as skipped and disabled) or run-once (one catch-up run now).
func (m *Manager) reload(ctx context.Context) error {
	now := m.clock.Now().UnixMilli()
	rows, err := m.st.QueryContext(ctx, `SELECT id,next_run_at FROM sched_schedules WHERE enabled=1 AND next_run_at>?`, now)
	if err != nil {
		return err
	}
	m.emu.Lock()
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			m.emu.Unlock()
			rows.Close()
			return err
		}
		m.next[id] = at
		m.heap = append(m.heap, entry{at, id})
	}
	heap.Init(&m.heap)
	m.emu.Unlock()
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// The missed schedules are loaded by one query and their misfire
	// policy applied in one transaction: a query and a write or two per
	// schedule (about 0.5 ms each) would take 51 s to reload 100,000
	// hourly schedules after a downtime of over an hour.
	miss, err := m.missed(ctx, now)
	if err != nil {
		return err
	}
	var arms []entry
	var skipped []*Schedule
	err = m.st.Tx(ctx, func(tx *sql.Tx) error {
		// Runs that were under way when the daemon stopped are over.
		if _, err := tx.Exec(`UPDATE sched_schedules SET running_at=NULL WHERE running_at IS NOT NULL`); err != nil {
			return err
		}
		upd, err := tx.Prepare(`UPDATE sched_schedules SET next_run_at=? WHERE id=?`)
		if err != nil {
			return err
		}
		defer upd.Close()
		for i := range miss {
			s := &miss[i]
			if s.MisfirePolicy == "run-once" {
				arms = append(arms, entry{now, s.ID}) // the catch-up run
				continue
			}
			if s.Expression.oneShot() {
				if err := m.recordTx(tx, s, *s.State.NextRunAtMs, now, now, "skipped", "missed while the daemon was down", ""); err != nil {
					return err
				}
				if _, err := tx.Exec(`UPDATE sched_schedules SET next_run_at=NULL, enabled=0 WHERE id=?`, s.ID); err != nil {
					return err
				}
				skipped = append(skipped, s)
				continue
			}
			next := nextAfter(s, now)
			if _, err := upd.Exec(nullInt(next), s.ID); err != nil {
				return err
			}
			if next != 0 {
				arms = append(arms, entry{next, s.ID})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, s := range skipped {
		m.signalRun(s, "skipped", "missed while the daemon was down")
	}
	m.emu.Lock()
	for _, e := range arms {
		m.next[e.id] = e.at
		m.heap = append(m.heap, e)
	}
	heap.Init(&m.heap)
	m.emu.Unlock()
	return nil
}

// missed loads the enabled schedules whose next time is not after now,
// with only what reload needs (id, owner, name, expression, misfire
// policy, creation and next time): a full query decodes every column and
// the target, twice the cost for a large catch-up.
func (m *Manager) missed(ctx context.Context, now int64) ([]Schedule, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT id,owner_uid,name,expression,misfire,created_at,next_run_at FROM sched_schedules
		WHERE enabled=1 AND next_run_at IS NOT NULL AND next_run_at<=?`, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Schedule
	for rows.Next() {
		s := Schedule{Enabled: true}
		var expr string
		if err := rows.Scan(&s.ID, &s.OwnerUid, &s.Name, &expr, &s.MisfirePolicy, &s.CreatedAtMs, &s.State.NextRunAtMs); err != nil {
			return nil, err
		}
		json.Unmarshal([]byte(expr), &s.Expression)
		out = append(out, s)
	}
	return out, rows.Err()
}

// dispatchChunk is how many due schedules dispatch loads per query.
const dispatchChunk = 256

// dispatch starts the runs of due schedules. A run's start time is the
// dispatch time: lateness is dispatch minus due.
//
// The due schedules are loaded by one query per chunk of dispatchChunk,
// and each run starts with its schedule in hand: a query per run (about
// 90 µs of CPU each) would queue 10,000 queries on the read pool before
// the last of 10,000 due targets could start.
func (m *Manager) dispatch(due []entry, now int64) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx := context.Background()
		for len(due) > 0 {
			chunk := due[:min(len(due), dispatchChunk)]
			due = due[len(chunk):]
			loaded := m.getMany(ctx, chunk) // nil on error: each run loads its own
			for _, e := range chunk {
				s := loaded[e.id]
				m.wg.Add(1)
				go func() {
					defer m.wg.Done()
					if s == nil {
						m.runScheduled(ctx, e.id, e.at, now, false)
						return
					}
					m.run(ctx, s, e.at, now, false)
				}()
			}
		}
	}()
}

// getMany loads the schedules of entries, by id; nil on error.
func (m *Manager) getMany(ctx context.Context, es []entry) map[string]*Schedule {
	args := make([]any, len(es))
	for i, e := range es {
		args[i] = e.id
	}
	ss, err := m.query(ctx, `WHERE id IN (?`+strings.Repeat(`,?`, len(es)-1)+`)`, args...)
	if err != nil {
		m.log.Error("sched: load due schedules", "err", err)
		return nil
	}
	out := make(map[string]*Schedule, len(ss))
	for i := range ss {
		out[ss[i].ID] = &ss[i]
	}
	return out
}

// RunResult is one entry of sched.run's results.
type RunResult struct {
	ScheduleID string `json:"scheduleId"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	Summary    string `json:"summary,omitempty"`
	DurationMs int64  `json:"durationMs"`
	NextRunAt  *int64 `json:"nextRunAtMs"`

	err error // the run's failure, with its kind
}

// runScheduled runs schedule id, due at dueAt and started at startAt, then
// records it and arms its next time. force runs it even if disabled.
func (m *Manager) runScheduled(ctx context.Context, id string, dueAt, startAt int64, force bool) RunResult {
	s, err := m.get(ctx, id)
	if err != nil {
		return RunResult{ScheduleID: id, Status: "error", Error: err.Error()}
	}
	return m.run(ctx, s, dueAt, startAt, force)
}

// run is runScheduled of the loaded schedule s.
func (m *Manager) run(ctx context.Context, s *Schedule, dueAt, startAt int64, force bool) RunResult {
	id := s.ID
	res := RunResult{ScheduleID: id}
	if !s.Enabled && !force {
		res.Status = "skipped"
		return res
	}
	if at := s.occurrence(); at != 0 && !force {
		// Every attempt of a one-shot is a run of its one occurrence:
		// its record names that time, not the retry's.
		dueAt = at
	}
	m.rmu.Lock()
	_, busy := m.running[id]
	if !busy {
		m.running[id] = startAt
	}
	m.rmu.Unlock()
	if busy {
		// Overlap policy skip: the run still going keeps going; this one is
		// recorded as skipped and does not count.
		next := m.finish(ctx, s, dueAt, startAt, m.clock.Now().UnixMilli(), "skipped", "previous run still going", "", true, 0)
		res.Status, res.Error, res.NextRunAt = "skipped", "previous run still going", ptr(next)
		return res
	}
	defer func() {
		m.rmu.Lock()
		delete(m.running, id)
		delete(m.touched, id)
		m.rmu.Unlock()
	}()
	var pre int64
	var preDone chan struct{}
	if !force && !s.Expression.oneShot() && s.Enabled {
		// The next occurrence of a recurring schedule is armed when a run
		// starts, not when it ends, so that an occurrence that falls due
		// while a long run is still going is dispatched and recorded
		// skipped (overlap policy skip), not collapsed. The store gets the
		// next time with the run's record (finish); meanwhile query shows
		// the armed time. It is computed beside the target call, not before
		// it (a cron Next can take a millisecond), and finish waits for it.
		preDone = make(chan struct{})
		go func() {
			defer close(preDone)
			pre = nextAfter(s, max(dueAt, startAt))
			m.armOwn(id, pre)
		}()
	}
	// Nothing is written before the target call: a write there would
	// queue behind every other run's writes on the one writer connection
	// (with 10,000 schedules due at once the last targets would start
	// seconds late). The running state is in memory (m.running; query
	// shows it) and an interrupted run, never recorded, is a missed
	// occurrence at restart.
	rctx, cancel := context.WithTimeout(ctx, m.opts.RunTimeout)
	summary, rerr := m.execute(rctx, s)
	cancel()
	end := m.clock.Now().UnixMilli()
	status, errText := "ok", ""
	if rerr != nil {
		status, errText = "error", rerr.Error()
	}
	if preDone != nil {
		<-preDone
	}
	next := m.finish(ctx, s, dueAt, startAt, end, status, errText, summary, !force || s.Enabled, pre)
	res.Status, res.Error, res.Summary, res.DurationMs, res.NextRunAt = status, errText, summary, end-startAt, ptr(next)
	res.err = rerr
	return res
}

func i64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func ptr(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// following is s's next time and retry attempt after a run due at dueAt
// that ended at now. A late run does not cause catch-up runs: the next
// time is the first one after now. A failed one-shot is retried with
// capped exponential backoff (at most MaxRetryAttempts attempts in all).
// pre, if not 0, is the next time computed when the run started: the
// first after max(dueAt, start), so still the answer if now is before it.
func following(s *Schedule, dueAt, now int64, failed bool, pre int64) (next int64, attempt int) {
	switch {
	case s.Expression.oneShot() && failed && s.RetryPolicy != nil && s.State.Attempt+1 < min(s.RetryPolicy.MaxAttempts, MaxRetryAttempts):
		attempt = s.State.Attempt + 1
		if next = addSat(now, s.RetryPolicy.backoff(attempt)); next == math.MaxInt64 {
			return 0, 0
		}
		return next, attempt
	case s.Expression.oneShot():
		return 0, 0
	default:
		if pre != 0 && now < pre {
			return pre, 0
		}
		return nextAfter(s, max(dueAt, now)), 0
	}
}

// finish records a run of s (status skipped, ok or error) and, if advance,
// stores and arms s's next time, in one transaction. A one-shot with no
// retry to come is done: it is disabled, with no next time. It returns the
// next time. pre is as for following.
//
// The next time is stored and armed against the schedule as stored now,
// not as it was when the run started: a schedule removed during its run
// is not armed again, one disabled during its run stays unarmed, and one
// given a new expression during its run keeps the next time sched.update
// computed.
func (m *Manager) finish(ctx context.Context, s *Schedule, dueAt, start, end int64, status, errText, summary string, advance bool, pre int64) int64 {
	next, attempt := following(s, dueAt, m.clock.Now().UnixMilli(), status == "error", pre)
	done := s.Expression.oneShot() && next == 0
	var enabled, stale bool
	err := m.st.Tx(ctx, func(tx *sql.Tx) error {
		if err := m.recordTx(tx, s, dueAt, start, end, status, errText, summary); err != nil {
			return err
		}
		if !advance {
			return nil
		}
		// The next time is stored only if the expression is still the one
		// the run had (sched.update sets created_at with a new one).
		err := m.st.TxQueryRow(tx, `UPDATE sched_schedules SET next_run_at=?, attempt=?, enabled=CASE WHEN ? THEN 0 ELSE enabled END
			WHERE id=? AND created_at=? RETURNING enabled`,
			nullInt(next), attempt, done, s.ID, s.CreatedAtMs).Scan(&enabled)
		if err == sql.ErrNoRows {
			// Removed, or a new expression: sched.update stored and armed
			// its next time.
			stale = true
			var stored sql.NullInt64
			tx.QueryRow(`SELECT next_run_at FROM sched_schedules WHERE id=?`, s.ID).Scan(&stored)
			next = stored.Int64
			return nil
		}
		return err
	})
	if err != nil {
		m.log.Error("sched: record run", "schedule", s.ID, "err", err)
	}
	m.signalRun(s, status, errText)
	if !advance {
		return 0
	}
	if !stale && err == nil && enabled {
		m.armOwn(s.ID, next)
	}
	return next
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// recordTx writes a run to the history and the schedule's state, in tx.
func (m *Manager) recordTx(tx *sql.Tx, s *Schedule, dueAt, start, end int64, status, errText, summary string) error {
	if _, err := m.st.TxExec(tx, `INSERT INTO sched_runs(schedule_id,name,owner_uid,scheduled_at,started_at,finished_at,status,error,summary,duration_ms) VALUES(?,?,?,?,?,?,?,?,?,?)`,
		s.ID, s.Name, s.OwnerUid, dueAt, start, end, status, nullStr(errText), nullStr(summary), end-start); err != nil {
		return err
	}
	count := 1 // a skipped run does not count
	if status == "skipped" {
		count = 0
	}
	_, err := m.st.TxExec(tx, `UPDATE sched_schedules SET running_at=NULL, last_run_at=?, last_status=?, last_error=?, last_duration_ms=?, run_count=run_count+? WHERE id=?`,
		start, status, nullStr(errText), end-start, count, s.ID)
	return err
}

func (m *Manager) signalRun(s *Schedule, status, errText string) {
	m.k.Signal("sched.run.finished", map[string]any{"scheduleId": s.ID, "name": s.Name, "status": status, "error": errText}, kernel.Audience{Uids: []uint32{s.OwnerUid}})
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// execute makes s's target syscall as its run-as user: a schedule can do
// nothing its owner could not.
func (m *Manager) execute(ctx context.Context, s *Schedule) (string, error) {
	if m.opts.testExec != nil {
		if summary, handled, err := m.opts.testExec(ctx, s); handled {
			return summary, err
		}
	}
	id, err := m.k.IdentityOf(ctx, s.RunAsUid)
	if err != nil {
		return "", err
	}
	c := &kernel.Caller{Identity: id}
	t := s.Target
	var call string
	var args map[string]any
	switch t.Kind {
	case "process.spawn":
		call, args = "proc.spawn", map[string]any{"profile": t.Profile, "prompt": t.Prompt}
		if t.Label != "" {
			args["label"] = t.Label
		}
	case "process.event":
		call, args = "proc.send", map[string]any{"pid": t.Pid, "message": t.Message, "event": true}
		if t.ConversationID != "" {
			args["conversationId"] = t.ConversationID
		}
	case "process.lifecycle":
		args = map[string]any{"pid": t.Pid}
		if t.ConversationID != "" {
			args["conversationId"] = t.ConversationID
		}
		switch t.Action {
		case "compact":
			call = "proc.conversation.compact"
			keep := 80
			if v, ok := t.Options["keep"].(float64); ok {
				keep = int(v)
			}
			args["keepLast"] = keep
			if sm, ok := t.Options["summary"].(string); ok && sm != "" {
				args["summary"] = sm
			} else {
				args["generateSummary"] = true
			}
		case "reset":
			call = "proc.conversation.reset"
		case "checkpoint":
			call = "proc.checkpoint"
		}
	default:
		return "", fmt.Errorf("unknown target %q", t.Kind)
	}
	raw, _ := json.Marshal(args)
	res, err := m.k.Call(ctx, c, call, json.RawMessage(raw))
	if err != nil {
		return "", err
	}
	if r, ok := res.(map[string]any); ok {
		if r["ok"] == false {
			return "", fmt.Errorf("%s: %v", call, r["error"])
		}
		if pid, ok := r["pid"].(string); ok && t.Kind == "process.spawn" {
			return "spawned " + pid, nil
		}
	}
	return call + " ok", nil
}

// get loads one schedule.
func (m *Manager) get(ctx context.Context, id string) (*Schedule, error) {
	ss, err := m.query(ctx, `WHERE id=?`, id)
	if err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return nil, abi.E(abi.Path(id), abi.NotExist, "no such schedule")
	}
	return &ss[0], nil
}

const scheduleCols = `id,owner_uid,creator_uid,run_as_uid,name,description,enabled,expression,target,overlap,misfire,retry,created_at,updated_at,
	next_run_at,running_at,last_run_at,last_status,last_error,last_duration_ms,run_count,attempt`

func (m *Manager) query(ctx context.Context, where string, args ...any) ([]Schedule, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT `+scheduleCols+` FROM sched_schedules `+where, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	return m.scan(rows)
}

// scan reads the schedules of rows (of scheduleCols) and closes it. A
// schedule with a run under way shows it: runningAtMs is the run's start
// and nextRunAtMs the time armed when it started (both are in memory
// until the run is recorded).
func (m *Manager) scan(rows *sql.Rows) ([]Schedule, error) {
	defer rows.Close()
	out := []Schedule{}
	for rows.Next() {
		var s Schedule
		var expr, target string
		var retry sql.NullString
		if err := rows.Scan(&s.ID, &s.OwnerUid, &s.CreatorUid, &s.RunAsUid, &s.Name, &s.Description, &s.Enabled, &expr, &target,
			&s.OverlapPolicy, &s.MisfirePolicy, &retry, &s.CreatedAtMs, &s.UpdatedAtMs, &s.State.NextRunAtMs, &s.State.RunningAtMs,
			&s.State.LastRunAtMs, &s.State.LastStatus, &s.State.LastError, &s.State.LastDurationMs, &s.State.RunCount, &s.State.Attempt); err != nil {
			return nil, abi.E(err)
		}
		json.Unmarshal([]byte(expr), &s.Expression)
		if s.Expression.Kind == "cron" && s.Expression.Timezone == "" {
			s.Expression.Timezone = "UTC" // the zone a record without one runs in
		}
		json.Unmarshal([]byte(target), &s.Target)
		if retry.Valid {
			s.RetryPolicy = &Retry{}
			json.Unmarshal([]byte(retry.String), s.RetryPolicy)
		}
		m.rmu.Lock()
		start, running := m.running[s.ID]
		m.rmu.Unlock()
		if running {
			s.State.RunningAtMs = &start
			m.emu.Lock()
			if at, ok := m.next[s.ID]; ok {
				s.State.NextRunAtMs = &at
			}
			m.emu.Unlock()
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// AddArgs are sched.add's args.
type AddArgs struct {
	OwnerUid      *uint32    `json:"ownerUid"`
	Name          string     `json:"name"`
	Description   *string    `json:"description"`
	Enabled       *bool      `json:"enabled"`
	Expression    Expression `json:"expression"`
	Target        Target     `json:"target"`
	MisfirePolicy string     `json:"misfirePolicy"`
	RetryPolicy   *Retry     `json:"retryPolicy"`
}

// add creates a schedule owned by owner; its name must be unused. A cron
// expression states its zone (fillZone, before the transaction).
func (m *Manager) add(ctx context.Context, q querier, c *kernel.Caller, owner uint32, a *AddArgs) (*Schedule, error) {
	if a.Name == "" {
		a.Name = newID()[4:]
	}
	if err := checkName(a.Name); err != nil {
		return nil, err
	}
	now := m.clock.Now()
	if err := a.Expression.validate(now); err != nil {
		return nil, abi.E(abi.Path(a.Name), abi.Invalid, err)
	}
	if err := a.Target.validate(); err != nil {
		return nil, abi.E(abi.Path(a.Name), abi.Invalid, err)
	}
	if err := checkDescription(a.Name, a.Description); err != nil {
		return nil, err
	}
	if a.MisfirePolicy == "" {
		a.MisfirePolicy = "skip"
	}
	if err := checkMisfire(a.Name, a.MisfirePolicy); err != nil {
		return nil, err
	}
	if a.RetryPolicy != nil {
		if err := a.RetryPolicy.validate(); err != nil {
			return nil, abi.E(abi.Path(a.Name), abi.Invalid, err)
		}
	}
	s := &Schedule{ID: newID(), OwnerUid: owner, CreatorUid: c.Uid, RunAsUid: owner, Name: a.Name, Description: a.Description,
		Enabled: a.Enabled == nil || *a.Enabled, Expression: a.Expression, Target: a.Target, OverlapPolicy: "skip",
		MisfirePolicy: a.MisfirePolicy, RetryPolicy: a.RetryPolicy, CreatedAtMs: now.UnixMilli(), UpdatedAtMs: now.UnixMilli()}
	next := nextAfter(s, now.UnixMilli())
	s.State.NextRunAtMs = ptr(next)
	expr, target, retry := s.columns()
	_, err := q.Exec(`INSERT INTO sched_schedules(id,owner_uid,creator_uid,run_as_uid,name,description,enabled,expression,target,misfire,retry,created_at,updated_at,next_run_at)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, s.ID, s.OwnerUid, s.CreatorUid, s.RunAsUid, s.Name, s.Description, s.Enabled, expr, target,
		s.MisfirePolicy, retry, s.CreatedAtMs, s.UpdatedAtMs, nullInt(next))
	if err != nil {
		return nil, abi.E(abi.Path(a.Name), abi.Busy, fmt.Sprintf("a schedule named %q exists", a.Name))
	}
	return s, nil
}

func checkName(name string) error {
	if !validName.MatchString(name) {
		return abi.E(abi.Op(name), abi.Invalid, "schedule names are 1-64 of [A-Za-z0-9_.-]")
	}
	return nil
}

// checkDescription checks a description as free text.
func checkDescription(name string, d *string) error {
	if d == nil {
		return nil
	}
	if err := checkFreeText("description", *d); err != nil {
		return abi.E(abi.Op(name), abi.Invalid, err)
	}
	return nil
}

// checkReach checks t (400) and refuses (404) a process.event or
// process.lifecycle target whose process, or conversation, owner cannot
// reach. It asks proc through the dispatcher, as owner, so that it is the
// rule the run meets; it never imports proc. It makes syscalls: call it
// outside a transaction of the store.
func (m *Manager) checkReach(ctx context.Context, owner uint32, name string, t *Target) error {
	if err := t.validate(); err != nil {
		return abi.E(abi.Op(name), abi.Invalid, err)
	}
	if t.Kind != "process.event" && t.Kind != "process.lifecycle" {
		return nil
	}
	id, err := m.k.IdentityOf(ctx, owner)
	if err != nil {
		return abi.E(abi.Op(name), abi.NotExist, fmt.Sprintf("owner %d: %v", owner, err))
	}
	c := &kernel.Caller{Identity: id}
	call, a := "proc.status", map[string]string{"pid": t.Pid}
	if t.ConversationID != "" {
		call, a["conversationId"] = "proc.conversation.get", t.ConversationID
	}
	args, _ := json.Marshal(a)
	res, err := m.k.Call(ctx, c, call, json.RawMessage(args))
	if err != nil {
		switch abi.Kind(abi.Code(err)) {
		case abi.NotExist, abi.Permission, abi.Invalid:
			return abi.E(abi.Op(name), abi.NotExist, fmt.Sprintf("target %s: no such process for uid %d", t.Pid, owner))
		}
		return abi.E(abi.Op(name), err)
	}
	if r, ok := res.(map[string]any); ok && t.ConversationID != "" {
		if cv, ok := r["conversation"]; !ok || cv == nil || isNilPtr(cv) {
			return abi.E(abi.Op(name), abi.NotExist, fmt.Sprintf("target %s: no conversation %q", t.Pid, t.ConversationID))
		}
	}
	return nil
}

// isNilPtr says whether v holds a nil pointer.
func isNilPtr(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

func checkMisfire(name, policy string) error {
	if policy != "skip" && policy != "run-once" {
		return abi.E(abi.Op(name), abi.Invalid, "misfirePolicy must be skip or run-once")
	}
	return nil
}

// columns is s's expression, target and retry policy as stored: JSON, and
// NULL for no retry policy.
func (s *Schedule) columns() (expr, target string, retry any) {
	e, _ := json.Marshal(s.Expression)
	t, _ := json.Marshal(s.Target)
	if s.RetryPolicy != nil {
		r, _ := json.Marshal(s.RetryPolicy)
		retry = string(r)
	}
	return string(e), string(t), retry
}

// querier is a write transaction (*sql.Tx). Its statements take no
// context: a statement cancelled inside a transaction can roll back the
// whole (group-committed) transaction.
type querier interface {
	Exec(q string, args ...any) (sql.Result, error)
}

// resolve finds a schedule by id or name that c may see (owner or root).
func (m *Manager) resolve(ctx context.Context, c *kernel.Caller, ref string, owner *uint32) (*Schedule, error) {
	uid := c.Uid
	if owner != nil && c.IsRoot() {
		uid = *owner
	}
	ss, err := m.query(ctx, `WHERE id=? OR (name=? AND owner_uid=?)`, ref, ref, uid)
	if err != nil {
		return nil, err
	}
	for i := range ss {
		if ss[i].OwnerUid == c.Uid || c.IsRoot() {
			return &ss[i], nil
		}
	}
	return nil, abi.E(abi.Path(ref), abi.NotExist, "no such schedule")
}
