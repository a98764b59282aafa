package abi

// The audit log's syscalls (the kernel's): the records the dispatcher
// writes for every syscall that changes state or reaches outside.
var (
	SysAuditQuery = Call[AuditQueryArgs, *AuditQueryResult]{Name: "sys.audit.query", Grant: Users, Flags: Read,
		Doc: "Audit records, oldest first, filtered by pid, user, syscall, trace and time (a user: their own; root: all)."}
	SysAuditVerify = Call[AuditVerifyArgs, *AuditVerifyResult]{Name: "sys.audit.verify", Flags: Read,
		Doc: "Checks the audit log's hash chain from its first kept record (root only)."}
)

// AuditQueryArgs are sys.audit.query's args. Every filter is optional;
// After and Limit page through the log (a follower passes the last seq
// it saw).
type AuditQueryArgs struct {
	// Pid keeps the records of calls made by or naming this process.
	Pid string `json:"pid,omitempty"`
	// Uid keeps one user's records (root only; a user always sees only
	// their own).
	Uid *uint32 `json:"uid,omitempty"`
	// Syscall keeps the records of one syscall (a name, or a prefix
	// ending in "." such as "proc.").
	Syscall string `json:"syscall,omitempty"`
	// Trace keeps the records of one trace.
	Trace string `json:"trace,omitempty"`
	// Since keeps records from this long ago ("1h", "30m", "2d") or
	// from this RFC 3339 time.
	Since string `json:"since,omitempty"`
	// After keeps records whose seq is greater.
	After int64 `json:"after,omitempty"`
	// Limit bounds the records answered (default and maximum 1000).
	Limit int `json:"limit,omitempty"`
	// Last answers the newest Limit records that match (still oldest
	// first) instead of the oldest.
	Last bool `json:"last,omitempty"`
}

// AuditQueryResult is sys.audit.query's answer.
type AuditQueryResult struct {
	Records []AuditRecord `json:"records"`
}

// AuditRecord is one record of the audit log. Kind "change" is written
// in the same store transaction as a change the syscall made (one per
// transaction), with code 200 (it committed) and the time from dispatch
// to the change; kind "call" when the syscall returned, with its result
// code and duration, unless it succeeded after a change (its change
// record is then its one record). Args is a digest of the arguments:
// short scalar values, secrets and contents replaced by their size.
type AuditRecord struct {
	Seq      int64  `json:"seq"`
	Time     int64  `json:"time"` // Unix milliseconds
	Kind     string `json:"kind"`
	CallID   string `json:"callId"`
	Uid      uint32 `json:"uid"`
	Username string `json:"username,omitempty"`
	Role     string `json:"role,omitempty"`
	TokenID  string `json:"tokenId,omitempty"`
	Pid      string `json:"pid,omitempty"`
	Conv     string `json:"conversation,omitempty"`
	Syscall  string `json:"syscall"`
	Target   string `json:"target,omitempty"`
	Code     int    `json:"code"`
	DurUs    int64  `json:"durationUs"`
	Trace    string `json:"traceId,omitempty"`
	Args     string `json:"args,omitempty"`
	Prev     string `json:"prev"`
	Hash     string `json:"hash"`
}

// AuditVerifyArgs are sys.audit.verify's args: none.
type AuditVerifyArgs struct{}

// AuditVerifyResult is sys.audit.verify's answer: Intact when every kept
// record's hash is its contents' and each holds its predecessor's hash;
// else the first record that breaks the chain and why.
type AuditVerifyResult struct {
	Intact  bool   `json:"intact"`
	Records int64  `json:"records"`
	First   int64  `json:"first,omitempty"`
	Last    int64  `json:"last,omitempty"`
	BadSeq  int64  `json:"badSeq,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// readCalls are the syscalls declared before the Read flag that change
// nothing and reach nothing outside: the audit log leaves them out
// unless reads are audited.
var readCalls = map[string]bool{}

func init() {
	for _, d := range []Desc{
		SysWhoami, SysSyscallList, SysUserList, SysGroupList, SysConfigGet, SysTokenList,
		SysEvents, SysLastError,
		FsRead, FsSearch, FsStat, FsReaddir, FsOpen, FsReadlink, FsStatfs, FsOpenread, FsReadraw,
		ProcessCapGet, ProcessSessionList, ProcessSessionGet, ProcessSessionOutput,
		ProcessBlobRead, ProcessBlobOpen, ProcessBlobList,
		SysDeviceList, SysDeviceGet,
		ProcIpcList, SignalList, ProcConversationState, ProcRunState,
		SysMcpList, SysMcpTools, SysMcpGet, SysMcpResultList, SysMcpResultOpen, SysOauthList,
		NotificationList, NotificationFiles, NotificationFile,
		ProcList, ProcGet, ProcStatus, ProcEvents, ProcProfileList, ProcRunGet, ProcRunList,
		ProcHistory, ProcHistoryOpen, ProcConversationList, ProcConversationGet,
		ProcConversationLookup, ProcConversationPolicyGet, ProcConversationSegments,
		ProcConversationSegmentRead,
		SchedList, SchedCrontabGet, SchedCrontabCheck, SchedLog, SchedOwners,
		AdapterStatus,
	} {
		readCalls[d.CallName()] = true
	}
	for _, d := range []Desc{FsPread, FsPwrite, FsFsync} {
		dataCalls[d.CallName()] = true
	}
}

// dataCalls are the data transfers declared before the Data flag.
var dataCalls = map[string]bool{}

// Audited reports whether the audit log records calls of d: every
// syscall but the reads (the Read flag, or a read declared before it)
// and the data transfers (Data), unless reads are audited too.
func Audited(d Desc, reads bool) bool {
	f := d.CallFlags()
	if f&Data != 0 || dataCalls[d.CallName()] {
		return false
	}
	if f&Read != 0 || readCalls[d.CallName()] {
		return reads
	}
	return true
}
