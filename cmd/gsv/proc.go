package main

// The proc.* commands: ps, spawn, send, history, conv, abort, kill, reset
// and hil. Each is one or two syscalls through /sys/call; chat.go adds the
// interactive chat, which also reads /proc/<pid>/events; run.go adds the
// deliberable run commands (run, continue, stop, start, supervise).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// str renders an optional name as a table cell: "-" when unset.
func str(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return cell(*s)
}

// cell renders a name as a table cell. A name that is not one line of
// printable text (a control character such as a newline, tab or ESC, a
// line separator, invalid UTF-8: a record stored before the daemon
// refused such names) is quoted, Go style, so that it can never forge a
// row or a terminal sequence.
func cell(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return strconv.Quote(s)
		}
	}
	return s
}

func stamp(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format("2006-01-02 15:04:05")
}

func (c *cli) addProcCommands(root *cobra.Command) {
	root.AddCommand(c.psCmd(), c.spawnCmd(), c.sendCmd(), c.historyCmd(), c.convCmd(),
		c.abortCmd(), c.killCmd(), c.resetCmd(), c.hilCmd())
}

func (c *cli) psCmd() *cobra.Command {
	var uid int
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List processes (proc.list)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.ListArgs{}
			if uid >= 0 {
				u := uint32(uid)
				a.Uid = &u
			}
			return show(c, abi.ProcList, a, func(r *abi.ProcListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PID\tUID\tPROFILE\tSTATE\tLABEL\tCREATED")
				for _, p := range r.Processes {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", cell(p.Pid), p.Uid, cell(p.Profile), cell(p.State), str(p.Label), stamp(p.CreatedAt))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&uid, "uid", -1, "list this user's processes (root only for another user)")
	return cmd
}

func (c *cli) spawnCmd() *cobra.Command {
	var label, prompt, parent, mcp string
	var budget budgetFlag
	var supervise bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "spawn PROFILE [--budget SPEC] [--supervise [--grace D]] [--mcp a,b]",
		Short: "Start a process and print its pid (proc.spawn)",
		Long: "Start a process of PROFILE (init, task, review, cron) and print its pid only:\n" +
			"  pid=$(gsv spawn task --label researcher)\n" +
			"--budget SPEC limits what its runs may spend, comma-separated KEY=VALUE pairs:\n" +
			"  usd=0.50  tokens=100000 (or 100k)  turns=20  time=10m (a Go duration)  on-exhaust=pause|abort\n" +
			"(0 or absent: no limit). A spent budget parks the run until gsv continue --extend-budget\n" +
			"(on-exhaust=pause, the default) or aborts it. --supervise makes every checkpoint wait for a\n" +
			"directive, or continue by itself after --grace (default 5s):\n" +
			"  gsv spawn task --budget turns=20,usd=0.50,time=10m --supervise --grace 10s\n" +
			"--mcp a,b narrows which of your MCP servers it sees (its Mcp tool, its CodeMode mcp.*): only\n" +
			"those named; --mcp '' none; absent: all of them.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.SpawnArgs{Profile: args[0], Label: label, Prompt: prompt, ParentPid: parent,
				Budget: budget.b, Supervise: supervise}
			if cmd.Flags().Changed("grace") {
				if grace <= 0 || grace > 24*time.Hour {
					return fmt.Errorf("--grace %s: want more than 0, at most 24h", grace)
				}
				a.GraceMs = grace.Milliseconds()
			}
			if cmd.Flags().Changed("mcp") {
				a.McpServers = abi.ParseMcpServers(mcp)
			}
			return show(c, abi.ProcSpawn, a, func(r *abi.SpawnResult) error {
				fmt.Fprintln(c.out, r.Pid)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "a label for the process")
	cmd.Flags().StringVar(&prompt, "prompt", "", "a first message to send it")
	cmd.Flags().StringVar(&parent, "parent", "", "the parent process's pid")
	cmd.Flags().Var(&budget, "budget", "its budget: usd=0.50,tokens=100k,turns=20,time=10m,on-exhaust=pause|abort")
	cmd.Flags().BoolVar(&supervise, "supervise", false, "every checkpoint waits for a directive (or the grace)")
	cmd.Flags().StringVar(&mcp, "mcp", "", "the MCP servers it sees, by name, comma-separated ('' none; absent: all)")
	cmd.Flags().DurationVar(&grace, "grace", 0, "how long a supervised checkpoint waits before it continues by itself (default 5s)")
	return cmd
}

func (c *cli) sendCmd() *cobra.Command {
	var pid, conv, mode string
	var media []string
	var wait bool
	cmd := &cobra.Command{
		Use:   "send [PID | --pid P] [--conv C] [--mode queue|steer|interrupt] [--media FILE]... TEXT...",
		Short: "Send a message to a process (proc.send); TEXT - reads it from stdin",
		Long: "Send TEXT (the words joined by spaces) to conversation C (default: default) of process P\n" +
			"(default: your init). A first word that is a pid (init:1000, 3fa2b1c0-9d1e) is P, as for gsv\n" +
			"chat and gsv run: gsv send PID TEXT...; with --pid every word is TEXT.\n" +
			"With TEXT \"-\" the message is read from stdin. It prints the run id and\n" +
			"whether it started or was queued; with --wait it prints the answer as it streams and returns\n" +
			"when the run has finished (or waits for a human: see gsv hil).\n" +
			"--mode says what the message does when a run is under way: queue (the default) waits for it;\n" +
			"steer enters the running run at its next checkpoint (it prints the running run's id and\n" +
			"\"steered\"); interrupt aborts it and runs this message next.\n" +
			"--media FILE (again for more) attaches a file: an image reaches the model as an image, audio,\n" +
			"video and documents as their names; each is kept in your media store, /var/media/$USER.\n" +
			"A message with media may have no TEXT.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(media) == 0 {
				return fmt.Errorf("gsv send: no text to send (gsv send [PID] TEXT..., or TEXT - to read it from stdin)")
			}
			if cmd.Flags().Changed("mode") {
				if err := checkMode(mode); err != nil {
					return err
				}
			}
			if !cmd.Flags().Changed("pid") && len(args) > 0 && isPid(args[0]) {
				pid, args = args[0], args[1:]
				if len(args) == 0 && len(media) == 0 {
					return fmt.Errorf("gsv send %s: no text to send (gsv send PID TEXT..., or TEXT - to read it from stdin)", pid)
				}
			}
			words, err := readText(cmd, args)
			if err != nil {
				return err
			}
			a := &abi.SendArgs{Pid: pid, ConversationID: conv, Message: strings.Join(words, " "), Mode: mode}
			if a.Media, err = mediaFiles(media, a.Message); err != nil {
				return err
			}
			if !wait {
				return show(c, abi.ProcSend, a, func(r *abi.SendResult) error {
					state := "started"
					switch {
					case r.Status == "steered":
						state = "steered"
					case r.Queued:
						state = "queued"
					}
					fmt.Fprintf(c.out, "%s %s\n", r.RunID, state)
					return nil
				})
			}
			// --wait: open the process's events before sending.
			p, err := c.resolvePid(pid)
			if err != nil {
				return err
			}
			evs, err := openEvents(p)
			if err != nil {
				return err
			}
			defer evs.close()
			a.Pid = p
			r, err := call(c, abi.ProcSend, a)
			if err != nil {
				return err
			}
			w := &runWatch{c: c, evs: evs, pid: p, runID: r.RunID, errOut: cmd.ErrOrStderr()}
			fin, err := w.follow()
			if err != nil {
				return err
			}
			if fin.hil != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "waiting for approval: gsv hil --pid %s approve|deny|substitute %s\n", p, fin.hil.RequestID)
				return nil
			}
			return fin.err()
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	cmd.Flags().StringVar(&conv, "conv", "", "the conversation (default: default)")
	cmd.Flags().BoolVar(&wait, "wait", false, "print the answer and wait for the run to finish")
	cmd.Flags().StringVar(&mode, "mode", "", "with a run under way: queue (default), steer or interrupt")
	cmd.Flags().StringArrayVar(&media, "media", nil, "attach a file (an image, audio, video or document); again for more")
	return cmd
}

// pidShape matches the pids proc makes: init:<uid>, and 8 and 4 hex digits.
var pidShape = regexp.MustCompile(`^(init:[0-9]+|[0-9a-f]{8}-[0-9a-f]{4})$`)

// isPid reports whether word has the shape of a pid (whether or not such
// a process exists: a send to one that does not is refused with 404,
// never sent elsewhere).
func isPid(word string) bool { return pidShape.MatchString(word) }

// resolvePid returns pid, or the caller's init pid when pid is empty,
// checking that the process exists and is the caller's.
func (c *cli) resolvePid(pid string) (string, error) {
	r, err := call(c, abi.ProcConversationGet, &abi.ConvArgs{Pid: pid})
	if err != nil {
		return "", err
	}
	return r.Pid, nil
}

func (c *cli) historyCmd() *cobra.Command {
	var pid, conv string
	var limit int
	cmd := &cobra.Command{
		Use:   "history [--pid P] [--conv C] [--limit N]",
		Short: "Print a conversation's transcript (proc.history)",
		Long: "Print the active messages of conversation C (default: default) of process P (default: your\n" +
			"init) as a transcript: each message's id, role and time, its text, tool calls and results in\n" +
			"brief. --limit N shows the last N messages.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.HistoryArgs{Pid: pid, ConversationID: conv}
			if limit > 0 {
				// The last N: find how many there are first.
				g, err := call(c, abi.ProcConversationGet, &abi.ConvArgs{Pid: pid, ConversationID: conv})
				if err != nil {
					return err
				}
				if g.Conversation == nil {
					return fmt.Errorf("conversation %s: no such conversation", orDefault(conv))
				}
				a.Limit = limit
				a.Offset = int(max(g.Conversation.MessageCount-int64(limit), 0))
			}
			return show(c, abi.ProcHistory, a, func(r *abi.HistoryResult) error {
				for i := range r.Messages {
					renderMessage(c.out, &r.Messages[i])
				}
				if n := int64(len(r.Messages)); r.MessageCount != nil && n < *r.MessageCount {
					fmt.Fprintf(c.out, "(%d of %d messages shown)\n", n, *r.MessageCount)
				}
				if r.PendingHil != nil {
					fmt.Fprintf(c.out, "pending approval %s: %s\n", r.PendingHil.RequestID, hilLine(r.PendingHil))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	cmd.Flags().StringVar(&conv, "conv", "", "the conversation (default: default)")
	cmd.Flags().IntVar(&limit, "limit", 0, "show only the last N messages")
	return cmd
}

func orDefault(cid string) string {
	if cid == "" {
		return "default"
	}
	return cid
}

// brief cuts s to at most n lines and max bytes, saying how much is left.
func brief(s string, lines, maxBytes int) string {
	s = strings.TrimRight(s, "\n")
	cut := s
	if ls := strings.SplitAfterN(cut, "\n", lines+1); len(ls) > lines {
		cut = strings.TrimRight(strings.Join(ls[:lines], ""), "\n")
	}
	if len(cut) > maxBytes {
		cut = cut[:maxBytes]
	}
	if len(cut) < len(s) {
		cut += fmt.Sprintf(" … (%d more bytes)", len(s)-len(cut))
	}
	return cut
}

// indent prefixes each line of s with two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// renderMessage writes one message as a person reads it; content that
// does not decode as its role's is shown as it is.
func renderMessage(w io.Writer, m *abi.Message) {
	head := fmt.Sprintf("#%d %s", m.ID, m.Role)
	t := stamp(m.Timestamp)
	raw := func() { fmt.Fprintf(w, "%s  %s\n%s\n\n", head, t, indent(brief(string(m.Content), 5, 400))) }
	switch m.Role {
	case "user", "system":
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content)
		}
		fmt.Fprintf(w, "%s  %s\n%s\n\n", head, t, indent(s))
	case "assistant":
		var ac abi.AssistantContent
		if json.Unmarshal(m.Content, &ac) != nil {
			ac.Text = string(m.Content)
		}
		fmt.Fprintf(w, "%s  %s\n", head, t)
		if ac.Text != "" {
			fmt.Fprintln(w, indent(ac.Text))
		}
		for _, tc := range ac.ToolCalls {
			fmt.Fprintf(w, "  -> %s %s\n", tc.Name, brief(string(tc.Args), 1, 200))
		}
		fmt.Fprintln(w)
	case "toolResult":
		var tr abi.ToolResultContent
		if json.Unmarshal(m.Content, &tr) != nil {
			raw()
			return
		}
		mark := ""
		if tr.IsError {
			mark = " (error)"
		}
		fmt.Fprintf(w, "#%d tool %s%s  %s\n%s\n\n", m.ID, tr.ToolName, mark, t, indent(brief(tr.Output, 5, 400)))
	default:
		raw()
	}
}

// hilLine describes a HIL request in one line.
func hilLine(h *abi.HilRequest) string {
	return fmt.Sprintf("%s (%s) %s", h.ToolName, h.Syscall, brief(string(h.Args), 1, 300))
}

func (c *cli) convCmd() *cobra.Command {
	var pid string
	conv := &cobra.Command{
		Use:   "conv",
		Short: "Open, list, close, compact, fork and reset conversations (proc.conversation.*)",
	}
	conv.PersistentFlags().StringVar(&pid, "pid", "", "the process (default: your init)")
	convArgs := func(cid string) *abi.ConvArgs {
		return &abi.ConvArgs{Pid: pid, ConversationID: cid}
	}
	arg0 := func(args []string) string {
		if len(args) > 0 {
			return args[0]
		}
		return ""
	}

	var title string
	open := &cobra.Command{
		Use:   "open [CONV] [--title T]",
		Short: "Create or reopen a conversation and print its id",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			a := convArgs(arg0(as))
			if cmd.Flags().Changed("title") {
				a.Title = &title
			}
			return show(c, abi.ProcConversationOpen, a, func(r *abi.ConvOpenResult) error {
				if r.Conversation == nil {
					return fmt.Errorf("bad result: no conversation")
				}
				fmt.Fprintln(c.out, r.Conversation.ID)
				return nil
			})
		},
	}
	open.Flags().StringVar(&title, "title", "", "a title")

	var all bool
	list := &cobra.Command{
		Use:   "list [--all]",
		Short: "List the open conversations (--all: closed ones too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, as []string) error {
			a := convArgs("")
			a.IncludeClosed = all
			return show(c, abi.ProcConversationList, a, func(r *abi.ConvListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tGEN\tSTATUS\tMESSAGES\tTITLE\tUPDATED")
				for _, cv := range r.Conversations {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", cell(cv.ID), cv.Generation, cell(cv.Status), cv.MessageCount, str(cv.Title), stamp(cv.UpdatedAt))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include closed conversations")

	closeCmd := &cobra.Command{
		Use:   "close CONV",
		Short: "Close a conversation (its history is kept; open reopens it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			return show(c, abi.ProcConversationClose, convArgs(as[0]), func(*abi.ConvCloseResult) error { return nil })
		},
	}

	var keep int
	var through int64
	var summary string
	var generate bool
	compact := &cobra.Command{
		Use:   "compact [CONV] --keep N|--through MSG-ID --summary S|--generate",
		Short: "Archive an old prefix of a conversation behind a summary",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			a := &abi.CompactArgs{Pid: pid, ConversationID: arg0(as), GenerateSummary: generate}
			if cmd.Flags().Changed("keep") {
				a.KeepLast = &keep
			}
			if cmd.Flags().Changed("through") {
				a.ThroughMessageID = &through
			}
			if cmd.Flags().Changed("summary") {
				a.Summary = &summary
			}
			return show(c, abi.ProcConversationCompact, a, func(r *abi.CompactResult) error {
				fmt.Fprintf(c.out, "%s: compacted %d messages into segment %s (summary #%d, archive %s)\n",
					r.ConversationID, r.ArchivedMessages, r.Segment.ID, r.SummaryMessageID, r.ArchivedTo)
				return nil
			})
		},
	}
	compact.Flags().IntVar(&keep, "keep", 0, "keep the last N messages live")
	compact.Flags().Int64Var(&through, "through", 0, "archive through this message id")
	compact.Flags().StringVar(&summary, "summary", "", "the summary that replaces the archived messages")
	compact.Flags().BoolVar(&generate, "generate", false, "have the model write the summary")
	compact.MarkFlagsMutuallyExclusive("keep", "through")
	compact.MarkFlagsOneRequired("keep", "through")
	compact.MarkFlagsMutuallyExclusive("summary", "generate")
	compact.MarkFlagsOneRequired("summary", "generate")

	var fthrough int64
	var segment, target, ftitle string
	var nosuffix bool
	fork := &cobra.Command{
		Use:   "fork [CONV] --through MSG-ID|--segment SEG [--as ID] [--title T] [--nosuffix]",
		Short: "Branch a conversation, or restore a compacted segment, into a new conversation; print its id",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			a := &abi.ForkArgs{Pid: pid, ConversationID: arg0(as), SegmentID: segment, TargetConversationID: target}
			if cmd.Flags().Changed("through") {
				a.ThroughMessageID = &fthrough
			}
			if cmd.Flags().Changed("title") {
				a.Title = &ftitle
			}
			if nosuffix {
				f := false
				a.IncludeLiveSuffix = &f
			}
			return show(c, abi.ProcConversationFork, a, func(r *abi.ForkResult) error {
				if r.TargetConversation == nil {
					return fmt.Errorf("bad result: no target conversation")
				}
				fmt.Fprintln(c.out, r.TargetConversation.ID)
				fmt.Fprintf(cmd.ErrOrStderr(), "%d messages restored\n", r.RestoredMessages)
				return nil
			})
		},
	}
	fork.Flags().Int64Var(&fthrough, "through", 0, "branch through this live message id")
	fork.Flags().StringVar(&segment, "segment", "", "restore this compacted segment")
	fork.Flags().StringVar(&target, "as", "", "the new conversation's id (default: fork-<random>)")
	fork.Flags().StringVar(&ftitle, "title", "", "the new conversation's title")
	fork.Flags().BoolVar(&nosuffix, "nosuffix", false, "with --segment: leave out the live messages that followed it")
	fork.MarkFlagsMutuallyExclusive("through", "segment")
	fork.MarkFlagsOneRequired("through", "segment")

	var noarchive bool
	reset := &cobra.Command{
		Use:   "reset [CONV] [--noarchive]",
		Short: "Archive and clear a conversation, starting its next generation",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			a := convArgs(arg0(as))
			if noarchive {
				f := false
				a.Archive = &f
			}
			return show(c, abi.ProcConversationReset, a, func(r *abi.ConvResetResult) error {
				fmt.Fprintf(c.out, "%s: generation %d", r.ConversationID, r.Generation)
				if r.ArchivedTo != "" {
					fmt.Fprintf(c.out, ", %d messages archived to %s", r.ArchivedMessages, r.ArchivedTo)
				}
				fmt.Fprintln(c.out)
				return nil
			})
		},
	}
	reset.Flags().BoolVar(&noarchive, "noarchive", false, "drop the messages instead of archiving them")

	segments := &cobra.Command{
		Use:   "segments [CONV]",
		Short: "List a conversation's lifecycle segments",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			return show(c, abi.ProcConversationSegments, convArgs(arg0(as)), func(r *abi.SegmentsResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tKIND\tGEN\tMESSAGES\tRANGE\tSUMMARY\tARCHIVE")
				for _, s := range r.Segments {
					sum := "-"
					if s.SummaryMessageID != nil {
						sum = fmt.Sprintf("#%d", *s.SummaryMessageID)
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t#%d-#%d\t%s\t%s\n", s.ID, s.Kind, s.Generation, s.Messages, s.FromMessageID, s.ToMessageID, sum, s.ArchivePath)
				}
				return tw.Flush()
			})
		},
	}
	conv.AddCommand(open, list, closeCmd, compact, fork, reset, segments)
	return conv
}

func (c *cli) abortCmd() *cobra.Command {
	var pid, reason string
	var checkpoint int64
	cmd := &cobra.Command{
		Use:   "abort [PID|--pid P] [--checkpoint N [--reason R]]",
		Short: "Abort a process's active run (proc.abort), or decide a checkpoint with abort (proc.directive)",
		Long: "Abort the active run of PID (default: your init) now (proc.abort). With --checkpoint N the\n" +
			"abort is a directive for checkpoint N of the run (proc.directive), with --reason R: it aborts\n" +
			"the run at that checkpoint, unless another directive decided it first. The two are one\n" +
			"mechanism in the kernel. With --checkpoint it prints the directive's result as gsv continue\n" +
			"does, and exits 3 when the checkpoint was already decided.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if pid != "" {
					return errors.New("give PID or --pid, not both")
				}
				pid = args[0]
			}
			if cmd.Flags().Changed("checkpoint") {
				return c.sendDirective(&abi.DirectiveArgs{Pid: pid, Checkpoint: &checkpoint,
					Directive: abi.Directive{Type: "abort", Reason: reason}})
			}
			if cmd.Flags().Changed("reason") {
				return errors.New("--reason goes with --checkpoint (proc.abort takes no reason)")
			}
			return show(c, abi.ProcAbort, &abi.PidArgs{Pid: pid}, func(r *abi.AbortResult) error {
				if !r.Aborted {
					fmt.Fprintf(c.out, "%s: no active run\n", r.Pid)
					return nil
				}
				n := 0
				if r.InterruptedToolCalls != nil {
					n = *r.InterruptedToolCalls
				}
				fmt.Fprintf(c.out, "%s: aborted %s (%d tool calls interrupted)\n", r.Pid, r.RunID, n)
				if r.ContinuedQueuedRunID != "" {
					fmt.Fprintf(c.out, "%s: started queued %s\n", r.Pid, r.ContinuedQueuedRunID)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	cmd.Flags().Int64Var(&checkpoint, "checkpoint", 0, "abort at this checkpoint of the run, as a directive (proc.directive)")
	cmd.Flags().StringVar(&reason, "reason", "", "with --checkpoint: why")
	return cmd
}

// printArchive returns the printer of the result of proc.kill or
// proc.reset.
func (c *cli) printArchive(verb string) func(r *abi.ResetResult) error {
	return func(r *abi.ResetResult) error {
		if r.ArchivedTo == "" {
			fmt.Fprintf(c.out, "%s: %s, nothing archived\n", r.Pid, verb)
			return nil
		}
		fmt.Fprintf(c.out, "%s: %s, %d messages archived to %s\n", r.Pid, verb, r.ArchivedMessages, r.ArchivedTo)
		return nil
	}
}

func (c *cli) killCmd() *cobra.Command {
	var noarchive bool
	cmd := &cobra.Command{
		Use:   "kill PID [--noarchive]",
		Short: "Stop a process and clear its conversations, archiving them (proc.kill)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.KillArgs{Pid: args[0]}
			if noarchive {
				f := false
				a.Archive = &f
			}
			return show(c, abi.ProcKill, a, c.printArchive("killed"))
		},
	}
	cmd.Flags().BoolVar(&noarchive, "noarchive", false, "drop the messages instead of archiving them")
	return cmd
}

func (c *cli) resetCmd() *cobra.Command {
	var pid string
	cmd := &cobra.Command{
		Use:   "reset [--pid P]",
		Short: "Archive and clear every conversation of a process (proc.reset)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.ProcReset, &abi.PidArgs{Pid: pid}, c.printArchive("reset"))
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	return cmd
}

func (c *cli) hilCmd() *cobra.Command {
	var pid, editArgs string
	var remember bool
	const usage = "gsv hil [--pid P] [approve REQUEST-ID [--args JSON] [--remember] | deny REQUEST-ID | substitute REQUEST-ID TEXT...]"
	cmd := &cobra.Command{
		Use:   "hil [--pid P] [approve ID [--args JSON] [--remember] | deny ID | substitute ID TEXT...]",
		Short: "Show a process's pending approval request, or answer it (proc.hil)",
		Long: "With no arguments, shows the process's pending approval request. approve runs the call: with --args, " +
			"with those edited args (a JSON object, checked as the tool's args are) instead of the ones shown. deny gives " +
			"the model \"Tool execution denied by user\". substitute gives the model TEXT as the call's result without running it.",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return nil
			case len(args) == 2 && (args[0] == "approve" || args[0] == "deny"):
				return nil
			case len(args) >= 3 && args[0] == "substitute":
				return nil
			}
			return errors.New("usage: " + usage)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if (remember || editArgs != "") && (len(args) == 0 || args[0] != "approve") {
				return errors.New("--remember and --args go with approve")
			}
			if len(args) == 0 {
				r, err := call(c, abi.ProcHistory, &abi.HistoryArgs{Pid: pid, Limit: 1})
				if err != nil {
					return err
				}
				h := r.PendingHil
				if c.json {
					b, err := json.Marshal(h)
					if err != nil {
						return err
					}
					return c.printJSON(b)
				}
				if h == nil {
					fmt.Fprintf(c.out, "%s: no pending request\n", r.Pid)
					return nil
				}
				expires := "never"
				if h.ExpiresAt > 0 {
					expires = stamp(h.ExpiresAt)
				}
				fmt.Fprintf(c.out, "request:  %s\nrun:      %s\nconv:     %s\ntool:     %s (%s)\nargs:     %s\ndigest:   %s\ncreated:  %s\nexpires:  %s\n",
					h.RequestID, h.RunID, h.ConversationID, h.ToolName, h.Syscall, brief(string(h.Args), 20, 4000), h.ArgsDigest, stamp(h.CreatedAt), expires)
				return nil
			}
			a := &abi.HilArgs{Pid: pid, Decision: args[0], RequestID: args[1], Remember: remember}
			if editArgs != "" {
				if !json.Valid([]byte(editArgs)) {
					return fmt.Errorf("--args %s is not JSON", editArgs)
				}
				a.Args = json.RawMessage(editArgs)
			}
			if a.Decision == "substitute" {
				a.Result = strings.Join(args[2:], " ")
			}
			return show(c, abi.ProcHil, a, func(r *abi.HilResult) error {
				msg := map[string]string{"approve": "approved", "deny": "denied", "substitute": "answered with your text"}[r.Decision]
				if r.Edited {
					msg += " with edited args"
				}
				if r.Remembered {
					msg += " (remembered)"
				}
				if r.Resumed {
					msg += ", run resumed"
				}
				fmt.Fprintf(c.out, "%s: %s %s\n", r.Pid, r.RequestID, msg)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	cmd.Flags().BoolVar(&remember, "remember", false, "with approve: allow this syscall for the process from now on")
	cmd.Flags().StringVar(&editArgs, "args", "", "with approve: run the call with these edited args (a JSON object) instead of the ones shown")
	return cmd
}
