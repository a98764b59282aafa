package abi

// The proc syscalls the scheduler makes (a schedule's target, and the
// reach check of its target), until proc's own table (calls_proc.go)
// declares them.
var (
	ProcSpawn = Call[SpawnArgs, *SpawnResult]{Name: "proc.spawn", Grant: Users,
		Doc: "Starts a process of a profile for the caller, optionally with a first prompt."}
	ProcSend = Call[SendArgs, *SendResult]{Name: "proc.send", Grant: Users,
		Doc: "Sends a message (or an event) to a process's conversation, starting or queueing a run."}
	ProcStatus = Call[PidArgs, *StatusResult]{Name: "proc.status", Grant: Users,
		Doc: "A process's state, its conversations and its current run."}
	ProcCheckpoint = Call[CheckpointArgs, *CheckpointResult]{Name: "proc.checkpoint", Grant: Users,
		Doc: "Writes a checkpoint of a process's conversation to its files."}
	ProcConversationGet = Call[ConvArgs, *ConversationGetResult]{Name: "proc.conversation.get", Grant: Users,
		Doc: "One conversation of a process."}
	ProcConversationReset = Call[ConvArgs, *ConvResetResult]{Name: "proc.conversation.reset", Grant: Users,
		Doc: "Empties a conversation of a process, archiving its messages."}
	ProcConversationCompact = Call[CompactArgs, *CompactResult]{Name: "proc.conversation.compact", Grant: Users,
		Doc: "Replaces a conversation's older messages with a summary, keeping the latest ones."}
)
