package abi

import "encoding/json"

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
	// Workspace is "none" or absent (workspaces are not served yet).
	Workspace any `json:"workspace,omitempty"`
}

// SpawnResult is proc.spawn's result.
type SpawnResult struct {
	OK          bool    `json:"ok"`
	Pid         string  `json:"pid"`
	Profile     string  `json:"profile"`
	WorkspaceID *string `json:"workspaceId"`
	Cwd         string  `json:"cwd"`
	Label       *string `json:"label,omitempty"`
}

// SendArgs are proc.send's args.
type SendArgs struct {
	Pid            string `json:"pid"`
	ConversationID string `json:"conversationId,omitempty"`
	Message        string `json:"message"`
	// Event (ours) delivers the message as a "[Process Event]:" system
	// message, as scheduled events arrive.
	Event bool `json:"event,omitempty"`
}

// SendResult is proc.send's result: the run started, or queued behind the
// conversation's running one.
type SendResult struct {
	OK     bool   `json:"ok"`
	Status string `json:"status"`
	RunID  string `json:"runId"`
	Queued bool   `json:"queued,omitempty"`
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
}

// ConversationGetResult is proc.conversation.get's result; Conversation is
// nil when the process has no conversation of that id.
type ConversationGetResult struct {
	OK           bool          `json:"ok"`
	Pid          string        `json:"pid"`
	Conversation *Conversation `json:"conversation"`
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
}

// ProcStatus is what /proc/<pid>/status shows: the record of a process
// with its live state (idle, running or waiting), its run ("-" when idle)
// and the count of its queued messages. Unset names are "-".
type ProcStatus struct {
	Pid       string `json:"pid"`
	Uid       uint32 `json:"uid"`
	User      string `json:"user"`
	Profile   string `json:"profile"`
	Label     string `json:"label"`
	Parent    string `json:"parent"`
	State     string `json:"state"`
	Run       string `json:"run"`
	Queued    int    `json:"queued"`
	Cwd       string `json:"cwd"`
	Workspace string `json:"workspace"`
	// Created is RFC 3339, UTC.
	Created string `json:"created"`
}

// StatusResult is proc.status's result.
type StatusResult struct {
	OK     bool       `json:"ok"`
	Pid    string     `json:"pid"`
	Status ProcStatus `json:"status"`
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

// ProfileList is proc.profile.list's result.
type ProfileList struct {
	Profiles []Profile `json:"profiles"`
}

// AbortResult is proc.abort's result. When a run was aborted, RunID names
// it, InterruptedToolCalls counts its tool calls ended as "interrupted",
// and ContinuedQueuedRunID names the queued run that started after it.
type AbortResult struct {
	OK                   bool   `json:"ok"`
	Pid                  string `json:"pid"`
	Aborted              bool   `json:"aborted"`
	RunID                string `json:"runId,omitempty"`
	InterruptedToolCalls *int   `json:"interruptedToolCalls,omitempty"`
	ContinuedQueuedRunID string `json:"continuedQueuedRunId,omitempty"`
}

// HilArgs are proc.hil's args: Decision is approve or deny; Remember
// (with approve) allows the syscall for the rest of the process's life.
type HilArgs struct {
	Pid       string `json:"pid"`
	RequestID string `json:"requestId"`
	Decision  string `json:"decision"`
	Remember  bool   `json:"remember,omitempty"`
}

// HilResult is proc.hil's result: Resumed says the waiting run continued.
type HilResult struct {
	OK         bool   `json:"ok"`
	Pid        string `json:"pid"`
	RequestID  string `json:"requestId"`
	Decision   string `json:"decision"`
	Resumed    bool   `json:"resumed"`
	Remembered bool   `json:"remembered,omitempty"`
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
	CreatedAt      int64           `json:"createdAt"`
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
	OK               bool           `json:"ok"`
	Pid              string         `json:"pid"`
	ArchivedMessages int64          `json:"archivedMessages"`
	Archives         []ArchiveEntry `json:"archives"`
	ArchivedTo       string         `json:"archivedTo,omitempty"`
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
}

// HistoryResult is proc.history's result. A page by offset (MessageCount
// set) also has Truncated and PendingHil (null when no request waits); a
// page by id has neither.
type HistoryResult struct {
	OK             bool        `json:"ok"`
	Pid            string      `json:"pid"`
	ConversationID string      `json:"conversationId"`
	Messages       []Message   `json:"messages"`
	MessageCount   *int64      `json:"messageCount,omitempty"`
	Truncated      *bool       `json:"truncated,omitempty"`
	PendingHil     *HilRequest `json:"pendingHil,omitempty"`
}

// MarshalJSON implements json.Marshaler: a page by offset always has
// pendingHil, null when no request waits.
func (r HistoryResult) MarshalJSON() ([]byte, error) {
	type plain HistoryResult
	if r.MessageCount == nil {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		PendingHil *HilRequest `json:"pendingHil"`
	}{plain(r), r.PendingHil})
}

// ConvOpenResult is proc.conversation.open's result: Created says the
// conversation is new (else a closed one was opened again).
type ConvOpenResult struct {
	OK           bool          `json:"ok"`
	Pid          string        `json:"pid"`
	Conversation *Conversation `json:"conversation"`
	Created      bool          `json:"created"`
}

// ConvListResult is proc.conversation.list's result.
type ConvListResult struct {
	OK            bool           `json:"ok"`
	Pid           string         `json:"pid"`
	Conversations []Conversation `json:"conversations"`
}

// ConvCloseResult is proc.conversation.close's result.
type ConvCloseResult struct {
	OK             bool   `json:"ok"`
	Pid            string `json:"pid"`
	ConversationID string `json:"conversationId"`
	Closed         bool   `json:"closed"`
}

// ConvResetResult is proc.conversation.reset's result: the conversation's
// new generation, and where the old one was archived (ArchivedTo, when it
// had messages and was archived).
type ConvResetResult struct {
	OK               bool   `json:"ok"`
	Pid              string `json:"pid"`
	ConversationID   string `json:"conversationId"`
	Generation       int64  `json:"generation"`
	ArchivedMessages int64  `json:"archivedMessages"`
	ArchivedTo       string `json:"archivedTo,omitempty"`
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
	OK               bool    `json:"ok"`
	Pid              string  `json:"pid"`
	ConversationID   string  `json:"conversationId"`
	Segment          Segment `json:"segment"`
	ArchivedMessages int64   `json:"archivedMessages"`
	ArchivedTo       string  `json:"archivedTo"`
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
	OK                   bool          `json:"ok"`
	Pid                  string        `json:"pid"`
	SourceConversationID string        `json:"sourceConversationId"`
	TargetConversation   *Conversation `json:"targetConversation"`
	RestoredMessages     int           `json:"restoredMessages"`
	IncludedLiveSuffix   bool          `json:"includedLiveSuffix"`
	Segment              *Segment      `json:"segment,omitempty"`
	ThroughMessageID     *int64        `json:"throughMessageId,omitempty"`
}

// SegmentsResult is proc.conversation.segments's result.
type SegmentsResult struct {
	OK             bool      `json:"ok"`
	Pid            string    `json:"pid"`
	ConversationID string    `json:"conversationId"`
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
	OK             bool      `json:"ok"`
	Pid            string    `json:"pid"`
	ConversationID string    `json:"conversationId"`
	Segment        Segment   `json:"segment"`
	Messages       []Message `json:"messages"`
	MessageCount   int64     `json:"messageCount"`
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
	Pid   string   `json:"pid"`
	Paths []string `json:"paths"`
}

// SetIdentityResult is proc.setidentity's result.
type SetIdentityResult struct {
	OK bool `json:"ok"`
}
