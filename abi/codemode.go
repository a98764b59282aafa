package abi

import "encoding/json"

// CodeModeRunArgs are the args of codemode.run: run Code, the body of an
// async JavaScript function, as the process Pid (default: the caller's
// init). Argv and Args are the block's argv and args (Args any JSON
// value, such as an object of --arg key=value). Target and Cwd are the
// defaults of the block's shell and fs calls that name none. TimeoutMs
// bounds the run (default 30000).
type CodeModeRunArgs struct {
	Pid       string          `json:"pid,omitempty"`
	Code      string          `json:"code"`
	Argv      []string        `json:"argv,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	Target    string          `json:"target,omitempty"`
	Cwd       string          `json:"cwd,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
}

// CodeModeExecArgs are the args of codemode.exec, the agent's CodeMode
// tool: Code runs as the calling process.
type CodeModeExecArgs struct {
	Code      string `json:"code"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// CodeModeResult is the result of codemode.run and codemode.exec: Status
// "completed" with Result (the block's return value, null for none) or
// "failed" with Error; Logs are the block's console lines.
type CodeModeResult struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Logs   []string        `json:"logs,omitempty"`
}
