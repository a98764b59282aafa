package proc

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
// owner writes for their own process), and /proc/<pid>/ipc:
//
//	mail <pid> <text...>
//	call <pid> [timeout=<ms>] <text...>
//	delegate <profile> [timeout=<ms>] [label=<label>] <text...>
//	watch <signal> [process=<pid>] [key=<key>] [ttl=<ms>] [once|always]
//	unwatch <watchId> | unwatch key=<key>
//
// A verb's leading words and options come first; the rest of the line is
// the text, as written (its own key=value words are text).

// leadLine is a ctl line's leading words, its leading options (of keys)
// and the text after them.
type leadLine struct {
	words []string
	opts  map[string]string
	text  string
}

// splitLead splits rest into n words, then the options of keys that
// follow them, then the text. A leading option given twice is a 400
// (which one would count?).
func splitLead(rest string, n int, keys ...string) (leadLine, error) {
	var out leadLine
	out.opts = map[string]string{}
	s := strings.TrimLeft(rest, " \t")
	next := func() (string, string) {
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return s, ""
		}
		return s[:i], strings.TrimLeft(s[i:], " \t")
	}
	for len(out.words) < n && s != "" {
		var w string
		w, s = next()
		out.words = append(out.words, w)
	}
	for s != "" {
		w, after := next()
		k, v, ok := strings.Cut(w, "=")
		known := false
		for _, key := range keys {
			known = known || key == k
		}
		if !ok || !known {
			break
		}
		if _, again := out.opts[k]; again {
			return out, abi.E(abi.Invalid, fmt.Sprintf("option %q is given more than once", k))
		}
		out.opts[k], s = v, after
	}
	out.text = s
	return out, nil
}

// msOpt parses option key of l as milliseconds or a duration (0 if
// absent).
func msOpt(l leadLine, key string) (int64, error) {
	v, ok := l.opts[key]
	if !ok {
		return 0, nil
	}
	return durationMs(key, v)
}

// ipcVerbs are the IPC verbs of pid's ctl file.
func ipcVerbs(pid string) map[string]ns.CtlVerb {
	return map[string]ns.CtlVerb{
		"mail": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.IpcSendArgs{SourcePid: pid}
			if l.JSON == nil {
				ll, err := splitLead(l.Text(), 1)
				if err != nil {
					return kernel.Bound{}, err
				}
				if len(ll.words) < 1 || ll.text == "" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: mail <pid> <text...>")
				}
				a.Pid, a.Message = ll.words[0], ll.text
			}
			return kernel.BindName("proc.ipc.send", a), nil
		},
		"call": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.IpcCallArgs{IpcSendArgs: abi.IpcSendArgs{SourcePid: pid}}
			if l.JSON == nil {
				ll, err := splitLead(l.Text(), 1, "timeout")
				if err != nil {
					return kernel.Bound{}, err
				}
				if len(ll.words) < 1 || ll.text == "" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: call <pid> [timeout=<ms>] <text...>")
				}
				ms, err := msOpt(ll, "timeout")
				if err != nil {
					return kernel.Bound{}, err
				}
				a.Pid, a.Message, a.TimeoutMs = ll.words[0], ll.text, ms
			}
			return kernel.BindName("proc.ipc.call", a), nil
		},
		"delegate": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.IpcDelegateArgs{SourcePid: pid}
			if l.JSON == nil {
				ll, err := splitLead(l.Text(), 1, "timeout", "label", "pid")
				if err != nil {
					return kernel.Bound{}, err
				}
				if len(ll.words) < 1 || ll.text == "" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: delegate <profile> [timeout=<ms>] [label=<label>] [pid=<worker>] <task...>")
				}
				ms, err := msOpt(ll, "timeout")
				if err != nil {
					return kernel.Bound{}, err
				}
				a.Profile, a.Task, a.TimeoutMs, a.Label, a.Pid = ll.words[0], ll.text, ms, ll.opts["label"], ll.opts["pid"]
			}
			return kernel.BindName("proc.ipc.delegate", a), nil
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
					ms, err := durationMs("ttl", v)
					if err != nil {
						return kernel.Bound{}, err
					}
					a.TTLMs = &ms
				}
			}
			return kernel.BindName("signal.watch", a), nil
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
			return kernel.BindName("signal.unwatch", a), nil
		},
	}
}

// ipcView is /proc/<pid>/ipc: the process's calls, newest first, one a
// line: id, direction, the other process, deadline, state.
func (m *Manager) ipcView(meta *ns.Meta, pid string) *vfs.View {
	return &vfs.View{Meta: meta, Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		res, err := kernel.Invoke[*abi.IpcListResult](ctx, m.k, ns.CallerOf(cred, ""), "proc.ipc.list", &abi.PidArgs{Pid: pid})
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
