package sched

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
	next_run_at,running_at,last_run_at,last_status,last_error,last_duration_ms,run_count,attempt`

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
// until the run is recorded).
func (m *Manager) scan(rows *sql.Rows) ([]abi.Schedule, error) {
	defer rows.Close()
	out := []abi.Schedule{}
	for rows.Next() {
		var s abi.Schedule
		var expr, target string
		var retry sql.NullString
		if err := rows.Scan(&s.ID, &s.OwnerUid, &s.CreatorUid, &s.RunAsUid, &s.Name, &s.Description, &s.Enabled, &expr, &target,
			&s.OverlapPolicy, &s.MisfirePolicy, &retry, &s.CreatedAtMs, &s.UpdatedAtMs, &s.State.NextRunAtMs, &s.State.RunningAtMs,
			&s.State.LastRunAtMs, &s.State.LastStatus, &s.State.LastError, &s.State.LastDurationMs, &s.State.RunCount, &s.State.Attempt); err != nil {
			return nil, abi.E(err)
		}
		if err := json.Unmarshal([]byte(expr), &s.Expression); err != nil {
			return nil, abi.E(abi.Path(s.ID), abi.Other, "stored expression: "+err.Error())
		}
		if s.Expression.Kind == "cron" && s.Expression.Timezone == "" {
			s.Expression.Timezone = "UTC" // the zone a record without one runs in
		}
		if err := json.Unmarshal([]byte(target), &s.Target); err != nil {
			return nil, abi.E(abi.Path(s.ID), abi.Other, "stored target: "+err.Error())
		}
		if retry.Valid {
			s.RetryPolicy = &abi.Retry{}
			if err := json.Unmarshal([]byte(retry.String), s.RetryPolicy); err != nil {
				return nil, abi.E(abi.Path(s.ID), abi.Other, "stored retry policy: "+err.Error())
			}
		}
		m.mu.Lock()
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
		return err
	}
	var armed []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.id, &e.at); err != nil {
			rows.Close()
			return err
		}
		armed = append(armed, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
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
		txDone <- m.st.Tx(ctx, func(tx *sql.Tx) error {
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
	rerr := m.eachMissed(ctx, now, func(rowid int64, s *abi.Schedule) error {
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
			nexts = append(nexts, rowNext{rowid, next})
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
		m.signalRun(s, "skipped", "missed while the daemon was down")
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
// after now (with its rowid), with only what reload needs (id, owner,
// name, expression, misfire policy, creation and next time): a full query
// decodes every column and the target, twice the cost for a large
// catch-up. fn's error stops it and is returned.
func (m *Manager) eachMissed(ctx context.Context, now int64, fn func(rowid int64, s *abi.Schedule) error) error {
	rows, err := m.st.QueryContext(ctx, `SELECT rowid,id,owner_uid,name,expression,misfire,created_at,next_run_at FROM sched_schedules
		WHERE enabled=1 AND next_run_at IS NOT NULL AND next_run_at<=?`, now)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		s := &abi.Schedule{Enabled: true}
		var rowid int64
		var expr string
		if err := rows.Scan(&rowid, &s.ID, &s.OwnerUid, &s.Name, &expr, &s.MisfirePolicy, &s.CreatedAtMs, &s.State.NextRunAtMs); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(expr), &s.Expression); err != nil {
			return abi.E(abi.Path(s.ID), abi.Other, "stored expression: "+err.Error())
		}
		if err := fn(rowid, s); err != nil {
			return err
		}
	}
	return rows.Err()
}

// rowNext is a schedule's row and its new next run time (0: none).
type rowNext struct {
	rowid, next int64
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
			q.WriteString("(?,?)")
			args = append(args, rn.rowid, nullInt(rn.next))
		}
		q.WriteString(`) AS v WHERE sched_schedules.rowid=v.column1`)
		if _, err := tx.Exec(q.String(), args...); err != nil {
			return err
		}
		nexts = nexts[n:]
	}
	return nil
}

// querier is a write transaction (*sql.Tx). Its statements take no
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
	for rows.Next() {
		var r abi.Run
		if err := rows.Scan(&r.ID, &r.ScheduleID, &r.Name, &r.OwnerUid, &r.ScheduledAtMs, &r.StartedAtMs, &r.FinishedAtMs,
			&r.Status, &r.Error, &r.Summary, &r.DurationMs); err != nil {
			return nil, abi.E(err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
