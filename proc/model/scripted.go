package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ScriptExhausted is the reply of a Scripted provider whose turns are all
// used up.
const ScriptExhausted = "[script exhausted]"

// EmitMarker in a turn's Text is replaced, in each streamed piece, with
// the time the piece is emitted in µs since the Unix epoch (the stored
// reply keeps the marker).
const EmitMarker = "{emitUnixMicro}"

// ScriptTurn is one line of a script: what the model does on one
// Complete call.
type ScriptTurn struct {
	// Text is the reply, streamed in pieces split after each space; in
	// a streamed piece, EmitMarker becomes the time the piece is emitted
	// (µs since the Unix epoch).
	Text string `json:"text,omitempty"`
	// Tools become the reply's ToolCalls, with ids "call_<n>" numbered
	// from 1 across the whole script.
	Tools []ScriptTool `json:"tools,omitempty"`
	// DelayMs makes Complete wait first (returning ctx.Err() if ctx ends;
	// Release ends the wait).
	DelayMs int `json:"delayMs,omitempty"`
	// Error, if set, makes Complete fail with this message.
	Error string `json:"error,omitempty"`
	// ExpectUser, if set, makes Complete fail unless the last User
	// message contains it.
	ExpectUser string `json:"expectUser,omitempty"`
	// ExpectSystem, if set, makes Complete fail unless the system prompt
	// contains it.
	ExpectSystem string `json:"expectSystem,omitempty"`
	// Usage is what the turn reports it used; absent, a turn reports
	// its text's length in tokens (a token per 4 bytes) and no cost.
	Usage *ScriptUsage `json:"usage,omitempty"`
}

// ScriptUsage is a scripted turn's usage.
type ScriptUsage struct {
	In  int     `json:"in"`
	Out int     `json:"out"`
	USD float64 `json:"usd"`
}

// ScriptTool is one scripted tool call.
type ScriptTool struct {
	// Name is the tool's name (required).
	Name string `json:"name"`
	// Args is the call's arguments, a JSON object ({} when absent).
	Args json.RawMessage `json:"args,omitempty"`
}

// Scripted is a provider for tests that replays a script: one ScriptTurn
// per Complete call, in order. It is safe for concurrent use; each
// Complete consumes the next turn (even if it then fails; a call whose ctx
// has already ended consumes nothing). Once the turns are used up it
// replies ScriptExhausted.
type Scripted struct {
	// Timeout, if positive, bounds each Complete (New sets it from
	// Config.Timeout).
	Timeout time.Duration

	mu       sync.Mutex // guards turns, next, calls and requests
	turns    []ScriptTurn
	next     int
	calls    int // tool calls issued so far, for ids
	requests []Request
	released chan struct{} // closed by Release
}

// Release ends the delay of every turn, those waiting now and those to
// come: a test makes a turn wait (a long delayMs) for as long as it
// needs, then lets it go, where a delay just long enough would be a
// race with a loaded machine.
func (s *Scripted) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released == nil {
		s.released = make(chan struct{})
	}
	select {
	case <-s.released:
	default:
		close(s.released)
	}
}

// NewScripted reads the script at the host path path (see ParseScript),
// for tests and tools. The daemon never opens a host path for a user: proc
// reads config/ai/script from the namespace as the process's owner and
// passes its content as Config.ScriptData.
func NewScripted(path string) (*Scripted, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

// ParseScript parses a script: JSON Lines, one ScriptTurn object per line;
// blank lines and lines starting with # are skipped. Unknown fields, bad
// JSON, a tool without a name, non-object args and a negative delayMs are
// errors naming the line.
func ParseScript(data []byte) (*Scripted, error) {
	s := &Scripted{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var t ScriptTurn
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("scripted: line %d: %w", n, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("scripted: line %d: more than one JSON value", n)
		}
		if t.DelayMs < 0 {
			return nil, fmt.Errorf("scripted: line %d: negative delayMs", n)
		}
		for i, tool := range t.Tools {
			if tool.Name == "" {
				return nil, fmt.Errorf("scripted: line %d: tool %d has no name", n, i+1)
			}
			args := bytes.TrimSpace(argsJSON(tool.Args))
			if len(args) == 0 || args[0] != '{' {
				return nil, fmt.Errorf("scripted: line %d: tool %s: args must be a JSON object", n, tool.Name)
			}
		}
		s.turns = append(s.turns, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return s, nil
}

// Name returns "scripted".
func (s *Scripted) Name() string { return "scripted" }

// Remaining returns how many turns are left.
func (s *Scripted) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// Requests returns a copy of the requests Complete received, in order.
func (s *Scripted) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Complete consumes the next turn and plays it: wait DelayMs, check
// ExpectUser, fail with Error, else stream Text and return it with the
// turn's tool calls (StopReason "tool_use" if there are any, else
// "end_turn").
func (s *Scripted) Complete(ctx context.Context, req Request, delta func(string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	s.mu.Lock()
	rec := req
	rec.Messages = append([]Message(nil), req.Messages...)
	rec.Tools = append([]ToolDef(nil), req.Tools...)
	s.requests = append(s.requests, rec)
	if s.next >= len(s.turns) {
		s.mu.Unlock()
		if delta != nil {
			delta(ScriptExhausted)
		}
		return Response{Text: ScriptExhausted, StopReason: "end_turn"}, nil
	}
	turnNo := s.next + 1
	t := s.turns[s.next]
	s.next++
	firstCall := s.calls + 1
	s.calls += len(t.Tools)
	if s.released == nil {
		s.released = make(chan struct{})
	}
	released := s.released
	s.mu.Unlock()

	if t.DelayMs > 0 {
		d := time.Duration(t.DelayMs) * time.Millisecond
		timer := time.NewTimer(d)
		var deadline <-chan time.Time
		if s.Timeout > 0 && s.Timeout < d {
			dt := time.NewTimer(s.Timeout)
			defer dt.Stop()
			deadline = dt.C
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return Response{}, ctx.Err()
		case <-deadline:
			timer.Stop()
			return Response{}, fmt.Errorf("scripted: no complete reply within %v: %w", s.Timeout, context.DeadlineExceeded)
		case <-timer.C:
		case <-released:
			timer.Stop()
		}
	}
	if t.ExpectUser != "" {
		got, ok := lastUser(req.Messages)
		if !ok {
			return Response{}, fmt.Errorf("scripted: turn %d expected a user message containing %q, but the request has no user message", turnNo, t.ExpectUser)
		}
		if !strings.Contains(got, t.ExpectUser) {
			return Response{}, fmt.Errorf("scripted: turn %d expected the last user message to contain %q, got %q", turnNo, t.ExpectUser, truncateRunes(got, 200))
		}
	}
	if t.ExpectSystem != "" && !strings.Contains(req.System, t.ExpectSystem) {
		return Response{}, fmt.Errorf("scripted: turn %d expected the system prompt to contain %q, got %q", turnNo, t.ExpectSystem, truncateRunes(req.System, 400))
	}
	if t.Error != "" {
		return Response{}, errors.New(t.Error)
	}
	if delta != nil && t.Text != "" {
		for _, piece := range strings.SplitAfter(t.Text, " ") {
			if piece != "" {
				// A piece's emit time, for a benchmark that measures
				// how late a delta reaches a client.
				delta(strings.ReplaceAll(piece, EmitMarker, strconv.FormatInt(time.Now().UnixMicro(), 10)))
			}
		}
	}
	resp := Response{Text: t.Text, StopReason: "end_turn"}
	for i, tool := range t.Tools {
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{
			ID:   "call_" + strconv.Itoa(firstCall+i),
			Name: tool.Name,
			Args: append(json.RawMessage(nil), argsJSON(tool.Args)...),
		})
	}
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = "tool_use"
	}
	resp.Usage = Usage{InputTokens: requestTokens(req), OutputTokens: (len(t.Text) + 3) / 4}
	if u := t.Usage; u != nil {
		resp.Usage = Usage{InputTokens: u.In, OutputTokens: u.Out, CostUSD: u.USD}
	}
	return resp, nil
}

// requestTokens estimates a request's input tokens: a token per 4 bytes
// of its system prompt and messages (for the providers that run no
// model: they report usage too, so that budgets work with them).
func requestTokens(req Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return (n + 3) / 4
}
