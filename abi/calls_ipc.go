package abi

import "database/sql"

// The ipc room's syscalls (docs/ipc.md): mail, bounded calls and
// delegations between processes of one owner, and the signal watches of
// processes. Their args and results are in proc.go (IpcSendArgs,
// WatchArgs, ...), where the CLI has always found them.
var (
	ProcIpcSend = Call[IpcSendArgs, *IpcSendResult]{Name: "proc.ipc.send", Grant: Users,
		Doc: "Mail from a process to another process of its owner: it starts a run of the target, or queues behind its running one."}
	ProcIpcCall = Call[IpcCallArgs, *IpcCallResult]{Name: "proc.ipc.call", Grant: Users,
		Doc: "A bounded call from a process to another of its owner, accepted at once: the answer comes back later as an ipc.reply (or ipc.timeout) event."}
	ProcIpcDelegate = Call[IpcDelegateArgs, *IpcDelegateResult]{Name: "proc.ipc.delegate", Grant: Users,
		Doc: "Hands a task to a worker (a new child process, or the one named) as a call; its answer comes back as the call's does."}
	ProcIpcList = Call[PidArgs, *IpcListResult]{Name: "proc.ipc.list", Grant: Users,
		Doc: "The calls a process made or was made, newest first: what /proc/<pid>/ipc shows."}
	ProcIpcDeliver = Call[IpcDeliverArgs, *IpcSendResult]{Name: "proc.ipc.deliver", Grant: Users, Flags: KernelOnly,
		Doc: "Kernel-only: the validated envelope of mail or of a call, into the target's conversation."}
	ProcIpcEnded = Call[IpcEndedArgs, *IpcEndedResult]{Name: "proc.ipc.ended", Flags: KernelOnly,
		Doc: "Kernel-only: the process room tells that a run ended; the call that waited for it is answered."}
	SignalWatch = Call[WatchArgs, *WatchResult]{Name: "signal.watch", Grant: Users,
		Doc: "A process asks to be told (a signal event) when another process of its owner publishes a signal."}
	SignalUnwatch = Call[UnwatchArgs, *UnwatchResult]{Name: "signal.unwatch", Grant: Users,
		Doc: "Removes a process's watch, by id or by key."}
	SignalList = Call[WatchListArgs, *WatchListResult]{Name: "signal.list", Grant: Users,
		Doc: "A process's signal watches."}
	SignalForget = Call[SignalForgetArgs, *UnwatchResult]{Name: "signal.forget", Flags: KernelOnly,
		Doc: "Kernel-only: the process room tells that a process is killed; every watch it holds is removed."}
)

// IpcEndedArgs are proc.ipc.ended's args (kernel-only): the run that
// ended, its end (done, error, aborted) and its error's text.
type IpcEndedArgs struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// IpcEndedResult is proc.ipc.ended's result: whether a call waited for
// the run (its answer is on its way).
type IpcEndedResult struct {
	Waited bool `json:"waited"`
}

// SignalForgetArgs are signal.forget's args (kernel-only): the process
// whose watches go.
type SignalForgetArgs struct {
	Pid string `json:"pid"`
}

// What the ipc room asks of the process room: kernel-only syscalls the
// proc room serves, its whole interface to the process store.
var (
	ProcDeliver = Call[DeliverArgs, *DeliverResult]{Name: "proc.deliver", Flags: KernelOnly | Internal,
		Doc: "Kernel-only: an event of another room (mail, a call, an answer, a watched signal) into a process's conversation: it starts a run, or queues."}
	ProcConversationState = Call[ConvStateArgs, *ConvState]{Name: "proc.conversation.state", Flags: KernelOnly,
		Doc: "Kernel-only: a conversation's generation, status and the narrowing of its work; or those of the conversation a process's current run is in."}
	ProcRunState = Call[RunStateArgs, *RunState]{Name: "proc.run.state", Flags: KernelOnly,
		Doc: "Kernel-only: where a run stands (running, waiting_hil, or its end), the narrowing it acts within and, asked, its final answer."}
)

// DeliverArgs are proc.deliver's args (kernel-only): the event that
// enters conversation ConversationID ("": default) of process Pid, owned
// by Uid. Kind, Source and TraceID are the message's event; a Runtime
// event enters as a visible system message "[Process Event]: <Text>",
// any other as a user message. RunID, if set, is the id of the run the
// message starts (now or from the queue). Process is the narrowing the
// message carries into the conversation (nil: none). Within, if set, runs
// in the transaction that enters the event (as a kernel.UserHook runs in
// the one that makes a user), so that what the caller records of the
// delivery holds exactly when the event is in: a call is pending exactly
// when its request is delivered; its error undoes the delivery.
type DeliverArgs struct {
	Pid            string                 `json:"pid"`
	Uid            uint32                 `json:"uid"`
	ConversationID string                 `json:"conversationId,omitempty"`
	Kind           string                 `json:"kind"`
	Source         EventSource            `json:"source"`
	TraceID        string                 `json:"traceId,omitempty"`
	Text           string                 `json:"text"`
	Runtime        bool                   `json:"runtime,omitempty"`
	RunID          string                 `json:"runId,omitempty"`
	Process        *ProcessCap            `json:"process,omitempty"`
	Within         func(tx StoreTx) error `json:"-"`
}

// StoreTx is a write transaction of the kernel's store as the function
// a Go caller hands a syscall to run in it sees it (a *kernel.Tx; abi
// imports nothing of ours): its statements run in the transaction, and
// the function's error undoes it.
type StoreTx interface {
	Exec(query string, args ...any) (sql.Result, error)
	QueryRow(query string, args ...any) *sql.Row
}

// DeliverResult is proc.deliver's result: the conversation the event
// entered, the run it started or waits for in the queue.
type DeliverResult struct {
	ConversationID string `json:"conversationId"`
	RunID          string `json:"runId"`
	Queued         bool   `json:"queued,omitempty"`
}

// ConvStateArgs are proc.conversation.state's args (kernel-only): the
// conversation ConversationID ("": default) of Pid, or with Current the
// one its current run is in (default when it has none).
type ConvStateArgs struct {
	Pid            string `json:"pid"`
	ConversationID string `json:"conversationId,omitempty"`
	Current        bool   `json:"current,omitempty"`
}

// ConvState is proc.conversation.state's result. Status is "" when the
// process has no such conversation; RunID is the current run asked for
// (Current), "" if none; Cap is the narrowing of the conversation's work:
// its process's and its live generation's. A process that does not exist
// is a 404.
type ConvState struct {
	ConversationID string      `json:"conversationId"`
	Generation     int64       `json:"generation"`
	Status         string      `json:"status"`
	RunID          string      `json:"runId,omitempty"`
	Cap            *ProcessCap `json:"processCap,omitempty"`
}

// RunStateArgs are proc.run.state's args (kernel-only): a run, and
// whether its final answer is wanted.
type RunStateArgs struct {
	RunID  string `json:"runId"`
	Answer bool   `json:"answer,omitempty"`
}

// RunState is proc.run.state's result. Status is "" for a run not
// recorded (unknown, or whose message waits in its process's queue),
// else the run's (running, waiting_hil, done, error, aborted), with its
// Error. Cap is the narrowing the run acts within (its
// process's and its conversation generation's). Answer (asked) is the
// text of the last answer the model gave in the run, as it gave it; ""
// if none.
type RunState struct {
	Pid    string      `json:"pid,omitempty"`
	Status string      `json:"status"`
	Error  string      `json:"error,omitempty"`
	Cap    *ProcessCap `json:"processCap,omitempty"`
	Answer string      `json:"answer,omitempty"`
}
