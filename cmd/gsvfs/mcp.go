package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/mcpio"
	"gsvfs.dev/gsvfs/mcpserve"
	"gsvfs.dev/gsvfs/ninep"
)

// mcpCmd is gsvfs mcp: gsvfs as an MCP server.
func mcpCmd(o *options) *cobra.Command {
	var ro remoteOptions
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve MCP on stdin and stdout: your syscalls as tools, over the daemon's 9P socket",
		Long: "Serve MCP (JSON-RPC on stdin and stdout) to the MCP client that started this command:\n" +
			"its tools are the syscalls you may make (fs.*, shell.exec, exec sessions, processes,\n" +
			"schedules, CodeMode, devices), each call one syscall as you over one 9P connection\n" +
			"to the daemon (its unix socket: you are your host uid; or --kernel ADDR with --token).\n" +
			"Processes' history and status are resources (gsv://proc/<pid>/history, .../status).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return mcpServe(cmd.Context(), *o, ro)
		},
	}
	serve.Flags().StringVar(&ro.kernel, "kernel", "", "the daemon's 9P dial string (default: $GSV_ADDR, else unix!STATE/9p.sock)")
	serve.Flags().StringVar(&ro.tlsCA, "tls-ca", "", "with --kernel tls!...: trust the PEM certificates in this file ($GSV_TLS_CA; default: the system's roots)")
	serve.Flags().StringVar(&ro.token, "token", "", "the token to attach with; $GSV_TOKEN (none: the unix socket's peer credentials)")
	serve.Flags().StringVar(&ro.user, "user", "", "the user name to attach as; $GSV_USER, else the login name")
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "gsvfs as an MCP server (gsvfs mcp serve; the daemon's --http serves /mcp)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(serve)
	return cmd
}

// mcpServe is gsvfs mcp serve: it attaches to the daemon as the
// invoking user and serves MCP on stdin and stdout until the client
// closes stdin (nil), the input is not JSON-RPC (an error), SIGINT or
// SIGTERM, or the daemon goes away (an error). Its log goes to stderr:
// stdout is the protocol's.
func mcpServe(ctx context.Context, o options, ro remoteOptions) error {
	if _, err := newLogger(o.logLevel); err != nil {
		return err
	}
	ignoreSIGPIPE()
	if os.Getenv("GOGC") == "" {
		// The SDK allocates a 32 KiB buffer for every JSON value it
		// decodes, several a call, on a heap of a few MiB: at the
		// default GOGC the collector ran every few calls and took most
		// of a call's time (a tools/call in memory: 410 µs, 150 µs at
		// 400).
		debug.SetGCPercent(400)
	}
	addr := ro.kernel
	if addr == "" {
		addr = os.Getenv("GSV_ADDR")
	}
	if addr == "" {
		addr = "unix!" + filepath.Join(o.state, "9p.sock")
	}
	user := ro.user
	if user == "" {
		user = os.Getenv("GSV_USER")
	}
	if user == "" {
		user = hostUser()
	}
	tok := ro.token
	if tok == "" {
		tok = os.Getenv("GSV_TOKEN")
	}
	var secret []byte
	if tok != "" {
		secret = []byte(tok)
	}
	dialer, err := kernelDialer(ro.tlsCA)
	if err != nil {
		return err
	}
	rpc, err := mcpserve.Dial(dialer, addr, user, secret)
	if err != nil {
		return fmt.Errorf("connect to the daemon at %s: %w", addr, err)
	}
	defer rpc.Close()
	s, err := mcpserve.New(rpc, mcpserve.Options{Version: Version, Logger: sdkLogger(o.logLevel)})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-rpc.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	err = s.Run(ctx, &mcpio.Transport{Reader: os.Stdin, Writer: os.Stdout})
	select {
	case <-rpc.Done():
		return fmt.Errorf("lost the daemon at %s: %v", addr, rpc.Err())
	default:
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// sdkLogger is the MCP SDK's logger: at --log-level debug, every
// session's start and end; else its warnings and errors only (at info
// it logs each session).
func sdkLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil || l > slog.LevelDebug {
		l = max(l, slog.LevelWarn)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// httpFlag adds --http to a command that runs the kernel.
func httpFlag(cmd *cobra.Command, o *options) {
	cmd.Flags().StringVar(&o.http, "http", "", "also serve HTTP on host:port: the web console at /, MCP at /mcp, a GSV token as bearer (HTTPS with --tls-cert and --tls-key; plain HTTP only on loopback)")
	cmd.Flags().BoolVar(&o.loginLink, "login-link", false, "with --http: print the web console's URL and a one-time sign-in link as the user who starts the daemon")
}

// mcpAuthenticate is the /mcp handler's authenticator: a token is a
// Caller of the kernel's Serve as the token's identity (kernel.
// Authenticate, the check of a 9P attach's token), so that every call is
// a request frame through the one dispatcher, as /sys/call's are. The
// handler keeps it for its AuthCache, until the token's lease ends.
func mcpAuthenticate(k *kernel.Kernel) func(ctx context.Context, token string) (mcpserve.Caller, error) {
	return func(ctx context.Context, token string) (mcpserve.Caller, error) {
		id, err := k.Authenticate(ctx, kernel.Peer{Transport: "mcp-http", HostUID: -1, Secret: []byte(token)})
		if err != nil {
			return nil, err
		}
		c := &kernel.Caller{Identity: id}
		return leasedFrames{mcpserve.Frames(func(ctx context.Context, frame []byte) []byte { return k.Serve(ctx, c, frame) }), id}, nil
	}
}

// leasedFrames is a token's Caller, which ends with the token's lease
// (revoked, expired).
type leasedFrames struct {
	mcpserve.Frames
	id *kernel.Identity
}

// Done is the token's lease's end.
func (l leasedFrames) Done() <-chan struct{} { return l.id.Done() }

// httpTimeouts bound a connection of the HTTP listener: its headers
// arrive within readHeaderTimeout, an idle keep-alive connection closes
// after idleTimeout.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// listenHTTP listens on --http ADDR (host:port): HTTPS with --tls-cert
// and --tls-key, else plain HTTP, which only a loopback address may
// serve (a bearer token must not cross a network in the clear).
func listenHTTP(addr string, o options) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: want host:port: %w", addr, err)
	}
	var conf *tls.Config
	if o.tlsCert != "" || o.tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--http %s: %w", addr, err)
		}
		conf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else if !loopback(host) {
		return nil, fmt.Errorf("--http %s: plain HTTP only on a loopback address (127.0.0.1, ::1, localhost); give --tls-cert and --tls-key to serve HTTPS", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if conf != nil {
		l = tls.NewListener(l, conf)
	}
	return l, nil
}

// loopback reports whether host names only the loopback interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveHTTP serves the daemon's HTTP listener on l until ctx ends: /mcp
// (mcpserve.Handler, as each request's bearer token) and routes (the
// OAuth callback of the MCP room's servers). Every request's
// context ends with ctx; the returned wait waits for the server and its
// handlers to end.
func serveHTTP(ctx context.Context, l net.Listener, k *kernel.Kernel, log *slog.Logger, level string, routes ...ninep.Route) (wait func(), err error) {
	h, err := mcpserve.Handler(mcpserve.HTTPOptions{
		Options:      mcpserve.Options{Version: Version, Logger: sdkLogger(level)},
		Authenticate: mcpAuthenticate(k),
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(mcpserve.Path, h)
	for _, r := range routes {
		mux.Handle(r.Path, r.Handler)
	}
	var handlers inflight
	hs := &http.Server{
		Handler:           handlers.wrap(mux),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http", "err", err)
		}
	}()
	return func() {
		<-ctx.Done()
		hs.Close()
		<-done
		handlers.wait()
	}, nil
}

// inflight counts the HTTP handlers running, so that the daemon waits
// for them before its rooms and kernel close; once closed it refuses
// new ones (503).
type inflight struct {
	mu     sync.Mutex // guards closed and the adds to wg
	closed bool
	wg     sync.WaitGroup
}

func (f *inflight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			http.Error(w, "gsvfs is stopping", http.StatusServiceUnavailable)
			return
		}
		f.wg.Add(1)
		f.mu.Unlock()
		defer f.wg.Done()
		h.ServeHTTP(w, r)
	})
}

// wait refuses new handlers and waits for the running ones.
func (f *inflight) wait() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
}
