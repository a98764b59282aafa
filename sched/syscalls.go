package sched

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// The handlers of sched.list, sched.add, sched.update, sched.remove and
// sched.run (seed 003), and sched.ctl.run for /var/spool/cron/ctl.

// owner returns the uid a call acts for: the caller's, or any for root.
func owner(c *kernel.Caller, uid *uint32) (uint32, error) {
	if uid == nil || *uid == c.Uid {
		return c.Uid, nil
	}
	if !c.IsRoot() {
		return 0, abi.E(abi.Permission, "only root may act for another uid")
	}
	return *uid, nil
}

// list serves sched.list: the caller's schedules (root: everyone's, or
// ownerUid's), by owner and name, at most 10,000.
func (m *Manager) list(ctx context.Context, c *kernel.Caller, a *abi.SchedListArgs) (*abi.SchedListResult, error) {
	where, args := `WHERE owner_uid=?`, []any{c.Uid}
	if c.IsRoot() {
		where, args = `WHERE 1`, nil
		if a.OwnerUid != nil {
			where, args = `WHERE owner_uid=?`, []any{*a.OwnerUid}
		}
	} else if a.OwnerUid != nil && *a.OwnerUid != c.Uid {
		return nil, abi.E(abi.Permission, "only root may list another uid's schedules")
	}
	if a.IncludeDisabled != nil && !*a.IncludeDisabled {
		where += ` AND enabled=1`
	}
	limit := a.Limit
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	ss, err := m.query(ctx, where+` ORDER BY owner_uid, name LIMIT ? OFFSET ?`, append(args, limit, max(a.Offset, 0))...)
	if err != nil {
		return nil, err
	}
	return &abi.SchedListResult{Schedules: ss, Count: len(ss)}, nil
}

// add serves sched.add: a new schedule of the caller (root: of ownerUid),
// whose target the owner can reach, armed for its first time.
func (m *Manager) add(ctx context.Context, c *kernel.Caller, a *abi.SchedAddArgs) (*abi.ScheduleResult, error) {
	uid, err := owner(c, a.OwnerUid)
	if err != nil {
		return nil, err
	}
	if a.Name != "" {
		if err := checkName(a.Name); err != nil {
			return nil, err
		}
	}
	if err := m.checkReach(ctx, uid, a.Name, &a.Target); err != nil {
		return nil, err
	}
	m.fillZone(ctx, &a.Expression)
	limit := m.maxSchedules(ctx, uid)
	var s *abi.Schedule
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		if err := checkScheduleLimit(tx, uid, limit, 1); err != nil {
			return err
		}
		var err error
		s, err = m.insert(tx, c, uid, a)
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.Enabled && s.State.NextRunAtMs != nil {
		m.arm(s.ID, *s.State.NextRunAtMs)
	}
	m.changed(s.OwnerUid, s.ID, "added")
	return &abi.ScheduleResult{Schedule: s}, nil
}

// update serves sched.update: it applies the patch (a new target must be
// reachable) and re-arms the schedule.
func (m *Manager) update(ctx context.Context, c *kernel.Caller, a *abi.SchedUpdateArgs) (*abi.ScheduleResult, error) {
	s, err := m.resolve(ctx, c, a.ID, a.OwnerUid)
	if err != nil {
		return nil, err
	}
	if s.Broken != "" {
		return nil, brokenErr(s)
	}
	if a.Patch.Target != nil {
		if err := m.checkReach(ctx, s.OwnerUid, s.Name, a.Patch.Target); err != nil {
			return nil, err
		}
	}
	m.fillZone(ctx, a.Patch.Expression)
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		var err error
		s, err = m.patch(tx, s, &a.Patch, c.Identity.Process)
		return err
	})
	if err != nil {
		return nil, err
	}
	m.rearm(s)
	m.changed(s.OwnerUid, s.ID, "updated")
	return &abi.ScheduleResult{Schedule: s}, nil
}

// remove serves sched.remove. A schedule that is not there, or is another
// user's (which, to its caller, is not there), is the seed's answer
// removed false, not an error.
func (m *Manager) remove(ctx context.Context, c *kernel.Caller, a *abi.SchedIDArgs) (*abi.SchedRemoveResult, error) {
	s, err := m.resolve(ctx, c, a.ID, a.OwnerUid)
	if abi.KindOf(err) == abi.NotExist {
		return &abi.SchedRemoveResult{Removed: false}, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := m.st.Exec(ctx, `DELETE FROM sched_schedules WHERE id=?`, s.ID); err != nil {
		return nil, abi.E(abi.Path(s.ID), err)
	}
	m.armChanged(s.ID, 0)
	m.changed(s.OwnerUid, s.ID, "removed")
	return &abi.SchedRemoveResult{Removed: true}, nil
}

// runNow serves sched.run: the runs it asks for (runRequested), each with
// its outcome.
func (m *Manager) runNow(ctx context.Context, c *kernel.Caller, a *abi.SchedRunArgs) (*abi.SchedRunResult, error) {
	results, err := m.runRequested(ctx, c, a)
	if err != nil {
		return nil, err
	}
	return runResult(results), nil
}

// ctlRun serves sched.ctl.run (Internal), sched.run for
// /var/spool/cron/ctl: a run that fails, or is skipped because the
// previous run is still going, fails the call with the run's error (its
// kind and message), so that the write of the ctl line fails and the err
// view says why.
func (m *Manager) ctlRun(ctx context.Context, c *kernel.Caller, a *abi.SchedRunArgs) (*abi.SchedRunResult, error) {
	results, err := m.runRequested(ctx, c, a)
	if err != nil {
		return nil, err
	}
	var failed []outcome
	for _, r := range results {
		if r.Status == "error" || (r.Status == "skipped" && r.Error != "") {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		r := failed[0]
		// A failed run has its error's kind (Other without one); a
		// skipped one is Busy: its previous run is still going.
		kind, what := abi.KindOf(r.err), "run failed"
		if r.Status == "skipped" {
			kind, what = abi.Busy, "run skipped"
		}
		if len(results) > 1 {
			what = fmt.Sprintf("%d of %d runs failed; the first", len(failed), len(results))
		}
		return nil, abi.E(abi.Op(abi.SchedRun.Name), abi.Path(r.ScheduleID), kind, fmt.Sprintf("%s: %s", what, r.Error))
	}
	return runResult(results), nil
}

// runResult is sched.run's result of the outcomes rs.
func runResult(rs []outcome) *abi.SchedRunResult {
	out := &abi.SchedRunResult{Ran: len(rs), Results: make([]abi.RunOutcome, len(rs))}
	for i, r := range rs {
		out.Results[i] = r.RunOutcome
	}
	return out
}

// runRequested runs what a sched.run call asks: one schedule, forced, or
// the caller's (root: ownerUid's) schedules that are due.
func (m *Manager) runRequested(ctx context.Context, c *kernel.Caller, a *abi.SchedRunArgs) ([]outcome, error) {
	now := m.clock.Now().UnixMilli()
	var results []outcome
	switch {
	case a.Mode == "force" || (a.Mode == "" && a.ID != ""):
		if a.ID == "" {
			return nil, abi.E(abi.Invalid, "force needs an id")
		}
		s, err := m.resolve(ctx, c, a.ID, a.OwnerUid)
		if err != nil {
			return nil, err
		}
		// A run forced by a narrowed caller acts within its narrowing too.
		s.Cap = abi.NarrowCap(s.Cap, c.Identity.Process)
		results = append(results, m.run(context.WithoutCancel(ctx), s, now, now, true, nil))
	case a.Mode == "due" || a.Mode == "":
		uid, err := owner(c, a.OwnerUid)
		if err != nil {
			return nil, err
		}
		ss, err := m.query(ctx, `WHERE owner_uid=? AND enabled=1 AND next_run_at IS NOT NULL AND next_run_at<=?`, uid, now)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			m.mu.Lock()
			m.unqueueLocked(s.ID) // the engine must not run it too
			m.mu.Unlock()
			m.arm(s.ID, 0)
			results = append(results, m.runScheduled(context.WithoutCancel(ctx), s.ID, *s.State.NextRunAtMs, now, false, nil))
		}
	default:
		return nil, abi.E(abi.Invalid, "mode must be due or force")
	}
	return results, nil
}

// DefaultMaxSchedules is how many schedules a user may have when
// config/sched/max_schedules (or root's users/<uid>/sched/max_schedules)
// does not say. Root's own schedules are not counted.
const DefaultMaxSchedules = 256

// maxSchedules is how many schedules uid may have (-1: no limit, root).
// It makes a syscall: call it outside a transaction of the store.
func (m *Manager) maxSchedules(ctx context.Context, uid uint32) int {
	if uid == 0 {
		return -1
	}
	return ns.Limit(ctx, m.k, m.log, uid, "sched/max_schedules", DefaultMaxSchedules)
}

// checkScheduleLimit refuses (409), in tx, a change that leaves uid with
// more than limit (-1: no limit) schedules once n more are added (the
// change's own additions already made in tx count in the store).
func checkScheduleLimit(tx *kernel.Tx, uid uint32, limit, n int) error {
	if limit < 0 {
		return nil
	}
	var have int
	if err := tx.QueryRow(`SELECT count(*) FROM sched_schedules WHERE owner_uid=?`, uid).Scan(&have); err != nil {
		return abi.E(err)
	}
	if have+n > limit {
		return abi.E(abi.Busy, fmt.Sprintf("uid %d would have %d schedules and may have %d (config/sched/max_schedules): remove some first", uid, have+n, limit))
	}
	return nil
}

// validName is the rule for schedule names.
var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// checkName checks a schedule name (400).
func checkName(name string) error {
	if !validName.MatchString(name) {
		return abi.E(abi.Path(name), abi.Invalid, "schedule names are 1-64 of [A-Za-z0-9_.-]")
	}
	return nil
}

// checkDescription checks a description as free text.
func checkDescription(name string, d *string) error {
	if d == nil {
		return nil
	}
	if err := checkFreeText("description", *d); err != nil {
		return abi.E(abi.Path(name), abi.Invalid, err)
	}
	return nil
}

// checkMisfire checks a misfire policy: skip or run-once.
func checkMisfire(name, policy string) error {
	if policy != "skip" && policy != "run-once" {
		return abi.E(abi.Path(name), abi.Invalid, "misfirePolicy must be skip or run-once")
	}
	return nil
}

// insert creates a schedule owned by owner, in q; its name must be unused
// (409). A cron expression states its zone (fillZone, before the
// transaction).
func (m *Manager) insert(q querier, c *kernel.Caller, owner uint32, a *abi.SchedAddArgs) (*abi.Schedule, error) {
	if a.Name == "" {
		a.Name = newID()[4:]
	}
	if err := checkName(a.Name); err != nil {
		return nil, err
	}
	now := m.clock.Now()
	if err := validateExpression(&a.Expression, now); err != nil {
		return nil, abi.E(abi.Path(a.Name), abi.Invalid, err)
	}
	if err := validateTarget(&a.Target); err != nil {
		return nil, targetErr(a.Name, err)
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
		if err := validateRetry(a.RetryPolicy); err != nil {
			return nil, abi.E(abi.Path(a.Name), abi.Invalid, err)
		}
	}
	s := &abi.Schedule{ID: newID(), OwnerUid: owner, CreatorUid: c.Uid, RunAsUid: owner, Name: a.Name, Description: a.Description,
		Enabled: a.Enabled == nil || *a.Enabled, Expression: a.Expression, Target: a.Target, OverlapPolicy: "skip",
		MisfirePolicy: a.MisfirePolicy, RetryPolicy: a.RetryPolicy, CreatedAtMs: now.UnixMilli(), UpdatedAtMs: now.UnixMilli(),
		Cap: abi.NarrowCap(nil, c.Identity.Process)}
	next := nextAfter(s, now.UnixMilli())
	s.State.NextRunAtMs = ptr(next)
	expr, target, retry, err := columns(s)
	if err != nil {
		return nil, err
	}
	_, err = q.Exec(`INSERT INTO sched_schedules(id,owner_uid,creator_uid,run_as_uid,name,description,enabled,expression,target,misfire,retry,created_at,updated_at,next_run_at,process_cap,seq)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,(SELECT coalesce(max(seq), 0)+1 FROM sched_schedules))`, s.ID, s.OwnerUid, s.CreatorUid, s.RunAsUid, s.Name, s.Description, s.Enabled, expr, target,
		s.MisfirePolicy, retry, s.CreatedAtMs, s.UpdatedAtMs, nullInt(next), abi.CapValue(s.Cap))
	if err != nil {
		return nil, nameErr(a.Name, err)
	}
	return s, nil
}

// patch applies p to s and stores it, in q. A cron expression states its
// zone (fillZone, before the transaction). narrow, the narrowing of the
// caller who changes s (nil: none), narrows s's for good.
func (m *Manager) patch(q querier, s *abi.Schedule, p *abi.SchedPatch, narrow *abi.ProcessCap) (*abi.Schedule, error) {
	now := m.clock.Now()
	s.Cap = abi.NarrowCap(s.Cap, narrow)
	if p.Name != nil {
		if err := checkName(*p.Name); err != nil {
			return nil, err
		}
		s.Name = *p.Name
	}
	if p.Description != nil {
		var d *string
		if err := json.Unmarshal(*p.Description, &d); err != nil {
			return nil, abi.E(abi.Path(s.Name), abi.Invalid, "description must be a string or null")
		}
		if err := checkDescription(s.Name, d); err != nil {
			return nil, err
		}
		s.Description = d
	}
	wasEnabled := s.Enabled
	if p.Enabled != nil {
		s.Enabled = *p.Enabled
	}
	recompute := false
	if p.Expression != nil {
		if err := validateExpression(p.Expression, now); err != nil {
			return nil, abi.E(abi.Path(s.Name), abi.Invalid, err)
		}
		s.Expression = *p.Expression
		s.CreatedAtMs = now.UnixMilli() // "after" counts from the change
		recompute = true
	}
	if p.Target != nil {
		if err := validateTarget(p.Target); err != nil {
			return nil, targetErr(s.Name, err)
		}
		s.Target = *p.Target
	}
	if p.MisfirePolicy != nil {
		if err := checkMisfire(s.Name, *p.MisfirePolicy); err != nil {
			return nil, err
		}
		s.MisfirePolicy = *p.MisfirePolicy
	}
	if p.RetryPolicy != nil {
		if err := validateRetry(p.RetryPolicy); err != nil {
			return nil, abi.E(abi.Path(s.Name), abi.Invalid, err)
		}
		s.RetryPolicy = p.RetryPolicy
	}
	// Enabling a schedule arms its first occurrence after now: a recurring
	// one never catches up on the times that passed while it was disabled,
	// and a one-shot whose time has passed cannot be enabled (give it a
	// new expression).
	stale := s.State.NextRunAtMs == nil || *s.State.NextRunAtMs <= now.UnixMilli()
	enabling := !wasEnabled && s.Enabled
	if recompute || (enabling && (stale || oneShot(s.Expression))) {
		s.State.NextRunAtMs = ptr(nextAfter(s, now.UnixMilli()))
		s.State.Attempt = 0
		if s.State.NextRunAtMs == nil && s.Enabled && oneShot(s.Expression) {
			return nil, abi.E(abi.Path(s.Name), abi.Invalid, fmt.Sprintf("its time has passed (%s): a one-shot runs once; give it a new expression to enable it",
				time.UnixMilli(occurrence(s)).UTC().Format(time.RFC3339)))
		}
	}
	s.UpdatedAtMs = now.UnixMilli()
	expr, target, retry, err := columns(s)
	if err != nil {
		return nil, err
	}
	var next any
	if s.State.NextRunAtMs != nil {
		next = *s.State.NextRunAtMs
	}
	_, err = q.Exec(`UPDATE sched_schedules SET name=?, description=?, enabled=?, expression=?, target=?, misfire=?, retry=?, updated_at=?, created_at=?, next_run_at=?, attempt=?, process_cap=? WHERE id=?`,
		s.Name, s.Description, s.Enabled, expr, target, s.MisfirePolicy, retry, s.UpdatedAtMs, s.CreatedAtMs, next, s.State.Attempt, abi.CapValue(s.Cap), s.ID)
	if err != nil {
		return nil, nameErr(s.Name, err)
	}
	return s, nil
}

// nameErr is the error of a write of the schedule name that failed with
// err: a name the owner has already (409), or the store's error.
func nameErr(name string, err error) error {
	if kernel.Duplicate(err) {
		return abi.E(abi.Path(name), abi.Busy, fmt.Sprintf("a schedule named %q exists", name))
	}
	return abi.E(abi.Path(name), err)
}

// rearm arms s as stored, after a change.
func (m *Manager) rearm(s *abi.Schedule) {
	if !s.Enabled || s.State.NextRunAtMs == nil {
		m.armChanged(s.ID, 0)
		return
	}
	// A one-shot's stored next time is its due time until its run ends:
	// re-arming it while that run goes on (an update of its metadata)
	// would fire it again at once. The run's advance arms whatever
	// follows.
	if *s.State.NextRunAtMs <= m.clock.Now().UnixMilli() && m.isRunning(s.ID) {
		return
	}
	m.armChanged(s.ID, *s.State.NextRunAtMs)
}

// isRunning says whether a run of id is under way.
func (m *Manager) isRunning(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[id] != nil
}

// touchTab notes that uid's crontab changed now (its mtime).
func (m *Manager) touchTab(uid uint32) { m.changes.Touch(strconv.FormatUint(uint64(uid), 10)) }

// changed tells uid that schedule id was added, updated or removed
// (sched.changed).
func (m *Manager) changed(uid uint32, id, what string) {
	m.touchTab(uid)
	kernel.Publish(m.k, abi.SigSchedChanged, abi.SchedChanged{ScheduleID: id, Change: what}, kernel.Audience{Uids: []uint32{uid}})
}
