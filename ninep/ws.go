package ninep

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// 9P over WebSocket: each direction's bytes are carried in binary
// messages on a WebSocket at WSPath, for a client behind NAT or an HTTP
// proxy that passes WebSockets. The stream is 9P as on TCP: message
// boundaries of the WebSocket mean nothing.

// WSPath is the HTTP path of the WebSocket endpoint.
const WSPath = "/9p"

// wsHandshakeTimeout bounds an HTTP request's upgrade.
const wsHandshakeTimeout = 10 * time.Second

// ListenWS returns the listener of the WebSocket connections upgraded at
// WSPath on l's HTTP connections (l may be a TLS listener, for wss). Each
// accepted connection is a net.Conn carrying its stream; closing the
// listener stops serving HTTP and closes l, and the connections it
// accepted stay open until closed. routes are served beside it (the
// daemon's /oauth/callback); any other request is a 404. An upgrade is
// not checked for its Origin (9P attaches with a token, not a cookie).
func ListenWS(l net.Listener, routes ...Route) net.Listener {
	w := &wsListener{l: l, conns: make(chan net.Conn), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc(WSPath, w.upgrade)
	for _, r := range routes {
		mux.Handle(r.Path, r.Handler)
	}
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: wsHandshakeTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, wsRawConn{}, c)
		}}
	go func() {
		err := w.srv.Serve(l)
		w.once.Do(func() {
			w.err = err
			close(w.done)
		})
	}()
	return w
}

// Route is a plain HTTP route a WebSocket listener serves beside WSPath.
type Route struct {
	Path    string
	Handler http.Handler
}

// wsListener is ListenWS's listener.
type wsListener struct {
	l     net.Listener
	srv   *http.Server
	conns chan net.Conn
	once  sync.Once
	done  chan struct{} // closed when serving ends
	err   error         // why, set before done closes
}

// upgrade turns one request into a connection for Accept.
func (w *wsListener) upgrade(rw http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(rw, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return // Accept has answered the request
	}
	var nc net.Conn = websocket.NetConn(context.Background(), c, websocket.MessageBinary)
	if raw, ok := r.Context().Value(wsRawConn{}).(net.Conn); ok {
		nc = &wsConn{Conn: nc, raw: raw}
	}
	select {
	case w.conns <- nc:
	case <-w.done:
		nc.Close()
	}
}

// wsRawConn is the context key of the connection an HTTP request came on.
type wsRawConn struct{}

// wsConn is an upgraded connection, which holds the gate's ticket of the
// connection it came on (see Gate.Listen).
type wsConn struct {
	net.Conn
	raw net.Conn
}

// PreAuth returns the ticket of the connection the upgrade came on.
func (c *wsConn) PreAuth() *Ticket { return TicketOf(c.raw) }

// Accept returns the next WebSocket connection.
func (w *wsListener) Accept() (net.Conn, error) {
	select {
	case c := <-w.conns:
		return c, nil
	case <-w.done:
		if w.err != nil && !errors.Is(w.err, http.ErrServerClosed) {
			return nil, w.err
		}
		return nil, net.ErrClosed
	}
}

// Close stops serving HTTP and closes the underlying listener.
func (w *wsListener) Close() error {
	err := w.srv.Close()
	w.once.Do(func() { close(w.done) })
	return err
}

// Addr is the underlying listener's address.
func (w *wsListener) Addr() net.Addr { return w.l.Addr() }

// dialWS dials the WebSocket endpoint of a ws or wss address.
func dialWS(network, address string, conf *tls.Config) (net.Conn, error) {
	scheme := "ws"
	client := http.DefaultClient
	if network == "wss" {
		scheme = "wss"
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wsHandshakeTimeout)
	defer cancel()
	c, _, err := websocket.Dial(ctx, scheme+"://"+address+WSPath, &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		return nil, err
	}
	return websocket.NetConn(context.Background(), c, websocket.MessageBinary), nil
}
