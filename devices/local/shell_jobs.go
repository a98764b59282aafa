package local

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
)

// shell.exec's jobs: every command is one, from its start until its
// final result is read, it expires, or the device closes. (The seed and
// the wire call a job a "shell session", its id "sessionId"; in this code
// a session is always an exec session: docs/architecture.md, *Words*.)

const (
	// shellWaitBudget is how long a start (and a poll) waits for its
	// command to end before it returns status "running".
	shellWaitBudget = 10 * time.Second
	// shellJobTTL is how long a job is kept after its last update (its
	// start, a call on it, its command's end).
	shellJobTTL = 24 * time.Hour
	// shellPollSettle is how long a poll waits for more output once there
	// is new output to return (see Shell.continueShell).
	shellPollSettle = 200 * time.Millisecond
	// shellPollTick is how often a poll looks at its command's output.
	shellPollTick = 25 * time.Millisecond
	// errTimedOut is a timed-out command's error.
	errTimedOut = "Command timed out"
)

// shellJobs is a Shell's table of jobs and the commands they run. Its
// zero value is ready: its janitor starts with its first job.
type shellJobs struct {
	mu     sync.Mutex
	jobs   map[string]*shellJob // by id
	closed bool                 // no new commands
	wg     sync.WaitGroup       // one per command until it is done

	// ttl and wait are shellJobTTL and shellWaitBudget when zero
	// (tests shorten them).
	ttl, wait time.Duration
	// stopJanitor, once the janitor runs, ends it.
	stopJanitor chan struct{}
}

// shellJob is one command and what its caller has not yet read.
type shellJob struct {
	id    string
	uid   uint32 // its caller's
	stdin bool   // whether its stdin is a pipe
	// cap is the process capability it started with: input to it must
	// come from a caller whose capability allows as much (abi.CapWithin).
	cap   abi.ProcessCap
	out   *tailBuffer
	timer *time.Timer // its timeout

	mu      sync.Mutex
	h       shellHandle // nil until it runs
	why     string      // why the device stopped it, if it did
	updated time.Time
}

// stop kills the job's command for the reason why (its result's
// error); only the first reason counts. A command not yet running is
// killed as soon as it is.
func (s *shellJob) stop(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why == "" {
		s.why = why
	}
	if s.h != nil {
		s.h.kill()
	}
}

// touch records an update of the job now.
func (s *shellJob) touch() {
	s.mu.Lock()
	s.updated = time.Now()
	s.mu.Unlock()
}

// ended says whether the job's command has ended.
func (s *shellJob) ended() bool {
	select {
	case <-s.h.done():
		return true
	default:
		return false
	}
}

// limits returns the table's TTL and wait budget.
func (t *shellJobs) limits() (ttl, wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ttl, wait = t.ttl, t.wait
	if ttl <= 0 {
		ttl = shellJobTTL
	}
	if wait <= 0 {
		wait = shellWaitBudget
	}
	return ttl, wait
}

// add adds s, unless the table is closed, and counts its command as
// running until its handle is done (see watch).
func (t *shellJobs) add(s *shellJob) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.jobs == nil {
		t.jobs = map[string]*shellJob{}
	}
	t.jobs[s.id] = s
	t.wg.Add(1)
	if t.stopJanitor == nil {
		t.stopJanitor = make(chan struct{})
		go t.janitor(t.stopJanitor)
	}
	return true
}

// drop removes s from the table; it reports whether s was there.
func (t *shellJobs) drop(s *shellJob) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jobs[s.id] != s {
		return false
	}
	delete(t.jobs, s.id)
	return true
}

// get returns who's job id: theirs, or anyone's for root. Any other job,
// and one that is not there, is the same 404.
func (t *shellJobs) get(who Who, id string) (*shellJob, error) {
	t.mu.Lock()
	s := t.jobs[id]
	t.mu.Unlock()
	if s == nil || (s.uid != who.Uid && !who.IsRoot()) {
		return nil, abi.E(abi.NotExist, "Unknown shell session: "+id)
	}
	return s, nil
}

// watch waits for s's command to end, then stops its timeout, records
// the update and stops counting it as running.
func (t *shellJobs) watch(s *shellJob) {
	<-s.h.done()
	s.timer.Stop()
	s.touch()
	t.wg.Done()
}

// close refuses new commands, stops every running one, ends the janitor
// and waits until each command is done.
func (t *shellJobs) close() {
	t.mu.Lock()
	t.closed = true
	for _, s := range t.jobs {
		s.stop("the daemon is shutting down")
	}
	if t.stopJanitor != nil {
		select {
		case <-t.stopJanitor:
		default:
			close(t.stopJanitor)
		}
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// janitor removes the jobs not updated for the TTL, killing their
// commands, until stop is closed.
func (t *shellJobs) janitor(stop <-chan struct{}) {
	ttl, _ := t.limits()
	tick := time.NewTicker(min(max(ttl/4, 10*time.Millisecond), time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			t.expire(now, ttl)
		}
	}
}

// expire removes the jobs last updated ttl or more before now.
func (t *shellJobs) expire(now time.Time, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, s := range t.jobs {
		s.mu.Lock()
		old := now.Sub(s.updated) >= ttl
		s.mu.Unlock()
		if old {
			delete(t.jobs, id)
			s.stop("Shell session expired")
		}
	}
}

// startShell starts input for who in dir as a new job, with stdin a
// pipe if stdin, and returns it once its command runs. Its command ends
// at the latest timeout after it starts.
func (sh *Shell) startShell(ctx context.Context, who Who, cwd, dir, input string, timeout time.Duration, stdin bool) (*shellJob, error) {
	s := &shellJob{
		id:      "sh_" + randomText(),
		uid:     who.Uid,
		stdin:   stdin,
		cap:     who.processCap(),
		out:     &tailBuffer{max: maxShellOutput},
		updated: time.Now(),
	}
	if !sh.jobs.add(s) {
		return nil, abi.E(abi.Path("shell"), "the daemon is shutting down")
	}
	h, err := sh.runner(who).start(ctx, &shellCommand{
		who: who, dir: dir, cwd: cwd, env: sh.env(who, dir), input: input, stdin: stdin, out: s.out,
	})
	if err != nil {
		sh.jobs.drop(s)
		sh.jobs.wg.Done()
		return nil, err
	}
	s.timer = time.AfterFunc(timeout, func() { s.stop(errTimedOut) })
	s.mu.Lock()
	s.h = h
	if s.why != "" { // stopped (closed, expired) while it started
		h.kill()
	}
	s.mu.Unlock()
	go sh.jobs.watch(s)
	return s, nil
}

// running is s's result while its command runs: the output not yet
// returned.
func (s *shellJob) running() *abi.ShellExecResult {
	out, trunc := s.out.take(false)
	return &abi.ShellExecResult{Status: "running", SessionID: s.id, Output: out, Truncated: trunc}
}

// final is s's result once its command has ended: its status, the output
// not yet returned, its exit code and error.
func (s *shellJob) final() *abi.ShellExecResult {
	ex := s.h.exit()
	out, trunc := s.out.take(true)
	r := &abi.ShellExecResult{Output: out, Truncated: trunc, Status: "failed"}
	s.mu.Lock()
	why := s.why
	s.mu.Unlock()
	switch {
	case ex.killed && why != "":
		r.Error = why
	case ex.killed:
		r.Error = "stopped"
	case ex.err != nil:
		r.Error = "waiting for the command: " + abi.CauseText(ex.err)
	case ex.code == nil:
		r.Error = "the command's end is unknown"
	case *ex.code == 0:
		r.Status = "completed"
		r.ExitCode = ex.code
	default:
		r.ExitCode = ex.code
		r.Error = "exit code " + strconv.Itoa(*ex.code)
		if ex.signal != 0 {
			r.Error = "killed by " + unix.SignalName(ex.signal) + " (exit code " + strconv.Itoa(*ex.code) + ")"
		}
	}
	return r
}

// finish is s's final result, once only: s leaves the table, and a later
// call on it is a 404.
func (sh *Shell) finish(s *shellJob) (*abi.ShellExecResult, error) {
	if !sh.jobs.drop(s) {
		return nil, abi.E(abi.NotExist, "Unknown shell session: "+s.id)
	}
	return s.final(), nil
}

// continueShell is shell.exec with a sessionId: it writes a non-empty
// input to the command's stdin, then waits, up to the wait budget, until
// the command ends (its final result; the job is then gone) or, once
// there is new output, until none has come for shellPollSettle (status
// "running" with that output). A caller gone (ctx) leaves the command
// running and its output unread.
func (sh *Shell) continueShell(ctx context.Context, who Who, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	s, err := sh.jobs.get(who, a.SessionID)
	if err != nil {
		return nil, err
	}
	if a.Input != "" && !abi.CapWithin(s.cap, who.processCap()) {
		return nil, abi.E(abi.Path(a.SessionID), abi.Permission, errWiderSession)
	}
	s.touch()
	_, wait := sh.jobs.limits()
	deadline := time.Now().Add(wait)
	if a.Input != "" {
		if err := writeShellInput(ctx, s, []byte(a.Input), deadline); err != nil {
			return nil, err
		}
	}
	tick := time.NewTicker(shellPollTick)
	defer tick.Stop()
	last, quiet := s.out.written(), time.Now()
	for {
		if s.ended() {
			r, err := sh.finish(s)
			if err == nil {
				r.SessionID = s.id
			}
			return r, err
		}
		now := time.Now()
		if n := s.out.written(); n != last {
			last, quiet = n, now
		} else if n > 0 && now.Sub(quiet) >= shellPollSettle {
			return s.running(), nil
		}
		if !now.Before(deadline) {
			return s.running(), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.h.done():
		case <-tick.C:
		}
	}
}

// writeShellInput writes p to s's command's stdin by deadline (or until
// ctx ends).
func writeShellInput(ctx context.Context, s *shellJob, p []byte, deadline time.Time) error {
	if !s.stdin {
		return abi.E(abi.Path(s.id), abi.Invalid, "the command's stdin is /dev/null: start it with background:true to write to it")
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	type wrote struct {
		n   int
		err error
	}
	res := make(chan wrote, 1)
	go func() {
		n, err := s.h.writeInput(p, deadline)
		res <- wrote{n, err}
	}()
	var w wrote
	select {
	case w = <-res:
	case <-ctx.Done():
		// The write ends at its deadline at the latest; the caller is gone.
		return ctx.Err()
	}
	switch {
	case w.err == nil:
		return nil
	case errors.Is(w.err, os.ErrDeadlineExceeded):
		return abi.E(abi.Path(s.id), abi.Timeout, "the command is not reading its stdin: wrote "+
			strconv.Itoa(w.n)+" of "+strconv.Itoa(len(p))+" bytes")
	default:
		return abi.E(abi.Path(s.id), abi.Busy, "the command's stdin is closed (it has ended): poll with empty input for its result")
	}
}
