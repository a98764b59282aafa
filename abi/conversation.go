package abi

import "encoding/json"

// The proc domain, continued: a process's conversations, their history,
// context policy, compaction into segments and forks
// (proc.conversation.*, proc.history).

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
	// Media are the media the message carries, kept in the owner's
	// media store (ours: the seed's MediaInput once stored).
	Media []MediaRef `json:"media,omitempty"`
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
