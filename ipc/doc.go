// Package ipc is the ipc room: processes of one owner talking to each
// other (docs/ipc.md). Mail (proc.ipc.send), bounded calls whose answer
// comes back (proc.ipc.call), delegations to a worker
// (proc.ipc.delegate), and signal watches (signal.watch, signal.unwatch,
// signal.list): a process is told, as an event in its conversation, when
// another of its owner's processes publishes a signal.
//
// The Room is a room of the namespace (ns.Room, ns.Starter, ns.Grafter):
// Open migrates its tables, Syscalls is its table (typed descriptors,
// abi/calls_ipc.go), Grafts adds its files to each /proc/<pid> (the ipc
// file, and the mail, call, delegate, watch and unwatch verbs of the
// process's ctl), Start arms the pending calls again and observes the
// signal bus, and Close stops its timers and goroutines. Add it after
// the process room, with ns.Space.Add.
//
// It never imports the process room: what it needs of processes and
// conversations it asks through the dispatcher (proc.get, proc.spawn and
// the kernel-only proc.deliver, proc.conversation.state and
// proc.run.state), and the process room tells it when a run ends
// (proc.ipc.ended) and before a process is killed (signal.forget).
package ipc
