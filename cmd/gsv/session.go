package main

// The exec session commands: session open, list, status, signal and
// close (process.session.*), and exec (process.exec), which writes the
// command's output to gsv's own stdout and stderr and exits with its
// exit code.

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// blobWindow is the most process.blob.read returns in one call.
const blobWindow = 16 << 20

// exitError makes gsv exit with code, after printing msg (if any) on
// stderr as gsv's own error: a command run by gsv exec that exited
// non-zero, timed out or was signaled.
type exitError struct {
	code int
	msg  string
}

// Error is the message, or the exit status when there is none.
func (e *exitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// stampNs renders a time in nanoseconds as a table cell.
func stampNs(ns int64) string {
	return stamp(ns / int64(time.Millisecond))
}

// keyValues parses K=V flags into a map (nil for none); what names them
// in an error.
func keyValues(what string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want K=V", what, kv)
		}
		m[k] = v
	}
	return m, nil
}

// durationNs returns d in nanoseconds for an optional *_ns arg.
func durationNs(d time.Duration) *int64 {
	ns := int64(d)
	return &ns
}

// fixedComp completes an argument or flag from a fixed list.
func fixedComp(words ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return words, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeSID completes a session id (the first argument) with the
// caller's sessions, open ones only unless ended is set; rest completes
// the arguments after it.
func (c *cli) completeSID(ended bool, rest func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			if rest == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return rest(cmd, args, toComplete)
		}
		r, err := call(c, abi.ProcessSessionList, &abi.SessionListArgs{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var ids []string
		for _, s := range r.Sessions {
			if (ended || s.State != "ended") && strings.HasPrefix(s.SessionID, toComplete) {
				ids = append(ids, s.SessionID+"\t"+s.State+" "+s.Workdir)
			}
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

// sessionCmd is gsv session and its subcommands.
func (c *cli) sessionCmd() *cobra.Command {
	sess := &cobra.Command{
		Use:   "session",
		Short: "Open, list, inspect, signal and close exec sessions (process.session.*)",
	}
	sess.AddCommand(c.sessionOpenCmd(), c.sessionListCmd(), c.sessionStatusCmd(), c.sessionSignalCmd(), c.sessionCloseCmd())
	return sess
}

func (c *cli) sessionOpenCmd() *cobra.Command {
	var mounts, envs, labels []string
	var network, workdir, device string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "open [--device ID] [--mount HOST:GUEST[:ro|rw]]... [--network none|full] [--workdir DIR] [--env K=V]... [--ttl D] [--label K=V]...",
		Short: "Open an exec session and print its id (process.session.open)",
		Long: "Open a sandboxed exec session and print its id only:\n" +
			"  sid=$(gsv session open --mount '~/proj:/work' --mount /workspaces/data:/data:ro)\n" +
			"HOST is a directory of the namespace (~ is your home there: quote it from the shell;\n" +
			"host:/PATH a raw host path, root only), GUEST where it appears in the sandbox; the mode\n" +
			"is rw unless :ro is given (the daemon narrows it to what you may do: see --json's\n" +
			"isolation). The network is none (loopback only) unless --network full.\n" +
			"With --device ID the session runs on that remote device, in its own sandbox, and\n" +
			"HOST is a directory of the device's export (~ is the device user's home there).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			loc := &abi.ProcessLocalTarget{Workdir: workdir, NetworkMode: network}
			for _, m := range mounts {
				pm, err := abi.ParseMount(m)
				if err != nil {
					return err
				}
				loc.Mounts = append(loc.Mounts, pm)
			}
			var err error
			if loc.Env, err = keyValues("env", envs); err != nil {
				return err
			}
			a := &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: loc}}
			if device != "" {
				a.Target = abi.ProcessTarget{Device: &abi.ProcessDeviceTarget{ID: device, ProcessLocalTarget: *loc}}
			}
			if a.Labels, err = keyValues("label", labels); err != nil {
				return err
			}
			if cmd.Flags().Changed("ttl") {
				a.SessionTTLNs = durationNs(ttl)
			}
			return show(c, abi.ProcessSessionOpen, a, func(r *abi.SessionOpenResult) error {
				if r.Status != "ready" {
					return fmt.Errorf("process.session.open: %s: %s", r.ErrorCode, r.Error)
				}
				_, err := fmt.Fprintln(c.out, r.SessionID)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&mounts, "mount", nil, "mount HOST:GUEST[:ro|rw] (repeatable; default mode rw)")
	f.StringVar(&network, "network", abi.NetworkNone, "the network: none (loopback only) or full")
	f.StringVar(&workdir, "workdir", "", "the working directory in the sandbox (default: the first mount's guest path)")
	f.StringArrayVar(&envs, "env", nil, "an environment variable K=V (repeatable)")
	f.DurationVar(&ttl, "ttl", 0, "how long the session lives (default: the daemon's, 1h)")
	f.StringArrayVar(&labels, "label", nil, "a label K=V (repeatable)")
	f.StringVar(&device, "device", "", "open the session on this remote device (see gsv device list)")
	cmd.RegisterFlagCompletionFunc("network", fixedComp(abi.NetworkNone, abi.NetworkFull))
	return cmd
}

// lastExit renders a session's last exec as a table cell: its exit code,
// or its status when it did not run to its exit.
func lastExit(r *abi.ExecResult) string {
	switch {
	case r == nil:
		return "-"
	case r.Status == abi.ExecOK:
		return strconv.Itoa(r.ExitCode)
	case r.Status == abi.ExecError && r.ErrorCode != "":
		return cell(r.ErrorCode)
	case r.Status == abi.ExecTimeout || r.Status == abi.ExecSignaled:
		return fmt.Sprintf("%s(%d)", r.Status, r.ExitCode)
	}
	return cell(r.Status)
}

func (c *cli) sessionListCmd() *cobra.Command {
	var device string
	cmd := &cobra.Command{
		Use:   "list [--device ID]",
		Short: "List your exec sessions (process.session.list; root: everyone's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.ProcessSessionList, &abi.SessionListArgs{Target: device}, func(r *abi.SessionListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tNETWORK\tWORKDIR\tSTARTED\tEXPIRES\tLAST EXIT")
				for _, s := range r.Sessions {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(s.SessionID), cell(s.State), cell(s.Network), cell(s.Workdir),
						stampNs(s.StartedAtNs), stampNs(s.ExpiresAtNs), lastExit(s.LastExec))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&device, "device", "", "list your sessions on this remote device")
	return cmd
}

func (c *cli) sessionStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "status SID",
		Short:             "Print an exec session's status as JSON (process.session.get)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeSID(true, nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := callRaw(c, abi.ProcessSessionGet, &abi.SessionGetArgs{SessionID: args[0]})
			if err != nil {
				return err
			}
			return c.printJSON(data)
		},
	}
}

// signal sends sig to session sid and prints the receipt.
func (c *cli) signal(sid, sig string, grace *int64) error {
	a := &abi.SessionSignalArgs{SessionID: sid, Signal: sig, GraceTimeoutNs: grace}
	return show(c, abi.ProcessSessionSignal, a, func(r *abi.SessionSignalResult) error {
		if r.Status == abi.SignalNotFound {
			return fmt.Errorf("process.session.signal: %s: no such session (not_found)", sid)
		}
		line := sid + ": " + cell(r.Status)
		if r.ExitCode != nil {
			line += fmt.Sprintf(", running exec stopped with exit code %d", *r.ExitCode)
		}
		_, err := fmt.Fprintln(c.out, line)
		return err
	})
}

func (c *cli) sessionSignalCmd() *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "signal SID term|kill|int [--grace D]",
		Short: "Signal an exec session (process.session.signal)",
		Long: "Signal session SID: int interrupts its running exec (the session stays open); term ends\n" +
			"the session (SIGTERM to its processes, SIGKILL after --grace, default 1s); kill ends it at\n" +
			"once. It prints the session's status: signaled, or already_exited; a session that does\n" +
			"not exist (the receipt not_found) fails.",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: c.completeSID(false, fixedComp(abi.SignalTerm, abi.SignalKill, abi.SignalInt)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var g *int64
			if cmd.Flags().Changed("grace") {
				g = durationNs(grace)
			}
			return c.signal(args[0], args[1], g)
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "with term: how long before SIGKILL (default: the daemon's, 1s)")
	return cmd
}

func (c *cli) sessionCloseCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "close SID",
		Short:             "End an exec session (process.session.signal term)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeSID(false, nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.signal(args[0], abi.SignalTerm, nil)
		},
	}
}

func (c *cli) execCmd() *cobra.Command {
	var cwd, output string
	var envs []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec SID [--cwd DIR] [--timeout D] [--env K=V]... [--output auto|require_inline] -- ARGV...",
		Short: "Run a command in an exec session (process.exec)",
		Long: "Run ARGV (no shell unless ARGV says so) in session SID and wait for it. Its stdout and\n" +
			"stderr are written to gsv's, whole (large output is read back from its blob), and gsv exits\n" +
			"with its exit code: 124 if it timed out, 128+N if signal N stopped it, 1 if it could not run\n" +
			"or its output could not be returned as asked (--output require_inline over 1 MiB). --json\n" +
			"prints the receipt instead of the output, and exits the same way.\n" +
			"  gsv exec $sid -- sh -c 'make test 2>&1'",
		Args: func(cmd *cobra.Command, args []string) error {
			if d := cmd.ArgsLenAtDash(); d >= 0 && d != 1 {
				return errors.New("usage: gsv exec SID [flags] -- ARGV...: one SID before --")
			}
			if len(args) < 2 {
				return errors.New("usage: gsv exec SID [flags] -- ARGV...")
			}
			return nil
		},
		ValidArgsFunction: c.completeSID(false, func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveDefault
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.ExecArgs{SessionID: args[0], Argv: args[1:], Cwd: cwd, OutputMode: output}
			var err error
			if a.EnvPatch, err = keyValues("env", envs); err != nil {
				return err
			}
			if cmd.Flags().Changed("timeout") {
				a.TimeoutNs = durationNs(timeout)
			}
			data, err := callRaw(c, abi.ProcessExec, a)
			if err != nil {
				return err
			}
			r := new(abi.ExecResult)
			if err := decodeResult(data, r); err != nil {
				return err
			}
			if c.json {
				if err := c.printJSON(data); err != nil {
					return err
				}
				if code := execCode(r); code != 0 {
					return &exitError{code: code}
				}
				return nil
			}
			stderr := cmd.ErrOrStderr()
			if err := c.writeOutput(c.out, stderr, "stdout", r.Stdout); err != nil {
				return err
			}
			if err := c.writeOutput(stderr, stderr, "stderr", r.Stderr); err != nil {
				return err
			}
			switch r.Status {
			case abi.ExecOK:
				if r.ExitCode != 0 {
					return &exitError{code: r.ExitCode}
				}
				return nil
			case abi.ExecTimeout:
				msg := "exec: the command timed out"
				if r.Error != "" {
					msg = "exec: " + r.Error
				}
				return &exitError{code: 124, msg: msg}
			case abi.ExecSignaled:
				return &exitError{code: execCode(r), msg: fmt.Sprintf("exec: the command was stopped by a signal (exit code %d)", r.ExitCode)}
			case abi.ExecError:
				return &exitError{code: 1, msg: fmt.Sprintf("exec: %s: %s", r.ErrorCode, r.Error)}
			}
			return &exitError{code: 1, msg: fmt.Sprintf("exec: status %q", r.Status)}
		},
	}
	f := cmd.Flags()
	f.StringVar(&cwd, "cwd", "", "the working directory in the sandbox (default: the session's)")
	f.DurationVar(&timeout, "timeout", 0, "the command's time limit (default: the daemon's, 10m)")
	f.StringArrayVar(&envs, "env", nil, "an environment variable K=V over the session's (repeatable)")
	f.StringVar(&output, "output", abi.OutputAuto, "auto (large output in a blob) or require_inline (fail over 1 MiB)")
	cmd.RegisterFlagCompletionFunc("output", fixedComp(abi.OutputAuto, abi.OutputRequireInline))
	return cmd
}

// execCode is the exit status gsv exec gives a receipt: the command's
// exit code, 124 for a timeout, 1 for an error.
func execCode(r *abi.ExecResult) int {
	switch r.Status {
	case abi.ExecOK:
		return r.ExitCode
	case abi.ExecTimeout:
		return 124
	case abi.ExecSignaled:
		if r.ExitCode != 0 {
			return r.ExitCode
		}
	}
	return 1
}

// writeOutput writes one stream of an exec's output to w: its inline
// text or bytes, or its whole blob read back window by window. A blob
// the daemon truncated is said so on stderr.
func (c *cli) writeOutput(w, stderr io.Writer, stream string, o *abi.ExecOutput) error {
	switch {
	case o == nil:
		return nil
	case o.InlineText != nil:
		_, err := io.WriteString(w, o.InlineText.Text)
		return err
	case o.InlineBytes != nil:
		_, err := w.Write(o.InlineBytes.Bytes)
		return err
	case o.Blob != nil:
		b := o.Blob
		var off int64
		for off < b.SizeBytes {
			r, err := call(c, abi.ProcessBlobRead, &abi.BlobReadArgs{BlobRef: b.BlobRef, Target: b.Device, Offset: off, Limit: min(blobWindow, b.SizeBytes-off)})
			if err != nil {
				return fmt.Errorf("%s: %w", stream, err)
			}
			if len(r.Bytes) == 0 {
				return fmt.Errorf("%s: blob %s ends at %d bytes, not %d", stream, b.BlobRef, off, b.SizeBytes)
			}
			if _, err := w.Write(r.Bytes); err != nil {
				return err
			}
			off += int64(len(r.Bytes))
		}
		if b.Truncated {
			fmt.Fprintf(stderr, "gsv: exec: %s was cut at %d bytes (the exec's output ceiling)\n", stream, b.SizeBytes)
		}
	}
	return nil
}
