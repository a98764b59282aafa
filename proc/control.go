package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// Deliberable runs (seed 002; docs/runs.md). Every step boundary of a run
// (before a model call that follows tool results) is a checkpoint,
// numbered per run. A checkpoint applies what waits for it (a directive
// sent before it was reached, steering messages) and parks the run only
// when something asks for a decision: a budget spent, a stop requested,
// a supervised process. A parked run waits for the first directive for
// its checkpoint (first wins: the store's primary key on (run,
// checkpoint) decides), or, where it may, continues by itself after its
// grace (soft-continue). A parked checkpoint is durable: after a restart
// the run parks at it again.

const (
	// defaultGrace is how long a parked checkpoint waits before it
	// continues by itself.
	defaultGrace = 5 * time.Second
	// runVisible is how long a finished run stays visible in
	// proc.run.get.
	runVisible = 5 * time.Minute
)

// runCtl is a process's run settings and what its runs have spent,
// stored in proc_run_control. Its fields are guarded by the process's mu.
type runCtl struct {
	loaded    bool
	Budget    abi.RunBudget `json:"budget"`
	Supervise bool          `json:"supervise"`
	GraceMs   int64         `json:"graceMs"`
	CheckinMs int64         `json:"checkinMs"`
	Stop      bool          `json:"stop"`
	Model     string        `json:"model,omitempty"`
	Temp      *float64      `json:"temp,omitempty"`
	ToolCap   *int64        `json:"toolCap,omitempty"`
	Used      abi.RunUsage  `json:"used"`
}

// grace is the settings' grace.
func (c *runCtl) grace() time.Duration {
	if c.GraceMs > 0 {
		return time.Duration(c.GraceMs) * time.Millisecond
	}
	return defaultGrace
}

// exhausted names the budget dimension spent (counting the elapsed time
// of the run under way), "" if none.
func (c *runCtl) exhausted(running time.Duration) string {
	b, u := c.Budget, c.Used
	switch {
	case b.USD > 0 && u.USD >= b.USD:
		return "usd"
	case b.Tokens > 0 && u.TokensIn+u.TokensOut >= b.Tokens:
		return "tokens"
	case b.Turns > 0 && u.Turns >= b.Turns:
		return "turns"
	case b.TimeMs > 0 && u.TimeMs+running.Milliseconds() >= b.TimeMs:
		return "time"
	}
	return ""
}

// runCheck is the part of an active run its checkpoints keep (guarded by
// the process's mu).
type runCheck struct {
	seq       int64
	steps     int
	started   time.Time
	tokIn     int64
	tokOut    int64
	cost      float64
	toolCalls int
	lastTool  string
	parked    *abi.RunCheckpoint
	decide    chan abi.Directive // a parked checkpoint's decision
	pending   map[int64]bool     // checkpoints decided before they were reached (their effects are applied)
	resume    string             // the reason of a checkpoint to park at again after a restart
	restored  bool               // the run was under way before a restart (resume)
}

// control returns pr's run settings, loaded on first use; pr.mu is held.
func (m *Manager) controlLocked(ctx context.Context, pr *process) *runCtl {
	if pr.ctl != nil && pr.ctl.loaded {
		return pr.ctl
	}
	c := &runCtl{}
	var raw string
	err := m.st.QueryRowContext(ctx, `SELECT settings FROM proc_run_control WHERE pid=?`, pr.pid).Scan(&raw)
	if err == nil {
		if jerr := json.Unmarshal([]byte(raw), c); jerr != nil {
			m.log.Error("proc: run settings do not parse", "pid", pr.pid, "err", jerr)
		}
	} else if !errors.Is(err, sql.ErrNoRows) {
		m.log.Error("proc: run settings", "pid", pr.pid, "err", err)
	}
	c.loaded = true
	pr.ctl = c
	return c
}

// storeControl stores pr's settings as they are when it writes: saves
// of one process are serialized (pr.saveMu) and each writes the latest
// state, so that a save never overwrites a newer one. pr.mu must not be
// held.
func (m *Manager) storeControl(ctx context.Context, pr *process) error {
	pr.saveMu.Lock()
	defer pr.saveMu.Unlock()
	pr.mu.Lock()
	c := *m.controlLocked(ctx, pr)
	pr.mu.Unlock()
	return m.saveControl(ctx, pr.pid, c)
}

// saveControl stores settings c of process pid.
func (m *Manager) saveControl(ctx context.Context, pid string, c runCtl) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = m.st.Exec(ctx, `INSERT INTO proc_run_control(pid,settings) VALUES(?,?) ON CONFLICT(pid) DO UPDATE SET settings=excluded.settings`, pid, string(b))
	return err
}

// checkBudget checks a budget's values.
func checkBudget(b *abi.RunBudget) error {
	if b == nil {
		return nil
	}
	if err := abi.Finite("budget.usd", b.USD); err != nil {
		return err
	}
	if b.USD < 0 || b.Tokens < 0 || b.Turns < 0 || b.TimeMs < 0 {
		return abi.E(abi.Invalid, "budget: a limit may not be negative")
	}
	switch b.OnExhaust {
	case "", "pause", "abort":
	default:
		return abi.E(abi.Invalid, fmt.Sprintf("budget.onExhaust %q: want pause or abort", b.OnExhaust))
	}
	return nil
}

// maxGraceMs bounds a process's grace and its check-in time: a day.
const maxGraceMs = 24 * 3600 * 1000

// checkRunControl checks the values of a proc.run.control before any of
// them changes anything.
func checkRunControl(a *abi.RunControlArgs) error {
	if err := checkBudget(a.Budget); err != nil {
		return err
	}
	if a.GraceMs != nil && (*a.GraceMs < 0 || *a.GraceMs > maxGraceMs) {
		return abi.E(abi.Invalid, "graceMs: 0 to 24 h")
	}
	if a.CheckinMs != nil && (*a.CheckinMs < 0 || *a.CheckinMs > maxGraceMs) {
		return abi.E(abi.Invalid, "checkinMs: 0 to 24 h")
	}
	if a.Stop && a.Start {
		return abi.E(abi.Invalid, "stop or start, not both")
	}
	return nil
}

// applyRunControl changes the settings ctl as a (checked by
// checkRunControl) says.
func applyRunControl(ctl *runCtl, a *abi.RunControlArgs) {
	if a.Supervise != nil {
		ctl.Supervise = *a.Supervise
	}
	if a.GraceMs != nil {
		ctl.GraceMs = *a.GraceMs
	}
	if a.CheckinMs != nil {
		ctl.CheckinMs = *a.CheckinMs
	}
	if a.Budget != nil {
		ctl.Budget = *a.Budget
	}
	if a.Stop {
		ctl.Stop = true
	}
	if a.Start {
		ctl.Stop = false
	}
}

// sysRunControl serves proc.run.control: it changes a process's run
// settings; stop asks its run to park at its next checkpoint and stay
// parked (with wait, it returns once parked, or when the caller goes);
// start ends a stop, and a parked run continues.
func (m *Manager) sysRunControl(ctx context.Context, c *kernel.Caller, a *abi.RunControlArgs) (*abi.RunInfo, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	if err := checkRunControl(a); err != nil {
		return nil, err
	}
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	applyRunControl(m.controlLocked(ctx, pr), a)
	var parked *abi.RunCheckpoint
	var r *activeRun
	if pr.run != nil {
		r = pr.run
		parked = r.check.parked
	}
	waitParked := pr.parkedCh()
	pr.mu.Unlock()
	if err := m.storeControl(ctx, pr); err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	m.changes.Touch(p.Pid + "/run")
	if a.Start && parked != nil {
		if _, err := m.decide(ctx, p, pr, r, parked.Seq, abi.Directive{Type: "continue"}, "start"); err != nil && abi.KindOf(err) != abi.Busy {
			return nil, err
		}
	}
	if a.Stop && a.Wait && parked == nil && r != nil {
		select {
		case <-waitParked:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return m.runInfo(ctx, p)
}

// parkedCh returns a channel closed when a run of pr next parks (pr.mu
// held).
func (pr *process) parkedCh() chan struct{} {
	if pr.parkWait == nil {
		pr.parkWait = make(chan struct{})
	}
	return pr.parkWait
}

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
func (m *Manager) sysDirective(ctx context.Context, c *kernel.Caller, a *abi.DirectiveArgs) (*abi.DirectiveResult, error) {
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
			var run string
			err := m.st.QueryRowContext(ctx, `SELECT run_id FROM proc_runs WHERE pid=? ORDER BY started_at DESC, rowid DESC LIMIT 1`, p.Pid).Scan(&run)
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
func (m *Manager) decideAhead(ctx context.Context, c *kernel.Caller, pr *process, r *activeRun, seq int64, d abi.Directive) (*abi.DirectiveResult, error) {
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
func (m *Manager) passedCheckpoint(ctx context.Context, p *abi.Process, run string, seq int64) (*abi.DirectiveResult, error) {
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
func (m *Manager) decide(ctx context.Context, p *abi.Process, pr *process, r *activeRun, seq int64, d abi.Directive, how string) (*abi.DirectiveResult, error) {
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
func (m *Manager) recordDirective(ctx context.Context, run string, seq int64, d abi.Directive, how string) (bool, error) {
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
func (m *Manager) applyEffects(ctx context.Context, pr *process, r *activeRun, effects []json.RawMessage) []string {
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
func (m *Manager) applySettingsLocked(ctx context.Context, pr *process, effects []json.RawMessage) (applied []string, inject []abi.Effect) {
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

// atCheckpoint is checkpoint r.check.seq+1 of run r, before a model call
// (first: the run's first, which parks only for a budget or a stop). It
// applies the directive decided for it and the steering messages, then
// parks if a decision is asked for. It returns "aborted" when the run is
// to end.
func (m *Manager) atCheckpoint(ctx context.Context, pr *process, r *activeRun, first bool) (string, error) {
	pr.mu.Lock()
	ctl := m.controlLocked(ctx, pr)
	// The first model call of a run is a checkpoint only if it parks
	// (a budget spent, a stop): its number is taken then.
	seq := r.check.seq + 1
	decided := false // by a directive sent before it was reached, whose effects are applied
	if !first || r.check.resume != "" {
		r.check.seq = seq
		decided = r.check.pending[seq]
		delete(r.check.pending, seq)
	}
	steer := pr.steer
	pr.steer = 0
	resumeReason := r.check.resume
	r.check.resume = ""
	pr.mu.Unlock()
	if steer > 0 {
		if err := m.injectSteer(ctx, pr, r); err != nil {
			return "", err
		}
	}
	if ctx.Err() != nil {
		return "aborted", nil
	}
	pr.mu.Lock()
	reason, soft := resumeReason, resumeReason == "supervised"
	if reason == "" {
		switch spent := ctl.exhausted(time.Since(r.check.started)); {
		case spent != "":
			if ctl.Budget.OnExhaust == "abort" {
				pr.mu.Unlock()
				m.processEvent(ctx, pr, r, "budget spent ("+spent+"): the run is aborted")
				return "aborted", nil
			}
			reason = "budget"
		case ctl.Stop:
			reason = "stop"
		case ctl.Supervise && !first:
			reason, soft = "supervised", true
		}
	}
	grace := ctl.grace()
	if reason != "" && r.check.seq < seq {
		r.check.seq = seq
		decided = r.check.pending[seq]
		delete(r.check.pending, seq)
	}
	pr.mu.Unlock()
	if reason == "" || decided {
		return "", nil // nothing to ask, or decided before it was reached
	}
	return m.park(ctx, pr, r, seq, reason, soft, grace, nil)
}

// park parks r at checkpoint seq until it is decided: a directive, a
// start, or (soft) its grace passing; the caller going (an abort, Close)
// ends the run.
func (m *Manager) park(ctx context.Context, pr *process, r *activeRun, seq int64, reason string, soft bool, grace time.Duration, until <-chan struct{}) (string, error) {
	pr.mu.Lock()
	cp := &abi.RunCheckpoint{Seq: seq, Reason: reason, ParkedAt: now(), Snapshot: r.check.snapshot(reason)}
	if soft {
		t := cp.ParkedAt + grace.Milliseconds()
		cp.SoftContinueAt = &t
	}
	decide := make(chan abi.Directive, 1)
	r.check.parked, r.check.decide = cp, decide
	if pr.parkWait != nil {
		close(pr.parkWait)
		pr.parkWait = nil
	}
	pr.mu.Unlock()
	snap, _ := json.Marshal(cp)
	if _, err := m.st.Exec(ctx, `UPDATE proc_runs SET checkpoint=?, park=? WHERE run_id=?`, seq, string(snap), r.id); err != nil && ctx.Err() == nil {
		return "", err
	}
	if err := m.storeControl(context.WithoutCancel(ctx), pr); err != nil {
		m.log.Error("proc: save run settings", "pid", pr.pid, "err", err)
	}
	state := abi.RunPaused
	if soft {
		state = abi.RunAwaitingDecision
	}
	signal(m, pr.uid, abi.SigProcRunCheckpoint, abi.RunCheckpointed{Pid: pr.pid, RunID: r.id, Seq: seq, Reason: reason, Snapshot: cp.Snapshot,
		SoftContinueAt: cp.SoftContinueAt, State: state})
	var timer <-chan time.Time
	if soft {
		t := time.NewTimer(grace)
		defer t.Stop()
		timer = t.C
	}
	how := "directive"
	select {
	case <-decide:
	case <-until:
		won, err := m.recordDirective(context.WithoutCancel(ctx), r.id, seq, abi.Directive{Type: "continue"}, "tool-finished")
		if err != nil {
			return "", err
		}
		how = "tool-finished"
		if !won {
			select {
			case <-decide:
				how = "directive"
			case <-ctx.Done():
				return "aborted", nil
			}
		}
	case <-timer:
		won, err := m.recordDirective(context.WithoutCancel(ctx), r.id, seq, abi.Directive{Type: "continue"}, "soft-continue")
		if err != nil {
			return "", err
		}
		how = "soft-continue"
		if !won { // a directive came first: it is on its way
			select {
			case <-decide:
				how = "directive"
			case <-ctx.Done():
				return "aborted", nil
			}
		}
	case <-ctx.Done():
		return "aborted", nil
	}
	pr.mu.Lock()
	r.check.parked, r.check.decide = nil, nil
	pr.mu.Unlock()
	if _, err := m.st.Exec(ctx, `UPDATE proc_runs SET park=NULL WHERE run_id=?`, r.id); err != nil && ctx.Err() == nil {
		return "", err
	}
	signal(m, pr.uid, abi.SigProcRunResumed, abi.RunResumed{Pid: pr.pid, RunID: r.id, Seq: seq, How: how})
	if ctx.Err() != nil {
		return "aborted", nil
	}
	return "", nil
}

// snapshot is the run's state at a checkpoint (pr.mu held).
func (c *runCheck) snapshot(reason string) abi.CheckpointSnapshot {
	desc := map[string]string{
		"budget":       "a budget is spent: extend it to continue",
		"stop":         "stopped as asked: start or direct it to continue",
		"supervised":   "supervised: continues by itself after its grace",
		"tool-checkin": "a tool call runs past its check-in time; it keeps running",
	}[reason]
	return abi.CheckpointSnapshot{ElapsedMs: time.Since(c.started).Milliseconds(), Steps: c.steps, TokensIn: c.tokIn, TokensOut: c.tokOut,
		CostUSD: c.cost, ToolCalls: c.toolCalls, LastTool: c.lastTool, Description: desc}
}

// account adds a model call's usage to r and its process.
func (m *Manager) account(ctx context.Context, pr *process, r *activeRun, in, out int64, usd float64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	ctl := m.controlLocked(ctx, pr)
	ctl.Used.Turns++
	ctl.Used.TokensIn += in
	ctl.Used.TokensOut += out
	ctl.Used.USD += usd
	r.check.steps++
	r.check.tokIn += in
	r.check.tokOut += out
	r.check.cost += usd
}

// runEndedControl adds the run's wall time to the process's and stores
// the settings (the run's usage included).
func (m *Manager) runEndedControl(pr *process, r *activeRun) {
	if r.check.started.IsZero() {
		return
	}
	ctl := m.controlLocked(context.Background(), pr)
	ctl.Used.TimeMs += time.Since(r.check.started).Milliseconds()
	m.background(func() { // off the process's lock; the manager owns it
		if err := m.storeControl(context.Background(), pr); err != nil {
			m.log.Error("proc: save run settings", "pid", pr.pid, "err", err)
		}
	})
}

// injectSteer moves the steering messages waiting for pr's run into its
// conversation, in order, as the messages they are; the narrowing each
// carries narrows the conversation before its text enters.
func (m *Manager) injectSteer(ctx context.Context, pr *process, r *activeRun) error {
	rows, err := m.st.QueryContext(ctx, `SELECT id,message,role,process_cap FROM proc_queue WHERE pid=? AND mode='steer' ORDER BY id`, pr.pid)
	if err != nil {
		return err
	}
	type steer struct {
		id         int64
		text, role string
		cap        sql.NullString
	}
	var ss []steer
	for rows.Next() {
		var s steer
		if err := rows.Scan(&s.id, &s.text, &s.role, &s.cap); err != nil {
			rows.Close()
			return err
		}
		ss = append(ss, s)
	}
	rows.Close()
	for _, s := range ss {
		if err := m.st.Tx(ctx, func(tx *sql.Tx) error {
			if _, err := m.st.TxExec(tx, `DELETE FROM proc_queue WHERE id=?`, s.id); err != nil {
				return err
			}
			return m.narrowConvTx(tx, pr.pid, r.cid, r.gen, capOf(s.cap))
		}); err != nil {
			return err
		}
		if _, err := m.appendGuarded(ctx, pr.pid, r, s.role, jsonString(s.text)); err != nil {
			return err
		}
	}
	return nil
}

// runInfo is p's run as proc.run.get shows it.
func (m *Manager) runInfo(ctx context.Context, p *abi.Process) (*abi.RunInfo, error) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	ctl := *m.controlLocked(ctx, pr)
	info := &abi.RunInfo{Pid: p.Pid, State: abi.RunIdle, Budget: ctl.Budget, Used: ctl.Used, Supervise: ctl.Supervise,
		GraceMs: ctl.grace().Milliseconds(), StopRequested: ctl.Stop, Model: ctl.Model, Temperature: ctl.Temp, ToolCap: ctl.ToolCap}
	live := false
	if r := pr.run; r != nil {
		live = true
		info.RunID, info.ConversationID, info.Step, info.Checkpoint = r.id, r.cid, r.check.steps, r.check.seq
		info.State = abi.RunRunning
		if pr.state == waiting || r.blockAsks.Load() > 0 {
			info.State = abi.RunWaitingHil
		}
		if cp := r.check.parked; cp != nil {
			c := *cp
			info.Pending = &c
			info.State = abi.RunPaused
			if cp.SoftContinueAt != nil {
				info.State = abi.RunAwaitingDecision
			}
		}
		if !r.check.started.IsZero() {
			info.StartedAt = r.check.started.UnixMilli()
			info.Used.TimeMs += time.Since(r.check.started).Milliseconds()
		}
	}
	pr.mu.Unlock()
	if live {
		if info.State == abi.RunWaitingHil {
			h, err := m.pendingHil(ctx, p.Pid)
			if err != nil {
				return nil, abi.E(abi.Path(p.Pid), err)
			}
			info.Hil = h
		}
		return info, nil
	}
	var run, cid, status string
	var started int64
	var fin sql.NullInt64
	var errText sql.NullString
	err := m.st.QueryRowContext(ctx, `SELECT run_id,cid,status,started_at,finished_at,error FROM proc_runs WHERE pid=? ORDER BY started_at DESC, rowid DESC LIMIT 1`, p.Pid).
		Scan(&run, &cid, &status, &started, &fin, &errText)
	if errors.Is(err, sql.ErrNoRows) {
		return info, nil
	}
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	if fin.Valid && time.Since(time.UnixMilli(fin.Int64)) < runVisible {
		info.RunID, info.ConversationID, info.StartedAt, info.Error = run, cid, started, errText.String
		f := fin.Int64
		info.FinishedAt = &f
		switch status {
		case "done":
			info.State = abi.RunCompleted
		case "aborted":
			info.State = abi.RunAborted
		default:
			info.State = abi.RunFailed
		}
		var n int64
		m.st.QueryRowContext(ctx, `SELECT coalesce(checkpoint,0) FROM proc_runs WHERE run_id=?`, run).Scan(&n)
		info.Checkpoint = n
	}
	return info, nil
}

// sysRunGet serves proc.run.get.
func (m *Manager) sysRunGet(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.RunInfo, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	return m.runInfo(ctx, p)
}

// sysRunList serves proc.run.list: the runs under way or parked of the
// caller's processes (root: Uid's, or all).
func (m *Manager) sysRunList(ctx context.Context, c *kernel.Caller, a *abi.RunListArgs) (*abi.RunListResult, error) {
	where, args := `WHERE state<>'idle' AND uid=?`, []any{c.Uid}
	if c.IsRoot() {
		where, args = `WHERE state<>'idle'`, nil
		if a.Uid != nil {
			where, args = `WHERE state<>'idle' AND uid=?`, []any{*a.Uid}
		}
	}
	ps, err := m.listWhere(ctx, where, args...)
	if err != nil {
		return nil, err
	}
	out := &abi.RunListResult{Runs: []abi.RunInfo{}}
	for i := range ps {
		info, err := m.runInfo(ctx, &ps[i])
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, *info)
	}
	return out, nil
}

// restoreCheck readies r's checkpoints when its goroutine starts: the
// start time, and, for a run under way before a restart, its last
// checkpoint and the one to park at again (read from the store only
// then: a new run has none).
func (m *Manager) restoreCheck(ctx context.Context, pr *process, r *activeRun) error {
	pr.mu.Lock()
	fresh := r.check.started.IsZero()
	if fresh {
		r.check.started = time.Now()
	}
	restored := r.check.restored
	pr.mu.Unlock()
	if !fresh || !restored {
		return nil
	}
	var seq int64
	var park sql.NullString
	if err := m.st.QueryRowContext(ctx, `SELECT checkpoint,park FROM proc_runs WHERE run_id=?`, r.id).Scan(&seq, &park); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	resume := ""
	if park.Valid {
		var cp abi.RunCheckpoint
		if json.Unmarshal([]byte(park.String), &cp) == nil && cp.Seq > 0 {
			seq, resume = cp.Seq-1, cp.Reason
		}
	}
	// The checkpoints decided before they were reached (their effects
	// were applied then), and the steering messages waiting: a delivery
	// survives the restart.
	decided := map[int64]bool{}
	rows, err := m.st.QueryContext(ctx, `SELECT seq FROM proc_directives WHERE run_id=? AND seq>?`, r.id, seq)
	if err != nil {
		return err
	}
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		decided[n] = true
	}
	rows.Close()
	var steer int
	if err := m.st.QueryRowContext(ctx, `SELECT count(*) FROM proc_queue WHERE pid=? AND mode='steer'`, pr.pid).Scan(&steer); err != nil {
		return err
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	r.check.seq, r.check.resume = seq, resume
	r.check.pending = decided
	pr.steer = max(pr.steer, steer)
	return nil
}

// toolCapped answers tool call c without running it when the process's
// tool cap is spent, and counts it down otherwise.
func (m *Manager) toolCapped(ctx context.Context, pr *process, r *activeRun, c model.ToolCall) (bool, error) {
	pr.mu.Lock()
	ctl := m.controlLocked(ctx, pr)
	capped := ctl.ToolCap != nil && *ctl.ToolCap <= 0
	if !capped {
		if ctl.ToolCap != nil {
			n := *ctl.ToolCap - 1
			ctl.ToolCap = &n
		}
		r.check.toolCalls++
		r.check.lastTool = c.Name
	}
	pr.mu.Unlock()
	if !capped {
		return false, nil
	}
	b, err := json.Marshal(toolResultContent{ToolCallID: c.ID, ToolName: c.Name, Output: "not run: the tool cap set by the manager is spent", IsError: true})
	if err != nil {
		return true, err
	}
	_, err = m.appendGuarded(ctx, pr.pid, r, "toolResult", b)
	return true, err
}

// sendMidRun is proc.send of a message in mode steer or interrupt to p
// while a run is under way (done false when none is: the message then
// starts a run as any other). steer: the message waits in the queue
// (mode 'steer') for the run's next checkpoint, which moves it into the
// run's conversation. interrupt: the message goes first in the queue and
// the run is aborted, so that it runs next.
func (m *Manager) sendMidRun(ctx context.Context, c *kernel.Caller, p *abi.Process, a *abi.SendArgs, ev Event) (*abi.SendResult, bool, error) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	r := pr.run
	var cid string
	if r != nil {
		cid = r.cid
	}
	pr.mu.Unlock()
	if r == nil {
		return nil, false, nil
	}
	if strings.TrimSpace(ev.Text) == "" {
		return nil, true, abi.E(abi.Path(p.Pid), abi.Invalid, "empty message")
	}
	role, text := "user", ev.Text
	if ev.Runtime {
		role, text = "system", EventPrefix+text
	}
	meta := eventMeta(ev)
	runID := newID("run_")
	if a.Mode == "steer" {
		if a.ConversationID != "" && a.ConversationID != cid {
			return nil, true, abi.E(abi.Path(p.Pid), abi.Invalid, fmt.Sprintf("the run under way is in conversation %s: steer it there", cid))
		}
		res, err := m.st.Exec(ctx, `INSERT INTO proc_queue(pid,cid,generation,run_id,message,role,created_at,kind,source,trace_id,process_cap,mode)
			SELECT ?,?,generation,?,?,?,?,?,?,?,?,'steer' FROM proc_conversations WHERE pid=? AND cid=?`,
			p.Pid, cid, runID, text, role, now(), meta.kind, meta.source, meta.trace, meta.cap, p.Pid, cid)
		if err == nil {
			err = oneRow(res, p.Pid+"/"+cid)
		}
		if err != nil {
			return nil, true, abi.E(abi.Path(p.Pid), err)
		}
		pr.mu.Lock()
		pr.steer++
		pr.mu.Unlock()
		return &abi.SendResult{OK: true, Status: "steered", RunID: r.id, Queued: true}, true, nil
	}
	tcid := orDefault(a.ConversationID)
	res, err := m.st.Exec(ctx, `INSERT INTO proc_queue(id,pid,cid,generation,run_id,message,role,created_at,kind,source,trace_id,process_cap)
		SELECT (SELECT coalesce(min(id),1)-1 FROM proc_queue),?,?,generation,?,?,?,?,?,?,?,? FROM proc_conversations WHERE pid=? AND cid=? AND status='open'`,
		p.Pid, tcid, runID, text, role, now(), meta.kind, meta.source, meta.trace, meta.cap, p.Pid, tcid)
	if err == nil {
		err = oneRow(res, p.Pid+"/"+tcid)
	}
	if err != nil {
		return nil, true, abi.E(abi.Path(p.Pid), err)
	}
	m.routes.add(runID, c)
	if _, err := m.Abort(ctx, p); err != nil {
		return nil, true, err
	}
	return &abi.SendResult{OK: true, Status: "started", RunID: runID}, true, nil
}

// oneRow is a 404 for an INSERT ... SELECT that found no open
// conversation at what.
func oneRow(res sql.Result, what string) error {
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	return abi.E(abi.Path(what), abi.NotExist, "no such open conversation")
}

// budgetPrompt tells the model its process's budget, if it has one: what
// is spent of each limit.
func (m *Manager) budgetPrompt(ctx context.Context, b *strings.Builder, p *abi.Process) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	ctl := *m.controlLocked(ctx, pr)
	pr.mu.Unlock()
	bu, u := ctl.Budget, ctl.Used
	var parts []string
	if bu.USD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f of $%.4f", u.USD, bu.USD))
	}
	if bu.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d tokens", u.TokensIn+u.TokensOut, bu.Tokens))
	}
	if bu.Turns > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d turns", u.Turns, bu.Turns))
	}
	if bu.TimeMs > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s", time.Duration(u.TimeMs)*time.Millisecond, time.Duration(bu.TimeMs)*time.Millisecond))
	}
	if len(parts) > 0 {
		fmt.Fprintf(b, "Budget: %s spent. When a limit is reached the run waits for its manager.\n", strings.Join(parts, ", "))
	}
}

// runToolCheckin is runTool, with the process's tool check-in: a tool
// call that runs past CheckinMs makes the run check in at a checkpoint
// (reason "tool-checkin") while the tool keeps running. The checkpoint
// is decided by a directive (an abort ends the run and the tool with
// it), by its grace, or by the tool's end, whichever comes first; the
// run then waits for the tool as before.
func (m *Manager) runToolCheckin(ctx context.Context, pr *process, r *activeRun, p *abi.Process, caller *kernel.Caller, c model.ToolCall) (bool, error) {
	pr.mu.Lock()
	ctl := m.controlLocked(ctx, pr)
	checkin, grace := time.Duration(ctl.CheckinMs)*time.Millisecond, ctl.grace()
	pr.mu.Unlock()
	if checkin <= 0 {
		return m.runTool(ctx, pr, r, p, caller, c)
	}
	type outcome struct {
		waiting bool
		err     error
	}
	done := make(chan outcome, 1)
	finished := make(chan struct{})
	go func() {
		w, err := m.runTool(ctx, pr, r, p, caller, c)
		done <- outcome{w, err}
		close(finished)
	}()
	t := time.NewTimer(checkin)
	defer t.Stop()
	select {
	case o := <-done:
		return o.waiting, o.err
	case <-t.C:
	}
	pr.mu.Lock()
	r.check.seq++
	seq := r.check.seq
	pr.mu.Unlock()
	if _, err := m.park(ctx, pr, r, seq, "tool-checkin", true, grace, finished); err != nil {
		<-done
		return false, err
	}
	o := <-done // the tool ends (an abort cancels it)
	return o.waiting, o.err
}
