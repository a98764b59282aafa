package model

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The media of a conversation as each provider's API gets them: a user
// message with an image and a voice note, then a tool call whose result
// is an image (an fs.read of a PNG).
var (
	mediaPNG   = []byte("\x89PNG\r\n\x1a\nfake")
	mediaPNG64 = "iVBORw0KGgpmYWtl"
)

func mediaRequest() Request {
	return Request{Messages: []Message{
		{Role: User, Content: "what is this?", Media: []Media{
			{Type: "image", MimeType: "image/png", Data: mediaPNG, Filename: "cat.png", Size: 12, Path: "/var/media/alice/ab.png"},
			{Type: "audio", MimeType: "audio/ogg", Filename: "v.ogg", Size: 5, Duration: 3, Path: "/var/media/alice/cd.ogg", Transcription: "a cat"},
		}},
		{Role: Assistant, ToolCalls: []ToolCall{{ID: "c1", Name: "Read", Args: json.RawMessage(`{"path":"dog.png"}`)}}},
		{Role: Tool, ToolCallID: "c1", ToolName: "Read", Content: `{"ok":true}`, Media: []Media{
			{Type: "image", MimeType: "image/png", Data: mediaPNG, Path: "/var/media/alice/ab.png"},
		}},
		{Role: User, Content: "and a heic", Media: []Media{
			{Type: "image", MimeType: "image/heic", Data: []byte("x"), Size: 1, Path: "/var/media/alice/ef.bin"},
			{Type: "document", MimeType: "application/pdf", URL: "https://example.com/a.pdf"},
		}},
	}}
}

// sameJSON fails unless got (decoded JSON) is want's JSON.
func sameJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s:\ngot  %s\nwant %s", what, gb, wb)
	}
}

func TestOpenAIMedia(t *testing.T) {
	f := newFakeServer(t, "/chat/completions", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w, oaChunk(oaDelta(`{"role":"assistant","content":"ok"}`, "stop"), ""), "[DONE]")
	})
	p, err := New(Config{Provider: "openai", BaseURL: f.URL, APIKey: "sk-test", Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), mediaRequest(), nil); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "messages", f.body(0)["messages"], `[
	 {"role":"user","content":[
	   {"type":"text","text":"what is this?\n[audio: v.ogg (audio/ogg, 3 s, 5 bytes) at /var/media/alice/cd.ogg; transcription: \"a cat\"]"},
	   {"type":"image_url","image_url":{"url":"data:image/png;base64,`+mediaPNG64+`"}}]},
	 {"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"dog.png\"}"}}]},
	 {"role":"tool","tool_call_id":"c1","content":"{\"ok\":true}"},
	 {"role":"user","content":[
	   {"type":"text","text":"The image of tool call c1 (Read):"},
	   {"type":"image_url","image_url":{"url":"data:image/png;base64,`+mediaPNG64+`"}}]},
	 {"role":"user","content":"and a heic\n[image (image/heic, 1 bytes) at /var/media/alice/ef.bin]\n[document (application/pdf) at \"https://example.com/a.pdf\" (not fetched)]"}
	]`)
}

func TestAnthropicMedia(t *testing.T) {
	f := newFakeServer(t, "/v1/messages", func(f *fakeServer, w http.ResponseWriter, r *http.Request) {
		sse(w, anTextStream("end_turn", "ok")...)
	})
	p, err := New(Config{Provider: "anthropic", BaseURL: f.URL, APIKey: "sk-ant-test", Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(context.Background(), mediaRequest(), nil); err != nil {
		t.Fatal(err)
	}
	image := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + mediaPNG64 + `"}}`
	sameJSON(t, "messages", f.body(0)["messages"], `[
	 {"role":"user","content":[
	   {"type":"text","text":"what is this?\n[audio: v.ogg (audio/ogg, 3 s, 5 bytes) at /var/media/alice/cd.ogg; transcription: \"a cat\"]"},
	   `+image+`]},
	 {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"Read","input":{"path":"dog.png"}}]},
	 {"role":"user","content":[
	   {"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"{\"ok\":true}"},`+image+`]},
	   {"type":"text","text":"and a heic\n[image (image/heic, 1 bytes) at /var/media/alice/ef.bin]\n[document (application/pdf) at \"https://example.com/a.pdf\" (not fetched)]"}]}
	]`)
}

func TestOfflineMedia(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want []string
	}{
		{"images of the message and a tool result", Request{Messages: mediaRequest().Messages[:3]},
			[]string{"You said: what is this?\n[audio: v.ogg", "[offline model: I saw 2 image(s): image/png, image/png]"}},
		{"no image it can see", Request{Messages: mediaRequest().Messages[3:]},
			[]string{"[image (image/heic, 1 bytes)", "(not fetched)]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Offline{}.Complete(context.Background(), tt.req, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(resp.Text, w) {
					t.Errorf("%q lacks %q", resp.Text, w)
				}
			}
			if tt.name == "no image it can see" && strings.Contains(resp.Text, "I saw") {
				t.Errorf("%q counts an image", resp.Text)
			}
		})
	}
}
