package mcp

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// Options configure the MCP room.
type Options struct {
	Logger *slog.Logger
	// Now is the room's clock; nil means time.Now.
	Now func() time.Time
	// Version is the client version the room tells servers.
	Version string
	// CallbackOrigin is the origin (scheme://host[:port]) of the daemon's
	// HTTP listener, whose /oauth/callback ends a sign-in; "" for none
	// (then only a server added with callbackHost can sign in).
	CallbackOrigin string
}

// Room is the MCP room (ns.Room): each user's MCP servers (sys.mcp.*),
// their connections, and /mcp.
type Room struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	now   func() time.Time
	// results is where large results are kept, a directory per server
	// (STATE/mcp/results/<server id>), readable by the daemon alone.
	results string
	client  *sdk.Client
	// callback is Options.CallbackOrigin.
	callback string

	// ctx ends when the room closes: every connection and dial ends.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	links  map[string]*link // by server id
	closed bool
	// sessions are the connections' client sessions, each with its link
	// and connection: whom a list_changed notification is about.
	sessions map[*sdk.ClientSession]sessionOf
	wg       sync.WaitGroup // the dials and the watchers

	// cacheMu guards cache and cacheGen: findForCall's records, and how
	// many times they were forgotten (store.go).
	cacheMu  sync.Mutex
	cache    map[recKey]*record
	cacheGen uint64

	// changes are when each user's servers last changed (added,
	// removed, discovered, connected or failed), by uid.
	changes *ns.Changes
}

var _ ns.Room = (*Room)(nil)

// Open migrates the room's schema and prepares a Room over space. It
// connects no server: a server connects when something needs it.
func Open(space *ns.Space, opts Options) (*Room, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if err := k.Store.Migrate("mcp", migrations); err != nil {
		return nil, err
	}
	results := filepath.Join(k.StateDir(), "mcp", "results")
	if err := os.MkdirAll(results, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Room{k: k, space: space, st: k.Store, log: opts.Logger, now: opts.Now, results: results, callback: strings.TrimSuffix(opts.CallbackOrigin, "/"),
		ctx: ctx, cancel: cancel, links: map[string]*link{}, cache: map[recKey]*record{}, sessions: map[*sdk.ClientSession]sessionOf{}, changes: ns.NewChanges()}
	// A server that says its tools, resources or prompts changed is
	// discovered again (docs/mcp.md, *Discovery*).
	changed := func(cs sdk.Session) {
		if c, ok := cs.(*sdk.ClientSession); ok {
			m.listChanged(c)
		}
	}
	m.client = sdk.NewClient(&sdk.Implementation{Name: "gsvfs", Version: opts.Version}, &sdk.ClientOptions{Logger: opts.Logger,
		ToolListChangedHandler:     func(_ context.Context, r *sdk.ToolListChangedRequest) { changed(r.Session) },
		PromptListChangedHandler:   func(_ context.Context, r *sdk.PromptListChangedRequest) { changed(r.Session) },
		ResourceListChangedHandler: func(_ context.Context, r *sdk.ResourceListChangedRequest) { changed(r.Session) },
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			if r.Params != nil {
				m.resourceUpdated(r.Session, r.Params.URI)
			}
		},
	})
	return m, nil
}

// Close ends every connection (each stdio server's command and session
// go with it) and waits for the room's goroutines. It is safe to call
// more than once.
func (m *Room) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	links := m.links
	m.links = map[string]*link{}
	m.mu.Unlock()
	m.cancel()
	for _, l := range links {
		l.close()
	}
	m.wg.Wait()
	return nil
}

// spawn runs f in a goroutine the room waits for at Close; it reports
// false (and runs nothing) once the room is closing.
func (m *Room) spawn(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// link is the link of server rec, made on first use.
func (m *Room) link(rec *record) *link {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.links[rec.id]; ok {
		return l
	}
	l := &link{m: m, id: rec.id, uid: rec.uid, state: abi.McpNotConnected}
	l.ctx, l.end = context.WithCancel(m.ctx)
	if m.closed {
		l.closed = true
		l.state = abi.McpFailed
		l.err = errLinkClosed.Error()
		return l
	}
	m.links[rec.id] = l
	return l
}

// existing is server id's link if it has one, else nil.
func (m *Room) existing(id string) *link {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.links[id]
}

// drop ends and forgets server id's link.
func (m *Room) drop(id string) {
	m.mu.Lock()
	l := m.links[id]
	delete(m.links, id)
	m.mu.Unlock()
	if l != nil {
		l.close()
	}
}

// touch notes that l's user's servers changed (their directory's mtime).
func (m *Room) touch(l *link) { m.changes.Touch(strconv.FormatUint(uint64(l.uid), 10)) }

// Syscalls is the room's syscall table: sys.mcp.* (seed 003), the
// search the agents use, and the Internal calls its files make.
func (m *Room) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.SysMcpAdd, m.add),
		kernel.Handle(abi.SysMcpList, m.list),
		kernel.Handle(abi.SysMcpRemove, m.removeCall),
		kernel.Handle(abi.SysMcpRefresh, m.refresh),
		kernel.Handle(abi.SysMcpCall, m.call),
		kernel.Handle(abi.SysMcpTools, m.tools),
		kernel.Handle(abi.SysMcpResourceRead, m.resourceRead),
		kernel.Handle(abi.SysMcpResourceSubscribe, m.subscribe),
		kernel.Handle(abi.SysMcpResourceUnsubscribe, m.unsubscribe),
		kernel.Handle(abi.SysMcpPromptGet, m.promptGet),
		kernel.Handle(abi.SysMcpGet, m.get),
		kernel.Handle(abi.SysMcpResultList, m.resultList),
		kernel.Handle(abi.SysMcpResultOpen, m.resultOpen),
		kernel.Handle(abi.SysOauthStart, m.oauthStart),
		kernel.Handle(abi.SysOauthList, m.oauthList),
		kernel.Handle(abi.SysOauthForget, m.oauthForget),
		kernel.Handle(abi.SysOauthCallback, m.oauthCallback),
	}
}

// Mounts are the room's files: /mcp.
func (m *Room) Mounts() []ns.Mount {
	return []ns.Mount{{Path: dirPath, Node: m.topDir()}}
}
