package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/export"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/vfs"
)

// Version is the daemon's version, as a device announces it and
// --version prints it (abi.BuildVersion).
var Version = "gsvfs " + abi.BuildVersion()

// The device daemon: gsvfs device dials a kernel, says its hello and
// serves its own tree (devices/export) on that connection, reconnecting
// with backoff until stopped. It runs as whoever starts it; it needs no
// root and no state of its own.

// deviceOptions are the device daemon's flags.
type deviceOptions struct {
	kernel   string
	id       string
	token    string
	root     string
	readOnly bool
	noShell  bool
	logLevel string
	tlsCA    string // whom a tls!host!port kernel address trusts
	procs    int    // GOMAXPROCS; 0: the runtime's default
}

// Backoff of the device daemon's reconnects.
const (
	firstBackoff = 3 * time.Second
	maxBackoff   = 5 * time.Minute
	// steadyAfter is how long a connection must have lasted for the next
	// reconnect to start again from firstBackoff.
	steadyAfter = time.Minute
)

// deviceCmd is gsvfs device.
func deviceCmd() *cobra.Command {
	var o deviceOptions
	cmd := &cobra.Command{
		Use:   "device --kernel ADDR --id ID [--token T] [--root DIR]",
		Short: "Serve this machine's files and shell to a kernel as device ID",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.token == "" {
				o.token = os.Getenv("GSV_TOKEN")
			}
			if o.kernel == "" || o.id == "" || o.token == "" {
				return errors.New("gsvfs device needs --kernel, --id and a node token (--token or $GSV_TOKEN)")
			}
			if o.root == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return fmt.Errorf("--root: %w", err)
				}
				o.root = home
			}
			if o.procs < 0 {
				return fmt.Errorf("--procs %d: give a number of processors from 1, or 0 for all", o.procs)
			}
			if cmd.Flags().Changed("procs") || os.Getenv("GOMAXPROCS") == "" {
				setDeviceProcs(o.procs)
			}
			ignoreSIGPIPE()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDevice(ctx, o)
		},
	}
	cmd.Flags().StringVar(&o.kernel, "kernel", "", "the kernel's dial string, e.g. tcp!kernel.example!5640 or tls!kernel.example!5641")
	cmd.Flags().StringVar(&o.id, "id", "", "this device's id (the node token is bound to it)")
	cmd.Flags().StringVar(&o.token, "token", "", "the node token ($GSV_TOKEN)")
	cmd.Flags().StringVar(&o.root, "root", "", "the directory to export (default: your home)")
	cmd.Flags().BoolVar(&o.readOnly, "read-only", false, "refuse every write")
	cmd.Flags().BoolVar(&o.noShell, "no-shell", false, "serve no shell.exec")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&o.tlsCA, "tls-ca", "", "with --kernel tls!host!port: trust the PEM certificates in this file ($GSV_TLS_CA; default: the system's roots)")
	cmd.Flags().IntVar(&o.procs, "procs", 1, "how many processors run the daemon's Go code at once (GOMAXPROCS; 0: all; without the flag $GOMAXPROCS wins)")
	return cmd
}

// setDeviceProcs sets how many processors run the daemon's Go code at
// once: n, or the runtime's default for 0. One is the default: a routed
// call wakes the daemon's goroutines one after the other (the 9P read,
// the request, the answer), and with a second processor idle each wake-up
// also wakes a thread there (runtime.wakep), which costs a call more than
// it saves (docs/devices.md, "Speed"); commands run as processes of their
// own and a file's read waits in the kernel, neither holding the one.
func setDeviceProcs(n int) {
	if n == 0 {
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	runtime.GOMAXPROCS(n)
}

// runDevice serves the export to the kernel until ctx ends, dialing again
// after each connection ends, 3 s later at first and twice as long each
// time up to 5 min.
func runDevice(ctx context.Context, o deviceOptions) error {
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	ex, err := export.New(export.Options{Root: o.root, ReadOnly: o.readOnly, NoShell: o.noShell, Logger: log})
	if err != nil {
		return err
	}
	defer ex.Close()
	backoff := firstBackoff
	for {
		start := time.Now()
		err := serveKernel(ctx, o, ex, log)
		ex.EndSessions() // the kernel has failed them with the connection
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > steadyAfter {
			backoff = firstBackoff
		}
		log.Warn("device: the connection to the kernel ended", "kernel", o.kernel, "err", err, "retry", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// serveKernel makes one connection: it dials, says the hello, reads the
// welcome, and serves the export's tree over 9P until the connection
// ends.
func serveKernel(ctx context.Context, o deviceOptions, ex *export.Export, log *slog.Logger) error {
	dialer, err := kernelDialer(o.tlsCA)
	if err != nil {
		return err
	}
	nc, err := dialer.Dial(o.kernel)
	if err != nil {
		return err
	}
	defer nc.Close()
	tcp := nc
	if tc, ok := nc.(*tls.Conn); ok {
		tcp = tc.NetConn()
	}
	if tc, ok := tcp.(*net.TCPConn); ok {
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(15 * time.Second)
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	hello, err := json.Marshal(abi.DeviceHello{ID: o.id, Token: o.token, Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Version: Version, Implements: ex.Implements()})
	if err != nil {
		return err
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(append([]byte(abi.DeviceMagic), append(hello, '\n')...)); err != nil {
		return err
	}
	br := bufio.NewReader(nc)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("no welcome: %w", err)
	}
	var w abi.DeviceWelcome
	if err := json.Unmarshal(line, &w); err != nil {
		return fmt.Errorf("a malformed welcome: %w", err)
	}
	if !w.OK {
		return fmt.Errorf("the kernel refused: %s", w.Error)
	}
	nc.SetDeadline(time.Time{})
	log.Info("device: connected", "kernel", o.kernel, "id", o.id, "connection", w.ConnectionID, "root", o.root)
	srv := &ninep.Server{Root: ex.Tree(), Auth: kernelPeer{}, Logger: log, AuthTimeout: -1, MaxConns: -1, MaxFids: -1, MaxPrincipalInflight: -1}
	return srv.ServeConn(ctx, &readerConn{Conn: nc, r: br}, vfs.Peer{Transport: "device", HostUID: -1, HostGID: -1})
}

// kernelPeer authenticates the one peer of a device's 9P server: the
// kernel it dialed and said its hello to.
type kernelPeer struct{}

// Authenticate implements vfs.Authenticator.
func (kernelPeer) Authenticate(context.Context, vfs.Peer) (vfs.Cred, error) { return kernelCred{}, nil }

// kernelCred is the kernel as the device's tree sees it.
type kernelCred struct{}

// readerConn is a net.Conn whose reads come first from r's buffer.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }
