package main

// Deliberable runs (proc.run.*, proc.directive): gsv run shows a
// process's run, its budget and its pending checkpoint; gsv continue
// decides a checkpoint with effects; gsv stop, start and supervise change
// the run settings (proc.run.control). gsv spawn --budget/--supervise,
// gsv send --mode, gsv abort --checkpoint and gsv chat's checkpoint
// prompt use the parsers and renderers here.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"gsvfs.dev/gsvfs/abi"
)

// exitAlreadyDecided is gsv's exit status when a directive came too late:
// another directive (or the grace's soft continue) decided the checkpoint
// first.
const exitAlreadyDecided = 3

// sendModes are the modes of gsv send --mode (abi.SendArgs.Mode).
var sendModes = []string{"queue", "steer", "interrupt"}

// checkMode checks a --mode value.
func checkMode(mode string) error {
	for _, m := range sendModes {
		if mode == m {
			return nil
		}
	}
	return fmt.Errorf("--mode %q: want queue, steer or interrupt", mode)
}

// parseBudget parses a budget spec, comma-separated KEY=VALUE pairs:
// usd=0.50 (dollars, a leading $ allowed), tokens=100000 (in and out; a k
// or m suffix multiplies by a thousand or a million), turns=20 (model
// calls), time=10m (a Go duration) and, when withExhaust is set,
// on-exhaust=pause|abort. 0 means no limit; a key may be given once.
func parseBudget(spec string, withExhaust bool) (abi.RunBudget, error) {
	var b abi.RunBudget
	keys := "usd, tokens, turns, time"
	if withExhaust {
		keys += ", on-exhaust"
	}
	if strings.TrimSpace(spec) == "" {
		return b, fmt.Errorf("empty budget: want KEY=VALUE pairs (%s), such as turns=20,usd=0.50", keys)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(spec, ",") {
		kv = strings.TrimSpace(kv)
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return b, fmt.Errorf("%q: want KEY=VALUE (%s)", kv, keys)
		}
		if seen[k] {
			return b, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		switch k {
		case "usd":
			f, err := strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return b, fmt.Errorf("usd=%s: want dollars, such as usd=0.50", v)
			}
			if f < 0 {
				return b, fmt.Errorf("usd=%s: may not be negative", v)
			}
			b.USD = f
		case "tokens":
			n, err := parseCount(v)
			if err != nil {
				return b, fmt.Errorf("tokens=%s: %v", v, err)
			}
			b.Tokens = n
		case "turns":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return b, fmt.Errorf("turns=%s: want a whole number, such as turns=20", v)
			}
			if n < 0 {
				return b, fmt.Errorf("turns=%s: may not be negative", v)
			}
			b.Turns = n
		case "time":
			d, err := time.ParseDuration(v)
			if err != nil {
				if _, nerr := strconv.ParseFloat(v, 64); nerr == nil && v != "0" {
					return b, fmt.Errorf("time=%s: want a duration with its unit, such as time=10m or time=90s", v)
				}
				return b, fmt.Errorf("time=%s: want a Go duration, such as time=10m or time=1h30m", v)
			}
			if d < 0 {
				return b, fmt.Errorf("time=%s: may not be negative", v)
			}
			if d > 0 && d < time.Millisecond {
				return b, fmt.Errorf("time=%s: less than a millisecond", v)
			}
			b.TimeMs = d.Milliseconds()
		case "on-exhaust", "onexhaust":
			if !withExhaust {
				return b, fmt.Errorf("%s: want one of %s", k, keys)
			}
			if v != "pause" && v != "abort" {
				return b, fmt.Errorf("on-exhaust=%s: want pause or abort", v)
			}
			b.OnExhaust = v
		default:
			return b, fmt.Errorf("unknown key %q: want one of %s", k, keys)
		}
	}
	return b, nil
}

// parseCount parses a non-negative count with an optional k (thousand) or
// m (million) suffix: 100000, 100k, 1.5m.
func parseCount(v string) (int64, error) {
	mult := 1.0
	s := strings.ToLower(v)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		mult, s = 1e6, s[:len(s)-1]
	}
	if mult == 1 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, errors.New("want a whole number, such as 100000 or 100k")
		}
		if n < 0 {
			return 0, errors.New("may not be negative")
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("want a whole number, such as 100000 or 100k")
	}
	if f < 0 {
		return 0, errors.New("may not be negative")
	}
	n := f * mult
	if n != math.Trunc(n) || n > math.MaxInt64/2 {
		return 0, errors.New("want a whole number, such as 100000 or 100k")
	}
	return int64(n), nil
}

// budgetFlag is a --budget flag: a budget spec parsed when given.
type budgetFlag struct{ b *abi.RunBudget }

func (f *budgetFlag) String() string {
	if f.b == nil {
		return ""
	}
	return budgetSpec(*f.b)
}

func (f *budgetFlag) Set(s string) error {
	b, err := parseBudget(s, true)
	if err != nil {
		return err
	}
	f.b = &b
	return nil
}

func (f *budgetFlag) Type() string { return "SPEC" }

// budgetSpec renders a budget as parseBudget reads it.
func budgetSpec(b abi.RunBudget) string {
	var parts []string
	if b.USD > 0 {
		parts = append(parts, "usd="+strconv.FormatFloat(b.USD, 'f', -1, 64))
	}
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("tokens=%d", b.Tokens))
	}
	if b.Turns > 0 {
		parts = append(parts, fmt.Sprintf("turns=%d", b.Turns))
	}
	if b.TimeMs > 0 {
		parts = append(parts, "time="+abi.FormatMs(b.TimeMs))
	}
	if b.OnExhaust != "" {
		parts = append(parts, "on-exhaust="+b.OnExhaust)
	}
	return strings.Join(parts, ",")
}

// effect is one effect of gsv continue, in command-line order. A refocus
// is kept apart: alone it is the directive sugar {type:"refocus"}, among
// other effects the system message the kernel makes of it.
type effect struct {
	e       abi.Effect
	refocus string
}

// effectFlag is one of gsv continue's effect flags: each use parses its
// value into an effect and appends it to the shared list, so that the
// effects keep the order they were given in.
type effectFlag struct {
	list  *[]effect
	typ   string
	parse func(string) (effect, error)
}

func (f *effectFlag) String() string { return "" }
func (f *effectFlag) Type() string   { return f.typ }
func (f *effectFlag) Set(s string) error {
	e, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.list = append(*f.list, e)
	return nil
}

// parseExtend parses --extend-budget's value: a budget spec without
// on-exhaust, adding at least one dimension.
func parseExtend(s string) (effect, error) {
	b, err := parseBudget(s, false)
	if err != nil {
		return effect{}, err
	}
	if b.USD == 0 && b.Tokens == 0 && b.Turns == 0 && b.TimeMs == 0 {
		return effect{}, errors.New("nothing to extend: give usd, tokens, turns or time above 0")
	}
	return effect{e: abi.Effect{Op: "extend-budget", USD: b.USD, Tokens: b.Tokens, Turns: b.Turns, TimeMs: b.TimeMs}}, nil
}

// parseInject returns the parser of an inject-message flag of role.
func parseInject(role string) func(string) (effect, error) {
	return func(s string) (effect, error) {
		if strings.TrimSpace(s) == "" {
			return effect{}, errors.New("empty message")
		}
		return effect{e: abi.Effect{Op: "inject-message", Role: role, Content: s}}, nil
	}
}

func parseSwapModel(s string) (effect, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, " \t\n") {
		return effect{}, fmt.Errorf("%q: want a model name", s)
	}
	return effect{e: abi.Effect{Op: "swap-model", Model: s}}, nil
}

func parseTemperature(s string) (effect, error) {
	t, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(t) {
		return effect{}, fmt.Errorf("%q: want a number from 0 to 2", s)
	}
	if t < 0 || t > 2 {
		return effect{}, fmt.Errorf("%s: want a number from 0 to 2", s)
	}
	return effect{e: abi.Effect{Op: "set-temperature", Temp: &t}}, nil
}

func parseToolCap(s string) (effect, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return effect{}, fmt.Errorf("%q: want a whole number of tool calls per step, 0 or more", s)
	}
	return effect{e: abi.Effect{Op: "set-tool-cap", N: &n}}, nil
}

func parseRefocus(s string) (effect, error) {
	if strings.TrimSpace(s) == "" {
		return effect{}, errors.New("empty hint")
	}
	return effect{refocus: s}, nil
}

// refocusPrefix begins the system message a refocus becomes, as the
// kernel desugars {type:"refocus", hint}.
const refocusPrefix = "Refocus: "

// continueDirective builds the directive of gsv continue: a lone refocus
// is the refocus sugar; anything else is a continue with the effects in
// order (none: continue as it is).
func continueDirective(effects []effect) (abi.Directive, error) {
	if len(effects) == 1 && effects[0].refocus != "" {
		return abi.Directive{Type: "refocus", Hint: effects[0].refocus}, nil
	}
	d := abi.Directive{Type: "continue"}
	for _, ef := range effects {
		e := ef.e
		if ef.refocus != "" {
			e = abi.Effect{Op: "inject-message", Role: "system", Content: refocusPrefix + ef.refocus}
		}
		b, err := json.Marshal(e)
		if err != nil {
			return d, err
		}
		d.Effects = append(d.Effects, b)
	}
	return d, nil
}

// directiveLine renders proc.directive's result: "delivered checkpoint 3
// effects: extend-budget, set-temperature".
func directiveLine(r *abi.DirectiveResult) string {
	eff := "-"
	if len(r.EffectsApplied) > 0 {
		eff = strings.Join(r.EffectsApplied, ", ")
	}
	return fmt.Sprintf("%s checkpoint %d effects: %s", r.Result, r.Checkpoint, eff)
}

// sendDirective makes proc.directive and prints its result; a directive
// that came too late makes gsv exit with exitAlreadyDecided.
func (c *cli) sendDirective(a *abi.DirectiveArgs) error {
	data, err := callRaw(c, abi.ProcDirective, a)
	if err != nil {
		return err
	}
	r := new(abi.DirectiveResult)
	if err := decodeResult(data, r); err != nil {
		return err
	}
	if c.json {
		if err := c.printJSON(data); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.out, directiveLine(r))
	}
	if r.Result == "already-decided" {
		return &exitError{code: exitAlreadyDecided}
	}
	return nil
}

// usd renders dollars.
func usd(v float64) string {
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}

// ofLimit renders used against a limit ("12 / 20"), or used alone when
// there is no limit.
func ofLimit(used, limit string, set bool) string {
	if !set {
		return used + " (no limit)"
	}
	return used + " / " + limit
}

// snapshotLine describes a checkpoint snapshot in one line: "12 steps,
// $0.41, 4600 tokens, 7 tool calls (last fs.read), 1m2s".
func snapshotLine(s *abi.CheckpointSnapshot) string {
	parts := []string{
		fmt.Sprintf("%d steps", s.Steps),
		usd(s.CostUSD),
		fmt.Sprintf("%d tokens", s.TokensIn+s.TokensOut),
	}
	tools := fmt.Sprintf("%d tool calls", s.ToolCalls)
	if s.LastTool != "" {
		tools += " (last " + cell(s.LastTool) + ")"
	}
	parts = append(parts, tools, abi.FormatMs(s.ElapsedMs))
	return strings.Join(parts, ", ")
}

// checkpointHead describes a checkpoint: "checkpoint 3 (budget): 12
// steps, $0.41, ...", and when it continues by itself.
func checkpointHead(seq int64, reason string, s *abi.CheckpointSnapshot, softAt *int64, now time.Time) string {
	h := fmt.Sprintf("checkpoint %d (%s)", seq, cell(reason))
	if s != nil {
		h += ": " + snapshotLine(s)
	}
	if softAt != nil {
		left := time.UnixMilli(*softAt).Sub(now).Round(time.Second)
		if left > 0 {
			h += fmt.Sprintf("; continues by itself in %s", left)
		} else {
			h += "; continues by itself now"
		}
	}
	return h
}

// showRun writes a run as gsv run shows it.
func showRun(w io.Writer, r *abi.RunInfo, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("pid", cell(r.Pid))
	run := "-"
	if r.RunID != "" {
		run = cell(r.RunID)
		if r.ConversationID != "" {
			run += " (conversation " + cell(r.ConversationID) + ")"
		}
	}
	row("run", run)
	state := cell(r.State)
	if r.StopRequested {
		state += " (stop requested)"
	}
	row("state", state)
	row("step", strconv.Itoa(r.Step))
	row("checkpoint", strconv.FormatInt(r.Checkpoint, 10))
	if p := r.Pending; p != nil {
		row("pending", checkpointHead(p.Seq, p.Reason, nil, p.SoftContinueAt, now)+", parked "+stamp(p.ParkedAt))
		row("  snapshot", snapshotLine(&p.Snapshot))
		if p.Snapshot.Description != "" {
			row("  description", brief(cell(p.Snapshot.Description), 1, 300))
		}
	} else {
		row("pending", "-")
	}
	if h := r.Hil; h != nil {
		row("approval", cell(h.RequestID)+": "+cell(hilLine(h)))
	}
	b, u := r.Budget, r.Used
	row("budget usd", ofLimit(usd(u.USD), usd(b.USD), b.USD > 0))
	row("budget tokens", ofLimit(strconv.FormatInt(u.TokensIn+u.TokensOut, 10), strconv.FormatInt(b.Tokens, 10), b.Tokens > 0)+
		fmt.Sprintf(" (%d in, %d out)", u.TokensIn, u.TokensOut))
	row("budget turns", ofLimit(strconv.FormatInt(u.Turns, 10), strconv.FormatInt(b.Turns, 10), b.Turns > 0))
	row("budget time", ofLimit(abi.FormatMs(u.TimeMs), abi.FormatMs(b.TimeMs), b.TimeMs > 0))
	onExhaust := b.OnExhaust
	if onExhaust == "" {
		onExhaust = "pause"
	}
	row("on exhaust", cell(onExhaust))
	sup := "off"
	if r.Supervise {
		sup = "on"
	}
	row("supervise", fmt.Sprintf("%s, grace %s", sup, abi.FormatMs(r.GraceMs)))
	model := "(profile default)"
	if r.Model != "" {
		model = cell(r.Model)
	}
	row("model", model)
	temp := "(default)"
	if r.Temperature != nil {
		temp = strconv.FormatFloat(*r.Temperature, 'f', -1, 64)
	}
	row("temperature", temp)
	toolCap := "(none)"
	if r.ToolCap != nil {
		toolCap = strconv.FormatInt(*r.ToolCap, 10)
	}
	row("tool cap", toolCap)
	if r.StartedAt != 0 {
		row("started", stamp(r.StartedAt))
	}
	if r.FinishedAt != nil {
		row("finished", stamp(*r.FinishedAt))
	}
	if r.Error != "" {
		row("error", brief(cell(r.Error), 1, 300))
	}
	tw.Flush()
}

// listRuns writes runs as gsv run --list's table.
func listRuns(w io.Writer, runs []abi.RunInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PID\tSTATE\tRUN\tSTEP\tCKPT\tPENDING\tUSD\tTOKENS\tTURNS\tSUPERVISE")
	lim := func(used, limit string, set bool) string {
		if !set {
			return used
		}
		return used + "/" + limit
	}
	for _, r := range runs {
		pending := "-"
		if r.Pending != nil {
			pending = fmt.Sprintf("%d %s", r.Pending.Seq, cell(r.Pending.Reason))
		}
		run := "-"
		if r.RunID != "" {
			run = cell(r.RunID)
		}
		sup := "-"
		if r.Supervise {
			sup = "grace " + abi.FormatMs(r.GraceMs)
		}
		state := cell(r.State)
		if r.StopRequested {
			state += ",stop"
		}
		b, u := r.Budget, r.Used
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(r.Pid), state, run, r.Step, r.Checkpoint, pending,
			lim(usd(u.USD), usd(b.USD), b.USD > 0),
			lim(strconv.FormatInt(u.TokensIn+u.TokensOut, 10), strconv.FormatInt(b.Tokens, 10), b.Tokens > 0),
			lim(strconv.FormatInt(u.Turns, 10), strconv.FormatInt(b.Turns, 10), b.Turns > 0), sup)
	}
	return tw.Flush()
}

// addRunCommands adds gsv run, continue, stop, start and supervise.
func (c *cli) addRunCommands(root *cobra.Command) {
	root.AddCommand(c.runCmd(), c.continueCmd(), c.stopCmd(), c.startCmd(), c.superviseCmd())
}

func (c *cli) runCmd() *cobra.Command {
	var list bool
	var uid int
	cmd := &cobra.Command{
		Use:   "run [PID] | run --list [--uid N]",
		Short: "Show a process's run: state, budget, pending checkpoint (proc.run.get, proc.run.list)",
		Long: "Show the current (or last) run of process PID (default: your init): its state, run id, step and\n" +
			"checkpoint, the checkpoint it is parked at (reason and snapshot), what its runs have spent of\n" +
			"each budget dimension, and its run settings: supervise and grace, model, temperature, tool cap.\n" +
			"--list lists the processes with a run under way or parked (root: --uid N for another user's).\n" +
			"--json prints the raw result.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if list {
				if len(args) > 0 {
					return errors.New("--list takes no PID")
				}
				a := &abi.RunListArgs{}
				if uid >= 0 {
					u := uint32(uid)
					a.Uid = &u
				}
				return show(c, abi.ProcRunList, a, func(r *abi.RunListResult) error {
					return listRuns(c.out, r.Runs)
				})
			}
			if cmd.Flags().Changed("uid") {
				return errors.New("--uid goes with --list")
			}
			a := &abi.PidArgs{}
			if len(args) == 1 {
				a.Pid = args[0]
			}
			return show(c, abi.ProcRunGet, a, func(r *abi.RunInfo) error {
				showRun(c.out, r, time.Now())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the runs under way or parked (proc.run.list)")
	cmd.Flags().IntVar(&uid, "uid", -1, "with --list: this user's runs (root only for another user)")
	return cmd
}

func (c *cli) continueCmd() *cobra.Command {
	var checkpoint int64
	var effects []effect
	cmd := &cobra.Command{
		Use:   "continue PID [--checkpoint N] [EFFECT FLAGS...]",
		Short: "Continue a run's checkpoint, with effects (proc.directive)",
		Long: "Decide checkpoint N of PID's run (default: the one it is parked at, else its next) with a\n" +
			"continue directive. Each effect flag adds one effect, applied in the order given; a flag may\n" +
			"be repeated:\n" +
			"  --extend-budget usd=0.5,turns=10   raise the budget (keys usd, tokens, turns, time)\n" +
			"  --inject TEXT                      add a system message to the conversation\n" +
			"  --inject-user TEXT                 add a user message\n" +
			"  --refocus TEXT                     add the system message \"Refocus: TEXT\"\n" +
			"  --swap-model NAME                  use model NAME from now on\n" +
			"  --temperature T                    set the temperature (0 to 2)\n" +
			"  --tool-cap N                       allow at most N tool calls per step\n" +
			"It prints the result, the checkpoint and the effects applied:\n" +
			"  delivered checkpoint 3 effects: extend-budget, set-temperature\n" +
			"A directive for a checkpoint not reached yet applies its effects when the run reaches it.\n" +
			"Exit status: 0 delivered; 3 already-decided (another directive, or the soft continue of a\n" +
			"supervised checkpoint's grace, came first: nothing was applied); 1 an error.\n" +
			"Example:\n" +
			"  gsv continue task:3 --extend-budget usd=0.5,turns=10 --refocus \"finish the report\"",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := continueDirective(effects)
			if err != nil {
				return err
			}
			a := &abi.DirectiveArgs{Pid: args[0], Directive: d}
			if cmd.Flags().Changed("checkpoint") {
				a.Checkpoint = &checkpoint
			}
			return c.sendDirective(a)
		},
	}
	cmd.Flags().Int64Var(&checkpoint, "checkpoint", 0, "the checkpoint to decide (default: the one the run is parked at, else its next)")
	addEffectFlags(cmd.Flags(), &effects)
	return cmd
}

// addEffectFlags adds gsv continue's effect flags to fs; each use appends
// its effect to effects.
func addEffectFlags(fs *pflag.FlagSet, effects *[]effect) {
	add := func(name, typ, usage string, parse func(string) (effect, error)) {
		fs.Var(&effectFlag{list: effects, typ: typ, parse: parse}, name, usage)
	}
	add("extend-budget", "SPEC", "raise the budget by SPEC: usd=0.5,tokens=50k,turns=10,time=5m", parseExtend)
	add("inject", "TEXT", "add a system message", parseInject("system"))
	add("inject-user", "TEXT", "add a user message", parseInject("user"))
	add("refocus", "TEXT", "add the system message \"Refocus: TEXT\"", parseRefocus)
	add("swap-model", "NAME", "use model NAME from now on", parseSwapModel)
	add("temperature", "T", "set the temperature (0 to 2)", parseTemperature)
	add("tool-cap", "N", "allow at most N tool calls per step", parseToolCap)
}

// runControl makes proc.run.control and returns the run.
func (c *cli) runControl(a *abi.RunControlArgs, render func(r *abi.RunInfo) error) error {
	return show(c, abi.ProcRunControl, a, render)
}

func (c *cli) stopCmd() *cobra.Command {
	var nowait bool
	cmd := &cobra.Command{
		Use:   "stop PID [--nowait]",
		Short: "Park a process's run at its next checkpoint and keep it parked (proc.run.control)",
		Long: "Ask PID's run to park at its next checkpoint (a step boundary) and stay parked until gsv start\n" +
			"or a directive (gsv continue, gsv abort --checkpoint). gsv stop waits until the run is parked\n" +
			"and prints its checkpoint; --nowait returns at once. A process with no run under way parks its\n" +
			"next run at its first checkpoint.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.RunControlArgs{Pid: args[0], Stop: true, Wait: !nowait}
			return c.runControl(a, func(r *abi.RunInfo) error {
				switch {
				case r.Pending != nil:
					fmt.Fprintf(c.out, "%s: parked at %s\n", cell(r.Pid), checkpointHead(r.Pending.Seq, r.Pending.Reason, &r.Pending.Snapshot, nil, time.Now()))
				default:
					fmt.Fprintf(c.out, "%s: stop requested (run %s)\n", cell(r.Pid), cell(r.State))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&nowait, "nowait", false, "return without waiting for the run to park")
	return cmd
}

func (c *cli) startCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "start PID",
		Short: "End a stop or a pause: a parked run continues (proc.run.control)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.runControl(&abi.RunControlArgs{Pid: args[0], Start: true}, func(r *abi.RunInfo) error {
				fmt.Fprintf(c.out, "%s: started (run %s)\n", cell(r.Pid), cell(r.State))
				return nil
			})
		},
	}
}

func (c *cli) superviseCmd() *cobra.Command {
	var off bool
	var grace, checkin time.Duration
	cmd := &cobra.Command{
		Use:   "supervise PID [--grace D] [--checkin D] [--off]",
		Short: "Make every checkpoint of a process's runs wait for a directive (proc.run.control)",
		Long: "Supervise PID: every checkpoint of its runs parks and waits for a directive (gsv continue,\n" +
			"gsv abort --checkpoint) or, when its grace (default 5s, at most 24h) has passed, continues by\n" +
			"itself. --checkin D sets the tool check-in time. --off ends supervision.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			on := !off
			a := &abi.RunControlArgs{Pid: args[0], Supervise: &on}
			if cmd.Flags().Changed("grace") {
				if grace <= 0 || grace > 24*time.Hour {
					return fmt.Errorf("--grace %s: want more than 0, at most 24h", grace)
				}
				a.GraceMs = ptr(grace.Milliseconds())
			}
			if cmd.Flags().Changed("checkin") {
				if checkin < 0 {
					return fmt.Errorf("--checkin %s: may not be negative", checkin)
				}
				a.CheckinMs = ptr(checkin.Milliseconds())
			}
			return c.runControl(a, func(r *abi.RunInfo) error {
				if r.Supervise {
					fmt.Fprintf(c.out, "%s: supervised, grace %s\n", cell(r.Pid), abi.FormatMs(r.GraceMs))
				} else {
					fmt.Fprintf(c.out, "%s: not supervised\n", cell(r.Pid))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&off, "off", false, "end supervision")
	cmd.Flags().DurationVar(&grace, "grace", 0, "how long a supervised checkpoint waits before it continues by itself (default 5s)")
	cmd.Flags().DurationVar(&checkin, "checkin", 0, "the tool check-in time")
	return cmd
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// checkpointAnswer is a line answered to a checkpoint in gsv chat.
type checkpointAnswer struct {
	kind string // "continue", "refocus", "abort", "" (not an answer)
	text string // the refocus hint ("" for a bare r: ask for it) or the abort reason
}

// parseCheckpointAnswer reads a chat line answering a checkpoint:
// /continue (c), /refocus TEXT (r TEXT; a bare r asks for the text),
// /abort [REASON] (a).
func parseCheckpointAnswer(s string) checkpointAnswer {
	s = strings.TrimSpace(s)
	word, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(word) {
	case "/continue", "c", "continue":
		if rest == "" {
			return checkpointAnswer{kind: "continue"}
		}
	case "/refocus", "r", "refocus":
		return checkpointAnswer{kind: "refocus", text: rest}
	case "/abort", "a", "abort":
		return checkpointAnswer{kind: "abort", text: rest}
	}
	return checkpointAnswer{}
}

// checkpointHint is the prompt of a checkpoint in gsv chat.
const checkpointHint = "[c]ontinue  [r]efocus TEXT  [a]bort (or /continue, /refocus TEXT, /abort)"
