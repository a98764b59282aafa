package abi

import "encoding/json"

// The content of a stored message (Message.Content) by its role: a user
// or system message's is a JSON string; an assistant's and a tool
// result's are these records.

// AssistantContent is an assistant message's content: its text and the
// tool calls it made.
type AssistantContent struct {
	Text      string     `json:"text"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
}

// ToolCall is one tool call of an assistant message: its id, the tool's
// name and the arguments the model gave (a JSON object).
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// ToolResultContent is a toolResult message's content: which call it
// answers, and the tool's output; IsError marks an output that is an
// error (a denial, an interruption, a failed call).
type ToolResultContent struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Output     string `json:"output"`
	IsError    bool   `json:"isError,omitempty"`
}
