package sched

import (
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
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
	// The missed schedules are loaded by one query and their misfire
	// policy applied in one transaction: a query and a write or two per
	// schedule (about 0.5 ms each) would take 51 s to reload 100,000
	// hourly schedules after a downtime of over an hour.
	miss, err := m.missed(ctx, now)
	if err != nil {
		return err
	}
	arms := armed
	var skipped []*abi.Schedule
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
			if oneShot(s.Expression) {
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
	m.mu.Lock()
	for _, e := range arms {
		m.next[e.id] = e.at
		m.heap = append(m.heap, e)
	}
	heap.Init(&m.heap)
	m.mu.Unlock()
	return nil
}

// missed loads the enabled schedules whose next time is not after now,
// with only what reload needs (id, owner, name, expression, misfire
// policy, creation and next time): a full query decodes every column and
// the target, twice the cost for a large catch-up.
func (m *Manager) missed(ctx context.Context, now int64) ([]abi.Schedule, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT id,owner_uid,name,expression,misfire,created_at,next_run_at FROM sched_schedules
		WHERE enabled=1 AND next_run_at IS NOT NULL AND next_run_at<=?`, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []abi.Schedule
	for rows.Next() {
		s := abi.Schedule{Enabled: true}
		var expr string
		if err := rows.Scan(&s.ID, &s.OwnerUid, &s.Name, &expr, &s.MisfirePolicy, &s.CreatedAtMs, &s.State.NextRunAtMs); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(expr), &s.Expression); err != nil {
			return nil, abi.E(abi.Path(s.ID), abi.Other, "stored expression: "+err.Error())
		}
		out = append(out, s)
	}
	return out, rows.Err()
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
