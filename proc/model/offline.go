package model

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// OfflineNotice starts every Offline reply: it says that no real model
// answered and how to configure one.
const OfflineNotice = "[offline model: no AI provider is configured; set config/ai/provider to openai or anthropic]"

// OfflineEchoLimit is how many characters (runes) of the last user
// message an Offline reply echoes; longer messages are cut and end "…".
const OfflineEchoLimit = 500

// OfflineResultLimit is how many characters (runes) of each tool result
// the Offline model's answer shows.
const OfflineResultLimit = 200

// OfflineUse is the word that starts a line asking the Offline model to
// call a tool: "use <Tool> [<JSON args object>]" (see Offline).
const OfflineUse = "use"

// Offline is the default provider: it needs no key and no network, and
// replies deterministically. It never sleeps and is safe for concurrent
// use; the zero value is ready to use.
//
// It plays the last User message of the request (a person's message, or
// a "[Process Event]:" one). Each line of that message of the form
//
//	use <Tool> [<JSON args object>]
//
// (ParseUse: the word "use", a tool's name, and its arguments, {} when
// absent) is one step: the n-th model call after the message makes the
// n-th use line's tool call, alone, with the id "offline_<n>", so a run
// takes a step per line, each followed by the loop's checkpoint. Once
// every use line has had its call, and for a message with none, it
// answers in text: OfflineNotice, " You said: " and the message (cut to
// OfflineEchoLimit runes), then a line per tool result since the message,
// "<Tool>: <output>" or "<Tool> failed: <output>" (cut to
// OfflineResultLimit runes). A use line that does not parse, or names a
// tool the request does not offer, is answered in text, naming the line
// and the tools there are, and calls nothing. A request with no tools
// (a summary) is always answered in text. The message's media and the
// tool results' are played as the providers give them: an item that is
// no image as its Placeholder (echoed with the text), and the images
// counted: a text answer ends with a line "[offline model: I saw <n>
// image(s): <mime types>]". Text is streamed in a few
// deltas; the stop reason is "tool_use" for a call, else "end_turn".
type Offline struct{}

// Name returns "offline".
func (Offline) Name() string { return "offline" }

// Complete replies as the Offline doc says; it returns ctx.Err() if ctx
// has already ended.
func (Offline) Complete(ctx context.Context, req Request, delta func(string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	said, at := "", -1
	var images []Media // the images of the message and of the tool results since
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == User {
			said, at = req.Messages[i].Content, i
			break
		}
	}
	var steps int        // the use lines already played since the message
	var results []string // the tool results since the message
	if at >= 0 {
		var ims []Media
		said, ims = withPlaceholders(said, req.Messages[at].Media)
		images = append(images, ims...)
		for _, m := range req.Messages[at+1:] {
			if m.Role == Tool {
				var ims []Media
				m.Content, ims = withPlaceholders(m.Content, m.Media)
				images = append(images, ims...)
			}
			switch {
			case m.Role == Assistant && len(m.ToolCalls) > 0:
				steps++
			case m.Role == Tool:
				name := m.ToolName
				if name == "" {
					name = "tool"
				}
				sep := ": "
				if m.IsError {
					sep = " failed: "
				}
				results = append(results, name+sep+oneLine(truncateRunes(m.Content, OfflineResultLimit)))
			}
		}
	}
	if len(req.Tools) > 0 {
		uses := ParseUse(said)
		if steps < len(uses) {
			u := uses[steps]
			if u.Err != nil {
				return offlineText(req, delta, fmt.Sprintf("%s Line %d of your message: %v.", OfflineNotice, u.Line, u.Err)), nil
			}
			name := ""
			var names []string
			for _, t := range req.Tools {
				names = append(names, t.Name)
				if strings.EqualFold(t.Name, u.Tool) && name == "" {
					name = t.Name
				}
			}
			if name == "" {
				return offlineText(req, delta, fmt.Sprintf("%s Line %d of your message: no tool named %q here (the tools: %s).", OfflineNotice, u.Line, u.Tool, strings.Join(names, ", "))), nil
			}
			text := fmt.Sprintf("[offline model: step %d of %d: %s]", steps+1, len(uses), name)
			if delta != nil {
				delta(text)
			}
			return Response{
				Text:       text,
				ToolCalls:  []ToolCall{{ID: "offline_" + strconv.Itoa(steps+1), Name: name, Args: u.Args}},
				StopReason: "tool_use",
				Usage:      Usage{InputTokens: requestTokens(req), OutputTokens: (len(text) + 3) / 4},
			}, nil
		}
	}
	text := OfflineNotice + " You said: " + truncateRunes(said, OfflineEchoLimit)
	if len(results) > 0 {
		text += "\n" + strings.Join(results, "\n")
	}
	if len(images) > 0 {
		types := make([]string, len(images))
		for i, im := range images {
			types[i] = im.MimeType
		}
		text += fmt.Sprintf("\n[offline model: I saw %d image(s): %s]", len(images), strings.Join(types, ", "))
	}
	return offlineText(req, delta, text), nil
}

// offlineText is an Offline answer in text: streamed in up to three
// deltas (the notice, " You said: ", the rest) and ended "end_turn".
func offlineText(req Request, delta func(string), text string) Response {
	if delta != nil {
		rest := text
		if r, ok := strings.CutPrefix(rest, OfflineNotice); ok {
			delta(OfflineNotice)
			rest = r
		}
		if r, ok := strings.CutPrefix(rest, " You said: "); ok {
			delta(" You said: ")
			rest = r
		}
		if rest != "" {
			delta(rest)
		}
	}
	return Response{Text: text, StopReason: "end_turn", Usage: Usage{InputTokens: requestTokens(req), OutputTokens: (len(text) + 3) / 4}}
}

// Use is one use line of a message (see Offline): the tool it names and
// its arguments, or why the line does not parse.
type Use struct {
	// Line is the line's number in the message, from 1.
	Line int
	// Tool is the tool's name as written.
	Tool string
	// Args is the arguments, a JSON object ({} when the line gives none).
	Args json.RawMessage
	// Err says why the line does not parse; Tool and Args are then unset.
	Err error
}

// ParseUse returns the use lines of text, in order: every line whose
// first word (after blanks) is OfflineUse. The next word is the tool's
// name; the rest of the line, if any, must be one JSON object, its
// arguments. A line that says "use" without a tool, or whose arguments
// are not one JSON object, is a Use with Err set. Other lines are not
// use lines, so prose that only mentions "use" in passing ("please use
// the cache", "use") is left alone unless the word starts its line.
func ParseUse(text string) []Use {
	var out []Use
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, OfflineUse)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		rest = strings.TrimSpace(rest)
		u := Use{Line: n + 1}
		tool, args := rest, ""
		if i := strings.IndexAny(rest, " \t{"); i >= 0 {
			tool, args = rest[:i], rest[i:]
		}
		args = strings.TrimSpace(args)
		switch {
		case tool == "":
			u.Err = fmt.Errorf("%q: name a tool: use <Tool> [<JSON args object>]", line)
		case args == "":
			u.Tool, u.Args = tool, json.RawMessage(`{}`)
		default:
			if err := jsonObject(args); err != nil {
				u.Err = fmt.Errorf("use %s: the arguments are not one JSON object: %v", tool, err)
			} else {
				u.Tool, u.Args = tool, json.RawMessage(args)
			}
		}
		out = append(out, u)
	}
	return out
}

// jsonObject checks that s is exactly one JSON object.
func jsonObject(s string) error {
	dec := json.NewDecoder(strings.NewReader(s))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("null is not an object")
	}
	if strings.TrimSpace(s[dec.InputOffset():]) != "" {
		return fmt.Errorf("text after the object")
	}
	return nil
}

// oneLine joins the lines of s with " ⏎ ", so that a tool result shows
// as one line of an answer.
func oneLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(s, "\n", " ⏎ ")
}

// truncateRunes cuts s to at most n runes, marking a cut with "…".
func truncateRunes(s string, n int) string {
	if len(s) <= n { // bytes ≥ runes: fast path
		return s
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n {
			break
		}
		count++
	}
	return s[:i] + "…"
}
