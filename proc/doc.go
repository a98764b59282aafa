// Package proc is GSV's agent processes: durable agents with conversations,
// a FIFO message queue, an agent loop whose tools are syscalls made as the
// process's owner, human-in-the-loop approvals, and a history lifecycle
// (compact, fork, segments, reset, kill) that never loses a message.
//
// The Manager is a room of the namespace (ns.Room): Open migrates its
// schema and prepares it, Syscalls is its table of proc.* syscalls (their
// args and results are the abi package's proc types), Mounts binds /proc,
// Start makes every user's init process and resumes the runs a restart
// interrupted, and Close stops every run goroutine. Add it with
// ns.Space.Add. Every read and write of /proc is one of its syscalls made
// as the caller; all state lives in the kernel's SQLite store.
//
// The Manager keeps the process table (processes and conversations) and
// the /proc tree, and delegates the runs to its run engine (engine.go), a
// type of its own that asks the table for what it needs through a small
// interface (processStore). IPC between processes and signal watches are
// the ipc room's (package ipc): proc serves it the kernel-only
// proc.deliver, proc.conversation.state and proc.run.state, and tells it
// when a run ends and before a process is killed (sys_ipc.go).
//
// A process runs at most one run at a time (run.go): its runState is idle,
// starting, running or waiting (on a human's approval), and one function,
// startLocked, starts the goroutine of a run.
package proc
