package sched

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

type listArgs struct {
	OwnerUid        *uint32 `json:"ownerUid"`
	IncludeDisabled *bool   `json:"includeDisabled"`
	Limit           int     `json:"limit"`
	Offset          int     `json:"offset"`
}

// Patch is sched.update's patch.
type Patch struct {
	Name          *string          `json:"name"`
	Description   *json.RawMessage `json:"description"`
	Enabled       *bool            `json:"enabled"`
	Expression    *Expression      `json:"expression"`
	Target        *Target          `json:"target"`
	MisfirePolicy *string          `json:"misfirePolicy"`
	RetryPolicy   *Retry           `json:"retryPolicy"`
}

type updateArgs struct {
	ID       string  `json:"id"`
	OwnerUid *uint32 `json:"ownerUid"`
	Patch    Patch   `json:"patch"`
}

type idArgs struct {
	ID       string  `json:"id"`
	OwnerUid *uint32 `json:"ownerUid"`
}

type runArgs struct {
	ID       string  `json:"id"`
	OwnerUid *uint32 `json:"ownerUid"`
	Mode     string  `json:"mode"`
}

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

func (m *Manager) registerSyscalls() {
	k := m.k
	kernel.Handle(k, "sched.list", 0, func(ctx context.Context, c *kernel.Caller, a *listArgs) (map[string]any, error) {
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
		return map[string]any{"schedules": ss, "count": len(ss)}, nil
	})
	kernel.Handle(k, "sched.add", 0, func(ctx context.Context, c *kernel.Caller, a *AddArgs) (map[string]any, error) {
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
		var s *Schedule
		err = m.st.Tx(ctx, func(tx *sql.Tx) error {
			var err error
			s, err = m.add(ctx, tx, c, uid, a)
			return err
		})
		if err != nil {
			return nil, err
		}
		if s.Enabled && s.State.NextRunAtMs != nil {
			m.arm(s.ID, *s.State.NextRunAtMs)
		}
		m.changed(s.OwnerUid, s.ID, "added")
		return map[string]any{"schedule": s}, nil
	})
	kernel.Handle(k, "sched.update", 0, func(ctx context.Context, c *kernel.Caller, a *updateArgs) (map[string]any, error) {
		s, err := m.resolve(ctx, c, a.ID, a.OwnerUid)
		if err != nil {
			return nil, err
		}
		if a.Patch.Target != nil {
			if err := m.checkReach(ctx, s.OwnerUid, s.Name, a.Patch.Target); err != nil {
				return nil, err
			}
		}
		m.fillZone(ctx, a.Patch.Expression)
		err = m.st.Tx(ctx, func(tx *sql.Tx) error {
			var err error
			s, err = m.update(ctx, tx, s, &a.Patch)
			return err
		})
		if err != nil {
			return nil, err
		}
		m.rearm(s)
		m.changed(s.OwnerUid, s.ID, "updated")
		return map[string]any{"schedule": s}, nil
	})
	kernel.Handle(k, "sched.remove", 0, func(ctx context.Context, c *kernel.Caller, a *idArgs) (map[string]any, error) {
		s, err := m.resolve(ctx, c, a.ID, a.OwnerUid)
		if ke := (*abi.Error)(nil); errors.As(err, &ke) && ke.Kind == abi.NotExist {
			// The seed's answer for a schedule that is not there, or
			// is another user's (which, to its caller, is not there).
			return map[string]any{"removed": false}, nil
		}
		if err != nil {
			return nil, err
		}
		if _, err := m.st.Exec(ctx, `DELETE FROM sched_schedules WHERE id=?`, s.ID); err != nil {
			return nil, abi.E(err)
		}
		m.armChange(s.ID, 0)
		m.changed(s.OwnerUid, s.ID, "removed")
		return map[string]any{"removed": true}, nil
	})
	kernel.Handle(k, "sched.run", 0, func(ctx context.Context, c *kernel.Caller, a *runArgs) (map[string]any, error) {
		results, err := m.runNow(ctx, c, a)
		if err != nil {
			return nil, err
		}
		return map[string]any{"ran": len(results), "results": results}, nil
	})
	// sched.ctl.run (Internal) is sched.run for /var/spool/cron/ctl: a run
	// that fails, or is skipped because the previous run is still going,
	// fails the call with the run's error (its kind and message), so that
	// the write of the ctl line fails and the err view says why.
	kernel.Handle(k, "sched.ctl.run", kernel.Internal, func(ctx context.Context, c *kernel.Caller, a *runArgs) (map[string]any, error) {
		results, err := m.runNow(ctx, c, a)
		if err != nil {
			return nil, err
		}
		var failed []RunResult
		for _, r := range results {
			if r.Status == "error" || (r.Status == "skipped" && r.Error != "") {
				failed = append(failed, r)
			}
		}
		if len(failed) > 0 {
			r := failed[0]
			// A failed run has its error's kind (Other without one); a
			// skipped one is Busy: its previous run is still going.
			kind, what := abi.Kind(abi.Code(r.err)), "run failed"
			if r.Status == "skipped" {
				kind, what = abi.Busy, "run skipped"
			}
			if len(results) > 1 {
				what = fmt.Sprintf("%d of %d runs failed; the first", len(failed), len(results))
			}
			return nil, abi.E(abi.Op("sched.run"), abi.Path(r.ScheduleID), kind, fmt.Sprintf("%s: %s", what, r.Error))
		}
		return map[string]any{"ran": len(results), "results": results}, nil
	})
}

// runNow runs what a sched.run call asks: one schedule, forced, or the
// caller's (root: ownerUid's) schedules that are due.
func (m *Manager) runNow(ctx context.Context, c *kernel.Caller, a *runArgs) ([]RunResult, error) {
	now := m.clock.Now().UnixMilli()
	var results []RunResult
	switch {
	case a.Mode == "force" || (a.Mode == "" && a.ID != ""):
		if a.ID == "" {
			return nil, abi.E(abi.Invalid, "force needs an id")
		}
		s, err := m.resolve(ctx, c, a.ID, a.OwnerUid)
		if err != nil {
			return nil, err
		}
		results = append(results, m.runScheduled(context.WithoutCancel(ctx), s.ID, now, now, true))
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
			m.arm(s.ID, 0) // the engine must not run it too
			results = append(results, m.runScheduled(context.WithoutCancel(ctx), s.ID, *s.State.NextRunAtMs, now, false))
		}
	default:
		return nil, abi.E(abi.Invalid, "mode must be due or force")
	}
	if results == nil {
		results = []RunResult{}
	}
	return results, nil
}

// update applies a patch to s and stores it. A cron expression states
// its zone (fillZone, before the transaction).
func (m *Manager) update(ctx context.Context, q querier, s *Schedule, p *Patch) (*Schedule, error) {
	now := m.clock.Now()
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
		if err := p.Expression.validate(now); err != nil {
			return nil, abi.E(abi.Path(s.Name), abi.Invalid, err)
		}
		s.Expression = *p.Expression
		s.CreatedAtMs = now.UnixMilli() // "after" counts from the change
		recompute = true
	}
	if p.Target != nil {
		if err := p.Target.validate(); err != nil {
			return nil, abi.E(abi.Path(s.Name), abi.Invalid, err)
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
		if err := p.RetryPolicy.validate(); err != nil {
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
	if recompute || (enabling && (stale || s.Expression.oneShot())) {
		s.State.NextRunAtMs = ptr(nextAfter(s, now.UnixMilli()))
		s.State.Attempt = 0
		if s.State.NextRunAtMs == nil && s.Enabled && s.Expression.oneShot() {
			return nil, abi.E(abi.Path(s.Name), abi.Invalid, fmt.Sprintf("its time has passed (%s): a one-shot runs once; give it a new expression to enable it",
				time.UnixMilli(s.occurrence()).UTC().Format(time.RFC3339)))
		}
	}
	s.UpdatedAtMs = now.UnixMilli()
	expr, target, retry := s.columns()
	var next any
	if s.State.NextRunAtMs != nil {
		next = *s.State.NextRunAtMs
	}
	_, err := q.Exec(`UPDATE sched_schedules SET name=?, description=?, enabled=?, expression=?, target=?, misfire=?, retry=?, updated_at=?, created_at=?, next_run_at=?, attempt=? WHERE id=?`,
		s.Name, s.Description, s.Enabled, expr, target, s.MisfirePolicy, retry, s.UpdatedAtMs, s.CreatedAtMs, next, s.State.Attempt, s.ID)
	if err != nil {
		return nil, abi.E(abi.Path(s.Name), abi.Busy, fmt.Sprintf("a schedule named %q exists", s.Name))
	}
	return s, nil
}

// rearm arms s as stored.
func (m *Manager) rearm(s *Schedule) {
	if s.Enabled && s.State.NextRunAtMs != nil {
		// A one-shot's stored next time is its due time until its run
		// ends: re-arming it while that run goes on (an update of its
		// metadata) would fire it again at once. The run's advance arms
		// whatever follows.
		if *s.State.NextRunAtMs <= m.clock.Now().UnixMilli() && m.isRunning(s.ID) {
			return
		}
		m.armChange(s.ID, *s.State.NextRunAtMs)
	} else {
		m.armChange(s.ID, 0)
	}
}

// isRunning says whether a run of id is under way.
func (m *Manager) isRunning(id string) bool {
	m.rmu.Lock()
	defer m.rmu.Unlock()
	_, ok := m.running[id]
	return ok
}

func (m *Manager) changed(uid uint32, id, what string) {
	m.k.Signal("sched.changed", map[string]any{"scheduleId": id, "change": what}, kernel.Audience{Uids: []uint32{uid}})
}
