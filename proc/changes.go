package proc

import (
	"context"
	"strconv"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// The mtimes of /proc: when each part of a process last changed, as the
// signals proc publishes say (every signal of a process goes out through
// Manager.signal, which notes it here), kept in the manager's ns.Changes.
// The parts:
//
//	/proc, /proc@<uid>        the listing root sees, a user's listing
//	<pid>/status, /run, /hil, /ipc, /conversations
//	<pid>/c/<cid>             a conversation's info
//	<pid>/c/<cid>/policy, /segments
//	<pid>/*                   every part of pid
//
// A signal this table does not know touches every part of its process: a
// new kind of change can make a file look newer than it is, never older.
// history and transcript are real files whose mtime proc sets to the
// conversation's updated_at (cache.go); a process's directories, whose
// entries are fixed, show its creation.

// noteChange touches the parts of /proc that the signal name (payload pl)
// of a process of uid changes.
func (m *Manager) noteChange(uid uint32, name string, pl abi.Scoped) {
	pid, cid := pl.SignalScope()
	if pid == "" {
		return
	}
	part := func(p string) string { return pid + "/" + p }
	conv := func(cid string) string {
		if cid == "" {
			return part("*")
		}
		return part("c/" + cid)
	}
	var parts []string
	switch name {
	case abi.SigProcRunStream.Name, abi.SigChatDelta.Name, abi.SigChatComplete.Name:
		// Text on its way: nothing stored has changed.
	case abi.SigProcRunUsage.Name:
		// A model call's usage counted (run and cost show it).
		parts = []string{part("run")}
	case abi.SigProcRunOutput.Name:
		// A model call's answer landed, and its usage counted.
		parts = []string{part("run"), conv(cid)}
	case abi.SigProcRunToolStarted.Name, abi.SigProcRunToolFinished.Name:
		parts = []string{conv(cid)}
	case abi.SigProcRunStarted.Name, abi.SigProcRunFinished.Name:
		parts = []string{part("status"), part("run"), part("hil"), conv(cid)}
	case abi.SigProcRunCheckpoint.Name, abi.SigProcRunResumed.Name, abi.SigProcRunDirective.Name:
		parts = []string{part("status"), part("run")}
	case abi.SigProcRunHilRequested.Name:
		parts = []string{part("status"), part("run"), part("hil")}
	case abi.SigProcChanged.Name:
		ch, _ := pl.(abi.ProcChanged)
		switch ch.Change {
		case "queue":
			parts = []string{part("status"), conv(cid)}
		case "hil":
			parts = []string{part("status"), part("run"), part("hil")}
		case "spawn":
			parts = []string{"/proc", "/proc@" + strconv.FormatUint(uint64(uid), 10)}
		case "conversation.open":
			parts = []string{part("conversations"), conv(cid)}
		case "conversation.close":
			parts = []string{conv(cid)}
		case "policy":
			parts = []string{conv(cid) + "/policy"}
		default:
			parts = []string{part("*")}
		}
	case abi.SigProcessLifecycle.Name:
		lc, _ := pl.(abi.ProcessLifecycle)
		switch lc.Event {
		case "process.checkpointed":
			// Files written to the data tree, nothing of /proc.
		case "conversation.forked":
			parts = []string{part("conversations"), conv(lc.TargetConversationID)}
		case "conversation.compacted", "conversation.reset":
			parts = []string{conv(cid), conv(cid) + "/segments"}
		default:
			parts = []string{part("*")}
		}
	default:
		parts = []string{part("*")}
	}
	if len(parts) > 0 {
		m.changes.Touch(parts...)
	}
}

// touch notes that parts of /proc changed where no signal says it
// (processStore).
func (m *Manager) touch(parts ...string) { m.changes.Touch(parts...) }

// changedAt returns the mtime source of a node of process pid (created at
// createdMs) that shows the given parts of it (and changes with every
// part of pid).
func (m *Manager) changedAt(pid string, createdMs int64, parts ...string) func(context.Context, vfs.Cred) time.Time {
	keys := make([]string, 0, len(parts)+1)
	for _, p := range parts {
		keys = append(keys, pid+"/"+p)
	}
	keys = append(keys, pid+"/*")
	created := time.UnixMilli(createdMs)
	return func(context.Context, vfs.Cred) time.Time { return m.changes.At(created, keys...) }
}

// listingChanged is the mtime of /proc as cred sees it: root's listing
// changes with every user's spawn, a user's with their own.
func (m *Manager) listingChanged(ctx context.Context, cred vfs.Cred) time.Time {
	id, _ := cred.(*kernel.Identity)
	if id == nil {
		return m.changes.At(time.Time{}, "/proc")
	}
	if id.IsRoot() {
		return m.changes.At(time.Time{}, "/proc")
	}
	return m.changes.At(time.Time{}, "/proc@"+strconv.FormatUint(uint64(id.Uid), 10))
}
