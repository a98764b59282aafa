// Package abi is GSV's system call interface as data: the request,
// response and signal frames, the error kinds and the *Error every syscall
// returns, and the argument and result type of every public syscall,
// grouped by domain (sys, fs, shell, proc (and IPC, watches), sched,
// device, process (exec sessions), notify).
//
// It is a leaf: it imports nothing of GSV, so the daemon, its rooms, the
// gsv CLI and a device daemon share one definition of every message
// (tailscale's tailcfg is the model). A change of shape is a compile
// error in every party, never a runtime surprise.
//
// The types are also the syscalls' JSON Schemas (package abi/schema
// infers them; /sys/syscalls/<name>/schema shows them): an args field a
// caller may leave out is tagged omitempty, which makes it optional
// there; every other field is required.
package abi
