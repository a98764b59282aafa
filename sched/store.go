package sched

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The store: schedules in sched_schedules (expression, target and retry
// policy as JSON columns) and the run history in sched_runs.

// get loads one schedule.
func (m *Manager) get(ctx context.Context, id string) (*abi.Schedule, error) {
	ss, err := m.query(ctx, `WHERE id=?`, id)
	if err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return nil, abi.E(abi.Path(id), abi.NotExist, "no such schedule")
	}
	return &ss[0], nil
}

// scheduleCols are the columns scan reads, in its order.
const scheduleCols = `id,owner_uid,creator_uid,run_as_uid,name,description,enabled,expression,target,overlap,misfire,retry,created_at,updated_at,
	next_run_at,running_at,last_run_at,last_status,last_error,last_duration_ms,run_count,attempt,process_cap`

// query loads the schedules a WHERE clause (and ORDER, LIMIT) selects.
func (m *Manager) query(ctx context.Context, where string, args ...any) ([]abi.Schedule, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT `+scheduleCols+` FROM sched_schedules `+where, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	return m.scan(rows)
}

// scan reads the schedules of rows (of scheduleCols) and closes it. A
// schedule with a run under way shows it: runningAtMs is the run's start
// and nextRunAtMs the time armed when it started (both are in memory
// until the run is recorded); one waiting in its owner's queue shows
// since when (waitingSinceMs).
//
// A row that cannot be read whole (a damaged store: JSON that does not
// decode, an expression of no known kind, text in a number's column, a
// NULL where a value must be) is not an error of the read: it is
// returned with Broken saying what is wrong, so that one damaged row
// neither stops the scheduler's start nor hides the others from
// sched.list. A broken schedule never runs (run, reload).
func (m *Manager) scan(rows *sql.Rows) ([]abi.Schedule, error) {
	defer rows.Close()
	out := []abi.Schedule{}
	raw := make([]any, 23)
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, abi.E(err)
		}
		s := decodeSchedule(raw)
		m.mu.Lock()
		if at := m.waitingSinceLocked(s.ID); at != 0 {
			s.State.WaitingSinceMs = &at
		}
		if r := m.running[s.ID]; r != nil {
			start := r.start
			s.State.RunningAtMs = &start
			if at, ok := m.next[s.ID]; ok {
				s.State.NextRunAtMs = &at
			}
		}
		m.mu.Unlock()
		out = append(out, s)
	}
	return out, rows.Err()
}

// decodeSchedule is the schedule of one row of scheduleCols, read as raw
// values; what does not convert is noted in its Broken field.
func decodeSchedule(raw []any) abi.Schedule {
	var s abi.Schedule
	c := cells{v: raw}
	s.ID = c.text(0, "id")
	s.OwnerUid = c.uid(1, "owner_uid")
	s.CreatorUid = c.uid(2, "creator_uid")
	s.RunAsUid = c.uid(3, "run_as_uid")
	s.Name = c.text(4, "name")
	s.Description = c.textp(5, "description")
	s.Enabled = c.int(6, "enabled") != 0
	expr, target := c.text(7, "expression"), c.text(8, "target")
	s.OverlapPolicy = c.text(9, "overlap")
	s.MisfirePolicy = c.text(10, "misfire")
	retry := c.textp(11, "retry")
	s.CreatedAtMs = c.int(12, "created_at")
	s.UpdatedAtMs = c.int(13, "updated_at")
	s.State.NextRunAtMs = c.intp(14, "next_run_at")
	s.State.RunningAtMs = c.intp(15, "running_at")
	s.State.LastRunAtMs = c.intp(16, "last_run_at")
	s.State.LastStatus = c.textp(17, "last_status")
	s.State.LastError = c.textp(18, "last_error")
	s.State.LastDurationMs = c.intp(19, "last_duration_ms")
	s.State.RunCount = c.int(20, "run_count")
	s.State.Attempt = int(c.int(21, "attempt"))
	pc := c.textp(22, "process_cap")
	if err := decodeExpression(expr, &s.Expression); err != nil {
		c.bad("expression", err.Error())
	}
	if err := json.Unmarshal([]byte(target), &s.Target); err != nil {
		c.bad("target", err.Error())
	}
	if retry != nil {
		s.RetryPolicy = &abi.Retry{}
		if err := json.Unmarshal([]byte(*retry), s.RetryPolicy); err != nil {
			c.bad("retry", err.Error())
		}
	}
	if pc != nil {
		// A narrowing that does not decode never runs as a wider one:
		// the schedule is broken.
		s.Cap = &abi.ProcessCap{}
		if err := abi.DecodeArgs(json.RawMessage(*pc), s.Cap); err != nil {
			c.bad("process_cap", err.Error())
		}
	}
	s.Broken = strings.Join(c.problems, "; ")
	return s
}

// decodeExpression decodes a stored expression into e: JSON of a known
// kind whose cron text, if any, parses. A cron record stored without a
// zone reads as UTC, the zone it runs in.
func decodeExpression(text string, e *abi.Expression) error {
	if err := json.Unmarshal([]byte(text), e); err != nil {
		return err
	}
	switch e.Kind {
	case "at", "after", "every":
	case "cron":
		if e.Timezone == "" {
			e.Timezone = "UTC"
		}
		if _, err := parseCronCached(e.Expr, e.Timezone); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown kind %q", e.Kind)
	}
	return nil
}

// cells converts the raw values of a row of the store, noting each value
// that does not fit its column (a damaged row) instead of failing.
type cells struct {
	v        []any
	problems []string
}

// bad notes that column col is damaged.
func (c *cells) bad(col, why string) {
	c.problems = append(c.problems, fmt.Sprintf("stored %s: %s", col, why))
}

// textp is column i as text, nil for NULL.
func (c *cells) textp(i int, col string) *string {
	switch v := c.v[i].(type) {
	case nil:
		return nil
	case string:
		return &v
	case []byte:
		s := string(v)
		return &s
	case int64, float64:
		s := fmt.Sprint(v)
		return &s
	}
	c.bad(col, fmt.Sprintf("a %T where text belongs", c.v[i]))
	return nil
}

// text is column i as text, which must not be NULL.
func (c *cells) text(i int, col string) string {
	if c.v[i] == nil {
		c.bad(col, "NULL")
		return ""
	}
	if p := c.textp(i, col); p != nil {
		return *p
	}
	return ""
}

// intp is column i as an integer, nil for NULL.
func (c *cells) intp(i int, col string) *int64 {
	switch v := c.v[i].(type) {
	case nil:
		return nil
	case int64:
		return &v
	case float64:
		if n := int64(v); float64(n) == v {
			return &n
		}
	}
	c.bad(col, fmt.Sprintf("%.40q is not an integer", fmt.Sprint(c.v[i])))
	return nil
}

// int is column i as an integer, which must not be NULL.
func (c *cells) int(i int, col string) int64 {
	if c.v[i] == nil {
		c.bad(col, "NULL")
		return 0
	}
	if p := c.intp(i, col); p != nil {
		return *p
	}
	return 0
}

// uid is column i as a uid.
func (c *cells) uid(i int, col string) uint32 {
	n := c.int(i, col)
	if n < 0 || n > math.MaxUint32 {
		c.bad(col, fmt.Sprintf("%d is not a uid", n))
		return 0
	}
	return uint32(n)
}

// getMany loads the schedules of entries, by id; nil on error.
func (m *Manager) getMany(ctx context.Context, es []entry) map[string]*abi.Schedule {
	args := make([]any, len(es))
	for i, e := range es {
		args[i] = e.id
	}
	ss, err := m.query(ctx, `WHERE id IN (?`+strings.Repeat(`,?`, len(es)-1)+`)`, args...)
	if err != nil {
		m.log.Error("sched: load due schedules", "err", err)
		return nil
	}
	out := make(map[string]*abi.Schedule, len(ss))
	for i := range ss {
		out[ss[i].ID] = &ss[i]
	}
	return out
}

// reload arms every enabled schedule. A schedule whose next time passed
// while the daemon was down follows its misfire policy: skip (the missed
// occurrences collapse and the next future one is armed; a missed one-shot
// is recorded as skipped and disabled) or run-once (one catch-up run now).
func (m *Manager) reload(ctx context.Context) error {
	now := m.clock.Now().UnixMilli()
	rows, err := m.st.QueryContext(ctx, `SELECT id,next_run_at FROM sched_schedules WHERE enabled=1 AND next_run_at>?`, now)
	if err != nil {
		return m.damaged(err)
	}
	var armed []entry
	for rows.Next() {
		var id, at any
		if err := rows.Scan(&id, &at); err != nil {
			rows.Close()
			return m.damaged(err)
		}
		c := cells{v: []any{id, at}}
		e := entry{id: c.text(0, "id"), at: c.int(1, "next_run_at")}
		if c.problems != nil {
			m.skipBroken(e.id, strings.Join(c.problems, "; "))
			continue
		}
		armed = append(armed, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return m.damaged(err)
	}
	// The missed schedules are read by one query and their misfire
	// policy applied in one transaction, batch by batch while the query
	// goes on: a query and a write or two per schedule (about 0.5 ms each)
	// would take 51 s to reload 100,000 hourly schedules after a downtime
	// of over an hour, and the read and the writes (about a second each)
	// overlap on two cores.
	arms := armed
	var skipped []*abi.Schedule
	work := make(chan missWork, 4)
	txDone := make(chan error, 1)
	go func() {
		txDone <- m.st.Tx(ctx, func(tx *kernel.Tx) error {
			defer func() {
				for range work { // the reader never blocks on a failed transaction
				}
			}()
			// Runs that were under way when the daemon stopped are over.
			if _, err := tx.Exec(`UPDATE sched_schedules SET running_at=NULL WHERE running_at IS NOT NULL`); err != nil {
				return err
			}
			for w := range work {
				if w.err != nil {
					return w.err
				}
				if s := w.oneShot; s != nil {
					if err := m.recordTx(tx, s, *s.State.NextRunAtMs, now, now, "skipped", "missed while the daemon was down", ""); err != nil {
						return err
					}
					if _, err := tx.Exec(`UPDATE sched_schedules SET next_run_at=NULL, enabled=0 WHERE id=?`, s.ID); err != nil {
						return err
					}
					continue
				}
				if err := setNexts(tx, w.nexts); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	var txErr error
	txEnded := false
	send := func(w missWork) bool {
		select {
		case work <- w:
			return true
		case txErr = <-txDone:
			txEnded = true
			return false
		}
	}
	var nexts []rowNext
	rerr := m.eachMissed(ctx, now, func(s *abi.Schedule) error {
		switch {
		case s.MisfirePolicy == "run-once":
			arms = append(arms, entry{now, s.ID}) // the catch-up run
		case oneShot(s.Expression):
			skipped = append(skipped, s)
			if !send(missWork{oneShot: s}) {
				return errTxEnded
			}
		default:
			next := nextAfter(s, now)
			nexts = append(nexts, rowNext{s.ID, next})
			if next != 0 {
				arms = append(arms, entry{next, s.ID})
			}
			if len(nexts) == setNextsBatch {
				if !send(missWork{nexts: nexts}) {
					return errTxEnded
				}
				nexts = nil
			}
		}
		return nil
	})
	switch {
	case rerr != nil && !errors.Is(rerr, errTxEnded):
		send(missWork{err: rerr}) // the transaction rolls back
	case rerr == nil && len(nexts) > 0:
		send(missWork{nexts: nexts})
	}
	close(work)
	if !txEnded {
		txErr = <-txDone
	}
	if rerr != nil && !errors.Is(rerr, errTxEnded) {
		return rerr
	}
	if txErr != nil {
		return txErr
	}
	for _, s := range skipped {
		m.signalRun(s, "skipped", "missed while the daemon was down", -1)
	}
	m.mu.Lock()
	for _, e := range arms {
		m.next[e.id] = e.at
		m.heap = append(m.heap, e)
	}
	heap.Init(&m.heap)
	m.mu.Unlock()
	return nil
}

// missWork is what reload's transaction applies for missed schedules:
// next run times, or a one-shot to record as skipped and disable, or the
// read's error (the transaction rolls back).
type missWork struct {
	nexts   []rowNext
	oneShot *abi.Schedule
	err     error
}

// errTxEnded stops the read of missed schedules when reload's
// transaction has ended before it.
var errTxEnded = errors.New("the reload's transaction ended")

// eachMissed calls fn for each enabled schedule whose next time is not
// after now, with only what reload needs (id, owner,
// name, expression, misfire policy, creation and next time): a full query
// decodes every column and the target, twice the cost for a large
// catch-up. fn's error stops it and is returned.
func (m *Manager) eachMissed(ctx context.Context, now int64, fn func(s *abi.Schedule) error) error {
	rows, err := m.st.QueryContext(ctx, `SELECT id,owner_uid,name,expression,misfire,created_at,next_run_at FROM sched_schedules
		WHERE enabled=1 AND next_run_at IS NOT NULL AND next_run_at<=?`, now)
	if err != nil {
		return m.damaged(err)
	}
	defer rows.Close()
	raw := make([]any, 7)
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		c := cells{v: raw}
		s := &abi.Schedule{Enabled: true}
		s.ID = c.text(0, "id")
		s.OwnerUid = c.uid(1, "owner_uid")
		s.Name = c.text(2, "name")
		expr := c.text(3, "expression")
		s.MisfirePolicy = c.text(4, "misfire")
		s.CreatedAtMs = c.int(5, "created_at")
		s.State.NextRunAtMs = c.intp(6, "next_run_at")
		if err := decodeExpression(expr, &s.Expression); err != nil {
			c.bad("expression", err.Error())
		}
		if c.problems != nil {
			m.skipBroken(s.ID, strings.Join(c.problems, "; "))
			continue
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return rows.Err()
}

// skipBroken logs, once per start, that the damaged schedule id is not
// run, with what is wrong and how to repair it.
func (m *Manager) skipBroken(id, why string) {
	m.mu.Lock()
	seen := m.brokenSeen[id]
	if !seen {
		if m.brokenSeen == nil {
			m.brokenSeen = map[string]bool{}
		}
		m.brokenSeen[id] = true
	}
	m.mu.Unlock()
	if seen {
		return
	}
	m.log.Error("sched: a damaged schedule is skipped: it will not run", "table", "sched_schedules", "schedule", id, "problem", why,
		"repair", fmt.Sprintf("gsv sched list --all shows it as broken; remove it (gsv sched rm %s) and add it again", id))
}

// damaged is err, from reading the scheduler's table, with where it
// comes from and how to repair it.
func (m *Manager) damaged(err error) error {
	return fmt.Errorf("sched: reading the table sched_schedules of STATE/gsv.db: %w (check it with %s; remove the rows at fault)", err, m.st.Dialect().Check())
}

// rowNext is a schedule (by id) and its new next run time (0: none).
type rowNext struct {
	id   string
	next int64
}

// setNextsBatch is how many rows one statement of setNexts updates.
const setNextsBatch = 500

// setNexts stores each row's next run time, setNextsBatch rows a
// statement: 100,000 statements of one row each cost their per-statement
// overhead 100,000 times.
func setNexts(tx querier, nexts []rowNext) error {
	for len(nexts) > 0 {
		n := min(len(nexts), setNextsBatch)
		var q strings.Builder
		q.WriteString(`UPDATE sched_schedules SET next_run_at=v.column2 FROM (VALUES `)
		args := make([]any, 0, 2*n)
		for i, rn := range nexts[:n] {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,CAST(? AS BIGINT))") // the type Postgres cannot guess
			args = append(args, rn.id, nullInt(rn.next))
		}
		q.WriteString(`) AS v WHERE sched_schedules.id=v.column1`)
		if _, err := tx.Exec(q.String(), args...); err != nil {
			return err
		}
		nexts = nexts[n:]
	}
	return nil
}

// querier is a write transaction (*kernel.Tx). Its statements take no
// context: a statement cancelled inside a transaction can roll back the
// whole (group-committed) transaction.
type querier interface {
	Exec(q string, args ...any) (sql.Result, error)
}

// resolve finds a schedule by id or name that c may see (owner or root).
func (m *Manager) resolve(ctx context.Context, c *kernel.Caller, ref string, owner *uint32) (*abi.Schedule, error) {
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

// columns is s's expression, target and retry policy as stored: JSON, and
// NULL for no retry policy.
func columns(s *abi.Schedule) (expr, target string, retry any, err error) {
	e, err := json.Marshal(s.Expression)
	if err != nil {
		return "", "", nil, abi.E(abi.Path(s.Name), abi.Invalid, err)
	}
	t, err := json.Marshal(s.Target)
	if err != nil {
		return "", "", nil, abi.E(abi.Path(s.Name), abi.Invalid, err)
	}
	if s.RetryPolicy != nil {
		r, err := json.Marshal(s.RetryPolicy)
		if err != nil {
			return "", "", nil, abi.E(abi.Path(s.Name), abi.Invalid, err)
		}
		retry = string(r)
	}
	return string(e), string(t), retry, nil
}

// runs loads the runs a WHERE clause (and ORDER, LIMIT) selects.
func (m *Manager) runs(ctx context.Context, where string, args ...any) ([]abi.Run, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT id,schedule_id,name,owner_uid,scheduled_at,started_at,finished_at,status,error,summary,duration_ms FROM sched_runs `+where, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	out := []abi.Run{}
	raw := make([]any, 11)
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, abi.E(err)
		}
		c := cells{v: raw}
		r := abi.Run{ID: c.int(0, "id"), ScheduleID: c.text(1, "schedule_id"), Name: c.text(2, "name"), OwnerUid: c.uid(3, "owner_uid"),
			ScheduledAtMs: c.int(4, "scheduled_at"), StartedAtMs: c.int(5, "started_at"), FinishedAtMs: c.int(6, "finished_at"),
			Status: c.text(7, "status"), Error: c.textp(8, "error"), Summary: c.textp(9, "summary"), DurationMs: c.int(10, "duration_ms")}
		if c.problems != nil {
			// A damaged record of the history is left out of it, not
			// the whole history.
			m.log.Warn("sched: a damaged run record is left out of the history", "table", "sched_runs", "id", fmt.Sprint(raw[0]),
				"problem", strings.Join(c.problems, "; "))
			continue
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
