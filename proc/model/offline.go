package model

import (
	"context"
	"unicode/utf8"
)

// OfflineNotice starts every Offline reply: it says that no real model
// answered and how to configure one.
const OfflineNotice = "[offline model: no AI provider is configured; set config/ai/provider to openai or anthropic]"

// OfflineEchoLimit is how many characters (runes) of the last user
// message an Offline reply echoes; longer messages are cut and end "…".
const OfflineEchoLimit = 500

// Offline is the default provider: it needs no key and no network, and
// replies deterministically with OfflineNotice followed by
// " You said: " and the last User message (cut to OfflineEchoLimit
// runes). It streams the reply in three deltas, never makes tool calls,
// never sleeps, and stops with "end_turn". The zero value is ready to use
// and safe for concurrent use.
type Offline struct{}

// Name returns "offline".
func (Offline) Name() string { return "offline" }

// Complete replies as the Offline doc says; it returns ctx.Err() if ctx
// has already ended.
func (Offline) Complete(ctx context.Context, req Request, delta func(string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	said, _ := lastUser(req.Messages)
	said = truncateRunes(said, OfflineEchoLimit)
	const mid = " You said: "
	if delta != nil {
		delta(OfflineNotice)
		delta(mid)
		if said != "" {
			delta(said)
		}
	}
	text := OfflineNotice + mid + said
	return Response{Text: text, StopReason: "end_turn", Usage: Usage{InputTokens: requestTokens(req), OutputTokens: (len(text) + 3) / 4}}, nil
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
