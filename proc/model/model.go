// Package model is the agent loop's view of a language model: a Provider
// takes the conversation so far and the tools, streams text deltas, and
// returns the assistant's reply (text and tool calls). Providers: offline
// (the default, needs no key), scripted (replays testdata for tests),
// openai (any OpenAI-compatible server) and anthropic.
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Role is who said a message.
type Role string

const (
	User      Role = "user"
	Assistant Role = "assistant"
	// Tool is a tool result, answering the assistant's ToolCall ToolCallID.
	Tool Role = "tool"
)

// Message is one entry of the conversation sent to a model. System events
// reach the model as User messages starting "[Process Event]:".
type Message struct {
	Role    Role
	Content string
	// ToolCalls are the calls an Assistant message made.
	ToolCalls []ToolCall
	// ToolCallID and ToolName say which call a Tool message answers.
	ToolCallID string
	ToolName   string
	// IsError marks a Tool result that is an error ("Tool execution denied by user").
	IsError bool
	// Media are the media a User message or a Tool result carries: an
	// image with Data of one of ImageTypes reaches the model as an image,
	// anything else as its Placeholder text.
	Media []Media
}

// Media is a media item of a message: its kind ("image", "audio",
// "video", "document"), mime type and, for an image a model can take,
// its bytes; Path (where the owner's media store keeps it) or URL (a
// reference nobody fetches) and the rest describe it in text.
type Media struct {
	Type          string
	MimeType      string
	Data          []byte
	Path          string
	URL           string
	Filename      string
	Size          int64
	Duration      int64
	Transcription string
}

// ImageTypes are the image formats the providers send as images
// (OpenAI's and Anthropic's: PNG, JPEG, GIF, WebP).
var ImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// IsImage reports whether the item reaches a model as an image: an
// image whose bytes are here, of one of ImageTypes.
func (m Media) IsImage() bool {
	return m.Type == "image" && len(m.Data) > 0 && slices.Contains(ImageTypes, m.MimeType)
}

// Placeholder is the text that stands for the item where the model gets
// no image: its kind, name, mime type, size, where it is kept, and its
// transcription, if any, as
//
//	[audio: voice.ogg (audio/ogg, 3 s, 5120 bytes) at /var/media/alice/<sha256>.ogg; transcription: "..."]
func (m Media) Placeholder() string {
	var b strings.Builder
	b.WriteString("[" + m.Type)
	if m.Filename != "" {
		b.WriteString(": " + m.Filename)
	}
	b.WriteString(" (" + m.MimeType)
	if m.Duration > 0 {
		fmt.Fprintf(&b, ", %d s", m.Duration)
	}
	if m.Size > 0 {
		fmt.Fprintf(&b, ", %d bytes", m.Size)
	}
	b.WriteString(")")
	switch {
	case m.Path != "":
		b.WriteString(" at " + m.Path)
	case m.URL != "":
		b.WriteString(" at " + strconv.Quote(m.URL) + " (not fetched)")
	}
	if m.Transcription != "" {
		b.WriteString("; transcription: " + strconv.Quote(m.Transcription))
	}
	b.WriteString("]")
	return b.String()
}

// withPlaceholders is text followed by the Placeholder of each item that
// is not an image, one a line; the images are returned apart.
func withPlaceholders(text string, media []Media) (string, []Media) {
	var images []Media
	for _, m := range media {
		if m.IsImage() {
			images = append(images, m)
			continue
		}
		if text != "" {
			text += "\n"
		}
		text += m.Placeholder()
	}
	return text, images
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ToolDef describes a tool to the model.
type ToolDef struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the tool's arguments (an object).
	Schema json.RawMessage
}

// Request is one model call.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolDef
	MaxTokens int
	// Temperature, if set, is the sampling temperature (0 to 2).
	Temperature *float64
}

// Usage counts tokens, when the provider reports them.
type Usage struct {
	InputTokens  int
	OutputTokens int
	// CostUSD is the call's cost in dollars, when known (0 otherwise).
	CostUSD float64
}

// Response is the assistant's complete reply to one Request.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	StopReason string // "end_turn", "tool_use", "max_tokens", ...
	Usage      Usage
}

// Provider is a model backend. Complete calls delta with each piece of
// text as it streams (it may never call it) and returns the whole reply.
// It returns ctx.Err() promptly when ctx ends. Errors are values with
// context: a timeout, an HTTP status, a malformed reply.
type Provider interface {
	// Name is the provider's name as configured ("offline", "openai", ...).
	Name() string
	Complete(ctx context.Context, req Request, delta func(text string)) (Response, error)
}

// Config selects and configures a provider; proc makes it from the
// kernel's config (config/ai/* and users/<uid>/ai/*, see docs/processes.md).
type Config struct {
	Provider string // offline (default), scripted, openai, anthropic
	Model    string
	BaseURL  string // openai/anthropic: the server's base URL
	APIKey   string
	// UseEnvironment lets the SDKs fill in what Config leaves empty from
	// the daemon's environment and files (OPENAI_API_KEY, OPENAI_BASE_URL,
	// ANTHROPIC_API_KEY, ANTHROPIC_PROFILE, ...). Those are the system's
	// credentials: set it only for an endpoint the system configured.
	UseEnvironment bool
	// Script is where the script of the scripted provider came from (a
	// namespace path), for messages; ScriptData is its content, read by
	// the caller with the reader's permissions. New never opens a file.
	Script     string
	ScriptData []byte
	// Timeout bounds each Complete call; zero means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how often the openai and anthropic providers retry a
	// request that failed transiently (connection error, 408, 409, 429,
	// 5xx) before giving up: zero means DefaultMaxRetries, a negative
	// value means no retries at all.
	MaxRetries int
}
