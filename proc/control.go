package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
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
	// Tools narrows the agent's tools to these (a package profile's);
	// empty: all of them.
	Tools []string     `json:"tools,omitempty"`
	Used  abi.RunUsage `json:"used"`
	// Models is the usage per provider and model (proc.cost).
	Models []abi.ModelUsage `json:"models,omitempty"`
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
func (m *engine) controlLocked(ctx context.Context, pr *process) *runCtl {
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
func (m *engine) storeControl(ctx context.Context, pr *process) error {
	pr.saveMu.Lock()
	defer pr.saveMu.Unlock()
	pr.mu.Lock()
	c := *m.controlLocked(ctx, pr)
	c.Models = slices.Clone(c.Models) // account adds to the settings' own in place
	pr.mu.Unlock()
	return m.saveControl(ctx, pr.pid, c)
}

// saveControl stores settings c of process pid.
func (m *engine) saveControl(ctx context.Context, pid string, c runCtl) error {
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
func (m *engine) sysRunControl(ctx context.Context, c *kernel.Caller, a *abi.RunControlArgs) (*abi.RunInfo, error) {
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
	m.touch(p.Pid + "/run")
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

// account adds a model call's usage to r and its process.
func (m *engine) account(ctx context.Context, pr *process, r *activeRun, mc modelCall) {
	in, out := mc.in, mc.out
	// The budget counts what /proc/<pid>/cost shows: the table's price,
	// else the provider's report.
	usd, known := m.priceCall(ctx, mc)
	u := abi.RunUsageSignal{Pid: pr.pid, RunID: r.id, ConversationID: r.cid, Provider: mc.provider, Model: mc.model,
		TokensIn: in, TokensOut: out, DurationMs: mc.took.Milliseconds(), TraceID: r.trace}
	if known {
		u.Cost = &usd
	}
	signal(m, pr.uid, abi.SigProcRunUsage, u)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	ctl := m.controlLocked(ctx, pr)
	addModelUsage(ctl, mc)
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
func (m *engine) runEndedControl(pr *process, r *activeRun) {
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

// runInfo is p's run as proc.run.get shows it.
func (m *engine) runInfo(ctx context.Context, p *abi.Process) (*abi.RunInfo, error) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	ctl := *m.controlLocked(ctx, pr)
	info := &abi.RunInfo{Pid: p.Pid, State: abi.RunIdle, Budget: ctl.Budget, Used: ctl.Used, Supervise: ctl.Supervise,
		GraceMs: ctl.grace().Milliseconds(), StopRequested: ctl.Stop, Model: ctl.Model, Temperature: ctl.Temp, ToolCap: ctl.ToolCap,
		Tools: slices.Clone(ctl.Tools)}
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
	err := m.st.QueryRowContext(ctx, `SELECT run_id,cid,status,started_at,finished_at,error FROM proc_runs WHERE pid=? ORDER BY started_at DESC, first_message DESC LIMIT 1`, p.Pid).
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
func (m *engine) sysRunGet(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.RunInfo, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	return m.runInfo(ctx, p)
}

// sysRunList serves proc.run.list: the runs under way or parked of the
// caller's processes (root: Uid's, or all).
func (m *engine) sysRunList(ctx context.Context, c *kernel.Caller, a *abi.RunListArgs) (*abi.RunListResult, error) {
	uid := &c.Uid
	if c.IsRoot() {
		uid = a.Uid
	}
	ps, err := m.running(ctx, uid)
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
func (m *engine) budgetPrompt(ctx context.Context, b *strings.Builder, p *abi.Process) {
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
