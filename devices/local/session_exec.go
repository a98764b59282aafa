package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
)

// process.exec in a session: its environment, its start, how it stops
// and its receipt.

// sessionEnv is the environment of an exec in s: a fixed base, the
// session's, then patch.
func (s *session) sessionEnv(patch map[string]string) []string {
	env := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": path.Join("/home", s.user), "USER": s.user, "LOGNAME": s.user,
		"LANG": "C.UTF-8", "TMPDIR": "/tmp", "GSV_SESSION": s.id, "GSV_UID": strconv.FormatUint(uint64(s.uid), 10),
	}
	for k, v := range s.env {
		env[k] = v
	}
	for k, v := range patch {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Exec is process.exec: it runs argv in the session and returns its
// receipt when it has ended. A caller gone before then (ctx) kills it.
// One exec runs at a time in a session: another is a 409.
func (x *Sessions) ProcessExec(ctx context.Context, who Who, a *abi.ExecArgs) (*abi.ExecResult, error) {
	s, run, err := x.startExec(ctx, who, a, nil)
	if err != nil {
		return nil, err
	}
	select {
	case <-run.done:
		return run.result, nil
	case <-ctx.Done():
		run.stop(abi.ExecSignaled, syscall.SIGKILL, 0)
		<-run.done
		_ = s
		return nil, ctx.Err()
	}
}

// ExecStart is process.exec.start: process.exec that returns once the
// command runs; process.session.wait returns its receipt.
func (x *Sessions) ExecStart(ctx context.Context, who Who, a *abi.ExecArgs) (*abi.SessionInfo, error) {
	s, _, err := x.startExec(ctx, who, a, nil)
	if err != nil {
		return nil, err
	}
	return s.snapshot(), nil
}

// execStdio is the stdin and stdout of a piped exec (process.exec.pipe):
// the command's ends of two pipes, which the exec's process holds.
type execStdio struct {
	stdin, stdout *os.File
}

// startExec checks a and starts its command in its session: with stdio,
// its stdin and stdout are those files (its stdout is then not kept)
// and, unless a gives a timeout, it may run until the session's ceiling.
func (x *Sessions) startExec(ctx context.Context, who Who, a *abi.ExecArgs, stdio *execStdio) (*session, *execRun, error) {
	s, err := x.sessions.get(who, a.SessionID)
	if err != nil {
		return nil, nil, err
	}
	if !abi.CapWithin(s.cap, who.processCap()) {
		return nil, nil, abi.E(abi.Path(a.SessionID), abi.Permission, errWiderSession)
	}
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return nil, nil, abi.E(abi.Invalid, "argv is empty")
	}
	for _, arg := range a.Argv {
		if strings.ContainsRune(arg, 0) {
			return nil, nil, abi.E(abi.Invalid, "argv contains a NUL byte")
		}
	}
	for k, v := range a.EnvPatch {
		if err := checkEnv(k, v); err != nil {
			return nil, nil, err
		}
	}
	mode := a.OutputMode
	switch mode {
	case "":
		mode = abi.OutputAuto
	case abi.OutputAuto, abi.OutputRequireInline:
	default:
		return nil, nil, abi.E(abi.Invalid, fmt.Sprintf("output_mode %q: want auto or require_inline", mode))
	}
	timeout := defaultExecTimeout
	if a.TimeoutNs != nil {
		if *a.TimeoutNs <= 0 {
			return nil, nil, abi.E(abi.Invalid, "timeout_ns must be positive")
		}
		timeout = time.Duration(*a.TimeoutNs)
	}
	if stdio != nil && a.TimeoutNs == nil {
		timeout = time.Duration(s.limits.MaxTimeoutNs)
	}
	if timeout > time.Duration(s.limits.MaxTimeoutNs) {
		return nil, nil, abi.E(abi.Invalid, fmt.Sprintf("timeout_ns over the ceiling of %s", time.Duration(s.limits.MaxTimeoutNs)))
	}
	cwd := a.Cwd
	if cwd == "" {
		cwd = s.info.Workdir
	}
	if err := checkGuest(cwd, true); err != nil {
		return nil, nil, err
	}
	q, err := x.quotaOf(ctx, s.uid)
	if err != nil {
		return nil, nil, err
	}
	var stdin []byte
	if a.StdinRef != "" && stdio != nil {
		return nil, nil, abi.E(abi.Invalid, "stdin_ref: a piped exec reads its stdin from its caller")
	}
	if a.StdinRef != "" {
		stdin, err = x.blobs.read(who, a.StdinRef, 0, inlineRequired*64)
		if err != nil {
			return nil, nil, abi.E(abi.Path(a.StdinRef), err)
		}
	}
	s.mu.Lock()
	if s.expiredLocked(time.Now()) {
		// Past its TTL, though the janitor has not come by yet: it ends
		// now, and runs nothing more.
		s.mu.Unlock()
		x.endSession(s, syscall.SIGKILL, 0)
		return nil, nil, abi.E(abi.Path(s.id), abi.Busy, "the session has ended: its session_ttl_ns passed")
	}
	defer s.mu.Unlock()
	if !s.ended.IsZero() {
		return nil, nil, abi.E(abi.Path(s.id), abi.Busy, "the session has ended")
	}
	if s.running != nil {
		return nil, nil, abi.E(abi.Path(s.id), abi.Busy, "an exec is running in the session: wait for it (process.session.wait) or open another session")
	}
	if !x.sessions.startExecWG() {
		return nil, nil, abi.E(abi.Offline, "the daemon is shutting down")
	}
	run := &execRun{started: time.Now(), mode: mode, done: make(chan struct{}), outputQuota: q.Output}
	run.out[0] = newCapture(x.blobs.tmpDir(), s.limits.MaxOutputBytes, &x.blobs.use, s.uid, q.Output)
	run.out[1] = newCapture(x.blobs.tmpDir(), s.limits.MaxOutputBytes, &x.blobs.use, s.uid, q.Output)
	var in *strings.Reader
	cmd := sandbox.Cmd{Argv: a.Argv, Cwd: cwd, Env: s.sessionEnv(a.EnvPatch),
		Stdout: run.out[0], Stderr: run.out[1], MaxProcesses: s.limits.MaxProcesses}
	if stdin != nil {
		in = strings.NewReader(string(stdin))
		cmd.Stdin = in
	}
	if stdio != nil {
		cmd.Stdin, cmd.Stdout = stdio.stdin, stdio.stdout
	}
	p, err := s.box.Start(cmd)
	if err != nil {
		x.sessions.wg.Done()
		run.out[0].discard()
		run.out[1].discard()
		return nil, nil, abi.E(abi.Path(s.id), abi.Offline, err.Error())
	}
	run.proc = p
	run.timer = time.AfterFunc(timeout, func() { run.stop(abi.ExecTimeout, syscall.SIGTERM, signalGrace) })
	s.running = run
	s.idle = make(chan struct{})
	go x.finishExec(s, run)
	return s, run, nil
}

// startExecWG counts an exec as running unless the table is closed.
func (t *sessions) startExecWG() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// stop stops the exec for why: sig to every process, then, after grace
// (if sig is not SIGKILL), SIGKILL. Only the first reason counts.
func (r *execRun) stop(why string, sig syscall.Signal, grace time.Duration) {
	r.killOnce.Do(func() { r.why = why })
	r.proc.Signal(sig)
	if sig != syscall.SIGKILL {
		go func() {
			select {
			case <-r.done:
			case <-time.After(grace):
				r.proc.Kill()
			}
		}()
	}
}

// interrupt sends SIGINT to every process of the exec, which decides
// what to do with it: nothing follows.
func (r *execRun) interrupt() {
	r.proc.Signal(syscall.SIGINT)
}

// finishExec waits for run's end, makes its receipt and makes the session
// idle.
func (x *Sessions) finishExec(s *session, run *execRun) {
	defer x.sessions.wg.Done()
	<-run.proc.Done()
	run.timer.Stop()
	ex := run.proc.Exit()
	r := &abi.ExecResult{ExitCode: ex.Code, Status: abi.ExecOK, StartedAtNs: run.started.UnixNano(), EndedAtNs: time.Now().UnixNano()}
	run.killOnce.Do(func() {})
	switch {
	case !run.proc.Started():
		r.Status, r.ErrorCode = abi.ExecError, "start_failed"
		r.Error = strings.TrimSpace(string(run.out[1].head(4096)))
		if r.Error == "" {
			r.Error = "the sandbox did not start"
		}
	case run.why != "":
		r.Status = run.why
		if run.why == abi.ExecTimeout {
			r.Error = "the command timed out"
		}
	case ex.Err != nil:
		r.Status, r.ErrorCode, r.Error = abi.ExecError, "wait_failed", ex.Err.Error()
	case ex.Signal != 0:
		r.Status = abi.ExecSignaled
	}
	var inline [2][]byte
	var refs []string
	for i, c := range run.out {
		size := c.size
		o, ref, text, err := x.blobs.output(c, run.mode)
		switch {
		case c.overQuota && r.ErrorCode == "":
			// The command ran; what it wrote past the quota was dropped.
			r.ErrorCode = "output_quota"
			r.Error = fmt.Sprintf("%s was cut at your kept-output quota of %d bytes (the outputs your sessions hold and your running execs'; "+
				"a session's are kept until an hour after it ends): the rest was dropped", [2]string{"stdout", "stderr"}[i], run.outputQuota)
		}
		switch {
		case errors.Is(err, errInlineTooLarge):
			r.Status, r.ErrorCode = abi.ExecError, "inline_required_too_large"
			r.Error = fmt.Sprintf("%s is %d bytes, over the %d bytes require_inline allows", [2]string{"stdout", "stderr"}[i], c.size, inlineRequired)
		case err != nil:
			r.Status, r.ErrorCode, r.Error = abi.ExecError, "output_failed", err.Error()
		}
		if o != nil {
			if i == 0 {
				r.Stdout = o
			} else {
				r.Stderr = o
			}
		}
		inline[i] = text
		if ref != "" {
			refs = append(refs, ref)
			x.blobs.hold(ref, s.id, s.uid, size)
		}
	}
	if s.after != nil {
		s.after()
	}
	if x.execEnded != nil {
		x.execEnded(s.uid, s.user)
	}
	s.mu.Lock()
	s.last = r
	s.lastOut = inline
	s.blobs = append(s.blobs, refs...)
	s.running = nil
	close(s.idle)
	s.mu.Unlock()
	run.result = r
	close(run.done)
}
