package sched

import (
	"context"
	"fmt"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// A schedule's target is a syscall of proc (proc.spawn, proc.send,
// proc.conversation.compact, .reset, proc.checkpoint), or of the package
// room (pkg.event), made through the dispatcher as the schedule's run-as
// user, with their abi types: sched never imports proc or pkgs.

// defaultKeep is how many messages a lifecycle compact keeps when its
// options do not say.
const defaultKeep = 80

// execute makes s's target syscall as its run-as user (a schedule can do
// nothing its owner could not) and returns the run's summary.
func (m *Manager) execute(ctx context.Context, s *abi.Schedule) (string, error) {
	if m.opts.testExec != nil {
		if summary, handled, err := m.opts.testExec(ctx, s); handled {
			return summary, err
		}
	}
	id, err := m.k.IdentityOf(ctx, s.RunAsUid)
	if err != nil {
		return "", err
	}
	// The narrowing of whoever added or changed s binds its runs: proc
	// carries it into the process's work (the message, a spawned process).
	id.Process = s.Cap
	c := &kernel.Caller{Identity: id}
	t := s.Target
	switch t.Kind {
	case abi.TargetSpawn:
		r, err := kernel.Do(ctx, m.k, c, abi.ProcSpawn, &abi.SpawnArgs{Profile: t.Profile, Label: t.Label, Prompt: t.Prompt,
			ParentPid: t.ParentPid, Workspace: t.Workspace, Assignment: t.Assignment, Mounts: t.Mounts})
		if err != nil {
			return "", err
		}
		return "spawned " + r.Pid, nil
	case abi.TargetEvent:
		r, err := kernel.Do(ctx, m.k, c, abi.ProcSend,
			&abi.SendArgs{Pid: t.Pid, ConversationID: t.ConversationID, Message: t.Message, Event: true,
				Kind: abi.EventScheduleTick, TraceID: "sched:" + s.ID})
		if err != nil {
			return "", err
		}
		if r != nil && r.Coalesced {
			// The target's queue already holds a tick of s: the run is
			// a skip, as one whose previous run is still going.
			return "", &coalescedError{run: r.RunID}
		}
		return abi.ProcSend.Name + " ok", nil
	case abi.TargetLifecycle:
		call := lifecycleCall(&t)
		if call.Name() == "" {
			return "", fmt.Errorf("unknown lifecycle action %q", t.Action)
		}
		if _, err := m.k.Make(ctx, c, call); err != nil {
			return "", err
		}
		return call.Name() + " ok", nil
	case abi.TargetPackage:
		r, err := kernel.Do(ctx, m.k, c, abi.PkgEvent, &abi.PkgEventArgs{PackageID: t.PackageID, Entrypoint: t.Entrypoint,
			Event: t.Event, Payload: t.Payload})
		if err != nil {
			return "", err
		}
		return r.Summary, nil
	}
	return "", fmt.Errorf("unknown target %q", t.Kind)
}

// coalescedError is a process.event run's answer when its target's queue
// already holds a tick of the schedule (proc.send coalesced it): the run
// is recorded skipped.
type coalescedError struct{ run string }

func (e *coalescedError) Error() string {
	return fmt.Sprintf("its previous tick still waits in the target's queue (run %s)", e.run)
}

// lifecycleCall is the syscall of a process.lifecycle target, bound to
// its args: proc.conversation.compact (keeping Options.keep messages,
// default defaultKeep, with Options.summary or a generated one),
// proc.conversation.reset or proc.checkpoint; the zero Bound for another
// action.
func lifecycleCall(t *abi.Target) kernel.Bound {
	switch t.Action {
	case "compact":
		a := &abi.CompactArgs{Pid: t.Pid, ConversationID: t.ConversationID}
		keep := defaultKeep
		if v, ok := t.Options["keep"].(float64); ok {
			keep = int(v)
		}
		a.KeepLast = &keep
		if sm, ok := t.Options["summary"].(string); ok && sm != "" {
			a.Summary = &sm
		} else {
			a.GenerateSummary = true
		}
		return kernel.Bind(abi.ProcConversationCompact, a)
	case "reset":
		return kernel.Bind(abi.ProcConversationReset, &abi.ConvArgs{Pid: t.Pid, ConversationID: t.ConversationID})
	case "checkpoint":
		return kernel.Bind(abi.ProcCheckpoint, &abi.CheckpointArgs{Pid: t.Pid, ConversationID: t.ConversationID})
	}
	return kernel.Bound{}
}

// checkReach checks t (400, or 501 for a seed's field not built yet) and
// refuses (404) a process.event or process.lifecycle target whose
// process, or conversation, owner cannot reach, and a process.spawn
// target whose parentPid owner cannot reach. It asks proc through the dispatcher, as owner, so that it is the
// rule the run meets (proc.status, or proc.conversation.get for a named
// conversation). It makes syscalls: call it outside a transaction of the
// store. name is the schedule's, for the error.
func (m *Manager) checkReach(ctx context.Context, owner uint32, name string, t *abi.Target) error {
	if err := validateTarget(t); err != nil {
		return targetErr(name, err)
	}
	pid := t.Pid
	if t.Kind == abi.TargetSpawn {
		pid = t.ParentPid // a spawn's parent must be the owner's
	}
	if pid == "" {
		return nil
	}
	id, err := m.k.IdentityOf(ctx, owner)
	if err != nil {
		return abi.E(abi.Path(name), abi.NotExist, fmt.Sprintf("owner %d: %v", owner, err))
	}
	c := &kernel.Caller{Identity: id}
	unreachable := func(err error) error {
		switch abi.KindOf(err) {
		case abi.NotExist, abi.Permission, abi.Invalid:
			return abi.E(abi.Path(name), abi.NotExist, fmt.Sprintf("target %s: no such process for uid %d", pid, owner))
		}
		return abi.E(abi.Path(name), err)
	}
	if t.ConversationID == "" {
		if _, err := kernel.Do(ctx, m.k, c, abi.ProcStatus, &abi.PidArgs{Pid: pid}); err != nil {
			return unreachable(err)
		}
		return nil
	}
	r, err := kernel.Do(ctx, m.k, c, abi.ProcConversationGet, &abi.ConvArgs{Pid: t.Pid, ConversationID: t.ConversationID})
	if err != nil {
		return unreachable(err)
	}
	if r == nil || r.Conversation == nil {
		return abi.E(abi.Path(name), abi.NotExist, fmt.Sprintf("target %s: no conversation %q", t.Pid, t.ConversationID))
	}
	return nil
}
