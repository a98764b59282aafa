package abi

import "encoding/json"

// The sched domain: schedules, their crontabs and their run history
// (seed 003 sched.*, and the scheduler design). The sched room serves
// these; the CLI calls them with these types.

// Expression says when a schedule fires (the seed's ScheduleExpression):
// Kind "at" (AtMs), "after" (AfterMs from creation), "every" (EveryMs from
// AnchorMs, default creation) or "cron" (Expr in Timezone).
type Expression struct {
	Kind     string `json:"kind"`
	AtMs     int64  `json:"atMs,omitempty"`
	AfterMs  int64  `json:"afterMs,omitempty"`
	EveryMs  int64  `json:"everyMs,omitempty"`
	AnchorMs *int64 `json:"anchorMs,omitempty"`
	Expr     string `json:"expr,omitempty"`
	Timezone string `json:"timezone,omitempty"`
}

// The kinds of a schedule's Target.
const (
	TargetSpawn     = "process.spawn"
	TargetEvent     = "process.event"
	TargetLifecycle = "process.lifecycle"
	// TargetPackage is the seed's package.event: an event handed to a
	// command of one of the owner's active packages (pkg.event).
	TargetPackage = "package.event"
)

// Target is what a schedule does (the seed's ScheduleTarget plus
// process.lifecycle): Kind "process.spawn" (Profile, Label, Prompt, and
// the seed's ParentPid, Workspace, Assignment and Mounts, as
// proc.spawn's),
// "process.event" (Pid, ConversationID, Message) or "process.lifecycle"
// (Pid, ConversationID, Action compact, reset or checkpoint, with Options
// keep and summary for compact).
type Target struct {
	Kind           string            `json:"kind"`
	Profile        string            `json:"profile,omitempty"`
	Label          string            `json:"label,omitempty"`
	Prompt         string            `json:"prompt,omitempty"`
	ParentPid      string            `json:"parentPid,omitempty"`
	Workspace      *WorkspaceSpec    `json:"workspace,omitempty"`
	Assignment     *Assignment       `json:"assignment,omitempty"`
	Mounts         []json.RawMessage `json:"mounts,omitempty"`
	Pid            string            `json:"pid,omitempty"`
	ConversationID string            `json:"conversationId,omitempty"`
	Message        string            `json:"message,omitempty"`
	Data           json.RawMessage   `json:"data,omitempty"`
	Action         string            `json:"action,omitempty"`
	Options        map[string]any    `json:"options,omitempty"`
	// PackageID, Entrypoint, Event and Payload are a package.event's:
	// the package, the command of it that takes the event, the event's
	// name and its JSON payload.
	PackageID  string          `json:"packageId,omitempty"`
	Entrypoint string          `json:"entrypoint,omitempty"`
	Event      string          `json:"event,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// Retry is the retry policy of one-shot schedules: a failed run is tried
// again after BaseMs, doubling up to MaxMs, at most MaxAttempts times.
type Retry struct {
	MaxAttempts int   `json:"maxAttempts"`
	BaseMs      int64 `json:"baseMs"`
	MaxMs       int64 `json:"maxMs"`
}

// ScheduleState is a schedule's run state. A schedule with a run under
// way has RunningAtMs, the run's start.
type ScheduleState struct {
	NextRunAtMs    *int64  `json:"nextRunAtMs"`
	RunningAtMs    *int64  `json:"runningAtMs"`
	LastRunAtMs    *int64  `json:"lastRunAtMs"`
	LastStatus     *string `json:"lastStatus"`
	LastError      *string `json:"lastError"`
	LastDurationMs *int64  `json:"lastDurationMs"`
	RunCount       int64   `json:"runCount"`
	Attempt        int     `json:"attempt"`
	// WaitingSinceMs (ours) is when the schedule, due, entered its
	// owner's queue, while it waits there to start: held back by its
	// owner's runs under way or fire rate (docs/scheduler.md, "The
	// engine"). Absent when it does not wait.
	WaitingSinceMs *int64 `json:"waitingSinceMs,omitempty"`
}

// Schedule is the seed's ScheduleRecord with the principals and policies
// of the scheduler design. OverlapPolicy is "skip"; MisfirePolicy "skip"
// or "run-once".
type Schedule struct {
	ID            string        `json:"id"`
	OwnerUid      uint32        `json:"ownerUid"`
	CreatorUid    uint32        `json:"creatorUid"`
	RunAsUid      uint32        `json:"runAsUid"`
	Name          string        `json:"name"`
	Description   *string       `json:"description,omitempty"`
	Enabled       bool          `json:"enabled"`
	Expression    Expression    `json:"expression"`
	Target        Target        `json:"target"`
	OverlapPolicy string        `json:"overlapPolicy"`
	MisfirePolicy string        `json:"misfirePolicy"`
	RetryPolicy   *Retry        `json:"retryPolicy,omitempty"`
	CreatedAtMs   int64         `json:"createdAtMs"`
	UpdatedAtMs   int64         `json:"updatedAtMs"`
	State         ScheduleState `json:"state"`
	// Cap (ours) narrows the process capability of the schedule's runs:
	// the narrowing of whoever added or last changed it (a token's
	// --process). Absent: none.
	Cap *ProcessCap `json:"processCap,omitempty"`
	// Broken, when not empty, says what of the stored record cannot be
	// read (a damaged row of sched_schedules): such a schedule never
	// runs, and may only be listed and removed.
	Broken string `json:"broken,omitempty"`
}

// Run is one entry of the run history; Status is "ok", "error" or
// "skipped".
type Run struct {
	ID            int64   `json:"id"`
	ScheduleID    string  `json:"scheduleId"`
	Name          string  `json:"schedule"`
	OwnerUid      uint32  `json:"ownerUid"`
	ScheduledAtMs int64   `json:"scheduledAtMs"`
	StartedAtMs   int64   `json:"startedAtMs"`
	FinishedAtMs  int64   `json:"finishedAtMs"`
	Status        string  `json:"status"`
	Error         *string `json:"error,omitempty"`
	Summary       *string `json:"summary,omitempty"`
	DurationMs    int64   `json:"durationMs"`
}

// SchedListArgs are sched.list's args: the caller's schedules, or for
// root everyone's (or OwnerUid's). IncludeDisabled false leaves disabled
// ones out; Limit is at most 10000.
type SchedListArgs struct {
	OwnerUid        *uint32 `json:"ownerUid,omitempty"`
	IncludeDisabled *bool   `json:"includeDisabled,omitempty"`
	Limit           int     `json:"limit,omitempty"`
	Offset          int     `json:"offset,omitempty"`
}

// SchedListResult is sched.list's result.
type SchedListResult struct {
	Count     int        `json:"count"`
	Schedules []Schedule `json:"schedules"`
}

// SchedAddArgs are sched.add's args. An empty Name gets a generated one;
// Enabled nil is true; MisfirePolicy "" is "skip"; root may add for
// OwnerUid.
type SchedAddArgs struct {
	OwnerUid      *uint32    `json:"ownerUid,omitempty"`
	Name          string     `json:"name,omitempty"`
	Description   *string    `json:"description,omitempty"`
	Enabled       *bool      `json:"enabled,omitempty"`
	Expression    Expression `json:"expression"`
	Target        Target     `json:"target"`
	MisfirePolicy string     `json:"misfirePolicy,omitempty"`
	RetryPolicy   *Retry     `json:"retryPolicy,omitempty"`
}

// SchedPatch is sched.update's patch: only the fields given change.
// Description is a JSON string, or null to remove it.
type SchedPatch struct {
	Name          *string          `json:"name,omitempty"`
	Description   *json.RawMessage `json:"description,omitempty"`
	Enabled       *bool            `json:"enabled,omitempty"`
	Expression    *Expression      `json:"expression,omitempty"`
	Target        *Target          `json:"target,omitempty"`
	MisfirePolicy *string          `json:"misfirePolicy,omitempty"`
	RetryPolicy   *Retry           `json:"retryPolicy,omitempty"`
}

// SchedUpdateArgs are sched.update's args: the schedule ID (an id or a
// name) and its patch.
type SchedUpdateArgs struct {
	ID       string     `json:"id"`
	OwnerUid *uint32    `json:"ownerUid,omitempty"`
	Patch    SchedPatch `json:"patch"`
}

// ScheduleResult is the result of sched.add and sched.update: the
// schedule as stored.
type ScheduleResult struct {
	Schedule *Schedule `json:"schedule"`
}

// SchedIDArgs name one schedule by id or name (root: OwnerUid's): the
// args of sched.remove.
type SchedIDArgs struct {
	ID       string  `json:"id"`
	OwnerUid *uint32 `json:"ownerUid,omitempty"`
}

// SchedRemoveResult is sched.remove's result; Removed is false for a
// schedule that is not there (or is another user's).
type SchedRemoveResult struct {
	Removed bool `json:"removed"`
}

// SchedRunArgs are sched.run's args: Mode "force" runs schedule ID now,
// even disabled; "due" runs the caller's (root: OwnerUid's) schedules
// that are due; "" is force with an ID, due without.
type SchedRunArgs struct {
	ID       string  `json:"id,omitempty"`
	OwnerUid *uint32 `json:"ownerUid,omitempty"`
	Mode     string  `json:"mode,omitempty"`
}

// RunOutcome is one run sched.run made: its status ("ok", "error",
// "skipped"), error, summary, duration and the schedule's next time.
type RunOutcome struct {
	ScheduleID string `json:"scheduleId"`
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	Summary    string `json:"summary,omitempty"`
	DurationMs int64  `json:"durationMs"`
	NextRunAt  *int64 `json:"nextRunAtMs"`
}

// SchedRunResult is sched.run's result.
type SchedRunResult struct {
	Ran     int          `json:"ran"`
	Results []RunOutcome `json:"results"`
}

// CrontabGetArgs are sched.crontab.get's args: the caller's crontab, or
// for root OwnerUid's.
type CrontabGetArgs struct {
	OwnerUid *uint32 `json:"ownerUid,omitempty"`
}

// CrontabGetResult is sched.crontab.get's result: the crontab's text.
type CrontabGetResult struct {
	Text string `json:"text"`
}

// CrontabSetArgs are sched.crontab.set's args: the whole new text of the
// caller's (root: OwnerUid's) crontab.
type CrontabSetArgs struct {
	OwnerUid *uint32 `json:"ownerUid,omitempty"`
	Text     string  `json:"text"`
}

// CrontabSetResult is sched.crontab.set's result: the ids of the
// schedules added, updated and removed, and how many lines were left as
// they were.
type CrontabSetResult struct {
	Added     []string `json:"added"`
	Updated   []string `json:"updated"`
	Removed   []string `json:"removed"`
	Unchanged int      `json:"unchanged"`
}

// SchedLogArgs are sched.log's args: the caller's (root: everyone's, or
// OwnerUid's) latest Limit runs (default 1000, at most 10000). With
// Rotate (at most 10000), the runs since the log's last rotation instead:
// a log rotated every Rotate runs, as /var/log/gsv/scheduler is (1 to
// Rotate runs; Limit is ignored).
type SchedLogArgs struct {
	OwnerUid *uint32 `json:"ownerUid,omitempty"`
	Limit    int     `json:"limit,omitempty"`
	Rotate   int     `json:"rotate,omitempty"`
}

// SchedLogResult is sched.log's result: runs, newest first.
type SchedLogResult struct {
	Runs []Run `json:"runs"`
}
