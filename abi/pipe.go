package abi

import "io"

// ExecPipe is a command of an exec session whose stdin and stdout stay
// open to its caller (process.exec.pipe): a long-lived peer, such as an
// MCP server, speaks with the caller over them. It runs in its session's
// sandbox with the session's rights, as any exec does, and occupies the
// session (one exec at a time) until it ends.
type ExecPipe interface {
	// Stdin writes to the command's stdin; Close closes it (the command
	// reads end of file).
	Stdin() io.WriteCloser
	// Stdout reads the command's stdout. Reads end (io.EOF) once the
	// command has ended, even if a process of it left the pipe open.
	Stdout() io.ReadCloser
	// Done is closed once the command and every process of its sandbox
	// have ended.
	Done() <-chan struct{}
	// Receipt is how the command ended (its exit, its status, its stderr
	// as an exec's receipt keeps it); nil before Done is closed.
	Receipt() *ExecResult
	// Stop ends the command: SIGTERM to each of its processes, SIGKILL
	// after a second. It returns at once.
	Stop()
}
