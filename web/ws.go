package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Close codes of a WebSocket connection the gateway ends (RFC 6455's
// private range for its own).
const (
	closeReplaced = websocket.StatusCode(4000) // the same client connected again
	closeSession  = websocket.StatusCode(4401) // the session's token was revoked or expired
)

// writeTimeout bounds one frame's write: a client that reads nothing for
// that long is dropped.
const writeTimeout = 30 * time.Second

// errFrame is a response frame's error as the seed writes it: a code, a
// message and, for 425, the call to make next.
type errFrame struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Next    string `json:"next,omitempty"`
}

type errResponse struct {
	Type  string   `json:"type"`
	ID    string   `json:"id"`
	OK    bool     `json:"ok"`
	Error errFrame `json:"error"`
}

// conn is one WebSocket connection: before sys.connect it has no caller;
// after, its requests are dispatched as caller and its subscription's
// signals are written to it as sig frames.
type conn struct {
	s      *Server
	ws     *websocket.Conn
	id     string
	cookie string // the session cookie the upgrade request carried
	ctx    context.Context
	cancel context.CancelFunc
	lim    *rate.Limiter
	sem    chan struct{} // a slot per request in flight

	mu       sync.Mutex // guards caller, key, inflight, closeWith
	caller   *kernel.Caller
	key      clientKey
	inflight map[string]context.CancelFunc
	// closeWith is the status the connection closes with when something
	// other than its loop ends it (endWith), which also closes stop.
	closeWith *closeStatus
	stop      chan struct{}

	wg sync.WaitGroup // the requests, the signal pump and the lease watch
}

type closeStatus struct {
	code   websocket.StatusCode
	reason string
}

// serveWS upgrades r to a WebSocket connection and serves it until the
// client goes, a malformed frame, its session ends or the server stops.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.o.OriginPatterns})
	if err != nil {
		s.log.Debug("ws accept", "err", err, "origin", r.Header.Get("Origin"))
		return // Accept answered (403 for a cross-site origin)
	}
	ws.SetReadLimit(s.o.MaxFrame)
	ctx, cancel := context.WithCancel(r.Context())
	c := &conn{
		s: s, ws: ws, id: s.newConnID(), ctx: ctx, cancel: cancel,
		lim:      rate.NewLimiter(rate.Limit(s.o.FrameRate), s.o.FrameRate),
		sem:      make(chan struct{}, s.o.MaxInflight),
		inflight: map[string]context.CancelFunc{},
		stop:     make(chan struct{}),
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		c.cookie = ck.Value
	}
	c.wg.Go(func() {
		select {
		case <-c.stop:
			c.mu.Lock()
			cw := c.closeWith
			c.mu.Unlock()
			c.ws.Close(cw.code, cw.reason) // the loop's Read ends with it
			c.cancel()
		case <-c.ctx.Done():
		}
	})
	err = c.loop()
	cancel()
	c.wg.Wait()
	s.forget(c)
	c.mu.Lock()
	cw := c.closeWith
	c.mu.Unlock()
	switch {
	case cw != nil:
		ws.CloseNow() // closed with cw already
	case errors.Is(err, errMalformed):
		s.log.Debug("ws malformed frame", "conn", c.id, "err", err)
		ws.Close(websocket.StatusPolicyViolation, truncate(err.Error(), 120))
	case websocket.CloseStatus(err) != -1 || errors.Is(err, context.Canceled):
		ws.CloseNow()
	default:
		s.log.Debug("ws closed", "conn", c.id, "err", err)
		if errors.Is(err, errTooBig) || strings.Contains(err.Error(), "read limited") {
			ws.Close(websocket.StatusMessageTooBig, "frame too large")
		} else {
			ws.CloseNow()
		}
	}
}

var errTooBig = errors.New("frame too large")

// endWith makes the connection close with code and reason (once: the
// first reason given counts).
func (c *conn) endWith(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeWith == nil {
		c.closeWith = &closeStatus{code, reason}
		close(c.stop)
	}
}

// loop reads frames until the connection ends; its error says why.
func (c *conn) loop() error {
	var pending *frame // a request waiting for its body frame
	for {
		typ, b, err := c.ws.Read(c.ctx)
		if err != nil {
			return err
		}
		if err := c.lim.Wait(c.ctx); err != nil {
			return err
		}
		if typ == websocket.MessageBinary {
			if pending == nil {
				return fmt.Errorf("%w: a body frame with no request waiting for one", errMalformed)
			}
			f := *pending
			pending = nil
			args, err := withBody(f.Args, f.Body, b)
			if err != nil {
				c.write(abi.EncodeResponse(f.ID, f.Call, nil, abi.E(abi.Op(f.Call), err)))
				continue
			}
			f.Args = args
			if err := c.dispatch(f); err != nil {
				return err
			}
			continue
		}
		if pending != nil {
			return fmt.Errorf("%w: request %q waits for its body frame", errMalformed, pending.ID)
		}
		f, err := decodeFrame(b)
		if err != nil {
			return err
		}
		switch {
		case f.Type == abi.CancelType:
			c.cancelReq(f.ID)
		case f.Call == abi.SysConnect.Name:
			c.connect(f)
		case f.Call == abi.RequestCancel.Name:
			var a abi.RequestCancelArgs
			if err := abi.DecodeArgs(f.Args, &a); err != nil {
				c.write(abi.EncodeResponse(f.ID, f.Call, nil, abi.E(abi.Op(f.Call), err)))
				continue
			}
			c.write(abi.EncodeResponse(f.ID, f.Call, &abi.RequestCancelResult{Cancelled: c.cancelReq(a.ID)}, nil))
		case c.connected() == nil:
			c.refuseUnconnected(f)
		case f.Body != "":
			pending = &f
		default:
			if err := c.dispatch(f); err != nil {
				return err
			}
		}
	}
}

func (c *conn) connected() *kernel.Caller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caller
}

// refuseUnconnected answers a request made before sys.connect: 425 with
// next sys.setup while the system is not set up, else 401.
func (c *conn) refuseUnconnected(f frame) {
	if !c.s.o.Kernel.IsSetUp() {
		c.fail(f.ID, int(abi.SetupRequired), f.Call+": setup required: set the system up on its host (gsvfs mount sets it up for the user who starts it)", abi.SysSetup.Name)
		return
	}
	c.fail(f.ID, abi.CodeAuth, f.Call+": not connected: the first request is sys.connect", "")
}

// fail writes an error response frame.
func (c *conn) fail(id string, code int, msg, next string) {
	b, _ := json.Marshal(errResponse{Type: "res", ID: id, Error: errFrame{Code: code, Message: msg, Next: next}})
	c.write(append(b, '\n'))
}

// write writes one text frame; a failed write ends the connection.
func (c *conn) write(b []byte) {
	ctx, cancel := context.WithTimeout(c.ctx, writeTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.cancel()
	}
}

// dispatch runs request f as the connection's caller in a goroutine of
// its own, cancellable by its id. At most MaxInflight run at once: past
// that a request is answered 409 at once, so that the connection is
// still read (its cancel frames among others).
func (c *conn) dispatch(f frame) error {
	caller := c.connected()
	select {
	case c.sem <- struct{}{}:
	default:
		c.fail(f.ID, int(abi.Busy), fmt.Sprintf("%s: too many requests in flight on this connection (%d)", f.Call, cap(c.sem)), "")
		return nil
	}
	rctx, cancel := context.WithCancel(c.ctx)
	c.mu.Lock()
	if _, dup := c.inflight[f.ID]; dup {
		c.mu.Unlock()
		cancel()
		<-c.sem
		c.fail(f.ID, int(abi.Busy), fmt.Sprintf("%s: request id %q is in flight already", f.Call, f.ID), "")
		return nil
	}
	c.inflight[f.ID] = cancel
	c.mu.Unlock()
	args := f.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	c.wg.Go(func() {
		defer func() { <-c.sem }()
		res, err := c.s.o.Kernel.Call(rctx, caller, f.Call, args)
		c.mu.Lock()
		delete(c.inflight, f.ID)
		c.mu.Unlock()
		cancel()
		c.write(abi.EncodeResponse(f.ID, f.Call, res, err))
	})
	return nil
}

// cancelReq cancels the request id in flight; false if none is.
func (c *conn) cancelReq(id string) bool {
	c.mu.Lock()
	cancel, ok := c.inflight[id]
	c.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// connect answers sys.connect: it checks the protocol version and role,
// authenticates the token (auth.token, else the session cookie), and
// from then on serves the connection as that identity, its signals
// written as sig frames.
func (c *conn) connect(f frame) {
	k := c.s.o.Kernel
	name := abi.SysConnect.Name
	if c.connected() != nil {
		c.fail(f.ID, int(abi.Busy), name+": already connected", "")
		return
	}
	var a abi.ConnectArgs
	if err := abi.DecodeArgs(f.Args, &a); err != nil {
		c.write(abi.EncodeResponse(f.ID, name, nil, abi.E(abi.Op(name), err)))
		return
	}
	if a.Protocol != abi.ProtocolVersion {
		c.fail(f.ID, abi.CodeProtocol, fmt.Sprintf("%s: protocol %d is not supported: this server speaks protocol %d", name, a.Protocol, abi.ProtocolVersion), "")
		return
	}
	role := a.Client.Role
	if role != "user" && role != "driver" && role != "service" {
		c.fail(f.ID, abi.CodeRole, fmt.Sprintf("%s: role %q: want user, driver or service", name, role), "")
		return
	}
	if !k.IsSetUp() {
		c.fail(f.ID, int(abi.SetupRequired), name+": setup required", abi.SysSetup.Name)
		return
	}
	var token, user string
	if a.Auth != nil {
		token, user = a.Auth.Token, a.Auth.Username
		if token == "" && a.Auth.Password != "" {
			c.fail(f.ID, abi.CodeAuth, name+": password sign-in is not supported: give a token", "")
			return
		}
	}
	if token == "" {
		token = c.cookie
	}
	if token == "" {
		c.fail(f.ID, abi.CodeAuth, name+": authentication required: give auth.token or sign in", "")
		return
	}
	var id *kernel.Identity
	var err error
	if role == "driver" {
		id, err = k.AuthenticateNode(c.ctx, token, a.Client.ID)
	} else {
		id, err = k.Authenticate(c.ctx, kernel.Peer{Transport: "ws", HostUID: -1, User: user, Secret: []byte(token)})
	}
	if err != nil {
		c.fail(f.ID, abi.CodeAuth, name+": authentication failed", "")
		return
	}
	if got := idRole(id); got != role {
		c.fail(f.ID, abi.CodeRole, fmt.Sprintf("%s: these credentials connect as %s, not %s", name, got, role), "")
		return
	}
	caller := &kernel.Caller{Identity: id}
	syscalls := id.Caps()
	if l, err := kernel.Do(c.ctx, k, caller, abi.SysSyscallList, &abi.SyscallListArgs{}); err == nil {
		syscalls = l.Syscalls
	}
	c.mu.Lock()
	c.caller = caller
	c.key = clientKey{uid: id.Uid, client: a.Client.ID}
	c.mu.Unlock()
	c.s.register(c)
	sub := k.Subscribe(id, nil)
	c.wg.Go(func() {
		defer sub.Close()
		for {
			rec, err := sub.Next(c.ctx)
			if err != nil {
				return
			}
			c.write(rec)
		}
	})
	if done := id.Done(); done != nil {
		c.wg.Go(func() {
			select {
			case <-done:
				c.endWith(closeSession, "session ended: its token was revoked or expired")
			case <-c.ctx.Done():
			}
		})
	}
	if syscalls == nil {
		syscalls = []string{}
	}
	c.write(abi.EncodeResponse(f.ID, name, &abi.ConnectResult{
		Protocol: abi.ProtocolVersion,
		Server:   abi.ConnectServer{Version: c.s.o.Version, ConnectionID: c.id},
		Identity: id.Record(),
		Syscalls: syscalls,
		Signals:  []string{},
	}, nil))
}

// idRole is the role an identity connects as: driver for a device's,
// service for a service token's, else user.
func idRole(id *kernel.Identity) string {
	switch id.Role {
	case "driver", "service":
		return id.Role
	}
	return "user"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
