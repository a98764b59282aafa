package abi

import "encoding/json"

// The MCP domain (seed 003 sys.mcp.*): each user's MCP servers, the
// tools, resources and prompts discovered on them, and calls of their
// tools. The mcp room serves these; the CLI and the agents call them
// with these types. Tool arguments, schemas and results are JSON as the
// server gives them (json.RawMessage): their shape is the server's.

// MCP transports (McpServerSummary.Transport). The seed's are auto,
// streamable-http and sse (a URL); stdio is gsvfs's own: a command run
// as its owner in an exec session of theirs.
const (
	McpAuto           = "auto"
	McpStreamableHTTP = "streamable-http"
	McpSSE            = "sse"
	McpTransportStdio = "stdio"
)

// MCP connection states (McpServerSummary.State), the seed's: a server
// is not-connected until something needs it (a call, a refresh; the
// daemon connects none at start), connecting and discovering while it
// comes up, ready when its tools are known, failed when it could not
// connect or its connection ended (Error says why; the room reconnects
// with backoff, and a call or a refresh tries at once). authenticating
// and connected are the seed's too, unused until OAuth.
const (
	McpNotConnected   = "not-connected"
	McpAuthenticating = "authenticating"
	McpConnecting     = "connecting"
	McpConnected      = "connected"
	McpDiscovering    = "discovering"
	McpReady          = "ready"
	McpFailed         = "failed"
)

// McpTransport is how a URL is reached: Type auto (streamable HTTP, then
// the older SSE transport if the server does not speak it),
// streamable-http or sse; Headers are sent with every request (a bearer
// token: they are kept for the server and never shown).
type McpTransport struct {
	Type    string            `json:"type,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// McpStdio is a stdio server: Command (an argv, no shell) run as the
// server's owner inside an exec session of theirs, opened with
// NetworkMode (default full), Mounts and Workdir as
// process.session.open takes them, and Env over the session's
// environment. It speaks newline-delimited JSON-RPC on its stdin and
// stdout; its stderr is kept for the error of a server that failed.
// With Device, the session is opened on that remote device (the
// device's user, its sandbox; Mounts and Workdir are the device's
// paths) and the command's stdin and stdout cross the device's
// connection; "" or "local" is the daemon's own machine.
type McpStdio struct {
	Command     []string          `json:"command"`
	Device      string            `json:"device,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Workdir     string            `json:"workdir,omitempty"`
	NetworkMode string            `json:"network_mode,omitempty"`
	Mounts      []ProcessMount    `json:"mounts,omitempty"`
}

// McpToolSummary is one tool a server offers, as discovered: its schemas
// are the server's JSON Schemas, or null.
type McpToolSummary struct {
	Name         string          `json:"name"`
	Description  *string         `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// McpResourceSummary is one resource a server offers, as discovered; a
// resource template (resources/templates/list) has URITemplate (an RFC
// 6570 template, read with sys.mcp.resource.read's arguments) and no
// URI.
type McpResourceSummary struct {
	URI         string  `json:"uri"`
	URITemplate string  `json:"uriTemplate,omitempty"`
	Name        string  `json:"name"`
	Title       string  `json:"title,omitempty"`
	Description *string `json:"description"`
	MimeType    string  `json:"mimeType,omitempty"`
}

// McpPromptArgument is one argument of a prompt.
type McpPromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// McpPromptSummary is one prompt a server offers, as discovered.
type McpPromptSummary struct {
	Name        string              `json:"name"`
	Description *string             `json:"description"`
	Arguments   []McpPromptArgument `json:"arguments,omitempty"`
}

// McpServerSummary is the seed's McpServerSummary: a server of user Uid,
// its connection state and what was last discovered on it (listing
// never asks the server: the tools are those of its last discovery,
// kept across restarts). Command and NetworkMode are set for a stdio
// server (URL is then ""), and Device for one on a remote device. Times are Unix milliseconds.
type McpServerSummary struct {
	ServerID      string           `json:"serverId"`
	Uid           uint32           `json:"uid"`
	Name          string           `json:"name"`
	URL           string           `json:"url"`
	Command       []string         `json:"command,omitempty"`
	NetworkMode   string           `json:"network_mode,omitempty"`
	Device        string           `json:"device,omitempty"`
	Transport     string           `json:"transport"`
	State         string           `json:"state"`
	AuthURL       *string          `json:"authUrl"`
	Error         *string          `json:"error"`
	Instructions  *string          `json:"instructions"`
	Capabilities  json.RawMessage  `json:"capabilities"`
	Tools         []McpToolSummary `json:"tools"`
	ResourceCount int              `json:"resourceCount"`
	// ResourceTemplateCount is how many resource templates it has.
	ResourceTemplateCount int   `json:"resourceTemplateCount"`
	PromptCount           int   `json:"promptCount"`
	CreatedAt             int64 `json:"createdAt"`
	UpdatedAt             int64 `json:"updatedAt"`
}

// McpServerDetail is a server's summary with its discovered resources
// and prompts (the Internal sys.mcp.get, which its files read).
type McpServerDetail struct {
	McpServerSummary
	Resources []McpResourceSummary `json:"resources"`
	Prompts   []McpPromptSummary   `json:"prompts"`
}

// McpAddArgs are sys.mcp.add's args: a server called Name (unique among
// its owner's; no "/", "..", control characters or spaces) reached at
// URL (https, or http to a loopback address only) with Transport, or run
// as Stdio: exactly one of URL and Stdio. Root may add for another Uid.
// CallbackHost is the seed's OAuth callback host (not supported yet).
type McpAddArgs struct {
	Uid          *uint32       `json:"uid,omitempty"`
	Name         string        `json:"name"`
	URL          string        `json:"url,omitempty"`
	CallbackHost string        `json:"callbackHost,omitempty"`
	Transport    *McpTransport `json:"transport,omitempty"`
	Stdio        *McpStdio     `json:"stdio,omitempty"`
}

// McpServerResult is sys.mcp.add's and sys.mcp.refresh's result: the
// server's summary, null for a refresh of a server the caller has not.
type McpServerResult struct {
	Server *McpServerSummary `json:"server"`
}

// McpListArgs are sys.mcp.list's args: root may list another Uid's.
type McpListArgs struct {
	Uid *uint32 `json:"uid,omitempty"`
}

// McpListResult is sys.mcp.list's result, by name.
type McpListResult struct {
	Servers []McpServerSummary `json:"servers"`
}

// McpServerArgs name one server of the caller's (root: of Uid's): by its
// serverId or its name.
type McpServerArgs struct {
	Uid      *uint32 `json:"uid,omitempty"`
	ServerID string  `json:"serverId"`
}

// McpRemoveResult is sys.mcp.remove's result: false for a server the
// caller has not (missing, or another user's).
type McpRemoveResult struct {
	Removed bool `json:"removed"`
}

// McpCallArgs are sys.mcp.call's args: the tool Name of server ServerID
// (its id or name) with Arguments (a JSON object), within TimeoutMs
// (default 60000; at most 600000), after which the call is cancelled
// on the server and fails with 504.
type McpCallArgs struct {
	Uid       *uint32         `json:"uid,omitempty"`
	ServerID  string          `json:"serverId"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	TimeoutMs *int64          `json:"timeoutMs,omitempty"`
}

// McpCallResult is sys.mcp.call's result, the server's CallToolResult:
// Content (its content blocks) and StructuredContent as the server gave
// them, IsError for a tool's own failure. A result over 1 MiB is kept
// as a file instead (Blob), and Content and StructuredContent are left
// out.
type McpCallResult struct {
	Content           json.RawMessage `json:"content,omitempty"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	Blob              *McpResultBlob  `json:"blob,omitempty"`
}

// McpResultBlob is a large result kept as a file: its namespace Path
// (/mcp/<user>/<server>/results/<sha256 hex>, readable by its owner),
// its size and the first bytes of its text (Preview, at most 4 KiB).
type McpResultBlob struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"sizeBytes"`
	Preview   string `json:"preview"`
}

// McpToolsArgs are sys.mcp.tools's args: the tools of the caller's
// servers (root: Uid's), or of one (ServerID, its id or name), whose
// name or description holds every word of Query (case-insensitive; ""
// matches all), at most Limit (default 20, at most 200).
type McpToolsArgs struct {
	Uid      *uint32 `json:"uid,omitempty"`
	ServerID string  `json:"serverId,omitempty"`
	Query    string  `json:"query,omitempty"`
	Limit    int     `json:"limit,omitempty"`
}

// McpFoundTool is one tool sys.mcp.tools found: its server and itself.
type McpFoundTool struct {
	ServerID string `json:"serverId"`
	Server   string `json:"server"`
	McpToolSummary
}

// McpToolsResult is sys.mcp.tools's result: the tools found, the best
// matches first (a word in the name before one in the description).
type McpToolsResult struct {
	Tools []McpFoundTool `json:"tools"`
}

// McpGetArgs are the Internal sys.mcp.get's args: the server ServerID
// (its id or name) of user Uid.
type McpGetArgs struct {
	Uid      uint32
	ServerID string
}

// McpResultArgs are the Internal sys.mcp.result's args: the kept result
// Digest (sha256 hex) of user Uid's server ServerID; an empty Digest
// lists them.
type McpResultArgs struct {
	Uid      uint32
	ServerID string
	Digest   string
}

// McpResourceReadArgs are sys.mcp.resource.read's args: the resource URI
// of server ServerID (its id or name; root: of Uid's), read
// (resources/read) within TimeoutMs (as McpCallArgs's).
type McpResourceReadArgs struct {
	Uid      *uint32 `json:"uid,omitempty"`
	ServerID string  `json:"serverId"`
	URI      string  `json:"uri"`
	// Arguments, if given, make URI a resource template (RFC 6570,
	// "test://big/{bytes}") expanded with them: the resource read is
	// the expansion's.
	Arguments map[string]string `json:"arguments,omitempty"`
	TimeoutMs *int64            `json:"timeoutMs,omitempty"`
}

// McpResourceReadResult is sys.mcp.resource.read's result: the server's
// ReadResourceResult's Contents (each {uri, mimeType?, text?, blob?}) as
// it gave them, or, over 1 MiB, Blob (kept as a large call result is).
type McpResourceReadResult struct {
	Contents json.RawMessage `json:"contents,omitempty"`
	Blob     *McpResultBlob  `json:"blob,omitempty"`
}

// McpPromptGetArgs are sys.mcp.prompt.get's args: the prompt Name of
// server ServerID (its id or name; root: of Uid's) with Arguments
// (prompts/get), within TimeoutMs (as McpCallArgs's).
type McpPromptGetArgs struct {
	Uid       *uint32           `json:"uid,omitempty"`
	ServerID  string            `json:"serverId"`
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
	TimeoutMs *int64            `json:"timeoutMs,omitempty"`
}

// McpPromptGetResult is sys.mcp.prompt.get's result: the server's
// GetPromptResult, its Description and Messages (each {role, content})
// as it gave them, or, over 1 MiB, Blob.
type McpPromptGetResult struct {
	Description string          `json:"description,omitempty"`
	Messages    json.RawMessage `json:"messages,omitempty"`
	Blob        *McpResultBlob  `json:"blob,omitempty"`
}

// McpSubscribeArgs are sys.mcp.resource.subscribe's and
// .unsubscribe's args: the resource URI of server ServerID (its id or
// name; root: of Uid's), asked within TimeoutMs (as McpCallArgs's).
type McpSubscribeArgs struct {
	Uid       *uint32 `json:"uid,omitempty"`
	ServerID  string  `json:"serverId"`
	URI       string  `json:"uri"`
	TimeoutMs *int64  `json:"timeoutMs,omitempty"`
}

// McpSubscribeResult is their result: whether the URI is subscribed to
// now (an unsubscribe answers false; Changed says whether the call
// changed it).
type McpSubscribeResult struct {
	Subscribed bool `json:"subscribed"`
	Changed    bool `json:"changed"`
}

// McpResourceUpdated is the payload of mcp.resource.updated: a resource
// subscribed to (URI) of server ServerID (named Server) changed.
type McpResourceUpdated struct {
	ServerID string `json:"serverId"`
	Server   string `json:"server"`
	URI      string `json:"uri"`
}
