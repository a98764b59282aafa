// Command gsvfs runs the GSV kernel and serves its namespace: mounted with
// FUSE (gsvfs mount DIR) and exported over 9P on a unix socket in the state
// directory, and on TCP with --listen tcp!host!port (token authenticated).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/adapters"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
	"gsvfs.dev/gsvfs/ipc"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/mcp"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/notify"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/packages"
	"gsvfs.dev/gsvfs/pkgs"
	"gsvfs.dev/gsvfs/proc"
	"gsvfs.dev/gsvfs/repos"
	"gsvfs.dev/gsvfs/sched"
	"gsvfs.dev/gsvfs/telemetry"
	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/fusefs"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gsvfs:", err)
		os.Exit(1)
	}
}

type options struct {
	state    string
	listen   []string
	logLevel string
	debug    bool

	logFile   string // --log-file: the log's file (else stderr)
	logFormat string // --log-format: text or json

	authTimeout time.Duration // ninep.Server.AuthTimeout
	maxConns    int           // ninep.Server.MaxConns
	maxFids     int           // ninep.Server.MaxFids
	maxInflight int           // ninep.Server.MaxPrincipalInflight

	routeTimeout time.Duration // devices.Options.RouteTimeout

	preAuthMax, preAuthPerHost int // ninep.Gate.Max and MaxPerPeer of the --listen listeners

	tlsCert, tlsKey string // the certificate and key of tls!host!port listeners (and of --http)

	http      string // --http host:port: the HTTP listener (/mcp, the web console)
	loginLink bool   // --login-link: print a one-time sign-in link of the web console

	store string // --store: a postgres:// URL (kernel.Config.Store); "": gsv.db in the state directory
}

func rootCmd() *cobra.Command {
	var o options
	root := &cobra.Command{
		Use:           "gsvfs",
		Short:         "GSV kernel: the agent operating system's namespace over FUSE and 9P",
		Version:       abi.BuildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&o.state, "state", DefaultStateDir(), "state directory (SQLite database, homes, 9P socket); $GSV_STATE")
	root.PersistentFlags().StringVar(&o.store, "store", os.Getenv("GSV_STORE"), "the database: a postgres://user@host/db URL instead of the SQLite file in --state (docs/scaling.md); $GSV_STORE")
	root.PersistentFlags().StringArrayVar(&o.listen, "listen", nil, "also serve 9P on this dial string, e.g. tcp!127.0.0.1!5640 (attach needs a token)")
	root.PersistentFlags().StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	root.PersistentFlags().StringVar(&o.logFile, "log-file", "", "append the log to this file instead of stderr")
	root.PersistentFlags().StringVar(&o.logFormat, "log-format", "text", "text or json")
	root.PersistentFlags().DurationVar(&o.authTimeout, "9p-auth-timeout", ninep.DefaultAuthTimeout, "close a 9P connection that has not attached within this time (0: never)")
	root.PersistentFlags().IntVar(&o.maxConns, "9p-max-conns", ninep.DefaultMaxConns, "9P connections one host uid or token may hold at once (0: no limit); those not yet attached over --listen are bounded by --preauth-max")
	root.PersistentFlags().IntVar(&o.maxFids, "9p-max-fids", ninep.DefaultMaxFids, "9P fids one host uid or token may hold at once across its connections (0: no limit)")
	root.PersistentFlags().StringVar(&o.tlsCert, "tls-cert", "", "the PEM certificate (chain) of --listen tls!host!port")
	root.PersistentFlags().StringVar(&o.tlsKey, "tls-key", "", "the PEM private key of --tls-cert")
	root.PersistentFlags().DurationVar(&o.routeTimeout, "device-route-timeout", devices.DefaultRouteTimeout, "how long a call routed to a remote device may take before its caller gets 504")
	root.PersistentFlags().IntVar(&o.maxInflight, "9p-max-inflight", ninep.DefaultMaxPrincipalInflight, "9P requests one host uid or token may have in flight at once across its connections; one more gets an error at once (0: no limit)")
	root.PersistentFlags().IntVar(&o.preAuthMax, "preauth-max", ninep.DefaultMaxPreAuth, "connections of the --listen addresses not authenticated yet held at once (at most a quarter of the descriptor limit); one more closes the oldest of the address holding the most (0: a quarter of the descriptor limit)")
	root.PersistentFlags().IntVar(&o.preAuthPerHost, "preauth-max-per-host", ninep.DefaultMaxPreAuthPerPeer, "connections of one address that have not authenticated yet held at once; one more closes the address's oldest (0: only --preauth-max)")
	var ro remoteOptions
	mount := &cobra.Command{
		Use:   "mount DIR",
		Short: "Mount the namespace on DIR with FUSE and serve 9P; Ctrl-C unmounts",
		Long: "Mount the namespace on DIR with FUSE and serve 9P; Ctrl-C unmounts.\n\n" +
			"With --kernel ADDR no kernel runs here: DIR shows the namespace of the kernel at ADDR, over 9P.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ro.kernel != "" {
				return mountRemote(cmd.Context(), o, ro, args[0])
			}
			return run(cmd.Context(), o, args[0])
		},
	}
	mount.Flags().BoolVar(&o.debug, "fuse-debug", false, "log every FUSE request")
	httpFlag(mount, &o)
	mount.Flags().StringVar(&ro.kernel, "kernel", "", "mount the namespace of the kernel at this 9P dial string (tcp!host!port, tls!host!port, unix!path) instead of running one")
	mount.Flags().StringVar(&ro.tlsCA, "tls-ca", "", "with --kernel tls!...: trust the PEM certificates in this file ($GSV_TLS_CA; default: the system's roots)")
	mount.Flags().StringVar(&ro.token, "token", "", "with --kernel: the token to attach with; $GSV_TOKEN (none: a unix socket's peer credentials)")
	mount.Flags().StringVar(&ro.user, "user", "", "with --kernel: the user name to attach as; $GSV_USER, else the login name")
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the namespace over 9P only",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd.Context(), o, "")
		},
	}
	httpFlag(serve, &o)
	worker := &cobra.Command{
		Use:    "codemode-worker",
		Short:  "Run one CodeMode block (the daemon starts it; JSON lines on stdin and stdout)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			os.Exit(codemode.WorkerMain())
		},
	}
	root.AddCommand(mount, serve, deviceCmd(), mcpCmd(&o), worker, adapterCmd())
	return root
}

// codeModeWorker is the argv of a CodeMode worker: the gsvfs-codemode
// binary next to this one (a small binary that starts fast), else this
// binary's hidden codemode-worker command, or nil (no CodeMode) when the
// binary cannot be found.
func codeModeWorker() []string {
	exe, err := os.Executable()
	if err != nil {
		slog.Warn("no CodeMode: cannot find this binary", "err", err)
		return nil
	}
	small := filepath.Join(filepath.Dir(exe), "gsvfs-codemode")
	if fi, err := os.Stat(small); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return []string{small}
	}
	return []string{exe, "codemode-worker"}
}

// codeModeGroup is the cpu cgroup the CodeMode workers are born in
// (sandbox.WorkerGroup), or "" where there is none: the workers then run
// at their nice alone.
func codeModeGroup(log *slog.Logger) string {
	dir, err := sandbox.Group(sandbox.WorkerGroup)
	if err != nil {
		log.Info("codemode: no cpu cgroup for the workers; they run at nice alone", "err", err)
		return ""
	}
	return dir
}

// DefaultStateDir is $GSV_STATE, else ~/.local/share/gsv.
func DefaultStateDir() string {
	if s := os.Getenv("GSV_STATE"); s != "" {
		return s
	}
	if d, err := os.UserHomeDir(); err == nil {
		return filepath.Join(d, ".local", "share", "gsv")
	}
	return "/var/lib/gsv"
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// ignoreSIGPIPE makes a write to a closed pipe an error (EPIPE) instead of
// the end of the process: a daemon whose log goes to a pipe (make run 2>&1
// | tee log) whose reader Ctrl-C ended must still unmount and close its
// state. The log's lost lines are lost; nothing else is.
func ignoreSIGPIPE() { signal.Ignore(syscall.SIGPIPE) }

// run starts the kernel, the 9P listeners and, if mountDir is not "", the
// FUSE mount, and serves until SIGINT or SIGTERM. At SIGINT or SIGTERM it
// unmounts first, then logs and closes.
func run(ctx context.Context, o options, mountDir string) error {
	ignoreSIGPIPE()
	start := time.Now()
	log, closeLog, err := newFileLogger(o.logLevel, o.logFile, o.logFormat)
	if err != nil {
		return err
	}
	defer closeLog()
	slog.SetDefault(log)
	if mountDir != "" {
		abs, err := filepath.Abs(mountDir)
		if err != nil {
			return err
		}
		mountDir = abs
		if st, err := filepath.Abs(o.state); err == nil && (st == mountDir || strings.HasPrefix(st, mountDir+"/")) {
			return fmt.Errorf("the state directory %s may not be inside the mount point %s", st, mountDir)
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.store != "" && !kernel.IsPostgres(o.store) {
		return fmt.Errorf("--store takes a postgres:// URL, not %q (the SQLite database is gsv.db in --state)", o.store)
	}
	k, err := kernel.Open(kernel.Config{StateDir: o.state, Store: o.store, Logger: log})
	if err != nil {
		return err
	}
	defer k.Close()
	// Metrics (/metrics on --http) and, with OTEL_EXPORTER_OTLP_ENDPOINT,
	// traces: docs/operations.md.
	tel, err := telemetry.New(k, telemetry.Options{Version: Version, Logger: log})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer tel.Close(context.Background())
	space := ns.New(k)
	defer space.Close() // the rooms close, last first, before the kernel does
	dev, err := devices.New(k, devices.Options{Space: space, Local: local.Options{Logger: log}, RouteTimeout: o.routeTimeout})
	if err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	dev.SetRoot(space.Root())
	// The rooms, in the order they are added (Plan 9's devtab): the
	// devices (the data tree) first, as the others' runs use it and it
	// closes last; a room's Start may make syscalls of the rooms before it
	// (the ipc room's asks the processes how its calls' runs stand).
	var pk *pkgs.Room
	rooms := []struct {
		name string
		open func() (ns.Room, error)
	}{
		{"devices", func() (ns.Room, error) { return dev, nil }},
		{"processes", func() (ns.Room, error) {
			return proc.Open(space, proc.Options{Logger: log, CodeModeWorker: codeModeWorker(), CodeModeGroup: codeModeGroup(log)})
		}},
		{"ipc", func() (ns.Room, error) { return ipc.Open(space, ipc.Options{Logger: log}) }},
		{"scheduler", func() (ns.Room, error) { return sched.Open(space, sched.Options{Logger: log}) }},
		{"notifications", func() (ns.Room, error) { return notify.Open(space, notify.Options{Logger: log}) }},
		{"mcp", func() (ns.Room, error) {
			return mcp.Open(space, mcp.Options{Logger: log, Version: Version, CallbackOrigin: callbackOrigin(o)})
		}},
		{"adapters", func() (ns.Room, error) { return adapters.Open(space, adapters.Options{Logger: log}) }},
		{"repositories", func() (ns.Room, error) { return repos.Open(space, repos.Options{Logger: log}) }},
		{"packages", func() (ns.Room, error) {
			var err error
			pk, err = pkgs.Open(space, pkgs.Options{Logger: log, Builtin: packages.FS})
			return pk, err
		}},
	}
	for _, r := range rooms {
		room, err := r.open()
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		if err := space.Add(ctx, room); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	// The first user is made after the subsystems register, so that their
	// hooks (kernel.OnUserCreated: proc's init process) run as it is made.
	if err := k.EnsureSetup(ctx, hostUser(), os.Getuid()); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	// The builtin packages are synced before the first client is served
	// (on a new state the sync follows sys.setup).
	select {
	case <-pk.Synced():
	case <-ctx.Done():
	}

	srv := &ninep.Server{Root: space.Root(), Auth: space, Logger: log,
		AuthTimeout: noLimit(o.authTimeout), MaxConns: noLimit(o.maxConns), MaxFids: noLimit(o.maxFids),
		MaxPrincipalInflight: noLimit(o.maxInflight), OnRequest: tel.NinePRequests}
	sock := k.SocketPath()
	ul, err := listenUnix(sock)
	if err != nil {
		return err
	}
	defer os.Remove(sock)
	// The 9P servers stop, and are waited for, before the subsystems and
	// the kernel close (the defers above run after this one). Running
	// shell.exec commands end first, so that no request waits on one.
	serveCtx, stopServing := context.WithCancel(ctx)
	var serving sync.WaitGroup
	defer func() { stopServing(); dev.EndCommands(); serving.Wait() }()
	serving.Go(func() { srv.Serve(serveCtx, ul, unixPeer) })
	// Every connection of the --listen addresses is held by the gate until
	// it authenticates (a 9P attach, a device's token): it bounds them in
	// total and per address, closing the oldest at a cap, and closes one
	// still unauthenticated at the auth deadline (ninep.Gate).
	gate := &ninep.Gate{Max: preAuthCap(o.preAuthMax, log), MaxPerPeer: noLimit(o.preAuthPerHost), Timeout: noLimit(o.authTimeout), Logger: log}
	for _, addr := range o.listen {
		l, err := listenDial(addr, o, gate, ninep.Route{Path: abi.OAuthCallbackPath, Handler: mcp.CallbackHandler(k)},
			ninep.Route{Path: abi.OAuthClientMetadataPath, Handler: mcp.ClientMetadataHandler()})
		if err != nil {
			return err
		}
		log.Info("serving 9P and devices", "addr", l.Addr().String(), "auth", "token")
		l = dev.SplitListener(serveCtx, l, o.authTimeout) // devices dial the same address
		serving.Go(func() {
			srv.Serve(serveCtx, l, func(net.Conn) vfs.Peer { return vfs.Peer{Transport: "9p-tcp", HostUID: -1, HostGID: -1} })
		})
	}

	if o.http != "" {
		hl, err := listenHTTP(o.http, o)
		if err != nil {
			return err
		}
		webR, webURL := webRoutes(ctx, k, hl, o, log)
		log.Info("serving HTTP", "addr", hl.Addr().String(), "mcp", "/mcp", "oauth", abi.OAuthCallbackPath, "git", repos.HTTPPath, "metrics", "/metrics", "web", webURL)
		wait, err := serveHTTP(serveCtx, hl, k, log, o.logLevel, append(webR, ninep.Route{Path: abi.OAuthCallbackPath, Handler: mcp.CallbackHandler(k)},
			ninep.Route{Path: abi.OAuthClientMetadataPath, Handler: mcp.ClientMetadataHandler()},
			ninep.Route{Path: repos.HTTPPath, Handler: repos.HTTPHandler(k)}, ninep.Route{Path: "/metrics", Handler: tel.Handler()},
			ninep.Route{Path: pkgs.CatalogPath, Handler: pkgs.CatalogHandler(k)})...)
		if err != nil {
			hl.Close()
			return err
		}
		serving.Go(wait)
		if o.loginLink {
			printLoginLink(ctx, k, webURL, log)
		}
	}

	var fsrv *fusefs.Server
	if mountDir != "" {
		fsrv, err = fusefs.Mount(mountDir, space.Root(), space, fusefs.Options{Logger: log, Debug: o.debug, FsName: "gsv", MakeDir: true, OnRequest: tel.FUSERequests})
		if err != nil {
			return fmt.Errorf("mount %s: %w", mountDir, err)
		}
	}
	log.Info("ready", "version", Version, "mount", mountDir, "socket", sock, "state", o.state, "startup", time.Since(start).Round(time.Millisecond),
		"listen", strings.Join(o.listen, ","), "http", o.http, "otlp", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "log_file", o.logFile)

	if fsrv != nil {
		done := make(chan struct{})
		go func() { fsrv.Wait(); close(done) }()
		select {
		case <-ctx.Done():
		case <-done:
			log.Warn("the mount went away", "mount", mountDir)
			return nil
		}
		dev.EndCommands() // a command running inside a write would hold the mount
		if err := fsrv.Unmount(); err != nil {
			log.Error("unmount", "err", err)
			return err
		}
		log.Info("unmounted", "mount", mountDir)
		return nil
	}
	<-ctx.Done()
	log.Info("stopping")
	return nil
}

// noLimit maps a flag's 0 ("no limit") to the negative value by which
// ninep.Server says so (its zero means the default).
func noLimit[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

func hostUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if s := os.Getenv("USER"); s != "" {
		return s
	}
	return fmt.Sprintf("u%d", os.Getuid())
}

// listenUnix listens on the socket path, clearing a stale socket left by a
// daemon that died, and refusing to steal a live one.
func listenUnix(path string) (net.Listener, error) {
	if _, err := os.Stat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("another gsvfs is serving %s", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// Anyone may connect; who they are is their SO_PEERCRED uid.
	os.Chmod(path, 0o666)
	return l, nil
}

// preAuthCap is the gate's total cap: max (0 for none), at most a quarter
// of the process's descriptor limit, so that connections that have not
// authenticated cannot take the descriptors files, the store and
// authenticated clients need.
func preAuthCap(n int, log *slog.Logger) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < 1<<30 {
		quarter := max(int(lim.Cur/4), 1)
		if n <= 0 || n > quarter {
			log.Debug("unauthenticated connections capped at a quarter of the descriptor limit", "preauth_max", quarter, "nofile", lim.Cur)
			return quarter
		}
	}
	return noLimit(n)
}

// listenDial listens on a Plan 9 dial string: tcp!host!port,
// tls!host!port (with --tls-cert and --tls-key), ws!host!port or
// wss!host!port (9P over a WebSocket at ninep.WSPath, wss with TLS), or
// unix!path. The sockets' connections are admitted to gate (beneath TLS
// and WebSocket, whose handshakes it bounds too). A WebSocket listener
// serves routes too (plain HTTP: the OAuth callback).
func listenDial(addr string, o options, gate *ninep.Gate, routes ...ninep.Route) (net.Listener, error) {
	f := strings.Split(addr, "!")
	switch {
	case len(f) == 3 && (f[0] == "tcp" || f[0] == "net" || f[0] == "tls" || f[0] == "ws" || f[0] == "wss"):
		host := f[1]
		if host == "*" {
			host = ""
		}
		var conf *tls.Config
		if f[0] == "tls" || f[0] == "wss" {
			if o.tlsCert == "" || o.tlsKey == "" {
				return nil, errors.New("--listen " + addr + ": a " + f[0] + " listener needs --tls-cert and --tls-key")
			}
			cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
			if err != nil {
				return nil, fmt.Errorf("--listen %s: %w", addr, err)
			}
			conf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, f[2]))
		if err != nil {
			return nil, err
		}
		l = gate.Listen(l)
		if conf != nil {
			l = tls.NewListener(l, conf)
		}
		if f[0] == "ws" || f[0] == "wss" {
			l = ninep.ListenWS(l, routes...)
		}
		return l, nil
	case len(f) == 2 && f[0] == "unix":
		l, err := listenUnix(f[1])
		if err != nil {
			return nil, err
		}
		return gate.Listen(l), nil
	}
	return nil, errors.New("--listen " + addr + ": want tcp!host!port, tls!host!port, ws!host!port or wss!host!port")
}

// callbackOrigin is the origin of the OAuth callback (/oauth/callback):
// that of the first ws!host!port or wss!host!port listener whose host is
// named (http for ws, which the MCP room allows only on loopback), else
// that of --http when its host is named (https with --tls-cert), ""
// for none (then a server signs in only with its own callbackHost).
func callbackOrigin(o options) string {
	for _, addr := range o.listen {
		f := strings.Split(addr, "!")
		if len(f) != 3 || f[1] == "*" || f[1] == "" || f[0] != "ws" && f[0] != "wss" {
			continue
		}
		scheme := "http"
		if f[0] == "wss" {
			scheme = "https"
		}
		return scheme + "://" + net.JoinHostPort(f[1], f[2])
	}
	if host, port, err := net.SplitHostPort(o.http); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			scheme := "http"
			if o.tlsCert != "" {
				scheme = "https"
			}
			return scheme + "://" + net.JoinHostPort(host, port)
		}
	}
	return ""
}

// unixPeer identifies a unix-socket peer by SO_PEERCRED.
func unixPeer(c net.Conn) vfs.Peer {
	p := vfs.Peer{Transport: "9p-unix", HostUID: -1, HostGID: -1}
	if uc, ok := c.(*net.UnixConn); ok {
		if uid, gid, err := ninep.PeerCred(uc); err == nil {
			p.HostUID, p.HostGID = uid, gid
		}
	}
	return p
}
