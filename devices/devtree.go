package devices

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// The files of exec sessions: /dev/gsv, the local device (its status, and
// its shell sessions under shell/), and /var/blobs/sha256, the blobs that
// keep large exec outputs. Every file is a view, ctl or backed file over
// the process.* syscalls, made as the caller through the dispatcher; the
// tree keeps no state of its own. A caller sees their own sessions and
// blobs (root: everyone's).
//
//	exec 3<>/gsv/dev/gsv/shell/clone
//	echo 'open network=none mount=~/proj:/work:rw' >&3; read sid <&3
//	echo 'exec sh -c "make test"' > /gsv/dev/gsv/shell/$sid/ctl
//	cat /gsv/dev/gsv/shell/$sid/wait      # blocks until the exec ends
//	cat /gsv/dev/gsv/shell/$sid/stdout

// Paths of the tree.
const (
	devPath   = "/dev/" + abi.LocalTarget
	shellPath = devPath + "/shell"
	blobsPath = "/var/blobs/sha256"
)

// outputWindow is how many bytes of an output one read of stdout or
// stderr asks process.session.output for.
const outputWindow = 1 << 20

// devMounts are /dev (the local device, /dev/gsv, and the remote
// devices the reader may use; see devremote.go) and the blobs of exec
// sessions, bound only when the router was given the namespace
// (Options.Space).
func (r *Router) devMounts() []ns.Mount {
	if r.space == nil {
		return nil
	}
	return []ns.Mount{
		{Path: "/dev", Node: r.devRoot()},
		{Path: blobsPath, Node: r.blobsDir()},
	}
}

// devDir is /dev/gsv: the local device's status and its shell sessions.
func (r *Router) devDir() vfs.Dir {
	status := &vfs.View{Meta: ns.RootMeta(devPath+"/status", 0o444), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessSessionList, &abi.SessionListArgs{})
		if err != nil {
			return nil, err
		}
		return r.renderStatus(res), nil
	}}
	return vfs.NewDir(ns.RootMeta(devPath, fs.ModeDir|0o555),
		vfs.DirEntry{Name: "status", Node: status},
		vfs.DirEntry{Name: "shell", Node: r.shellDir(shellPath, "", ns.RootMeta(shellPath, fs.ModeDir|0o555))},
	)
}

// renderStatus renders /dev/gsv/status: the device, the syscalls it
// implements, its sandbox runtime (known once a session the reader sees
// has opened) and how many of the reader's sessions are open.
func (r *Router) renderStatus(res *abi.SessionListResult) []byte {
	implements := slices.Clone(Routable)
	public := r.k.Syscalls()
	for _, s := range r.sessionSyscalls() {
		if slices.Contains(public, s.Name()) {
			implements = append(implements, s.Name())
		}
	}
	runtime, open := "unknown (known once a session is open)", 0
	for _, s := range res.Sessions {
		if s.Isolation != nil && s.Isolation.Runtime != "" {
			runtime = s.Isolation.Runtime
		}
		if s.State != "ended" {
			open++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "id: %s\n", abi.LocalTarget)
	fmt.Fprintf(&b, "online: true\n")
	fmt.Fprintf(&b, "implements: %s\n", strings.Join(implements, " "))
	fmt.Fprintf(&b, "sandbox: %s\n", runtime)
	fmt.Fprintf(&b, "sessions: %d\n", open)
	return []byte(b.String())
}

// shellDir is a shell directory at path: /dev/gsv/shell, the local
// device's (target ""), or /dev/<id>/shell, remote device target's:
// clone, err, and a directory per session the caller may see there. A
// remote device's clone opens its sessions on that device: an open line
// is the same; JSON args take the device arm ({"target":{"device":
// {...}}}), its id filled in.
func (r *Router) shellDir(shellPath, target string, meta vfs.Meta) vfs.Dir {
	open := func(l ns.CtlLine) (kernel.Bound, error) {
		if target != "" {
			return kernel.Bind(abi.ProcessSessionOpen, &abi.SessionOpenArgs{Target: abi.ProcessTarget{Device: &abi.ProcessDeviceTarget{ID: target}}}), nil
		}
		return kernel.Bind(abi.ProcessSessionOpen, &abi.SessionOpenArgs{}), nil // JSON args only; see openWords
	}
	words := func(ws []string) (kernel.Bound, error) {
		_, args, err := openWords(ws)
		a, _ := args.(*abi.SessionOpenArgs)
		if a != nil && err == nil && target != "" {
			a.Target = abi.ProcessTarget{Device: &abi.ProcessDeviceTarget{ID: target, ProcessLocalTarget: *a.Target.Local}}
		}
		return kernel.Bind(abi.ProcessSessionOpen, a), err
	}
	// clone is a ctl whose result is the new session id: exec 3<>clone;
	// echo 'open network=none' >&3; read sid <&3.
	clone := r.wordCtl(shellPath, ns.RootMeta(shellPath+"/clone", 0o666),
		map[string]ns.CtlVerb{"open": open, "": open},
		map[string]wordVerb{"open": words},
		func(res any) (string, error) {
			o, ok := res.(*abi.SessionOpenResult)
			if !ok {
				return "", abi.E(abi.Op(abi.ProcessSessionOpen.Name), abi.Other, fmt.Sprintf("result of type %T", res))
			}
			if o.Status != abi.SessionReady {
				return "", abi.E(abi.Op(abi.ProcessSessionOpen.Name), abi.Offline, fmt.Sprintf("%s: %s", o.ErrorCode, o.Error))
			}
			return o.SessionID, nil
		})
	errv := r.space.ErrView(shellPath)
	return &vfs.FuncDir{Meta: meta,
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			out := []vfs.DirEntry{{Name: "clone", Node: clone}, {Name: "err", Node: errv}}
			if target != "" && r.remote(target) == nil {
				// EHOSTDOWN while the device is offline; its failed
				// sessions stay reachable by name.
				return nil, abi.E(abi.Path(shellPath), abi.Offline, fmt.Sprintf("device %q is offline", target))
			}
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessSessionList, &abi.SessionListArgs{Target: target})
			if err != nil {
				return out, nil // a caller without process.* (or the device) sees the fixed files only
			}
			for i := range res.Sessions {
				s := &res.Sessions[i]
				out = append(out, vfs.DirEntry{Name: s.SessionID, Node: r.sessionDir(ctx, shellPath, s)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			switch name {
			case "clone":
				return clone, nil
			case "err":
				return errv, nil
			}
			s, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessSessionGet, &abi.SessionGetArgs{SessionID: name})
			if err != nil {
				return nil, notExist(err)
			}
			if s.Device != target {
				return nil, vfs.ErrNotExist // another device's session
			}
			return r.sessionDir(ctx, shellPath, s), nil
		}}
}

// notExist is err as a lookup reports it: a session or blob that is not
// there (or a name that cannot be one) is ENOENT.
func notExist(err error) error {
	switch abi.KindOf(err) {
	case abi.NotExist, abi.Invalid:
		return vfs.ErrNotExist
	}
	return err
}

// sessionOwner is the owner part of the Meta of a session's files.
type sessionOwner ns.Meta

// ownerOf looks up the owner of a session's files: the session's user.
func (r *Router) ownerOf(ctx context.Context, s *abi.SessionInfo) sessionOwner {
	return sessionOwner(ns.UserMeta(ctx, r.k, s.Uid, s.User))
}

// at makes the Meta of the file at path.
func (o sessionOwner) at(path string, mode fs.FileMode) *ns.Meta { return ns.Meta(o).At(path, mode) }

// sessionDir is <shellPath>/<sid>: ctl, status, wait, stdout, stderr
// and err.
func (r *Router) sessionDir(ctx context.Context, shellPath string, s *abi.SessionInfo) vfs.Dir {
	own := r.ownerOf(ctx, s)
	sid := s.SessionID
	base := shellPath + "/" + sid
	signal := func(sig string, l ns.CtlLine) (kernel.Bound, error) {
		a := &abi.SessionSignalArgs{SessionID: sid, Signal: sig}
		if v, ok := l.LookupOpt("grace"); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return kernel.Bound{}, abi.E(abi.Invalid, fmt.Sprintf("grace=%q is not a duration (such as 2s)", v))
			}
			n := int64(d)
			a.GraceTimeoutNs = &n
		}
		return kernel.Bind(abi.ProcessSessionSignal, a), nil
	}
	ctl := r.wordCtl(base, own.at(base+"/ctl", 0o600),
		map[string]ns.CtlVerb{
			"exec": func(l ns.CtlLine) (kernel.Bound, error) {
				return kernel.Bind(abi.ProcessExecStart, &abi.ExecArgs{SessionID: sid}), nil // JSON args only; see wordCtl
			},
			"signal": func(l ns.CtlLine) (kernel.Bound, error) {
				if l.JSON != nil {
					return signal("", l)
				}
				if len(l.Words) != 1 {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: signal term|kill|int [grace=<duration>]")
				}
				return signal(l.Words[0], l)
			},
			"close": func(l ns.CtlLine) (kernel.Bound, error) {
				if len(l.Words) != 0 {
					return kernel.Bound{}, abi.E(abi.Invalid, "usage: close [grace=<duration>]")
				}
				return signal(abi.SignalTerm, l)
			},
		},
		map[string]wordVerb{"exec": func(words []string) (kernel.Bound, error) {
			if len(words) == 0 {
				return kernel.Bound{}, abi.E(abi.Invalid, "usage: exec <argv...>")
			}
			return kernel.Bind(abi.ProcessExecStart, &abi.ExecArgs{SessionID: sid, Argv: words}), nil
		}},
		func(res any) (string, error) {
			b, err := json.Marshal(res)
			return string(b), err
		})
	status := &vfs.View{Meta: own.at(base+"/status", 0o400), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		info, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessSessionGet, &abi.SessionGetArgs{SessionID: sid})
		if err != nil {
			return nil, err
		}
		return indentJSON(info)
	}}
	// wait renders at its first read, whose context ends the wait (Ctrl-C
	// of the reader, 9P Tflush).
	wait := &vfs.Sequential{Meta: own.at(base+"/wait", 0o400), OpenReader: func(ctx context.Context, cred vfs.Cred) (vfs.Reader, error) {
		return &lazyReader{render: func(ctx context.Context) ([]byte, error) {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessSessionWait, &abi.SessionGetArgs{SessionID: sid})
			if err != nil {
				return nil, err
			}
			return indentJSON(res)
		}}, nil
	}}
	output := func(stream string) *vfs.Sequential {
		return &vfs.Sequential{Meta: own.at(base+"/"+stream, 0o400), OpenReader: func(ctx context.Context, cred vfs.Cred) (vfs.Reader, error) {
			return &outputReader{r: r, c: ns.CallerOf(cred, ""), ref: sid + "/" + stream}, nil
		}, Size: func(ctx context.Context, cred vfs.Cred) (int64, error) {
			// The output's size, from a window of one byte: a copier
			// (tar, rsync) gets the whole output.
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessSessionOutput,
				&abi.BlobReadArgs{BlobRef: sid + "/" + stream, Limit: 1})
			if err != nil {
				return 0, err
			}
			return res.SizeBytes, nil
		}}
	}
	return vfs.NewDir(own.at(base, fs.ModeDir|0o500),
		vfs.DirEntry{Name: "ctl", Node: ctl},
		vfs.DirEntry{Name: "status", Node: status},
		vfs.DirEntry{Name: "wait", Node: wait},
		vfs.DirEntry{Name: "stdout", Node: output("stdout")},
		vfs.DirEntry{Name: "stderr", Node: output("stderr")},
		vfs.DirEntry{Name: "err", Node: r.space.ErrView(base)},
	)
}

// indentJSON is v as indented JSON and a newline.
func indentJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

// lazyReader is a rendering made at the first read, with that read's
// context: a read that waits ends when its reader goes.
type lazyReader struct {
	render func(ctx context.Context) ([]byte, error)
	done   bool
	b      []byte
}

// Read implements vfs.Reader.
func (l *lazyReader) Read(ctx context.Context, p []byte) (int, error) {
	if !l.done {
		b, err := l.render(ctx)
		if err != nil {
			return 0, err
		}
		l.b, l.done = b, true
	}
	n := copy(p, l.b)
	l.b = l.b[n:]
	return n, nil
}

// Close implements vfs.Reader.
func (l *lazyReader) Close() error { return nil }

// outputReader reads the last exec's output of one stream of a session
// in windows of process.session.output: the inline output at once, a
// blob a window at a time. If the output changes between windows (another
// exec ended), the read fails with EBUSY rather than join two outputs.
type outputReader struct {
	r    *Router
	c    *kernel.Caller
	ref  string // "<sid>/stdout" or "<sid>/stderr"
	off  int64  // bytes of the output fetched so far
	size int64  // the output's size, from the first window
	buf  []byte // fetched, not yet read
	eof  bool   // nothing more to fetch
}

// Read implements vfs.Reader.
func (o *outputReader) Read(ctx context.Context, p []byte) (int, error) {
	if len(o.buf) == 0 && !o.eof {
		res, err := kernel.Do(ctx, o.r.k, o.c, abi.ProcessSessionOutput,
			&abi.BlobReadArgs{BlobRef: o.ref, Offset: o.off, Limit: outputWindow})
		if err != nil {
			return 0, err
		}
		if o.off == 0 {
			o.size = res.SizeBytes
		} else if res.SizeBytes != o.size {
			return 0, abi.E(abi.Op(abi.ProcessSessionOutput.Name), abi.Path(o.ref), abi.Busy, "the output changed while it was read: another exec ended")
		}
		o.buf = res.Bytes
		o.off += int64(len(res.Bytes))
		o.eof = len(res.Bytes) == 0 || o.off >= o.size
	}
	n := copy(p, o.buf)
	o.buf = o.buf[n:]
	return n, nil
}

// Close implements vfs.Reader.
func (o *outputReader) Close() error { return nil }

// blobsDir is /var/blobs/sha256: the blobs the caller may read, each a
// read-only file named by its digest.
func (r *Router) blobsDir() vfs.Dir {
	blob := func(hex string) *vfs.Backed {
		return &vfs.Backed{Meta: ns.RootMeta(blobsPath+"/"+hex, 0o444), OpenFile: func(ctx context.Context, cred vfs.Cred) (*os.File, error) {
			return kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessBlobOpen, &abi.BlobReadArgs{BlobRef: "sha256:" + hex})
		}}
	}
	return &vfs.FuncDir{Meta: ns.RootMeta(blobsPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			hexes, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessBlobList, &abi.SessionListArgs{})
			if err != nil {
				return nil, nil // a caller without process.* sees no blob
			}
			slices.Sort(hexes)
			out := make([]vfs.DirEntry, 0, len(hexes))
			for _, h := range hexes {
				out = append(out, vfs.DirEntry{Name: h, Node: blob(h)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			f, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.ProcessBlobOpen, &abi.BlobReadArgs{BlobRef: "sha256:" + name})
			if err != nil {
				return nil, notExist(err)
			}
			f.Close()
			return blob(name), nil
		}}
}

// A wordVerb turns the words of a ctl line, split as a shell splits them
// (splitWords), into a syscall and its args.
type wordVerb func(words []string) (kernel.Bound, error)

// wordCtl is space.CtlShow(dir, meta, verbs, show) whose verbs in words
// take the rest of their line as shell words (double and single quotes,
// backslash escapes; repeated key=value words kept), as a command line
// and repeated mounts need; ns.ParseCtl's rc quoting has no double quotes
// and keeps one value per option. A line of such a verb whose rest starts
// with '{' (JSON args), and the lines of every other verb, follow ns's
// rules (verbs must name the verbs in words too, for their JSON args).
// Failures are remembered for dir's err view either way.
func (r *Router) wordCtl(dir string, meta *ns.Meta, verbs map[string]ns.CtlVerb, words map[string]wordVerb, show func(res any) (string, error)) *vfs.Ctl {
	ctl := r.space.CtlShow(dir, meta, verbs, show)
	parsed := ctl.Exec
	file := abi.Path(meta.Path)
	ctl.Exec = func(ctx context.Context, cred vfs.Cred, line string) (string, error) {
		text := strings.TrimLeft(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), " \t")
		verb, rest := text, ""
		if i := strings.IndexAny(text, " \t"); i >= 0 {
			verb, rest = text[:i], strings.TrimLeft(text[i:], " \t")
		}
		fn, ok := words[verb]
		if !ok || strings.HasPrefix(rest, "{") || !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			// JSON args, or a line ns refuses with its own message.
			return parsed(ctx, cred, line)
		}
		c := ns.CallerOf(cred, dir)
		ws, err := splitWords(rest)
		var b kernel.Bound
		if err == nil {
			b, err = fn(ws)
		}
		if err != nil {
			if b.Name() != "" {
				err = abi.E(abi.Op(b.Name()), file, err)
			} else {
				err = abi.E(file, err)
			}
			r.k.NoteError(c.Uid, dir, err)
			return "", err
		}
		res, err := r.k.Make(ctx, c, b)
		if err != nil {
			return "", err
		}
		return show(res)
	}
	return ctl
}

// openWords parses clone's open line:
//
//	open [network=none|full] [mount=<path>:<guest>[:ro|rw]]... [workdir=<guest>]
//	     [ttl=<duration>] [env=<K>=<V>]... [label=<k>=<v>]...
//
// A mount's path is a path of the caller's namespace (~ is their home); a
// mount without a mode is read-write (abi.ParseMount), as gsv's --mount. The network is "none" unless given.
func openWords(words []string) (string, any, error) {
	call := abi.ProcessSessionOpen.Name
	loc := &abi.ProcessLocalTarget{NetworkMode: abi.NetworkNone}
	a := &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: loc}}
	kv := func(opt, v string) (string, string, error) {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return "", "", abi.E(abi.Invalid, fmt.Sprintf("%s=%q: want %s=<name>=<value>", opt, v, opt))
		}
		return k, val, nil
	}
	seen := map[string]bool{} // options and env/label names given once only
	once := func(name string) error {
		if seen[name] {
			return abi.E(abi.Invalid, fmt.Sprintf("option %q is given more than once", name))
		}
		seen[name] = true
		return nil
	}
	for _, w := range words {
		key, v, ok := strings.Cut(w, "=")
		if !ok {
			return call, nil, abi.E(abi.Invalid, fmt.Sprintf("%q: usage: open [network=none|full] [mount=<path>:<guest>[:ro|rw]]... [workdir=<guest>] [ttl=<duration>] [env=<K>=<V>]... [label=<k>=<v>]...", w))
		}
		switch key {
		case "network", "workdir", "ttl":
			if err := once(key); err != nil {
				return call, nil, err
			}
		case "env", "label":
			if k, _, _ := strings.Cut(v, "="); k != "" {
				if err := once(key + "=" + k); err != nil {
					return call, nil, err
				}
			}
		}
		switch key {
		case "network":
			loc.NetworkMode = v
		case "mount":
			m, err := abi.ParseMount(v)
			if err != nil {
				return call, nil, err
			}
			loc.Mounts = append(loc.Mounts, m)
		case "workdir":
			loc.Workdir = v
		case "ttl":
			d, err := time.ParseDuration(v)
			if err != nil {
				return call, nil, abi.E(abi.Invalid, fmt.Sprintf("ttl=%q is not a duration (such as 1h)", v))
			}
			n := int64(d)
			a.SessionTTLNs = &n
		case "env":
			k, val, err := kv("env", v)
			if err != nil {
				return call, nil, err
			}
			if loc.Env == nil {
				loc.Env = map[string]string{}
			}
			loc.Env[k] = val
		case "label":
			k, val, err := kv("label", v)
			if err != nil {
				return call, nil, err
			}
			if a.Labels == nil {
				a.Labels = map[string]string{}
			}
			a.Labels[k] = val
		default:
			return call, nil, abi.E(abi.Invalid, fmt.Sprintf("unknown option %q", key))
		}
	}
	return call, a, nil
}

// splitWords splits s into words as a shell does, without expansions:
// blanks separate words; single quotes quote everything up to the next
// single quote; double quotes quote up to the next unescaped double
// quote, inside which a backslash escapes only \, " and $; outside
// quotes a backslash escapes the next character.
func splitWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, abi.E(abi.Invalid, "unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`\"$`, s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, abi.E(abi.Invalid, "unterminated double quote")
			}
			inWord = true
		case '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
