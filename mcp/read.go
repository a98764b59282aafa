package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Reading a resource's contents (resources/read) and getting a prompt's
// messages (prompts/get): explicit calls, as sys.mcp.call is. The files
// of /mcp show what discovery kept and never call them.

// ask is what a resource read and a prompt get share with a tool call:
// the server (uidp's, serverID) the caller may use, connected within the
// timeout, then do asked of it (what names it in errors: "resource
// test://x"). Its errors name the server as sys.mcp.call's do.
func (m *Room) ask(ctx context.Context, c *kernel.Caller, uidp *uint32, serverID string, timeoutMs *int64, what string,
	do func(ctx context.Context, rec *record, cs *sdk.ClientSession) error) error {
	uid, ok := scope(c, uidp)
	rec, err := m.find(ctx, uid, serverID)
	if !ok || errors.Is(err, errNoServer) {
		return abi.E(abi.Path(serverID), abi.NotExist, "no such MCP server")
	}
	if err != nil {
		return err
	}
	if err := m.seen(ctx, c, rec.name); err != nil {
		return err
	}
	fail := func(kind abi.Kind, msg string) error {
		return abi.E(abi.Path(rec.name), kind, fmt.Sprintf("MCP server %s: %s", rec.name, msg))
	}
	timeout := defaultCallTimeout
	if timeoutMs != nil {
		if *timeoutMs <= 0 {
			return fail(abi.Invalid, "timeoutMs must be positive")
		}
		timeout = min(maxCallTimeout, time.Duration(*timeoutMs)*time.Millisecond)
	}
	if err := m.allowed(ctx, rec, c); err != nil {
		return err
	}
	if timeout, _, err = m.budgeted(ctx, c, rec.name, timeout); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cn, err := m.link(rec).get(cctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case cctx.Err() != nil:
			return fail(abi.Timeout, fmt.Sprintf("it did not come up within the call's %s", timeout))
		}
		return fail(abi.KindOf(err), err.Error())
	}
	err = do(cctx, rec, cn.cs)
	if err == nil {
		return nil
	}
	var werr *jsonrpc.Error
	var aerr *abi.Error
	switch {
	case errors.As(err, &aerr):
		return err
	case ctx.Err() != nil:
		return ctx.Err()
	case cctx.Err() != nil:
		return fail(abi.Timeout, fmt.Sprintf("%s: no answer within %s (the request was cancelled on the server)", what, timeout))
	case errors.As(err, &werr):
		return fail(abi.Invalid, fmt.Sprintf("%s: %s", what, werr.Message))
	case cn.wentAway(err):
		msg := "it went away during the call"
		if why := cn.why(); why != "" {
			msg += ": " + why
		}
		return fail(abi.Offline, msg)
	}
	return fail(abi.Offline, fmt.Sprintf("%s: %v", what, err))
}

// large keeps an answer of rec's over maxInline as a file (as a large
// tool result is) and returns its blob, whose preview is text's start
// (the answer's JSON if text is empty); nil for an answer that fits.
func (m *Room) large(rec *record, whole []byte, text string) (*abi.McpResultBlob, error) {
	if len(whole) <= maxInline {
		return nil, nil
	}
	digest, err := m.keep(rec.id, whole)
	if err != nil {
		return nil, abi.E(abi.Path(rec.name), fmt.Sprintf("MCP server %s: keeping its large answer: %v", rec.name, err))
	}
	user := fmt.Sprint(rec.uid)
	if u, err := m.k.UserOf(context.Background(), rec.uid); err == nil {
		user = u.Username
	}
	if text == "" {
		text = string(whole)
	}
	return &abi.McpResultBlob{Path: fmt.Sprintf("%s/%s/%s/results/%s", dirPath, user, rec.name, digest),
		SizeBytes: int64(len(whole)), Preview: cut(text, previewBytes)}, nil
}

// resourceRead is sys.mcp.resource.read: resources/read of a.URI on one
// of the caller's servers (root: uid's).
func (m *Room) resourceRead(ctx context.Context, c *kernel.Caller, a *abi.McpResourceReadArgs) (*abi.McpResourceReadResult, error) {
	if a.Arguments != nil {
		uri, err := expand(a.URI, a.Arguments)
		if err != nil {
			return nil, abi.E(abi.Path(a.ServerID), abi.Invalid, err.Error())
		}
		a.URI = uri
	}
	if a.URI == "" || len(a.URI) > 8<<10 || strings.ContainsFunc(a.URI, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, abi.E(abi.Path(a.ServerID), abi.Invalid, "uri: want a resource's URI (one line, at most 8 KiB)")
	}
	out := &abi.McpResourceReadResult{}
	err := m.ask(ctx, c, a.Uid, a.ServerID, a.TimeoutMs, "resource "+truncate(a.URI, 80),
		func(ctx context.Context, rec *record, cs *sdk.ClientSession) error {
			res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: a.URI})
			if err != nil {
				return err
			}
			if out.Contents, err = json.Marshal(orEmpty(res.Contents)); err != nil {
				return abi.E(abi.Path(rec.name), fmt.Sprintf("MCP server %s: its contents: %v", rec.name, err))
			}
			var text strings.Builder
			for _, rc := range res.Contents {
				if rc != nil && text.Len() < previewBytes {
					text.WriteString(rc.Text)
				}
			}
			if out.Blob, err = m.large(rec, out.Contents, text.String()); out.Blob != nil {
				out.Contents = nil
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// promptGet is sys.mcp.prompt.get: prompts/get of a.Name with
// a.Arguments on one of the caller's servers (root: uid's).
func (m *Room) promptGet(ctx context.Context, c *kernel.Caller, a *abi.McpPromptGetArgs) (*abi.McpPromptGetResult, error) {
	if a.Name == "" || len(a.Name) > maxName || strings.ContainsFunc(a.Name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return nil, abi.E(abi.Path(a.ServerID), abi.Invalid, fmt.Sprintf("prompt name %q: want one line of at most %d bytes", truncate(a.Name, 64), maxName))
	}
	out := &abi.McpPromptGetResult{}
	err := m.ask(ctx, c, a.Uid, a.ServerID, a.TimeoutMs, "prompt "+a.Name,
		func(ctx context.Context, rec *record, cs *sdk.ClientSession) error {
			for _, pr := range rec.prompts { // the discovered ones: a required argument missing is ours to tell
				if pr.Name != a.Name {
					continue
				}
				for _, arg := range pr.Arguments {
					if _, ok := a.Arguments[arg.Name]; arg.Required && !ok {
						return abi.E(abi.Path(rec.name), abi.Invalid, fmt.Sprintf("MCP server %s: prompt %s: argument %s is required", rec.name, a.Name, arg.Name))
					}
				}
			}
			res, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: a.Name, Arguments: a.Arguments})
			if err != nil {
				return err
			}
			out.Description = res.Description
			if out.Messages, err = json.Marshal(orEmpty(res.Messages)); err != nil {
				return abi.E(abi.Path(rec.name), fmt.Sprintf("MCP server %s: its messages: %v", rec.name, err))
			}
			var text strings.Builder
			for _, pm := range res.Messages {
				if t, ok := pm.Content.(*sdk.TextContent); ok && text.Len() < previewBytes {
					text.WriteString(t.Text)
				}
			}
			if out.Blob, err = m.large(rec, out.Messages, text.String()); out.Blob != nil {
				out.Messages = nil
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxTemplateArgs bounds a template read's arguments.
const maxTemplateArgs = 64

// expand is resource template tmpl (RFC 6570) expanded with args.
func expand(tmpl string, args map[string]string) (string, error) {
	if len(tmpl) > 8<<10 || len(args) > maxTemplateArgs {
		return "", fmt.Errorf("uri: a template of at most 8 KiB, with at most %d arguments", maxTemplateArgs)
	}
	t, err := uritemplate.New(tmpl)
	if err != nil {
		return "", fmt.Errorf("uri: not a resource template: %v", err)
	}
	vals := uritemplate.Values{}
	for k, v := range args {
		vals.Set(k, uritemplate.String(v))
	}
	for _, name := range t.Varnames() {
		if _, ok := args[name]; !ok {
			return "", fmt.Errorf("uri: the template's argument %s is missing", name)
		}
	}
	out, err := t.Expand(vals)
	if err != nil {
		return "", fmt.Errorf("uri: expanding the template: %v", err)
	}
	return out, nil
}
