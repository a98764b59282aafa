package model

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// oaChunk builds a chat.completion.chunk; choice is the JSON of choices[0]
// or "" for none (the usage chunk).
func oaChunk(choice, usage string) string {
	choices := "[]"
	if choice != "" {
		choices = "[" + choice + "]"
	}
	if usage == "" {
		usage = "null"
	}
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"test-model","choices":%s,"usage":%s}`, choices, usage)
}

func oaDelta(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return fmt.Sprintf(`{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}`, delta, f)
}

func TestOpenAIText(t *testing.T) {
	f := newFakeServer(t, "/chat/completions", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w,
			oaChunk(oaDelta(`{"role":"assistant","content":""}`, ""), ""),
			oaChunk(oaDelta(`{"content":"Hel"}`, ""), ""),
			oaChunk(oaDelta(`{"content":"lo"}`, ""), ""),
			oaChunk(oaDelta(`{"content":" world"}`, ""), ""),
			oaChunk(oaDelta(`{}`, "stop"), ""),
			oaChunk("", `{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}`),
			"[DONE]",
		)
	})
	p, err := New(Config{Provider: "openai", BaseURL: f.URL, APIKey: "sk-test", Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	delta, pieces := collect()
	resp, err := p.Complete(context.Background(), Request{System: "Be brief.", Messages: []Message{{Role: User, Content: "say hello"}}}, delta)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello world" || resp.StopReason != "end_turn" || len(resp.ToolCalls) != 0 {
		t.Errorf("resp = %+v", resp)
	}
	if resp.Usage != (Usage{InputTokens: 12, OutputTokens: 3}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if got := strings.Join(*pieces, "|"); got != "Hel|lo| world" {
		t.Errorf("deltas = %q", got)
	}
	body := f.body(0)
	checkJSON(t, "body", body, "test-model", "model")
	checkJSON(t, "body", body, true, "stream")
	checkJSON(t, "body", body, true, "stream_options", "include_usage")
	checkJSON(t, "body", body, "system", "messages", 0, "role")
	checkJSON(t, "body", body, "Be brief.", "messages", 0, "content")
	checkJSON(t, "body", body, "user", "messages", 1, "role")
	checkJSON(t, "body", body, "say hello", "messages", 1, "content")
	checkJSON(t, "body", body, nil, "tools")
	if got := f.headers[0].Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestOpenAIToolCall(t *testing.T) {
	f := newFakeServer(t, "/chat/completions", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w,
			oaChunk(oaDelta(`{"role":"assistant","content":"Let me check."}`, ""), ""),
			oaChunk(oaDelta(`{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"Read","arguments":""}}]}`, ""), ""),
			oaChunk(oaDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}`, ""), ""),
			oaChunk(oaDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"/etc"}}]}`, ""), ""),
			oaChunk(oaDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"/motd\"}"}}]}`, ""), ""),
			oaChunk(oaDelta(`{"tool_calls":[{"index":1,"id":"call_def","type":"function","function":{"name":"List","arguments":"{}"}}]}`, ""), ""),
			oaChunk(oaDelta(`{}`, "tool_calls"), ""),
			"[DONE]",
		)
	})
	p := NewOpenAI(Config{BaseURL: f.URL, APIKey: "sk-test", Model: "default-model", MaxRetries: -1})
	req := toolConversation()
	req.Model = "override-model"
	delta, pieces := collect()
	resp, err := p.Complete(context.Background(), req, delta)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Let me check." || resp.StopReason != "tool_use" {
		t.Errorf("resp = %+v", resp)
	}
	if got := strings.Join(*pieces, "|"); got != "Let me check." {
		t.Errorf("deltas = %q", got)
	}
	got, _ := json.Marshal(resp.ToolCalls)
	want := `[{"id":"call_abc","name":"Read","args":{"path":"/etc/motd"}},{"id":"call_def","name":"List","args":{}}]`
	if string(got) != want {
		t.Errorf("tool calls = %s, want %s", got, want)
	}

	body := f.body(0)
	checkJSON(t, "body", body, "override-model", "model")
	checkJSON(t, "body", body, true, "stream")
	checkJSON(t, "body", body, 100, "max_completion_tokens")
	msgs := jsonPath(body, "messages").([]any)
	if len(msgs) != 5 {
		t.Fatalf("%d messages, want 5: %v", len(msgs), msgs)
	}
	checkJSON(t, "body", body, "system", "messages", 0, "role")
	checkJSON(t, "body", body, "You are a test.", "messages", 0, "content")
	checkJSON(t, "body", body, "read /etc/motd", "messages", 1, "content")
	checkJSON(t, "body", body, "assistant", "messages", 2, "role")
	checkJSON(t, "body", body, "Reading.", "messages", 2, "content")
	checkJSON(t, "body", body, "call_1", "messages", 2, "tool_calls", 0, "id")
	checkJSON(t, "body", body, "function", "messages", 2, "tool_calls", 0, "type")
	checkJSON(t, "body", body, "Read", "messages", 2, "tool_calls", 0, "function", "name")
	checkJSON(t, "body", body, `{"path":"/etc/motd"}`, "messages", 2, "tool_calls", 0, "function", "arguments")
	checkJSON(t, "body", body, "tool", "messages", 3, "role")
	checkJSON(t, "body", body, "call_1", "messages", 3, "tool_call_id")
	checkJSON(t, "body", body, "Error: permission denied", "messages", 3, "content")
	checkJSON(t, "body", body, "user", "messages", 4, "role")
	checkJSON(t, "body", body, "[Process Event]: try again", "messages", 4, "content")
	checkJSON(t, "body", body, "function", "tools", 0, "type")
	checkJSON(t, "body", body, "Read", "tools", 0, "function", "name")
	checkJSON(t, "body", body, "Read a file.", "tools", 0, "function", "description")
	checkJSON(t, "body", body, "object", "tools", 0, "function", "parameters", "type")
	checkJSON(t, "body", body, "string", "tools", 0, "function", "parameters", "properties", "path", "type")
	checkJSON(t, "body", body, "[path]", "tools", 0, "function", "parameters", "required")
	checkJSON(t, "body", body, false, "tools", 0, "function", "parameters", "additionalProperties")
}

func TestOpenAIStopReasons(t *testing.T) {
	for finish, want := range map[string]string{"stop": "end_turn", "length": "max_tokens", "content_filter": "content_filter"} {
		f := newFakeServer(t, "/chat/completions", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, oaChunk(oaDelta(`{"content":"x"}`, finish), ""), "[DONE]")
		})
		p := NewOpenAI(Config{BaseURL: f.URL, APIKey: "k", Model: "m", MaxRetries: -1})
		resp, err := p.Complete(context.Background(), userReq("hi"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StopReason != want {
			t.Errorf("finish_reason %q → %q, want %q", finish, resp.StopReason, want)
		}
	}
}

func TestOpenAIFailures(t *testing.T) {
	runFailures(t, "openai", "/chat/completions", []failureCase{
		{name: "http 500", handle: fail500, errHas: []string{"openai: ", "500", "the fake server is broken"}, calls: 1},
		{name: "http 500 retried", handle: fail500, cfg: func(c *Config) { c.MaxRetries = 2 }, errHas: []string{"openai: ", "500"}, calls: 3},
		{name: "http 502 plain text", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}, errHas: []string{"openai: ", "502"}, calls: 1},
		{name: "malformed json", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, oaChunk(oaDelta(`{"content":"ok"}`, ""), ""), `{"id":"chatcmpl-1","choices":[{`, "[DONE]")
		}, errHas: []string{"openai: ", "malformed stream chunk"}},
		{name: "stream error event", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, `{"error":{"message":"model overloaded"}}`)
		}, errHas: []string{"openai: ", "model overloaded"}},
		{name: "truncated", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w, oaChunk(oaDelta(`{"content":"half a rep"}`, ""), ""))
		}, errHas: []string{"openai: ", "without a finish_reason"}},
		{name: "bad tool arguments", handle: func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
			sse(w,
				oaChunk(oaDelta(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"Read","arguments":"{\"path\":"}}]}`, ""), ""),
				oaChunk(oaDelta(`{}`, "tool_calls"), ""), "[DONE]")
		}, errHas: []string{"openai: ", "not valid JSON"}},
		{name: "no model", handle: fail500, cfg: func(c *Config) { c.Model = "" }, errHas: []string{"openai: no model configured"}},
		{name: "hang cancelled", handle: hang(true), cancel: 100 * time.Millisecond, errIs: context.Canceled, maxTime: 2 * time.Second},
		{name: "hang before headers cancelled", handle: hang(false), cancel: 100 * time.Millisecond, errIs: context.Canceled, maxTime: 2 * time.Second},
		{name: "hang timeout", handle: hang(true), cfg: func(c *Config) { c.Timeout = 150 * time.Millisecond },
			errIs: context.DeadlineExceeded, errHas: []string{"openai: no complete reply within 150ms"}, maxTime: 2 * time.Second},
		{name: "hang before headers timeout", handle: hang(false), cfg: func(c *Config) { c.Timeout = 150 * time.Millisecond },
			errIs: context.DeadlineExceeded, errHas: []string{"openai: no complete reply within 150ms"}, maxTime: 2 * time.Second},
	})
}

// A local OpenAI-compatible server (ollama, llama.cpp, vLLM) may need no key.
func TestOpenAINoKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	f := newFakeServer(t, "/v1/chat/completions", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w, oaChunk(oaDelta(`{"content":"local"}`, "stop"), ""), "[DONE]")
	})
	p := NewOpenAI(Config{BaseURL: f.URL + "/v1", Model: "llama", MaxRetries: -1})
	resp, err := p.Complete(context.Background(), userReq("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "local" {
		t.Errorf("Text = %q", resp.Text)
	}
	if got := f.headers[0].Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

// The daemon's environment credentials are the system's: a provider
// made without UseEnvironment never sends them, with it they fill in a
// missing key.
func TestEnvironmentCredentials(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-env-openai")
	t.Setenv("ANTHROPIC_API_KEY", "sk-env-anthropic")
	oa := newFakeServer(t, "/v1/chat/completions", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w, oaChunk(oaDelta(`{"content":"ok"}`, "stop"), ""), "[DONE]")
	})
	an := newFakeServer(t, "/v1/messages", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w, anTextStream("end_turn", "ok")...)
	})
	tests := []struct {
		name   string
		cfg    Config
		f      *fakeServer
		header string
		want   string
	}{
		{"openai no env", Config{Provider: "openai", BaseURL: oa.URL + "/v1"}, oa, "Authorization", ""},
		{"openai env", Config{Provider: "openai", BaseURL: oa.URL + "/v1", UseEnvironment: true}, oa, "Authorization", "Bearer sk-env-openai"},
		{"openai own key", Config{Provider: "openai", BaseURL: oa.URL + "/v1", APIKey: "sk-own"}, oa, "Authorization", "Bearer sk-own"},
		{"anthropic no env", Config{Provider: "anthropic", BaseURL: an.URL}, an, "X-Api-Key", ""},
		{"anthropic env", Config{Provider: "anthropic", BaseURL: an.URL, UseEnvironment: true}, an, "X-Api-Key", "sk-env-anthropic"},
		{"anthropic own key", Config{Provider: "anthropic", BaseURL: an.URL, APIKey: "sk-own"}, an, "X-Api-Key", "sk-own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Model, tt.cfg.MaxRetries = "m", -1
			p, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			n := len(tt.f.headers)
			if _, err := p.Complete(context.Background(), userReq("hi"), nil); err != nil && tt.want != "" {
				t.Fatal(err)
			}
			tt.f.mu.Lock()
			defer tt.f.mu.Unlock()
			if len(tt.f.headers) != n+1 {
				t.Fatalf("%d requests, want 1", len(tt.f.headers)-n)
			}
			if got := tt.f.headers[n].Get(tt.header); got != tt.want {
				t.Errorf("%s = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}
