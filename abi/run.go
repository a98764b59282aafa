package abi

import "encoding/json"

// Deliberable runs (seed 002): a run's checkpoints, the directives that
// decide them, a process's budget. The names keep apart the two senses of
// "checkpoint": proc.checkpoint writes a process's continuity files (seed
// 000); a run checkpoint (RunCheckpoint, proc.run.*, proc.directive) is a
// step boundary of a run where it may park for a decision.

// RunBudget is a process's budget: the most a process's runs may spend in
// dollars, tokens (in and out), turns (model calls) and wall time, 0
// meaning no limit, and what a run does when one is spent: park ("pause",
// the default) until a directive extends it, or "abort".
type RunBudget struct {
	USD       float64 `json:"usd,omitempty"`
	Tokens    int64   `json:"tokens,omitempty"`
	Turns     int64   `json:"turns,omitempty"`
	TimeMs    int64   `json:"timeMs,omitempty"`
	OnExhaust string  `json:"onExhaust,omitempty"`
}

// RunUsage is what a process's runs have spent so far.
type RunUsage struct {
	USD       float64 `json:"usd"`
	TokensIn  int64   `json:"tokensIn"`
	TokensOut int64   `json:"tokensOut"`
	Turns     int64   `json:"turns"`
	TimeMs    int64   `json:"timeMs"`
}

// CheckpointSnapshot is the state of a run at a checkpoint.
type CheckpointSnapshot struct {
	ElapsedMs   int64   `json:"elapsedMs"`
	Steps       int     `json:"steps"`
	TokensIn    int64   `json:"tokensIn"`
	TokensOut   int64   `json:"tokensOut"`
	CostUSD     float64 `json:"costUsd"`
	ToolCalls   int     `json:"toolCalls"`
	LastTool    string  `json:"lastTool,omitempty"`
	Description string  `json:"description"`
}

// RunCheckpoint is the checkpoint a run is parked at: its number (per
// run, from 1), why it parked ("budget", "stop", "supervised",
// "tool-checkin"), its snapshot, when it parked and, for a checkpoint that
// soft-continues, when.
type RunCheckpoint struct {
	Seq            int64              `json:"seq"`
	Reason         string             `json:"reason"`
	Snapshot       CheckpointSnapshot `json:"snapshot"`
	ParkedAt       int64              `json:"parkedAt"`
	SoftContinueAt *int64             `json:"softContinueAt,omitempty"`
}

// Run states (RunInfo.State).
const (
	RunRunning          = "running"
	RunAwaitingDecision = "awaiting-decision"
	RunPaused           = "paused"
	RunWaitingHil       = "waiting-hil"
	RunCompleted        = "completed"
	RunAborted          = "aborted"
	RunFailed           = "error"
	RunIdle             = "idle"
)

// RunInfo is a process's current (or last, for a few minutes) run as
// proc.run.get shows it, with the process's run settings.
type RunInfo struct {
	Pid            string         `json:"pid"`
	RunID          string         `json:"runId,omitempty"`
	ConversationID string         `json:"conversationId,omitempty"`
	State          string         `json:"state"`
	Step           int            `json:"step"`
	Checkpoint     int64          `json:"checkpoint"`
	Pending        *RunCheckpoint `json:"pending,omitempty"`
	// Hil is the approval request the run waits on (state waiting-hil):
	// one of a tool call, or of a nested call of its CodeMode block.
	Hil           *HilRequest `json:"hil,omitempty"`
	Budget        RunBudget   `json:"budget"`
	Used          RunUsage    `json:"used"`
	Supervise     bool        `json:"supervise"`
	GraceMs       int64       `json:"graceMs"`
	StopRequested bool        `json:"stopRequested,omitempty"`
	Model         string      `json:"model,omitempty"`
	Temperature   *float64    `json:"temperature,omitempty"`
	ToolCap       *int64      `json:"toolCap,omitempty"`
	// Tools narrows the agent's tools to these names (a package
	// profile's); empty: all of them.
	Tools      []string `json:"tools,omitempty"`
	StartedAt  int64    `json:"startedAt,omitempty"`
	FinishedAt *int64   `json:"finishedAt,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// RunListArgs are proc.run.list's args: the runs of the caller's
// processes (root: Uid's, or everyone's).
type RunListArgs struct {
	Uid *uint32 `json:"uid,omitempty"`
}

// RunListResult is proc.run.list's result: the processes with a run
// under way or parked.
type RunListResult struct {
	Runs []RunInfo `json:"runs"`
}

// Effect is one effect of a continue directive, by op: extend-budget
// (USD or Dollars, the seed's name of it; Tokens, Turns, TimeMs),
// inject-message (Role, Content), swap-model (Model), set-temperature
// (Temp), set-tool-cap (N). An unknown op is logged and skipped.
type Effect struct {
	Op       string   `json:"op"`
	USD      float64  `json:"usd,omitempty"`
	Dollars  float64  `json:"dollars,omitempty"`
	Tokens   int64    `json:"tokens,omitempty"`
	Turns    int64    `json:"turns,omitempty"`
	TimeMs   int64    `json:"timeMs,omitempty"`
	Role     string   `json:"role,omitempty"`
	Content  string   `json:"content,omitempty"`
	Model    string   `json:"model,omitempty"`
	Provider string   `json:"provider,omitempty"`
	Temp     *float64 `json:"temp,omitempty"`
	N        *int64   `json:"n,omitempty"`
}

// Directive decides a checkpoint: {type:"continue", effects:[...]} or
// {type:"abort", reason}; the sugar {type:"extend-budget", usd (or
// dollars, the seed's name), tokens, turns, timeMs} and {type:"refocus",
// hint} are a continue with one effect. Effects stay raw JSON until
// applied: an effect that does not decode is skipped, never the
// directive refused.
type Directive struct {
	Type    string            `json:"type"`
	Effects []json.RawMessage `json:"effects,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	USD     float64           `json:"usd,omitempty"`
	Dollars float64           `json:"dollars,omitempty"`
	Tokens  int64             `json:"tokens,omitempty"`
	Turns   int64             `json:"turns,omitempty"`
	TimeMs  int64             `json:"timeMs,omitempty"`
	Hint    string            `json:"hint,omitempty"`
}

// DirectiveArgs are proc.directive's args: the process, the checkpoint
// the directive is for (default: the one the run is parked at, else its
// next) and the directive.
type DirectiveArgs struct {
	Pid        string    `json:"pid"`
	Checkpoint *int64    `json:"checkpoint,omitempty"`
	Directive  Directive `json:"directive"`
}

// DollarsOf is the amount of usd and dollars, two names of one field
// (dollars is the seed's): the one given, or both when they are equal;
// ok is false when both are given and differ.
func DollarsOf(usd, dollars float64) (amount float64, ok bool) {
	switch {
	case dollars == 0:
		return usd, true
	case usd == 0 || usd == dollars:
		return dollars, true
	}
	return 0, false
}

// DirectiveResult is proc.directive's result: "delivered" (the first
// directive for that checkpoint) or "already-decided" (another decided
// it first, whether the run is still there or has moved past it), the
// checkpoint, and the ops of the effects that changed something, in
// order (a directive for a checkpoint not reached yet applies its
// effects at once: they are listed too).
type DirectiveResult struct {
	Result         string   `json:"result"`
	Checkpoint     int64    `json:"checkpoint"`
	EffectsApplied []string `json:"effectsApplied"`
}

// RunControlArgs are proc.run.control's args (ours): a process's run
// settings: supervise (every checkpoint waits for a directive or its
// grace), the grace, the tool check-in time, a stop request (park at the
// next checkpoint and stay parked; Wait returns once parked), start (end
// a stop or a pause: the parked run continues), and the budget.
type RunControlArgs struct {
	Pid       string     `json:"pid"`
	Supervise *bool      `json:"supervise,omitempty"`
	GraceMs   *int64     `json:"graceMs,omitempty"`
	CheckinMs *int64     `json:"checkinMs,omitempty"`
	Stop      bool       `json:"stop,omitempty"`
	Start     bool       `json:"start,omitempty"`
	Wait      bool       `json:"wait,omitempty"`
	Budget    *RunBudget `json:"budget,omitempty"`
}
