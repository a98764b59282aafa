package abi

import "encoding/json"

// The agent's tools' arguments, as a model gives them. Each tool's JSON
// Schema, which the model is shown, is inferred from its type here
// (abi/schema.Tool): a field tagged omitempty is optional, the others
// required; a jsonschema tag is the field's description. The agent loop
// passes the arguments on to the tool's syscall, whose strict decoding
// refuses a field it does not know.

// ToolTarget is the device a routable tool (a file tool, Shell) runs on.
type ToolTarget struct {
	Target string `json:"target,omitempty" jsonschema:"the device to run on (see the devices in your instructions); omit for this machine"`
}

// ReadTool is the Read tool's arguments (fs.read): a file's lines from
// Offset, at most Limit of them, or a directory's listing.
type ReadTool struct {
	ToolTarget
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// WriteTool is the Write tool's arguments (fs.write).
type WriteTool struct {
	ToolTarget
	Path    string `json:"path"`
	Content string `json:"content"`
}

// EditTool is the Edit tool's arguments (fs.edit).
type EditTool struct {
	ToolTarget
	Path       string `json:"path"`
	OldString  string `json:"oldString"`
	NewString  string `json:"newString"`
	ReplaceAll bool   `json:"replaceAll,omitempty"`
}

// DeleteTool is the Delete tool's arguments (fs.delete).
type DeleteTool struct {
	ToolTarget
	Path string `json:"path"`
}

// SearchTool is the Search tool's arguments (fs.search).
type SearchTool struct {
	ToolTarget
	Query   string `json:"query"`
	Path    string `json:"path,omitempty"`
	Include string `json:"include,omitempty"`
}

// ShellTool is the Shell tool's arguments: shell.exec's, its Command
// given as the Input.
type ShellTool struct {
	ToolTarget
	Command   string `json:"command"`
	Cwd       string `json:"cwd,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// NoToolArgs are the arguments of a tool that takes none (Processes,
// Runs).
type NoToolArgs struct{}

// MailTool is the Mail tool's arguments (proc.ipc.send).
type MailTool struct {
	Pid     string `json:"pid"`
	Message string `json:"message"`
}

// CallTool is the Call tool's arguments (proc.ipc.call).
type CallTool struct {
	Pid       string `json:"pid"`
	Message   string `json:"message"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// DelegateTool is the Delegate tool's arguments (proc.ipc.delegate).
type DelegateTool struct {
	Task      string `json:"task"`
	Label     string `json:"label,omitempty"`
	Profile   string `json:"profile,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// DirectTool is the Direct tool's arguments (proc.directive): the
// directive is an object the tool's description spells out.
type DirectTool struct {
	Pid        string                     `json:"pid"`
	Checkpoint int64                      `json:"checkpoint,omitempty"`
	Directive  map[string]json.RawMessage `json:"directive"`
}

// WatchTool is the Watch tool's arguments (signal.watch).
type WatchTool struct {
	Signal    string `json:"signal"`
	ProcessID string `json:"processId"`
	Once      bool   `json:"once,omitempty"`
	TTLMs     int64  `json:"ttlMs,omitempty"`
}

// McpTool is the Mcp tool's arguments: without Tool, a search of the
// owner's MCP tools (sys.mcp.tools, of Server alone if given); with
// Server and Tool, a call (sys.mcp.call).
type McpTool struct {
	Search    string          `json:"search,omitempty" jsonschema:"words to find in the tools' names and descriptions ('' lists them)"`
	Server    string          `json:"server,omitempty" jsonschema:"the MCP server: to call one of its tools, or to search only its tools"`
	Tool      string          `json:"tool,omitempty" jsonschema:"the tool to call"`
	Arguments json.RawMessage `json:"arguments,omitempty" jsonschema:"the tool's arguments, a JSON object as its input schema says"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
}

// CodeModeTool is the CodeMode tool's arguments (codemode.exec).
type CodeModeTool struct {
	Code      string `json:"code" jsonschema:"the body of an async JavaScript function"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// SkillTool is the Skill tool's arguments: the name of a skill listed in
// the agent's instructions, whose SKILL.md body it loads.
type SkillTool struct {
	Name string `json:"name" jsonschema:"the skill's name, as your instructions list it"`
}
