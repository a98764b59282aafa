package model

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAI is a provider for any server speaking the OpenAI Chat
// Completions API (OpenAI itself, or a compatible server at
// Config.BaseURL), through the official SDK. It streams the reply
// (stream: true) and accumulates text and tool calls. Safe for concurrent
// use.
//
// Mapping: Request.System becomes a leading system message; an Assistant
// message's ToolCalls become function tool_calls; a Tool message becomes a
// tool message with tool_call_id (an IsError result's content is prefixed
// "Error: ", the API having no error flag); ToolDefs become function tools
// whose parameters are the JSON schema; MaxTokens, if positive, is sent as
// max_completion_tokens. A message's images (Media.IsImage) become
// image_url content parts holding a data: URL of their base64 bytes, its
// other media their Placeholder text; a tool message carries text only,
// so the images of a run of tool results follow it in one user message,
// each after a text part naming its tool call. finish_reason maps to StopReason: stop →
// "end_turn", tool_calls/function_call → "tool_use", length →
// "max_tokens", anything else verbatim.
type OpenAI struct {
	client  openai.Client
	model   string
	timeout time.Duration
}

// NewOpenAI returns an OpenAI provider for cfg: cfg.BaseURL (when set)
// and cfg.APIKey (when set) configure the client; the SDK's environment
// defaults (OPENAI_API_KEY, OPENAI_BASE_URL, ...) fill in the rest only
// when cfg.UseEnvironment is set. cfg.Model is the default model,
// cfg.MaxRetries the retries and cfg.Timeout (DefaultTimeout when zero)
// bounds each Complete. It makes no network calls.
func NewOpenAI(cfg Config) *OpenAI {
	opts := []option.RequestOption{option.WithMaxRetries(maxRetries(cfg.MaxRetries))}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var client openai.Client
	if cfg.UseEnvironment {
		client = openai.NewClient(opts...)
	} else {
		// The client NewClient makes, without its environment defaults.
		var hc *http.Client
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			hc = &http.Client{Transport: t.Clone()}
		} else {
			hc = &http.Client{Transport: http.DefaultTransport}
		}
		opts = append([]option.RequestOption{option.WithHTTPClient(hc), option.WithEnvironmentProduction()}, opts...)
		client = openai.Client{Options: opts, Chat: openai.NewChatService(opts...)}
	}
	return &OpenAI{client: client, model: cfg.Model, timeout: timeout}
}

// Name returns "openai".
func (p *OpenAI) Name() string { return "openai" }

// Complete sends req (req.Model, else the configured model) as a
// streaming chat completion, calls delta with each text piece, and
// returns the accumulated reply. Errors start "openai: " and carry the
// HTTP status or the decoding problem; a stream that ends without a
// finish_reason is an error (a truncated reply).
func (p *OpenAI) Complete(ctx context.Context, req Request, delta func(string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	params, err := p.params(req)
	if err != nil {
		return Response{}, fmt.Errorf("openai: %w", err)
	}
	cctx, cancel := callContext(ctx, p.timeout)
	defer cancel()
	resp, err := p.stream(cctx, params, delta)
	if err != nil {
		return Response{}, callError("openai", ctx, cctx, p.timeout, err)
	}
	return resp, nil
}

func (p *OpenAI) stream(ctx context.Context, params openai.ChatCompletionNewParams, delta func(string)) (Response, error) {
	stream := p.client.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var resp Response
	finish := ""
	chunks := 0
	for stream.Next() {
		chunk := stream.Current()
		chunks++
		if !acc.AddChunk(chunk) {
			return Response{}, fmt.Errorf("stream chunk %d could not be accumulated (inconsistent ids or indices)", chunks)
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != "" && delta != nil {
				delta(c.Delta.Content)
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
		if chunk.JSON.Usage.Valid() {
			resp.Usage = Usage{
				InputTokens:  int(chunk.Usage.PromptTokens),
				OutputTokens: int(chunk.Usage.CompletionTokens),
			}
		}
	}
	if err := stream.Err(); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syn) || errors.As(err, &typ) {
			return Response{}, fmt.Errorf("malformed stream chunk after %d chunks: %w", chunks, err)
		}
		var apiErr *openai.Error
		if errors.As(err, &apiErr) && apiErr.Message != "" {
			return Response{}, fmt.Errorf("%w: %s", err, apiErr.Message)
		}
		return Response{}, err
	}
	if finish == "" {
		return Response{}, fmt.Errorf("stream ended after %d chunks without a finish_reason (truncated reply)", chunks)
	}
	if len(acc.Choices) > 0 {
		msg := acc.Choices[0].Message
		resp.Text = msg.Content
		if resp.Text == "" && msg.Refusal != "" {
			resp.Text = msg.Refusal
		}
		for i, tc := range msg.ToolCalls {
			args := tc.Function.Arguments
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return Response{}, fmt.Errorf("tool call %d (%s %s): arguments are not valid JSON: %.200q", i, tc.ID, tc.Function.Name, args)
			}
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(args)})
		}
	}
	resp.StopReason = openAIStopReason(finish)
	if len(resp.ToolCalls) > 0 && resp.StopReason == "end_turn" {
		resp.StopReason = "tool_use" // some compatible servers say "stop"
	}
	return resp, nil
}

func openAIStopReason(finish string) string {
	switch finish {
	case "stop":
		return "end_turn"
	case "tool_calls", "function_call":
		return "tool_use"
	case "length":
		return "max_tokens"
	}
	return finish
}

// params maps a Request to the SDK's parameters.
func (p *OpenAI) params(req Request) (openai.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return openai.ChatCompletionNewParams{}, errors.New("no model configured (set config/ai/model)")
	}
	params := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	// toolImages are the images of the tool results since the last
	// non-tool message: a tool message carries text only, so they follow
	// the tool messages as one user message.
	var toolImages []openai.ChatCompletionContentPartUnionParam
	flushImages := func() {
		if len(toolImages) > 0 {
			params.Messages = append(params.Messages, openai.UserMessage(toolImages))
		}
		toolImages = nil
	}
	for i, m := range req.Messages {
		if m.Role != Tool {
			flushImages()
		}
		switch m.Role {
		case User:
			text, images := withPlaceholders(m.Content, m.Media)
			if len(images) == 0 {
				params.Messages = append(params.Messages, openai.UserMessage(text))
				break
			}
			var parts []openai.ChatCompletionContentPartUnionParam
			if text != "" {
				parts = append(parts, openai.TextContentPart(text))
			}
			for _, im := range images {
				parts = append(parts, openAIImage(im))
			}
			params.Messages = append(params.Messages, openai.UserMessage(parts))
		case Assistant:
			var a openai.ChatCompletionAssistantMessageParam
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				args := argsJSON(tc.Args)
				if !json.Valid(args) {
					return params, fmt.Errorf("message %d: tool call %s: arguments are not valid JSON", i, tc.ID)
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: string(args),
						},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case Tool:
			content, images := withPlaceholders(m.Content, m.Media)
			if m.IsError {
				content = "Error: " + content
			}
			params.Messages = append(params.Messages, openai.ToolMessage(content, m.ToolCallID))
			for _, im := range images {
				toolImages = append(toolImages, openai.TextContentPart(fmt.Sprintf("The image of tool call %s (%s):", m.ToolCallID, m.ToolName)), openAIImage(im))
			}
		default:
			return params, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	flushImages()
	for _, t := range req.Tools {
		schema, err := schemaObject(t)
		if err != nil {
			return params, err
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return params, nil
}

// openAIImage is an image as a content part: a data URL of its bytes.
func openAIImage(m Media) openai.ChatCompletionContentPartUnionParam {
	return openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{
		URL: "data:" + m.MimeType + ";base64," + base64.StdEncoding.EncodeToString(m.Data),
	})
}
