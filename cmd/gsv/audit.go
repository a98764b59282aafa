package main

// gsv audit: the audit log (sys.audit.query) and its check
// (sys.audit.verify).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

func (c *cli) auditCmd() *cobra.Command {
	var a abi.AuditQueryArgs
	var user string
	var follow bool
	audit := &cobra.Command{
		Use:   "audit [--pid P] [--since 1h] [--syscall S] [--trace T] [--uid N] [-f]",
		Short: "Show the audit log: who made which syscall, as whom, with what result (sys.audit.query)",
		Long: "Show the audit log, oldest first: one line per record (a \"change\" record commits with the\n" +
			"change it describes; a \"call\" record has the result code and duration). A user sees only their\n" +
			"own records; root sees everyone's. --since takes a duration (90s, 1h30m, 2d, 1w) or an RFC 3339\n" +
			"time. -f follows the log (Ctrl-C ends it).\n" +
			"  gsv audit --pid p_1234 --since 1h\n  gsv audit verify",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if user != "" {
				n, err := strconv.ParseUint(user, 10, 32)
				if err != nil {
					return fmt.Errorf("--uid %q: want a number", user)
				}
				u := uint32(n)
				a.Uid = &u
			}
			for {
				data, err := callRaw(c, abi.SysAuditQuery, &a)
				if err != nil {
					return err
				}
				res, err := decodeAs[*abi.AuditQueryResult](data)
				if err != nil {
					return err
				}
				for _, r := range res.Records {
					if c.json {
						line, _ := json.Marshal(r)
						fmt.Fprintf(c.out, "%s\n", line)
					} else {
						fmt.Fprint(c.out, string(auditLine(&r)))
					}
					a.After = r.Seq
				}
				if !follow {
					return nil
				}
				if len(res.Records) == 0 {
					time.Sleep(time.Second)
				}
				a.Since = ""
			}
		},
	}
	f := audit.Flags()
	f.StringVar(&a.Pid, "pid", "", "the records of calls made by or naming this process")
	f.StringVar(&a.Since, "since", "", "records from this long ago (1h, 2d) or this RFC 3339 time")
	f.StringVar(&a.Syscall, "syscall", "", `one syscall's records ("proc.send"), or a prefix ("proc.")`)
	f.StringVar(&a.Trace, "trace", "", "one trace's records")
	f.StringVar(&user, "uid", "", "one user's records (root)")
	f.IntVar(&a.Limit, "limit", 0, "at most N records per request (default 1000)")
	f.BoolVarP(&follow, "follow", "f", false, "follow the log as records arrive")

	verify := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain from its first kept record (sys.audit.verify, root)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysAuditVerify, nil, func(r *abi.AuditVerifyResult) error {
				if !r.Intact {
					return fmt.Errorf("audit log broken at record %d: %s", r.BadSeq, r.Reason)
				}
				_, err := fmt.Fprintf(c.out, "ok: %d records (%d..%d), the chain holds\n", r.Records, r.First, r.Last)
				return err
			})
		},
	}
	audit.AddCommand(verify)
	return audit
}

// auditLine renders a record as /var/log/gsv/audit does.
func auditLine(r *abi.AuditRecord) []byte {
	b := time.UnixMilli(r.Time).Local().AppendFormat(nil, "2006-01-02 15:04:05.000")
	b = fmt.Appendf(b, " %d %s %s %s(%d)", r.Seq, r.Kind, r.Syscall, r.Username, r.Uid)
	for _, kv := range [][2]string{{"pid", r.Pid}, {"conv", r.Conv}, {"target", r.Target}, {"token", r.TokenID}} {
		if kv[1] != "" {
			b = fmt.Appendf(b, " %s=%s", kv[0], kv[1])
		}
	}
	if r.Kind == "call" {
		b = fmt.Appendf(b, " code=%d dur=%s", r.Code, time.Duration(r.DurUs)*time.Microsecond)
	}
	if r.Trace != "" {
		b = fmt.Appendf(b, " trace=%s", r.Trace)
	}
	if r.Args != "" {
		b = fmt.Appendf(b, " args=%s", r.Args)
	}
	return append(b, '\n')
}

// statusCmd is gsv status: the daemon's health (sys.status).
func (c *cli) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the daemon's health: version, uptime, store size, devices, adapters, runs, queues, last errors (sys.status)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysStatus, nil, func(r *abi.DaemonStatus) error {
				fmt.Fprintf(c.out, "version   %s\nuptime    %s\nstore     %d bytes\ndevices   %d online of %d\nruns      %d under way or parked\naudit     %d call records pending\n",
					r.Version, (time.Duration(r.UptimeMs) * time.Millisecond).Round(time.Second), r.StoreBytes,
					r.DevicesOnline, r.DevicesTotal, r.RunsActive, r.AuditPending)
				online := 0
				for _, a := range r.Adapters {
					if a.Online {
						online++
					}
				}
				fmt.Fprintf(c.out, "adapters  %d online of %d\n", online, len(r.Adapters))
				for _, a := range r.Adapters {
					state := "offline"
					if a.Online {
						state = "online"
					}
					fmt.Fprintf(c.out, "  %s/%s %s, %d pending", a.Adapter, a.AccountID, state, a.Pending)
					if a.Error != "" {
						fmt.Fprintf(c.out, ", last error: %s", a.Error)
					}
					fmt.Fprintln(c.out)
				}
				fmt.Fprintf(c.out, "queues    outbox %d pending, scheduler %d waiting, %d running\n", r.OutboxPending, r.SchedQueued, r.SchedRunning)
				if len(r.LastErrors) == 0 {
					_, err := fmt.Fprintln(c.out, "errors    none")
					return err
				}
				fmt.Fprintln(c.out, "errors    (last, oldest first)")
				for _, e := range r.LastErrors {
					fmt.Fprintf(c.out, "  %s %s %d %s\n", time.UnixMilli(e.Time).Local().Format("2006-01-02 15:04:05"), e.Syscall, e.Code, e.Error)
				}
				return nil
			})
		},
	}
}
