package abi

import "os"

// The proc room's syscalls: processes, their runs, conversations and
// human approvals (docs/processes.md, docs/runs.md). IPC and watches
// (proc.ipc.*, signal.*) are described with their room.
var (
	ProcList = Call[ListArgs, *ProcListResult]{Name: "proc.list", Grant: Users,
		Doc: "The caller's processes (root: everyone's, or one user's)."}
	ProcGet = Call[PidArgs, *Process]{Name: "proc.get", Grant: Users, Flags: Internal,
		Doc: "A process's record, as the namespace looks /proc/<pid> up."}
	ProcStatus = Call[PidArgs, *StatusResult]{Name: "proc.status", Grant: Users,
		Doc: "What /proc/<pid>/status shows: a process's record with its live state, run and queue."}
	ProcEvents = Call[PidArgs, EventStream]{Name: "proc.events", Grant: Users, Flags: Internal,
		Doc: "A live subscription to a process's signals, from now (/proc/<pid>/events)."}
	ProcProfileList = Call[ProfileListArgs, *ProfileList]{Name: "proc.profile.list", Grant: Users,
		Doc: "The process profiles."}
	ProcSpawn = Call[SpawnArgs, *SpawnResult]{Name: "proc.spawn", Grant: Users,
		Doc: "Starts a process of a profile, owned by the caller, with a first message when a prompt is given."}
	ProcSend = Call[SendArgs, *SendResult]{Name: "proc.send", Grant: Users,
		Doc: "Sends a message to a process's conversation: its run starts, or the message is queued."}
	ProcRunGet = Call[PidArgs, *RunInfo]{Name: "proc.run.get", Grant: Users,
		Doc: "A process's run: its state, step, budget, usage and the checkpoint it is parked at."}
	ProcRunList = Call[RunListArgs, *RunListResult]{Name: "proc.run.list", Grant: Users,
		Doc: "The runs under way or parked of the caller's processes (root: one user's, or all)."}
	ProcRunControl = Call[RunControlArgs, *RunInfo]{Name: "proc.run.control", Grant: Users,
		Doc: "Changes a process's run settings; stop parks its run at the next checkpoint, start lets it go on."}
	ProcDirective = Call[DirectiveArgs, *DirectiveResult]{Name: "proc.directive", Grant: Users,
		Doc: "Decides a checkpoint of a process's run: continue (with effects), refocus or abort; the first decision wins."}
	ProcAbort = Call[PidArgs, *AbortResult]{Name: "proc.abort", Grant: Users,
		Doc: "Aborts a process's run under way."}
	ProcHil = Call[HilArgs, *HilResult]{Name: "proc.hil", Grant: Users,
		Doc: "Answers a process's request for a human's approval: approve, deny or substitute."}
	ProcKill = Call[KillArgs, *ResetResult]{Name: "proc.kill", Grant: Users,
		Doc: "Ends a process: its run aborted, every conversation archived (unless told not to) and cleared."}
	ProcReset = Call[PidArgs, *ResetResult]{Name: "proc.reset", Grant: Users,
		Doc: "Archives and clears every conversation of a process."}
	ProcCheckpoint = Call[CheckpointArgs, *CheckpointResult]{Name: "proc.checkpoint", Grant: Users,
		Doc: "Writes a process's conversations (or one) and a summary into its working directory's .gsv."}
	ProcSetidentity = Call[SetIdentityArgs, *SetIdentityResult]{Name: "proc.setidentity", Grant: Users, Flags: KernelOnly,
		Doc: "Sets a process's working directory, workspace and (if given) profile: the kernel's own call."}
	ProcHistory = Call[HistoryArgs, *HistoryResult]{Name: "proc.history", Grant: Users,
		Doc: "A page of a conversation's active messages, and the request waiting for a human, if any."}
	ProcHistoryOpen = Call[HistoryOpenArgs, *os.File]{Name: "proc.history.open", Grant: Users, Flags: Internal,
		Doc: "A conversation's history or transcript, up to date, opened for reading (/proc's history files)."}
	ProcMediaList = Call[MediaFilesArgs, *MediaFilesResult]{Name: "proc.media.list", Grant: Users, Flags: Internal,
		Doc: "The files of a user's media store (/var/media/<user>): the user's own, or root's to read."}
	ProcMediaOpen = Call[MediaFilesArgs, *os.File]{Name: "proc.media.open", Grant: Users, Flags: Internal,
		Doc: "A file of a user's media store, opened for reading (/var/media/<user>/<name>): the user's own, or root's."}
	ProcConversationOpen = Call[ConvArgs, *ConvOpenResult]{Name: "proc.conversation.open", Grant: Users,
		Doc: "Opens a new conversation of a process (an id is made when none is given), or a closed one again."}
	ProcConversationList = Call[ConvArgs, *ConvListResult]{Name: "proc.conversation.list", Grant: Users,
		Doc: "A process's open conversations (and the closed ones, when asked)."}
	ProcConversationGet = Call[ConvArgs, *ConversationGetResult]{Name: "proc.conversation.get", Grant: Users,
		Doc: "A conversation's record; none when the process has no conversation of that id."}
	ProcConversationLookup = Call[ConvArgs, *Conversation]{Name: "proc.conversation.lookup", Grant: Users, Flags: Internal,
		Doc: "A conversation's record without its message count, as the namespace looks it up."}
	ProcConversationClose = Call[ConvArgs, *ConvCloseResult]{Name: "proc.conversation.close", Grant: Users,
		Doc: "Closes a conversation: it takes no messages until it is opened again."}
	ProcConversationReset = Call[ConvArgs, *ConvResetResult]{Name: "proc.conversation.reset", Grant: Users,
		Doc: "Archives (unless told not to) and clears a conversation into a new generation."}
	ProcConversationPolicyGet = Call[PolicyArgs, *PolicyResult]{Name: "proc.conversation.policy.get", Grant: Users,
		Doc: "A conversation's context policy: what happens when it overflows, when to compact, what to keep."}
	ProcConversationPolicySet = Call[PolicyArgs, *PolicyResult]{Name: "proc.conversation.policy.set", Grant: Users,
		Doc: "Changes the fields given of a conversation's context policy."}
	ProcConversationCompact = Call[CompactArgs, *CompactResult]{Name: "proc.conversation.compact", Grant: Users,
		Doc: "Archives a conversation's older messages into a segment and replaces them with a summary."}
	ProcConversationFork = Call[ForkArgs, *ForkResult]{Name: "proc.conversation.fork", Grant: Users,
		Doc: "Makes a new conversation from a conversation's messages through a message or a segment."}
	ProcConversationSegments = Call[ConvArgs, *SegmentsResult]{Name: "proc.conversation.segments", Grant: Users,
		Doc: "A conversation's segment records, oldest first."}
	ProcConversationSegmentRead = Call[SegmentReadArgs, *SegmentReadResult]{Name: "proc.conversation.segment.read", Grant: Users,
		Doc: "A page of a segment's archived messages."}
)

// SetIdentityArgs are proc.setidentity's args: the process Pid gets
// Identity's working directory and workspace, and Profile when it is set.
type SetIdentityArgs struct {
	Pid      string    `json:"pid"`
	Identity *Identity `json:"identity"`
	Profile  string    `json:"profile"`
}

// HistoryOpenArgs are proc.history.open's args: the conversation
// (default: default) of the process Pid, and the rendering Kind,
// "history" (JSON lines) or "transcript" (text).
type HistoryOpenArgs struct {
	Pid            string
	ConversationID string
	Kind           string
}
