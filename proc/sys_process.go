package proc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// The proc.* syscalls on processes: list, status, spawn, send, abort,
// hil, kill, reset (the conversation calls are sys_conv.go's, the
// checkpoint checkpoint.go's).

// profiles are the process profiles proc.profile.list shows and
// proc.spawn takes.
var profiles = []abi.Profile{
	{ID: "init", Kind: "system", DisplayName: "Init", Description: "The user's long-lived home process.", Interactive: true, SpawnMode: "singleton"},
	{ID: "task", Kind: "system", DisplayName: "Task", Description: "A process for one piece of work.", Interactive: true, Startable: true, Background: true, SpawnMode: "new"},
	{ID: "review", Kind: "system", DisplayName: "Review", Description: "Reviews work and reports findings.", Interactive: true, Startable: true, Background: true, SpawnMode: "new"},
	{ID: "cron", Kind: "system", DisplayName: "Cron", Description: "Runs scheduled work.", Startable: true, Background: true, SpawnMode: "new"},
}

// sysList serves proc.list: the caller's processes; root's are everyone's,
// or one user's (Uid). Only root may list another user's.
func (m *Manager) sysList(ctx context.Context, c *kernel.Caller, a *abi.ListArgs) (*abi.ProcListResult, error) {
	where, args := "WHERE uid=?", []any{c.Uid}
	if c.IsRoot() {
		where, args = "", nil
		if a.Uid != nil {
			where, args = "WHERE uid=?", []any{*a.Uid}
		}
	} else if a.Uid != nil && *a.Uid != c.Uid {
		return nil, abi.E(abi.Permission, "only root may list another user's processes")
	}
	ps, err := m.listWhere(ctx, where, args...)
	if err != nil {
		return nil, err
	}
	return &abi.ProcListResult{Processes: ps}, nil
}

// sysGet serves proc.get (Internal): the namespace's lookup of a process
// record.
func (m *Manager) sysGet(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.Process, error) {
	return m.lookup(ctx, c, a.Pid)
}

// sysStatus serves proc.status (ours): what /proc/<pid>/status shows.
func (m *Manager) sysStatus(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.StatusResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	st, err := m.status(ctx, p)
	if err != nil {
		return nil, err
	}
	return &abi.StatusResult{OK: true, Pid: p.Pid, Status: *st}, nil
}

// status is proc.status's record of p.
func (m *Manager) status(ctx context.Context, p *abi.Process) (*abi.ProcStatusRecord, error) {
	user := ""
	if u, _ := m.k.UserOf(ctx, p.Uid); u != nil {
		user = u.Username
	}
	str := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	pr := m.run.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	run, state := "-", pr.state.String()
	if pr.run != nil {
		run = pr.run.id
	}
	pr.mu.Unlock()
	var queued int
	if err := m.st.QueryRowContext(ctx, `SELECT count(*) FROM proc_queue WHERE pid=?`, p.Pid).Scan(&queued); err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	return &abi.ProcStatusRecord{Pid: p.Pid, Uid: p.Uid, User: user, Profile: p.Profile, Label: str(p.Label), Mcp: abi.McpServerList(p.McpServers),
		Parent: str(p.ParentPid), State: state, Run: run, Queued: queued, Cwd: p.Cwd,
		Workspace: str(p.WorkspaceID), Created: time.UnixMilli(p.CreatedAt).UTC().Format(time.RFC3339)}, nil
}

// sysEvents serves proc.events (Internal): a process's signal stream,
// from now. Its result is a live subscription, which only the namespace
// can serve.
func (m *Manager) sysEvents(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (abi.EventStream, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	pid := p.Pid
	// chat.delta repeats proc.run.stream for clients (/sys/events): the
	// process's own stream carries the latter only.
	return m.k.Subscribe(c.Identity, func(ev *kernel.Event) bool {
		return ev.Pid == pid && ev.Signal != abi.SigChatDelta.Name
	}), nil
}

// sysProfiles serves proc.profile.list.
// It lists the system's profiles, then those of the caller's active
// packages (pkg.profiles; none when the package room is not there).
func (m *Manager) sysProfiles(ctx context.Context, c *kernel.Caller, _ *abi.ProfileListArgs) (*abi.ProfileList, error) {
	out := slices.Clone(profiles)
	if ps, err := kernel.Do(ctx, m.k, c, abi.PkgProfiles, &struct{}{}); err == nil {
		out = append(out, ps...)
	}
	return &abi.ProfileList{Profiles: out}, nil
}

// packageProfile is the profile id of one of the caller's active
// packages (pkg.profile), its prompt and context files made the spawn's
// assignment's first files and its budget the default: nil when there
// is none (or no package room).
func (m *Manager) packageProfile(ctx context.Context, c *kernel.Caller, a *abi.SpawnArgs) (*abi.Profile, error) {
	res, err := kernel.Do(ctx, m.k, c, abi.PkgProfileGet, &abi.PkgProfileArgs{ID: a.Profile})
	if err != nil {
		if k := abi.KindOf(err); k == abi.NotExist || k == abi.Invalid {
			return nil, nil
		}
		return nil, err
	}
	if len(res.ContextFiles) > 0 {
		as := abi.Assignment{}
		if a.Assignment != nil {
			as = *a.Assignment
		}
		as.ContextFiles = append(slices.Clone(res.ContextFiles), as.ContextFiles...)
		a.Assignment = &as
	}
	if a.Budget == nil && res.Budget != nil {
		b := *res.Budget
		a.Budget = &b
	}
	return &res.Profile, nil
}

// sysSpawn serves proc.spawn: a new process of a startable profile (the
// init profile's is the caller's init process), owned by the caller, in
// their home, with a first message when Prompt is set.
func (m *Manager) sysSpawn(ctx context.Context, c *kernel.Caller, a *abi.SpawnArgs) (*abi.SpawnResult, error) {
	var prof *abi.Profile
	for i := range profiles {
		if profiles[i].ID == a.Profile {
			prof = &profiles[i]
		}
	}
	if prof == nil {
		var err error
		if prof, err = m.packageProfile(ctx, c, a); err != nil {
			return nil, err
		}
	}
	if prof == nil {
		return nil, abi.E(abi.Path(a.Profile), abi.Invalid, "unknown profile (see proc.profile.list)")
	}
	if err := kernel.CheckText("label", a.Label, kernel.MaxLabel); err != nil {
		return nil, err
	}
	if err := a.Workspace.Check(); err != nil {
		return nil, err
	}
	if err := a.Assignment.Check(); err != nil {
		return nil, err
	}
	if err := abi.CheckSpawnMounts(a.Mounts); err != nil {
		return nil, err
	}
	if a.Assignment != nil && prof.SpawnMode == "singleton" {
		return nil, abi.E(abi.Invalid, "assignment: the init process is its owner's own; give an assignment to a process you spawn")
	}
	var parent *string
	var pp *abi.Process
	if a.ParentPid != "" {
		var err error
		if pp, err = m.lookup(ctx, c, a.ParentPid); err != nil {
			return nil, err
		}
		parent = &pp.Pid
	}
	if a.Workspace != nil && prof.SpawnMode == "singleton" && a.Workspace.Mode != "" && a.Workspace.Mode != "none" {
		return nil, abi.E(abi.Invalid, "workspace: the init process works in its owner's home")
	}
	pid := newID("")[:8] + "-" + newID("")[:4]
	if prof.SpawnMode == "singleton" {
		pid = initPid(c.Uid)
	}
	var label *string
	if a.Label != "" {
		label = &a.Label
	}
	if err := checkBudget(a.Budget); err != nil {
		return nil, err
	}
	if a.GraceMs < 0 || a.GraceMs > 24*3600*1000 {
		return nil, abi.E(abi.Invalid, "graceMs: 0 to 24 h")
	}
	limit := -1 // an init process is the user's one, always there
	if prof.SpawnMode != "singleton" {
		limit = m.maxProcesses(ctx, c.Uid)
	}
	// A process spawned by a narrowed caller is narrowed for its life (an
	// init process is its user's own: its spawn changes nothing of it).
	var narrow *abi.ProcessCap
	if prof.SpawnMode != "singleton" {
		narrow = c.Identity.Process
	}
	// The MCP servers it sees: those asked for, within its spawner's if
	// a process spawns it (a process never widens what it sees).
	if err := abi.CheckMcpServers(a.McpServers); err != nil {
		return nil, err
	}
	mcp := a.McpServers
	if c.Identity.Pid != "" && c.Identity.Pid != pid {
		if sp, err := m.get(ctx, c.Identity.Pid); err == nil {
			mcp = abi.NarrowMcp(sp.McpServers, mcp)
		} else if abi.KindOf(err) != abi.NotExist {
			return nil, err
		}
	}
	if prof.SpawnMode == "singleton" {
		if a.McpServers != nil {
			return nil, abi.E(abi.Invalid, "mcpServers: an init process sees all its owner's MCP servers")
		}
		mcp = nil
	}
	ws, err := m.run.openWorkspace(ctx, c, a.Workspace, pp)
	if err != nil {
		return nil, err
	}
	if err := m.create(ctx, pid, c.Uid, prof.ID, label, parent, c.Home, limit, narrow); err != nil {
		return nil, abi.E(abi.Path(pid), err)
	}
	if ws != nil {
		if err := m.run.setWorkspace(ctx, pid, ws); err != nil {
			return nil, abi.E(abi.Path(pid), err)
		}
	}
	if err := m.saveMcp(ctx, pid, mcp); err != nil {
		return nil, abi.E(abi.Path(pid), err)
	}
	if a.Assignment != nil {
		if err := m.saveAssignment(ctx, pid, a.Assignment); err != nil {
			return nil, abi.E(abi.Path(pid), err)
		}
	}
	if a.Budget != nil || a.Supervise || a.GraceMs > 0 {
		ctl := runCtl{Supervise: a.Supervise, GraceMs: a.GraceMs}
		if a.Budget != nil {
			ctl.Budget = *a.Budget
		}
		if err := m.run.saveControl(ctx, pid, ctl); err != nil {
			return nil, abi.E(abi.Path(pid), err)
		}
	}
	p, err := m.get(ctx, pid)
	if err != nil {
		return nil, err
	}
	m.changed(c.Uid, abi.ProcChanged{Pid: pid, Change: "spawn", Profile: prof.ID})
	switch {
	case a.Prompt != "":
		if _, _, err := m.run.SendEvent(ctx, p, "default", Event{Kind: abi.EventUserMessage, Source: sourceOf(c), Text: a.Prompt, Cap: c.Identity.Process}); err != nil {
			return nil, err
		}
	case a.Assignment != nil && a.Assignment.AutoStart:
		if _, _, err := m.run.SendEvent(ctx, p, "default", Event{Kind: abi.EventProcessEvent, Source: sourceOf(c), Text: assignmentStart, Runtime: true, Cap: c.Identity.Process}); err != nil {
			return nil, err
		}
	}
	return &abi.SpawnResult{OK: true, Pid: pid, Profile: prof.ID, Cwd: p.Cwd, Label: label, WorkspaceID: p.WorkspaceID}, nil
}

// DefaultMaxProcesses is how many processes a user may have, their init
// aside, when config/proc/max_processes (or root's
// users/<uid>/proc/max_processes) does not say. Root's are not counted.
const DefaultMaxProcesses = 256

// maxProcesses is how many processes uid may have besides its init (-1:
// no limit, root). It makes a syscall: call it outside a transaction.
func (m *Manager) maxProcesses(ctx context.Context, uid uint32) int {
	if uid == 0 {
		return -1
	}
	return ns.Limit(ctx, m.k, m.log, uid, "proc/max_processes", DefaultMaxProcesses)
}

// sysSend serves proc.send (Send): the run started, or the message queued.
func (m *engine) sysSend(ctx context.Context, c *kernel.Caller, a *abi.SendArgs) (*abi.SendResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	ev := Event{Kind: a.Kind, Source: sourceOf(c), TraceID: a.TraceID, Text: a.Message, Runtime: a.Event, Cap: c.Identity.Process}
	switch {
	case ev.Kind == "" && a.Event:
		ev.Kind = abi.EventProcessEvent
	case ev.Kind == "":
		ev.Kind = abi.EventUserMessage
	case !slices.Contains(abi.EventKinds, ev.Kind):
		return nil, abi.E(abi.Invalid, fmt.Sprintf("kind %q: want one of %s", ev.Kind, strings.Join(abi.EventKinds, ", ")))
	}
	if err := abi.CheckTraceID(a.TraceID); err != nil {
		return nil, err
	}
	if a.IdempotencyKey != "" {
		if res, err := m.sentBefore(ctx, c.Uid, a); res != nil || err != nil {
			return res, err
		}
		ev.within = m.keySend(c.Uid, p.Pid, a.IdempotencyKey, &ev)
	}
	if len(a.Media) > 0 {
		// Checked before anything is stored: bad media is a 400 that
		// keeps nothing.
		switch a.Mode {
		case "", "queue", "interrupt":
		case "steer":
			return nil, abi.E(abi.Invalid, "media do not steer a run: send them with mode queue or interrupt")
		default:
			return nil, abi.E(abi.Invalid, fmt.Sprintf("mode %q: want queue, steer or interrupt", a.Mode))
		}
		// A send that cannot enter fails before anything is kept.
		if cv, err := m.convRecord(ctx, p.Pid, orDefault(a.ConversationID)); err != nil {
			return nil, err
		} else if cv.Status != "open" {
			return nil, abi.E(abi.Path(p.Pid+"/"+cv.ID), abi.Busy, "conversation is closed: open it again to send")
		}
		if ev.Media, err = m.storeMedia(ctx, p.Uid, a.Media); err != nil {
			return nil, err
		}
	}
	switch a.Mode {
	case "", "queue":
	case "steer", "interrupt":
		if res, done, err := m.sendMidRun(ctx, c, p, a, ev); done || err != nil {
			return res, err
		}
	default:
		return nil, abi.E(abi.Invalid, fmt.Sprintf("mode %q: want queue, steer or interrupt", a.Mode))
	}
	ev.RunID = newID("run_")
	m.routes.add(ev.RunID, c) // before the run can stream
	runID, queued, err := m.SendEvent(ctx, p, orDefault(a.ConversationID), ev)
	if errors.Is(err, errSentBefore) {
		m.routes.conn(ev.RunID, true)
		res, err := m.sentBefore(ctx, c.Uid, a)
		if res == nil && err == nil {
			err = abi.E(abi.Busy, "idempotencyKey: a send with it is under way")
		}
		return res, err
	}
	if errors.Is(err, errTickCoalesced) {
		m.routes.conn(ev.RunID, true)
		return &abi.SendResult{OK: true, Status: "coalesced", RunID: runID, Queued: true, Coalesced: true}, nil
	}
	if err != nil {
		m.routes.conn(ev.RunID, true)
		return nil, err
	}
	return &abi.SendResult{OK: true, Status: "started", RunID: runID, Queued: queued}, nil
}

// sourceOf is the principal c's messages come from: the process it acts
// as, else its user (or its role: kernel, service, driver).
func sourceOf(c *kernel.Caller) abi.EventSource {
	s := abi.EventSource{Kind: c.Role, Uid: c.Uid, Username: c.Username}
	if c.Pid != "" {
		s.Kind, s.Pid = "process", c.Pid
	}
	return s
}

// sysAbort serves proc.abort (Abort).
func (m *engine) sysAbort(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.AbortResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	return m.Abort(ctx, p)
}

// sysHil serves proc.hil (Hil).
func (m *engine) sysHil(ctx context.Context, c *kernel.Caller, a *abi.HilArgs) (*abi.HilResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	return m.Hil(ctx, p, a, c.Identity.Process)
}

// sysKill serves proc.kill: every conversation archived (unless Archive
// is false) and cleared, its run aborted.
func (m *Manager) sysKill(ctx context.Context, c *kernel.Caller, a *abi.KillArgs) (*abi.ResetResult, error) {
	if a.Pid == "" {
		return nil, abi.E(abi.Invalid, "pid is required")
	}
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	// A killed process watches nothing: its watches go first, so that
	// none fires to start it again once its runs are aborted.
	if err := m.forgetWatches(ctx, p.Pid); err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	if err := m.run.checkpointWorkspace(ctx, c, p, "kill"); err != nil {
		return nil, err
	}
	return m.resetProcess(ctx, p, a.Archive == nil || *a.Archive, "killed")
}

// sysReset serves proc.reset: every conversation archived and cleared.
func (m *Manager) sysReset(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.ResetResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	if err := m.run.checkpointWorkspace(ctx, c, p, "reset"); err != nil {
		return nil, err
	}
	return m.resetProcess(ctx, p, true, "reset")
}

// resetProcess archives every non-empty conversation of p under one
// archive directory and clears them (proc.reset, proc.kill).
func (m *Manager) resetProcess(ctx context.Context, p *abi.Process, archive bool, event string) (*abi.ResetResult, error) {
	cids, err := m.allConvs(ctx, p.Pid)
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	entries, dir, err := m.run.resetConvs(ctx, p, cids, archive)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range entries {
		total += e.Messages
	}
	signal(m, p.Uid, abi.SigProcessLifecycle, abi.ProcessLifecycle{Pid: p.Pid, Event: "process." + event})
	return &abi.ResetResult{OK: true, Pid: p.Pid, ArchivedMessages: total, Archives: entries, ArchivedTo: dir}, nil
}

// sysSetIdentity serves proc.setidentity (KernelOnly): a process's working
// directory, workspace and (if given) profile.
func (m *Manager) sysSetIdentity(ctx context.Context, c *kernel.Caller, a *abi.SetIdentityArgs) (*abi.SetIdentityResult, error) {
	if a.Identity == nil {
		return nil, abi.E(abi.Invalid, "identity is required")
	}
	res, err := m.st.Exec(ctx, `UPDATE proc_processes SET cwd=?, workspace_id=?, profile=coalesce(nullif(?,''),profile) WHERE pid=?`,
		a.Identity.Cwd, a.Identity.WorkspaceID, a.Profile, a.Pid)
	if err != nil {
		return nil, abi.E(abi.Path(a.Pid), err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, abi.E(abi.Path(a.Pid), abi.NotExist, "no such process")
	}
	return &abi.SetIdentityResult{OK: true}, nil
}

// maxIdempotencyKey is the longest idempotencyKey of proc.send.
const maxIdempotencyKey = 256

// keepSendKeys is how long a send's idempotency key is kept.
const keepSendKeys = 7 * 24 * time.Hour

// errSentBefore is SendEvent's error when a send with the same
// idempotency key entered first.
var errSentBefore = errors.New("proc: a send with this idempotency key entered before")

// sentBefore answers a send whose idempotency key an earlier send of
// uid's had: that send's run (Status "duplicate"); nil when none had it.
// It checks the key and its mode first.
func (m *engine) sentBefore(ctx context.Context, uid uint32, a *abi.SendArgs) (*abi.SendResult, error) {
	if len(a.IdempotencyKey) > maxIdempotencyKey {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("idempotencyKey is over %d bytes", maxIdempotencyKey))
	}
	if a.Mode != "" && a.Mode != "queue" {
		return nil, abi.E(abi.Invalid, "idempotencyKey: only with mode queue")
	}
	var pid, runID string
	err := m.st.QueryRowContext(ctx, `SELECT pid, run_id FROM proc_send_keys WHERE uid=? AND key=? AND created_at>=?`,
		uid, a.IdempotencyKey, time.Now().Add(-keepSendKeys).UnixMilli()).Scan(&pid, &runID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, abi.E(err)
	}
	if pid != a.Pid {
		return nil, abi.E(abi.Busy, fmt.Sprintf("idempotencyKey: used by a send to %s", pid))
	}
	return &abi.SendResult{OK: true, Status: "duplicate", RunID: runID, Queued: true}, nil
}

// keySend is the part of a keyed send's transaction that claims its key
// (for the run ev.RunID) or fails it with errSentBefore; it also forgets
// keys past keepSendKeys. Its caller's within, if any, runs after it.
func (m *engine) keySend(uid uint32, pid, key string, ev *Event) func(abi.StoreTx) error {
	then := ev.within
	return func(tx abi.StoreTx) error {
		now := time.Now()
		if _, err := tx.Exec(`DELETE FROM proc_send_keys WHERE key IN (SELECT key FROM proc_send_keys
			WHERE created_at<? LIMIT 64)`, now.Add(-keepSendKeys).UnixMilli()); err != nil {
			return err
		}
		res, err := tx.Exec(`INSERT INTO proc_send_keys(uid, key, pid, run_id, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, uid, key, pid, ev.RunID, now.UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errSentBefore
		}
		if then != nil {
			return then(tx)
		}
		return nil
	}
}
