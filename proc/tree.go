package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// The /proc tree. Every file is a view, ctl, stream or input over proc.*
// syscalls made as the caller; a process's files belong to its owner.

func words(l ns.CtlLine, n int, usage string) error {
	if l.JSON == nil && len(l.Words) < n {
		return abi.E(abi.Invalid, fmt.Sprintf("usage: %s", usage))
	}
	return nil
}

func word(l ns.CtlLine, i int) string {
	if i < len(l.Words) {
		return l.Words[i]
	}
	return ""
}

// hilUsage is the usage of a process ctl's hil verb.
const hilUsage = "hil approve <requestId> [remember] [args=<json>] | hil deny <requestId> | hil substitute <requestId> <text...>"

// hilVerb parses "hil approve <id> [remember] [args=<json>]", "hil deny
// <id>" and "hil substitute <id> <text...>" (the text is the rest of the
// line, verbatim, as send's). A line of JSON args fills proc.hil's args.
func hilVerb(pid string, l ns.CtlLine) (kernel.Bound, error) {
	a := &abi.HilArgs{Pid: pid}
	if l.JSON != nil {
		return kernel.Bind(abi.ProcHil, a), nil
	}
	if err := words(l, 2, hilUsage); err != nil {
		return kernel.Bound{}, err
	}
	a.Decision, a.RequestID = word(l, 0), word(l, 1)
	if a.Decision == "substitute" {
		rest := l.Text()
		for range 2 { // the decision and the request id
			rest = strings.TrimLeft(rest, " \t")
			if i := strings.IndexAny(rest, " \t"); i >= 0 {
				rest = rest[i:]
			} else {
				rest = ""
			}
		}
		a.Result = strings.TrimLeft(rest, " \t")
		return kernel.Bind(abi.ProcHil, a), nil
	}
	for _, w := range l.Words[2:] {
		if w != "remember" {
			return kernel.Bound{}, abi.E(abi.Invalid, "usage: "+hilUsage)
		}
		a.Remember = true
	}
	if v, ok := l.LookupOpt("args"); ok {
		if !json.Valid([]byte(v)) {
			return kernel.Bound{}, abi.E(abi.Invalid, fmt.Sprintf("args=%s is not JSON (JSON with spaces is quoted: args='{\"path\": \"a b\"}')", v))
		}
		a.Args = json.RawMessage(v)
	}
	return kernel.Bind(abi.ProcHil, a), nil
}

// spawnVerb parses "spawn <profile> [label=..] [prompt=..] [workspace=<mode>]".
func spawnVerb(l ns.CtlLine) (kernel.Bound, error) {
	if err := l.Args(1, 1, "spawn <profile> [label=..] [prompt=..] [workspace=none|inherit] [mcp=a,b]"); err != nil {
		return kernel.Bound{}, err
	}
	a := &abi.SpawnArgs{Profile: word(l, 0), Label: l.Opt("label"), Prompt: l.Opt("prompt")}
	if w, ok := l.LookupOpt("workspace"); ok {
		a.Workspace = &abi.WorkspaceSpec{Mode: w}
	}
	if v, ok := l.LookupOpt("mcp"); ok {
		a.McpServers = abi.ParseMcpServers(v)
	}
	return kernel.Bind(abi.ProcSpawn, a), nil
}

// tree is the /proc tree.
func (m *Manager) tree() vfs.Dir {
	root := ns.RootMeta("/proc", fs.ModeDir|0o555).WithChanged(m.listingChanged)
	ctl := m.space.Ctl("/proc", ns.RootMeta("/proc/ctl", 0o666), map[string]ns.CtlVerb{"spawn": spawnVerb})
	// clone is a ctl whose result is the new pid: exec 3<>clone; echo
	// 'spawn task' >&3; read pid <&3.
	clone := m.space.CtlShow("/proc", ns.RootMeta("/proc/clone", 0o666), map[string]ns.CtlVerb{"spawn": spawnVerb},
		func(res any) (string, error) {
			r, ok := res.(*abi.SpawnResult)
			if !ok {
				return "", abi.E(abi.Op(abi.ProcSpawn.Name), abi.Other, fmt.Sprintf("result of type %T", res))
			}
			return r.Pid, nil
		})
	errv := m.space.ErrView("/proc")
	return &vfs.FuncDir{Meta: root,
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			out := []vfs.DirEntry{{Name: "ctl", Node: ctl}, {Name: "clone", Node: clone}, {Name: "err", Node: errv}}
			res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcList, &abi.ListArgs{})
			if err != nil {
				return out, nil // nobody sees the fixed files only
			}
			// One owner lookup per user, not per process, and each
			// process's directory made only if it is entered: a listing
			// of 20,000 processes is one query and 20,000 small nodes.
			owners := map[uint32]owner{}
			for i := range res.Processes {
				p := &res.Processes[i]
				own, ok := owners[p.Uid]
				if !ok {
					own = m.owner(ctx, p)
					owners[p.Uid] = own
				}
				meta := own.at("/proc/"+p.Pid, procDirMode).WithChanged(m.changedAt(p.Pid, p.CreatedAt))
				attr, err := meta.Attr(ctx, cred)
				if err != nil {
					continue
				}
				out = append(out, vfs.DirEntry{Name: p.Pid, Attr: &attr,
					Node: &lazyDir{Meta: meta, build: func() vfs.Dir { return m.procDirOf(p, own) }}})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			switch name {
			case "ctl":
				return ctl, nil
			case "clone":
				return clone, nil
			case "err":
				return errv, nil
			}
			p, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcGet, &abi.PidArgs{Pid: name})
			if err != nil || name == "" {
				return nil, vfs.ErrNotExist
			}
			return m.procDir(ctx, p), nil
		}}
}

// owner is the owner part of the Meta of a process's files: one user
// lookup serves a directory and its files.
type owner ns.Meta

// owner looks up the owner of p's files. A lookup is kept for
// ownerCacheFor: a walk of a process's files, or ls -l of /proc (whose
// READDIRPLUS looks every entry up), asks once, not once per node. A
// user's name, group or host uid changed meanwhile shows within that
// time.
func (m *Manager) owner(ctx context.Context, p *abi.Process) owner {
	now := time.Now()
	m.owners.mu.Lock()
	e, ok := m.owners.m[p.Uid]
	m.owners.mu.Unlock()
	if ok && now.Sub(e.at) < ownerCacheFor {
		return e.own
	}
	own := owner(ns.UserMeta(ctx, m.k, p.Uid, strconv.Itoa(int(p.Uid))))
	m.owners.mu.Lock()
	if m.owners.m == nil || len(m.owners.m) >= 4096 {
		m.owners.m = map[uint32]ownerEntry{}
	}
	m.owners.m[p.Uid] = ownerEntry{own, now}
	m.owners.mu.Unlock()
	return own
}

// ownerCacheFor is how long owner keeps a user's lookup.
const ownerCacheFor = time.Second

// ownerEntry is a user's owner part of Meta and when it was looked up.
type ownerEntry struct {
	own owner
	at  time.Time
}

// ownerCache holds owner's lookups, by uid.
type ownerCache struct {
	mu sync.Mutex // guards m
	m  map[uint32]ownerEntry
}

// at makes the Meta of the file at path.
func (o owner) at(path string, mode fs.FileMode) *ns.Meta { return ns.Meta(o).At(path, mode) }

// jsonView is a view of the syscall call made as the reader, the part of
// its result (an R) pick chooses shown as indented JSON; a nil part is an
// empty view.
func jsonView[A, R, V any](m *Manager, meta *ns.Meta, call abi.Call[A, R], args *A, pick func(R) *V) *vfs.View {
	return &vfs.View{Meta: meta, Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), call, args)
		if err != nil {
			return nil, err
		}
		v := pick(res)
		if v == nil {
			return nil, nil
		}
		b, err := json.MarshalIndent(v, "", "  ")
		return append(b, '\n'), err
	}}
}

// procDirMode is the mode of a process's directory.
const procDirMode = fs.ModeDir | 0o500

// lazyDir is a directory made on its first use (a Lookup or ReadDir):
// a listing of /proc has one per process, and most are never entered.
type lazyDir struct {
	vfs.Meta
	build func() vfs.Dir
	once  sync.Once
	d     vfs.Dir
}

func (l *lazyDir) dir() vfs.Dir {
	l.once.Do(func() { l.d = l.build() })
	return l.d
}

// Lookup implements vfs.Dir.
func (l *lazyDir) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	return l.dir().Lookup(ctx, cred, name)
}

// ReadDir implements vfs.Dir.
func (l *lazyDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	return l.dir().ReadDir(ctx, cred)
}

// procDir is the directory /proc/<pid> of p.
func (m *Manager) procDir(ctx context.Context, p *abi.Process) vfs.Dir {
	return m.procDirOf(p, m.owner(ctx, p))
}

// procDirOf is procDir with p's owner looked up already.
func (m *Manager) procDirOf(p *abi.Process, own owner) vfs.Dir {
	base := "/proc/" + p.Pid
	pid := p.Pid
	dirMode := procDirMode
	at := func(path string, mode fs.FileMode, parts ...string) *ns.Meta {
		return own.at(path, mode).WithChanged(m.changedAt(pid, p.CreatedAt, parts...))
	}
	status := &vfs.View{Meta: at(base+"/status", 0o400, "status"), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcStatus, &abi.PidArgs{Pid: pid})
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, f := range statusLines(&res.Status) {
			fmt.Fprintf(&b, "%s: %s\n", f.key, field(f.value))
		}
		return []byte(b.String()), nil
	}}
	verbs := map[string]ns.CtlVerb{
		"send": func(l ns.CtlLine) (kernel.Bound, error) {
			if l.JSON == nil && l.Rest == "" {
				return kernel.Bound{}, abi.E(abi.Invalid, "usage: send [mode=queue|steer|interrupt] <text...>")
			}
			ll, err := splitLead(l.Text(), 0, "mode")
			return kernel.Bind(abi.ProcSend, &abi.SendArgs{Pid: pid, Message: ll.text, Mode: ll.opts["mode"]}), err
		},
		"abort": func(l ns.CtlLine) (kernel.Bound, error) {
			return kernel.Bind(abi.ProcAbort, &abi.PidArgs{Pid: pid}), l.Args(0, 0, "abort")
		},
		"kill": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.KillArgs{Pid: pid}
			if word(l, 0) == "noarchive" {
				f := false
				a.Archive = &f
			} else if len(l.Words) > 0 {
				return kernel.Bound{}, abi.E(abi.Invalid, "usage: kill [noarchive]")
			}
			return kernel.Bind(abi.ProcKill, a), nil
		},
		"reset": func(l ns.CtlLine) (kernel.Bound, error) {
			return kernel.Bind(abi.ProcReset, &abi.PidArgs{Pid: pid}), l.Args(0, 0, "reset")
		},
		"hil": func(l ns.CtlLine) (kernel.Bound, error) { return hilVerb(pid, l) },
	}
	for v, f := range runVerbs(pid) {
		verbs[v] = f
	}
	// What other rooms add to the directory (the ipc room: its ipc file
	// and verbs); the names of proc's own stay proc's.
	grafted, more := m.space.Grafted(ns.GraftDir{Path: base, Owner: ns.Meta(own), Changed: m.changedAt(pid, p.CreatedAt)})
	for v, f := range more {
		if _, ok := verbs[v]; !ok {
			verbs[v] = f
		}
	}
	ctl := m.space.Ctl(base, own.at(base+"/ctl", 0o600), verbs)
	events := &vfs.Stream{Meta: own.at(base+"/events", 0o400), Subscribe: func(ctx context.Context, cred vfs.Cred) (vfs.Subscription, error) {
		return kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcEvents, &abi.PidArgs{Pid: pid})
	}}
	// hil is the pending request; no request: the view is empty.
	hil := jsonView(m, at(base+"/hil", 0o400, "hil"), abi.ProcHistory, &abi.HistoryArgs{Pid: pid, Limit: 1},
		func(r *abi.HistoryResult) *abi.HilRequest { return r.PendingHil })
	entries := []vfs.DirEntry{
		{Name: "status", Node: status},
		{Name: "ctl", Node: ctl},
		{Name: "err", Node: m.space.ErrView(base)},
		{Name: "events", Node: events},
		{Name: "hil", Node: hil},
		{Name: "run", Node: jsonView(m, at(base+"/run", 0o400, "run"), abi.ProcRunGet, &abi.PidArgs{Pid: pid},
			func(r *abi.RunInfo) *abi.RunInfo { return r })},
		{Name: "cost", Node: jsonView(m, at(base+"/cost", 0o400, "run"), abi.ProcCost, &abi.PidArgs{Pid: pid},
			func(r *abi.CostResult) *abi.CostResult { return r })},
		{Name: "conversations", Node: m.convsDir(p, own)},
	}
	for _, g := range grafted {
		if !slices.ContainsFunc(entries, func(e vfs.DirEntry) bool { return e.Name == g.Name }) {
			entries = append(entries, g)
		}
	}
	return vfs.NewDir(at(base, dirMode), entries...)
}

// statusLine is one line of /proc/<pid>/status.
type statusLine struct {
	key   string
	value any
}

// statusLines are the lines of /proc/<pid>/status, in order.
func statusLines(st *abi.ProcStatusRecord) []statusLine {
	return []statusLine{{"pid", st.Pid}, {"uid", st.Uid}, {"user", st.User}, {"profile", st.Profile}, {"label", st.Label},
		{"mcp", st.Mcp}, {"parent", st.Parent}, {"state", st.State}, {"run", st.Run}, {"queued", st.Queued}, {"cwd", st.Cwd},
		{"workspace", st.Workspace}, {"created", st.Created}}
}

// field renders v as one field of a line: a string that is not a
// one-line name (kernel.CheckText: a control character, invalid UTF-8,
// as a record stored before names were checked may hold) is quoted, Go
// style, so that it can never start a line of its own.
func field(v any) string {
	s, ok := v.(string)
	if !ok {
		return fmt.Sprint(v)
	}
	if kernel.CheckText("", s, len(s)) != nil {
		return strconv.Quote(s)
	}
	return s
}

func (m *Manager) convsDir(p *abi.Process, own owner) vfs.Dir {
	base := "/proc/" + p.Pid + "/conversations"
	pid := p.Pid
	ctl := m.space.Ctl(base, own.at(base+"/ctl", 0o600), map[string]ns.CtlVerb{
		"open": func(l ns.CtlLine) (kernel.Bound, error) {
			if err := l.Args(0, 1, "open [<id>] [title=..]"); err != nil {
				return kernel.Bound{}, err
			}
			a := &abi.ConvArgs{Pid: pid, ConversationID: word(l, 0)}
			if t, ok := l.LookupOpt("title"); ok {
				a.Title = &t
			}
			return kernel.Bind(abi.ProcConversationOpen, a), nil
		},
		"close": func(l ns.CtlLine) (kernel.Bound, error) {
			if err := l.Args(1, 1, "close <id>"); err != nil {
				return kernel.Bound{}, err
			}
			return kernel.Bind(abi.ProcConversationClose, &abi.ConvArgs{Pid: pid, ConversationID: word(l, 0)}), nil
		},
	})
	errv := m.space.ErrView(base)
	return &vfs.FuncDir{Meta: own.at(base, fs.ModeDir|0o500).WithChanged(m.changedAt(pid, p.CreatedAt, "conversations")),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcConversationList, &abi.ConvArgs{Pid: pid, IncludeClosed: true})
			if err != nil {
				return nil, err
			}
			out := []vfs.DirEntry{{Name: "ctl", Node: ctl}, {Name: "err", Node: errv}}
			for _, c := range res.Conversations {
				out = append(out, vfs.DirEntry{Name: c.ID, Node: m.convDir(ctx, p, c.ID)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			switch name {
			case "ctl":
				return ctl, nil
			case "err":
				return errv, nil
			}
			if _, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcConversationLookup, &abi.ConvArgs{Pid: pid, ConversationID: name}); err != nil {
				return nil, err // ENOENT for a conversation that is not there
			}
			return m.convDir(ctx, p, name), nil
		}}
}

func (m *Manager) convDir(ctx context.Context, p *abi.Process, cid string) vfs.Dir {
	own := m.owner(ctx, p)
	base := "/proc/" + p.Pid + "/conversations/" + cid
	pid := p.Pid
	in := &convInput{Input: &vfs.Input{Meta: own.at(base+"/in", 0o600), Deliver: func(ctx context.Context, cred vfs.Cred, data []byte) error {
		_, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, base), abi.ProcSend, &abi.SendArgs{Pid: pid, ConversationID: cid, Message: strings.TrimSuffix(string(data), "\n")})
		return err
	}}, check: func(ctx context.Context, cred vfs.Cred) error {
		c, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, base), abi.ProcConversationLookup, &abi.ConvArgs{Pid: pid, ConversationID: cid})
		if err != nil {
			return err
		}
		if c.Status != "open" {
			return abi.E(abi.Path(pid+"/"+cid), abi.Busy, "conversation is closed: open it again to send")
		}
		return nil
	}}
	ctl := m.space.Ctl(base, own.at(base+"/ctl", 0o600), map[string]ns.CtlVerb{
		"send": func(l ns.CtlLine) (kernel.Bound, error) {
			if l.JSON == nil && l.Rest == "" {
				return kernel.Bound{}, abi.E(abi.Invalid, "usage: send <text...>")
			}
			return kernel.Bind(abi.ProcSend, &abi.SendArgs{Pid: pid, ConversationID: cid, Message: l.Text()}), nil
		},
		"compact": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.CompactArgs{Pid: pid, ConversationID: cid}
			if v, ok := l.LookupOpt("keep"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return kernel.Bound{}, abi.E(abi.Invalid, fmt.Sprintf("keep=%q is not a number", v))
				}
				a.KeepLast = &n
			}
			if v, ok := l.LookupOpt("through"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return kernel.Bound{}, abi.E(abi.Invalid, fmt.Sprintf("through=%q is not a message id", v))
				}
				a.ThroughMessageID = &n
			}
			if v, ok := l.LookupOpt("summary"); ok {
				a.Summary = &v
			}
			for _, w := range l.Words {
				if w != "generate" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: compact keep=<n>|through=<msgId> [summary=<text>|generate]")
				}
				a.GenerateSummary = true
			}
			return kernel.Bind(abi.ProcConversationCompact, a), nil
		},
		"reset": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.ConvArgs{Pid: pid, ConversationID: cid}
			if err := l.Args(0, 1, "reset [noarchive]"); err != nil {
				return kernel.Bound{}, err
			}
			if word(l, 0) == "noarchive" {
				f := false
				a.Archive = &f
			} else if len(l.Words) > 0 {
				return kernel.Bound{}, abi.E(abi.Invalid, "usage: reset [noarchive]")
			}
			return kernel.Bind(abi.ProcConversationReset, a), nil
		},
		"fork": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.ForkArgs{Pid: pid, ConversationID: cid, SegmentID: l.Opt("segment"), TargetConversationID: l.Opt("as")}
			if v, ok := l.LookupOpt("through"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return kernel.Bound{}, abi.E(abi.Invalid, fmt.Sprintf("through=%q is not a message id", v))
				}
				a.ThroughMessageID = &n
			}
			if t, ok := l.LookupOpt("title"); ok {
				a.Title = &t
			}
			for _, w := range l.Words {
				if w != "nosuffix" {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: fork through=<msgId>|segment=<segId> [as=<id>] [title=..] [nosuffix]")
				}
				f := false
				a.IncludeLiveSuffix = &f
			}
			return kernel.Bind(abi.ProcConversationFork, a), nil
		},
		"close": func(l ns.CtlLine) (kernel.Bound, error) {
			return kernel.Bind(abi.ProcConversationClose, &abi.ConvArgs{Pid: pid, ConversationID: cid}), l.Args(0, 0, "close")
		},
		"policy": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.PolicyArgs{Pid: pid, ConversationID: cid}
			if err := l.Args(0, 0, "policy [overflow=manual|auto-compact|fail] [pressure=<0..1>] [keep=<n>]"); err != nil {
				return kernel.Bound{}, err
			}
			if v, ok := l.LookupOpt("overflow"); ok {
				a.Overflow = &v
			}
			if v, ok := l.LookupOpt("pressure"); ok {
				f, err := abi.ParseFinite("pressure", v)
				if err != nil {
					return kernel.Bound{}, err
				}
				a.CompactAtPressure = &f
			}
			if v, ok := l.LookupOpt("keep"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return kernel.Bound{}, abi.E(abi.Invalid, fmt.Sprintf("keep=%q is not a number", v))
				}
				a.KeepLast = &n
			}
			return kernel.Bind(abi.ProcConversationPolicySet, a), nil
		},
	})
	conv := func(path string, mode fs.FileMode, part string) *ns.Meta {
		return own.at(path, mode).WithChanged(m.changedAt(pid, p.CreatedAt, part))
	}
	info := jsonView(m, conv(base+"/info", 0o400, "c/"+cid), abi.ProcConversationGet, &abi.ConvArgs{Pid: pid, ConversationID: cid},
		func(r *abi.ConversationGetResult) *abi.Conversation { return r.Conversation })
	policy := jsonView(m, conv(base+"/policy", 0o400, "c/"+cid+"/policy"), abi.ProcConversationPolicyGet, &abi.PolicyArgs{Pid: pid, ConversationID: cid},
		func(r *abi.PolicyResult) *abi.Policy { return r.Policy })
	// history and transcript are proc's cached renderings (cache.go),
	// brought up to date by proc.history.open at each open and then read
	// as real files.
	rendering := func(kind string) *vfs.Backed {
		return &vfs.Backed{Meta: own.at(base+"/"+kind, 0o400), OpenFile: func(ctx context.Context, cred vfs.Cred) (*os.File, error) {
			return kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcHistoryOpen, &abi.HistoryOpenArgs{Pid: pid, ConversationID: cid, Kind: kind})
		}}
	}
	history, transcript := rendering("history"), rendering("transcript")
	return vfs.NewDir(own.at(base, fs.ModeDir|0o500).WithChanged(m.changedAt(pid, p.CreatedAt)),
		vfs.DirEntry{Name: "in", Node: in},
		vfs.DirEntry{Name: "ctl", Node: ctl},
		vfs.DirEntry{Name: "err", Node: m.space.ErrView(base)},
		vfs.DirEntry{Name: "info", Node: info},
		vfs.DirEntry{Name: "history", Node: history},
		vfs.DirEntry{Name: "transcript", Node: transcript},
		vfs.DirEntry{Name: "policy", Node: policy},
		vfs.DirEntry{Name: "segments", Node: m.segmentsDir(p, own, cid)},
	)
}

func (m *Manager) segmentsDir(p *abi.Process, own owner, cid string) vfs.Dir {
	base := "/proc/" + p.Pid + "/conversations/" + cid + "/segments"
	pid := p.Pid
	segDir := func(s abi.Segment) vfs.Dir {
		sbase := base + "/" + s.ID
		// A segment never changes: its files show its creation.
		made := time.UnixMilli(s.CreatedAt)
		at := func(path string, mode fs.FileMode) *ns.Meta {
			return own.at(path, mode).WithChanged(func(context.Context, vfs.Cred) time.Time { return made })
		}
		meta := jsonView(m, at(sbase+"/meta", 0o400), abi.ProcConversationSegmentRead, &abi.SegmentReadArgs{Pid: pid, ConversationID: cid, SegmentID: s.ID, Limit: 1},
			func(r *abi.SegmentReadResult) *abi.Segment { return &r.Segment })
		msgs := &vfs.Sequential{Meta: at(sbase+"/messages", 0o400), OpenReader: func(ctx context.Context, cred vfs.Cred) (vfs.Reader, error) {
			return m.segmentReader(ctx, ns.CallerOf(cred, ""), pid, cid, s.ID)
		}, Size: func(ctx context.Context, cred vfs.Cred) (int64, error) {
			return m.segmentSize(ctx, ns.CallerOf(cred, ""), s.ArchivePath)
		}}
		return vfs.NewDir(at(sbase, fs.ModeDir|0o500),
			vfs.DirEntry{Name: "meta", Node: meta}, vfs.DirEntry{Name: "messages", Node: msgs})
	}
	return &vfs.FuncDir{Meta: own.at(base, fs.ModeDir|0o500).WithChanged(m.changedAt(pid, p.CreatedAt, "c/"+cid+"/segments")),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcConversationSegments, &abi.ConvArgs{Pid: pid, ConversationID: cid})
			if err != nil {
				return nil, err
			}
			var out []vfs.DirEntry
			for _, s := range res.Segments {
				out = append(out, vfs.DirEntry{Name: s.ID, Node: segDir(s)})
			}
			return out, nil
		}}
}

// convInput is a conversation's in file: a vfs.Input whose open for
// writing and writes fail (EBUSY) while the conversation is closed. The
// message is delivered at close, whose errors shells ignore: refusing the
// open and each write is what makes a writer see the failure, and no text
// is taken that could not be delivered. An open for reading only (a tree
// walker's) reads end of file, open conversation or not.
type convInput struct {
	*vfs.Input
	check func(ctx context.Context, cred vfs.Cred) error
}

// Open implements vfs.File.
func (in *convInput) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	h, err := in.Input.Open(ctx, cred, flags)
	if err != nil {
		return nil, err
	}
	if vfs.WantOf(flags)&vfs.WantWrite == 0 {
		return h, nil
	}
	if err := in.check(ctx, cred); err != nil {
		h.Close(ctx) // nothing was written: it delivers nothing
		return nil, err
	}
	return &convInputHandle{Handle: h, in: in, cred: cred}, nil
}

// convInputHandle checks the conversation before each write.
type convInputHandle struct {
	vfs.Handle
	in   *convInput
	cred vfs.Cred
}

// Write implements vfs.Handle: it fails while the conversation is closed.
func (h *convInputHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.in.check(ctx, h.cred); err != nil {
		return 0, err
	}
	return h.Handle.Write(ctx, p, off)
}

// Flush implements vfs.Flusher with the input's own handle.
func (h *convInputHandle) Flush(ctx context.Context) error {
	if f, ok := h.Handle.(vfs.Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// Truncate implements vfs.Truncater with the input's own handle.
func (h *convInputHandle) Truncate(ctx context.Context, size int64) error {
	if t, ok := h.Handle.(vfs.Truncater); ok {
		return t.Truncate(ctx, size)
	}
	return nil
}
