package abi

// The proc room's signals: a process's runs, its changes and its
// lifecycle (docs/runs.md, docs/processes.md). Every payload names its
// process (Scoped); a payload's fields are in the order of their JSON
// keys, which are what the signal frames carry.
var (
	SigProcRunStarted = Signal[RunStarted]{Name: "proc.run.started",
		Doc: "A run of a process started."}
	SigProcRunStream = Signal[RunText]{Name: "proc.run.stream",
		Doc: "Text of a run's answer, as the model streams it."}
	SigProcRunOutput = Signal[RunOutput]{Name: "proc.run.output",
		Doc: "A model call of a run answered: its whole text and how many tools it calls."}
	SigProcRunToolStarted = Signal[ToolStarted]{Name: "proc.run.tool.started",
		Doc: "A run's tool call started: the syscall it makes."}
	SigProcRunToolFinished = Signal[ToolFinished]{Name: "proc.run.tool.finished",
		Doc: "A run's tool call finished, or failed."}
	SigProcRunHilRequested = Signal[HilRequested]{Name: "proc.run.hil.requested",
		Doc: "A run waits for a human to approve a tool call."}
	SigProcRunCheckpoint = Signal[RunCheckpointed]{Name: "proc.run.checkpoint",
		Doc: "A run parked at a checkpoint, waiting for a directive."}
	SigProcRunDirective = Signal[RunDirected]{Name: "proc.run.directive",
		Doc: "A checkpoint of a run was decided."}
	SigProcRunResumed = Signal[RunResumed]{Name: "proc.run.resumed",
		Doc: "A run parked at a checkpoint went on."}
	SigProcRunFinished = Signal[RunFinished]{Name: "proc.run.finished",
		Doc: "A run ended: completed, aborted or failed."}
	SigChatDelta = Signal[RunText]{Name: "chat.delta",
		Doc: "Text of a chat run's answer, to the connection that started the run."}
	SigChatComplete = Signal[ChatComplete]{Name: "chat.complete",
		Doc: "A chat run ended, to the connection that started it."}
	SigProcChanged = Signal[ProcChanged]{Name: "proc.changed",
		Doc: "A process's stored state changed: a spawn, a queued message, a conversation, a policy, an approval."}
	SigProcessLifecycle = Signal[ProcessLifecycle]{Name: "process.lifecycle",
		Doc: "A process or a conversation was reset, killed, checkpointed, compacted or forked."}
)

// RunStarted is the payload of proc.run.started.
type RunStarted struct {
	ConversationID string `json:"conversationId"`
	Pid            string `json:"pid"`
	RunID          string `json:"runId"`
}

// SignalScope returns the run's process and conversation.
func (p RunStarted) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// RunText is the payload of proc.run.stream and chat.delta: a piece of
// a run's answer.
type RunText struct {
	ConversationID string `json:"conversationId"`
	Pid            string `json:"pid"`
	RunID          string `json:"runId"`
	Text           string `json:"text"`
}

// SignalScope returns the run's process and conversation.
func (p RunText) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// RunOutput is the payload of proc.run.output: a model call's whole
// text, and the number of tool calls it makes.
type RunOutput struct {
	ConversationID string `json:"conversationId"`
	Pid            string `json:"pid"`
	RunID          string `json:"runId"`
	Text           string `json:"text"`
	ToolCalls      int    `json:"toolCalls"`
}

// SignalScope returns the run's process and conversation.
func (p RunOutput) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// ToolStarted is the payload of proc.run.tool.started: the model's tool
// and the syscall it makes.
type ToolStarted struct {
	CallID         string `json:"callId"`
	ConversationID string `json:"conversationId"`
	Pid            string `json:"pid"`
	RunID          string `json:"runId"`
	Syscall        string `json:"syscall"`
	ToolName       string `json:"toolName"`
}

// SignalScope returns the run's process and conversation.
func (p ToolStarted) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// ToolFinished is the payload of proc.run.tool.finished.
type ToolFinished struct {
	CallID         string `json:"callId"`
	ConversationID string `json:"conversationId"`
	IsError        bool   `json:"isError"`
	Pid            string `json:"pid"`
	RunID          string `json:"runId"`
	ToolName       string `json:"toolName"`
}

// SignalScope returns the run's process and conversation.
func (p ToolFinished) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// HilRequested is the payload of proc.run.hil.requested: the request
// (its RunID names the run).
type HilRequested struct {
	Pid     string      `json:"pid"`
	Request *HilRequest `json:"request"`
}

// SignalScope returns the process; the signal names no conversation.
func (p HilRequested) SignalScope() (string, string) { return p.Pid, "" }

// RunCheckpointed is the payload of proc.run.checkpoint: the checkpoint
// Seq of the run, why it parked, its snapshot, the run's state
// (RunPaused, or RunAwaitingDecision when it soft-continues at
// SoftContinueAt).
type RunCheckpointed struct {
	Pid            string             `json:"pid"`
	Reason         string             `json:"reason"`
	RunID          string             `json:"runId"`
	Seq            int64              `json:"seq"`
	Snapshot       CheckpointSnapshot `json:"snapshot"`
	SoftContinueAt *int64             `json:"softContinueAt,omitempty"`
	State          string             `json:"state"`
}

// SignalScope returns the process; the signal names no conversation.
func (p RunCheckpointed) SignalScope() (string, string) { return p.Pid, "" }

// RunDirected is the payload of proc.run.directive: the checkpoint Seq
// of the run was decided by a directive of Type, with Result (as
// DirectiveResult's) and the effects applied.
type RunDirected struct {
	EffectsApplied []string `json:"effectsApplied"`
	Pid            string   `json:"pid"`
	Result         string   `json:"result"`
	RunID          string   `json:"runId"`
	Seq            int64    `json:"seq"`
	Type           string   `json:"type"`
}

// SignalScope returns the process; the signal names no conversation.
func (p RunDirected) SignalScope() (string, string) { return p.Pid, "" }

// RunResumed is the payload of proc.run.resumed: the run went on from
// checkpoint Seq, How ("directive", "tool-finished", "soft-continue").
type RunResumed struct {
	How   string `json:"how"`
	Pid   string `json:"pid"`
	RunID string `json:"runId"`
	Seq   int64  `json:"seq"`
}

// SignalScope returns the process; the signal names no conversation.
func (p RunResumed) SignalScope() (string, string) { return p.Pid, "" }

// RunFinished is the payload of proc.run.finished: the run's Status
// (RunCompleted, RunAborted, RunFailed); Aborted is set when it was
// aborted, Error when it failed.
type RunFinished struct {
	Aborted        bool   `json:"aborted,omitempty"`
	ConversationID string `json:"conversationId"`
	Error          string `json:"error,omitempty"`
	Pid            string `json:"pid"`
	RunID          string `json:"runId"`
	Status         string `json:"status"`
}

// SignalScope returns the run's process and conversation.
func (p RunFinished) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// ChatComplete is the payload of chat.complete: as RunFinished, with
// Aborted always shown.
type ChatComplete struct {
	Aborted        bool   `json:"aborted"`
	ConversationID string `json:"conversationId"`
	Pid            string `json:"pid"`
	RunID          string `json:"runId"`
	Status         string `json:"status"`
}

// SignalScope returns the run's process and conversation.
func (p ChatComplete) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// ProcChanged is the payload of proc.changed: Change says what of the
// process changed, and the fields it names are set:
//
//	spawn                Profile
//	queue                ConversationID, RunID (the run the message will start)
//	hil                  RequestID, Decision
//	conversation.open    ConversationID
//	conversation.close   ConversationID
//	policy               ConversationID
type ProcChanged struct {
	Change         string `json:"change"`
	ConversationID string `json:"conversationId,omitempty"`
	Decision       string `json:"decision,omitempty"`
	Pid            string `json:"pid"`
	Profile        string `json:"profile,omitempty"`
	RequestID      string `json:"requestId,omitempty"`
	RunID          string `json:"runId,omitempty"`
}

// SignalScope returns the process, and the conversation when it names
// one.
func (p ProcChanged) SignalScope() (string, string) { return p.Pid, p.ConversationID }

// ProcessLifecycle is the payload of process.lifecycle: Event says what
// happened, and the fields it names are set:
//
//	process.reset, process.killed   -
//	process.checkpointed            Paths (the files written)
//	conversation.reset              ConversationID
//	conversation.compacted          ConversationID, SegmentID, ArchivedMessages
//	conversation.forked             ConversationID (the source), TargetConversationID
type ProcessLifecycle struct {
	ArchivedMessages     int64    `json:"archivedMessages,omitempty"`
	ConversationID       string   `json:"conversationId,omitempty"`
	Event                string   `json:"event"`
	Paths                []string `json:"paths,omitempty"`
	Pid                  string   `json:"pid"`
	SegmentID            string   `json:"segmentId,omitempty"`
	TargetConversationID string   `json:"targetConversationId,omitempty"`
}

// SignalScope returns the process, and the conversation when it names
// one.
func (p ProcessLifecycle) SignalScope() (string, string) { return p.Pid, p.ConversationID }
