package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"gsvfs.dev/gsvfs/abi"
)

func TestParseBudget(t *testing.T) {
	tests := []struct {
		spec        string
		withExhaust bool
		want        abi.RunBudget
		err         string // a part of the error; "" for none
	}{
		{"turns=20,usd=0.50,tokens=100000,time=10m,on-exhaust=pause", true,
			abi.RunBudget{Turns: 20, USD: 0.5, Tokens: 100000, TimeMs: 600000, OnExhaust: "pause"}, ""},
		{"usd=$1.25", true, abi.RunBudget{USD: 1.25}, ""},
		{" turns = 3 , time=1h30m ", true, abi.RunBudget{Turns: 3, TimeMs: 5400000}, ""},
		{"tokens=100k", true, abi.RunBudget{Tokens: 100000}, ""},
		{"tokens=1.5M", true, abi.RunBudget{Tokens: 1500000}, ""},
		{"on-exhaust=abort", true, abi.RunBudget{OnExhaust: "abort"}, ""},
		{"TURNS=0", true, abi.RunBudget{}, ""},
		{"time=0", true, abi.RunBudget{}, ""},
		{"", true, abi.RunBudget{}, "empty budget"},
		{"turns", true, abi.RunBudget{}, "want KEY=VALUE"},
		{"turns=", true, abi.RunBudget{}, "want KEY=VALUE"},
		{"=3", true, abi.RunBudget{}, "want KEY=VALUE"},
		{"turns=20,", true, abi.RunBudget{}, "want KEY=VALUE"},
		{"turns=2,turns=3", true, abi.RunBudget{}, "turns given twice"},
		{"steps=3", true, abi.RunBudget{}, `unknown key "steps"`},
		{"usd=lots", true, abi.RunBudget{}, "usd=lots: want dollars"},
		{"usd=-1", true, abi.RunBudget{}, "may not be negative"},
		{"usd=NaN", true, abi.RunBudget{}, "want dollars"},
		{"turns=2.5", true, abi.RunBudget{}, "want a whole number"},
		{"turns=-2", true, abi.RunBudget{}, "may not be negative"},
		{"tokens=1.5", true, abi.RunBudget{}, "want a whole number"},
		{"tokens=1.0001k", true, abi.RunBudget{}, "want a whole number"},
		{"tokens=-5k", true, abi.RunBudget{}, "may not be negative"},
		{"time=600", true, abi.RunBudget{}, "with its unit"},
		{"time=soon", true, abi.RunBudget{}, "want a Go duration"},
		{"time=-1m", true, abi.RunBudget{}, "may not be negative"},
		{"time=10ns", true, abi.RunBudget{}, "less than a millisecond"},
		{"on-exhaust=stop", true, abi.RunBudget{}, "want pause or abort"},
		{"on-exhaust=pause", false, abi.RunBudget{}, "want one of usd, tokens, turns, time"},
	}
	for _, tt := range tests {
		got, err := parseBudget(tt.spec, tt.withExhaust)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseBudget(%q) = %+v, %v; want an error with %q", tt.spec, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseBudget(%q) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
	}
}

func TestBudgetSpecRoundTrip(t *testing.T) {
	for _, spec := range []string{"usd=0.5,tokens=100000,turns=20,time=10m,on-exhaust=abort", "turns=1", "time=1h30m"} {
		b, err := parseBudget(spec, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := budgetSpec(b); got != spec {
			t.Errorf("budgetSpec(parseBudget(%q)) = %q", spec, got)
		}
	}
}

// effectsOf parses args with gsv continue's effect flags and returns the
// directive's JSON.
func effectsOf(t *testing.T, args []string) (string, error) {
	t.Helper()
	var effects []effect
	fs := pflag.NewFlagSet("continue", pflag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	addEffectFlags(fs, &effects)
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	d, err := continueDirective(effects)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(d)
	return string(b), err
}

func TestContinueEffects(t *testing.T) {
	tests := []struct {
		args []string
		want string // the directive's JSON
		err  string
	}{
		{nil, `{"type":"continue"}`, ""},
		{[]string{"--extend-budget", "usd=0.5,turns=10"},
			`{"type":"continue","effects":[{"op":"extend-budget","usd":0.5,"turns":10}]}`, ""},
		{[]string{"--extend-budget", "time=5m,tokens=50k"},
			`{"type":"continue","effects":[{"op":"extend-budget","tokens":50000,"timeMs":300000}]}`, ""},
		// Effects keep the order they were given in, across flags.
		{[]string{"--tool-cap", "2", "--inject", "be brief", "--temperature", "0.2", "--swap-model", "m-large", "--inject-user", "and?"},
			`{"type":"continue","effects":[{"op":"set-tool-cap","n":2},{"op":"inject-message","role":"system","content":"be brief"},` +
				`{"op":"set-temperature","temp":0.2},{"op":"swap-model","model":"m-large"},{"op":"inject-message","role":"user","content":"and?"}]}`, ""},
		{[]string{"--tool-cap=0", "--temperature=0"},
			`{"type":"continue","effects":[{"op":"set-tool-cap","n":0},{"op":"set-temperature","temp":0}]}`, ""},
		// A lone refocus is the sugar; among others, the kernel's message.
		{[]string{"--refocus", "finish the report"}, `{"type":"refocus","hint":"finish the report"}`, ""},
		{[]string{"--refocus", "finish", "--extend-budget", "turns=5"},
			`{"type":"continue","effects":[{"op":"inject-message","role":"system","content":"Refocus: finish"},{"op":"extend-budget","turns":5}]}`, ""},
		{[]string{"--extend-budget", "turns=0"}, "", "nothing to extend"},
		{[]string{"--extend-budget", "on-exhaust=abort"}, "", "want one of usd, tokens, turns, time"},
		{[]string{"--extend-budget", "usd=x"}, "", "want dollars"},
		{[]string{"--temperature", "3"}, "", "from 0 to 2"},
		{[]string{"--temperature", "hot"}, "", "from 0 to 2"},
		{[]string{"--tool-cap", "-1"}, "", "0 or more"},
		{[]string{"--tool-cap", "two"}, "", "0 or more"},
		{[]string{"--swap-model", " "}, "", "want a model name"},
		{[]string{"--inject", ""}, "", "empty message"},
		{[]string{"--refocus", "  "}, "", "empty hint"},
	}
	for _, tt := range tests {
		got, err := effectsOf(t, tt.args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %s, %v; want an error with %q", tt.args, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q:\n got %s, %v\nwant %s", tt.args, got, err, tt.want)
		}
	}
}

func TestParseCheckpointAnswer(t *testing.T) {
	tests := []struct {
		line string
		want checkpointAnswer
	}{
		{"/continue", checkpointAnswer{kind: "continue"}},
		{" c ", checkpointAnswer{kind: "continue"}},
		{"C", checkpointAnswer{kind: "continue"}},
		{"c maybe", checkpointAnswer{}},
		{"/refocus finish the report", checkpointAnswer{kind: "refocus", text: "finish the report"}},
		{"r  tests first", checkpointAnswer{kind: "refocus", text: "tests first"}},
		{"r", checkpointAnswer{kind: "refocus"}},
		{"/abort", checkpointAnswer{kind: "abort"}},
		{"a too slow", checkpointAnswer{kind: "abort", text: "too slow"}},
		{"", checkpointAnswer{}},
		{"what now?", checkpointAnswer{}},
	}
	for _, tt := range tests {
		if got := parseCheckpointAnswer(tt.line); got != tt.want {
			t.Errorf("parseCheckpointAnswer(%q) = %+v; want %+v", tt.line, got, tt.want)
		}
	}
}

func TestCheckMode(t *testing.T) {
	for _, m := range []string{"queue", "steer", "interrupt"} {
		if err := checkMode(m); err != nil {
			t.Errorf("checkMode(%q): %v", m, err)
		}
	}
	for _, m := range []string{"", "Steer", "now"} {
		if err := checkMode(m); err == nil {
			t.Errorf("checkMode(%q): no error", m)
		}
	}
}

func TestDirectiveLine(t *testing.T) {
	tests := []struct {
		r    abi.DirectiveResult
		want string
	}{
		{abi.DirectiveResult{Result: "delivered", Checkpoint: 3, EffectsApplied: []string{"extend-budget", "set-temperature"}},
			"delivered checkpoint 3 effects: extend-budget, set-temperature"},
		{abi.DirectiveResult{Result: "already-decided", Checkpoint: 2}, "already-decided checkpoint 2 effects: -"},
	}
	for _, tt := range tests {
		if got := directiveLine(&tt.r); got != tt.want {
			t.Errorf("directiveLine(%+v) = %q; want %q", tt.r, got, tt.want)
		}
	}
}

func TestCheckpointHead(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	soft := int64(1_005_000)
	s := &abi.CheckpointSnapshot{ElapsedMs: 62000, Steps: 12, TokensIn: 4000, TokensOut: 600, CostUSD: 0.41, ToolCalls: 7, LastTool: "fs.read"}
	got := checkpointHead(3, "budget", s, &soft, now)
	want := "checkpoint 3 (budget): 12 steps, $0.41, 4600 tokens, 7 tool calls (last fs.read), 1m2s; continues by itself in 5s"
	if got != want {
		t.Errorf("checkpointHead = %q\nwant %q", got, want)
	}
	if got := checkpointHead(1, "stop\x1b[2J", nil, nil, now); got != `checkpoint 1 ("stop\x1b[2J")` {
		t.Errorf("checkpointHead quotes a control character: %q", got)
	}
}

func TestShowRun(t *testing.T) {
	temp, capN, soft := 0.2, int64(2), int64(0)
	r := &abi.RunInfo{Pid: "task:3", RunID: "run_1", ConversationID: "default", State: abi.RunAwaitingDecision, Step: 12, Checkpoint: 3,
		Pending:   &abi.RunCheckpoint{Seq: 3, Reason: "budget", Snapshot: abi.CheckpointSnapshot{Steps: 12, CostUSD: 0.41, Description: "wrote the draft"}, SoftContinueAt: &soft},
		Budget:    abi.RunBudget{USD: 0.5, Turns: 20, OnExhaust: "pause"},
		Used:      abi.RunUsage{USD: 0.41, TokensIn: 4000, TokensOut: 600, Turns: 12, TimeMs: 62000},
		Supervise: true, GraceMs: 5000, Model: "m-large", Temperature: &temp, ToolCap: &capN}
	var b bytes.Buffer
	showRun(&b, r, time.UnixMilli(0))
	out := b.String()
	for _, want := range []string{
		"run_1 (conversation default)", "awaiting-decision", "checkpoint 3 (budget)", "wrote the draft",
		"$0.41 / $0.50", "4600 (no limit) (4000 in, 600 out)", "12 / 20", "1m2s (no limit)",
		"on, grace 5s", "m-large", "0.2", "tool cap:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gsv run's output has no %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := listRuns(&b, []abi.RunInfo{*r, {Pid: "init:0", State: abi.RunRunning, StopRequested: true}}); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	for _, want := range []string{"PID", "task:3", "3 budget", "$0.41/$0.50", "12/20", "grace 5s", "running,stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("gsv run --list's output has no %q:\n%s", want, out)
		}
	}
}

// TestRunCommandErrors runs command lines that fail before any syscall:
// their flags are refused with a clear error and exit status 1.
func TestRunCommandErrors(t *testing.T) {
	t.Setenv("GSV_ADDR", "unix!/nonexistent/9p.sock")
	tests := []struct {
		args []string
		err  string
	}{
		{[]string{"spawn", "task", "--budget", "turns=x"}, `invalid argument "turns=x" for "--budget" flag: turns=x: want a whole number`},
		{[]string{"spawn", "task", "--budget", "on-exhaust=never"}, "want pause or abort"},
		{[]string{"spawn", "task", "--supervise", "--grace", "0s"}, "--grace 0s: want more than 0"},
		{[]string{"continue", "task:1", "--temperature", "9"}, `"--temperature" flag: 9: want a number from 0 to 2`},
		{[]string{"continue"}, "accepts 1 arg"},
		{[]string{"abort", "task:1", "--reason", "slow"}, "--reason goes with --checkpoint"},
		{[]string{"abort", "task:1", "--pid", "task:2"}, "give PID or --pid, not both"},
		{[]string{"send", "--mode", "now", "hi"}, `--mode "now": want queue, steer or interrupt`},
		{[]string{"run", "--list", "task:1"}, "--list takes no PID"},
		{[]string{"run", "--uid", "0"}, "--uid goes with --list"},
		{[]string{"supervise", "task:1", "--grace", "25h"}, "want more than 0, at most 24h"},
		{[]string{"stop"}, "accepts 1 arg"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := run(tt.args, &out, &errOut)
		if code != 1 || !strings.Contains(errOut.String(), tt.err) {
			t.Errorf("gsv %s: exit %d, stderr %q; want 1 and %q", strings.Join(tt.args, " "), code, errOut.String(), tt.err)
		}
	}
}

// watchOf returns a runWatch of run run_1 of task:1 fed by evs and lines.
func watchOf(evs chan event, lines chan line, out, errOut *bytes.Buffer) *runWatch {
	c := &cli{out: out}
	return &runWatch{c: c, evs: &events{ch: evs}, pid: "task:1", runID: "run_1", errOut: errOut, note: out, lines: lines}
}

// ev makes an event from its JSON.
func ev(t *testing.T, s string) event {
	t.Helper()
	var e event
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestChatCheckpoint follows a run that parks at a supervised checkpoint:
// chat shows it and its prompt, takes lines as answers only while it is
// parked, and says when the grace continued it.
func TestChatCheckpoint(t *testing.T) {
	evs := make(chan event, 8)
	lines := make(chan line) // unbuffered: a line sent is a line read
	var out, errOut bytes.Buffer
	w := watchOf(evs, lines, &out, &errOut)
	evs <- ev(t, `{"signal":"proc.run.stream","payload":{"runId":"run_1","text":"working"}}`)
	evs <- ev(t, `{"signal":"proc.run.checkpoint","payload":{"pid":"task:1","runId":"run_1","seq":3,"reason":"supervised","state":"awaiting-decision",`+
		`"snapshot":{"steps":12,"costUsd":0.41,"elapsedMs":1000}}}`)
	done := make(chan finish)
	go func() {
		f, err := w.follow()
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	lines <- line{text: "hmm"} // not an answer: the prompt again
	lines <- line{text: "r"}   // a bare r asks for the text...
	// ... but the grace continues the run first.
	evs <- ev(t, `{"signal":"proc.run.resumed","payload":{"pid":"task:1","runId":"run_1","seq":3,"how":"soft-continue"}}`)
	evs <- ev(t, `{"signal":"proc.run.finished","payload":{"runId":"run_1","status":"completed"}}`)
	f := <-done
	if f.status != "completed" {
		t.Errorf("finish %+v", f)
	}
	got := out.String()
	for _, want := range []string{
		"working\ncheckpoint 3 (supervised): 12 steps, $0.41, 0 tokens, 0 tool calls, 1s\n" + checkpointHint + "? hmm\n",
		"checkpoint 3 is waiting for an answer\n" + checkpointHint + "? r\nrefocus on: \n",
		"(checkpoint 3: no answer within the grace; the run continues)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("chat output has no %q:\n%s", want, got)
		}
	}
}

// TestChatCheckpointEOF: stdin ending while a checkpoint waits ends the
// chat, naming the command that answers it.
func TestChatCheckpointEOF(t *testing.T) {
	evs := make(chan event, 8)
	lines := make(chan line)
	var out, errOut bytes.Buffer
	w := watchOf(evs, lines, &out, &errOut)
	evs <- ev(t, `{"signal":"proc.run.checkpoint","payload":{"pid":"task:1","runId":"run_1","seq":2,"reason":"stop","snapshot":{}}}`)
	close(lines)
	f, err := w.follow()
	if err != nil || !f.eof {
		t.Fatalf("follow = %+v, %v; want eof", f, err)
	}
	if want := "gsv continue task:1 --checkpoint 2"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q has no %q", errOut.String(), want)
	}
}

// TestSendWaitCheckpoint: gsv send --wait (no stdin answers) names the
// commands that answer a checkpoint, and notes a decision made elsewhere.
func TestSendWaitCheckpoint(t *testing.T) {
	evs := make(chan event, 8)
	var out, errOut bytes.Buffer
	w := watchOf(evs, nil, &out, &errOut)
	w.lines, w.note = nil, nil
	evs <- ev(t, `{"signal":"proc.run.checkpoint","payload":{"pid":"task:1","runId":"run_1","seq":1,"reason":"budget","snapshot":{"steps":2}}}`)
	evs <- ev(t, `{"signal":"proc.run.directive","payload":{"pid":"task:1","runId":"run_1","seq":1,"result":"delivered","type":"continue"}}`)
	evs <- ev(t, `{"signal":"proc.run.resumed","payload":{"pid":"task:1","runId":"run_1","seq":1,"how":"directive"}}`)
	evs <- ev(t, `{"signal":"proc.run.finished","payload":{"runId":"run_1","status":"completed"}}`)
	if _, err := w.follow(); err != nil {
		t.Fatal(err)
	}
	got := errOut.String()
	want := "checkpoint 1 (budget): 2 steps, $0.00, 0 tokens, 0 tool calls, 0s\n" +
		"  answer: gsv continue task:1 --checkpoint 1 [effects], or gsv abort task:1 --checkpoint 1\n" +
		"(checkpoint 1 decided elsewhere: continue)\n"
	if got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
}
