package local

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
)

// Exec sessions (process.session.open, process.exec,
// process.session.signal): a session is a sandbox boundary decided at
// open; each exec runs inside it, as an unprivileged host uid, with no
// more than its opener's rights. See docs/sessions.md.

const (
	// SandboxUIDBase is the first host uid of sandboxes: GSV user uid u
	// runs as host uid SandboxUIDBase+u, a uid no host user has.
	SandboxUIDBase = 1_610_612_736
	// defaultSessionTTL is a session's life when session_ttl_ns is not
	// given; maxSessionTTL the longest by default.
	defaultSessionTTL = time.Hour
	maxSessionTTL     = 24 * time.Hour
	// defaultExecTimeout is an exec's time limit when timeout_ns is not
	// given; maxExecTimeout the longest by default.
	defaultExecTimeout = 10 * time.Minute
	maxExecTimeout     = time.Hour
	// maxSessions is how many sessions a user may have open by default.
	maxSessions = 16
	// maxExecProcesses is how many processes an exec may run at once.
	maxExecProcesses = sandbox.MaxProcesses
	// maxExecOutput is how many bytes of each stream an exec keeps.
	maxExecOutput = 256 << 20
	// inlineAuto is the largest output returned inline under "auto";
	// inlineRequired the largest under "require_inline".
	inlineAuto     = 16 << 10
	inlineRequired = 1 << 20
	// sessionRetention is how long an ended session's record (and the
	// blobs its receipts hold) stays after it ended.
	sessionRetention = time.Hour
	// signalGrace is how long "term" waits before SIGKILL by default;
	// maxSignalGrace the longest grace a signal may give.
	signalGrace    = time.Second
	maxSignalGrace = 10 * time.Minute
)

// guestReserved are the guest paths a session may not mount over: its
// base system and its own /proc, /dev and /tmp.
var guestReserved = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc", "/proc", "/dev", "/tmp", "/var"}

// sessions is the device's table of exec sessions. Its zero value is
// ready; its sandbox runtime and janitor start with its first session.
type sessions struct {
	mu     sync.Mutex
	rt     *sandbox.Runtime
	m      map[string]*session
	closed bool
	wg     sync.WaitGroup // running execs and the janitor
	stop   chan struct{}
	// retention is sessionRetention when zero (tests shorten it).
	retention time.Duration
	// janitorEvery is how often the janitor looks, a second when zero
	// (tests lengthen it).
	janitorEvery time.Duration
}

// session is one exec session.
type session struct {
	id     string
	uid    uint32
	user   string
	box    *sandbox.Box
	info   abi.SessionInfo // its fixed parts
	env    map[string]string
	limits abi.ExecLimits
	// cap is the process capability it was opened with: an exec in it
	// must come from a caller whose capability allows as much
	// (abi.CapWithin), so that nobody runs a command in a session wider
	// than they may open.
	cap abi.ProcessCap

	mu      sync.Mutex
	running *execRun
	last    *abi.ExecResult
	lastOut [2][]byte // the last exec's inline outputs, for its files
	ended   time.Time // zero while open
	blobs   []string  // the blob refs its receipts hold
	idle    chan struct{}
	// after runs after each exec, before its receipt is given (root's
	// sessions: re-owning what it made in other owners' trees); nil for
	// nothing.
	after func()
}

// execRun is a running exec.
type execRun struct {
	proc     *sandbox.Proc
	started  time.Time
	mode     string
	out      [2]*capture
	why      string // set by whoever stopped it: abi.ExecTimeout or abi.ExecSignaled
	done     chan struct{}
	result   *abi.ExecResult
	timer    *time.Timer
	killOnce sync.Once
	// outputQuota is the kept-output quota of the session's owner when
	// the exec started (0: none).
	outputQuota int64
}

// runtime returns the sandbox runtime, making it on first use.
func (t *sessions) runtime(x *Sessions) (*sandbox.Runtime, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, abi.E(abi.Offline, "the daemon is shutting down")
	}
	if t.rt == nil {
		newRuntime := sandbox.NewRuntime
		if x.rootless {
			newRuntime = sandbox.NewRootlessRuntime
		}
		rt, err := newRuntime(x.log)
		if err != nil {
			return nil, abi.E(abi.Offline, err.Error())
		}
		t.rt = rt
		t.m = map[string]*session{}
		t.stop = make(chan struct{})
		t.wg.Add(1)
		go t.janitor(x)
	}
	return t.rt, nil
}

// isClosed says the table is closed (the daemon is shutting down).
func (t *sessions) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// openFailed is the seed's receipt of an open that could not set up its
// sandbox: status "error", a machine-readable code and the cause's text.
// A refusal (bad args, the capability, the caller's rights) is not a
// receipt but the call's error.
func openFailed(code string, err error) *abi.SessionOpenResult {
	return &abi.SessionOpenResult{Status: abi.SessionError, StartedAtNs: time.Now().UnixNano(), ErrorCode: code, Error: abi.CauseText(err)}
}

// get returns who's session id (anyone's for root); any other is a 404.
func (t *sessions) get(who Who, id string) (*session, error) {
	t.mu.Lock()
	s := t.m[id]
	t.mu.Unlock()
	if s == nil || (s.uid != who.Uid && !who.IsRoot()) {
		return nil, abi.E(abi.Path(id), abi.NotExist, "no such session")
	}
	return s, nil
}

// expiredLocked says whether s is open past its TTL at now; s.mu is
// held. The janitor ends such a session within a second; every exec and
// signal checks it too, so none is served in between.
func (s *session) expiredLocked(now time.Time) bool {
	return s.ended.IsZero() && now.UnixNano() >= s.info.ExpiresAtNs
}

// janitor ends sessions at their expiry and forgets ended ones after
// their retention, until the table closes.
func (t *sessions) janitor(x *Sessions) {
	defer t.wg.Done()
	t.mu.Lock()
	every := cmpOr(t.janitorEvery, time.Second)
	t.mu.Unlock()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			t.mu.Lock()
			var expired, gone []*session
			for _, s := range t.m {
				s.mu.Lock()
				switch {
				case s.expiredLocked(now):
					expired = append(expired, s)
				case !s.ended.IsZero() && now.Sub(s.ended) >= cmpOr(t.retention, sessionRetention):
					gone = append(gone, s)
					delete(t.m, s.id)
				}
				s.mu.Unlock()
			}
			t.mu.Unlock()
			for _, s := range expired {
				x.endSession(s, syscall.SIGKILL, 0)
			}
			for _, s := range gone {
				x.blobs.release(s.id)
			}
		}
	}
}

// close ends every session and waits for their execs.
func (t *sessions) close(x *Sessions) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	var all []*session
	for _, s := range t.m {
		all = append(all, s)
	}
	if t.stop != nil {
		close(t.stop)
	}
	t.mu.Unlock()
	for _, s := range all {
		x.endSession(s, syscall.SIGKILL, 0)
	}
	t.wg.Wait()
	if t.rt != nil {
		t.rt.Close()
	}
}

// SessionOpen is process.session.open: it checks the session's
// definition against who's rights and process capability (who.Process),
// stages its mounts and returns its receipt once a sandbox of it can run.
//
// Each mount's host_path is a directory of the data tree that who may
// read and search (root: also a raw host path outside the namespace); it
// is mounted read-write only if its mode is "rw", the capability allows
// it, and who owns that part of the tree (their home) or is root;
// otherwise read-only, which the receipt's isolation states. A path
// with "..", one that crosses a symbolic link, a guest path over the
// base system, an unknown network mode, a TTL of 0: 400. A path who may
// not read, a network or mount the capability does not allow, too many
// sessions: 403. Nothing is started then.
func (x *Sessions) SessionOpen(ctx context.Context, who Who, a *abi.SessionOpenArgs) (*abi.SessionOpenResult, error) {
	loc := a.Target.Local
	if loc == nil {
		return nil, abi.E(abi.Invalid, "target: want {local:{...}} (the only runtime here)")
	}
	pc := who.processCap()
	switch loc.NetworkMode {
	case abi.NetworkNone, abi.NetworkFull:
	default:
		return nil, abi.E(abi.Invalid, fmt.Sprintf("network_mode %q: want none or full", loc.NetworkMode))
	}
	if !slices.Contains(pc.Networks, loc.NetworkMode) {
		return nil, abi.E(abi.Permission, fmt.Sprintf("network_mode %q is not allowed by your process capability", loc.NetworkMode))
	}
	ttl := defaultSessionTTL
	maxTTL := time.Duration(cmpOr(pc.MaxTTLNs, int64(maxSessionTTL)))
	if a.SessionTTLNs != nil {
		if *a.SessionTTLNs <= 0 {
			return nil, abi.E(abi.Invalid, "session_ttl_ns must be positive")
		}
		ttl = time.Duration(*a.SessionTTLNs)
	}
	if ttl > maxTTL {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("session_ttl_ns over the ceiling of %s", maxTTL))
	}
	for k, v := range a.Labels {
		if err := checkLabel(k, v); err != nil {
			return nil, err
		}
	}
	env := map[string]string{}
	for k, v := range loc.Env {
		if err := checkEnv(k, v); err != nil {
			return nil, err
		}
		env[k] = v
	}
	home := path.Join("/home", who.Username)
	mounts, applied, err := x.sessionMounts(ctx, who, pc, loc.Mounts)
	defer func() {
		for _, m := range mounts {
			m.Dir.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	workdir := loc.Workdir
	if workdir == "" {
		workdir = home
		if len(applied) > 0 {
			workdir = applied[0].GuestPath
		}
	}
	if err := checkGuest(workdir, true); err != nil {
		return nil, abi.E(abi.Path(loc.Workdir), err)
	}
	rt, err := x.sessions.runtime(x)
	if err != nil {
		if x.sessions.isClosed() {
			return nil, err
		}
		return openFailed("sandbox_unavailable", err), nil
	}
	if n := x.sessions.openCount(who.Uid); n >= cmpOr(pc.MaxSessions, maxSessions) {
		return nil, abi.E(abi.Permission, fmt.Sprintf("you have %d sessions open, the most your process capability allows", n))
	}
	id := "ps_" + randomText()
	now := time.Now()
	limits := abi.ExecLimits{
		MaxTimeoutNs:   cmpOr(pc.MaxTimeoutNs, int64(maxExecTimeout)),
		MaxOutputBytes: maxExecOutput,
		MaxProcesses:   cmpOr(pc.MaxProcesses, maxExecProcesses),
	}
	hostUID, hostGID, groups := who.hostIDs()
	if x.rootless {
		// The daemon's own user, who owns the files it binds; RLIMIT_NPROC
		// would count all of that user's processes, so only a ceiling the
		// capability sets applies.
		hostUID = uint32(os.Getuid())
		limits.MaxProcesses = pc.MaxProcesses
	}
	scratch, err := x.scratch(ctx, who.Uid)
	if err != nil {
		return nil, err
	}
	box, err := rt.Open(sandbox.Spec{
		ID: id, HostUID: hostUID, HostGID: hostGID, HostGroups: groups, Uid: who.Uid, Gid: who.gid(),
		Mounts: mounts, ScratchRoot: scratch, Home: home, Network: loc.NetworkMode == abi.NetworkFull,
	})
	if err != nil {
		return openFailed("sandbox_failed", err), nil
	}
	iso := &abi.Isolation{
		Runtime: rt.Version,
		Mount: "a new mount namespace: /usr and /etc read-only, the mounts listed (files as their owners and modes are in the namespace; " +
			"the host kernel checks them against the sandbox's ids), its own /tmp and " + home + ", a new /proc and /dev; nothing else of the host",
		Mounts:  applied,
		PID:     "a new pid namespace per exec: a signal or the end of the exec takes every process",
		User:    fmt.Sprintf("uid %d inside, host uid %d outside, no capabilities, no further user namespaces", who.Uid, hostUID),
		HostUID: hostUID,
		Seccomp: "none",
		Limits:  limits,
		Network: "a new network namespace with loopback only",
	}
	if loc.NetworkMode == abi.NetworkFull {
		iso.Network = "the host's network"
	}
	if x.rootless {
		iso.Mount = "a new mount namespace: /usr and /etc read-only, the mounts listed (the device user's own files), " +
			"its own /tmp and " + home + ", a new /proc and /dev; nothing else of the host"
		iso.User = fmt.Sprintf("uid %d inside, the device's user (host uid %d) outside, no capabilities, no further user namespaces", who.Uid, hostUID)
	}
	var after func()
	if x.afterExec != nil {
		after = x.afterExec(who, applied)
	}
	s := &session{
		id: id, uid: who.Uid, user: who.Username, box: box, env: env, limits: limits, after: after,
		idle: make(chan struct{}), cap: pc,
		info: abi.SessionInfo{
			SessionID: id, Uid: who.Uid, User: who.Username, Network: loc.NetworkMode, Workdir: workdir,
			Labels: a.Labels, Isolation: iso, StartedAtNs: now.UnixNano(), ExpiresAtNs: now.Add(ttl).UnixNano(),
		},
	}
	close(s.idle)
	if !x.sessions.add(s) {
		box.Close()
		return nil, abi.E(abi.Offline, "the daemon is shutting down")
	}
	x.log.Debug(abi.ProcessSessionOpen.Name, "uid", who.Uid, "session", id, "network", loc.NetworkMode, "mounts", len(applied))
	exp := s.info.ExpiresAtNs
	return &abi.SessionOpenResult{SessionID: id, Status: "ready", StartedAtNs: s.info.StartedAtNs, ExpiresAtNs: &exp, Isolation: iso}, nil
}

// hostIDs are the host ids who's sandboxes run as: uid
// SandboxUIDBase+uid, gid SandboxUIDBase+gid and a group
// SandboxUIDBase+g for each of who's groups: the disk ids their files
// have (see owners.go).
func (who Who) hostIDs() (uid, gid uint32, groups []uint32) {
	uid, gid = uint32(SandboxUIDBase)+who.Uid, uint32(SandboxUIDBase)+who.gid()
	groups = []uint32{gid}
	for _, g := range who.Gids {
		if h := uint32(SandboxUIDBase) + g; !slices.Contains(groups, h) {
			groups = append(groups, h)
		}
	}
	return uid, gid, groups
}

// gid is who's primary gid: Gid, or, for a Who that names none, the
// uid (a group of its own).
func (who Who) gid() uint32 {
	if who.Gid == 0 && who.Uid != 0 && len(who.Gids) == 0 {
		return who.Uid
	}
	return who.Gid
}

// scratchRoot is where the sandboxes of GSV user uid keep their own tmp
// and home: <state>/sessions/<uid>.
func (x *Sessions) scratchRoot(uid uint32) string {
	return path.Join(x.stateDir, "sessions", strconv.FormatUint(uint64(uid), 10))
}

// cmpOr is v if positive, else def.
func cmpOr[T ~int | ~int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// openCount is how many open sessions uid has.
func (t *sessions) openCount(uid uint32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.m {
		s.mu.Lock()
		if s.uid == uid && s.ended.IsZero() {
			n++
		}
		s.mu.Unlock()
	}
	return n
}

// add adds s unless the table is closed.
func (t *sessions) add(s *session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.m[s.id] = s
	return true
}

// snapshot is s as process.session.get shows it.
func (s *session) snapshot() *abi.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.info
	info.State = "ready"
	switch {
	case !s.ended.IsZero():
		info.State = "ended"
		e := s.ended.UnixNano()
		info.EndedAtNs = &e
	case s.running != nil:
		info.State = "running"
	}
	info.LastExec = s.last
	return &info
}

// SessionSignal is process.session.signal.
func (x *Sessions) SessionSignal(ctx context.Context, who Who, a *abi.SessionSignalArgs) (*abi.SessionSignalResult, error) {
	grace := signalGrace
	if a.GraceTimeoutNs != nil {
		if *a.GraceTimeoutNs < 0 || *a.GraceTimeoutNs > int64(maxSignalGrace) {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("grace_timeout_ns: 0 to %v", maxSignalGrace))
		}
		grace = time.Duration(*a.GraceTimeoutNs)
	}
	var sig syscall.Signal
	switch a.Signal {
	case abi.SignalTerm:
		sig = syscall.SIGTERM
	case abi.SignalKill:
		sig = syscall.SIGKILL
	case abi.SignalInt:
		sig = syscall.SIGINT
	default:
		return nil, abi.E(abi.Invalid, fmt.Sprintf("signal %q: want term, kill or int", a.Signal))
	}
	s, err := x.sessions.get(who, a.SessionID)
	if err != nil {
		// The seed's receipt: a session that does not exist (or is
		// another user's, or was forgotten) is not_found, not a failure.
		return &abi.SessionSignalResult{Status: abi.SignalNotFound}, nil
	}
	s.mu.Lock()
	expired := s.expiredLocked(time.Now())
	s.mu.Unlock()
	if expired {
		// Past its TTL, though the janitor has not come by yet: it ends
		// now, as the janitor would have ended it.
		x.endSession(s, syscall.SIGKILL, 0)
	}
	s.mu.Lock()
	ended, run := s.ended, s.running
	s.mu.Unlock()
	if !ended.IsZero() {
		e := ended.UnixNano()
		return &abi.SessionSignalResult{Status: abi.SignalAlreadyExited, EndedAtNs: &e}, nil
	}
	if sig == syscall.SIGINT {
		if run == nil {
			return &abi.SessionSignalResult{Status: abi.SignalSignaled}, nil
		}
		run.interrupt()
		return &abi.SessionSignalResult{Status: abi.SignalSignaled}, nil
	}
	res := x.endSession(s, sig, grace)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}
	return res, nil
}

// endSession ends s: its running exec gets sig (then SIGKILL after
// grace), its box closes once the exec is gone. It returns the receipt of
// process.session.signal.
func (x *Sessions) endSession(s *session, sig syscall.Signal, grace time.Duration) *abi.SessionSignalResult {
	s.mu.Lock()
	if !s.ended.IsZero() {
		e := s.ended.UnixNano()
		s.mu.Unlock()
		return &abi.SessionSignalResult{Status: abi.SignalAlreadyExited, EndedAtNs: &e}
	}
	s.ended = time.Now()
	run := s.running
	s.mu.Unlock()
	res := &abi.SessionSignalResult{Status: abi.SignalSignaled}
	if run != nil {
		if sig == syscall.SIGKILL {
			run.stop(abi.ExecSignaled, syscall.SIGKILL, 0)
		} else {
			run.stop(abi.ExecSignaled, sig, grace)
		}
		<-run.done
		code := run.result.ExitCode
		res.ExitCode = &code
	}
	s.box.Close()
	s.mu.Lock()
	s.ended = time.Now()
	e := s.ended.UnixNano()
	s.mu.Unlock()
	res.EndedAtNs = &e
	return res
}

// SessionList is process.session.list: who's sessions (root: everyone's),
// oldest first.
func (x *Sessions) SessionList(ctx context.Context, who Who, a *abi.SessionListArgs) (*abi.SessionListResult, error) {
	x.sessions.mu.Lock()
	var all []*session
	for _, s := range x.sessions.m {
		if s.uid == who.Uid || who.IsRoot() {
			all = append(all, s)
		}
	}
	x.sessions.mu.Unlock()
	res := &abi.SessionListResult{Sessions: []abi.SessionInfo{}}
	for _, s := range all {
		res.Sessions = append(res.Sessions, *s.snapshot())
	}
	sort.Slice(res.Sessions, func(i, j int) bool {
		a, b := res.Sessions[i], res.Sessions[j]
		return a.StartedAtNs < b.StartedAtNs || (a.StartedAtNs == b.StartedAtNs && a.SessionID < b.SessionID)
	})
	return res, nil
}

// SessionGet is process.session.get: one of who's sessions.
func (x *Sessions) SessionGet(ctx context.Context, who Who, a *abi.SessionGetArgs) (*abi.SessionInfo, error) {
	s, err := x.sessions.get(who, a.SessionID)
	if err != nil {
		return nil, err
	}
	return s.snapshot(), nil
}

// SessionWait is process.session.wait: it waits until no exec runs in the
// session (or ctx ends) and returns the last exec's receipt; a 404 if the
// session has run none.
func (x *Sessions) SessionWait(ctx context.Context, who Who, a *abi.SessionGetArgs) (*abi.ExecResult, error) {
	s, err := x.sessions.get(who, a.SessionID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return nil, abi.E(abi.Path(s.id), abi.NotExist, "the session has run no exec")
	}
	return s.last, nil
}

// SessionOutput is the last exec's output of a stream ("stdout" or
// "stderr") in session id: its inline bytes, or its blob's first bytes.
func (x *Sessions) SessionOutput(ctx context.Context, who Who, a *abi.BlobReadArgs) (*abi.BlobReadResult, error) {
	id, stream, _ := strings.Cut(a.BlobRef, "/")
	s, err := x.sessions.get(who, id)
	if err != nil {
		return nil, err
	}
	i := slices.Index([]string{"stdout", "stderr"}, stream)
	if i < 0 {
		return nil, abi.E(abi.Invalid, "stream: want stdout or stderr")
	}
	s.mu.Lock()
	last, text := s.last, s.lastOut[i]
	s.mu.Unlock()
	if last == nil {
		return &abi.BlobReadResult{Bytes: []byte{}}, nil
	}
	o := last.Stdout
	if i == 1 {
		o = last.Stderr
	}
	if o != nil && o.Blob != nil {
		return x.BlobRead(ctx, who, &abi.BlobReadArgs{BlobRef: o.Blob.BlobRef, Offset: a.Offset, Limit: a.Limit})
	}
	return &abi.BlobReadResult{Bytes: text, SizeBytes: int64(len(text))}, nil
}
