package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The proc domain: agent processes and their conversations (seed 003,
// proc.*). The proc room serves these; the scheduler and the CLI call
// them with these types.

// PidArgs names a process (empty Pid: the caller's init process): the
// args of proc.status, proc.abort, proc.reset and others.
type PidArgs struct {
	Pid string `json:"pid"`
}

// SpawnArgs are proc.spawn's args.
type SpawnArgs struct {
	Profile   string `json:"profile"`
	Label     string `json:"label,omitempty"`
	Prompt    string `json:"prompt,omitempty"`
	ParentPid string `json:"parentPid,omitempty"`
	// Workspace is the seed's ProcWorkspaceSpec (WorkspaceSpec.Check):
	// none and inherit are built, new and attach are a 501.
	Workspace *WorkspaceSpec `json:"workspace,omitempty"`
	// Assignment is the seed's ProcSpawnAssignment (Assignment.Check).
	Assignment *Assignment `json:"assignment,omitempty"`
	// Mounts are the seed's ProcSpawnMountSpec list (package sources
	// and repositories): any mount is a 501 (CheckSpawnMounts).
	Mounts []json.RawMessage `json:"mounts,omitempty"`
	// Budget, Supervise and GraceMs (ours) are the process's run
	// settings (see RunControlArgs).
	Budget    *RunBudget `json:"budget,omitempty"`
	Supervise bool       `json:"supervise,omitempty"`
	GraceMs   int64      `json:"graceMs,omitempty"`
}

// Where the seed's fields that are not built yet are planned: the text
// of their 501 (NotYet).
const (
	PlannedWorkspaces = "workspaces come with repositories; see docs/processes.md, Not built yet"
	PlannedMounts     = "package mounts come with packages; see docs/processes.md, Not built yet"
	PlannedMedia      = "media come with multimodal models; see docs/processes.md, Not built yet"
)

// WorkspaceSpec is the seed's ProcWorkspaceSpec: Mode "none" (no
// workspace), "inherit" (the parent's), "new" (Label, Kind) or "attach"
// (WorkspaceID). It decodes from that object or, as a ctl line's
// workspace=<mode> gives it, from the mode alone.
type WorkspaceSpec struct {
	Mode        string `json:"mode"`
	Label       string `json:"label,omitempty"`
	Kind        string `json:"kind,omitempty"`
	WorkspaceID string `json:"workspaceId,omitempty"`
}

// UnmarshalJSON implements json.Unmarshaler: a string is the mode; an
// object is decoded strictly (a field it does not have is an error).
func (w *WorkspaceSpec) UnmarshalJSON(b []byte) error {
	var mode string
	if json.Unmarshal(b, &mode) == nil {
		*w = WorkspaceSpec{Mode: mode}
		return nil
	}
	type plain WorkspaceSpec
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	*w = WorkspaceSpec(p)
	return nil
}

// Check checks a workspace spec: none (or empty) and inherit are built;
// new and attach are the seed's but not built yet, a 501 saying where
// they are planned; any other mode is a 400.
func (w *WorkspaceSpec) Check() error {
	if w == nil {
		return nil
	}
	switch w.Mode {
	case "", "none", "inherit":
		return nil
	case "new", "attach":
		return NotYet("workspace mode "+w.Mode, PlannedWorkspaces)
	}
	return E(Invalid, fmt.Sprintf("workspace mode %q: want none, inherit, new or attach", w.Mode))
}

// Assignment is the seed's ProcSpawnAssignment: context files that the
// process's instructions carry for its whole life (its task, as whoever
// spawned it wrote it), and AutoStart, which starts a run at the spawn
// when no prompt does.
type Assignment struct {
	ContextFiles []ContextFile `json:"contextFiles"`
	AutoStart    bool          `json:"autoStart,omitempty"`
}

// ContextFile is the seed's ProcContextFile: a named text.
type ContextFile struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Limits of an assignment's context files.
const (
	MaxContextFiles     = 32
	MaxContextFileBytes = 64 << 10
	MaxAssignmentBytes  = 256 << 10
)

// Check checks an assignment: at most MaxContextFiles files, each named
// (one line of at most 256 bytes, no control character) with a UTF-8
// text of at most MaxContextFileBytes, MaxAssignmentBytes in all; names
// are unique. A bad one is a 400 naming the file.
func (a *Assignment) Check() error {
	if a == nil {
		return nil
	}
	if len(a.ContextFiles) > MaxContextFiles {
		return E(Invalid, fmt.Sprintf("assignment: at most %d context files", MaxContextFiles))
	}
	seen, total := map[string]bool{}, 0
	for i, f := range a.ContextFiles {
		bad := func(why string) error {
			return E(Invalid, fmt.Sprintf("assignment.contextFiles[%d] %q: %s", i, f.Name, why))
		}
		switch {
		case f.Name == "" || len(f.Name) > 256:
			return bad("a name is 1 to 256 bytes")
		case !utf8.ValidString(f.Name) || strings.ContainsFunc(f.Name, unicode.IsControl):
			return bad("a name is one line of text")
		case seen[f.Name]:
			return bad("the name is given twice")
		case !utf8.ValidString(f.Text):
			return bad("the text is not UTF-8")
		case len(f.Text) > MaxContextFileBytes:
			return bad(fmt.Sprintf("the text is over %d bytes", MaxContextFileBytes))
		}
		seen[f.Name] = true
		total += len(f.Text)
	}
	if total > MaxAssignmentBytes {
		return E(Invalid, fmt.Sprintf("assignment: the context files are over %d bytes in all", MaxAssignmentBytes))
	}
	return nil
}

// CheckSpawnMounts checks the seed's spawn mounts: none is built yet, so
// any is a 501 saying where they are planned.
func CheckSpawnMounts(mounts []json.RawMessage) error {
	if len(mounts) > 0 {
		return NotYet("mounts", PlannedMounts)
	}
	return nil
}

// SpawnResult is proc.spawn's result.
type SpawnResult struct {
	Cwd         string  `json:"cwd"`
	Label       *string `json:"label,omitempty"`
	OK          bool    `json:"ok"`
	Pid         string  `json:"pid"`
	Profile     string  `json:"profile"`
	WorkspaceID *string `json:"workspaceId"`
}

// SendArgs are proc.send's args.
type SendArgs struct {
	Pid            string `json:"pid"`
	ConversationID string `json:"conversationId,omitempty"`
	Message        string `json:"message"`
	// Event (ours) delivers the message as a "[Process Event]:" system
	// message, as scheduled events arrive.
	Event bool `json:"event,omitempty"`
	// Kind (ours) is the message's event kind: "user.message" by default,
	// "process.event" for an Event; the scheduler says "schedule.tick".
	// Its source is always the caller's, never claimed.
	Kind string `json:"kind,omitempty"`
	// TraceID (ours) ties the message to the work that caused it.
	TraceID string `json:"traceId,omitempty"`
	// Media is the seed's MediaInput list: none is built yet, so any is
	// a 501 (PlannedMedia).
	Media []json.RawMessage `json:"media,omitempty"`
	// Mode (ours) says what a message does when a run is under way:
	// "queue" (the default) waits for it; "steer" enters the running run
	// at its next checkpoint; "interrupt" aborts it and runs this message
	// next.
	Mode string `json:"mode,omitempty"`
}

// Event kinds: what entered a conversation (Message.Kind).
const (
	EventUserMessage    = "user.message"
	EventProcessEvent   = "process.event"
	EventProcessMessage = "process.message"
	EventProcessCall    = "process.call"
	EventScheduleTick   = "schedule.tick"
	EventHilReply       = "hil.reply"
	EventIpcReply       = "ipc.reply"
	EventIpcTimeout     = "ipc.timeout"
	EventSignal         = "signal"
)

// EventKinds are the event kinds proc.send accepts (the others are the
// kernel's own: IPC, replies, signals).
var EventKinds = []string{EventUserMessage, EventProcessEvent, EventScheduleTick, "adapter.message", "package.event"}

// EventSource is the principal a message came from: a user (Uid,
// Username), a process (Pid and its owner's Uid), a schedule run as a
// user, the kernel. It is the caller's, as the dispatcher knows it.
type EventSource struct {
	Kind     string `json:"kind"`
	Uid      uint32 `json:"uid"`
	Username string `json:"username,omitempty"`
	Pid      string `json:"pid,omitempty"`
}

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

// SendResult is proc.send's result: the run started, or queued behind the
// conversation's running one.
type SendResult struct {
	// Coalesced says that the message, a schedule.tick, was not queued:
	// a tick of the same schedule (trace) still waits in the queue, as
	// RunID (Status "coalesced").
	Coalesced bool   `json:"coalesced,omitempty"`
	OK        bool   `json:"ok"`
	Queued    bool   `json:"queued,omitempty"`
	RunID     string `json:"runId"`
	Status    string `json:"status"`
}

// ConvArgs name a conversation of a process (empty ConversationID: the
// default one): the args of proc.conversation.get, .close, .reset and
// others.
type ConvArgs struct {
	Pid            string  `json:"pid"`
	ConversationID string  `json:"conversationId,omitempty"`
	Title          *string `json:"title,omitempty"`
	IncludeClosed  bool    `json:"includeClosed,omitempty"`
	Archive        *bool   `json:"archive,omitempty"`
}

// CompactArgs are proc.conversation.compact's args.
type CompactArgs struct {
	Pid              string  `json:"pid"`
	ConversationID   string  `json:"conversationId,omitempty"`
	Summary          *string `json:"summary,omitempty"`
	GenerateSummary  bool    `json:"generateSummary,omitempty"`
	KeepLast         *int    `json:"keepLast,omitempty"`
	ThroughMessageID *int64  `json:"throughMessageId,omitempty"`
}

// Conversation is the record of one conversation of a process.
type Conversation struct {
	ID           string  `json:"id"`
	Generation   int64   `json:"generation"`
	Status       string  `json:"status"`
	Title        *string `json:"title"`
	MessageCount int64   `json:"messageCount"`
	CreatedAt    int64   `json:"createdAt"`
	UpdatedAt    int64   `json:"updatedAt"`
	// Cap (ours) narrows the process capability of every run of the
	// conversation's generation: the narrowing of the messages (and
	// answers, directives) that entered it. A reset clears it. Absent:
	// none.
	Cap *ProcessCap `json:"processCap,omitempty"`
}

// ConversationGetResult is proc.conversation.get's result; Conversation is
// nil when the process has no conversation of that id.
type ConversationGetResult struct {
	Conversation *Conversation `json:"conversation"`
	OK           bool          `json:"ok"`
	Pid          string        `json:"pid"`
}

// ListArgs are proc.list's args: Uid (root only, for another user) lists
// that user's processes; nil lists the caller's (root: everyone's).
type ListArgs struct {
	Uid *uint32 `json:"uid,omitempty"`
}

// ProcList is proc.list's result.
type ProcList struct {
	Processes []Process `json:"processes"`
}

// Process is a process record, as proc.list shows it.
type Process struct {
	Pid         string  `json:"pid"`
	Uid         uint32  `json:"uid"`
	Profile     string  `json:"profile"`
	ParentPid   *string `json:"parentPid"`
	State       string  `json:"state"`
	Label       *string `json:"label"`
	CreatedAt   int64   `json:"createdAt"`
	WorkspaceID *string `json:"workspaceId"`
	Cwd         string  `json:"cwd"`
	// Cap (ours) narrows the process capability of everything the
	// process does, for its life: the narrowing of whoever spawned it
	// (a token's --process, a narrowed run's). Absent: none.
	Cap *ProcessCap `json:"processCap,omitempty"`
}

// ProcStatusRecord is what /proc/<pid>/status shows: the record of a process
// with its live state (idle, running or waiting), its run ("-" when idle)
// and the count of its queued messages. Unset names are "-".
type ProcStatusRecord struct {
	// Created is RFC 3339, UTC.
	Created   string `json:"created"`
	Cwd       string `json:"cwd"`
	Label     string `json:"label"`
	Parent    string `json:"parent"`
	Pid       string `json:"pid"`
	Profile   string `json:"profile"`
	Queued    int    `json:"queued"`
	Run       string `json:"run"`
	State     string `json:"state"`
	Uid       uint32 `json:"uid"`
	User      string `json:"user"`
	Workspace string `json:"workspace"`
}

// StatusResult is proc.status's result.
type StatusResult struct {
	OK     bool             `json:"ok"`
	Pid    string           `json:"pid"`
	Status ProcStatusRecord `json:"status"`
}

// Profile is the seed's process profile record.
type Profile struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
	Interactive bool   `json:"interactive"`
	Startable   bool   `json:"startable"`
	Background  bool   `json:"background"`
	SpawnMode   string `json:"spawnMode"`
}

// ProfileListArgs are proc.profile.list's args: none.
type ProfileListArgs struct{}

// ProfileList is proc.profile.list's result.
type ProfileList struct {
	Profiles []Profile `json:"profiles"`
}

// AbortResult is proc.abort's result. When a run was aborted, RunID names
// it, InterruptedToolCalls counts its tool calls ended as interrupted ("User interrupted tool execution"),
// and ContinuedQueuedRunID names the queued run that started after it.
type AbortResult struct {
	Aborted              bool   `json:"aborted"`
	ContinuedQueuedRunID string `json:"continuedQueuedRunId,omitempty"`
	InterruptedToolCalls *int   `json:"interruptedToolCalls,omitempty"`
	OK                   bool   `json:"ok"`
	Pid                  string `json:"pid"`
	RunID                string `json:"runId,omitempty"`
}

// HilArgs are proc.hil's args. Decision is approve, deny or substitute.
// Remember (with approve) allows the syscall for the rest of the
// process's life. Args (with approve) are edited args, a JSON object
// checked as the tool's own args are: the call runs with them instead of
// the args shown. Result (with substitute, required) is the text the
// model gets as the call's result, the call not run. ArgsDigest, if set,
// must be the request's argsDigest: the answer is to the args its sender
// saw.
type HilArgs struct {
	Pid        string          `json:"pid"`
	RequestID  string          `json:"requestId"`
	Decision   string          `json:"decision"`
	Remember   bool            `json:"remember,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Result     string          `json:"result,omitempty"`
	ArgsDigest string          `json:"argsDigest,omitempty"`
}

// HilResult is proc.hil's result: Resumed says the waiting run continued.
// ArgsDigest (with approve) is the digest of the args approved: the
// edited args' when Edited, else the request's.
type HilResult struct {
	ArgsDigest string `json:"argsDigest,omitempty"`
	Decision   string `json:"decision"`
	Edited     bool   `json:"edited,omitempty"`
	OK         bool   `json:"ok"`
	Pid        string `json:"pid"`
	Remembered bool   `json:"remembered,omitempty"`
	RequestID  string `json:"requestId"`
	Resumed    bool   `json:"resumed"`
}

// HilRequest is the seed's ProcHilRequest: a tool call waiting for a
// human's approval.
type HilRequest struct {
	RequestID      string          `json:"requestId"`
	RunID          string          `json:"runId"`
	ConversationID string          `json:"conversationId"`
	CallID         string          `json:"callId"`
	ToolName       string          `json:"toolName"`
	Syscall        string          `json:"syscall"`
	Args           json.RawMessage `json:"args"`
	// ArgsDigest is "sha256:" and the hex SHA-256 of Args in compact
	// JSON (keys sorted, as stored): an approval approves these args.
	ArgsDigest string `json:"argsDigest,omitempty"`
	// Target is the device the call would run on ("" for this machine),
	// from Args, so that an approval shows where.
	Target    string `json:"target,omitempty"`
	CreatedAt int64  `json:"createdAt"`
	// ExpiresAt (Unix ms; 0: never) is when the request expires: it can
	// no longer be answered and the run gets "approval expired".
	ExpiresAt int64 `json:"expiresAt,omitempty"`
}

// KillArgs are proc.kill's args: Archive (default true) archives the
// conversations before clearing them.
type KillArgs struct {
	Pid     string `json:"pid"`
	Archive *bool  `json:"archive,omitempty"`
}

// ArchiveEntry is the seed's ProcArchiveEntry: one conversation
// generation archived by a reset or kill.
type ArchiveEntry struct {
	ConversationID string `json:"conversationId"`
	Generation     int64  `json:"generation"`
	Messages       int64  `json:"messages"`
	Path           string `json:"path"`
}

// ResetResult is the result of proc.reset and proc.kill: ArchivedTo is the
// archive directory, when anything was archived.
type ResetResult struct {
	ArchivedMessages int64          `json:"archivedMessages"`
	ArchivedTo       string         `json:"archivedTo,omitempty"`
	Archives         []ArchiveEntry `json:"archives"`
	OK               bool           `json:"ok"`
	Pid              string         `json:"pid"`
}

// HistoryArgs are proc.history's args: a page by Offset and Limit
// (default and most 1000), or by AfterID (ours: the messages with a
// larger id). Generation (ours) reads a given generation; a past one is
// gone.
type HistoryArgs struct {
	Pid            string `json:"pid"`
	ConversationID string `json:"conversationId,omitempty"`
	Limit          int    `json:"limit,omitempty"`
	Offset         int    `json:"offset,omitempty"`
	AfterID        *int64 `json:"afterId,omitempty"`
	Generation     *int64 `json:"generation,omitempty"`
}

// Message is one stored message: role user, assistant, system or
// toolResult; content is JSON (a string for user and system messages).
type Message struct {
	ID        int64           `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Timestamp int64           `json:"timestamp"`
	// Kind, Source and TraceID say what entered the conversation (ours):
	// set on the messages that start or join a run (user, system), not on
	// the model's answers or tool results.
	Kind    string       `json:"kind,omitempty"`
	Source  *EventSource `json:"source,omitempty"`
	TraceID string       `json:"traceId,omitempty"`
}

// HistoryResult is proc.history's result. A page by offset (MessageCount
// set) also has Truncated and PendingHil (null when no request waits); a
// page by id has neither.
type HistoryResult struct {
	ConversationID string      `json:"conversationId"`
	MessageCount   *int64      `json:"messageCount,omitempty"`
	Messages       []Message   `json:"messages"`
	OK             bool        `json:"ok"`
	PendingHil     *HilRequest `json:"pendingHil,omitempty"`
	Pid            string      `json:"pid"`
	Truncated      *bool       `json:"truncated,omitempty"`
}

// MarshalJSON implements json.Marshaler: a page by offset always has
// pendingHil, null when no request waits; the keys stay in sorted order.
func (r HistoryResult) MarshalJSON() ([]byte, error) {
	// A nil *HilRequest held in a non-nil interface is not omitted: it
	// is written as null.
	var hil any
	if r.PendingHil != nil || r.MessageCount != nil {
		hil = r.PendingHil
	}
	return json.Marshal(struct {
		ConversationID string    `json:"conversationId"`
		MessageCount   *int64    `json:"messageCount,omitempty"`
		Messages       []Message `json:"messages"`
		OK             bool      `json:"ok"`
		PendingHil     any       `json:"pendingHil,omitempty"`
		Pid            string    `json:"pid"`
		Truncated      *bool     `json:"truncated,omitempty"`
	}{r.ConversationID, r.MessageCount, r.Messages, r.OK, hil, r.Pid, r.Truncated})
}

// ConvOpenResult is proc.conversation.open's result: Created says the
// conversation is new (else a closed one was opened again).
type ConvOpenResult struct {
	Conversation *Conversation `json:"conversation"`
	Created      bool          `json:"created"`
	OK           bool          `json:"ok"`
	Pid          string        `json:"pid"`
}

// ConvListResult is proc.conversation.list's result.
type ConvListResult struct {
	Conversations []Conversation `json:"conversations"`
	OK            bool           `json:"ok"`
	Pid           string         `json:"pid"`
}

// ConvCloseResult is proc.conversation.close's result.
type ConvCloseResult struct {
	Closed         bool   `json:"closed"`
	ConversationID string `json:"conversationId"`
	OK             bool   `json:"ok"`
	Pid            string `json:"pid"`
}

// ConvResetResult is proc.conversation.reset's result: the conversation's
// new generation, and where the old one was archived (ArchivedTo, when it
// had messages and was archived).
type ConvResetResult struct {
	ArchivedMessages int64  `json:"archivedMessages"`
	ArchivedTo       string `json:"archivedTo,omitempty"`
	ConversationID   string `json:"conversationId"`
	Generation       int64  `json:"generation"`
	OK               bool   `json:"ok"`
	Pid              string `json:"pid"`
}

// Policy is the seed's ProcConversationContextPolicy: Overflow is manual,
// auto-compact or fail.
type Policy struct {
	Overflow          string  `json:"overflow"`
	CompactAtPressure float64 `json:"compactAtPressure"`
	KeepLast          int     `json:"keepLast"`
}

// PolicyArgs are the args of proc.conversation.policy.get and .set (which
// changes the fields given).
type PolicyArgs struct {
	Pid               string   `json:"pid"`
	ConversationID    string   `json:"conversationId,omitempty"`
	Overflow          *string  `json:"overflow,omitempty"`
	CompactAtPressure *float64 `json:"compactAtPressure,omitempty"`
	KeepLast          *int     `json:"keepLast,omitempty"`
}

// PolicyResult is the result of proc.conversation.policy.get and .set.
type PolicyResult struct {
	OK     bool    `json:"ok"`
	Pid    string  `json:"pid"`
	Policy *Policy `json:"policy"`
}

// Segment is the seed's ProcConversationSegment: a range of messages
// archived by a compaction.
type Segment struct {
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

// CompactResult is proc.conversation.compact's result.
type CompactResult struct {
	ArchivedMessages int64   `json:"archivedMessages"`
	ArchivedTo       string  `json:"archivedTo"`
	ConversationID   string  `json:"conversationId"`
	OK               bool    `json:"ok"`
	Pid              string  `json:"pid"`
	Segment          Segment `json:"segment"`
	SummaryMessageID int64   `json:"summaryMessageId"`
}

// ForkArgs are proc.conversation.fork's args: exactly one of
// ThroughMessageID (branch the live history) and SegmentID (restore a
// segment, with the live suffix that followed it unless
// IncludeLiveSuffix is false).
type ForkArgs struct {
	Pid                  string  `json:"pid"`
	ConversationID       string  `json:"conversationId,omitempty"`
	SegmentID            string  `json:"segmentId,omitempty"`
	ThroughMessageID     *int64  `json:"throughMessageId,omitempty"`
	TargetConversationID string  `json:"targetConversationId,omitempty"`
	Title                *string `json:"title,omitempty"`
	IncludeLiveSuffix    *bool   `json:"includeLiveSuffix,omitempty"`
}

// ForkResult is proc.conversation.fork's result.
type ForkResult struct {
	IncludedLiveSuffix   bool          `json:"includedLiveSuffix"`
	OK                   bool          `json:"ok"`
	Pid                  string        `json:"pid"`
	RestoredMessages     int           `json:"restoredMessages"`
	Segment              *Segment      `json:"segment,omitempty"`
	SourceConversationID string        `json:"sourceConversationId"`
	TargetConversation   *Conversation `json:"targetConversation"`
	ThroughMessageID     *int64        `json:"throughMessageId,omitempty"`
}

// SegmentsResult is proc.conversation.segments's result.
type SegmentsResult struct {
	ConversationID string    `json:"conversationId"`
	OK             bool      `json:"ok"`
	Pid            string    `json:"pid"`
	Segments       []Segment `json:"segments"`
}

// SegmentReadArgs are proc.conversation.segment.read's args: a page of
// the segment's archived messages (Limit: default and most 1000).
type SegmentReadArgs struct {
	Pid            string `json:"pid"`
	ConversationID string `json:"conversationId,omitempty"`
	SegmentID      string `json:"segmentId"`
	Limit          int    `json:"limit,omitempty"`
	Offset         int    `json:"offset,omitempty"`
}

// SegmentReadResult is proc.conversation.segment.read's result.
type SegmentReadResult struct {
	ConversationID string    `json:"conversationId"`
	MessageCount   int64     `json:"messageCount"`
	Messages       []Message `json:"messages"`
	OK             bool      `json:"ok"`
	Pid            string    `json:"pid"`
	Segment        Segment   `json:"segment"`
	Truncated      bool      `json:"truncated"`
}

// CheckpointArgs are proc.checkpoint's args: without ConversationID every
// conversation is checkpointed.
type CheckpointArgs struct {
	Pid            string `json:"pid"`
	ConversationID string `json:"conversationId,omitempty"`
}

// CheckpointResult is proc.checkpoint's result: the files written.
type CheckpointResult struct {
	OK    bool     `json:"ok"`
	Paths []string `json:"paths"`
	Pid   string   `json:"pid"`
}

// SetIdentityResult is proc.setidentity's result.
type SetIdentityResult struct {
	OK bool `json:"ok"`
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
