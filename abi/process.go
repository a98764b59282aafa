package abi

import (
	"slices"
	"strconv"
	"strings"
)

// Exec sessions: process.session.open, process.exec,
// process.session.signal and process.session.list, in the seed's shapes
// (snake_case fields). A session is a boundary decided at open (its
// mounts, network, workdir, environment and ceilings); every exec runs
// inside it with the opener's authority.

// Network modes of a session.
const (
	NetworkNone = "none" // loopback only
	NetworkFull = "full" // the host's network
)

// Mount modes of a session's mount.
const (
	MountRO = "ro"
	MountRW = "rw"
)

// ProcessMount is one mount of a session: the directory HostPath (a path
// in the caller's namespace, such as "~/proj" or "/workspaces/x"; a raw
// host path for root) at GuestPath inside the sandbox, read-only ("ro")
// or read-write ("rw").
type ProcessMount struct {
	HostPath  string `json:"host_path"`
	GuestPath string `json:"guest_path"`
	Mode      string `json:"mode"`
}

// ProcessLocalTarget is the local runtime's session definition: its
// mounts, its working directory (a guest path; default: the first mount's
// guest path, else the session's home), extra environment, and its
// network mode ("none" or "full").
type ProcessLocalTarget struct {
	Mounts      []ProcessMount    `json:"mounts,omitempty"`
	Workdir     string            `json:"workdir,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	NetworkMode string            `json:"network_mode"`
}

// ProcessDeviceTarget is a session on a remote device: the device's id
// and the session's definition, as ProcessLocalTarget's but with paths
// of the device (its export; "~" the device user's home).
type ProcessDeviceTarget struct {
	ID string `json:"id"`
	ProcessLocalTarget
}

// ProcessTarget is the runtime a session runs on, a tagged variant:
// exactly one arm is set. Local is the kernel host's; Device a remote
// device's, where the session runs in that device's own sandbox.
type ProcessTarget struct {
	Local  *ProcessLocalTarget  `json:"local,omitempty"`
	Device *ProcessDeviceTarget `json:"device,omitempty"`
}

// SessionOpenArgs are process.session.open's args. SessionTTLNs is how
// long the session lives (default 1 h, at most the caller's ceiling);
// Labels are the caller's own names for it.
type SessionOpenArgs struct {
	Target       ProcessTarget     `json:"target"`
	SessionTTLNs *int64            `json:"session_ttl_ns,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// Isolation states what a session's sandbox applies, as built: the
// runtime, the mounts as mounted (a mode narrowed to what the caller may
// do), the network, pid and user namespaces, the host uid its processes
// run as, the seccomp filter and the ceilings of each exec.
type Isolation struct {
	Runtime string         `json:"runtime"`
	Mount   string         `json:"mount"`
	Mounts  []ProcessMount `json:"mounts"`
	Network string         `json:"network"`
	PID     string         `json:"pid"`
	User    string         `json:"user"`
	HostUID uint32         `json:"host_uid"`
	Seccomp string         `json:"seccomp"`
	Limits  ExecLimits     `json:"limits"`
}

// ExecLimits are the ceilings of one exec: its time, how many output
// bytes are kept per stream, how many processes it may run at once.
type ExecLimits struct {
	MaxTimeoutNs   int64 `json:"max_timeout_ns"`
	MaxOutputBytes int64 `json:"max_output_bytes"`
	MaxProcesses   int   `json:"max_processes"`
}

// The statuses of process.session.open's receipt.
const (
	SessionReady = "ready"
	SessionError = "error"
)

// SessionOpenResult is process.session.open's receipt: Status "ready"
// (the sandbox is set up) or "error" (ErrorCode and Error say why: the
// sandbox runtime is unavailable, "sandbox_unavailable", or the sandbox
// could not be set up, "sandbox_failed"; SessionID is then empty). A
// refused open (bad args, the capability, the caller's rights) is the
// call's error, not a receipt.
type SessionOpenResult struct {
	SessionID   string     `json:"session_id"`
	Device      string     `json:"device,omitempty"` // set for a session on a remote device
	Status      string     `json:"status"`
	StartedAtNs int64      `json:"started_at_ns"`
	ExpiresAtNs *int64     `json:"expires_at_ns,omitempty"`
	Isolation   *Isolation `json:"isolation,omitempty"`
	ErrorCode   string     `json:"error_code,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// Output modes of process.exec.
const (
	OutputAuto          = "auto"
	OutputRequireInline = "require_inline"
)

// ExecArgs are process.exec's args: argv run in session SessionID (no
// shell unless argv says so), in Cwd (a guest path; default the
// session's workdir), for at most TimeoutNs, with EnvPatch over the
// session's environment, stdin from the blob StdinRef ("sha256:<hex>";
// default empty), and its output returned as OutputMode says.
type ExecArgs struct {
	SessionID  string            `json:"session_id"`
	Argv       []string          `json:"argv"`
	Cwd        string            `json:"cwd,omitempty"`
	TimeoutNs  *int64            `json:"timeout_ns,omitempty"`
	EnvPatch   map[string]string `json:"env_patch,omitempty"`
	StdinRef   string            `json:"stdin_ref,omitempty"`
	OutputMode string            `json:"output_mode,omitempty"`
}

// ExecOutput is one stream's output, a tagged variant: small UTF-8 text
// inline, small other bytes inline, or a blob for large output.
type ExecOutput struct {
	InlineText  *InlineText  `json:"inline_text,omitempty"`
	InlineBytes *InlineBytes `json:"inline_bytes,omitempty"`
	Blob        *BlobOutput  `json:"blob,omitempty"`
}

// InlineText is output that is valid UTF-8.
type InlineText struct {
	Text string `json:"text"`
}

// InlineBytes is output that is not UTF-8 (base64 in JSON).
type InlineBytes struct {
	Bytes []byte `json:"bytes"`
}

// BlobOutput is output kept as a blob: its ref ("sha256:<hex>", readable
// at /var/blobs/sha256/<hex>), its size, and its first bytes. Truncated
// says the stream wrote more than the exec's output ceiling and only the
// first SizeBytes were kept. Device names the remote device that keeps
// the blob (process.blob.read's target), "" for the local device.
type BlobOutput struct {
	BlobRef      string `json:"blob_ref"`
	Device       string `json:"device,omitempty"`
	SizeBytes    int64  `json:"size_bytes"`
	PreviewBytes []byte `json:"preview_bytes,omitempty"`
	Truncated    bool   `json:"truncated,omitempty"`
}

// Exec statuses.
const (
	ExecOK       = "ok"
	ExecTimeout  = "timeout"
	ExecSignaled = "signaled"
	ExecError    = "error"
)

// ExecResult is process.exec's receipt. Status is "ok" when the command
// ran to its exit (ExitCode, 0 or not), "timeout" when it outran its
// timeout, "signaled" when a signal ended it (a signal to the session,
// the session's or the daemon's end, or one the command sent itself), "error" when it could not run or its output could not
// be returned as asked (ErrorCode: "inline_required_too_large",
// "start_failed", ...). A command killed by a signal has ExitCode
// 128+signal, as a shell's $? reports it.
type ExecResult struct {
	ExitCode    int         `json:"exit_code"`
	Status      string      `json:"status"`
	Stdout      *ExecOutput `json:"stdout,omitempty"`
	Stderr      *ExecOutput `json:"stderr,omitempty"`
	StartedAtNs int64       `json:"started_at_ns"`
	EndedAtNs   int64       `json:"ended_at_ns"`
	ErrorCode   string      `json:"error_code,omitempty"`
	Error       string      `json:"error,omitempty"`
}

// Session signals.
const (
	SignalTerm = "term"
	SignalKill = "kill"
	SignalInt  = "int"
)

// SessionSignalArgs are process.session.signal's args. "int" interrupts
// the running exec (SIGINT to each of its processes) and the session
// stays open; "term" and "kill" end the session: "term" sends SIGTERM to
// every process and SIGKILL after GraceTimeoutNs (default 1 s), "kill"
// SIGKILL at once.
type SessionSignalArgs struct {
	SessionID      string `json:"session_id"`
	Signal         string `json:"signal"`
	GraceTimeoutNs *int64 `json:"grace_timeout_ns,omitempty"`
}

// Signal statuses.
const (
	SignalSignaled      = "signaled"
	SignalNotFound      = "not_found"
	SignalAlreadyExited = "already_exited"
	SignalError         = "error"
)

// SessionSignalResult is process.session.signal's receipt: "signaled",
// "already_exited" for a session that had already ended, or "not_found"
// for one that does not exist for the caller (unknown, forgotten, or
// another user's). ExitCode is
// the running exec's, if one was stopped; EndedAtNs is when the session
// ended.
type SessionSignalResult struct {
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	EndedAtNs *int64 `json:"ended_at_ns,omitempty"`
}

// SessionListArgs are process.session.list's args: none. A user lists
// their own sessions, root everyone's.
type SessionListArgs struct {
	// Target lists the caller's sessions on that remote device instead
	// of the local device's.
	Target string `json:"target,omitempty"`
}

// SessionListResult is process.session.list's result, oldest first.
type SessionListResult struct {
	Sessions []SessionInfo `json:"sessions"`
}

// SessionGetArgs are process.session.get's args.
type SessionGetArgs struct {
	SessionID string `json:"session_id"`
}

// SessionInfo is a session as its status shows it: its state ("ready":
// no exec running, "running", "ended", "failed": its device is gone), owner, definition, isolation,
// times, and its last exec's receipt.
type SessionInfo struct {
	SessionID   string            `json:"session_id"`
	Device      string            `json:"device,omitempty"` // set for a session on a remote device
	State       string            `json:"state"`
	Uid         uint32            `json:"uid"`
	User        string            `json:"user"`
	Network     string            `json:"network"`
	Workdir     string            `json:"workdir"`
	Labels      map[string]string `json:"labels,omitempty"`
	Isolation   *Isolation        `json:"isolation"`
	StartedAtNs int64             `json:"started_at_ns"`
	ExpiresAtNs int64             `json:"expires_at_ns"`
	EndedAtNs   *int64            `json:"ended_at_ns,omitempty"`
	Running     []string          `json:"running,omitempty"`
	LastExec    *ExecResult       `json:"last_exec,omitempty"`
	// Error says why a session is "failed": the remote device it ran on
	// is gone ("Device disconnected").
	Error string `json:"error,omitempty"`
}

// ProcessCap is the process capability: what a caller may ask of a
// session at open. Networks are the network modes allowed; Mounts the
// namespace path prefixes that may be mounted, each with the strongest
// mode allowed under it ("~" is the caller's home); MaxSessions how many
// sessions may be open at once; MaxTTLNs the longest session;
// MaxTimeoutNs the longest exec; MaxProcesses the processes of one exec.
// A zero ceiling means the system's.
type ProcessCap struct {
	Networks     []string   `json:"networks"`
	Mounts       []CapMount `json:"mounts"`
	MaxSessions  int        `json:"max_sessions,omitempty"`
	MaxTTLNs     int64      `json:"max_ttl_ns,omitempty"`
	MaxTimeoutNs int64      `json:"max_timeout_ns,omitempty"`
	MaxProcesses int        `json:"max_processes,omitempty"`
}

// CapMount is a mount prefix of the process capability: a namespace
// path ("~" for the caller's home, "/" for the whole namespace; "host:"
// then a host path for raw host paths) and the strongest mode allowed
// under it.
type CapMount struct {
	Prefix string `json:"prefix"`
	Mode   string `json:"mode"`
}

// Check reports whether pc is well formed: known network modes, mounts
// with a prefix ("~", a namespace path or "host:/...") and a mode ("ro"
// or "rw"), no negative ceiling.
func (pc *ProcessCap) Check() error {
	for _, n := range pc.Networks {
		if n != NetworkNone && n != NetworkFull {
			return E(Invalid, "process capability: network "+quote(n)+": want none or full")
		}
	}
	for _, m := range pc.Mounts {
		p := m.Prefix
		if len(p) > 5 && p[:5] == "host:" {
			p = p[5:]
		}
		if p == "" || (p[0] != '/' && p[0] != '~') {
			return E(Invalid, "process capability: mount prefix "+quote(m.Prefix)+": want ~, an absolute path or host:/path")
		}
		if m.Mode != MountRO && m.Mode != MountRW {
			return E(Invalid, "process capability: mount mode "+quote(m.Mode)+": want ro or rw")
		}
	}
	if pc.MaxSessions < 0 || pc.MaxTTLNs < 0 || pc.MaxTimeoutNs < 0 || pc.MaxProcesses < 0 {
		return E(Invalid, "process capability: a ceiling may not be negative")
	}
	return nil
}

// Allows is the strongest mode pc allows at the mount prefix prefix ("~",
// "~/...", a namespace path or "host:/..."), "" for none: a mount of pc
// at it or above it, of the same kind (a host path or a namespace path).
// A "~" prefix is covered only by "/" or by a "~" prefix above it; a
// namespace path only by a namespace path (never by "~", whose home pc
// does not know). So Allows never claims more than a mount of pc gives.
func (pc ProcessCap) Allows(prefix string) string {
	host := func(p string) bool { return strings.HasPrefix(p, "host:") }
	trim := func(p string) string { return strings.TrimSuffix(strings.TrimPrefix(p, "host:"), "/") }
	best := ""
	for _, m := range pc.Mounts {
		if host(m.Prefix) != host(prefix) {
			continue
		}
		pre, p := trim(m.Prefix), trim(prefix)
		covers := pre == "" || p == pre || strings.HasPrefix(p, pre+"/")
		if strings.HasPrefix(p, "~") != strings.HasPrefix(pre, "~") && pre != "" {
			covers = false
		}
		if !covers {
			continue
		}
		switch m.Mode {
		case MountRW:
			return MountRW
		case MountRO:
			best = MountRO
		}
	}
	return best
}

// NarrowCap returns what both a and b allow. nil narrows nothing:
// NarrowCap(nil, b) is b, and NarrowCap(nil, nil) is nil (no narrowing
// at all). Otherwise the result has the networks in both, each mount of
// either kept where the other allows it too (Allows), at the weaker of
// the two modes, and the smaller of each ceiling (0 being none). It
// never allows more than a or b: narrowing only ever narrows. The result
// shares no memory with a or b.
func NarrowCap(a, b *ProcessCap) *ProcessCap {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return b.clone()
	case b == nil:
		return a.clone()
	}
	out := &ProcessCap{Networks: []string{}, Mounts: []CapMount{}}
	for _, n := range a.Networks {
		if slices.Contains(b.Networks, n) && !slices.Contains(out.Networks, n) {
			out.Networks = append(out.Networks, n)
		}
	}
	keep := func(m CapMount, other *ProcessCap) {
		mode := other.Allows(m.Prefix)
		switch {
		case mode == "" || (m.Mode != MountRW && m.Mode != MountRO):
			return
		case m.Mode == MountRO:
			mode = MountRO
		}
		c := CapMount{Prefix: m.Prefix, Mode: mode}
		if !slices.Contains(out.Mounts, c) {
			out.Mounts = append(out.Mounts, c)
		}
	}
	for _, m := range a.Mounts {
		keep(m, b)
	}
	for _, m := range b.Mounts {
		keep(m, a)
	}
	out.MaxSessions = minCeiling(a.MaxSessions, b.MaxSessions)
	out.MaxTTLNs = minCeiling(a.MaxTTLNs, b.MaxTTLNs)
	out.MaxTimeoutNs = minCeiling(a.MaxTimeoutNs, b.MaxTimeoutNs)
	out.MaxProcesses = minCeiling(a.MaxProcesses, b.MaxProcesses)
	return out
}

// CapWithin reports whether a allows nothing that b does not: each of
// a's networks is b's, each of a's mounts is allowed by b (Allows) at its
// mode or stronger, and each of b's ceilings is at least a's (0 being
// none). A command started under a may go on under b only then.
func CapWithin(a, b ProcessCap) bool {
	for _, n := range a.Networks {
		if !slices.Contains(b.Networks, n) {
			return false
		}
	}
	rank := map[string]int{MountRO: 1, MountRW: 2}
	for _, m := range a.Mounts {
		if rank[m.Mode] > rank[b.Allows(m.Prefix)] {
			return false
		}
	}
	within := func(x, y int64) bool { return y <= 0 || (x > 0 && x <= y) }
	return within(int64(a.MaxSessions), int64(b.MaxSessions)) && within(a.MaxTTLNs, b.MaxTTLNs) &&
		within(a.MaxTimeoutNs, b.MaxTimeoutNs) && within(int64(a.MaxProcesses), int64(b.MaxProcesses))
}

// clone is a copy of pc that shares no memory with it.
func (pc *ProcessCap) clone() *ProcessCap {
	c := *pc
	c.Networks = append([]string{}, pc.Networks...)
	c.Mounts = append([]CapMount{}, pc.Mounts...)
	return &c
}

// minCeiling is the smaller of the positive ones of a and b (0: neither).
func minCeiling[T int | int64](a, b T) T {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// ParseMount parses the text form of a mount, HOST:GUEST[:ro|rw] (mode
// rw if not given), as gsv session open --mount and the open line of
// /dev/gsv/shell/clone write it. HOST may itself hold colons
// (host:/srv for a raw host path): the text is read from its end.
func ParseMount(s string) (ProcessMount, error) {
	parts := strings.Split(s, ":")
	mode := MountRW
	if n := len(parts); n >= 3 && (parts[n-1] == MountRO || parts[n-1] == MountRW) {
		mode = parts[n-1]
		parts = parts[:n-1]
	}
	n := len(parts)
	if n < 2 || parts[n-1] == "" || strings.Join(parts[:n-1], ":") == "" {
		return ProcessMount{}, E(Invalid, "mount "+quote(s)+": want HOST:GUEST[:ro|rw]")
	}
	return ProcessMount{HostPath: strings.Join(parts[:n-1], ":"), GuestPath: parts[n-1], Mode: mode}, nil
}

// quote is s in double quotes, as %q writes it.
func quote(s string) string { return strconv.Quote(s) }

// BlobReadArgs are process.blob.read's args: the blob's ref
// ("sha256:<hex>"), a window of it, and the device whose blob it is (a
// receipt of a session on a remote device refers to that device's
// blobs; "" is the local device).
type BlobReadArgs struct {
	BlobRef string `json:"blob_ref"`
	Target  string `json:"target,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
	Limit   int64  `json:"limit,omitempty"`
}

// BlobReadResult is process.blob.read's result: the bytes of the window
// (base64 in JSON), and the blob's whole size.
type BlobReadResult struct {
	Bytes     []byte `json:"bytes"`
	SizeBytes int64  `json:"size_bytes"`
}
