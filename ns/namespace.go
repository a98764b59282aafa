package ns

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// Meta is the vfs.Meta of a synthetic node: a fixed owner and mode whose
// access the kernel decides with the same rule as for real files.
type Meta struct {
	Path  string      // namespace path; its hash is the inode number
	Uid   uint32      // GSV owner uid
	Gid   uint32      // GSV owner gid
	Mode  fs.FileMode // type and permission bits
	Owner string      // owner name shown over 9P
	Group string      // group name shown over 9P
	// HostUID is the number shown over FUSE; -1 means Uid.
	HostUID int
	// Changed, if set, says when the node's content (a directory's: its
	// entries) last changed as cred sees it: its mtime. A room answers it
	// from its Changes, never by rendering. Nil, or a zero time, is the
	// namespace's start.
	Changed func(ctx context.Context, cred vfs.Cred) time.Time
}

var _ vfs.Meta = (*Meta)(nil)

// bootTime is the mtime of a node that says nothing of its changes.
var bootTime = time.Now()

// Attr implements vfs.Meta.
func (m *Meta) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	uid := m.Uid
	if m.HostUID >= 0 {
		uid = uint32(m.HostUID)
	}
	mtime := bootTime
	if m.Changed != nil && vfs.ContentWanted(ctx) {
		if t := m.Changed(ctx, cred); !t.IsZero() {
			mtime = t
		}
	}
	return vfs.Attr{Ino: vfs.PathIno(m.Path), Mode: m.Mode, Mtime: mtime, Uid: uid, Gid: m.Gid,
		User: m.Owner, Group: m.Group, Synthetic: !m.Mode.IsDir()}, nil
}

// WithChanged is m with the mtime source changed.
func (m *Meta) WithChanged(changed func(ctx context.Context, cred vfs.Cred) time.Time) *Meta {
	c := *m
	c.Changed = changed
	return &c
}

// Access implements vfs.Meta.
func (m *Meta) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error {
	if ident(cred).Allowed(m.Uid, m.Gid, m.Mode, uint32(want)) {
		return nil
	}
	return abi.E(abi.Path(m.Path), abi.Permission, "permission denied")
}

// UserMeta is the owner part of the Meta of the files user uid owns: its
// uid, its primary group, its name and the host uid it maps to; name
// stands for a uid the kernel has no user of.
func UserMeta(ctx context.Context, k *kernel.Kernel, uid uint32, name string) Meta {
	m := Meta{Uid: uid, Gid: kernel.UsersGID, Owner: name, Group: kernel.UsersGroup, HostUID: int(uid)}
	if u, err := k.UserOf(ctx, uid); err == nil {
		m.Owner, m.Gid = u.Username, u.Gid
		if u.HostUID != nil {
			m.HostUID = *u.HostUID
		}
		if u.Gid == kernel.RootGID {
			m.Group = "root"
		}
	}
	return m
}

// At is m for the node at path with mode.
func (m Meta) At(path string, mode fs.FileMode) *Meta {
	m.Path, m.Mode = path, mode
	return &m
}

// RootMeta returns the Meta of a root-owned synthetic node.
func RootMeta(path string, mode fs.FileMode) *Meta {
	return &Meta{Path: path, Mode: mode, Owner: "root", Group: "root", HostUID: 0}
}

// ViewOf returns a view at path rendered by render from the result of the
// syscall d made with args as the reader.
func ViewOf[A, R any](s *Space, path string, mode fs.FileMode, d abi.Call[A, R], args *A, render func(res R) ([]byte, error)) *vfs.View {
	return &vfs.View{Meta: RootMeta(path, mode), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		res, err := kernel.Do(ctx, s.k, CallerOf(cred, ""), d, args)
		if err != nil {
			return nil, err
		}
		return render(res)
	}}
}

// ErrView returns the err view of the directory dir: the message of the
// caller's last failure there.
func (s *Space) ErrView(dir string) *vfs.View {
	return &vfs.View{Meta: RootMeta(dir+"/err", 0o444), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		s, err := kernel.Do(ctx, s.k, CallerOf(cred, ""), abi.SysLastError, &kernel.LastErrorArgs{Dir: dir})
		if err != nil || s == "" {
			return nil, err
		}
		return []byte(s + "\n"), nil
	}}
}

// CtlVerb turns one parsed ctl line into a syscall bound to its args
// (kernel.Bind). It reads the line's key=value options with CtlLine.Opt
// or CtlLine.LookupOpt: an option the verb did not read is unknown, and
// the line fails with 400 naming it. A verb that fails still names its
// syscall when it knows it, for the error's prefix.
type CtlVerb func(l CtlLine) (kernel.Bound, error)

// Ctl returns a ctl file at dir/ctl whose lines are dispatched by verbs.
// A line that is only a JSON object goes to the verb "" if there is one.
// A verb's JSON args are decoded into the args its CtlVerb returns (a
// pointer), so a verb given JSON must return its defaults without
// insisting on words.
// Failures are remembered for dir's err view. The result text of a line is
// its syscall result as JSON.
func (s *Space) Ctl(dir string, meta *Meta, verbs map[string]CtlVerb) *vfs.Ctl {
	return s.CtlShow(dir, meta, verbs, func(res any) (string, error) {
		b, err := json.Marshal(res)
		return string(b), err
	})
}

// CtlShow is Ctl whose result text is show's rendering of the syscall's
// result: a clone file reads back the new id alone. Its lines follow every
// rule of Ctl (one verb table, strict options and JSON args, failures in
// dir's err view, errors naming the syscall and the file).
func (s *Space) CtlShow(dir string, meta *Meta, verbs map[string]CtlVerb, show func(res any) (string, error)) *vfs.Ctl {
	file := abi.Path(meta.Path)
	reject := func(ctx context.Context, cred vfs.Cred, err error) {
		s.k.NoteError(ident(cred).Uid, dir, abi.E(file, abi.Invalid, err))
	}
	return &vfs.Ctl{Meta: meta, Reject: reject, Exec: func(ctx context.Context, cred vfs.Cred, line string) (string, error) {
		c := CallerOf(cred, dir)
		l, err := ParseCtl(line)
		if err != nil {
			s.k.NoteError(c.Uid, dir, err)
			return "", err
		}
		v, ok := verbs[l.Verb]
		if !ok {
			err := abi.E(file, abi.Invalid, fmt.Sprintf("unknown verb %q (want one of %s)", l.Verb, verbList(verbs)))
			s.k.NoteError(c.Uid, dir, err)
			return "", err
		}
		b, err := v(l)
		if err == nil {
			err = l.checkOpts()
		}
		if err != nil {
			if b.Name() != "" {
				err = abi.E(abi.Op(b.Name()), file, err)
			} else {
				err = abi.E(file, err)
			}
			s.k.NoteError(c.Uid, dir, err)
			return "", err
		}
		if l.JSON != nil {
			// JSON args fill the verb's own args (which carry the
			// file's context, such as its pid), or stand alone; either
			// way an unknown field is a 400.
			if b, err = b.WithJSON(l.JSON); err != nil {
				err = abi.E(abi.Op(b.Name()), file, err)
				s.k.NoteError(c.Uid, dir, err)
				return "", err
			}
		}
		res, err := s.k.Make(ctx, c, b)
		if err != nil {
			return "", err
		}
		return show(res)
	}}
}

func verbList(verbs map[string]CtlVerb) string {
	var vs []string
	for v := range verbs {
		if v != "" {
			vs = append(vs, v)
		}
	}
	sort.Strings(vs)
	return strings.Join(vs, ", ")
}

// buildNamespace makes the kernel's part of the tree.
func (s *Space) buildNamespace() *vfs.StaticDir {
	dir := func(path string) *Meta { return RootMeta(path, fs.ModeDir|0o555) }
	etc := vfs.NewDir(dir("/etc"),
		// passwd's mtime is the newest user's creation: users are only
		// ever added.
		vfs.DirEntry{Name: "passwd", Node: &vfs.View{Meta: RootMeta("/etc/passwd", 0o444),
			RenderAt: func(ctx context.Context, cred vfs.Cred) ([]byte, time.Time, error) {
				res, err := kernel.Do(ctx, s.k, CallerOf(cred, ""), abi.SysUserList, nil)
				if err != nil {
					return nil, time.Time{}, err
				}
				var newest int64
				for _, u := range res.Users {
					newest = max(newest, u.Created)
				}
				return renderPasswd(res.Users), time.UnixMilli(newest), nil
			}}},
		vfs.DirEntry{Name: "group", Node: ViewOf(s, "/etc/group", 0o444, abi.SysGroupList, nil, func(res *abi.GroupListResult) ([]byte, error) {
			return renderGroup(res.Groups), nil
		})},
	)
	sys := vfs.NewDir(dir("/sys"),
		vfs.DirEntry{Name: "call", Node: &vfs.Call{Meta: RootMeta("/sys/call", 0o666),
			Do: func(ctx context.Context, cred vfs.Cred, req []byte) []byte {
				return s.k.Serve(ctx, CallerOf(cred, ""), req)
			}}},
		// rpc is /sys/call multiplexed (vfs.Mux): one open carries many
		// requests at once, each answered with its id as soon as it is
		// done, and a cancel frame cancels the one it names. A client
		// that makes many calls over one connection holds one open of it
		// (gsvfs mcp serve).
		vfs.DirEntry{Name: "rpc", Node: &vfs.Mux{Meta: RootMeta("/sys/rpc", 0o666), Tag: frameTag,
			Do: func(ctx context.Context, cred vfs.Cred, req []byte) []byte {
				return s.k.Serve(ctx, CallerOf(cred, ""), req)
			}}},
		vfs.DirEntry{Name: "events", Node: &vfs.Stream{Meta: RootMeta("/sys/events", 0o444),
			Subscribe: func(ctx context.Context, cred vfs.Cred) (vfs.Subscription, error) {
				return kernel.Do(ctx, s.k, CallerOf(cred, ""), abi.SysEvents, nil)
			}}},
		vfs.DirEntry{Name: "config", Node: s.configDir("")},
		// syscalls describes the syscalls the reader may make: each
		// one's doc and the JSON Schemas of its args and result.
		vfs.DirEntry{Name: "syscalls", Node: s.syscallsDir()},
		// statfs is what df shows of the namespace (fs.statfs), as JSON:
		// a remote mount reads it to answer df, which 9P2000 cannot ask.
		vfs.DirEntry{Name: "statfs", Node: &vfs.View{Meta: RootMeta("/sys/statfs", 0o444),
			Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
				st, err := kernel.Do(ctx, s.k, CallerOf(cred, ""), abi.FsStatfs, nil)
				if err != nil {
					return nil, err
				}
				b, err := json.Marshal(vfs.StatFS(st))
				return append(b, '\n'), err
			}}},
	)
	return vfs.NewDir(dir("/"),
		vfs.DirEntry{Name: "dev", Node: devDir()},
		vfs.DirEntry{Name: "etc", Node: etc},
		vfs.DirEntry{Name: "sys", Node: sys},
		vfs.DirEntry{Name: "var", Node: vfs.NewDir(dir("/var"))},
	)
}

// frameTag is the tag of a request line of /sys/rpc: its id, and
// whether it is a cancel frame (abi.FrameTag). A line that is not a
// frame has no tag; the dispatcher answers it with its error.
func frameTag(line []byte) (string, bool) {
	typ, id, err := abi.FrameTag(line)
	if err != nil {
		return "", false
	}
	return id, typ == abi.CancelType
}

// devDir is /dev as the kernel's part of the tree has it: DevFiles. The
// devices room binds its own /dev over it, which lists them too.
func devDir() *vfs.StaticDir {
	return vfs.NewDir(RootMeta("/dev", fs.ModeDir|0o555), DevFiles()...)
}

// devFiles are the nodes of DevFiles, made once.
var devFiles = sync.OnceValue(func() []vfs.DirEntry {
	zero := func(p []byte) { clear(p) }
	random := func(p []byte) { rand.Read(p) }
	fill := map[string]func([]byte){"null": nil, "zero": zero, "random": random, "urandom": random}
	var es []vfs.DirEntry
	for _, name := range abi.DevFiles {
		es = append(es, vfs.DirEntry{Name: name, Node: &vfs.Device{Meta: RootMeta("/dev/"+name, 0o666), Fill: fill[name]}})
	}
	return es
})

// DevFiles are the files of /dev every Unix has (abi.DevFiles): null
// (reads end at once), zero (zeros), random and urandom (the kernel's
// random bytes, crypto/rand), each root's, 0666 and of size 0; writes
// are discarded (vfs.Device). They hold no state, so no syscall serves
// them: the open is checked by their Meta. Whoever serves /dev lists
// them (the devices room beside /dev/gsv and /dev/<device id>).
func DevFiles() []vfs.DirEntry { return slices.Clone(devFiles()) }

// DevFile is the file of DevFiles called name, or nil.
func DevFile(name string) vfs.Node {
	for _, e := range devFiles() {
		if e.Name == name {
			return e.Node
		}
	}
	return nil
}

// configDir is /sys/config/<prefix>: the visible config keys as a tree of
// views, plus, at the top, ctl and err.
func (s *Space) configDir(prefix string) vfs.Dir {
	path := "/sys/config"
	if prefix != "" {
		path += "/" + prefix
	}
	top := prefix == ""
	var ctl *vfs.Ctl
	var errv *vfs.View
	if top {
		set := func(l CtlLine) (kernel.Bound, error) {
			if l.JSON != nil {
				return kernel.Bind(abi.SysConfigSet, nil), nil
			}
			if len(l.Words) < 1 {
				return kernel.Bound{}, abi.E(abi.Invalid, "usage: set <key> <value...>")
			}
			key := l.Words[0]
			val := strings.TrimLeft(strings.TrimPrefix(l.Text(), key), " \t")
			if len(l.Words) == 2 && len(l.Opts) == 0 {
				val = l.Words[1] // rc-quoted single value
			}
			v, _ := json.Marshal(val)
			return kernel.Bind(abi.SysConfigSet, &abi.ConfigSetArgs{Key: key, Value: v}), nil
		}
		unset := func(l CtlLine) (kernel.Bound, error) {
			a := &abi.ConfigUnsetArgs{}
			if err := l.Args(1, 1, "unset <key>"); err != nil {
				return kernel.Bound{}, err
			}
			if l.JSON == nil {
				a.Key = l.Words[0]
			}
			return kernel.Bind(abi.SysConfigUnset, a), nil
		}
		ctl = s.Ctl(path, RootMeta(path+"/ctl", 0o666), map[string]CtlVerb{"set": set, "": set, "unset": unset})
		errv = s.ErrView(path)
	}
	return &vfs.FuncDir{Meta: RootMeta(path, fs.ModeDir|0o555),
		// Find answers ctl and err without asking the store, and other
		// names by their own key prefix only.
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if top && name == "ctl" {
				return ctl, nil
			}
			if top && name == "err" {
				return errv, nil
			}
			key := prefixSlash(prefix) + name
			res, err := kernel.Do(ctx, s.k, CallerOf(cred, ""), abi.SysConfigGet, &abi.ConfigGetArgs{Key: key})
			if err != nil {
				return nil, err
			}
			for _, e := range res.Entries {
				if e.Key == key {
					return s.configValue(key), nil
				}
				if strings.HasPrefix(e.Key, key+"/") {
					return s.configDir(key), nil
				}
			}
			return nil, vfs.ErrNotExist
		},
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			var out []vfs.DirEntry
			if top {
				out = append(out, vfs.DirEntry{Name: "ctl", Node: ctl}, vfs.DirEntry{Name: "err", Node: errv})
			}
			res, err := kernel.Do(ctx, s.k, CallerOf(cred, ""), abi.SysConfigGet, &abi.ConfigGetArgs{Key: prefixSlash(prefix)})
			if err != nil {
				return nil, err
			}
			seen := map[string]bool{}
			for _, e := range res.Entries {
				rest := strings.TrimPrefix(e.Key, prefixSlash(prefix))
				name, sub, isDir := strings.Cut(rest, "/")
				if seen[name] || (top && (name == "ctl" || name == "err")) {
					continue
				}
				seen[name] = true
				key := prefixSlash(prefix) + name
				if isDir && sub != "" {
					out = append(out, vfs.DirEntry{Name: name, Node: s.configDir(key)})
				} else {
					out = append(out, vfs.DirEntry{Name: name, Node: s.configValue(key)})
				}
			}
			return out, nil
		}}
}

func prefixSlash(p string) string {
	if p == "" {
		return ""
	}
	return p + "/"
}

// configValue is the view of one config key.
func (s *Space) configValue(key string) *vfs.View {
	return ViewOf(s, "/sys/config/"+key, 0o444, abi.SysConfigGet, &abi.ConfigGetArgs{Key: key}, func(res *abi.ConfigGetResult) ([]byte, error) {
		for _, e := range res.Entries {
			if e.Key == key {
				return []byte(e.Value + "\n"), nil
			}
		}
		return nil, abi.E(abi.Path("/sys/config/"+key), abi.NotExist, "no such key")
	})
}
