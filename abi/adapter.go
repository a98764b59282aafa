package abi

// The adapter domain: chat platforms reaching agents (seed 003 adapter.*,
// sys.link*; seed 004, identity links and surface routes). The adapters
// room serves these; the bridges (gsvfs adapter KIND) and the CLI call
// them with these types.

// MediaInput is the seed's MediaInput: an image, audio, video or
// document carried with a message, as Data (base64) or at URL. MimeType
// is required; Size is in bytes, Duration in seconds.
type MediaInput struct {
	Type          string `json:"type"` // "image", "audio", "video" or "document"
	MimeType      string `json:"mimeType"`
	Data          string `json:"data,omitempty"`
	URL           string `json:"url,omitempty"`
	Filename      string `json:"filename,omitempty"`
	Size          int64  `json:"size,omitempty"`
	Duration      int64  `json:"duration,omitempty"`
	Transcription string `json:"transcription,omitempty"`
}

// AdapterSurface is where a message was said on a platform: a direct
// chat ("dm"), a group, a channel, or a thread in one (ThreadID).
type AdapterSurface struct {
	Kind     string `json:"kind"` // "dm", "group", "channel" or "thread"
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Handle   string `json:"handle,omitempty"`
	ThreadID string `json:"threadId,omitempty"`
}

// AdapterActor is who said a message, as the platform names them. It is
// a claim of the platform's: the kernel trusts only a link from it to a
// user (sys.link).
type AdapterActor struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Handle string `json:"handle,omitempty"`
}

// AdapterMessage is one message a platform delivered to an account:
// adapter.inbound's message. MessageID is the platform's id of it, the
// key of its durable receipt (a replay of the same id does nothing).
// Timestamp is Unix ms.
type AdapterMessage struct {
	MessageID    string         `json:"messageId"`
	Surface      AdapterSurface `json:"surface"`
	Actor        *AdapterActor  `json:"actor,omitempty"`
	Text         string         `json:"text"`
	Media        []MediaInput   `json:"media,omitempty"`
	ReplyToID    string         `json:"replyToId,omitempty"`
	ReplyToText  string         `json:"replyToText,omitempty"`
	Timestamp    int64          `json:"timestamp,omitempty"`
	WasMentioned bool           `json:"wasMentioned,omitempty"`
}

// AdapterAccountStatus is the seed's AdapterAccountStatus: an account's
// last known state. LastActivity is Unix ms; Extra is the kind's own
// facts (a bot's name, a server's address), as text.
type AdapterAccountStatus struct {
	AccountID     string            `json:"accountId"`
	Connected     bool              `json:"connected"`
	Authenticated bool              `json:"authenticated"`
	Mode          string            `json:"mode,omitempty"`
	LastActivity  int64             `json:"lastActivity,omitempty"`
	Error         string            `json:"error,omitempty"`
	Extra         map[string]string `json:"extra,omitempty"`
}
