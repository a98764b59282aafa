package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The proc domain: agent processes and their conversations (seed 003,
// proc.*). The proc room serves these; the scheduler and the CLI call
// them with these types. This file has the processes (spawn, send,
// status, approvals, kill); conversation.go their conversations; ipc.go
// processes talking and signal watches.

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
	// none, inherit, new and attach (repo.workspace.open).
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
	// McpServers (ours) narrows which of its owner's MCP servers the
	// process sees, by name, for its life: absent (nil) all of them, an
	// empty list none. A process spawned by a process sees at most its
	// spawner's (McpAllowed).
	McpServers *[]string `json:"mcpServers,omitempty"`
}

// Where the seed's fields that are not built yet are planned: the text
// of their 501 (NotYet).
const (
	PlannedWorkspaces = "workspaces come with repositories; see docs/processes.md, Not built yet"
	PlannedMounts     = "package mounts come with packages; see docs/processes.md, Not built yet"
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
	Branch      string `json:"branch,omitempty"`
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

// Check checks a workspace spec: none (or empty), inherit, new and
// attach (with a WorkspaceID; Branch, ours, puts the process on a branch
// of its own) are the seed's modes; any other mode is a 400.
func (w *WorkspaceSpec) Check() error {
	if w == nil {
		return nil
	}
	switch w.Mode {
	case "", "none", "inherit", "new":
		return nil
	case "attach":
		if w.WorkspaceID == "" {
			return E(Invalid, "workspace mode attach: workspaceId is required")
		}
		return nil
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
	// Media is the seed's MediaInput list (CheckMedia): each item's
	// bytes are kept in the process owner's media store and the message
	// refers to them (Message.Media). Not with Mode "steer".
	Media []MediaInput `json:"media,omitempty"`
	// Mode (ours) says what a message does when a run is under way:
	// "queue" (the default) waits for it; "steer" enters the running run
	// at its next checkpoint; "interrupt" aborts it and runs this message
	// next.
	Mode string `json:"mode,omitempty"`
	// IdempotencyKey (ours), if set, makes the send happen at most once:
	// a send by the same user with the key of an earlier one (kept a
	// week) changes nothing and answers that send's run (Status
	// "duplicate"). At most 256 bytes; only with Mode "queue".
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
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

// ListArgs are proc.list's args: Uid (root only, for another user) lists
// that user's processes; nil lists the caller's (root: everyone's).
type ListArgs struct {
	Uid *uint32 `json:"uid,omitempty"`
}

// ProcListResult is proc.list's result.
type ProcListResult struct {
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
	// McpServers (ours) are the names of the owner's MCP servers the
	// process sees: absent all, an empty list none (SpawnArgs).
	McpServers *[]string `json:"mcpServers,omitempty"`
}

// McpAllowed reports whether a process narrowed to servers (nil: none
// narrows) sees the MCP server called name.
func McpAllowed(servers *[]string, name string) bool {
	return servers == nil || slices.Contains(*servers, name)
}

// McpServerList is servers as a status shows it: "*" for all (nil),
// "-" for none, else the names joined by commas.
func McpServerList(servers *[]string) string {
	switch {
	case servers == nil:
		return "*"
	case len(*servers) == 0:
		return "-"
	}
	return strings.Join(*servers, ",")
}

// NarrowMcp is what both a and b allow of the MCP servers (nil: all):
// the names in both, in a's order. The result shares no memory with
// either.
func NarrowMcp(a, b *[]string) *[]string {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		out := slices.Clone(*b)
		return &out
	case b == nil:
		out := slices.Clone(*a)
		return &out
	}
	out := []string{}
	for _, n := range *a {
		if slices.Contains(*b, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return &out
}

// ProcStatusRecord is what /proc/<pid>/status shows: the record of a process
// with its live state (idle, running or waiting), its run ("-" when idle)
// and the count of its queued messages. Unset names are "-".
type ProcStatusRecord struct {
	// Created is RFC 3339, UTC.
	Created string `json:"created"`
	Cwd     string `json:"cwd"`
	Label   string `json:"label"`
	// Mcp is the MCP servers the process sees (McpServerList).
	Mcp       string `json:"mcp"`
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

// CheckMcpServers checks the names of a SpawnArgs.McpServers list: at
// most 100, each a server's name (not empty, at most 128 bytes of UTF-8,
// no "/", ",", control or space character).
func CheckMcpServers(servers *[]string) error {
	if servers == nil {
		return nil
	}
	if len(*servers) > 100 {
		return E(Invalid, "mcpServers: at most 100 servers")
	}
	for _, n := range *servers {
		if len(n) > 128 {
			return E(Invalid, "mcpServers: a name is longer than 128 bytes")
		}
		if n == "" || !utf8.ValidString(n) || n == "." || n == ".." ||
			strings.IndexFunc(n, func(r rune) bool { return r == '/' || r == ',' || unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
			return E(Invalid, "mcpServers: "+quote(n)+" is not an MCP server's name")
		}
	}
	return nil
}

// ParseMcpServers is the list a gsv spawn --mcp or a ctl line's mcp=
// gives: names separated by commas ("" is none).
func ParseMcpServers(s string) *[]string {
	out := []string{}
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return &out
}

// MaxTraceID is the longest trace id (SendArgs.TraceID).
const MaxTraceID = 128

// CheckTraceID checks a trace id: at most MaxTraceID bytes of letters,
// digits and "-_.:/".
func CheckTraceID(t string) error {
	if len(t) > MaxTraceID {
		return E(Invalid, fmt.Sprintf("traceId is over %d bytes", MaxTraceID))
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/", r)) {
			return E(Invalid, fmt.Sprintf("traceId %q: letters, digits and -_.:/ only", t))
		}
	}
	return nil
}
