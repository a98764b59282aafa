package ipc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// The IPC verbs of /proc/<pid>/ctl, each made with pid as the source (its
// owner writes for their own process), and /proc/<pid>/ipc, grafted onto
// the process room's directory (Room.Grafts):
//
//	mail <pid> <text...>
//	call <pid> [timeout=<ms>] <text...>
//	delegate <profile> [timeout=<ms>] [label=<label>] <text...>
//	watch <signal> [process=<pid>] [key=<key>] [ttl=<ms>] [once|always]
//	unwatch <watchId> | unwatch key=<key>
//
// A verb's leading words and options come first; the rest of the line is
// the text, as written (its own key=value words are text).

// ipcVerbs are the IPC verbs of pid's ctl file.
func ipcVerbs(pid string) map[string]ns.CtlVerb {
	return map[string]ns.CtlVerb{
		"mail": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.IpcSendArgs{SourcePid: pid}
			if l.JSON == nil {
				ll, err := ns.SplitLead(l.Text(), 1)
				if err != nil {
					return kernel.Bound{}, err
				}
				if len(ll.Words) < 1 || ll.Text == "" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: mail <pid> <text...>")
				}
				a.Pid, a.Message = ll.Words[0], ll.Text
			}
			return kernel.Bind(abi.ProcIpcSend, a), nil
		},
		"call": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.IpcCallArgs{IpcSendArgs: abi.IpcSendArgs{SourcePid: pid}}
			if l.JSON == nil {
				ll, err := ns.SplitLead(l.Text(), 1, "timeout")
				if err != nil {
					return kernel.Bound{}, err
				}
				if len(ll.Words) < 1 || ll.Text == "" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: call <pid> [timeout=<ms>] <text...>")
				}
				ms, err := ll.Ms("timeout")
				if err != nil {
					return kernel.Bound{}, err
				}
				a.Pid, a.Message, a.TimeoutMs = ll.Words[0], ll.Text, ms
			}
			return kernel.Bind(abi.ProcIpcCall, a), nil
		},
		"delegate": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.IpcDelegateArgs{SourcePid: pid}
			if l.JSON == nil {
				ll, err := ns.SplitLead(l.Text(), 1, "timeout", "label", "pid")
				if err != nil {
					return kernel.Bound{}, err
				}
				if len(ll.Words) < 1 || ll.Text == "" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: delegate <profile> [timeout=<ms>] [label=<label>] [pid=<worker>] <task...>")
				}
				ms, err := ll.Ms("timeout")
				if err != nil {
					return kernel.Bound{}, err
				}
				a.Profile, a.Task, a.TimeoutMs, a.Label, a.Pid = ll.Words[0], ll.Text, ms, ll.Opts["label"], ll.Opts["pid"]
			}
			return kernel.Bind(abi.ProcIpcDelegate, a), nil
		},
		"watch": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.WatchArgs{WatcherPid: pid}
			if l.JSON == nil {
				if len(l.Words) < 1 {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: watch <signal> [process=<pid>] [key=<key>] [ttl=<ms>] [once|always]")
				}
				a.Signal, a.ProcessID, a.Key = l.Words[0], l.Opt("process"), l.Opt("key")
				for _, w := range l.Words[1:] {
					switch w {
					case "once", "always":
						once := w == "once"
						a.Once = &once
					default:
						return kernel.Bound{}, abi.E(abi.Invalid, fmt.Sprintf("%q: usage: watch <signal> [process=<pid>] [key=<key>] [ttl=<ms>] [once|always]", w))
					}
				}
				if v := l.Opt("ttl"); v != "" {
					ms, err := ns.DurationMs("ttl", v)
					if err != nil {
						return kernel.Bound{}, err
					}
					a.TTLMs = &ms
				}
			}
			return kernel.Bind(abi.SignalWatch, a), nil
		},
		"unwatch": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.UnwatchArgs{WatcherPid: pid}
			if l.JSON == nil {
				a.Key = l.Opt("key")
				if len(l.Words) == 1 {
					a.WatchID = l.Words[0]
				}
				if (a.WatchID == "") == (a.Key == "") || len(l.Words) > 1 {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: unwatch <watchId> | unwatch key=<key>")
				}
			}
			return kernel.Bind(abi.SignalUnwatch, a), nil
		},
	}
}

// ipcView is /proc/<pid>/ipc: the process's calls, newest first, one a
// line: id, direction, the other process, deadline, state.
func (m *Room) ipcView(meta *ns.Meta, pid string) *vfs.View {
	return &vfs.View{Meta: meta, Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcIpcList, &abi.PidArgs{Pid: pid})
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%-26s %-4s %-24s %-20s %s\n", "CALL", "DIR", "PROCESS", "DEADLINE", "STATE")
		for _, c := range res.Calls {
			other := c.TargetPid
			if c.Direction == "in" {
				other = c.SourcePid
			}
			fmt.Fprintf(&b, "%-26s %-4s %-24s %-20s %s\n", c.CallID, c.Direction, other,
				time.UnixMilli(c.DeadlineAt).UTC().Format("2006-01-02T15:04:05Z"), c.State)
		}
		return []byte(b.String()), nil
	}}
}
