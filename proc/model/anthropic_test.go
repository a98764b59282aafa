package model

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	anMessageStart = "message_start\n" + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"test-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_read_input_tokens":5,"output_tokens":1}}}`
	anMessageStop  = "message_stop\n" + `{"type":"message_stop"}`
)

func anDelta(index, delta string) string {
	return "content_block_delta\n" + `{"type":"content_block_delta","index":` + index + `,"delta":` + delta + `}`
}

func anTextStream(stop string, texts ...string) []string {
	ev := []string{anMessageStart,
		"content_block_start\n" + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		"ping\n" + `{"type":"ping"}`,
	}
	for _, s := range texts {
		b, _ := json.Marshal(s)
		ev = append(ev, anDelta("0", `{"type":"text_delta","text":`+string(b)+`}`))
	}
	return append(ev,
		"content_block_stop\n"+`{"type":"content_block_stop","index":0}`,
		"message_delta\n"+`{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":9}}`,
		anMessageStop)
}

func TestAnthropicText(t *testing.T) {
	f := newFakeServer(t, "/v1/messages", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w, anTextStream("end_turn", "Hel", "lo", " world")...)
	})
	p, err := New(Config{Provider: "anthropic", BaseURL: f.URL, APIKey: "sk-ant-test", Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	delta, pieces := collect()
	resp, err := p.Complete(context.Background(), userReq("say hello"), delta)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello world" || resp.StopReason != "end_turn" || len(resp.ToolCalls) != 0 {
		t.Errorf("resp = %+v", resp)
	}
	if resp.Usage != (Usage{InputTokens: 30, OutputTokens: 9}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if got := strings.Join(*pieces, "|"); got != "Hel|lo| world" {
		t.Errorf("deltas = %q", got)
	}
	body := f.body(0)
	checkJSON(t, "body", body, "test-model", "model")
	checkJSON(t, "body", body, true, "stream")
	checkJSON(t, "body", body, DefaultAnthropicMaxTokens, "max_tokens")
	checkJSON(t, "body", body, nil, "system")
	checkJSON(t, "body", body, nil, "tools")
	checkJSON(t, "body", body, "user", "messages", 0, "role")
	checkJSON(t, "body", body, "text", "messages", 0, "content", 0, "type")
	checkJSON(t, "body", body, "say hello", "messages", 0, "content", 0, "text")
	if got := f.headers[0].Get("X-Api-Key"); got != "sk-ant-test" {
		t.Errorf("X-Api-Key = %q", got)
	}
	if got := f.headers[0].Get("Anthropic-Version"); got == "" {
		t.Error("no anthropic-version header")
	}
}

func TestAnthropicToolUse(t *testing.T) {
	f := newFakeServer(t, "/v1/messages", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w,
			anMessageStart,
			"content_block_start\n"+`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			anDelta("0", `{"type":"text_delta","text":"Let me "}`),
			anDelta("0", `{"type":"text_delta","text":"check."}`),
			"content_block_stop\n"+`{"type":"content_block_stop","index":0}`,
			"content_block_start\n"+`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"Read","input":{}}}`,
			anDelta("1", `{"type":"input_json_delta","partial_json":""}`),
			anDelta("1", `{"type":"input_json_delta","partial_json":"{\"pa"}`),
			anDelta("1", `{"type":"input_json_delta","partial_json":"th\":\"/etc"}`),
			anDelta("1", `{"type":"input_json_delta","partial_json":"/motd\"}"}`),
			"content_block_stop\n"+`{"type":"content_block_stop","index":1}`,
			"content_block_start\n"+`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"List","input":{}}}`,
			"content_block_stop\n"+`{"type":"content_block_stop","index":2}`,
			"message_delta\n"+`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`,
			anMessageStop,
		)
	})
	p := NewAnthropic(Config{BaseURL: f.URL, APIKey: "k", Model: "default-model", MaxRetries: -1})
	req := toolConversation()
	req.Model = "override-model"
	delta, pieces := collect()
	resp, err := p.Complete(context.Background(), req, delta)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Let me check." || resp.StopReason != "tool_use" || resp.Usage.OutputTokens != 42 {
		t.Errorf("resp = %+v", resp)
	}
	if got := strings.Join(*pieces, "|"); got != "Let me |check." {
		t.Errorf("deltas = %q", got)
	}
	got, _ := json.Marshal(resp.ToolCalls)
	want := `[{"id":"toolu_01","name":"Read","args":{"path":"/etc/motd"}},{"id":"toolu_02","name":"List","args":{}}]`
	if string(got) != want {
		t.Errorf("tool calls = %s, want %s", got, want)
	}

	body := f.body(0)
	checkJSON(t, "body", body, "override-model", "model")
	checkJSON(t, "body", body, 100, "max_tokens")
	checkJSON(t, "body", body, "You are a test.", "system", 0, "text")
	msgs := jsonPath(body, "messages").([]any)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3 (user, assistant, user): %v", len(msgs), msgs)
	}
	checkJSON(t, "body", body, "user", "messages", 0, "role")
	checkJSON(t, "body", body, "read /etc/motd", "messages", 0, "content", 0, "text")
	checkJSON(t, "body", body, "assistant", "messages", 1, "role")
	checkJSON(t, "body", body, "text", "messages", 1, "content", 0, "type")
	checkJSON(t, "body", body, "Reading.", "messages", 1, "content", 0, "text")
	checkJSON(t, "body", body, "tool_use", "messages", 1, "content", 1, "type")
	checkJSON(t, "body", body, "call_1", "messages", 1, "content", 1, "id")
	checkJSON(t, "body", body, "Read", "messages", 1, "content", 1, "name")
	checkJSON(t, "body", body, "/etc/motd", "messages", 1, "content", 1, "input", "path")
	// The tool result and the following event share one user turn,
	// tool_result first.
	checkJSON(t, "body", body, "user", "messages", 2, "role")
	checkJSON(t, "body", body, "tool_result", "messages", 2, "content", 0, "type")
	checkJSON(t, "body", body, "call_1", "messages", 2, "content", 0, "tool_use_id")
	checkJSON(t, "body", body, true, "messages", 2, "content", 0, "is_error")
	checkJSON(t, "body", body, "permission denied", "messages", 2, "content", 0, "content", 0, "text")
	checkJSON(t, "body", body, "text", "messages", 2, "content", 1, "type")
	checkJSON(t, "body", body, "[Process Event]: try again", "messages", 2, "content", 1, "text")
	checkJSON(t, "body", body, "Read", "tools", 0, "name")
	checkJSON(t, "body", body, "Read a file.", "tools", 0, "description")
	checkJSON(t, "body", body, "object", "tools", 0, "input_schema", "type")
	checkJSON(t, "body", body, "string", "tools", 0, "input_schema", "properties", "path", "type")
	checkJSON(t, "body", body, "[path]", "tools", 0, "input_schema", "required")
	checkJSON(t, "body", body, false, "tools", 0, "input_schema", "additionalProperties")
}

func TestAnthropicToolResultWithoutError(t *testing.T) {
	f := newFakeServer(t, "/v1/messages", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w, anTextStream("end_turn", "done")...)
	})
	p := NewAnthropic(Config{BaseURL: f.URL, APIKey: "k", Model: "m", MaxRetries: -1})
	req := Request{Messages: []Message{
		{Role: User, Content: "go"},
		{Role: Assistant, ToolCalls: []ToolCall{{ID: "a", Name: "T"}, {ID: "b", Name: "T", Args: json.RawMessage(`{"x":1}`)}}},
		{Role: Tool, ToolCallID: "a", Content: "ok"},
		{Role: Tool, ToolCallID: "b"},
	}}
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	body := f.body(0)
	checkJSON(t, "body", body, map[string]any{}, "messages", 1, "content", 0, "input")
	checkJSON(t, "body", body, 1, "messages", 1, "content", 1, "input", "x")
	msgs := jsonPath(body, "messages").([]any)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3: %v", len(msgs), msgs)
	}
	checkJSON(t, "body", body, "tool_result", "messages", 2, "content", 0, "type")
	checkJSON(t, "body", body, "ok", "messages", 2, "content", 0, "content", 0, "text")
	checkJSON(t, "body", body, nil, "messages", 2, "content", 0, "is_error")
	checkJSON(t, "body", body, "b", "messages", 2, "content", 1, "tool_use_id")
	checkJSON(t, "body", body, nil, "messages", 2, "content", 1, "content")
}

func TestAnthropicFailures(t *testing.T) {
	runFailures(t, "anthropic", "/v1/messages", []failureCase{
		{name: "http 500", handle: fail500, errHas: []string{"anthropic: ", "500", "the fake server is broken"}, calls: 1},
		{name: "http 500 retried", handle: fail500, cfg: func(c *Config) { c.MaxRetries = 1 }, errHas: []string{"anthropic: ", "500"}, calls: 2},
		{name: "malformed json", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, anMessageStart, "content_block_start\n"+`{"type":"content_block_start","index":0,"content_block":{"type":`)
		}, errHas: []string{"anthropic: ", "malformed stream event"}},
		{name: "error event", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, anMessageStart, "error\n"+`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		}, errHas: []string{"anthropic: ", "Overloaded"}},
		{name: "truncated", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, anTextStream("end_turn", "half")[:4]...)
		}, errHas: []string{"anthropic: ", "without message_stop"}},
		{name: "bad tool input", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, anMessageStart,
				"content_block_start\n"+`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"Read","input":{}}}`,
				anDelta("0", `{"type":"input_json_delta","partial_json":"{\"path\":"}`),
				"content_block_stop\n"+`{"type":"content_block_stop","index":0}`,
				"message_delta\n"+`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":1}}`,
				anMessageStop)
		}, errHas: []string{"anthropic: ", "not valid JSON"}},
		{name: "no model", handle: fail500, cfg: func(c *Config) { c.Model = "" }, errHas: []string{"anthropic: no model configured"}},
		{name: "hang cancelled", handle: hang(true), cancel: 100 * time.Millisecond, errIs: context.Canceled, maxTime: 2 * time.Second},
		{name: "hang before headers cancelled", handle: hang(false), cancel: 100 * time.Millisecond, errIs: context.Canceled, maxTime: 2 * time.Second},
		{name: "hang timeout", handle: hang(true), cfg: func(c *Config) { c.Timeout = 150 * time.Millisecond },
			errIs: context.DeadlineExceeded, errHas: []string{"anthropic: no complete reply within 150ms"}, maxTime: 2 * time.Second},
		{name: "hang before headers timeout", handle: hang(false), cfg: func(c *Config) { c.Timeout = 150 * time.Millisecond },
			errIs: context.DeadlineExceeded, errHas: []string{"anthropic: no complete reply within 150ms"}, maxTime: 2 * time.Second},
	})
}
