package sched

import (
	"context"
	"errors"
	"fmt"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The handlers of sched.crontab.get, sched.crontab.set and sched.log, and
// the Internal sched.owners and sched.crontab.check that the files of
// /var/spool/cron make.

// owners serves sched.owners (Internal): the uids that own schedules, all
// of them for root, the caller's own otherwise.
func (m *Manager) owners(ctx context.Context, c *kernel.Caller, _ *struct{}) ([]uint32, error) {
	if !c.IsRoot() {
		return []uint32{c.Uid}, nil
	}
	rows, err := m.st.QueryContext(ctx, `SELECT DISTINCT owner_uid FROM sched_schedules ORDER BY owner_uid`)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	var out []uint32
	for rows.Next() {
		var v any
		if err := rows.Scan(&v); err != nil {
			return nil, abi.E(err)
		}
		c := cells{v: []any{v}}
		if uid := c.uid(0, "owner_uid"); c.problems == nil {
			out = append(out, uid) // a damaged owner is no one's crontab
		}
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(err)
	}
	return out, nil
}

// crontabGet serves sched.crontab.get: the caller's (root: ownerUid's)
// schedules as a crontab.
func (m *Manager) crontabGet(ctx context.Context, c *kernel.Caller, a *abi.CrontabGetArgs) (*abi.CrontabGetResult, error) {
	uid, err := owner(c, a.OwnerUid)
	if err != nil {
		return nil, err
	}
	text, err := m.crontab(ctx, uid)
	if err != nil {
		return nil, err
	}
	return &abi.CrontabGetResult{Text: text}, nil
}

// crontabSet serves sched.crontab.set: it reconciles the caller's (root:
// ownerUid's) schedules with the text, one reconciliation at a time.
func (m *Manager) crontabSet(ctx context.Context, c *kernel.Caller, a *abi.CrontabSetArgs) (*abi.CrontabSetResult, error) {
	uid, err := owner(c, a.OwnerUid)
	if err != nil {
		return nil, err
	}
	m.crontabMu.Lock()
	defer m.crontabMu.Unlock()
	return m.reconcile(ctx, c, uid, a.Text)
}

// crontabCheck serves sched.crontab.check (Internal): it checks complete
// crontab lines as they are written (CheckCrontabLines). A crontab file's
// write fails with its error, which the err view of /var/spool/cron then
// shows.
//
// It answers how many of the lines are schedules. A text that would give
// the crontab's owner more schedules than they may have (Before and
// these) is a 409, so that the write(2) of the line past the limit fails
// and the shell sees it (the whole text would be refused at close, whose
// error shells ignore).
func (m *Manager) crontabCheck(ctx context.Context, c *kernel.Caller, a *abi.CrontabCheckArgs) (int, error) {
	n, err := countCrontabLines(a.Text, a.Line)
	if err != nil {
		return 0, abi.E(abi.Invalid, err)
	}
	if limit := m.maxSchedules(ctx, a.OwnerUid); limit >= 0 && a.Before+n > limit {
		return 0, abi.E(abi.Busy, fmt.Sprintf("line %d: uid %d may have %d schedules (config/sched/max_schedules): this crontab has %d", a.Line+n-1, a.OwnerUid, limit, a.Before+n))
	}
	return n, nil
}

// logCall serves sched.log: the caller's (root: everyone's, or
// ownerUid's) latest runs, newest first.
func (m *Manager) logCall(ctx context.Context, c *kernel.Caller, a *abi.SchedLogArgs) (*abi.SchedLogResult, error) {
	where, args := `WHERE owner_uid=?`, []any{c.Uid}
	if c.IsRoot() {
		where, args = ``, nil
		if a.OwnerUid != nil {
			where, args = `WHERE owner_uid=?`, []any{*a.OwnerUid}
		}
	} else if a.OwnerUid != nil && *a.OwnerUid != c.Uid {
		return nil, abi.E(abi.Permission, "only root may read another uid's run history")
	}
	if a.Rotate < 0 || a.Rotate > 10000 {
		return nil, abi.E(abi.Invalid, "rotate is 1 to 10000 runs")
	}
	if a.Rotate > 0 {
		// One statement, so one snapshot: the runs whose rank among the
		// caller's, oldest first, is past the last multiple of Rotate
		// before the newest.
		n := a.Rotate
		runs, err := m.runs(ctx, `WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn, count(*) OVER () AS n FROM sched_runs `+
			where+`) AS numbered WHERE rn > ((n-1)/?)*?) ORDER BY id DESC`, append(args, n, n)...)
		if err != nil {
			return nil, err
		}
		return &abi.SchedLogResult{Runs: runs}, nil
	}
	limit := a.Limit
	if limit <= 0 {
		limit = 1000
	}
	limit = min(limit, 10000)
	runs, err := m.runs(ctx, where+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	return &abi.SchedLogResult{Runs: runs}, nil
}

// crontab renders uid's schedules in the order they were made.
func (m *Manager) crontab(ctx context.Context, uid uint32) (string, error) {
	ss, err := m.query(ctx, `WHERE owner_uid=? ORDER BY seq`, uid)
	if err != nil {
		return "", err
	}
	return RenderCrontab(ss), nil
}

// fillZone gives e, if it is a cron expression without a zone, the
// system's (defaultZone). It makes a syscall: call it outside a
// transaction of the store.
func (m *Manager) fillZone(ctx context.Context, e *abi.Expression) {
	if e != nil && e.Kind == "cron" && e.Timezone == "" {
		e.Timezone = m.defaultZone(ctx)
	}
}

// defaultZone is the zone of cron lines before any CRON_TZ= line: the
// system's time zone (config/system/timezone), else UTC.
func (m *Manager) defaultZone(ctx context.Context) string {
	res, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: "config/system/timezone"})
	if err != nil {
		return "UTC"
	}
	for _, e := range res.Entries {
		if e.Key == "config/system/timezone" {
			if _, err := cronLocation(e.Value); err == nil && e.Value != "" {
				return e.Value
			}
		}
	}
	return "UTC"
}

// lineError is err, which a crontab line caused, with the line's number
// and err's kind.
func lineError(line int, err error) error {
	return abi.E(abi.KindOf(err), fmt.Sprintf("line %d: %v", line, err))
}

// reconcile makes uid's schedules what text says: the whole text is parsed
// first (a bad line changes nothing), then, in one transaction, a line
// whose id (or else name) matches one of uid's schedules updates it if it
// differs, other lines add schedules, and schedules no line names are
// removed. A line that is unchanged keeps its id, its next run time and the
// start of its "after" interval.
func (m *Manager) reconcile(ctx context.Context, c *kernel.Caller, uid uint32, text string) (*abi.CrontabSetResult, error) {
	lines, err := ParseCrontab(text, m.defaultZone(ctx))
	if err != nil {
		return nil, abi.E(abi.Invalid, err)
	}
	all, err := m.query(ctx, `WHERE owner_uid=? ORDER BY seq`, uid)
	if err != nil {
		return nil, err
	}
	// A damaged record is no line of the text (the crontab shows it as a
	// #broken comment): the write neither matches nor removes it.
	existing := all[:0]
	for _, s := range all {
		if s.Broken == "" {
			existing = append(existing, s)
		}
	}
	byID := map[string]*abi.Schedule{}
	byName := map[string]*abi.Schedule{}
	for i := range existing {
		byID[existing[i].ID] = &existing[i]
		byName[existing[i].Name] = &existing[i]
	}
	// Match lines to schedules: by id first, then by name.
	match := make([]*abi.Schedule, len(lines))
	claimed := map[string]bool{}
	for i, l := range lines {
		if s := byID[l.ID]; l.ID != "" && s != nil && !claimed[s.ID] {
			match[i], claimed[s.ID] = s, true
		}
	}
	for i, l := range lines {
		if s := byName[l.Name]; match[i] == nil && l.Name != "" && s != nil && !claimed[s.ID] {
			match[i], claimed[s.ID] = s, true
		}
	}
	res := &abi.CrontabSetResult{Added: []string{}, Updated: []string{}, Removed: []string{}}
	var removed []*abi.Schedule
	for i := range existing {
		if !claimed[existing[i].ID] {
			removed = append(removed, &existing[i])
		}
	}
	type change struct {
		line  int
		s     *abi.Schedule
		patch *abi.SchedPatch
	}
	var changes []change
	for i, l := range lines {
		s := match[i]
		if s == nil {
			continue
		}
		p := &abi.SchedPatch{}
		changed := false
		if l.Name != "" && l.Name != s.Name {
			p.Name, changed = &l.Name, true
		}
		if l.Disabled == s.Enabled {
			enabled := !l.Disabled
			p.Enabled, changed = &enabled, true
		}
		if whenKey(l.Expression) != whenKey(s.Expression) {
			e := l.Expression
			p.Expression, changed = &e, true
		}
		if renderTarget(l.Target) != renderTarget(s.Target) {
			t := mergeTarget(s.Target, l.Target)
			p.Target, changed = &t, true
		}
		if changed {
			changes = append(changes, change{l.Line, s, p})
		} else {
			res.Unchanged++
		}
	}
	// Targets new or changed must be reachable by uid (syscalls: before
	// the transaction).
	for _, ch := range changes {
		if ch.patch.Target != nil {
			if err := m.checkReach(ctx, uid, ch.s.Name, ch.patch.Target); err != nil {
				return nil, lineError(ch.line, err)
			}
		}
	}
	for i, l := range lines {
		if match[i] == nil {
			if err := m.checkReach(ctx, uid, l.Name, &lines[i].Target); err != nil {
				return nil, lineError(l.Line, err)
			}
		}
	}
	limit := m.maxSchedules(ctx, uid)
	var added, updated []*abi.Schedule
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		for _, s := range removed {
			if _, err := tx.Exec(`DELETE FROM sched_schedules WHERE id=?`, s.ID); err != nil {
				return abi.E(err)
			}
		}
		// Names may move between schedules (a swap): park every renamed
		// schedule under a name no schedule can have first (a control
		// character: Postgres's text holds no NUL).
		for _, ch := range changes {
			if ch.patch.Name != nil {
				if _, err := tx.Exec(`UPDATE sched_schedules SET name=? WHERE id=?`, "\x01"+ch.s.ID, ch.s.ID); err != nil {
					return abi.E(err)
				}
			}
		}
		for _, ch := range changes {
			s, err := m.patch(tx, ch.s, ch.patch, c.Identity.Process)
			if err != nil {
				return lineError(ch.line, err)
			}
			updated = append(updated, s)
		}
		for i, l := range lines {
			if match[i] != nil {
				continue
			}
			enabled := !l.Disabled
			s, err := m.insert(tx, c, uid, &abi.SchedAddArgs{Name: l.Name, Enabled: &enabled, Expression: l.Expression, Target: l.Target})
			if err != nil {
				return lineError(l.Line, err)
			}
			added = append(added, s)
		}
		// The text may not leave its owner more schedules than the
		// limit; a text that adds none is always taken (the limit may
		// have been lowered under what the owner has).
		if len(added) > 0 {
			if err := checkScheduleLimit(tx, uid, limit, 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var ke *abi.Error
		if !errors.As(err, &ke) {
			err = abi.E(err)
		}
		return nil, err
	}
	for _, s := range removed {
		m.armChanged(s.ID, 0)
		m.changed(uid, s.ID, "removed")
		res.Removed = append(res.Removed, s.ID)
	}
	for _, s := range updated {
		m.rearm(s)
		m.changed(uid, s.ID, "updated")
		res.Updated = append(res.Updated, s.ID)
	}
	for _, s := range added {
		m.rearm(s)
		m.changed(uid, s.ID, "added")
		res.Added = append(res.Added, s.ID)
	}
	return res, nil
}
