package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/adapters/bridge"
	"gsvfs.dev/gsvfs/mcpserve"
)

// The adapter bridge: gsvfs adapter KIND dials a kernel with a service
// token bound to KIND and runs the platform's account against it
// (adapters/bridge, docs/adapters.md), reconnecting with backoff to
// either side until stopped.

// adapterOptions are the bridge's flags.
type adapterOptions struct {
	kernel   string
	token    string
	account  string
	secret   string // --bot-token-file
	baseURL  string
	opts     []string
	logLevel string
	tlsCA    string
}

// adapterCmd is gsvfs adapter.
func adapterCmd() *cobra.Command {
	var o adapterOptions
	cmd := &cobra.Command{
		Use:   "adapter KIND --kernel ADDR --token T [--bot-token-file F] [--account ID] [--base-url U] [--opt k=v]...",
		Short: "Bridge a chat platform's account (" + strings.Join(bridge.Kinds(), ", ") + ") to a kernel",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.token == "" {
				o.token = os.Getenv("GSV_TOKEN")
			}
			if o.kernel == "" {
				o.kernel = os.Getenv("GSV_ADDR")
			}
			if o.kernel == "" || o.token == "" {
				return errors.New("gsvfs adapter needs --kernel and a service token bound to the adapter (--token or $GSV_TOKEN; gsv token create --kind service --adapter KIND)")
			}
			ignoreSIGPIPE()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAdapter(ctx, args[0], o)
		},
	}
	cmd.Flags().StringVar(&o.kernel, "kernel", "", "the kernel's dial string, e.g. tcp!kernel.example!5640 or tls!kernel.example!5641 ($GSV_ADDR)")
	cmd.Flags().StringVar(&o.token, "token", "", "the service token bound to the adapter ($GSV_TOKEN)")
	cmd.Flags().StringVar(&o.account, "account", "default", "the account's id in the kernel")
	cmd.Flags().StringVar(&o.secret, "bot-token-file", "", "a file holding the platform's credential (a bot token, a password, a webhook secret)")
	cmd.Flags().StringVar(&o.baseURL, "base-url", "", "the platform's API address (a self-hosted server, or a test's)")
	cmd.Flags().StringArrayVar(&o.opts, "opt", nil, "a kind's own setting, key=value (docs/adapters.md)")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.Flags().StringVar(&o.tlsCA, "tls-ca", "", "with --kernel tls!host!port: trust the PEM certificates in this file")
	return cmd
}

// runAdapter makes the kind's Adapter and runs its bridge until ctx ends.
func runAdapter(ctx context.Context, kind string, o adapterOptions) error {
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	cfg := bridge.Config{Account: o.account, BaseURL: o.baseURL, Options: map[string]string{}}
	if o.secret != "" {
		b, err := os.ReadFile(o.secret)
		if err != nil {
			return fmt.Errorf("--bot-token-file: %w", err)
		}
		cfg.Secret = strings.TrimSpace(string(b))
	}
	for _, kv := range o.opts {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--opt %q: want key=value", kv)
		}
		cfg.Options[k] = v
	}
	a, err := bridge.New(kind, cfg)
	if err != nil {
		return err
	}
	dialer, err := kernelDialer(o.tlsCA)
	if err != nil {
		return err
	}
	token := []byte(o.token)
	dial := func(ctx context.Context) (bridge.Conn, error) {
		rpc, err := mcpserve.Dial(dialer, o.kernel, "", token)
		if err != nil {
			return nil, err
		}
		return rpcConn{rpc}, nil
	}
	log.Info("adapter: starting", "kind", kind, "account", o.account, "kernel", o.kernel)
	return bridge.Run(ctx, bridge.Options{Adapter: a, Account: o.account, Dial: dial, Logger: log})
}

// rpcConn is a bridge.Conn over a 9P connection's /sys/rpc: the
// dispatcher's answers are bridge.KernelErrors.
type rpcConn struct{ *mcpserve.RPC }

// Call implements bridge.Conn.
func (c rpcConn) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	res, err := c.RPC.Call(ctx, name, args)
	var ce *mcpserve.CallError
	if errors.As(err, &ce) {
		return nil, &bridge.KernelError{Code: ce.Code, Message: ce.Message}
	}
	return res, err
}
