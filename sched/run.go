package sched

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// A run is one firing of a schedule: the target syscall as the schedule's
// run-as user (targets.go), then its record in the history and the
// schedule's next time (finish), in one transaction.

// outcome is one run's result as sched.run reports it, with its failure
// (and the failure's kind) for sched.ctl.run.
type outcome struct {
	abi.RunOutcome
	err error
}

// runScheduled runs schedule id, due at dueAt and started at startAt, then
// records it and arms its next time. force runs it even if disabled.
// targetDone, if not nil, is called once the target call has returned
// (or once it is known that none will be made).
func (m *Manager) runScheduled(ctx context.Context, id string, dueAt, startAt int64, force bool, targetDone func()) outcome {
	s, err := m.get(ctx, id)
	if err != nil {
		return outcome{RunOutcome: abi.RunOutcome{ScheduleID: id, Status: "error", Error: err.Error()}, err: err}
	}
	return m.run(ctx, s, dueAt, startAt, force, targetDone)
}

// run is runScheduled of the loaded schedule s.
func (m *Manager) run(ctx context.Context, s *abi.Schedule, dueAt, startAt int64, force bool, targetDone func()) outcome {
	id := s.ID
	res := outcome{RunOutcome: abi.RunOutcome{ScheduleID: id}}
	if s.Broken != "" {
		// A damaged record runs nothing and is not armed again: it stays
		// as it is for its owner to see (sched.list) and remove.
		m.skipBroken(id, s.Broken)
		res.err = brokenErr(s)
		res.Status, res.Error = "error", res.err.Error()
		return res
	}
	if !s.Enabled && !force {
		res.Status = "skipped"
		return res
	}
	if at := occurrence(s); at != 0 && !force {
		// Every attempt of a one-shot is a run of its one occurrence:
		// its record names that time, not the retry's.
		dueAt = at
	}
	m.mu.Lock()
	_, busy := m.running[id]
	if !busy {
		m.running[id] = &runState{start: startAt}
	}
	m.mu.Unlock()
	if busy {
		// Overlap policy skip: the run still going keeps going; this one is
		// recorded as skipped and does not count.
		next, err := m.finish(ctx, s, dueAt, startAt, m.clock.Now().UnixMilli(), "skipped", "previous run still going", "", true, 0, -1)
		res.Status, res.Error, res.NextRunAt = "skipped", "previous run still going", ptr(next)
		res.recordFailed(err)
		return res
	}
	defer func() {
		m.mu.Lock()
		delete(m.running, id)
		m.mu.Unlock()
	}()
	var pre int64
	var preDone chan struct{}
	if !force && !oneShot(s.Expression) && s.Enabled {
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
			m.armFromRun(id, pre)
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
	if targetDone != nil {
		targetDone()
	}
	end := m.clock.Now().UnixMilli()
	status, errText := "ok", ""
	var ce *coalescedError
	switch {
	case errors.As(rerr, &ce):
		status, errText, rerr = "skipped", ce.Error(), nil
	case rerr != nil:
		status, errText = "error", rerr.Error()
	}
	if preDone != nil {
		<-preDone
	}
	late := int64(-1) // a run made by hand was not due
	if !force {
		late = max(startAt-dueAt, 0)
	}
	next, err := m.finish(ctx, s, dueAt, startAt, end, status, errText, summary, !force || s.Enabled, pre, late)
	res.Status, res.Error, res.Summary, res.DurationMs, res.NextRunAt = status, errText, summary, end-startAt, ptr(next)
	res.err = rerr
	res.recordFailed(err)
	return res
}

// brokenErr is the error of a change or run of the damaged schedule s.
func brokenErr(s *abi.Schedule) error {
	return abi.E(abi.Path(s.ID), abi.Busy, fmt.Sprintf("the stored schedule is damaged (%s): it does not run; remove it and add it again", s.Broken))
}

// recordFailed makes o an error if its record could not be written (err):
// a run the history does not hold is not reported as done.
func (o *outcome) recordFailed(err error) {
	if err == nil {
		return
	}
	o.Status, o.Error, o.err = "error", "recording the run: "+err.Error(), abi.E(abi.Path(o.ScheduleID), err)
}

// i64 is *p, or 0 for nil.
func i64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// ptr is &v, or nil for 0 (no time).
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
func following(s *abi.Schedule, dueAt, now int64, failed bool, pre int64) (next int64, attempt int) {
	switch {
	case oneShot(s.Expression) && failed && s.RetryPolicy != nil && s.State.Attempt+1 < min(s.RetryPolicy.MaxAttempts, MaxRetryAttempts):
		attempt = s.State.Attempt + 1
		if next = addSat(now, backoff(s.RetryPolicy, attempt)); next == math.MaxInt64 {
			return 0, 0
		}
		return next, attempt
	case oneShot(s.Expression):
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
// next time, and the error of the record's transaction (logged too: the
// engine's runs have no caller). pre is as for following; late is how
// long after its due time the run started (ms; -1: it was not fired by
// the engine), which sched.run.finished reports.
//
// The next time is stored and armed against the schedule as stored now,
// not as it was when the run started: a schedule removed during its run
// is not armed again, one disabled during its run stays unarmed, and one
// given a new expression during its run keeps the next time sched.update
// computed.
func (m *Manager) finish(ctx context.Context, s *abi.Schedule, dueAt, start, end int64, status, errText, summary string, advance bool, pre, late int64) (int64, error) {
	next, attempt := following(s, dueAt, m.clock.Now().UnixMilli(), status == "error", pre)
	done := oneShot(s.Expression) && next == 0
	var enabled, stale bool
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		if !advance {
			return m.recordTx(tx, s, dueAt, start, end, status, errText, summary)
		}
		if err := m.insertRunTx(tx, s, dueAt, start, end, status, errText, summary); err != nil {
			return err
		}
		// The run's state, and, in the same statement, the next time, stored
		// only if the expression is still the one the run had (sched.update
		// sets created_at with a new one).
		var current bool
		var stored sql.NullInt64
		err := m.st.TxQueryRow(tx, `UPDATE sched_schedules SET running_at=NULL, last_run_at=?, last_status=?, last_error=?, last_duration_ms=?, run_count=run_count+?,
			next_run_at=CASE WHEN created_at=? THEN ? ELSE next_run_at END,
			attempt=CASE WHEN created_at=? THEN ? ELSE attempt END,
			enabled=CASE WHEN created_at=? AND ? THEN 0 ELSE enabled END
			WHERE id=? RETURNING enabled, created_at=?, next_run_at`,
			start, status, nullStr(errText), end-start, runCount(status),
			s.CreatedAtMs, nullInt(next), s.CreatedAtMs, attempt, s.CreatedAtMs, done,
			s.ID, s.CreatedAtMs).Scan(&enabled, &current, &stored)
		switch {
		case err == sql.ErrNoRows:
			stale, next = true, 0 // removed
			return nil
		case err != nil:
			return err
		case !current:
			// A new expression: sched.update stored and armed its next time.
			stale, next = true, stored.Int64
		}
		return nil
	})
	if err != nil {
		m.log.Error("sched: record run", "schedule", s.ID, "err", err)
	}
	m.signalRun(s, status, errText, late)
	if !advance {
		return 0, err
	}
	if !stale && err == nil && enabled {
		m.armFromRun(s.ID, next)
	}
	return next, err
}

// nullInt is v as a column: NULL for 0.
func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// recordTx writes a run to the history and the schedule's state, in tx.
func (m *Manager) recordTx(tx *kernel.Tx, s *abi.Schedule, dueAt, start, end int64, status, errText, summary string) error {
	if err := m.insertRunTx(tx, s, dueAt, start, end, status, errText, summary); err != nil {
		return err
	}
	_, err := m.st.TxExec(tx, `UPDATE sched_schedules SET running_at=NULL, last_run_at=?, last_status=?, last_error=?, last_duration_ms=?, run_count=run_count+? WHERE id=?`,
		start, status, nullStr(errText), end-start, runCount(status), s.ID)
	return err
}

// insertRunTx writes a run to the history, in tx.
func (m *Manager) insertRunTx(tx *kernel.Tx, s *abi.Schedule, dueAt, start, end int64, status, errText, summary string) error {
	_, err := m.st.TxExec(tx, `INSERT INTO sched_runs(schedule_id,name,owner_uid,scheduled_at,started_at,finished_at,status,error,summary,duration_ms) VALUES(?,?,?,?,?,?,?,?,?,?)`,
		s.ID, s.Name, s.OwnerUid, dueAt, start, end, status, nullStr(errText), nullStr(summary), end-start)
	return err
}

// runCount is what a run of status adds to its schedule's run count: a
// skipped run does not count.
func runCount(status string) int {
	if status == "skipped" {
		return 0
	}
	return 1
}

// signalRun tells s's owner that a run of s ended (sched.run.finished),
// and how late it started (late ms; -1: not a run the engine fired).
func (m *Manager) signalRun(s *abi.Schedule, status, errText string, late int64) {
	m.touchTab(s.OwnerUid)
	p := abi.SchedRunFinished{ScheduleID: s.ID, Name: s.Name, Status: status, Error: errText}
	if late >= 0 {
		p.LatenessMs = &late
	}
	kernel.Publish(m.k, abi.SigSchedRunFinished, p, kernel.Audience{Uids: []uint32{s.OwnerUid}})
}

// nullStr is s as a column: NULL for "".
func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nextAfter is the first fire time of s strictly after after (ms), or 0
// for none. Its arithmetic saturates: whatever the stored values, the
// answer is 0 or a time in (after, after+HorizonMs], never a time at or
// before after (which would fire again at once, in a loop).
func nextAfter(s *abi.Schedule, after int64) int64 {
	e := s.Expression
	var next int64
	switch e.Kind {
	case "at", "after":
		next = occurrence(s)
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

// parseCronCached is ParseCron through cronCache.
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

// newID is a new schedule id: sch_ and 12 hex digits.
func newID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "sch_" + hex.EncodeToString(b)
}
