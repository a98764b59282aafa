package model

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// DefaultAnthropicMaxTokens is the max_tokens an Anthropic request sends
// when Request.MaxTokens is zero (the API requires one).
const DefaultAnthropicMaxTokens = 4096

// Anthropic is a provider for the Anthropic Messages API through the
// official SDK. It streams the reply and accumulates it with the SDK's
// Message.Accumulate. Safe for concurrent use.
//
// Mapping: Request.System becomes the system parameter; an Assistant
// message becomes text and tool_use blocks; Tool messages become
// tool_result blocks (is_error from IsError) of a user message, merged
// with any adjacent User messages into one user turn, tool results first
// (as the API requires); empty text is left out; a message's images
// (Media.IsImage) become base64 image blocks after its text (in a tool
// result, inside its tool_result block), its other media their
// Placeholder text; ToolDefs become tools
// with input_schema; MaxTokens defaults to DefaultAnthropicMaxTokens.
// StopReason is the API's stop_reason ("end_turn", "tool_use",
// "max_tokens", ...). Usage.InputTokens includes cache reads and writes.
type Anthropic struct {
	client  anthropic.Client
	model   string
	timeout time.Duration
}

// NewAnthropic returns an Anthropic provider for cfg: cfg.BaseURL (when
// set) and cfg.APIKey configure the client; the SDK's environment
// defaults (ANTHROPIC_API_KEY, profiles, ...) apply only when cfg.APIKey
// is empty and cfg.UseEnvironment is set. cfg.Model is the default model,
// cfg.MaxRetries the retries and cfg.Timeout (DefaultTimeout when zero)
// bounds each Complete. It makes no network calls.
func NewAnthropic(cfg Config) *Anthropic {
	opts := []option.RequestOption{option.WithMaxRetries(maxRetries(cfg.MaxRetries))}
	if cfg.APIKey != "" || !cfg.UseEnvironment {
		opts = append(opts, option.WithoutEnvironmentDefaults())
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Anthropic{client: anthropic.NewClient(opts...), model: cfg.Model, timeout: timeout}
}

// Name returns "anthropic".
func (p *Anthropic) Name() string { return "anthropic" }

// Complete sends req (req.Model, else the configured model) as a
// streaming Messages request, calls delta with each text piece, and
// returns the accumulated reply. Errors start "anthropic: " and carry the
// HTTP status, the API's error event or the decoding problem; a stream
// that ends before message_stop is an error (a truncated reply).
func (p *Anthropic) Complete(ctx context.Context, req Request, delta func(string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	params, err := p.params(req)
	if err != nil {
		return Response{}, fmt.Errorf("anthropic: %w", err)
	}
	cctx, cancel := callContext(ctx, p.timeout)
	defer cancel()
	resp, err := p.stream(cctx, params, delta)
	if err != nil {
		return Response{}, callError("anthropic", ctx, cctx, p.timeout, err)
	}
	return resp, nil
}

func (p *Anthropic) stream(ctx context.Context, params anthropic.MessageNewParams, delta func(string)) (Response, error) {
	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	// partial holds each tool_use block's streamed input, to detect
	// malformed JSON (Accumulate would quietly replace it with {}).
	partial := map[int64]*strings.Builder{}
	events, stopped := 0, false
	for stream.Next() {
		ev := stream.Current()
		events++
		if err := msg.Accumulate(ev); err != nil {
			return Response{}, fmt.Errorf("stream event %d (%s): %w", events, ev.Type, err)
		}
		switch ev.Type {
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" && delta != nil {
					delta(ev.Delta.Text)
				}
			case "input_json_delta":
				b := partial[ev.Index]
				if b == nil {
					b = &strings.Builder{}
					partial[ev.Index] = b
				}
				b.WriteString(ev.Delta.PartialJSON)
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syn) || errors.As(err, &typ) {
			return Response{}, fmt.Errorf("malformed stream event after %d events: %w", events, err)
		}
		return Response{}, err
	}
	if !stopped {
		return Response{}, fmt.Errorf("stream ended after %d events without message_stop (truncated reply)", events)
	}
	var resp Response
	var text strings.Builder
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := json.RawMessage(b.Input)
			if pj, ok := partial[int64(i)]; ok && strings.TrimSpace(pj.String()) != "" {
				args = json.RawMessage(pj.String())
			}
			args = argsJSON(args)
			if !json.Valid(args) {
				return Response{}, fmt.Errorf("tool call %s (%s): input is not valid JSON: %.200q", b.ID, b.Name, args)
			}
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Args: append(json.RawMessage(nil), args...)})
		}
	}
	resp.Text = text.String()
	resp.StopReason = string(msg.StopReason)
	resp.Usage = Usage{
		InputTokens:  int(msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens),
		OutputTokens: int(msg.Usage.OutputTokens),
	}
	return resp, nil
}

// params maps a Request to the SDK's parameters.
func (p *Anthropic) params(req Request) (anthropic.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return anthropic.MessageNewParams{}, errors.New("no model configured (set config/ai/model)")
	}
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultAnthropicMaxTokens
	}
	params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: maxTokens}
	if req.Temperature != nil {
		params.Temperature = anthropic.Float(*req.Temperature)
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	// A user turn collects adjacent User and Tool messages: tool results
	// first, then text.
	var results, texts []anthropic.ContentBlockParamUnion
	flushUser := func() {
		if len(results)+len(texts) > 0 {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(append(results, texts...)...))
		}
		results, texts = nil, nil
	}
	for i, m := range req.Messages {
		switch m.Role {
		case User:
			text, images := withPlaceholders(m.Content, m.Media)
			if text != "" {
				texts = append(texts, anthropic.NewTextBlock(text))
			}
			for _, im := range images {
				texts = append(texts, anthropic.NewImageBlockBase64(im.MimeType, base64.StdEncoding.EncodeToString(im.Data)))
			}
		case Tool:
			if m.ToolCallID == "" {
				return params, fmt.Errorf("message %d: tool result without a tool call id", i)
			}
			r := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			text, images := withPlaceholders(m.Content, m.Media)
			if text != "" {
				r.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: text}}}
			}
			for _, im := range images {
				r.Content = append(r.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{
					Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
						Data: base64.StdEncoding.EncodeToString(im.Data), MediaType: anthropic.Base64ImageSourceMediaType(im.MimeType)}}}})
			}
			if m.IsError {
				r.IsError = anthropic.Bool(true)
			}
			results = append(results, anthropic.ContentBlockParamUnion{OfToolResult: &r})
		case Assistant:
			flushUser()
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				args := argsJSON(tc.Args)
				if !json.Valid(args) {
					return params, fmt.Errorf("message %d: tool call %s: arguments are not valid JSON", i, tc.ID)
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, json.RawMessage(args), tc.Name))
			}
			if len(blocks) > 0 {
				params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
			}
		default:
			return params, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	flushUser()
	for _, t := range req.Tools {
		schema, err := schemaObject(t)
		if err != nil {
			return params, err
		}
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if names, ok := schema["required"].([]any); ok {
			for _, r := range names {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			switch k {
			case "type", "properties", "required":
			default:
				in.ExtraFields[k] = v
			}
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return params, nil
}
