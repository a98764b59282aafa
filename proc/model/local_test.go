package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// collect returns a delta func and the pieces it received.
func collect() (func(string), *[]string) {
	var mu sync.Mutex
	pieces := &[]string{}
	return func(s string) {
		mu.Lock()
		*pieces = append(*pieces, s)
		mu.Unlock()
	}, pieces
}

func userReq(msgs ...string) Request {
	var r Request
	for i, m := range msgs {
		role := User
		if i%2 == 1 {
			role = Assistant
		}
		r.Messages = append(r.Messages, Message{Role: role, Content: m})
	}
	return r
}

func TestNew(t *testing.T) {
	tests := []struct {
		cfg      Config
		name     string
		errWants []string
	}{
		{cfg: Config{}, name: "offline"},
		{cfg: Config{Provider: "offline"}, name: "offline"},
		{cfg: Config{Provider: "scripted", Script: "~/hello.jsonl", ScriptData: mustRead(t, "testdata/hello.jsonl")}, name: "scripted"},
		{cfg: Config{Provider: "scripted", ScriptData: []byte{}}, name: "scripted"},
		{cfg: Config{Provider: "openai", Model: "m", APIKey: "k"}, name: "openai"},
		{cfg: Config{Provider: "anthropic", Model: "m", APIKey: "k"}, name: "anthropic"},
		{cfg: Config{Provider: "gemini"}, errWants: []string{`"gemini"`, "offline", "scripted", "openai", "anthropic"}},
		{cfg: Config{Provider: "scripted"}, errWants: []string{"needs a script"}},
		// New never opens a file: the path only names the script.
		{cfg: Config{Provider: "scripted", Script: "testdata/hello.jsonl"}, errWants: []string{"needs a script"}},
		{cfg: Config{Provider: "scripted", Script: "~/bad.jsonl", ScriptData: []byte("{bad\n")}, errWants: []string{"line 1", "~/bad.jsonl"}},
	}
	for _, tt := range tests {
		p, err := New(tt.cfg)
		if tt.errWants != nil {
			if err == nil {
				t.Errorf("New(%+v) = %v, want error", tt.cfg, p.Name())
				continue
			}
			for _, w := range tt.errWants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New(%+v) error %q lacks %q", tt.cfg, err, w)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%+v): %v", tt.cfg, err)
			continue
		}
		if p.Name() != tt.name {
			t.Errorf("New(%+v).Name() = %q, want %q", tt.cfg, p.Name(), tt.name)
		}
	}
}

func TestNewTimeoutAppliesToScripted(t *testing.T) {
	p, err := New(Config{Provider: "scripted", ScriptData: mustRead(t, "testdata/errors.jsonl"), Timeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The first turn is delayed 50ms: the 10ms timeout cuts it short.
	_, err = p.Complete(context.Background(), userReq("hi"), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "within 10ms") {
		t.Fatalf("err = %v, want deadline exceeded within 10ms", err)
	}
}

func TestOffline(t *testing.T) {
	long := strings.Repeat("é", OfflineEchoLimit+20)
	tests := []struct {
		name string
		req  Request
		said string
	}{
		{"simple", userReq("hello there"), "hello there"},
		{"last user wins", userReq("first", "reply", "second"), "second"},
		{"assistant last", userReq("question", "answer"), "question"},
		{"no messages", Request{}, ""},
		{"truncated", userReq(long), strings.Repeat("é", OfflineEchoLimit) + "…"},
		{"exactly limit", userReq(long[:2*OfflineEchoLimit]), long[:2*OfflineEchoLimit]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			delta, pieces := collect()
			resp, err := Offline{}.Complete(context.Background(), tt.req, delta)
			if err != nil {
				t.Fatal(err)
			}
			want := OfflineNotice + " You said: " + tt.said
			if resp.Text != want {
				t.Errorf("Text = %q, want %q", resp.Text, want)
			}
			if !strings.HasPrefix(resp.Text, "[offline model: no AI provider is configured; set config/ai/provider to openai or anthropic] You said: ") {
				t.Errorf("Text %q lacks the notice", resp.Text)
			}
			if got := strings.Join(*pieces, ""); got != want {
				t.Errorf("deltas join to %q, want %q", got, want)
			}
			if len(*pieces) < 2 {
				t.Errorf("got %d deltas, want a few", len(*pieces))
			}
			if len(resp.ToolCalls) != 0 || resp.StopReason != "end_turn" {
				t.Errorf("resp = %+v, want no tool calls, end_turn", resp)
			}
		})
	}
	// Deterministic, works with a nil delta, honours a dead ctx.
	a, _ := Offline{}.Complete(context.Background(), userReq("x"), nil)
	b, _ := Offline{}.Complete(context.Background(), userReq("x"), nil)
	if a.Text != b.Text {
		t.Error("offline replies differ")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (Offline{}).Complete(ctx, userReq("x"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: err = %v", err)
	}
}

func BenchmarkOffline(b *testing.B) {
	req := userReq("please summarise the file /home/user/notes.txt for me")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Offline{}).Complete(context.Background(), req, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}
}

func mustParse(t *testing.T, script string) *Scripted {
	t.Helper()
	s, err := ParseScript([]byte(script))
	if err != nil {
		t.Fatalf("ParseScript: %v", err)
	}
	return s
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		script string
		want   string
	}{
		{`{"text":"a"}` + "\n" + `{"text":`, "line 2"},
		{`{"txt":"typo"}`, `unknown field "txt"`},
		{`{"text":"a"} {"text":"b"}`, "more than one"},
		{`{"delayMs":-1}`, "negative delayMs"},
		{`{"tools":[{"args":{}}]}`, "no name"},
		{`{"tools":[{"name":"Read","args":[1]}]}`, "JSON object"},
		{"# comment\n\n" + `[1]`, "line 3"},
	}
	for _, tt := range tests {
		_, err := ParseScript([]byte(tt.script))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseScript(%q) err = %v, want it to contain %q", tt.script, err, tt.want)
		}
	}
	s := mustParse(t, "# only comments\n\n   \n#x\n")
	if s.Remaining() != 0 {
		t.Errorf("Remaining = %d, want 0", s.Remaining())
	}
}

func TestScriptedTurns(t *testing.T) {
	type step struct {
		user      string
		text      string
		deltas    []string
		tools     []ToolCall
		stop      string
		errWant   string
		remaining int
	}
	tests := []struct {
		name  string
		file  string
		steps []step
	}{
		{"hello", "testdata/hello.jsonl", []step{
			{user: "hello model", text: "Hello from the scripted model.", deltas: []string{"Hello ", "from ", "the ", "scripted ", "model."}, stop: "end_turn"},
			{user: "more?", text: ScriptExhausted, deltas: []string{ScriptExhausted}, stop: "end_turn"},
			{user: "again", text: ScriptExhausted, deltas: []string{ScriptExhausted}, stop: "end_turn"},
		}},
		{"expectUser mismatch", "testdata/hello.jsonl", []step{
			{user: "goodbye", errWant: `expected the last user message to contain "hello", got "goodbye"`},
			{user: "hello", text: ScriptExhausted, deltas: []string{ScriptExhausted}, stop: "end_turn"},
		}},
		{"tools", "testdata/tools.jsonl", []step{
			{user: "what does /etc/motd say?", text: "Let me look at that file.", deltas: []string{"Let ", "me ", "look ", "at ", "that ", "file."},
				tools: []ToolCall{{ID: "call_1", Name: "Read", Args: json.RawMessage(`{"path":"/etc/motd"}`)}}, stop: "tool_use", remaining: 2},
			{user: "[Process Event]: tool done", tools: []ToolCall{
				{ID: "call_2", Name: "Read", Args: json.RawMessage(`{"path":"/a"}`)},
				{ID: "call_3", Name: "List", Args: json.RawMessage(`{}`)},
			}, stop: "tool_use", remaining: 1},
			{user: "ok", text: "The message of the day says hello.", deltas: []string{"The ", "message ", "of ", "the ", "day ", "says ", "hello."}, stop: "end_turn"},
		}},
		{"errors", "testdata/errors.jsonl", []step{
			{user: "a", text: "slow reply", deltas: []string{"slow ", "reply"}, stop: "end_turn", remaining: 2},
			{user: "b", errWant: "provider overloaded (scripted)", remaining: 1},
			{user: "c", text: "recovered", deltas: []string{"recovered"}, stop: "end_turn"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewScripted(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				delta, pieces := collect()
				resp, err := s.Complete(context.Background(), userReq(st.user), delta)
				if st.errWant != "" {
					if err == nil || !strings.Contains(err.Error(), st.errWant) {
						t.Fatalf("step %d: err = %v, want %q", i, err, st.errWant)
					}
				} else if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if resp.Text != st.text || resp.StopReason != st.stop {
					t.Errorf("step %d: text %q stop %q, want %q %q", i, resp.Text, resp.StopReason, st.text, st.stop)
				}
				if fmt.Sprint(*pieces) != fmt.Sprint(st.deltas) && !(len(*pieces) == 0 && len(st.deltas) == 0) {
					t.Errorf("step %d: deltas %q, want %q", i, *pieces, st.deltas)
				}
				gotTools, _ := json.Marshal(resp.ToolCalls)
				wantTools, _ := json.Marshal(st.tools)
				if string(gotTools) != string(wantTools) {
					t.Errorf("step %d: tools %s, want %s", i, gotTools, wantTools)
				}
				if s.Remaining() != st.remaining {
					t.Errorf("step %d: Remaining = %d, want %d", i, s.Remaining(), st.remaining)
				}
			}
			if got := len(s.Requests()); got != len(tt.steps) {
				t.Errorf("Requests() has %d, want %d", got, len(tt.steps))
			}
		})
	}
}

func TestScriptedExpectUserNoUserMessage(t *testing.T) {
	s := mustParse(t, `{"text":"x","expectUser":"hi"}`)
	_, err := s.Complete(context.Background(), Request{}, nil)
	if err == nil || !strings.Contains(err.Error(), "no user message") {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptedDelayHonoursContext(t *testing.T) {
	s := mustParse(t, `{"text":"late","delayMs":600000}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Complete(ctx, userReq("x"), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > time.Minute { // the delay is 10 min
		t.Errorf("took %v", d)
	}
}

func TestScriptedConcurrent(t *testing.T) {
	const turns, callers = 40, 60
	var b strings.Builder
	for i := range turns {
		fmt.Fprintf(&b, `{"text":"turn %d","tools":[{"name":"T","args":{"n":%d}}]}`+"\n", i, i)
	}
	s := mustParse(t, b.String())
	var mu sync.Mutex
	texts := map[string]int{}
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			resp, err := s.Complete(context.Background(), userReq("go"), func(string) {})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			texts[resp.Text]++
			for _, tc := range resp.ToolCalls {
				if ids[tc.ID] {
					t.Errorf("duplicate tool call id %s", tc.ID)
				}
				ids[tc.ID] = true
			}
		})
	}
	wg.Wait()
	for i := range turns {
		if n := texts[fmt.Sprintf("turn %d", i)]; n != 1 {
			t.Errorf("turn %d replayed %d times", i, n)
		}
	}
	if n := texts[ScriptExhausted]; n != callers-turns {
		t.Errorf("%d exhausted replies, want %d", n, callers-turns)
	}
	if len(ids) != turns {
		t.Errorf("%d distinct tool ids, want %d", len(ids), turns)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A script is a user's file parsed by the daemon: any bytes give a
// provider or an error, never a panic, and a parsed script replays.
func FuzzParseScript(f *testing.F) {
	for _, name := range []string{"testdata/hello.jsonl", "testdata/tools.jsonl", "testdata/errors.jsonl"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("# c\n\n{\"text\":\"a\"}\n{\"tools\":[{\"name\":\"x\",\"args\":[]}]}\n"))
	f.Add([]byte("{\"delayMs\":-1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScript(data)
		if err != nil {
			return
		}
		for i := 0; i < s.Remaining() && i < 4; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			s.Complete(ctx, userReq("x"), nil)
			cancel()
		}
	})
}
