package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultTimeout bounds one Complete call when Config.Timeout is zero.
const DefaultTimeout = 120 * time.Second

// DefaultMaxRetries is how often the openai and anthropic providers retry
// a transient failure when Config.MaxRetries is zero.
const DefaultMaxRetries = 2

// ProviderNames returns the valid values of Config.Provider ("" also
// means offline).
func ProviderNames() []string {
	return []string{"offline", "scripted", "openai", "anthropic"}
}

// New returns the provider cfg selects: "" or "offline" gives Offline,
// "scripted" gives ParseScript(cfg.ScriptData), "openai" an OpenAI-compatible
// server (cfg.BaseURL, default the OpenAI API) and "anthropic" the
// Anthropic Messages API (cfg.BaseURL, default the Anthropic API). Each
// Complete call of the returned provider is bounded by cfg.Timeout
// (DefaultTimeout when zero). An unknown provider is an error naming the
// valid ones; New makes no network calls.
func New(cfg Config) (Provider, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	switch strings.ToLower(strings.TrimSpace(cfg.Provider)) {
	case "", "offline":
		return Offline{}, nil
	case "scripted":
		if cfg.ScriptData == nil {
			return nil, errors.New("model: provider scripted needs a script (config/ai/script, a file in your namespace)")
		}
		s, err := ParseScript(cfg.ScriptData)
		if err != nil {
			if cfg.Script != "" {
				err = fmt.Errorf("%w (in %s)", err, cfg.Script)
			}
			return nil, err
		}
		s.Timeout = timeout
		return s, nil
	case "openai":
		return NewOpenAI(cfg), nil
	case "anthropic":
		return NewAnthropic(cfg), nil
	default:
		return nil, fmt.Errorf("model: unknown provider %q (valid: %s)", cfg.Provider, strings.Join(ProviderNames(), ", "))
	}
}

// maxRetries turns Config.MaxRetries into the SDKs' retry count.
func maxRetries(n int) int {
	switch {
	case n == 0:
		return DefaultMaxRetries
	case n < 0:
		return 0
	}
	return n
}

// callContext derives the context of one Complete call, bounded by timeout.
func callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// callError gives err its context. When the caller's ctx ended it returns
// ctx.Err() itself, as Provider promises; when only the call's own timeout
// passed it says so (wrapping context.DeadlineExceeded).
func callError(name string, parent, call context.Context, timeout time.Duration, err error) error {
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if call.Err() != nil {
		return fmt.Errorf("%s: no complete reply within %v: %w", name, timeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// schemaObject decodes a ToolDef schema into a JSON object, defaulting an
// empty schema to {"type":"object","properties":{}}.
func schemaObject(tool ToolDef) (map[string]any, error) {
	m := map[string]any{}
	if len(strings.TrimSpace(string(tool.Schema))) > 0 {
		if err := json.Unmarshal(tool.Schema, &m); err != nil {
			return nil, fmt.Errorf("tool %s: schema is not a JSON object: %w", tool.Name, err)
		}
		if m == nil {
			m = map[string]any{}
		}
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if _, ok := m["properties"]; !ok {
		m["properties"] = map[string]any{}
	}
	return m, nil
}

// argsJSON returns a tool call's arguments as a JSON object text: empty
// arguments become {}.
func argsJSON(args json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(args))) == 0 || string(args) == "null" {
		return json.RawMessage(`{}`)
	}
	return args
}

// lastUser returns the content of the last User message, if any.
func lastUser(msgs []Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == User {
			return msgs[i].Content, true
		}
	}
	return "", false
}
