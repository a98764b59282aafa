package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/mcpio"
)

// The connection's timing.
const (
	// connectTimeout bounds a server's start and handshake (an npx
	// server may download its package first).
	connectTimeout = 2 * time.Minute
	// discoverTimeout bounds a discovery's listings.
	discoverTimeout = time.Minute
	// firstRetry and maxRetry are the first and the longest wait before
	// reconnecting a server whose connection ended; retries is how many
	// reconnects are tried before the server waits, failed, for a call
	// or a refresh; stableAfter is how long a connection must have
	// lasted for the count to start over.
	firstRetry  = time.Second
	maxRetry    = 5 * time.Minute
	retries     = 6
	stableAfter = time.Minute
	// maxListed is how many tools, resources or prompts of one server
	// are kept.
	maxListed = 1000
	// maxSessionTTL is the longest exec session (docs/sessions.md): a
	// stdio server's session asks for it, or the owner's ceiling.
	maxSessionTTL = 24 * time.Hour
)

// discovery is what a discovery found on a server.
type discovery struct {
	instructions *string
	capabilities json.RawMessage
	tools        []abi.McpToolSummary
	resources    []abi.McpResourceSummary
	prompts      []abi.McpPromptSummary
	// warning says what of the server's answer was refused (a tool's
	// name), "" for nothing.
	warning string
}

// link is the live side of one server: its state and, while it is
// connected, its connection. A server has one link while the room runs;
// nothing connects until something needs the server (a call, an add, a
// refresh).
type link struct {
	m   *Room
	id  string
	uid uint32
	ctx context.Context // ends when the link closes (removed, or the room)
	end context.CancelFunc

	mu       sync.Mutex
	state    string
	err      string
	authURL  string        // the sign-in the server waits for (authenticating), "" for none
	live     *conn         // the connection, nil if none
	dialing  chan struct{} // closed when the dial under way ends; nil if none
	dialErr  error         // why the last dial failed
	failures int           // reconnects since the last stable connection
	retry    *time.Timer
	closed   bool
	// rediscovering is whether a discovery after a list_changed runs;
	// again, whether another list_changed came meanwhile.
	rediscovering, again bool
	// subs are the resource URIs subscribed to (subscribe.go).
	subs map[string]bool
}

// conn is one connection to a server.
type conn struct {
	name string
	cs   *sdk.ClientSession
	pipe abi.ExecPipe // a stdio server's command; nil for a URL
	stop func()       // ends the transport: the command and its session, or the HTTP client
	up   time.Time
	done chan struct{} // closed when the connection has ended
	once sync.Once
	// forget drops the connection from the room's sessions; nil before
	// it is there.
	forget func()
}

// ended reports whether the connection has ended (its watcher saw it).
func (c *conn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close ends the connection and what carries it. It is safe to call
// more than once.
func (c *conn) close() {
	c.once.Do(func() {
		if c.forget != nil {
			c.forget()
		}
		c.cs.Close()
		c.stop()
	})
}

// why says how a connection ended: a stdio server's exit and the end of
// its stderr, waiting a moment for its receipt; "" if nothing is known.
func (c *conn) why() string {
	if c.pipe == nil {
		return ""
	}
	select {
	case <-c.pipe.Done():
	case <-time.After(2 * time.Second):
		return ""
	}
	return describeExit(c.pipe.Receipt())
}

// describeExit says how a stdio server's command ended.
func describeExit(r *abi.ExecResult) string {
	if r == nil {
		return ""
	}
	var s string
	switch r.Status {
	case abi.ExecOK:
		s = fmt.Sprintf("the command exited with status %d", r.ExitCode)
	case abi.ExecSignaled:
		s = fmt.Sprintf("the command was killed (exit %d)", r.ExitCode)
	case abi.ExecTimeout:
		s = "the command reached its session's time limit"
	default:
		s = "the command failed: " + r.Error
	}
	if r.Stderr != nil && r.Stderr.InlineText != nil {
		if tail := lastLines(r.Stderr.InlineText.Text, 5, 800); tail != "" {
			s += "; its stderr ends: " + tail
		}
	}
	return s
}

// lastLines is the last n non-empty lines of s, at most max bytes,
// joined with " | ".
func lastLines(s string, n, max int) string {
	var keep []string
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	out := strings.Join(keep, " | ")
	if len(out) > max {
		out = "..." + out[len(out)-max:]
	}
	return out
}

// snapshot is the link's state, error and sign-in URL.
func (l *link) snapshot() (state, err, authURL string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state, l.err, l.authURL
}

// signedIn notes that the server's sign-in finished: its URL is no
// longer shown.
func (l *link) signedIn() {
	l.mu.Lock()
	l.authURL = ""
	l.mu.Unlock()
	l.m.touch(l)
}

// get returns the live connection, connecting (or waiting for the dial
// under way) if there is none, until ctx ends.
func (l *link) get(ctx context.Context) (*conn, error) {
	l.mu.Lock()
	if l.live != nil && l.live.ended() {
		// Its watcher is about to say so: dial a new one now.
		l.live = nil
	}
	if l.live != nil {
		c := l.live
		l.mu.Unlock()
		return c, nil
	}
	if l.closed {
		l.mu.Unlock()
		return nil, errLinkClosed
	}
	ch := l.dialLocked()
	l.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live != nil {
		return l.live, nil
	}
	return nil, l.dialErr
}

// errLinkClosed is the error of a server removed, or of a room closing,
// while something waited for it.
var errLinkClosed = abi.E(abi.Offline, "the server was removed, or the daemon is stopping")

// refresh ends the connection, if any, and dials again; it returns when
// the dial has ended.
func (l *link) refresh(ctx context.Context) error {
	l.mu.Lock()
	old := l.live
	l.live = nil
	l.failures = 0
	var ch chan struct{}
	if !l.closed {
		ch = l.dialLocked()
	}
	l.mu.Unlock()
	if old != nil {
		old.close()
	}
	if ch == nil {
		return errLinkClosed
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live != nil {
		return nil
	}
	return l.dialErr
}

// dialLocked starts a dial unless one is under way, and returns the
// channel closed at its end. l.mu is held.
func (l *link) dialLocked() chan struct{} {
	if l.dialing != nil {
		return l.dialing
	}
	if l.retry != nil {
		l.retry.Stop()
		l.retry = nil
	}
	ch := make(chan struct{})
	l.dialing = ch
	l.state, l.err = abi.McpConnecting, ""
	if !l.m.spawn(func() { l.dial(ch) }) {
		l.dialing = nil
		l.state, l.err, l.dialErr = abi.McpFailed, errLinkClosed.Error(), errLinkClosed
		close(ch)
	}
	return ch
}

// dial connects and discovers, then makes the connection the live one
// and watches it.
func (l *link) dial(ch chan struct{}) {
	c, d, err := l.m.connect(l)
	l.mu.Lock()
	l.dialing = nil
	if err == nil && l.closed {
		c.close()
		err = errLinkClosed
	}
	var wait *needSignIn
	switch {
	case errors.As(err, &wait):
		// Not a failure: the server waits for its owner's sign-in.
		l.state, l.err, l.dialErr, l.authURL = abi.McpAuthenticating, wait.Error(), err, wait.url
	case err != nil:
		l.state, l.err, l.dialErr = abi.McpFailed, err.Error(), err
	default:
		l.live, l.state, l.err, l.dialErr, l.authURL = c, abi.McpReady, d.warning, nil, ""
		if !l.m.spawn(func() { l.watch(c) }) {
			c.close()
		} else if len(l.subs) > 0 {
			l.m.spawn(func() { l.resubscribe(c) })
		}
	}
	close(ch)
	l.mu.Unlock()
	l.m.touch(l)
}

// watch waits for the connection's end, then fails the server (with
// what ended it) and reconnects it with backoff.
func (l *link) watch(c *conn) {
	c.cs.Wait()
	close(c.done)
	why := c.why()
	c.close()
	timedOut := c.pipe != nil && c.pipe.Receipt() != nil && c.pipe.Receipt().Status == abi.ExecTimeout
	l.mu.Lock()
	if l.live == c {
		l.live = nil
		switch {
		case l.closed:
		case timedOut:
			// Its command reached the exec ceiling: nothing is wrong, and
			// the next call starts it again.
			l.state, l.err, l.failures = abi.McpNotConnected, "", 0
		default:
			l.state, l.err = abi.McpFailed, "the connection ended"
			if why != "" {
				l.err += ": " + why
			}
			if time.Since(c.up) > stableAfter {
				l.failures = 0
			}
			if l.failures < retries {
				wait := min(maxRetry, firstRetry<<l.failures)
				l.failures++
				l.retry = time.AfterFunc(wait, l.reconnect)
			}
		}
	}
	l.mu.Unlock()
	l.m.touch(l)
}

// reconnect dials again after a backoff, unless something else did.
func (l *link) reconnect() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retry = nil
	if l.closed || l.live != nil || l.dialing != nil {
		return
	}
	l.dialLocked()
}

// close ends the link: its connection, its dial (whose context ends) and
// its retries. It is safe to call more than once.
func (l *link) close() {
	l.end()
	l.mu.Lock()
	l.closed = true
	c := l.live
	l.live = nil
	if l.retry != nil {
		l.retry.Stop()
		l.retry = nil
	}
	l.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// connect connects to server l.id and discovers it.
func (m *Room) connect(l *link) (*conn, *discovery, error) {
	rec, err := m.byID(l.ctx, l.id)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
	defer cancel()
	var c *conn
	if rec.stdio != nil {
		c, err = m.connectStdio(ctx, l.ctx, rec)
	} else {
		c, err = m.connectURL(ctx, l.ctx, rec)
	}
	if err != nil {
		if ctx.Err() != nil && l.ctx.Err() == nil {
			err = abi.E(abi.Timeout, fmt.Sprintf("the server did not answer within %s", connectTimeout))
		}
		return nil, nil, err
	}
	// From now on a list_changed of the server is followed.
	m.mu.Lock()
	m.sessions[c.cs] = sessionOf{l: l, c: c}
	m.mu.Unlock()
	c.forget = func() {
		m.mu.Lock()
		delete(m.sessions, c.cs)
		m.mu.Unlock()
	}
	l.mu.Lock()
	l.state = abi.McpDiscovering
	l.mu.Unlock()
	dctx, dcancel := context.WithTimeout(l.ctx, discoverTimeout)
	defer dcancel()
	d, err := discover(dctx, c.cs)
	if err == nil {
		err = m.saveDiscovery(l.ctx, rec.id, d, m.now().UnixMilli())
	}
	if err != nil {
		c.close()
		return nil, nil, abi.E(fmt.Sprintf("discovering its tools: %v", err))
	}
	c.up = time.Now()
	return c, d, nil
}

// owner is the caller a server's sessions are opened as: its owner, with
// the narrowing of whoever added it.
func (m *Room) owner(ctx context.Context, rec *record) (*kernel.Caller, error) {
	id, err := m.k.IdentityOf(ctx, rec.uid)
	if err != nil {
		return nil, err
	}
	id.Process = rec.narrow
	return &kernel.Caller{Identity: id}, nil
}

// connectStdio starts a stdio server: an exec session of its owner's,
// opened as its record says, and its command piped to the SDK's client
// (newline-delimited JSON-RPC over its stdin and stdout). ctx bounds the
// start; life is the connection's lifetime.
func (m *Room) connectStdio(ctx, life context.Context, rec *record) (*conn, error) {
	who, err := m.owner(ctx, rec)
	if err != nil {
		return nil, err
	}
	st := rec.stdio
	network := st.NetworkMode
	if network == "" {
		network = abi.NetworkFull
	}
	// The session lives as long as the owner may keep one, so that the
	// command ends at its exec ceiling (a timeout: the server then
	// waits, not-connected, for the next call) rather than with its
	// session.
	pc, err := kernel.Do(ctx, m.k, who, abi.ProcessCapGet, nil)
	if err != nil {
		return nil, err
	}
	ttl := pc.MaxTTLNs
	if ttl <= 0 {
		ttl = int64(maxSessionTTL)
	}
	target := abi.ProcessTarget{Local: &abi.ProcessLocalTarget{Mounts: st.Mounts, Workdir: st.Workdir, NetworkMode: network}}
	if dev := remoteDevice(st); dev != "" {
		// On a remote device: its session, as the device's user; the
		// pipe crosses the device's connection.
		target = abi.ProcessTarget{Device: &abi.ProcessDeviceTarget{ID: dev, ProcessLocalTarget: *target.Local}}
	}
	open, err := kernel.Do(ctx, m.k, who, abi.ProcessSessionOpen, &abi.SessionOpenArgs{
		Target: target, SessionTTLNs: &ttl, Labels: map[string]string{"mcp": rec.name}})
	if err != nil {
		return nil, abi.E(fmt.Sprintf("opening its exec session: %v", err))
	}
	if open.Status != abi.SessionReady {
		return nil, abi.E(abi.Offline, fmt.Sprintf("its exec session did not open: %s: %s", open.ErrorCode, open.Error))
	}
	endSession := func() {
		// The session goes, with every process of the command.
		kernel.Do(context.Background(), m.k, who, abi.ProcessSessionSignal, &abi.SessionSignalArgs{SessionID: open.SessionID, Signal: abi.SignalKill})
	}
	pipe, err := kernel.Do(ctx, m.k, who, abi.ProcessExecPipe, &abi.ExecArgs{SessionID: open.SessionID, Argv: st.Command, EnvPatch: st.Env})
	if err != nil {
		endSession()
		return nil, abi.E(fmt.Sprintf("starting its command: %v", err))
	}
	// The start is bounded by ctx: past it, the command is stopped, which
	// ends the handshake.
	stopStart := context.AfterFunc(ctx, pipe.Stop)
	cs, err := m.client.Connect(life, &mcpio.Transport{Reader: pipe.Stdout(), Writer: pipe.Stdin()}, nil)
	stopped := !stopStart()
	if err != nil {
		pipe.Stop()
		why := (&conn{pipe: pipe}).why()
		endSession()
		if stopped {
			return nil, abi.E(abi.Timeout, fmt.Sprintf("the server did not answer within %s", connectTimeout))
		}
		if why != "" {
			return nil, abi.E(abi.Offline, fmt.Sprintf("its handshake failed (%v): %s", err, why))
		}
		return nil, abi.E(abi.Offline, fmt.Sprintf("its handshake failed: %v", err))
	}
	return &conn{name: rec.name, cs: cs, pipe: pipe, done: make(chan struct{}), stop: func() {
		pipe.Stop()
		endSession()
	}}, nil
}

// connectURL connects to a URL server: streamable HTTP, SSE, or (auto)
// streamable HTTP and, if that fails, SSE. The SDK's client falls back
// from the stateless protocol to the initialize handshake by itself.
func (m *Room) connectURL(ctx, life context.Context, rec *record) (*conn, error) {
	if _, err := checkURL(rec.url); err != nil {
		return nil, err
	}
	hc := newHTTPClient(rec.headers)
	ht := hc.Transport.(*headerTransport)
	// A 401 starts a sign-in; the owner's token, once they signed in,
	// goes with every request (refreshed before it expires).
	si := &signIn{m: m, rec: rec, hc: hc}
	// The handshake is bounded by ctx: past it, the connection's context
	// ends, which ends every request.
	cctx, cancel := context.WithCancel(life)
	stopStart := context.AfterFunc(ctx, cancel)
	defer stopStart()
	dial := func(kind string) (*sdk.ClientSession, error) {
		var t sdk.Transport
		if kind == abi.McpSSE {
			t = &sdk.SSEClientTransport{Endpoint: rec.url, HTTPClient: hc}
		} else {
			// No retries of a broken stream: a server that went away
			// fails its calls at once, and the room reconnects.
			t = &sdk.StreamableClientTransport{Endpoint: rec.url, HTTPClient: hc, MaxRetries: -1, OAuthHandler: si}
		}
		return m.client.Connect(cctx, t, nil)
	}
	var cs *sdk.ClientSession
	var err error
	switch rec.transport {
	case abi.McpSSE:
		cs, err = dial(abi.McpSSE)
	case abi.McpStreamableHTTP:
		cs, err = dial(abi.McpStreamableHTTP)
	default:
		cs, err = dial(abi.McpStreamableHTTP)
		if err != nil && cctx.Err() == nil && si.outcome() == nil {
			var err2 error
			if cs, err2 = dial(abi.McpSSE); err2 != nil {
				err = fmt.Errorf("streamable HTTP: %v; SSE: %v", err, err2)
			} else {
				err = nil
			}
		}
	}
	if err != nil {
		cancel()
		ht.close()
		if why := si.outcome(); why != nil {
			return nil, why
		}
		return nil, abi.E(abi.Offline, fmt.Sprintf("connecting to %s: %v", rec.url, err))
	}
	return &conn{name: rec.name, cs: cs, done: make(chan struct{}), stop: func() {
		cancel()
		ht.close()
	}}, nil
}

// discover lists a connected server's tools, resources and prompts (the
// ones it says it has). A tool whose name could not be a file name is
// left out, and the discovery's warning says so.
func discover(ctx context.Context, cs *sdk.ClientSession) (*discovery, error) {
	d := &discovery{}
	var caps *sdk.ServerCapabilities
	if init := cs.InitializeResult(); init != nil {
		if init.Instructions != "" {
			s := init.Instructions
			d.instructions = &s
		}
		caps = init.Capabilities
		if caps != nil {
			d.capabilities, _ = json.Marshal(caps)
		}
	}
	var refused []string
	if caps == nil || caps.Tools != nil {
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("tools/list: %w", err)
			}
			if len(d.tools) >= maxListed {
				refused = append(refused, fmt.Sprintf("tools past the first %d", maxListed))
				break
			}
			if err := checkName("tool", t.Name); err != nil {
				refused = append(refused, err.Error())
				continue
			}
			d.tools = append(d.tools, abi.McpToolSummary{Name: t.Name, Description: optional(t.Description),
				InputSchema: rawJSON(t.InputSchema), OutputSchema: rawJSON(t.OutputSchema)})
		}
	}
	if caps != nil && caps.Resources != nil {
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/list: %w", err)
			}
			if len(d.resources) >= maxListed {
				refused = append(refused, fmt.Sprintf("resources past the first %d", maxListed))
				break
			}
			d.resources = append(d.resources, abi.McpResourceSummary{URI: r.URI, Name: r.Name, Title: r.Title,
				Description: optional(r.Description), MimeType: r.MIMEType})
		}
	}
	if caps != nil && caps.Resources != nil {
		// Templates too, kept beside the resources; a server that has
		// resources but answers no templates/list (an error) has none.
		n := 0
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				break
			}
			if n >= maxListed {
				refused = append(refused, fmt.Sprintf("resource templates past the first %d", maxListed))
				break
			}
			n++
			d.resources = append(d.resources, abi.McpResourceSummary{URITemplate: r.URITemplate, Name: r.Name, Title: r.Title,
				Description: optional(r.Description), MimeType: r.MIMEType})
		}
	}
	if caps != nil && caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("prompts/list: %w", err)
			}
			if len(d.prompts) >= maxListed {
				refused = append(refused, fmt.Sprintf("prompts past the first %d", maxListed))
				break
			}
			ps := abi.McpPromptSummary{Name: p.Name, Description: optional(p.Description)}
			for _, a := range p.Arguments {
				if a != nil {
					ps.Arguments = append(ps.Arguments, abi.McpPromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
				}
			}
			d.prompts = append(d.prompts, ps)
		}
	}
	if len(refused) > 0 {
		d.warning = "left out: " + strings.Join(refused, "; ")
	}
	return d, nil
}

// optional is s, or nil for "".
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// rawJSON is v as JSON, nil (null) for nil or what does not marshal.
func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

// wentAway reports whether a call's error is its connection's end: the
// connection ended within a moment of it.
func (c *conn) wentAway(err error) bool {
	if err == nil {
		return false
	}
	select {
	case <-c.done:
		return true
	case <-time.After(2 * time.Second):
		return errors.Is(err, sdk.ErrConnectionClosed)
	}
}

// sessionOf is a client session's link and connection.
type sessionOf struct {
	l *link
	c *conn
}

// listChanged follows a server's notifications/tools/list_changed (or
// resources' or prompts'): the server of session cs is discovered
// again, off the connection's reader.
func (m *Room) listChanged(cs *sdk.ClientSession) {
	m.mu.Lock()
	s, ok := m.sessions[cs]
	m.mu.Unlock()
	if ok {
		m.spawn(func() { s.l.rediscover(s.c) })
	}
}

// rediscover lists the tools, resources and prompts of connection c's
// server again and keeps them, as a connection's discovery does; a
// list_changed that comes while it runs makes it list once more. A
// failure is logged and changes nothing kept.
func (l *link) rediscover(c *conn) {
	l.mu.Lock()
	if l.rediscovering {
		l.again = true
		l.mu.Unlock()
		return
	}
	l.rediscovering = true
	l.mu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(l.ctx, discoverTimeout)
		d, err := discover(ctx, c.cs)
		cancel()
		if err == nil {
			err = l.m.saveDiscovery(l.ctx, l.id, d, l.m.now().UnixMilli())
		}
		l.mu.Lock()
		if err != nil {
			l.m.log.Info("mcp: discovering a server again after its list changed", "server", c.name, "err", err)
		} else if l.live == c {
			l.err = d.warning
		}
		if !l.again || c.ended() || l.closed {
			l.rediscovering, l.again = false, false
			l.mu.Unlock()
			break
		}
		l.again = false
		l.mu.Unlock()
	}
	l.m.touch(l)
}
