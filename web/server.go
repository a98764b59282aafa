// Package web is the web console's server: the seed's WebSocket
// protocol at /ws (sys.connect, then req/res/sig frames into the kernel's
// dispatcher as the connection's identity), the browser's sign-in
// (/api/login: a token or a one-time link exchanged for a session
// cookie) and the console itself, served from embedded assets. It knows
// GSV only through abi and the kernel's connection API (Authenticate,
// Call, Subscribe). See docs/web.md.
package web

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"gsvfs.dev/gsvfs/kernel"
)

// Options configure a Server. Kernel is required; zero values of the rest
// take the defaults given.
type Options struct {
	Kernel  *kernel.Kernel
	Version string
	Logger  *slog.Logger
	// OriginPatterns are more origins (host patterns, path.Match) whose
	// pages may open /ws and sign in; the server's own host always may.
	OriginPatterns []string
	// MaxFrame is the largest frame a client may send, in bytes (16 MiB):
	// a larger one closes its connection (1009).
	MaxFrame int64
	// MaxInflight is the most requests of one connection in flight at
	// once (32): past it the connection is read no further until one ends.
	MaxInflight int
	// FrameRate is the most frames a second one connection is read at,
	// with a burst of as many (1000).
	FrameRate int
	// SessionTTL is a browser session's life (12 h): its token expires then.
	SessionTTL time.Duration
	// Secure marks the session cookie Secure: the listener is HTTPS.
	Secure bool
}

// Server serves the web console's routes (Paths). Its connections end
// with their request's context: the HTTP server's base context.
type Server struct {
	o     Options
	log   *slog.Logger
	mux   *http.ServeMux
	seq   atomic.Uint64
	nonce string

	mu      sync.Mutex // guards clients
	clients map[clientKey]*conn
}

// clientKey names a client's connection: a newer one of the same user
// and client id replaces the older (the seed's sys.connect).
type clientKey struct {
	uid    uint32
	client string
}

// New returns a Server for o.
func New(o Options) *Server {
	if o.MaxFrame <= 0 {
		o.MaxFrame = 16 << 20
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = 32
	}
	if o.FrameRate <= 0 {
		o.FrameRate = 1000
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var nb [6]byte
	rand.Read(nb[:])
	s := &Server{o: o, log: o.Logger, mux: http.NewServeMux(), clients: map[clientKey]*conn{}, nonce: hex.EncodeToString(nb[:])}
	s.mux.HandleFunc("GET "+WSPath, s.serveWS)
	s.mux.HandleFunc("POST "+LoginPath, s.login)
	s.mux.HandleFunc("POST "+LogoutPath, s.logout)
	s.mux.Handle("GET /", assets())
	return s
}

// The paths the server answers.
const (
	WSPath     = "/ws"
	LoginPath  = "/api/login"
	LogoutPath = "/api/logout"
)

// Paths are the patterns a mux routes to the Server: /ws, the sign-in
// API and the console (every other path: "/").
func (s *Server) Paths() []string { return []string{WSPath, LoginPath, LogoutPath, "/"} }

// ServeHTTP serves the console's routes, every answer with the console's
// security headers (a Content-Security-Policy without inline scripts, no
// framing, no referrer, no sniffing).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) newConnID() string {
	return "ws-" + s.nonce + "-" + itoa(s.seq.Add(1))
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// register records c as its client's connection, ending an older one of
// the same user and client id.
func (s *Server) register(c *conn) {
	c.mu.Lock()
	key := c.key
	c.mu.Unlock()
	if key.client == "" {
		return
	}
	s.mu.Lock()
	old := s.clients[key]
	s.clients[key] = c
	s.mu.Unlock()
	if old != nil && old != c {
		old.endWith(closeReplaced, "replaced by a newer connection of the same client")
	}
}

// forget drops c from the clients it is registered as.
func (s *Server) forget(c *conn) {
	c.mu.Lock()
	key := c.key
	c.mu.Unlock()
	s.mu.Lock()
	if s.clients[key] == c {
		delete(s.clients, key)
	}
	s.mu.Unlock()
}
