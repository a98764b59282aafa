package model

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// offlineTools are the tools an Offline request offers in these tests.
var offlineTools = []ToolDef{{Name: "Read"}, {Name: "Write"}, {Name: "Delete"}}

// TestOfflineUse plays a conversation as the agent loop would: each model
// call's tool calls are answered with a result, and the next call sees
// them. The use lines of the last user message are one step each; then
// the model answers with the results.
func TestOfflineUse(t *testing.T) {
	type step struct {
		tool, args string // the call the step makes; "" for a text answer
		text       string // what the text answer contains
		result     string // the result the loop gives the call
		isErr      bool
	}
	tests := []struct {
		name  string
		say   string
		tools []ToolDef
		steps []step
	}{
		{"no use line", "hello there", offlineTools, []step{
			{text: OfflineNotice + " You said: hello there"},
		}},
		{"two steps", "look:\nuse Read {\"path\":\"~/a.txt\"}\n  use write {\"path\":\"~/b\", \"content\":\"x\"}  \nthanks", offlineTools, []step{
			{tool: "Read", args: `{"path":"~/a.txt"}`, result: "     1\thello\n"},
			{tool: "Write", args: `{"path":"~/b", "content":"x"}`, result: "permission denied", isErr: true},
			{text: "You said: look:\nuse Read"},
			{text: "\nRead:      1\thello\nWrite failed: permission denied"},
		}},
		{"no args", "use Read", offlineTools, []step{
			{tool: "Read", args: `{}`, result: "missing path", isErr: true},
			{text: "\nRead failed: missing path"},
		}},
		{"args glued to the name", `use Delete{"path":"x"}`, offlineTools, []step{
			{tool: "Delete", args: `{"path":"x"}`, result: "ok"},
			{text: "\nDelete: ok"},
		}},
		{"bad json", "use Read {\"path\":", offlineTools, []step{
			{text: "Line 1 of your message: use Read: the arguments are not one JSON object"},
		}},
		{"not an object", "\nuse Read [1]", offlineTools, []step{
			{text: "Line 2 of your message: use Read: the arguments are not one JSON object"},
		}},
		{"two objects", `use Read {"a":1} {"b":2}`, offlineTools, []step{
			{text: "text after the object"},
		}},
		{"no tool", "use   ", offlineTools, []step{
			{text: "name a tool"},
		}},
		{"unknown tool", "use Fly {}", offlineTools, []step{
			{text: `no tool named "Fly" here (the tools: Read, Write, Delete)`},
		}},
		{"no tools offered", "use Read {}", nil, []step{
			{text: "You said: use Read {}"},
		}},
		{"prose", "please use the cache\nuser Read {}\nuseRead {}", offlineTools, []step{
			{text: "You said: please use the cache"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := Request{Tools: tt.tools, Messages: []Message{{Role: User, Content: "earlier"}, {Role: Assistant, Content: "ok"}, {Role: User, Content: tt.say}}}
			for i, s := range tt.steps {
				delta, pieces := collect()
				resp, err := Offline{}.Complete(context.Background(), req, delta)
				if err != nil {
					t.Fatalf("step %d: %v", i+1, err)
				}
				if got := strings.Join(*pieces, ""); got != resp.Text {
					t.Errorf("step %d: deltas %q, text %q", i+1, got, resp.Text)
				}
				if s.tool == "" {
					if len(resp.ToolCalls) != 0 || resp.StopReason != "end_turn" || !strings.Contains(resp.Text, s.text) {
						t.Fatalf("step %d: got %+v, want a text answer containing %q", i+1, resp, s.text)
					}
					continue
				}
				if len(resp.ToolCalls) != 1 || resp.StopReason != "tool_use" {
					t.Fatalf("step %d: got %+v, want one call of %s", i+1, resp, s.tool)
				}
				c := resp.ToolCalls[0]
				if c.Name != s.tool || string(c.Args) != s.args || !json.Valid(c.Args) {
					t.Fatalf("step %d: call %s %s, want %s %s", i+1, c.Name, c.Args, s.tool, s.args)
				}
				req.Messages = append(req.Messages,
					Message{Role: Assistant, Content: resp.Text, ToolCalls: resp.ToolCalls},
					Message{Role: Tool, Content: s.result, ToolCallID: c.ID, ToolName: c.Name, IsError: s.isErr})
			}
		})
	}
}

// A message that arrives mid-run (a steering message, an injected event)
// is the new last message: its use lines are played, or it is answered.
func TestOfflineUseNewMessage(t *testing.T) {
	req := Request{Tools: offlineTools, Messages: []Message{
		{Role: User, Content: "use Read {\"path\":\"a\"}\nuse Read {\"path\":\"b\"}"},
		{Role: Assistant, ToolCalls: []ToolCall{{ID: "offline_1", Name: "Read", Args: json.RawMessage(`{"path":"a"}`)}}},
		{Role: Tool, Content: "A", ToolCallID: "offline_1", ToolName: "Read"},
		{Role: User, Content: "[Process Event]: stop reading"},
	}}
	resp, err := Offline{}.Complete(context.Background(), req, nil)
	if err != nil || len(resp.ToolCalls) != 0 || !strings.HasSuffix(resp.Text, "You said: [Process Event]: stop reading") {
		t.Fatalf("got %+v, %v: want an answer to the event", resp, err)
	}
	req.Messages[3].Content = "use Delete {\"path\":\"c\"}"
	resp, err = Offline{}.Complete(context.Background(), req, nil)
	if err != nil || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "Delete" || resp.ToolCalls[0].ID != "offline_1" {
		t.Fatalf("got %+v, %v: want the new message's Delete", resp, err)
	}
}

// A message is a user's text the daemon parses: any text gives use lines
// that are either errors or a named tool with one JSON object, never a
// panic, and the offline model answers any conversation.
func FuzzParseUse(f *testing.F) {
	for _, s := range []string{"use Read {\"path\":\"x\"}", "use", "use \t", "use Read{}", "use Read {} {}",
		"use Read [1]", "use Read null", "a\nuse Write {\"path\":\"p\",\"content\":\"c\"}\r\nuse Delete", "useless", "use é {\"\\u0000\":1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		lines := strings.Count(text, "\n") + 1
		for _, u := range ParseUse(text) {
			if u.Line < 1 || u.Line > lines {
				t.Fatalf("line %d of %d", u.Line, lines)
			}
			if u.Err != nil {
				if u.Tool != "" || u.Args != nil {
					t.Fatalf("%+v: an error with a call", u)
				}
				continue
			}
			var m map[string]any
			if u.Tool == "" || strings.ContainsAny(u.Tool, " \t{") || json.Unmarshal(u.Args, &m) != nil || m == nil {
				t.Fatalf("%+v: not a tool and an object", u)
			}
		}
		req := Request{Tools: offlineTools, Messages: []Message{{Role: User, Content: text}}}
		for range 4 {
			resp, err := Offline{}.Complete(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) == 0 {
				break
			}
			c := resp.ToolCalls[0]
			req.Messages = append(req.Messages, Message{Role: Assistant, ToolCalls: resp.ToolCalls}, Message{Role: Tool, Content: "r", ToolCallID: c.ID, ToolName: c.Name})
		}
	})
}
