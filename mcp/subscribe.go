package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Resource subscriptions: sys.mcp.resource.subscribe asks a server
// (resources/subscribe; the SDK's subscriptions/listen on the stateless
// protocol) to tell of a resource's changes, and each
// notifications/resources/updated it sends for a URI subscribed to is a
// signal to the server's owner, mcp.resource.updated, and moves the
// mtime of the owner's /mcp directory. The subscriptions are the link's
// (in memory, for the daemon's life): each connection of the server
// subscribes to them again; removing the server ends them.

// maxSubscriptions bounds the URIs subscribed to on one server.
const maxSubscriptions = 256

// resubscribeTimeout bounds each subscribe a new connection makes again.
const resubscribeTimeout = 30 * time.Second

// checkSubscribeURI checks a subscription's URI as a read's is checked.
func checkSubscribeURI(a *abi.McpSubscribeArgs) error {
	if a.URI == "" || len(a.URI) > 8<<10 || strings.ContainsFunc(a.URI, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return abi.E(abi.Path(a.ServerID), abi.Invalid, "uri: want a resource's URI (one line, at most 8 KiB)")
	}
	return nil
}

// subscribe is sys.mcp.resource.subscribe: the server (connected if it
// is not) is asked to tell of a.URI's changes, unless it is already.
func (m *Room) subscribe(ctx context.Context, c *kernel.Caller, a *abi.McpSubscribeArgs) (*abi.McpSubscribeResult, error) {
	if err := checkSubscribeURI(a); err != nil {
		return nil, err
	}
	out := &abi.McpSubscribeResult{Subscribed: true}
	err := m.ask(ctx, c, a.Uid, a.ServerID, a.TimeoutMs, "resource "+truncate(a.URI, 80),
		func(ctx context.Context, rec *record, cs *sdk.ClientSession) error {
			if init := cs.InitializeResult(); init == nil || init.Capabilities == nil || init.Capabilities.Resources == nil ||
				!init.Capabilities.Resources.Subscribe {
				return abi.E(abi.Path(rec.name), abi.Invalid, fmt.Sprintf("MCP server %s: it takes no resource subscriptions", rec.name))
			}
			l := m.link(rec)
			l.mu.Lock()
			already := l.subs[a.URI]
			full := len(l.subs) >= maxSubscriptions
			l.mu.Unlock()
			if already {
				return nil
			}
			if full {
				return abi.E(abi.Path(rec.name), abi.Invalid, fmt.Sprintf("MCP server %s: at most %d subscriptions", rec.name, maxSubscriptions))
			}
			if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: a.URI}); err != nil {
				return err
			}
			l.mu.Lock()
			if l.subs == nil {
				l.subs = map[string]bool{}
			}
			l.subs[a.URI] = true
			l.mu.Unlock()
			out.Changed = true
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// unsubscribe is sys.mcp.resource.unsubscribe: the subscription goes,
// and a connected server is told (resources/unsubscribe); a server that
// is not connected is not connected for it.
func (m *Room) unsubscribe(ctx context.Context, c *kernel.Caller, a *abi.McpSubscribeArgs) (*abi.McpSubscribeResult, error) {
	if err := checkSubscribeURI(a); err != nil {
		return nil, err
	}
	uid, ok := scope(c, a.Uid)
	rec, err := m.find(ctx, uid, a.ServerID)
	if !ok || errors.Is(err, errNoServer) {
		return nil, abi.E(abi.Path(a.ServerID), abi.NotExist, "no such MCP server")
	}
	if err != nil {
		return nil, err
	}
	if err := m.seen(ctx, c, rec.name); err != nil {
		return nil, err
	}
	out := &abi.McpSubscribeResult{}
	l := m.existing(rec.id)
	if l == nil {
		return out, nil
	}
	l.mu.Lock()
	out.Changed = l.subs[a.URI]
	delete(l.subs, a.URI)
	live := l.live
	l.mu.Unlock()
	if out.Changed && live != nil && !live.ended() {
		uctx, cancel := context.WithTimeout(ctx, defaultCallTimeout)
		defer cancel()
		if err := live.cs.Unsubscribe(uctx, &sdk.UnsubscribeParams{URI: a.URI}); err != nil {
			m.log.Info("mcp: unsubscribing", "server", rec.name, "uri", a.URI, "err", err)
		}
	}
	return out, nil
}

// resubscribe subscribes connection c of l to l's subscriptions again
// (a new connection knows none). A failure is logged.
func (l *link) resubscribe(c *conn) {
	l.mu.Lock()
	uris := make([]string, 0, len(l.subs))
	for u := range l.subs {
		uris = append(uris, u)
	}
	l.mu.Unlock()
	for _, u := range uris {
		ctx, cancel := context.WithTimeout(l.ctx, resubscribeTimeout)
		err := c.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: u})
		cancel()
		if err != nil {
			l.m.log.Info("mcp: subscribing again after a reconnect", "server", c.name, "uri", u, "err", err)
		}
	}
}

// resourceUpdated is a server's notifications/resources/updated on
// session cs: for a URI its owner subscribed to, a signal to them and a
// change of their directory.
func (m *Room) resourceUpdated(cs *sdk.ClientSession, uri string) {
	m.mu.Lock()
	s, ok := m.sessions[cs]
	m.mu.Unlock()
	if !ok {
		return
	}
	s.l.mu.Lock()
	sub := s.l.subs[uri]
	s.l.mu.Unlock()
	if !sub {
		return
	}
	kernel.Publish(m.k, abi.SigMcpResourceUpdated, abi.McpResourceUpdated{ServerID: s.l.id, Server: s.c.name, URI: uri},
		kernel.Audience{Uids: []uint32{s.l.uid}})
	m.touch(s.l)
}
