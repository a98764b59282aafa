package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// ipcCmd is gsv ipc: mail, calls and delegation between your processes
// (proc.ipc.*), each sent from a process of yours (--from, default your
// init), as a line of that process's ctl would.
func (c *cli) ipcCmd() *cobra.Command {
	ipc := &cobra.Command{
		Use:   "ipc",
		Short: "Mail, call and delegate between your processes (proc.ipc.*)",
		Long: "Messages between processes of the same owner. Each is sent from one of your processes\n" +
			"(--from, default your init): the target sees it as a process.message or process.call\n" +
			"from that process, and a call's answer comes back to it as an ipc.reply event.",
	}
	ipc.AddCommand(c.ipcSendCmd(), c.ipcCallCmd(), c.ipcDelegateCmd(), c.ipcListCmd())
	return ipc
}

// fromPid is the source process: --from, or the caller's init.
func (c *cli) fromPid(from string) (string, error) {
	return c.resolvePid(from)
}

func (c *cli) ipcSendCmd() *cobra.Command {
	var from, conv string
	cmd := &cobra.Command{
		Use:   "send [--from P] PID TEXT...",
		Short: "Mail TEXT to process PID (proc.ipc.send)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := c.fromPid(from)
			if err != nil {
				return err
			}
			a := &abi.IpcSendArgs{Pid: args[0], SourcePid: src, ConversationID: conv, Message: strings.Join(args[1:], " ")}
			return show(c, abi.ProcIpcSend, a, func(r *abi.IpcSendResult) error {
				fmt.Fprintf(c.out, "%s %s\n", r.RunID, startedOrQueued(r.Queued))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the sending process (default: your init)")
	cmd.Flags().StringVar(&conv, "conv", "", "the target's conversation (default: default)")
	return cmd
}

// startedOrQueued names what a delivery did.
func startedOrQueued(queued bool) string {
	if queued {
		return "queued"
	}
	return "started"
}

func (c *cli) ipcCallCmd() *cobra.Command {
	var from, conv string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call [--from P] [--timeout D] PID TEXT...",
		Short: "Call process PID with TEXT; its answer comes back to the sender (proc.ipc.call)",
		Long: "Deliver TEXT to PID as a call with a deadline (--timeout, default 60s). It prints the call id\n" +
			"and deadline at once; the answer (or ipc.timeout) arrives in the sender's conversation.\n" +
			"gsv ipc list shows the call's state.",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := c.fromPid(from)
			if err != nil {
				return err
			}
			a := &abi.IpcCallArgs{IpcSendArgs: abi.IpcSendArgs{Pid: args[0], SourcePid: src, ConversationID: conv, Message: strings.Join(args[1:], " ")},
				TimeoutMs: timeout.Milliseconds()}
			return show(c, abi.ProcIpcCall, a, func(r *abi.IpcCallResult) error {
				fmt.Fprintf(c.out, "%s deadline %s %s\n", r.CallID, stamp(r.DeadlineAt), startedOrQueued(r.Queued))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the calling process (default: your init)")
	cmd.Flags().StringVar(&conv, "conv", "", "the target's conversation (default: default)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "the deadline (default 60s; 1s to 1h)")
	return cmd
}

func (c *cli) ipcDelegateCmd() *cobra.Command {
	var from, profile, label, worker string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "delegate [--from P] [--profile task] [--label L] [--worker PID] [--timeout D] TASK...",
		Short: "Hand TASK to a new worker process and get its answer back (proc.ipc.delegate)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := c.fromPid(from)
			if err != nil {
				return err
			}
			a := &abi.IpcDelegateArgs{SourcePid: src, Task: strings.Join(args, " "), Profile: profile, Label: label, Pid: worker, TimeoutMs: timeout.Milliseconds()}
			return show(c, abi.ProcIpcDelegate, a, func(r *abi.IpcDelegateResult) error {
				fmt.Fprintf(c.out, "%s worker %s deadline %s\n", r.CallID, r.WorkerPid, stamp(r.DeadlineAt))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the delegating process (default: your init)")
	cmd.Flags().StringVar(&profile, "profile", "", "the worker's profile (default task)")
	cmd.Flags().StringVar(&label, "label", "", "the worker's label")
	cmd.Flags().StringVar(&worker, "worker", "", "an existing worker process instead of a new one")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "the deadline (default 5m; 1s to 1h)")
	return cmd
}

func (c *cli) ipcListCmd() *cobra.Command {
	var pid string
	cmd := &cobra.Command{
		Use:   "list [--pid P]",
		Short: "List a process's calls, newest first (proc.ipc.list)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.ProcIpcList, &abi.PidArgs{Pid: pid}, func(r *abi.IpcListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CALL\tDIR\tFROM\tTO\tDEADLINE\tSTATE")
				for _, k := range r.Calls {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.CallID, k.Direction, k.SourcePid, k.TargetPid, stamp(k.DeadlineAt), k.State)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	return cmd
}

// watchCmd is gsv watch: signal watches of a process (signal.*).
func (c *cli) watchCmd() *cobra.Command {
	var from, key string
	var always, list, remove bool
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "watch [--from P] SIGNAL PROCESS [--always] [--ttl D] [--key K] | watch --list [--from P] | watch --rm [--from P] WATCH-ID|--key K",
		Short: "Tell a process of yours when another publishes a signal (signal.watch)",
		Long: "gsv watch proc.run.finished PID makes your process (--from, default your init) receive\n" +
			"the next proc.run.finished of PID as a [Process Event]: signal message (--always: every one,\n" +
			"until --ttl, default 24h). --list lists the process's watches; --rm removes one.",
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := c.fromPid(from)
			if err != nil {
				return err
			}
			switch {
			case list:
				return show(c, abi.SignalList, &abi.WatchListArgs{Pid: src}, func(r *abi.WatchListResult) error {
					tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "WATCH\tSIGNAL\tPROCESS\tONCE\tSTATUS\tFIRED\tEXPIRES")
					for _, w := range r.Watches {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%d\t%s\n", w.WatchID, w.Signal, w.ProcessID, w.Once, w.Status, w.Fired, stamp(w.ExpiresAt))
					}
					return tw.Flush()
				})
			case remove:
				a := &abi.UnwatchArgs{WatcherPid: src, Key: key}
				if len(args) == 1 {
					a.WatchID = args[0]
				}
				return show(c, abi.SignalUnwatch, a, func(r *abi.UnwatchResult) error {
					fmt.Fprintf(c.out, "removed %d\n", r.Removed)
					return nil
				})
			}
			if len(args) != 2 {
				return fmt.Errorf("usage: gsv watch [--from P] SIGNAL PROCESS")
			}
			once := !always
			a := &abi.WatchArgs{WatcherPid: src, Signal: args[0], ProcessID: args[1], Key: key, Once: &once}
			if ttl > 0 {
				ms := ttl.Milliseconds()
				a.TTLMs = &ms
			}
			return show(c, abi.SignalWatch, a, func(r *abi.WatchResult) error {
				fmt.Fprintln(c.out, r.WatchID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the watching process (default: your init)")
	cmd.Flags().StringVar(&key, "key", "", "a key: a watch with the same key is replaced")
	cmd.Flags().BoolVar(&always, "always", false, "every matching signal, not only the next")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the watch lives (default 24h; 1s to 30d)")
	cmd.Flags().BoolVar(&list, "list", false, "list the process's watches")
	cmd.Flags().BoolVar(&remove, "rm", false, "remove a watch by id or --key")
	return cmd
}
