package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The decisions at a run's checkpoints (docs/runs.md): a directive
// (proc.directive) decides a parked checkpoint, or waits for the one it
// names; its effects change the process's run settings or enter the
// conversation. The first decision of a checkpoint wins (the store's
// primary key on (run, checkpoint)).

// sysDirective serves proc.directive: the directive decides checkpoint
// a.Checkpoint (default: the one the run is parked at, else its next) of
// p's run, if it is the first for it ("delivered"; else
// "already-decided", even after the run has passed it: first wins for
// good). A checkpoint passed with no decision is refused as stale (409).
// For a parked checkpoint the effects are applied before the run
// resumes. A directive for a checkpoint not reached yet (the run is
// between checkpoints) applies its effects at once: its settings (budget,
// model, temperature, tool cap) reach the next model call, and its
// messages wait, as steering messages do, for the run's next checkpoint,
// or start the next run if this one ends first; the checkpoint, when
// reached, is decided and does not park. So a delivery always happens.
func (m *engine) sysDirective(ctx context.Context, c *kernel.Caller, a *abi.DirectiveArgs) (*abi.DirectiveResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	d, err := normalizeDirective(a.Directive)
	if err != nil {
		return nil, err
	}
	if a.Checkpoint != nil && *a.Checkpoint < 1 {
		return nil, abi.E(abi.Path(p.Pid), abi.Invalid, "checkpoints are numbered from 1")
	}
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	r := pr.run
	if r == nil {
		pr.mu.Unlock()
		if a.Checkpoint != nil {
			// First wins for good: the last run's decision still stands.
			// (Runs of one millisecond: their first messages are
			// numbered in the order they started.)
			var run string
			err := m.st.QueryRowContext(ctx, `SELECT run_id FROM proc_runs WHERE pid=? ORDER BY started_at DESC, first_message DESC LIMIT 1`, p.Pid).Scan(&run)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, abi.E(abi.Path(p.Pid), err)
			}
			if run != "" {
				if res, err := m.passedCheckpoint(ctx, p, run, *a.Checkpoint); res != nil || abi.KindOf(err) != abi.Busy {
					return res, err
				}
			}
		}
		return nil, abi.E(abi.Path(p.Pid), abi.Busy, "no run is under way")
	}
	seq := r.check.seq + 1
	if r.check.parked != nil {
		seq = r.check.parked.Seq
	}
	if a.Checkpoint != nil {
		seq = *a.Checkpoint
	}
	switch {
	case r.check.parked != nil && seq < r.check.parked.Seq, r.check.parked == nil && seq <= r.check.seq:
		pr.mu.Unlock()
		return m.passedCheckpoint(ctx, p, r.id, seq)
	case r.check.parked != nil && seq > r.check.parked.Seq:
		pr.mu.Unlock()
		return nil, abi.E(abi.Path(p.Pid), abi.Invalid, fmt.Sprintf("the run is parked at checkpoint %d; %d is not reached", r.check.parked.Seq, seq))
	}
	// A narrowed caller's directive (its effects may put its text in the
	// conversation) narrows the run's conversation before it can apply.
	if err := m.narrowConv(ctx, p.Pid, r.cid, 0, c.Identity.Process); err != nil {
		pr.mu.Unlock()
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	if r.check.parked == nil {
		// Decided before it is reached: recorded now (first wins) and its
		// effects applied now. pr.mu is held across both, so that the
		// checkpoint cannot pass meanwhile.
		res, err := m.decideAhead(ctx, c, pr, r, seq, d)
		pr.mu.Unlock()
		if err != nil {
			return nil, abi.E(abi.Path(p.Pid), err)
		}
		if res.Result == "delivered" {
			if d.Type == "continue" {
				if err := m.storeControl(ctx, pr); err != nil {
					m.log.Error("proc: save run settings", "pid", pr.pid, "err", err)
				}
			} else if d.Type == "abort" {
				if _, err := m.Abort(ctx, p); err != nil {
					return nil, err
				}
			}
		}
		signal(m, p.Uid, abi.SigProcRunDirective, abi.RunDirected{Pid: p.Pid, RunID: r.id, Seq: seq, Result: res.Result, Type: d.Type, EffectsApplied: res.EffectsApplied})
		return res, nil
	}
	pr.mu.Unlock()
	return m.decide(ctx, p, pr, r, seq, d, "directive")
}

// decideAhead records d as the decision of checkpoint seq of r, not
// reached yet, if it is the first, and applies its effects: the
// settings to pr's (stored by the caller), the messages queued as
// steering messages of r's conversation. pr.mu is held.
func (m *engine) decideAhead(ctx context.Context, c *kernel.Caller, pr *process, r *activeRun, seq int64, d abi.Directive) (*abi.DirectiveResult, error) {
	res := &abi.DirectiveResult{Result: "already-decided", Checkpoint: seq, EffectsApplied: []string{}}
	won, err := m.recordDirective(ctx, r.id, seq, d, "delivered")
	if err != nil || !won {
		return res, err
	}
	res.Result = "delivered"
	if r.check.pending == nil {
		r.check.pending = map[int64]bool{}
	}
	r.check.pending[seq] = true
	if d.Type != "continue" {
		return res, nil
	}
	applied, inject := m.applySettingsLocked(ctx, pr, d.Effects)
	res.EffectsApplied = applied
	for _, e := range inject {
		role, text, kind := e.Role, e.Content, abi.EventUserMessage
		if role == "" || role == "system" {
			role, text, kind = "system", EventPrefix+text, abi.EventProcessEvent
		}
		meta := eventMeta(Event{Kind: kind, Source: sourceOf(c), Cap: c.Identity.Process})
		q, err := m.st.Exec(ctx, `INSERT INTO proc_queue(pid,cid,generation,run_id,message,role,created_at,kind,source,trace_id,process_cap,mode)
			SELECT ?,?,generation,?,?,?,?,?,?,?,?,'steer' FROM proc_conversations WHERE pid=? AND cid=? AND generation=?`,
			pr.pid, r.cid, newID("run_"), text, role, now(), meta.kind, meta.source, meta.trace, meta.cap, pr.pid, r.cid, r.gen)
		if err == nil {
			err = oneRow(q, pr.pid+"/"+r.cid)
		}
		if err != nil {
			// Recorded and partly applied: the message is what is lost,
			// and the log says so.
			m.log.Error("proc: queue a directive's message", "pid", pr.pid, "run", r.id, "err", err)
			continue
		}
		pr.steer++
	}
	return res, nil
}

// passedCheckpoint answers a directive for checkpoint seq of run, which
// the run has passed: already-decided if a decision was recorded for it
// (first wins for good), else a 409: the checkpoint is stale, passed
// with no decision.
func (m *engine) passedCheckpoint(ctx context.Context, p *abi.Process, run string, seq int64) (*abi.DirectiveResult, error) {
	var how string
	err := m.st.QueryRowContext(ctx, `SELECT how FROM proc_directives WHERE run_id=? AND seq=?`, run, seq).Scan(&how)
	switch {
	case err == nil:
		return &abi.DirectiveResult{Result: "already-decided", Checkpoint: seq, EffectsApplied: []string{}}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	return nil, abi.E(abi.Path(p.Pid), abi.Busy, fmt.Sprintf("checkpoint %d is stale: the run passed it with no decision", seq))
}

// decide delivers d to r parked at checkpoint seq if it is the first
// decision for it: its effects applied, then the run resumed (an abort
// aborts it).
func (m *engine) decide(ctx context.Context, p *abi.Process, pr *process, r *activeRun, seq int64, d abi.Directive, how string) (*abi.DirectiveResult, error) {
	won, err := m.recordDirective(ctx, r.id, seq, d, how)
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	res := &abi.DirectiveResult{Result: "already-decided", Checkpoint: seq, EffectsApplied: []string{}}
	if won {
		res.Result = "delivered"
		if d.Type == "continue" {
			res.EffectsApplied = m.applyEffects(ctx, pr, r, d.Effects)
		}
		signal(m, p.Uid, abi.SigProcRunDirective, abi.RunDirected{Pid: p.Pid, RunID: r.id, Seq: seq, Result: res.Result, Type: d.Type, EffectsApplied: res.EffectsApplied})
		if d.Type == "abort" {
			if _, err := m.Abort(ctx, p); err != nil {
				return nil, err
			}
			return res, nil
		}
		pr.mu.Lock()
		ch := r.check.decide
		pr.mu.Unlock()
		if ch != nil {
			select {
			case ch <- d:
			default:
			}
		}
	}
	return res, nil
}

// recordDirective records d as the decision of checkpoint seq of run:
// won is false if another decision was recorded first.
func (m *engine) recordDirective(ctx context.Context, run string, seq int64, d abi.Directive, how string) (bool, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	res, err := m.st.Exec(ctx, `INSERT INTO proc_directives(run_id,seq,directive,how,created_at) VALUES(?,?,?,?,?) ON CONFLICT DO NOTHING`,
		run, seq, string(b), how, now())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// normalizeDirective desugars d (extend-budget, refocus) into a continue
// and checks its type.
func normalizeDirective(d abi.Directive) (abi.Directive, error) {
	effect := func(e abi.Effect) json.RawMessage { b, _ := json.Marshal(e); return b }
	switch d.Type {
	case "continue":
	case "abort":
		d.Effects = nil
	case "extend-budget":
		usd, ok := abi.DollarsOf(d.USD, d.Dollars)
		if !ok {
			return d, abi.E(abi.Invalid, "extend-budget: usd and dollars (the seed's name of it) differ: give one")
		}
		d = abi.Directive{Type: "continue", Effects: []json.RawMessage{effect(abi.Effect{Op: "extend-budget", USD: usd, Tokens: d.Tokens, Turns: d.Turns, TimeMs: d.TimeMs})}}
	case "refocus":
		if d.Hint == "" {
			return d, abi.E(abi.Invalid, "refocus: a hint is required")
		}
		d = abi.Directive{Type: "continue", Effects: []json.RawMessage{effect(abi.Effect{Op: "inject-message", Role: "system", Content: "Refocus: " + d.Hint})}}
	default:
		return d, abi.E(abi.Invalid, fmt.Sprintf("directive type %q: want continue, abort, extend-budget or refocus", d.Type))
	}
	if len(d.Effects) > 32 {
		return d, abi.E(abi.Invalid, "at most 32 effects")
	}
	return d, nil
}

// applyEffects applies a continue's effects to pr and r's conversation
// (r is parked at a checkpoint), in order, and names those that changed
// something (see applySettingsLocked).
func (m *engine) applyEffects(ctx context.Context, pr *process, r *activeRun, effects []json.RawMessage) []string {
	pr.mu.Lock()
	applied, inject := m.applySettingsLocked(ctx, pr, effects)
	pr.mu.Unlock()
	if err := m.storeControl(ctx, pr); err != nil {
		m.log.Error("proc: save run settings", "pid", pr.pid, "err", err)
	}
	for _, e := range inject {
		role, text := e.Role, e.Content
		if role == "" || role == "system" {
			role, text = "system", EventPrefix+text
		}
		if _, err := m.appendGuarded(ctx, pr.pid, r, role, jsonString(text)); err != nil {
			m.log.Error("proc: inject a message", "pid", pr.pid, "err", err)
		}
	}
	return applied
}

// applySettingsLocked applies effects to pr's run settings, in order (pr.mu
// held; the caller stores them), and returns the ops of the effects that
// changed something, in order, and the inject-message effects, for the
// caller to deliver. An effect that does not decode, an unknown op or a
// bad value is logged and skipped; one that changes nothing (a budget
// raised where no limit is set, the model already in use) is not listed.
func (m *engine) applySettingsLocked(ctx context.Context, pr *process, effects []json.RawMessage) (applied []string, inject []abi.Effect) {
	applied = []string{}
	ctl := m.controlLocked(ctx, pr)
	for _, raw := range effects {
		var e abi.Effect
		if err := json.Unmarshal(raw, &e); err != nil {
			m.log.Warn("proc: an effect that does not decode is skipped", "pid", pr.pid, "err", err)
			continue
		}
		ok, changed := applyEffect(ctl, e)
		switch {
		case !ok:
			m.log.Warn("proc: an effect is skipped", "pid", pr.pid, "op", e.Op)
		case !changed:
			m.log.Debug("proc: an effect changes nothing", "pid", pr.pid, "op", e.Op)
		default:
			if e.Op == "inject-message" {
				inject = append(inject, e)
			}
			applied = append(applied, e.Op)
		}
	}
	return applied, inject
}

// applyEffect applies effect e to the settings ctl (an inject-message
// only checks: the caller appends its message). ok is false for an
// unknown op or a bad value (a negative or non-finite number, a sum that
// would overflow, usd and dollars that differ), which changes nothing;
// changed says the settings are not what they were (an inject-message
// always changes the conversation).
func applyEffect(ctl *runCtl, e abi.Effect) (ok, changed bool) {
	switch e.Op {
	case "extend-budget":
		b := ctl.Budget
		usd, same := abi.DollarsOf(e.USD, e.Dollars)
		if !same || !(usd >= 0) || math.IsInf(usd, 0) || e.Tokens < 0 || e.Turns < 0 || e.TimeMs < 0 {
			return false, false
		}
		// A limit that is not set stays unlimited; a sum saturates.
		if b.USD > 0 {
			if b.USD += usd; math.IsInf(b.USD, 0) {
				return false, false
			}
		}
		for _, f := range []struct {
			p *int64
			d int64
		}{{&b.Tokens, e.Tokens}, {&b.Turns, e.Turns}, {&b.TimeMs, e.TimeMs}} {
			if *f.p > 0 {
				*f.p = satAdd(*f.p, f.d)
			}
		}
		changed = b != ctl.Budget
		ctl.Budget = b
	case "inject-message":
		ok = e.Content != "" && (e.Role == "" || e.Role == "system" || e.Role == "user")
		return ok, ok
	case "swap-model":
		if e.Model == "" || e.Provider != "" {
			return false, false // a provider follows the owner's config (users/<uid>/ai/provider)
		}
		changed = ctl.Model != e.Model
		ctl.Model = e.Model
	case "set-temperature":
		if e.Temp == nil || !(*e.Temp >= 0 && *e.Temp <= 2) { // NaN too
			return false, false
		}
		t := *e.Temp
		changed = ctl.Temp == nil || *ctl.Temp != t
		ctl.Temp = &t
	case "set-tool-cap":
		if e.N == nil || *e.N < 0 {
			return false, false
		}
		n := *e.N
		changed = ctl.ToolCap == nil || *ctl.ToolCap != n
		ctl.ToolCap = &n
	default:
		return false, false
	}
	return true, changed
}

// satAdd is a+b for non-negative a and b, at most math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
