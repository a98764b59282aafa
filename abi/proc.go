package abi

// The proc domain: agent processes and their conversations (seed 003,
// proc.*). The proc room serves these; the scheduler and the CLI call
// them with these types.

// PidArgs names a process: the args of proc.status, proc.abort,
// proc.kill's plain form and others.
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
