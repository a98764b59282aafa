package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// scope is the uid a call concerns: the caller's own, or, for root,
// uid. ok is false when another caller named another uid.
func scope(c *kernel.Caller, uid *uint32) (uint32, bool) {
	if uid == nil || *uid == c.Uid {
		return c.Uid, true
	}
	if c.IsRoot() {
		return *uid, true
	}
	return 0, false
}

// newID is a new server id: "mcp_" and 16 random base32 letters.
func newID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "mcp_" + strings.ToLower(base32.StdEncoding.EncodeToString(b))
}

// add is sys.mcp.add: it checks the server's definition (a bad one is a
// 400 and nothing is kept), keeps the record, then connects and
// discovers the server. A server that does not come up is kept, failed,
// with its error in the summary (refresh it, or remove it).
func (m *Room) add(ctx context.Context, c *kernel.Caller, a *abi.McpAddArgs) (*abi.McpServerResult, error) {
	uid, ok := scope(c, a.Uid)
	if !ok {
		return nil, abi.E(abi.Permission, "permission denied: only root may add a server for another uid")
	}
	if _, err := m.k.UserOf(ctx, uid); err != nil {
		return nil, err
	}
	if err := checkName("server", a.Name); err != nil {
		return nil, err
	}
	if err := m.seen(ctx, c, a.Name); err != nil {
		return nil, err
	}
	now := m.now().UnixMilli()
	rec := &record{id: newID(), uid: uid, name: a.Name, narrow: c.Identity.Process, created: now, updated: now}
	if a.CallbackHost != "" {
		if a.Stdio != nil {
			return nil, abi.E(abi.Invalid, "callbackHost: a stdio server signs in to nothing")
		}
		origin, err := callbackOrigin(a.CallbackHost)
		if err != nil {
			return nil, err
		}
		rec.callback = origin
	}
	switch {
	case (a.URL == "") == (a.Stdio == nil):
		return nil, abi.E(abi.Invalid, "want exactly one of url (an HTTP server) and stdio (a command)")
	case a.Stdio != nil:
		if a.Transport != nil && (a.Transport.Type != "" && a.Transport.Type != abi.McpTransportStdio || len(a.Transport.Headers) > 0) {
			return nil, abi.E(abi.Invalid, "transport: a stdio server has no HTTP transport or headers")
		}
		if err := checkStdio(a.Stdio); err != nil {
			return nil, err
		}
		rec.transport, rec.stdio = abi.McpTransportStdio, a.Stdio
	default:
		if _, err := checkURL(a.URL); err != nil {
			return nil, err
		}
		rec.transport, rec.url = abi.McpAuto, a.URL
		if a.Transport != nil {
			switch a.Transport.Type {
			case "", abi.McpAuto:
			case abi.McpStreamableHTTP, abi.McpSSE:
				rec.transport = a.Transport.Type
			default:
				return nil, abi.E(abi.Invalid, fmt.Sprintf("transport type %q: want auto, streamable-http or sse", truncate(a.Transport.Type, 40)))
			}
			if err := checkHeaders(a.Transport.Headers); err != nil {
				return nil, err
			}
			rec.headers = a.Transport.Headers
		}
	}
	if err := m.allowed(ctx, rec, c); err != nil {
		return nil, err
	}
	if err := m.insert(ctx, rec); err != nil {
		return nil, err
	}
	m.changes.Touch(fmt.Sprint(uid))
	l := m.link(rec)
	l.refresh(ctx) // its failure is the summary's state and error
	return m.summaryOf(ctx, rec.id)
}

// checkStdio checks a stdio server's definition (the session's own
// checks come at its open).
func checkStdio(s *abi.McpStdio) error {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return abi.E(abi.Invalid, "stdio.command is empty: give the server's argv")
	}
	for _, a := range s.Command {
		if strings.ContainsRune(a, 0) {
			return abi.E(abi.Invalid, "stdio.command holds a NUL byte")
		}
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return abi.E(abi.Invalid, fmt.Sprintf("stdio.env: %q is not a variable's name or holds a NUL byte", truncate(k, 40)))
		}
	}
	switch s.NetworkMode {
	case "", abi.NetworkNone, abi.NetworkFull:
	default:
		return abi.E(abi.Invalid, fmt.Sprintf("stdio.network_mode %q: want none or full", truncate(s.NetworkMode, 40)))
	}
	if s.Device != "" && checkName("device", s.Device) != nil {
		return abi.E(abi.Invalid, fmt.Sprintf("stdio.device %q is not a device's id", truncate(s.Device, 40)))
	}
	return nil
}

// remoteDevice is the remote device a stdio server runs on, "" for the
// daemon's own machine.
func remoteDevice(s *abi.McpStdio) string {
	if s == nil || s.Device == abi.LocalTarget {
		return ""
	}
	return s.Device
}

// checkHeaders checks the headers of a URL server: names are HTTP
// tokens, values hold no control character but tab.
func checkHeaders(h map[string]string) error {
	for k, v := range h {
		if k == "" || strings.IndexFunc(k, func(r rune) bool {
			return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
		}) >= 0 {
			return abi.E(abi.Invalid, fmt.Sprintf("transport.headers: %q is not a header name", truncate(k, 40)))
		}
		if strings.IndexFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) >= 0 {
			return abi.E(abi.Invalid, fmt.Sprintf("transport.headers: the value of %s holds a control character", k))
		}
	}
	return nil
}

// needs is the process capability a server needs of whoever uses it:
// its network (a URL server's requests are the host's network, made
// for its owner) and its mounts at their modes.
func needs(rec *record) abi.ProcessCap {
	need := abi.ProcessCap{Networks: []string{abi.NetworkFull}}
	if rec.stdio != nil {
		if rec.stdio.NetworkMode != "" {
			need.Networks = []string{rec.stdio.NetworkMode}
		}
		if remoteDevice(rec.stdio) != "" {
			// A device's paths are the device's: its route decides who
			// may use it, and the session's network is checked there.
			return need
		}
		for _, mt := range rec.stdio.Mounts {
			need.Mounts = append(need.Mounts, abi.CapMount{Prefix: mt.HostPath, Mode: mt.Mode})
		}
	}
	return need
}

// allowed checks that c's process capability, as rec's owner (with c's
// narrowing), allows what rec needs: nobody reaches through a server
// more than they may open a session with.
func (m *Room) allowed(ctx context.Context, rec *record, c *kernel.Caller) error {
	who := c
	if c.Uid != rec.uid {
		id, err := m.k.IdentityOf(ctx, rec.uid)
		if err != nil {
			return err
		}
		id.Process = c.Identity.Process
		who = &kernel.Caller{Identity: id}
	}
	pc, err := kernel.Do(ctx, m.k, who, abi.ProcessCapGet, nil)
	if err != nil {
		return err
	}
	need := needs(rec)
	if !abi.CapWithin(need, *pc) {
		return abi.E(abi.Path(rec.name), abi.Permission, fmt.Sprintf("your process capability does not allow what this server needs (network %s%s)",
			strings.Join(need.Networks, ","), mountList(need.Mounts)))
	}
	return nil
}

// mountList is ", mounts a:rw b:ro" for mounts, "" for none.
func mountList(ms []abi.CapMount) string {
	if len(ms) == 0 {
		return ""
	}
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.Prefix+":"+m.Mode)
	}
	return ", mounts " + strings.Join(parts, " ")
}

// summary is rec's summary with its link's state.
func (m *Room) summary(rec *record) abi.McpServerSummary {
	s := abi.McpServerSummary{ServerID: rec.id, Uid: rec.uid, Name: rec.name, URL: rec.url, Transport: rec.transport,
		State: abi.McpNotConnected, Instructions: rec.instructions, Capabilities: rec.capabilities,
		Tools: orEmpty(rec.tools), ResourceCount: concrete(rec.resources), ResourceTemplateCount: len(rec.resources) - concrete(rec.resources), PromptCount: len(rec.prompts),
		CreatedAt: rec.created, UpdatedAt: rec.updated}
	if rec.stdio != nil {
		s.Command = rec.stdio.Command
		s.NetworkMode = rec.stdio.NetworkMode
		s.Device = remoteDevice(rec.stdio)
		if s.NetworkMode == "" {
			s.NetworkMode = abi.NetworkFull
		}
	}
	if l := m.existing(rec.id); l != nil {
		state, err, authURL := l.snapshot()
		s.State = state
		if err != "" {
			s.Error = &err
		}
		if authURL != "" {
			s.AuthURL = &authURL
		}
	}
	return s
}

// summaryOf reads server id and returns its summary.
func (m *Room) summaryOf(ctx context.Context, id string) (*abi.McpServerResult, error) {
	rec, err := m.byID(ctx, id)
	if errors.Is(err, errNoServer) {
		return &abi.McpServerResult{}, nil // removed meanwhile
	}
	if err != nil {
		return nil, err
	}
	s := m.summary(rec)
	return &abi.McpServerResult{Server: &s}, nil
}

// list is sys.mcp.list: the servers of the caller (root: of uid), from
// the store and the links' states; no server is asked anything.
func (m *Room) list(ctx context.Context, c *kernel.Caller, a *abi.McpListArgs) (*abi.McpListResult, error) {
	uid, ok := scope(c, a.Uid)
	if !ok {
		return nil, abi.E(abi.Permission, "permission denied: only root may list another uid's servers")
	}
	recs, err := m.byUser(ctx, uid)
	if err == nil {
		recs, err = m.seenOnly(ctx, c, recs)
	}
	if err != nil {
		return nil, err
	}
	out := &abi.McpListResult{Servers: []abi.McpServerSummary{}}
	for _, r := range recs {
		out.Servers = append(out.Servers, m.summary(r))
	}
	return out, nil
}

// removeCall is sys.mcp.remove: the server's connection ends (a stdio
// server's command and session with it), its record and its kept
// results go. A server the caller has not is removed:false.
func (m *Room) removeCall(ctx context.Context, c *kernel.Caller, a *abi.McpServerArgs) (*abi.McpRemoveResult, error) {
	uid, ok := scope(c, a.Uid)
	if !ok {
		return &abi.McpRemoveResult{}, nil
	}
	rec, err := m.find(ctx, uid, a.ServerID)
	if errors.Is(err, errNoServer) {
		return &abi.McpRemoveResult{}, nil
	}
	if err == nil {
		err = m.seen(ctx, c, rec.name)
	}
	if err != nil {
		return nil, err
	}
	if err := m.forgetServer(ctx, rec.id); err != nil {
		return nil, err
	}
	removed, err := m.remove(ctx, rec.id)
	if err != nil {
		return nil, err
	}
	m.drop(rec.id)
	m.dropResults(rec.id)
	m.changes.Touch(fmt.Sprint(uid))
	return &abi.McpRemoveResult{Removed: removed}, nil
}

// refresh is sys.mcp.refresh: the server reconnects and is discovered
// again; its summary says how that went. A server the caller has not is
// server:null.
func (m *Room) refresh(ctx context.Context, c *kernel.Caller, a *abi.McpServerArgs) (*abi.McpServerResult, error) {
	uid, ok := scope(c, a.Uid)
	if !ok {
		return &abi.McpServerResult{}, nil
	}
	rec, err := m.find(ctx, uid, a.ServerID)
	if errors.Is(err, errNoServer) {
		return &abi.McpServerResult{}, nil
	}
	if err == nil {
		err = m.seen(ctx, c, rec.name)
	}
	if err != nil {
		return nil, err
	}
	if err := m.allowed(ctx, rec, c); err != nil {
		return nil, err
	}
	if err := m.link(rec).refresh(ctx); err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return m.summaryOf(ctx, rec.id)
}

// get is the Internal sys.mcp.get: one server of user a.Uid with its
// resources and prompts, for that user or root (to anyone else, it is
// not there).
func (m *Room) get(ctx context.Context, c *kernel.Caller, a *abi.McpGetArgs) (*abi.McpServerDetail, error) {
	if c.Uid != a.Uid && !c.IsRoot() {
		return nil, abi.E(abi.Path(a.ServerID), abi.NotExist, "no such MCP server")
	}
	rec, err := m.find(ctx, a.Uid, a.ServerID)
	if errors.Is(err, errNoServer) {
		return nil, abi.E(abi.Path(a.ServerID), abi.NotExist, "no such MCP server")
	}
	if err == nil {
		err = m.seen(ctx, c, rec.name)
	}
	if err != nil {
		return nil, err
	}
	return &abi.McpServerDetail{McpServerSummary: m.summary(rec), Resources: orEmpty(rec.resources), Prompts: orEmpty(rec.prompts)}, nil
}

// tools is sys.mcp.tools: the caller's tools (root: uid's) whose name or
// description holds every word of the query, the best first; no server
// is asked anything.
func (m *Room) tools(ctx context.Context, c *kernel.Caller, a *abi.McpToolsArgs) (*abi.McpToolsResult, error) {
	uid, ok := scope(c, a.Uid)
	if !ok {
		return nil, abi.E(abi.Permission, "permission denied: only root may search another uid's servers")
	}
	limit := a.Limit
	switch {
	case limit == 0:
		limit = 20
	case limit < 0:
		return nil, abi.E(abi.Invalid, "limit must be positive")
	case limit > 200:
		limit = 200
	}
	recs, err := m.byUser(ctx, uid)
	if err != nil {
		return nil, err
	}
	if a.ServerID != "" {
		recs = slices.DeleteFunc(recs, func(r *record) bool { return r.id != a.ServerID && r.name != a.ServerID })
		if len(recs) == 0 {
			return nil, abi.E(abi.Path(a.ServerID), abi.NotExist, "no such MCP server")
		}
		if err := m.seen(ctx, c, recs[0].name); err != nil {
			return nil, err
		}
	}
	if recs, err = m.seenOnly(ctx, c, recs); err != nil {
		return nil, err
	}
	return &abi.McpToolsResult{Tools: search(recs, a.Query, limit)}, nil
}

// sees is the names of the caller's servers it may use: nil (all) for a
// user; for the calls a process makes as its owner (c.Identity.Pid),
// the process's list (gsv spawn --mcp), read from its record at each
// call.
func (m *Room) sees(ctx context.Context, c *kernel.Caller) (*[]string, error) {
	if c.Identity.Pid == "" {
		return nil, nil
	}
	p, err := kernel.Do(ctx, m.k, c, abi.ProcGet, &abi.PidArgs{Pid: c.Identity.Pid})
	if abi.KindOf(err) == abi.NotExist {
		return nil, nil // an init process (not stored until it runs) sees all
	}
	if err != nil {
		return nil, err
	}
	return p.McpServers, nil
}

// seen checks that c may use the server called name: a process narrowed
// to other servers is refused (403), with the name and its list.
func (m *Room) seen(ctx context.Context, c *kernel.Caller, name string) error {
	list, err := m.sees(ctx, c)
	if err != nil {
		return err
	}
	if abi.McpAllowed(list, name) {
		return nil
	}
	which := "none"
	if len(*list) > 0 {
		which = "only " + strings.Join(*list, ", ")
	}
	return abi.E(abi.Path(name), abi.Permission, fmt.Sprintf("MCP server %s: process %s may use %s of its owner's MCP servers (gsv spawn --mcp)", name, c.Identity.Pid, which))
}

// seenOnly keeps of recs the servers c may use.
func (m *Room) seenOnly(ctx context.Context, c *kernel.Caller, recs []*record) ([]*record, error) {
	list, err := m.sees(ctx, c)
	if err != nil || list == nil {
		return recs, err
	}
	return slices.DeleteFunc(recs, func(r *record) bool { return !abi.McpAllowed(list, r.name) }), nil
}

// concrete is how many of rs are resources rather than templates.
func concrete(rs []abi.McpResourceSummary) int {
	n := 0
	for _, r := range rs {
		if r.URITemplate == "" {
			n++
		}
	}
	return n
}
