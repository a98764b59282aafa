package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// dirPath is where the room's files are bound.
const dirPath = "/mcp"

// The files of /mcp. Every listing and every read is a syscall made as
// the reader, and none asks a server anything: they show what the store
// keeps of the last discovery. Only a server's owner (and root) may
// list or read its files.
//
//	/mcp/ctl                            add, remove, refresh (the caller's servers)
//	/mcp/err                            the caller's last failure there
//	/mcp/<user>/<server>/status         the server's state, as key: value lines
//	/mcp/<user>/<server>/ctl            refresh | remove
//	/mcp/<user>/<server>/tools/<tool>/schema   its input schema (JSON)
//	/mcp/<user>/<server>/tools/<tool>/doc      its description and output schema
//	/mcp/<user>/<server>/tools/<tool>/clone    write the arguments, read the result
//	/mcp/<user>/<server>/resources/<name>      a resource's description (JSON)
//	/mcp/<user>/<server>/prompts/<name>        a prompt's description (JSON)
//	/mcp/<user>/<server>/results/<sha256>      a large result, kept

// topDir is /mcp: ctl, err and a directory per user.
func (m *Room) topDir() vfs.Dir {
	ctl := m.space.Ctl(dirPath, ns.RootMeta(dirPath+"/ctl", 0o666), topVerbs())
	errv := m.space.ErrView(dirPath)
	fixed := []vfs.DirEntry{{Name: "ctl", Node: ctl}, {Name: "err", Node: errv}}
	return &vfs.FuncDir{Meta: ns.RootMeta(dirPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			out := append([]vfs.DirEntry(nil), fixed...)
			for _, u := range m.users(ctx, cred) {
				out = append(out, vfs.DirEntry{Name: u.Username, Node: m.userDir(ctx, u)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			for _, e := range fixed {
				if e.Name == name {
					return e.Node, nil
				}
			}
			for _, u := range m.users(ctx, cred) {
				if u.Username == name {
					return m.userDir(ctx, u), nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
}

// users are the users whose directories the reader sees listed: every
// user sys.user.list gives the reader. Whether the reader may look
// inside one is its mode's (its owner's, 0500) and its syscalls' rule.
func (m *Room) users(ctx context.Context, cred vfs.Cred) []abi.User {
	res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.SysUserList, nil)
	if err != nil {
		return nil
	}
	return res.Users
}

// owner is the Meta of user u's files: u's, with mode.
type owner ns.Meta

func (o owner) at(path string, mode fs.FileMode) *ns.Meta { return ns.Meta(o).At(path, mode) }

// userDir is /mcp/<user>: a directory per server of u's.
func (m *Room) userDir(ctx context.Context, u abi.User) vfs.Dir {
	o := owner(ns.UserMeta(ctx, m.k, u.Uid, u.Username))
	path := dirPath + "/" + u.Username
	part := strconv.FormatUint(uint64(u.Uid), 10)
	meta := o.at(path, fs.ModeDir|0o500).WithChanged(func(context.Context, vfs.Cred) time.Time {
		return m.changes.At(time.Time{}, part)
	})
	uid := u.Uid
	return &vfs.FuncDir{Meta: meta,
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.SysMcpList, &abi.McpListArgs{Uid: &uid})
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, len(res.Servers))
			for i, s := range res.Servers {
				out[i] = vfs.DirEntry{Name: s.Name, Node: m.serverDir(o, path, u, s.Name)}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if _, err := m.detail(ctx, cred, uid, name); err != nil {
				return nil, err
			}
			return m.serverDir(o, path, u, name), nil
		}}
}

// detail is server name of uid as the reader may see it (sys.mcp.get).
func (m *Room) detail(ctx context.Context, cred vfs.Cred, uid uint32, name string) (*abi.McpServerDetail, error) {
	return kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.SysMcpGet, &abi.McpGetArgs{Uid: uid, ServerID: name})
}

// serverDir is /mcp/<user>/<server>.
func (m *Room) serverDir(o owner, parent string, u abi.User, name string) vfs.Dir {
	path := parent + "/" + name
	uid := u.Uid
	status := &vfs.View{Meta: o.at(path+"/status", 0o400), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		d, err := m.detail(ctx, cred, uid, name)
		if err != nil {
			return nil, err
		}
		return renderStatus(d), nil
	}}
	ctl := m.space.Ctl(path, o.at(path+"/ctl", 0o600), serverVerbs(uid, name))
	errv := m.space.ErrView(path)
	errv.Meta = o.at(path+"/err", 0o400)
	ents := []vfs.DirEntry{
		{Name: "status", Node: status},
		{Name: "ctl", Node: ctl},
		{Name: "err", Node: errv},
		{Name: "tools", Node: m.toolsDir(o, path+"/tools", uid, name)},
		{Name: "resources", Node: m.listDir(o, path+"/resources", uid, name, resourceFiles)},
		{Name: "prompts", Node: m.listDir(o, path+"/prompts", uid, name, promptFiles)},
		{Name: "results", Node: m.resultsDir(o, path+"/results", uid, name)},
	}
	return vfs.NewDir(o.at(path, fs.ModeDir|0o500), ents...)
}

// renderStatus is a server's status file: key: value lines.
func renderStatus(d *abi.McpServerDetail) []byte {
	var b bytes.Buffer
	line := func(k, v string) { fmt.Fprintf(&b, "%s: %s\n", k, oneLine(v)) }
	line("id", d.ServerID)
	line("name", d.Name)
	line("transport", d.Transport)
	if d.URL != "" {
		line("url", d.URL)
	}
	if len(d.Command) > 0 {
		line("command", strings.Join(d.Command, " "))
		line("network", d.NetworkMode)
		if d.Device != "" {
			line("device", d.Device)
		}
	}
	line("state", d.State)
	if d.Error != nil {
		line("error", *d.Error)
	}
	line("tools", strconv.Itoa(len(d.Tools)))
	line("resources", strconv.Itoa(d.ResourceCount))
	line("templates", strconv.Itoa(d.ResourceTemplateCount))
	line("prompts", strconv.Itoa(len(d.Prompts)))
	line("discovered", time.UnixMilli(d.UpdatedAt).UTC().Format(time.RFC3339))
	return b.Bytes()
}

// oneLine is s with every control character shown as a space: no text of
// a server's can forge a line of a status file.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// toolsDir is /mcp/<user>/<server>/tools: a directory per tool.
func (m *Room) toolsDir(o owner, path string, uid uint32, server string) vfs.Dir {
	return &vfs.FuncDir{Meta: o.at(path, fs.ModeDir|0o500),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			d, err := m.detail(ctx, cred, uid, server)
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, len(d.Tools))
			for i, t := range d.Tools {
				out[i] = vfs.DirEntry{Name: t.Name, Node: m.toolDir(o, path+"/"+t.Name, uid, server, t.Name)}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if _, err := m.tool(ctx, cred, uid, server, name); err != nil {
				return nil, err
			}
			return m.toolDir(o, path+"/"+name, uid, server, name), nil
		}}
}

// tool is the tool name of a server as the reader may see it.
func (m *Room) tool(ctx context.Context, cred vfs.Cred, uid uint32, server, name string) (*abi.McpToolSummary, error) {
	d, err := m.detail(ctx, cred, uid, server)
	if err != nil {
		return nil, err
	}
	for i := range d.Tools {
		if d.Tools[i].Name == name {
			return &d.Tools[i], nil
		}
	}
	return nil, vfs.ErrNotExist
}

// toolDir is /mcp/<user>/<server>/tools/<tool>: schema, doc, clone.
func (m *Room) toolDir(o owner, path string, uid uint32, server, name string) vfs.Dir {
	view := func(file string, render func(t *abi.McpToolSummary) []byte) *vfs.View {
		return &vfs.View{Meta: o.at(path+"/"+file, 0o400), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			t, err := m.tool(ctx, cred, uid, server, name)
			if err != nil {
				return nil, err
			}
			return render(t), nil
		}}
	}
	schema := view("schema", func(t *abi.McpToolSummary) []byte { return indent(t.InputSchema) })
	doc := view("doc", func(t *abi.McpToolSummary) []byte {
		var b bytes.Buffer
		if t.Description != nil {
			b.WriteString(strings.TrimRight(*t.Description, "\n") + "\n")
		}
		if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
			b.WriteString("\nOutput schema:\n")
			b.Write(indent(t.OutputSchema))
		}
		return b.Bytes()
	})
	clone := &vfs.Call{Meta: o.at(path+"/clone", 0o600), Do: func(ctx context.Context, cred vfs.Cred, req []byte) []byte {
		c := ns.CallerOf(cred, path)
		res, err := kernel.Do(ctx, m.k, c, abi.SysMcpCall, &abi.McpCallArgs{Uid: &uid, ServerID: server, Name: name, Arguments: bytes.TrimSpace(req)})
		if err != nil {
			m.k.NoteError(c.Uid, path, err)
			b, _ := json.Marshal(map[string]*abi.FrameError{"error": {Code: abi.Code(err), Message: err.Error()}})
			return append(b, '\n')
		}
		b, _ := json.Marshal(res)
		return append(b, '\n')
	}}
	errv := m.space.ErrView(path)
	errv.Meta = o.at(path+"/err", 0o400)
	return vfs.NewDir(o.at(path, fs.ModeDir|0o500),
		vfs.DirEntry{Name: "schema", Node: schema},
		vfs.DirEntry{Name: "doc", Node: doc},
		vfs.DirEntry{Name: "clone", Node: clone},
		vfs.DirEntry{Name: "err", Node: errv},
	)
}

// indent is JSON indented, with a final newline; "null\n" for nothing.
func indent(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null\n")
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return append([]byte(nil), raw...)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// named is one file of a list directory: its name and its content.
type named struct {
	name string
	body []byte
}

// resourceFiles are a server's resources as files, named by their names
// made file names (fileName).
func resourceFiles(d *abi.McpServerDetail) []named {
	seen := map[string]int{}
	var out []named
	for _, r := range d.Resources {
		b, _ := json.MarshalIndent(r, "", "  ")
		out = append(out, named{uniqueName(seen, fileName(r.Name, r.URI+r.URITemplate)), append(b, '\n')})
	}
	return out
}

// promptFiles are a server's prompts as files.
func promptFiles(d *abi.McpServerDetail) []named {
	seen := map[string]int{}
	var out []named
	for _, p := range d.Prompts {
		b, _ := json.MarshalIndent(p, "", "  ")
		out = append(out, named{uniqueName(seen, fileName(p.Name, "prompt")), append(b, '\n')})
	}
	return out
}

// fileName is name (or, if empty, alt) made a file name: "/", control
// and space characters become "_", "." and ".." get a "_" in front, at
// most maxName bytes.
func fileName(name, alt string) string {
	if name == "" {
		name = alt
	}
	s := strings.Map(func(r rune) rune {
		if r == '/' || unicode.IsControl(r) || unicode.IsSpace(r) || r == 0xfffd {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(name, "_"))
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return cut(s, maxName)
}

// uniqueName is name, or name~N if an earlier file has it.
func uniqueName(seen map[string]int, name string) string {
	seen[name]++
	if n := seen[name]; n > 1 {
		return fmt.Sprintf("%s~%d", name, n)
	}
	return name
}

// listDir is a directory of files made by files from a server's detail.
func (m *Room) listDir(o owner, path string, uid uint32, server string, files func(*abi.McpServerDetail) []named) vfs.Dir {
	list := func(ctx context.Context, cred vfs.Cred) ([]named, error) {
		d, err := m.detail(ctx, cred, uid, server)
		if err != nil {
			return nil, err
		}
		return files(d), nil
	}
	node := func(name string) *vfs.View {
		return &vfs.View{Meta: o.at(path+"/"+name, 0o400), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			fs, err := list(ctx, cred)
			if err != nil {
				return nil, err
			}
			for _, f := range fs {
				if f.name == name {
					return f.body, nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
	}
	return &vfs.FuncDir{Meta: o.at(path, fs.ModeDir|0o500),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			fs, err := list(ctx, cred)
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, len(fs))
			for i, f := range fs {
				out[i] = vfs.DirEntry{Name: f.name, Node: node(f.name)}
			}
			return out, nil
		}}
}

// resultsDir is /mcp/<user>/<server>/results: the large results kept.
func (m *Room) resultsDir(o owner, path string, uid uint32, server string) vfs.Dir {
	node := func(digest string) *vfs.Backed {
		return &vfs.Backed{Meta: o.at(path+"/"+digest, 0o400), OpenFile: func(ctx context.Context, cred vfs.Cred) (*os.File, error) {
			return kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.SysMcpResultOpen, &abi.McpResultArgs{Uid: uid, ServerID: server, Digest: digest})
		}}
	}
	return &vfs.FuncDir{Meta: o.at(path, fs.ModeDir|0o500),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			names, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.SysMcpResultList, &abi.McpResultArgs{Uid: uid, ServerID: server})
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, len(names))
			for i, n := range names {
				out[i] = vfs.DirEntry{Name: n, Node: node(n)}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if !validDigest(name) {
				return nil, vfs.ErrNotExist
			}
			return node(name), nil
		}}
}

// topVerbs are the verbs of /mcp/ctl, each on the caller's own servers:
//
//	add <name> <url>              an HTTP server (streamable HTTP, or SSE)
//	add <name> -- <argv...>       not here: a stdio server takes JSON args
//	remove <name>
//	refresh <name>
//
// A line may carry JSON args instead: add {"name":..,"stdio":{"command":[..]}}.
func topVerbs() map[string]ns.CtlVerb {
	return map[string]ns.CtlVerb{
		"add": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.McpAddArgs{}
			if l.JSON != nil {
				return kernel.Bind(abi.SysMcpAdd, a), nil
			}
			if len(l.Words) != 2 {
				return kernel.Bind(abi.SysMcpAdd, a), abi.E(abi.Invalid, `usage: add <name> <url>, or add {"name":...,"stdio":{"command":[...]}}`)
			}
			a.Name, a.URL = l.Words[0], l.Words[1]
			if t := l.Opt("transport"); t != "" {
				a.Transport = &abi.McpTransport{Type: t}
			}
			return kernel.Bind(abi.SysMcpAdd, a), nil
		},
		"remove":  byName(abi.SysMcpRemove, "remove"),
		"refresh": byName(abi.SysMcpRefresh, "refresh"),
	}
}

// byName is a verb whose one word names a server of the caller's.
func byName[R any](call abi.Call[abi.McpServerArgs, R], verb string) ns.CtlVerb {
	return func(l ns.CtlLine) (kernel.Bound, error) {
		a := &abi.McpServerArgs{}
		if l.JSON != nil {
			return kernel.Bind(call, a), nil
		}
		if len(l.Words) != 1 {
			return kernel.Bind(call, a), abi.E(abi.Invalid, "usage: "+verb+" <server>")
		}
		a.ServerID = l.Words[0]
		return kernel.Bind(call, a), nil
	}
}

// serverVerbs are the verbs of /mcp/<user>/<server>/ctl: refresh and
// remove, of that server.
func serverVerbs(uid uint32, server string) map[string]ns.CtlVerb {
	one := func(call abi.Call[abi.McpServerArgs, *abi.McpServerResult]) ns.CtlVerb {
		return func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.McpServerArgs{Uid: &uid, ServerID: server}
			return kernel.Bind(call, a), l.Args(0, 0, "refresh")
		}
	}
	return map[string]ns.CtlVerb{
		"refresh": one(abi.SysMcpRefresh),
		"remove": func(l ns.CtlLine) (kernel.Bound, error) {
			return kernel.Bind(abi.SysMcpRemove, &abi.McpServerArgs{Uid: &uid, ServerID: server}), l.Args(0, 0, "remove")
		},
	}
}
