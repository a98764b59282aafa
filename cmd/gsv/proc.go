package main

// The proc.* commands: ps, spawn, send, history, conv, abort, kill, reset
// and hil. Each is one or two syscalls through /sys/call; chat.go adds the
// interactive chat, which also reads /proc/<pid>/events.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// The result shapes of the proc.* syscalls (seed 003), as gsv reads them.
type (
	procRec struct {
		Pid         string  `json:"pid"`
		Uid         uint32  `json:"uid"`
		Profile     string  `json:"profile"`
		ParentPid   *string `json:"parentPid"`
		State       string  `json:"state"`
		Label       *string `json:"label"`
		CreatedAt   int64   `json:"createdAt"`
		WorkspaceID *string `json:"workspaceId"`
		Cwd         string  `json:"cwd"`
	}
	convRec struct {
		ID           string  `json:"id"`
		Generation   int64   `json:"generation"`
		Status       string  `json:"status"`
		Title        *string `json:"title"`
		MessageCount int64   `json:"messageCount"`
		CreatedAt    int64   `json:"createdAt"`
		UpdatedAt    int64   `json:"updatedAt"`
	}
	segRec struct {
		ID               string `json:"id"`
		ConversationID   string `json:"conversationId"`
		Generation       int64  `json:"generation"`
		Kind             string `json:"kind"`
		FromMessageID    int64  `json:"fromMessageId"`
		ToMessageID      int64  `json:"toMessageId"`
		ArchivePath      string `json:"archivePath"`
		SummaryMessageID *int64 `json:"summaryMessageId"`
		Messages         int64  `json:"messages"`
		CreatedAt        int64  `json:"createdAt"`
	}
	msgRec struct {
		ID        int64           `json:"id"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Timestamp int64           `json:"timestamp"`
	}
	hilRec struct {
		RequestID      string          `json:"requestId"`
		RunID          string          `json:"runId"`
		ConversationID string          `json:"conversationId"`
		CallID         string          `json:"callId"`
		ToolName       string          `json:"toolName"`
		Syscall        string          `json:"syscall"`
		Args           json.RawMessage `json:"args"`
		CreatedAt      int64           `json:"createdAt"`
	}
	archiveRes struct {
		Pid              string `json:"pid"`
		ArchivedMessages int64  `json:"archivedMessages"`
		ArchivedTo       string `json:"archivedTo"`
		Archives         []struct {
			ConversationID string `json:"conversationId"`
			Generation     int64  `json:"generation"`
			Messages       int64  `json:"messages"`
			Path           string `json:"path"`
		} `json:"archives"`
	}
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

// decode unmarshals a syscall's result into v.
func decode(data json.RawMessage, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("bad result %s: %w", data, err)
	}
	return nil
}

// setIf sets a[key] = v unless v is the zero string.
func setIf(a map[string]any, key, v string) {
	if v != "" {
		a[key] = v
	}
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
			a := map[string]any{}
			if uid >= 0 {
				a["uid"] = uid
			}
			data, err := c.call("proc.list", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Processes []procRec `json:"processes"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PID\tUID\tPROFILE\tSTATE\tLABEL\tCREATED")
			for _, p := range r.Processes {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", cell(p.Pid), p.Uid, cell(p.Profile), cell(p.State), str(p.Label), stamp(p.CreatedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&uid, "uid", -1, "list this user's processes (root only for another user)")
	return cmd
}

func (c *cli) spawnCmd() *cobra.Command {
	var label, prompt, parent string
	cmd := &cobra.Command{
		Use:   "spawn PROFILE",
		Short: "Start a process and print its pid (proc.spawn)",
		Long: "Start a process of PROFILE (init, task, review, cron) and print its pid only:\n" +
			"  pid=$(gsv spawn task --label researcher)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := map[string]any{"profile": args[0]}
			setIf(a, "label", label)
			setIf(a, "prompt", prompt)
			setIf(a, "parentPid", parent)
			data, err := c.call("proc.spawn", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Pid string `json:"pid"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			fmt.Fprintln(c.out, r.Pid)
			return nil
		},
	}
	cmd.Flags().StringVar(&label, "label", "", "a label for the process")
	cmd.Flags().StringVar(&prompt, "prompt", "", "a first message to send it")
	cmd.Flags().StringVar(&parent, "parent", "", "the parent process's pid")
	return cmd
}

// sendResult is proc.send's result.
type sendResult struct {
	RunID  string `json:"runId"`
	Queued bool   `json:"queued"`
}

func (c *cli) sendCmd() *cobra.Command {
	var pid, conv string
	var wait bool
	cmd := &cobra.Command{
		Use:   "send [--pid P] [--conv C] TEXT...",
		Short: "Send a message to a process (proc.send); TEXT - reads it from stdin",
		Long: "Send TEXT (the words joined by spaces) to conversation C (default: default) of process P\n" +
			"(default: your init). With TEXT \"-\" the message is read from stdin. It prints the run id and\n" +
			"whether it started or was queued; with --wait it prints the answer as it streams and returns\n" +
			"when the run has finished (or waits for a human: see gsv hil).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			words, err := readText(cmd, args)
			if err != nil {
				return err
			}
			a := map[string]any{"message": strings.Join(words, " ")}
			setIf(a, "pid", pid)
			setIf(a, "conversationId", conv)
			if !wait {
				data, err := c.call("proc.send", a)
				if err != nil || c.json {
					return c.orJSON(data, err)
				}
				var r sendResult
				if err := decode(data, &r); err != nil {
					return err
				}
				state := "started"
				if r.Queued {
					state = "queued"
				}
				fmt.Fprintf(c.out, "%s %s\n", r.RunID, state)
				return nil
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
			a["pid"] = p
			data, err := c.call("proc.send", a)
			if err != nil {
				return err
			}
			var r sendResult
			if err := decode(data, &r); err != nil {
				return err
			}
			w := &runWatch{c: c, evs: evs, pid: p, runID: r.RunID, errOut: cmd.ErrOrStderr()}
			fin, err := w.follow()
			if err != nil {
				return err
			}
			if fin.hil != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "waiting for approval: gsv hil --pid %s approve|deny %s\n", p, fin.hil.RequestID)
				return nil
			}
			return fin.err()
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	cmd.Flags().StringVar(&conv, "conv", "", "the conversation (default: default)")
	cmd.Flags().BoolVar(&wait, "wait", false, "print the answer and wait for the run to finish")
	return cmd
}

// resolvePid returns pid, or the caller's init pid when pid is empty,
// checking that the process exists and is the caller's.
func (c *cli) resolvePid(pid string) (string, error) {
	a := map[string]any{}
	setIf(a, "pid", pid)
	data, err := c.call("proc.conversation.get", a)
	if err != nil {
		return "", err
	}
	var r struct {
		Pid string `json:"pid"`
	}
	if err := decode(data, &r); err != nil {
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
			a := map[string]any{}
			setIf(a, "pid", pid)
			setIf(a, "conversationId", conv)
			if limit > 0 {
				// The last N: find how many there are first.
				data, err := c.call("proc.conversation.get", a)
				if err != nil {
					return err
				}
				var g struct {
					Conversation *convRec `json:"conversation"`
				}
				if err := decode(data, &g); err != nil {
					return err
				}
				if g.Conversation == nil {
					return fmt.Errorf("conversation %s: no such conversation", orDefault(conv))
				}
				a["limit"] = limit
				a["offset"] = max(g.Conversation.MessageCount-int64(limit), 0)
			}
			data, err := c.call("proc.history", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Pid            string   `json:"pid"`
				ConversationID string   `json:"conversationId"`
				Messages       []msgRec `json:"messages"`
				MessageCount   int64    `json:"messageCount"`
				Truncated      bool     `json:"truncated"`
				PendingHil     *hilRec  `json:"pendingHil"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			for i := range r.Messages {
				renderMessage(c.out, &r.Messages[i])
			}
			if n := int64(len(r.Messages)); n < r.MessageCount {
				fmt.Fprintf(c.out, "(%d of %d messages shown)\n", n, r.MessageCount)
			}
			if r.PendingHil != nil {
				fmt.Fprintf(c.out, "pending approval %s: %s\n", r.PendingHil.RequestID, hilLine(r.PendingHil))
			}
			return nil
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

// renderMessage writes one message as a person reads it.
func renderMessage(w io.Writer, m *msgRec) {
	head := fmt.Sprintf("#%d %s", m.ID, m.Role)
	t := stamp(m.Timestamp)
	switch m.Role {
	case "user", "system":
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			s = string(m.Content)
		}
		fmt.Fprintf(w, "%s  %s\n%s\n\n", head, t, indent(s))
	case "assistant":
		var ac struct {
			Text      string `json:"text"`
			ToolCalls []struct {
				ID   string          `json:"id"`
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			} `json:"toolCalls"`
		}
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
		var tr struct {
			ToolName string `json:"toolName"`
			Output   string `json:"output"`
			IsError  bool   `json:"isError"`
		}
		json.Unmarshal(m.Content, &tr)
		mark := ""
		if tr.IsError {
			mark = " (error)"
		}
		fmt.Fprintf(w, "#%d tool %s%s  %s\n%s\n\n", m.ID, tr.ToolName, mark, t, indent(brief(tr.Output, 5, 400)))
	default:
		fmt.Fprintf(w, "%s  %s\n%s\n\n", head, t, indent(brief(string(m.Content), 5, 400)))
	}
}

// hilLine describes a HIL request in one line.
func hilLine(h *hilRec) string {
	return fmt.Sprintf("%s (%s) %s", h.ToolName, h.Syscall, brief(string(h.Args), 1, 300))
}

func (c *cli) convCmd() *cobra.Command {
	var pid string
	conv := &cobra.Command{
		Use:   "conv",
		Short: "Open, list, close, compact, fork and reset conversations (proc.conversation.*)",
	}
	conv.PersistentFlags().StringVar(&pid, "pid", "", "the process (default: your init)")
	convArgs := func(cid string) map[string]any {
		a := map[string]any{}
		setIf(a, "pid", pid)
		setIf(a, "conversationId", cid)
		return a
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
				a["title"] = title
			}
			data, err := c.call("proc.conversation.open", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Conversation convRec `json:"conversation"`
				Created      bool    `json:"created"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			fmt.Fprintln(c.out, r.Conversation.ID)
			return nil
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
			if all {
				a["includeClosed"] = true
			}
			data, err := c.call("proc.conversation.list", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Conversations []convRec `json:"conversations"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tGEN\tSTATUS\tMESSAGES\tTITLE\tUPDATED")
			for _, cv := range r.Conversations {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", cell(cv.ID), cv.Generation, cell(cv.Status), cv.MessageCount, str(cv.Title), stamp(cv.UpdatedAt))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include closed conversations")

	closeCmd := &cobra.Command{
		Use:   "close CONV",
		Short: "Close a conversation (its history is kept; open reopens it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			data, err := c.call("proc.conversation.close", convArgs(as[0]))
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			return nil
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
			a := convArgs(arg0(as))
			if cmd.Flags().Changed("keep") {
				a["keepLast"] = keep
			}
			if cmd.Flags().Changed("through") {
				a["throughMessageId"] = through
			}
			if cmd.Flags().Changed("summary") {
				a["summary"] = summary
			}
			if generate {
				a["generateSummary"] = true
			}
			data, err := c.call("proc.conversation.compact", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				ConversationID   string `json:"conversationId"`
				Segment          segRec `json:"segment"`
				ArchivedMessages int64  `json:"archivedMessages"`
				ArchivedTo       string `json:"archivedTo"`
				SummaryMessageID int64  `json:"summaryMessageId"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "%s: compacted %d messages into segment %s (summary #%d, archive %s)\n",
				r.ConversationID, r.ArchivedMessages, r.Segment.ID, r.SummaryMessageID, r.ArchivedTo)
			return nil
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
			a := convArgs(arg0(as))
			if cmd.Flags().Changed("through") {
				a["throughMessageId"] = fthrough
			}
			setIf(a, "segmentId", segment)
			setIf(a, "targetConversationId", target)
			if cmd.Flags().Changed("title") {
				a["title"] = ftitle
			}
			if nosuffix {
				a["includeLiveSuffix"] = false
			}
			data, err := c.call("proc.conversation.fork", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				TargetConversation convRec `json:"targetConversation"`
				RestoredMessages   int64   `json:"restoredMessages"`
				IncludedLiveSuffix bool    `json:"includedLiveSuffix"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			fmt.Fprintln(c.out, r.TargetConversation.ID)
			fmt.Fprintf(cmd.ErrOrStderr(), "%d messages restored\n", r.RestoredMessages)
			return nil
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
				a["archive"] = false
			}
			data, err := c.call("proc.conversation.reset", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				ConversationID   string `json:"conversationId"`
				Generation       int64  `json:"generation"`
				ArchivedMessages int64  `json:"archivedMessages"`
				ArchivedTo       string `json:"archivedTo"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "%s: generation %d", r.ConversationID, r.Generation)
			if r.ArchivedTo != "" {
				fmt.Fprintf(c.out, ", %d messages archived to %s", r.ArchivedMessages, r.ArchivedTo)
			}
			fmt.Fprintln(c.out)
			return nil
		},
	}
	reset.Flags().BoolVar(&noarchive, "noarchive", false, "drop the messages instead of archiving them")

	segments := &cobra.Command{
		Use:   "segments [CONV]",
		Short: "List a conversation's lifecycle segments",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, as []string) error {
			data, err := c.call("proc.conversation.segments", convArgs(arg0(as)))
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Segments []segRec `json:"segments"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
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
		},
	}
	conv.AddCommand(open, list, closeCmd, compact, fork, reset, segments)
	return conv
}

func (c *cli) abortCmd() *cobra.Command {
	var pid string
	cmd := &cobra.Command{
		Use:   "abort [--pid P]",
		Short: "Abort a process's active run (proc.abort)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a := map[string]any{}
			setIf(a, "pid", pid)
			data, err := c.call("proc.abort", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Pid                  string `json:"pid"`
				Aborted              bool   `json:"aborted"`
				RunID                string `json:"runId"`
				InterruptedToolCalls int    `json:"interruptedToolCalls"`
				ContinuedQueuedRunID string `json:"continuedQueuedRunId"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			if !r.Aborted {
				fmt.Fprintf(c.out, "%s: no active run\n", r.Pid)
				return nil
			}
			fmt.Fprintf(c.out, "%s: aborted %s (%d tool calls interrupted)\n", r.Pid, r.RunID, r.InterruptedToolCalls)
			if r.ContinuedQueuedRunID != "" {
				fmt.Fprintf(c.out, "%s: started queued %s\n", r.Pid, r.ContinuedQueuedRunID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	return cmd
}

// printArchive prints the result of proc.kill or proc.reset.
func (c *cli) printArchive(data json.RawMessage, verb string) error {
	var r archiveRes
	if err := decode(data, &r); err != nil {
		return err
	}
	if r.ArchivedTo == "" {
		fmt.Fprintf(c.out, "%s: %s, nothing archived\n", r.Pid, verb)
		return nil
	}
	fmt.Fprintf(c.out, "%s: %s, %d messages archived to %s\n", r.Pid, verb, r.ArchivedMessages, r.ArchivedTo)
	return nil
}

func (c *cli) killCmd() *cobra.Command {
	var noarchive bool
	cmd := &cobra.Command{
		Use:   "kill PID [--noarchive]",
		Short: "Stop a process and clear its conversations, archiving them (proc.kill)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := map[string]any{"pid": args[0]}
			if noarchive {
				a["archive"] = false
			}
			data, err := c.call("proc.kill", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			return c.printArchive(data, "killed")
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
			a := map[string]any{}
			setIf(a, "pid", pid)
			data, err := c.call("proc.reset", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			return c.printArchive(data, "reset")
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	return cmd
}

func (c *cli) hilCmd() *cobra.Command {
	var pid string
	var remember bool
	cmd := &cobra.Command{
		Use:   "hil [--pid P] [approve|deny REQUEST-ID [--remember]]",
		Short: "Show a process's pending approval request, or answer it (proc.hil)",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return nil
			case len(args) == 2 && (args[0] == "approve" || args[0] == "deny"):
				return nil
			}
			return errors.New("usage: gsv hil [--pid P] [approve|deny REQUEST-ID [--remember]]")
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				if remember {
					return errors.New("--remember goes with approve")
				}
				a := map[string]any{"limit": 1}
				setIf(a, "pid", pid)
				data, err := c.call("proc.history", a)
				if err != nil {
					return err
				}
				var r struct {
					Pid        string          `json:"pid"`
					PendingHil json.RawMessage `json:"pendingHil"`
				}
				if err := decode(data, &r); err != nil {
					return err
				}
				if c.json {
					return c.printJSON(r.PendingHil)
				}
				var h *hilRec
				if err := decode(r.PendingHil, &h); err != nil {
					return err
				}
				if h == nil {
					fmt.Fprintf(c.out, "%s: no pending request\n", r.Pid)
					return nil
				}
				fmt.Fprintf(c.out, "request:  %s\nrun:      %s\nconv:     %s\ntool:     %s (%s)\nargs:     %s\ncreated:  %s\n",
					h.RequestID, h.RunID, h.ConversationID, h.ToolName, h.Syscall, brief(string(h.Args), 20, 4000), stamp(h.CreatedAt))
				return nil
			}
			if remember && args[0] != "approve" {
				return errors.New("--remember goes with approve")
			}
			a := map[string]any{"decision": args[0], "requestId": args[1]}
			setIf(a, "pid", pid)
			if remember {
				a["remember"] = true
			}
			data, err := c.call("proc.hil", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Pid        string `json:"pid"`
				RequestID  string `json:"requestId"`
				Decision   string `json:"decision"`
				Resumed    bool   `json:"resumed"`
				Remembered bool   `json:"remembered"`
			}
			if err := decode(data, &r); err != nil {
				return err
			}
			msg := "approved"
			if r.Decision == "deny" {
				msg = "denied"
			}
			if r.Remembered {
				msg += " (remembered)"
			}
			if r.Resumed {
				msg += ", run resumed"
			}
			fmt.Fprintf(c.out, "%s: %s %s\n", r.Pid, r.RequestID, msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&pid, "pid", "", "the process (default: your init)")
	cmd.Flags().BoolVar(&remember, "remember", false, "with approve: allow this syscall for the process from now on")
	return cmd
}
