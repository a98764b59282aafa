// Package mcpserve serves gsvfs to MCP clients (editors, desktop
// assistants, other agent runtimes): the caller's syscalls as MCP tools,
// its processes' history and status as MCP resources, on the official Go
// SDK (github.com/modelcontextprotocol/go-sdk).
//
// It is a transport onto the kernel's one dispatcher, never a second way
// in: every tool call and resource read is one syscall as the caller,
// made through a Caller — over 9P for `gsvfs mcp serve` (RPC, one open
// of /sys/rpc on one connection attached as the invoking host user), or
// through the kernel's Serve for the daemon's /mcp (Handler, as the
// bearer token's identity). So the permission matrix holds through MCP
// exactly as through FUSE and 9P.
//
// It knows no room: its tools are a table of abi descriptors (Tools),
// whose docs are the descriptions and whose args schemas (abi/schema)
// are the input schemas.
package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
)

// Options configure a server.
type Options struct {
	// Version is the server's version, as initialize and server/discover
	// tell the client.
	Version string
	// Logger logs the SDK's failures (nil: none).
	Logger *slog.Logger
}

// Name is the server's name, as the client is told.
const Name = "gsvfs"

// instructions tell the client's model what the server is.
const instructions = "gsvfs, the agent operating system: each tool is one syscall, made as you " +
	"(the files, commands, exec sessions, agent processes, schedules and devices you may use). " +
	"fs.* and shell.exec take an optional target device (sys.device.list). " +
	"A process's history and status are resources: gsv://proc/{pid}/history, gsv://proc/{pid}/status."

// The resource templates: a process's history (proc.history) and status
// (proc.status), by pid.
const (
	historyTemplate = "gsv://proc/{pid}/history"
	statusTemplate  = "gsv://proc/{pid}/status"
)

// New returns an MCP server whose every tool call and resource read is a
// syscall c makes:
//
//   - tools/list lists the tools of Tools that c may make, by
//     sys.syscall.list asked at each listing; each tool's description
//     is its syscall's doc, its input schema its args' JSON Schema;
//   - tools/call of a tool makes its syscall with the arguments as they
//     came (the dispatcher decodes them strictly): its result is one
//     text content, the result's JSON; a failure of the syscall (the
//     dispatcher's answer, or a result with {"ok":false,"error"}) is a
//     tool error result (isError) whose text is its message, beginning
//     with the syscall's name; only a failure of the transport is a
//     protocol error;
//   - resources/list lists, for each process proc.list shows c, its
//     history and status; resources/read of gsv://proc/<pid>/history or
//     status makes proc.history or proc.status;
//   - with a c that is a Watcher (RPC), resources/subscribe of a
//     process's resource follows its signals as c (subscribe.go) and
//     sends notifications/resources/updated for it at each.
func New(c Caller, o Options) (*mcp.Server, error) {
	defs, err := toolDefs()
	if err != nil {
		return nil, err
	}
	opts := &mcp.ServerOptions{Instructions: instructions, Logger: o.Logger, SetCacheable: private}
	var subs *subscriptions
	if w, ok := c.(Watcher); ok {
		log := o.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		subs = &subscriptions{w: w, c: c, log: log, procs: map[string]*followed{}}
		opts.SubscribeHandler, opts.UnsubscribeHandler = subs.subscribe, subs.unsubscribe
	}
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "gsvfs", Version: o.Version}, opts)
	if subs != nil {
		subs.srv = s
	}
	for _, def := range defs {
		s.AddTool(def, toolHandler(c, def.Name))
	}
	read := resourceHandler(c)
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "history", URITemplate: historyTemplate, MIMEType: "application/json",
		Description: abi.ProcHistory.Doc}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "status", URITemplate: statusTemplate, MIMEType: "application/json",
		Description: abi.ProcStatus.Doc}, read)
	s.AddReceivingMiddleware(lists(c, read))
	return s, nil
}

// toolHandler makes the syscall name with a call's arguments.
func toolHandler(c Caller, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		data, err := c.Call(ctx, name, args)
		if err != nil {
			if ce, ok := errors.AsType[*CallError](err); ok {
				return toolError(ce.Message), nil
			}
			return nil, err
		}
		if msg, failed := opFailed(data); failed {
			return toolError(name + ": " + msg), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}, nil
	}
}

// toolError is a tool error result with the message msg.
func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// opFailed reports whether a result is the seed's {"ok":false,"error":…}
// (an operation that ran and failed, such as fs.read of a file the
// caller may not read), and its error.
func opFailed(data json.RawMessage) (string, bool) {
	if len(data) == 0 || data[0] != '{' || !bytes.Contains(data, []byte(`"ok":false`)) {
		return "", false
	}
	var op struct {
		OK    *bool  `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &op) != nil || op.OK == nil || *op.OK {
		return "", false
	}
	if op.Error == "" {
		op.Error = "failed"
	}
	return op.Error, true
}

// resourceHandler reads gsv://proc/<pid>/history or status.
func resourceHandler(c Caller) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		pid, what, ok := procURI(uri)
		if !ok {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		args, err := json.Marshal(abi.PidArgs{Pid: pid})
		if err != nil {
			return nil, err
		}
		name := abi.ProcStatus.Name
		if what == "history" {
			name = abi.ProcHistory.Name
		}
		data, err := c.Call(ctx, name, args)
		if err != nil {
			return nil, protocolError(err)
		}
		return &mcp.ReadResourceResult{Cacheable: mcp.Cacheable{CacheScope: "private"},
			Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}}}, nil
	}
}

// private marks every cacheable result private: what the server lists
// and reads is the caller's.
func private(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" }

// protocolError is the JSON-RPC error of a failed syscall a request
// made besides a tool call (a listing, a resource read): the
// dispatcher's message, with the code nearest its kind (404: resource
// not found; 400: invalid params; else internal). Any other error is the
// transport's, as it is.
func protocolError(err error) error {
	ce, ok := errors.AsType[*CallError](err)
	if !ok {
		return err
	}
	code := int64(jsonrpc.CodeInternalError)
	switch abi.Kind(ce.Code) {
	case abi.NotExist:
		code = mcp.CodeResourceNotFound
	case abi.Invalid:
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: ce.Message}
}

// procURI reads gsv://proc/<pid>/<history|status>: a pid is one path
// element, escaped or not.
func procURI(uri string) (pid, what string, ok bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "gsv" || u.Host != "proc" || u.RawQuery != "" || u.Fragment != "" {
		return "", "", false
	}
	p, what, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok || p == "" || strings.ContainsAny(p, "/") || (what != "history" && what != "status") {
		return "", "", false
	}
	return p, what, true
}

// procResources are the resources of one process.
func procResources(p abi.Process) []*mcp.Resource {
	label := p.Pid
	if p.Label != nil && *p.Label != "" {
		label += " (" + *p.Label + ")"
	}
	base := "gsv://proc/" + url.PathEscape(p.Pid) + "/"
	return []*mcp.Resource{
		{URI: base + "history", Name: p.Pid + "/history", Title: label + " history", MIMEType: "application/json"},
		{URI: base + "status", Name: p.Pid + "/status", Title: label + " status", MIMEType: "application/json"},
	}
}

// lists is the middleware that answers tools/list with the tools the
// caller may make, and resources/list with its processes' resources,
// asking the kernel as the caller each time; and resources/read of a
// process's resource with read.
func lists(c Caller, read mcp.ResourceHandler) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "resources/read":
				// A pid with a character a URI template's simple
				// expansion does not take (init:1000) matches no
				// template: the handler reads every gsv://proc/ URI.
				if r, ok := req.(*mcp.ReadResourceRequest); ok && r.Params != nil {
					if _, _, ok := procURI(r.Params.URI); ok {
						return read(ctx, r)
					}
				}
			case "resources/list":
				procs, err := do(ctx, c, abi.ProcList, nil)
				if err != nil {
					return nil, protocolError(err)
				}
				res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
				for _, p := range procs.Processes {
					res.Resources = append(res.Resources, procResources(p)...)
				}
				return res, nil
			case "tools/list":
				res, err := next(ctx, method, req)
				if err != nil {
					return res, err
				}
				list, ok := res.(*mcp.ListToolsResult)
				if !ok {
					return res, nil
				}
				may, err := do(ctx, c, abi.SysSyscallList, nil)
				if err != nil {
					return nil, protocolError(err)
				}
				allowed := make(map[string]bool, len(may.Syscalls))
				for _, n := range may.Syscalls {
					allowed[n] = true
				}
				kept := list.Tools[:0:0]
				for _, t := range list.Tools {
					if allowed[t.Name] {
						kept = append(kept, t)
					}
				}
				list.Tools = kept
				return list, nil
			}
			return next(ctx, method, req)
		}
	}
}

// do makes the syscall d with args (nil: none) through c and decodes its
// result. A failure is an error whose text is the dispatcher's message.
func do[A, R any](ctx context.Context, c Caller, d abi.Call[A, R], args *A) (R, error) {
	var res R
	var raw json.RawMessage
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return res, err
		}
		raw = b
	}
	data, err := c.Call(ctx, d.Name, raw)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return res, fmt.Errorf("%s: bad result: %w", d.Name, err)
	}
	return res, nil
}
