package abi

import "encoding/json"

// ShellExecArgs are the args of shell.exec. Without SessionID it starts a
// command, a job: Input run with /bin/sh -c in Cwd (default: the caller's
// cwd) on the device Target, for at most TimeoutMs (default 2 minutes, at
// most 10); Background returns at once with the job instead of waiting
// for the command. With SessionID, the job's id (the seed calls a job a
// shell session, hence the field's name), it continues that job: an
// empty Input polls it, any other Input is written to the command's stdin
// (Cwd, TimeoutMs and Background are then ignored).
type ShellExecArgs struct {
	Target     string `json:"target,omitempty"`
	Cwd        string `json:"cwd,omitempty"`
	Input      string `json:"input"`
	SessionID  string `json:"sessionId,omitempty"`
	TimeoutMs  int64  `json:"timeoutMs,omitempty"`
	Background bool   `json:"background,omitempty"`
}

// ShellExecResult is shell.exec's result. A command has a Status:
// "running" while it runs (its SessionID names the job to poll),
// "completed" when it exited 0, else "failed". Output is its output
// (stdout and stderr merged) not returned before, the tail kept:
// Truncated says earlier output was dropped. ExitCode is set when it
// exited (nil when it was stopped: timed out, cancelled, the daemon
// shutting down) and Error when it failed. SessionID is set on every
// result of a job that a result has named before. A command that
// could not start has no Status: the result is {ok:false, error}.
type ShellExecResult struct {
	Error     string `json:"error,omitempty"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	Output    string `json:"output"`
	SessionID string `json:"sessionId,omitempty"`
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
