package abi

import "encoding/json"

// ShellExecArgs are the args of shell.exec: run Input with /bin/sh -c in
// Cwd (default: the caller's cwd) on the device Target, for at most
// TimeoutMs (default 2 minutes, at most 10). SessionID continues a shell
// session (not supported yet).
type ShellExecArgs struct {
	Target    string `json:"target,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	Input     string `json:"input"`
	SessionID string `json:"sessionId,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// ShellExecResult is shell.exec's result. A command that ran has a Status
// ("completed" when it exited 0, else "failed"), its Output (stdout and
// stderr merged, the tail kept: Truncated says earlier output was
// dropped), its ExitCode when it exited (nil when it was stopped: timed
// out, cancelled, the daemon shutting down) and, when it failed, an
// Error. A command that could not start has no Status: the result is
// {ok:false, error}.
type ShellExecResult struct {
	Error     string `json:"error,omitempty"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	Output    string `json:"output"`
	Status    string `json:"status"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MarshalJSON writes {ok:false, error} for a command that did not start.
func (r ShellExecResult) MarshalJSON() ([]byte, error) {
	if r.Status == "" {
		return failed(r.Error)
	}
	type plain ShellExecResult
	return json.Marshal(plain(r))
}
