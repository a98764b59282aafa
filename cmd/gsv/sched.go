package main

// The sched.* commands: gsv sched list, add, update, enable, disable,
// remove and run. Each is one or two syscalls through /sys/call; crontab.go
// adds gsv crontab, which edits all of a user's schedules as one text.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gsvfs.dev/gsvfs/abi"
)

// schedFlags are the flags add and update share: when a schedule fires,
// what it does, and its policies.
type schedFlags struct {
	name, description       string
	cron, tz, at, anchor    string
	every, after            time.Duration
	spawn, event, lifecycle string
	conv, label             string
	keep                    int
	misfire                 string
	retry                   int
	retryBase, retryMax     time.Duration
	disabled                bool
}

func (f *schedFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "the schedule's name (1-64 of [A-Za-z0-9_.-])")
	fs.StringVar(&f.description, "description", "", "a description")
	fs.StringVar(&f.cron, "cron", "", "fire on a cron expression: five fields or @hourly, @daily, ...")
	fs.StringVar(&f.tz, "tz", "", "the IANA time zone of --cron (default UTC)")
	fs.DurationVar(&f.every, "every", 0, "fire every DUR (90s, 15m, 1h30m; 1s to 100 years)")
	fs.StringVar(&f.anchor, "anchor", "", "the RFC 3339 time --every counts from (default: when it is created)")
	fs.DurationVar(&f.after, "after", 0, "fire once, DUR from now")
	fs.StringVar(&f.at, "at", "", "fire once, at this RFC 3339 time")
	fs.StringVar(&f.spawn, "spawn", "", "target: spawn a process of PROFILE with the PROMPT given as arguments")
	fs.StringVar(&f.event, "event", "", "target: send the MESSAGE given as arguments to process PID as an event")
	fs.StringVar(&f.lifecycle, "lifecycle", "", "target: run compact, reset or checkpoint (the argument) on process PID")
	fs.StringVar(&f.conv, "conv", "", "the conversation of an --event or --lifecycle target (default: default)")
	fs.StringVar(&f.label, "label", "", "the label of the processes a --spawn target starts")
	fs.IntVar(&f.keep, "keep", 0, "the messages a lifecycle compact keeps (default 80)")
	fs.StringVar(&f.misfire, "misfire", "", "what to do about a time missed while the daemon was down: skip or run-once")
	fs.IntVar(&f.retry, "retry", 0, "try a failed one-shot run up to N times in all (at most 10)")
	fs.DurationVar(&f.retryBase, "retry-base", 30*time.Second, "the first retry's delay, doubled each time")
	fs.DurationVar(&f.retryMax, "retry-max", 10*time.Minute, "the longest retry delay (at most 24h)")
	fs.BoolVar(&f.disabled, "disabled", false, "add it disabled (update: --disabled=false enables it)")
}

// durMs converts a positive duration flag to milliseconds.
func durMs(flag string, d time.Duration) (int64, error) {
	if d <= 0 || d.Milliseconds() == 0 {
		return 0, fmt.Errorf("--%s %v: want a positive duration such as 90s, 15m or 1h30m", flag, d)
	}
	return d.Milliseconds(), nil
}

func rfc3339Ms(flag, s string) (int64, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("--%s %s: want an RFC 3339 time such as 2026-12-01T09:00:00Z", flag, s)
	}
	return t.UnixMilli(), nil
}

// expression builds the expression the flags ask for, starting from cur
// (nil for add). It returns nil when no when-flag was given.
func (f *schedFlags) expression(fs *pflag.FlagSet, cur *abi.Expression) (*abi.Expression, error) {
	set := fs.Changed
	kinds := 0
	for _, k := range []string{"cron", "every", "after", "at"} {
		if set(k) {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, errors.New("give only one of --cron, --every, --after and --at")
	}
	var e abi.Expression
	switch {
	case set("cron"):
		e = abi.Expression{Kind: "cron", Expr: f.cron, Timezone: "UTC"}
		if cur != nil && cur.Kind == "cron" && cur.Timezone != "" {
			e.Timezone = cur.Timezone
		}
	case set("every"):
		ms, err := durMs("every", f.every)
		if err != nil {
			return nil, err
		}
		e = abi.Expression{Kind: "every", EveryMs: ms}
		if cur != nil && cur.Kind == "every" {
			e.AnchorMs = cur.AnchorMs
		}
	case set("after"):
		ms, err := durMs("after", f.after)
		if err != nil {
			return nil, err
		}
		e = abi.Expression{Kind: "after", AfterMs: ms}
	case set("at"):
		ms, err := rfc3339Ms("at", f.at)
		if err != nil {
			return nil, err
		}
		e = abi.Expression{Kind: "at", AtMs: ms}
	case set("tz") || set("anchor"):
		if cur == nil {
			return nil, errors.New("--tz goes with --cron and --anchor with --every")
		}
		e = *cur
	default:
		return nil, nil
	}
	if set("tz") {
		if e.Kind != "cron" {
			return nil, errors.New("--tz applies to cron schedules only")
		}
		e.Timezone = f.tz
	}
	if set("anchor") {
		if e.Kind != "every" {
			return nil, errors.New("--anchor applies to --every schedules only")
		}
		ms, err := rfc3339Ms("anchor", f.anchor)
		if err != nil {
			return nil, err
		}
		e.AnchorMs = &ms
	}
	return &e, nil
}

var errNoTarget = errors.New("say what it does: --spawn PROFILE PROMPT..., --event PID MESSAGE... or --lifecycle PID compact|reset|checkpoint")

// target builds the target the flags and args ask for, starting from cur
// (nil for add). It returns nil when nothing about the target was given.
func (f *schedFlags) target(fs *pflag.FlagSet, cur *abi.Target, args []string) (*abi.Target, error) {
	set := fs.Changed
	verbs := 0
	for _, k := range []string{"spawn", "event", "lifecycle"} {
		if set(k) {
			verbs++
		}
	}
	if verbs > 1 {
		return nil, errors.New("give only one of --spawn, --event and --lifecycle")
	}
	if verbs == 0 && len(args) == 0 && !set("conv") && !set("label") && !set("keep") {
		return nil, nil
	}
	var t abi.Target
	if cur != nil {
		t = *cur
		t.Options = maps.Clone(cur.Options)
	}
	setKind := func(k string) {
		if t.Kind != k {
			t = abi.Target{Kind: k}
		}
	}
	switch {
	case set("spawn"):
		setKind(abi.TargetSpawn)
		t.Profile = f.spawn
	case set("event"):
		setKind(abi.TargetEvent)
		t.Pid = f.event
	case set("lifecycle"):
		setKind(abi.TargetLifecycle)
		t.Pid = f.lifecycle
	case t.Kind == "":
		return nil, errNoTarget
	}
	kind := t.Kind
	if len(args) > 0 {
		switch kind {
		case abi.TargetSpawn:
			t.Prompt = strings.Join(args, " ")
		case abi.TargetEvent:
			t.Message = strings.Join(args, " ")
		case abi.TargetLifecycle:
			if len(args) != 1 {
				return nil, fmt.Errorf("--lifecycle takes one action, compact, reset or checkpoint, not %q", strings.Join(args, " "))
			}
			t.Action = args[0]
		default:
			return nil, fmt.Errorf("target kind %s: cannot set its text", kind)
		}
	}
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	switch {
	case kind == abi.TargetSpawn && set("spawn") && f.spawn == "":
		return nil, errors.New("--spawn needs a profile, such as task")
	case kind == abi.TargetSpawn && blank(t.Prompt):
		return nil, errors.New("--spawn needs a prompt: --spawn PROFILE PROMPT...")
	case kind == abi.TargetEvent && blank(t.Pid):
		return nil, errors.New("--event needs a pid: --event PID MESSAGE...")
	case kind == abi.TargetEvent && blank(t.Message):
		return nil, errors.New("--event needs a message: --event PID MESSAGE...")
	case kind == abi.TargetLifecycle && blank(t.Pid):
		return nil, errors.New("--lifecycle needs a pid: --lifecycle PID compact|reset|checkpoint")
	case kind == abi.TargetLifecycle && blank(t.Action):
		return nil, errors.New("--lifecycle needs an action: --lifecycle PID compact|reset|checkpoint")
	}
	if set("conv") {
		if kind == abi.TargetSpawn {
			return nil, errors.New("--conv goes with --event and --lifecycle")
		}
		t.ConversationID = f.conv
	}
	if set("label") {
		if kind != abi.TargetSpawn {
			return nil, errors.New("--label goes with --spawn")
		}
		t.Label = f.label
	}
	if set("keep") {
		if kind != abi.TargetLifecycle || t.Action != "compact" {
			return nil, errors.New("--keep goes with --lifecycle PID compact")
		}
		if f.keep < 1 {
			return nil, errors.New("--keep wants a number of messages, at least 1")
		}
		if t.Options == nil {
			t.Options = map[string]any{}
		}
		t.Options["keep"] = f.keep
	}
	return &t, nil
}

// retryPolicy builds the retry policy from the flags, starting from cur
// (nil for add), or nil when none was given.
func (f *schedFlags) retryPolicy(fs *pflag.FlagSet, cur *abi.Retry) (*abi.Retry, error) {
	if !fs.Changed("retry") && !fs.Changed("retry-base") && !fs.Changed("retry-max") {
		return nil, nil
	}
	r := abi.Retry{MaxAttempts: f.retry}
	if cur != nil {
		r = *cur
		if fs.Changed("retry") {
			r.MaxAttempts = f.retry
		}
	} else if !fs.Changed("retry") {
		return nil, errors.New("--retry-base and --retry-max go with --retry N")
	}
	if cur == nil || fs.Changed("retry-base") {
		ms, err := durMs("retry-base", f.retryBase)
		if err != nil {
			return nil, err
		}
		r.BaseMs = ms
	}
	if cur == nil || fs.Changed("retry-max") {
		ms, err := durMs("retry-max", f.retryMax)
		if err != nil {
			return nil, err
		}
		r.MaxMs = ms
	}
	if r.MaxAttempts < 1 {
		return nil, errors.New("--retry wants the number of attempts, at least 1")
	}
	if r.MaxMs < r.BaseMs {
		return nil, errors.New("--retry-max must be at least --retry-base")
	}
	return &r, nil
}

func (f *schedFlags) checkMisfire(fs *pflag.FlagSet) error {
	if fs.Changed("misfire") && f.misfire != "skip" && f.misfire != "run-once" {
		return fmt.Errorf("--misfire %s: want skip or run-once", f.misfire)
	}
	return nil
}

// readText returns the words joined by spaces, or stdin when they are "-".
func readText(cmd *cobra.Command, words []string) ([]string, error) {
	if len(words) == 1 && words[0] == "-" {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return nil, err
		}
		return []string{strings.TrimSuffix(string(b), "\n")}, nil
	}
	return words, nil
}

func localTime(ms int64) string {
	return time.UnixMilli(ms).Local().Format(time.RFC3339)
}

// when renders an expression for the WHEN column.
func when(e abi.Expression) string {
	switch e.Kind {
	case "cron":
		tz := e.Timezone
		if tz == "" {
			tz = "UTC"
		}
		return strings.Join(strings.Fields(e.Expr), " ") + " " + tz
	case "every":
		s := "every " + abi.FormatMs(e.EveryMs)
		if e.AnchorMs != nil {
			s += " from " + localTime(*e.AnchorMs)
		}
		return s
	case "after":
		return "after " + abi.FormatMs(e.AfterMs)
	case "at":
		return "at " + localTime(e.AtMs)
	}
	return e.Kind
}

// short shortens free text for a table: its first line, at most n runes.
func short(s string, n int) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "..."
	}
	return s
}

// targetSummary renders a target for the TARGET column.
func targetSummary(t abi.Target) string {
	switch t.Kind {
	case abi.TargetSpawn:
		p := t.Profile
		if p == "" {
			p = "task"
		}
		return "spawn " + p + ": " + short(t.Prompt, 32)
	case abi.TargetEvent:
		s := "event " + t.Pid
		if t.ConversationID != "" {
			s += "/" + t.ConversationID
		}
		return s + ": " + short(t.Message, 32)
	case abi.TargetLifecycle:
		s := "lifecycle " + t.Pid
		if t.ConversationID != "" {
			s += "/" + t.ConversationID
		}
		s += " " + t.Action
		if k, ok := t.Options["keep"].(float64); ok && t.Action == "compact" {
			s += fmt.Sprintf(" keep=%d", int64(k))
		}
		return s
	}
	return t.Kind
}

func (c *cli) schedCmd() *cobra.Command {
	var uid int
	sched := &cobra.Command{
		Use:   "sched",
		Short: "List, add, change, run and remove schedules (sched.*)",
		Long: "Schedules fire on a cron expression, every interval, once after a delay or once at a time,\n" +
			"and then spawn a process, send a process an event, or compact, reset or checkpoint one of its\n" +
			"conversations. A schedule is named by its id or its name. gsv crontab edits them all as text.",
	}
	sched.PersistentFlags().IntVar(&uid, "uid", -1, "act on this user's schedules (root only for another user)")
	// ownerUid is the uid --uid names, or nil.
	ownerUid := func() *uint32 {
		if uid < 0 {
			return nil
		}
		u := uint32(uid)
		return &u
	}

	var all bool
	list := &cobra.Command{
		Use:   "list [--all] [--uid N]",
		Short: "List the enabled schedules (--all: disabled ones too)",
		Long: "List schedules: yours, or with --uid N user N's (root without --uid sees everyone's). Only\n" +
			"enabled ones unless --all. NEXT is the next fire time in local time, LAST the last run's status.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SchedList, &abi.SchedListArgs{OwnerUid: ownerUid(), IncludeDisabled: &all}, func(r *abi.SchedListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tENABLED\tWHEN\tTARGET\tNEXT\tLAST\tRUNS")
				for _, s := range r.Schedules {
					enabled, next := "no", "-"
					if s.Enabled {
						enabled = "yes"
					}
					if s.State.NextRunAtMs != nil {
						next = localTime(*s.State.NextRunAtMs)
					}
					if s.Broken != "" {
						// A damaged record: it does not run; why is its
						// TARGET (sched.list's broken field has it whole).
						fmt.Fprintf(tw, "%s\t%s\tbroken\t-\t%s\t-\t%s\t%d\n", cell(s.ID), cell(s.Name), strconv.Quote(s.Broken), str(s.State.LastStatus), s.State.RunCount)
						continue
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", s.ID, s.Name, enabled, when(s.Expression),
						targetSummary(s.Target), next, str(s.State.LastStatus), s.State.RunCount)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include disabled schedules")

	var af schedFlags
	add := &cobra.Command{
		Use: "add --name N (--cron EXPR [--tz ZONE] | --every DUR [--anchor TIME] | --after DUR | --at TIME)\n" +
			"    (--spawn PROFILE PROMPT... | --event PID MESSAGE... | --lifecycle PID compact|reset|checkpoint [--keep N])\n" +
			"    [--conv CID] [--misfire skip|run-once] [--retry N [--retry-base DUR] [--retry-max DUR]] [--disabled] [--description D]",
		Short: "Add a schedule and print its id (sched.add)",
		Long: "Add a schedule and print its id. PROMPT and MESSAGE are the remaining arguments joined by\n" +
			"spaces (\"-\" reads them from stdin). Durations are Go durations (90s, 15m, 1h30m), times RFC 3339.\n" +
			"  gsv sched add --name nightly --cron '0 2 * * *' --tz UTC --spawn task 'run the backup check'",
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			if !fs.Changed("name") {
				return errors.New("--name is required")
			}
			args, err := readText(cmd, args)
			if err != nil {
				return err
			}
			e, err := af.expression(fs, nil)
			if err != nil {
				return err
			}
			if e == nil {
				return errors.New("say when it fires: --cron EXPR, --every DUR, --after DUR or --at TIME")
			}
			t, err := af.target(fs, nil, args)
			if err != nil {
				return err
			}
			if t == nil {
				return errNoTarget
			}
			rp, err := af.retryPolicy(fs, nil)
			if err != nil {
				return err
			}
			if err := af.checkMisfire(fs); err != nil {
				return err
			}
			a := &abi.SchedAddArgs{OwnerUid: ownerUid(), Name: af.name, Expression: *e, Target: *t,
				MisfirePolicy: af.misfire, RetryPolicy: rp}
			if fs.Changed("description") {
				a.Description = &af.description
			}
			if af.disabled {
				off := false
				a.Enabled = &off
			}
			return show(c, abi.SchedAdd, a, func(r *abi.ScheduleResult) error {
				if r.Schedule == nil {
					return errors.New("sched.add: no schedule in its result")
				}
				_, err := fmt.Fprintln(c.out, r.Schedule.ID)
				return err
			})
		},
	}
	af.register(add.Flags())

	var uf schedFlags
	update := &cobra.Command{
		Use:   "update ID|NAME [flags of add] [PROMPT...|MESSAGE...|ACTION]",
		Short: "Change what the flags say of a schedule, and nothing else (sched.update)",
		Long: "Change a schedule: only what is given changes. --name renames it; --tz alone changes a cron\n" +
			"schedule's zone, --anchor alone an --every one's anchor; arguments after ID|NAME replace the\n" +
			"prompt, the message or the lifecycle action; --description '' removes the description;\n" +
			"--disabled disables it and --disabled=false enables it.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			rest, err := readText(cmd, args[1:])
			if err != nil {
				return err
			}
			cur, err := c.findSchedule(args[0], ownerUid())
			if err != nil {
				return err
			}
			var patch abi.SchedPatch
			if fs.Changed("name") {
				patch.Name = &uf.name
			}
			if fs.Changed("description") {
				d := json.RawMessage("null")
				if uf.description != "" {
					if d, err = json.Marshal(uf.description); err != nil {
						return err
					}
				}
				patch.Description = &d
			}
			if fs.Changed("disabled") {
				on := !uf.disabled
				patch.Enabled = &on
			}
			if patch.Expression, err = uf.expression(fs, &cur.Expression); err != nil {
				return err
			}
			if patch.Target, err = uf.target(fs, &cur.Target, rest); err != nil {
				return err
			}
			if err := uf.checkMisfire(fs); err != nil {
				return err
			}
			if uf.misfire != "" {
				patch.MisfirePolicy = &uf.misfire
			}
			if patch.RetryPolicy, err = uf.retryPolicy(fs, cur.RetryPolicy); err != nil {
				return err
			}
			if patch == (abi.SchedPatch{}) {
				return errors.New("nothing to change: give the flags of what changes")
			}
			return show(c, abi.SchedUpdate, &abi.SchedUpdateArgs{ID: cur.ID, OwnerUid: ownerUid(), Patch: patch},
				func(*abi.ScheduleResult) error { return nil })
		},
	}
	uf.register(update.Flags())

	setEnabled := func(use, short string, on bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID|NAME...",
			Short: short,
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				for _, id := range args {
					a := &abi.SchedUpdateArgs{ID: id, OwnerUid: ownerUid(), Patch: abi.SchedPatch{Enabled: &on}}
					if err := show(c, abi.SchedUpdate, a, func(*abi.ScheduleResult) error { return nil }); err != nil {
						return err
					}
				}
				return nil
			},
		}
	}
	enable := setEnabled("enable", "Enable schedules (a recurring one is armed for its next time)", true)
	disable := setEnabled("disable", "Disable schedules (they stay, and do not fire)", false)

	remove := &cobra.Command{
		Use:   "remove ID|NAME...",
		Short: "Remove schedules (sched.remove)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, id := range args {
				err := show(c, abi.SchedRemove, &abi.SchedIDArgs{ID: id, OwnerUid: ownerUid()}, func(r *abi.SchedRemoveResult) error {
					if !r.Removed {
						return fmt.Errorf("%s: no such schedule", id)
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		},
	}

	var due bool
	runCmd := &cobra.Command{
		Use:   "run ID|NAME | run --due",
		Short: "Run a schedule now, even if disabled, or (--due) every one of yours that is due (sched.run)",
		Long: "Run a schedule now (mode force: even a disabled one; its next time is not changed), or with\n" +
			"--due every enabled schedule whose time has come. Each run prints the schedule id, its status\n" +
			"and what it did; a run that failed makes gsv exit 1.",
		Args: func(cmd *cobra.Command, args []string) error {
			if due && len(args) != 0 || !due && len(args) != 1 {
				return errors.New("give one ID|NAME, or --due")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.SchedRunArgs{OwnerUid: ownerUid(), Mode: "due"}
			if !due {
				a.Mode, a.ID = "force", args[0]
			}
			return show(c, abi.SchedRun, a, func(r *abi.SchedRunResult) error {
				var failed []string
				for _, x := range r.Results {
					what := x.Summary
					if x.Status == "error" {
						what = x.Error
						failed = append(failed, x.ScheduleID+": "+x.Error)
					}
					next := "-"
					if x.NextRunAt != nil {
						next = localTime(*x.NextRunAt)
					}
					fmt.Fprintf(c.out, "%s %s %s (%s, next %s)\n", x.ScheduleID, x.Status, orDash(what),
						(time.Duration(x.DurationMs) * time.Millisecond).String(), next)
				}
				if len(failed) > 0 {
					return fmt.Errorf("run failed: %s", strings.Join(failed, "; "))
				}
				return nil
			})
		},
	}
	runCmd.Flags().BoolVar(&due, "due", false, "run every schedule that is due")

	sched.AddCommand(list, add, update, enable, disable, remove, runCmd)
	return sched
}

// orDash is s, or "-" for "".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// findSchedule finds a schedule by id, else by name, among those sched.list
// shows the caller (those of owner, if not nil).
func (c *cli) findSchedule(ref string, owner *uint32) (*abi.Schedule, error) {
	all := true
	r, err := call(c, abi.SchedList, &abi.SchedListArgs{OwnerUid: owner, IncludeDisabled: &all})
	if err != nil {
		return nil, err
	}
	var named []*abi.Schedule
	for i := range r.Schedules {
		s := &r.Schedules[i]
		if s.ID == ref {
			return s, nil
		}
		if s.Name == ref {
			named = append(named, s)
		}
	}
	switch len(named) {
	case 0:
		return nil, fmt.Errorf("%s: no such schedule", ref)
	case 1:
		return named[0], nil
	}
	// Root sees everyone's: a name is the caller's own.
	w, err := call(c, abi.SysWhoami, &abi.WhoamiArgs{})
	if err != nil {
		return nil, err
	}
	for _, s := range named {
		if s.OwnerUid == w.Process.Uid {
			return s, nil
		}
	}
	uids := make([]string, len(named))
	for i, s := range named {
		uids[i] = strconv.Itoa(int(s.OwnerUid))
	}
	return nil, fmt.Errorf("%s: schedules of uids %s have that name: say which with --uid", ref, strings.Join(uids, ", "))
}
