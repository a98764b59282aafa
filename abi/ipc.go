package abi

import "encoding/json"

// The proc domain, continued: processes talking (proc.ipc.*: mail,
// calls, delegation) and signal watches (signal.*); docs/ipc.md.

// IpcSendArgs are proc.ipc.send's args: the target process, its
// conversation, the message and the sender's metadata (a JSON object).
// SourcePid (ours) names the sending process when the caller is its
// owner rather than the process itself (a line of its ctl file).
type IpcSendArgs struct {
	Pid            string          `json:"pid"`
	ConversationID string          `json:"conversationId,omitempty"`
	Message        string          `json:"message"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	SourcePid      string          `json:"sourcePid,omitempty"`
}

// IpcSendResult is proc.ipc.send's (and proc.ipc.deliver's) result: the
// run the message started on the target, or queued behind its running
// one.
type IpcSendResult struct {
	OK             bool   `json:"ok"`
	Status         string `json:"status"`
	Pid            string `json:"pid"`
	SourcePid      string `json:"sourcePid"`
	ConversationID string `json:"conversationId"`
	RunID          string `json:"runId"`
	Queued         bool   `json:"queued,omitempty"`
}

// IpcCallArgs are proc.ipc.call's args: a send with a deadline
// (TimeoutMs, 60 s by default, 1 s to 1 h).
type IpcCallArgs struct {
	IpcSendArgs
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
}

// IpcCallResult is proc.ipc.call's result, at acceptance: the call's id
// and deadline; the answer comes later to the source as an ipc.reply (or
// ipc.timeout) event.
type IpcCallResult struct {
	OK             bool   `json:"ok"`
	Status         string `json:"status"`
	CallID         string `json:"callId"`
	Pid            string `json:"pid"`
	SourcePid      string `json:"sourcePid"`
	ConversationID string `json:"conversationId"`
	RunID          string `json:"runId"`
	DeadlineAt     int64  `json:"deadlineAt"`
	Queued         bool   `json:"queued,omitempty"`
}

// IpcDelegateArgs are proc.ipc.delegate's args (ours): a task for a
// worker, a new process of Profile (default "task") labelled Label,
// whose parent is the source, or the existing worker Pid; the answer
// comes back as proc.ipc.call's does, within TimeoutMs (5 min by
// default, 1 s to 1 h).
type IpcDelegateArgs struct {
	Task      string `json:"task"`
	Profile   string `json:"profile,omitempty"`
	Label     string `json:"label,omitempty"`
	Pid       string `json:"pid,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	SourcePid string `json:"sourcePid,omitempty"`
}

// IpcDelegateResult is proc.ipc.delegate's result: the worker and the
// call that waits for its answer.
type IpcDelegateResult struct {
	IpcCallResult
	WorkerPid string `json:"workerPid"`
	Spawned   bool   `json:"spawned"`
}

// IpcCallRef is the call part of proc.ipc.deliver's args.
type IpcCallRef struct {
	CallID     string `json:"callId"`
	ReplyToPid string `json:"replyToPid"`
	DeadlineAt int64  `json:"deadlineAt"`
}

// IpcDeliverArgs are proc.ipc.deliver's args (kernel-only): the
// validated envelope the kernel delivers into the target conversation.
type IpcDeliverArgs struct {
	Pid            string          `json:"pid"`
	SourcePid      string          `json:"sourcePid"`
	Source         ProcessIdentity `json:"source"`
	ConversationID string          `json:"conversationId,omitempty"`
	Message        string          `json:"message"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	SentAt         int64           `json:"sentAt"`
	Call           *IpcCallRef     `json:"call,omitempty"`
	TraceID        string          `json:"traceId,omitempty"`
	// RunID (ours) is the id the target's run gets: a call records the
	// run it waits for before the delivery.
	RunID string `json:"runId,omitempty"`
	// SourceLabel (ours) is the source process's label, for the envelope.
	SourceLabel string `json:"sourceLabel,omitempty"`
	// Process (ours) is the narrowing of the process capability the
	// sender acted under (its token's, or its run's): the message
	// carries it into the target's conversation. nil narrows nothing.
	Process *ProcessCap `json:"process,omitempty"`
}

// IpcCall is one call of a process, as /proc/<pid>/ipc shows it: its
// direction ("out": the process called; "in": it was called), the other
// process, its deadline and its state (sending while its request is
// delivered, pending, replied, timed_out, dropped, or abandoned: the
// daemon stopped before the request was delivered).
type IpcCall struct {
	CallID     string `json:"callId"`
	Direction  string `json:"direction"`
	SourcePid  string `json:"sourcePid"`
	TargetPid  string `json:"targetPid"`
	TargetRun  string `json:"targetRunId,omitempty"`
	DeadlineAt int64  `json:"deadlineAt"`
	State      string `json:"state"`
	CreatedAt  int64  `json:"createdAt"`
	FinishedAt *int64 `json:"finishedAt,omitempty"`
	// Reason says what a state means when it needs telling ("abandoned":
	// the daemon stopped before the request was delivered).
	Reason string `json:"reason,omitempty"`
}

// IpcListResult is proc.ipc.list's result (ours): the process's calls,
// newest first.
type IpcListResult struct {
	Calls []IpcCall `json:"calls"`
}

// WatchArgs are signal.watch's args: the signal's name, the process whose
// signals to watch (required of a process, never itself), a key that
// makes the watch an upsert, state given back with each delivery, once
// (default true) and the TTL (24 h by default, 1 s to 30 d).
// WatcherPid (ours) names the watching process when the caller is its
// owner (a line of its ctl file).
type WatchArgs struct {
	Signal     string          `json:"signal"`
	ProcessID  string          `json:"processId,omitempty"`
	Key        string          `json:"key,omitempty"`
	State      json.RawMessage `json:"state,omitempty"`
	Once       *bool           `json:"once,omitempty"`
	TTLMs      *int64          `json:"ttlMs,omitempty"`
	WatcherPid string          `json:"watcherPid,omitempty"`
}

// WatchResult is signal.watch's result.
type WatchResult struct {
	WatchID   string `json:"watchId"`
	Created   bool   `json:"created"`
	CreatedAt int64  `json:"createdAt"`
	ExpiresAt *int64 `json:"expiresAt"`
}

// UnwatchArgs are signal.unwatch's args: one of WatchID and Key.
type UnwatchArgs struct {
	WatchID    string `json:"watchId,omitempty"`
	Key        string `json:"key,omitempty"`
	WatcherPid string `json:"watcherPid,omitempty"`
}

// UnwatchResult is signal.unwatch's result.
type UnwatchResult struct {
	Removed int `json:"removed"`
}

// Watch is a signal watch as signal.list (ours) shows it.
type Watch struct {
	WatchID    string          `json:"watchId"`
	WatcherPid string          `json:"watcherPid"`
	Signal     string          `json:"signal"`
	ProcessID  string          `json:"processId,omitempty"`
	Key        string          `json:"key,omitempty"`
	State      json.RawMessage `json:"state,omitempty"`
	Once       bool            `json:"once"`
	Status     string          `json:"status"`
	Fired      int             `json:"fired"`
	Error      string          `json:"error,omitempty"`
	CreatedAt  int64           `json:"createdAt"`
	ExpiresAt  int64           `json:"expiresAt"`
}

// WatchListArgs are signal.list's args: the watches of a process.
type WatchListArgs struct {
	Pid string `json:"pid,omitempty"`
}

// WatchListResult is signal.list's result.
type WatchListResult struct {
	Watches []Watch `json:"watches"`
}
