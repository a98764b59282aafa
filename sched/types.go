package sched

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Expression says when a schedule fires (the seed's ScheduleExpression).
type Expression struct {
	Kind     string `json:"kind"` // at, after, every, cron
	AtMs     int64  `json:"atMs,omitempty"`
	AfterMs  int64  `json:"afterMs,omitempty"`
	EveryMs  int64  `json:"everyMs,omitempty"`
	AnchorMs *int64 `json:"anchorMs,omitempty"`
	Expr     string `json:"expr,omitempty"`
	Timezone string `json:"timezone,omitempty"`
}

// Target is what a schedule does (the seed's ScheduleTarget plus
// process.lifecycle).
type Target struct {
	Kind           string          `json:"kind"` // process.spawn, process.event, process.lifecycle
	Profile        string          `json:"profile,omitempty"`
	Label          string          `json:"label,omitempty"`
	Prompt         string          `json:"prompt,omitempty"`
	Pid            string          `json:"pid,omitempty"`
	ConversationID string          `json:"conversationId,omitempty"`
	Message        string          `json:"message,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
	Action         string          `json:"action,omitempty"` // compact, reset, checkpoint
	Options        map[string]any  `json:"options,omitempty"`
}

// Retry is the retry policy of one-shot schedules: a failed run is tried
// again after BaseMs, doubling up to MaxMs, at most MaxAttempts times.
type Retry struct {
	MaxAttempts int   `json:"maxAttempts"`
	BaseMs      int64 `json:"baseMs"`
	MaxMs       int64 `json:"maxMs"`
}

// State is a schedule's run state.
type State struct {
	NextRunAtMs    *int64  `json:"nextRunAtMs"`
	RunningAtMs    *int64  `json:"runningAtMs"`
	LastRunAtMs    *int64  `json:"lastRunAtMs"`
	LastStatus     *string `json:"lastStatus"`
	LastError      *string `json:"lastError"`
	LastDurationMs *int64  `json:"lastDurationMs"`
	RunCount       int64   `json:"runCount"`
	Attempt        int     `json:"attempt"`
}

// Schedule is the seed's ScheduleRecord with the principals and policies
// of the scheduler design.
type Schedule struct {
	ID            string     `json:"id"`
	OwnerUid      uint32     `json:"ownerUid"`
	CreatorUid    uint32     `json:"creatorUid"`
	RunAsUid      uint32     `json:"runAsUid"`
	Name          string     `json:"name"`
	Description   *string    `json:"description,omitempty"`
	Enabled       bool       `json:"enabled"`
	Expression    Expression `json:"expression"`
	Target        Target     `json:"target"`
	OverlapPolicy string     `json:"overlapPolicy"` // skip
	MisfirePolicy string     `json:"misfirePolicy"` // skip, run-once
	RetryPolicy   *Retry     `json:"retryPolicy,omitempty"`
	CreatedAtMs   int64      `json:"createdAtMs"`
	UpdatedAtMs   int64      `json:"updatedAtMs"`
	State         State      `json:"state"`
}

// Run is one entry of the run history.
type Run struct {
	ID            int64   `json:"id"`
	ScheduleID    string  `json:"scheduleId"`
	Name          string  `json:"schedule"`
	OwnerUid      uint32  `json:"ownerUid"`
	ScheduledAtMs int64   `json:"scheduledAtMs"`
	StartedAtMs   int64   `json:"startedAtMs"`
	FinishedAtMs  int64   `json:"finishedAtMs"`
	Status        string  `json:"status"` // ok, error, skipped
	Error         *string `json:"error,omitempty"`
	Summary       *string `json:"summary,omitempty"`
	DurationMs    int64   `json:"durationMs"`
}

// oneShot says whether e fires once.
func (e Expression) oneShot() bool { return e.Kind == "at" || e.Kind == "after" }

// validate checks an expression at now.
func (e *Expression) validate(now time.Time) error {
	switch e.Kind {
	case "at":
		if e.AtMs <= now.UnixMilli() {
			return fmt.Errorf("at %s is in the past", time.UnixMilli(e.AtMs).UTC().Format(time.RFC3339))
		}
	case "after":
		if e.AfterMs <= 0 {
			return fmt.Errorf("after must be positive")
		}
	case "every":
		if e.EveryMs < 1000 {
			return fmt.Errorf("every must be at least 1s")
		}
	case "cron":
		// Through the cache: nextAfter parses it next.
		if _, err := parseCronCached(e.Expr, e.Timezone); err != nil {
			return err
		}
	default:
		return fmt.Errorf("expression kind %q: want at, after, every or cron", e.Kind)
	}
	return nil
}

// validate checks a target's shape (the run-as principal's permissions are
// checked when it runs, by the syscalls it makes).
func (t *Target) validate() error {
	switch t.Kind {
	case "process.spawn":
		if t.Profile == "" {
			t.Profile = "task"
		}
		if strings.TrimSpace(t.Prompt) == "" {
			return fmt.Errorf("process.spawn needs a prompt")
		}
	case "process.event":
		if t.Pid == "" || strings.TrimSpace(t.Message) == "" {
			return fmt.Errorf("process.event needs a pid and a message")
		}
	case "process.lifecycle":
		if t.Pid == "" {
			return fmt.Errorf("process.lifecycle needs a pid")
		}
		switch t.Action {
		case "compact", "reset", "checkpoint":
		default:
			return fmt.Errorf("lifecycle action %q: want compact, reset or checkpoint", t.Action)
		}
	default:
		return fmt.Errorf("target kind %q: want process.spawn, process.event or process.lifecycle", t.Kind)
	}
	return nil
}
