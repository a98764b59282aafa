package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// shell.exec on the gsv target: a real /bin/sh run by the daemon, with its
// working directory in the data tree.

const (
	// defaultShellTimeout is a command's time limit when timeoutMs is not
	// given; maxShellTimeout is the largest a caller may ask for.
	defaultShellTimeout = 120 * time.Second
	maxShellTimeout     = 600 * time.Second
	// maxShellOutput is how much of a command's output (stdout and stderr
	// merged) shell.exec keeps: the last bytes, which matter most in a
	// build log.
	maxShellOutput = 64 << 10
	// shellDrainGrace is how long, after the shell exits, shell.exec keeps
	// reading output that its leftover background children still write to
	// the inherited pipe before it kills them.
	shellDrainGrace = 200 * time.Millisecond
	// shellKillGrace is how long a stopped command's shell has to exit
	// after its group gets SIGTERM; then the group gets SIGKILL.
	shellKillGrace = time.Second
	// shellPath is the PATH of a command's environment.
	shellPath = "/usr/local/bin:/usr/bin:/bin"
)

// errShellNotRoot is why shell.exec refuses a caller that is not root.
var errShellNotRoot = abi.E(abi.Permission, "only root may run host commands: they run on the host as the daemon's user, "+
	"not as you; for other users they arrive with exec sessions")

// Exec is shell.exec on the local device.
//
// shell.exec runs input with `/bin/sh -c` on the host as the daemon's own
// host user. Only root (GSV uid 0, and the kernel) may make it: for any
// other caller it is a 403 before anything starts, whatever the caller's
// capabilities, because the command would run with the daemon's rights,
// not the caller's. The agent's Shell tool makes the same syscall as the
// process's owner, so for a non-root owner its result is that error (the
// agent loop checks Permit before it asks a human). Commands for other
// users arrive with exec sessions, which run them with the caller's own
// authority.
//
// It returns the seed's result: {status:"completed", output, exitCode:0,
// truncated?} when the shell exited 0; {status:"failed", output, exitCode,
// error, truncated?} when it exited non-zero (a shell killed by a signal
// reports 128+signal, as $? does); {status:"failed", output, error,
// truncated?} when it timed out, the daemon shut down, or it could not be
// waited for; and {ok:false, error} when it could not be started.
//
// The command runs in cwd (default: the caller's cwd), a namespace path
// ("~", "~/src", "/workspaces/x") that must be a directory of the data tree
// the caller may search; the process's working directory is its real
// directory under the state dir. Its stdin is /dev/null, its stdout and
// stderr share one pipe, and its environment is a fixed minimal one (PATH,
// HOME as the caller's real home directory, USER, GSV_UID, LANG, PWD): the
// daemon's own environment, which may hold secrets, is never passed on.
// Output is capped at maxShellOutput, keeping the tail; a truncated output
// begins with a "[... N bytes truncated ...]" line.
//
// The command is its own process group, and the device owns it until the
// group is gone:
//   - When the shell exits, whatever is left of its group (background
//     children) may write to the output for shellDrainGrace more and is
//     then killed (SIGKILL): no process outlives the command that started
//     it. A server meant to outlive the call does not belong in shell.exec.
//   - At its timeout (timeoutMs, default 2m, at most 10m), when ctx ends
//     (the caller is gone: a client that closed its handle, Ctrl-C, a 9P
//     Tflush or a closed connection; an agent run aborted) and when the
//     device ends its commands (EndCommands), the group gets SIGTERM and,
//     if the shell has not exited shellKillGrace later, SIGKILL; children
//     that trap SIGTERM die all the same. A timed-out command's result
//     says "timed out after Ns"; a cancelled call returns ctx.Err() at
//     once while the group is killed.
//   - Close (and EndCommands, which a daemon calls as it begins to shut
//     down) stops every command this way and returns after each shell is
//     reaped; commands asked for after it are refused.
//   - A daemon that dies without doing so (SIGKILL, a crash) takes the
//     group with it: the shell has Pdeathsig SIGKILL (the goroutine that
//     starts and waits for it is locked to its OS thread until the shell
//     is reaped, since Pdeathsig follows the forking thread), and a guard
//     process outside the group kills the whole group when the pipe only
//     the daemon writes to closes (see startGuard).
//
// Known limitations:
//   - A process that leaves the group (setsid, setpgid) is no longer the
//     command's, and nothing kills it.
//   - The working directory is always under the state dir, never inside
//     the daemon's own FUSE mount, and the shell is /bin/sh with a PATH
//     of system directories only: a child blocking on a path the daemon
//     itself serves would deadlock the daemon against itself.
//   - Sessions (polling a running command, writing its stdin) are not
//     supported yet: a sessionId is refused.
func (d *Device) Exec(ctx context.Context, who Who, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	if a.SessionID != "" {
		return notStarted(abi.E(abi.Invalid, "shell sessions are not supported yet")), nil
	}
	if strings.TrimSpace(a.Input) == "" {
		return notStarted(abi.E(abi.Invalid, "empty input")), nil
	}
	if strings.ContainsRune(a.Input, 0) {
		return notStarted(abi.E(abi.Invalid, "input contains a NUL byte")), nil
	}
	timeout := defaultShellTimeout
	if a.TimeoutMs > 0 {
		timeout = time.Duration(min(a.TimeoutMs, maxShellTimeout.Milliseconds())) * time.Millisecond
	}
	dir, err := d.shellDir(ctx, who, a.Cwd)
	if err != nil {
		return notStarted(err), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err // nothing started yet: the caller is gone
	}
	job, err := d.startShell(who, dir, a.Input, timeout)
	if err != nil {
		return notStarted(err), nil
	}
	select {
	case <-job.done:
		return job.res, nil
	case <-ctx.Done():
		d.log.Debug("shell.exec: caller gone, killing the command", "uid", who.Uid, "pgid", job.pgid)
		job.stop("cancelled")
		return nil, ctx.Err()
	}
}

// notStarted is shell.exec's result for a command that did not start.
func notStarted(err error) *abi.ShellExecResult {
	return &abi.ShellExecResult{Error: err.Error()}
}

// AdmitShell is shell.exec's own rule on who may make it on the local
// device: root only (see Exec).
func AdmitShell(id Identity) error {
	if !id.IsRoot() {
		return errShellNotRoot
	}
	return nil
}

// shellJobs is the set of running commands; the device owns it.
type shellJobs struct {
	mu     sync.Mutex
	m      map[*shellJob]struct{}
	closed bool
	wg     sync.WaitGroup // one per job until its shell is reaped
}

// add adds j, unless the set is closed.
func (s *shellJobs) add(j *shellJob) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.m == nil {
		s.m = map[*shellJob]struct{}{}
	}
	s.m[j] = struct{}{}
	s.wg.Add(1)
	return true
}

// remove removes j once its shell is reaped.
func (s *shellJobs) remove(j *shellJob) {
	s.mu.Lock()
	delete(s.m, j)
	s.mu.Unlock()
	s.wg.Done()
}

// close refuses new commands, stops every running one and waits until
// each shell is reaped.
func (s *shellJobs) close() {
	s.mu.Lock()
	s.closed = true
	for j := range s.m {
		j.stop("the daemon is shutting down")
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// shellJob is one running command: a shell leading its process group.
type shellJob struct {
	pgid int
	// stopping is closed by the first stop; why is its reason.
	stopOnce sync.Once
	stopping chan struct{}
	why      string
	// done is closed when the shell is reaped and its group killed; res
	// is then the result.
	done chan struct{}
	res  *abi.ShellExecResult
}

// stop ends the command for the reason why (the result's error): SIGTERM
// to its group now, SIGKILL if the shell still runs shellKillGrace later.
// Only the first stop counts.
func (j *shellJob) stop(why string) {
	j.stopOnce.Do(func() {
		j.why = why
		close(j.stopping)
	})
}

// shellDir resolves cwd (the caller's cwd if empty) and checks that it is
// a directory who may search; it returns its real path.
func (d *Device) shellDir(ctx context.Context, who Who, cwd string) (string, error) {
	if cwd == "" {
		cwd = who.Cwd
	}
	rel, err := resolve(who, cwd)
	if err != nil {
		return "", abi.E(abi.Op("cwd"), err)
	}
	fi, err := d.access(ctx, who, rel, vfs.WantExec)
	if err != nil {
		return "", abi.E(abi.Op("cwd"), err)
	}
	if !fi.IsDir() {
		return "", abi.E(abi.Op("cwd"), abi.Path("/"+rel), syscall.ENOTDIR)
	}
	return d.dataPath + "/" + rel, nil
}

// shellEnv is the fixed environment of a command run for who in dir.
func (d *Device) shellEnv(who Who, dir string) []string {
	home := dir
	if rel, err := resolve(who, who.Home); err == nil {
		home = d.dataPath + "/" + rel
	}
	return []string{
		"PATH=" + shellPath,
		"HOME=" + home,
		"USER=" + who.Username,
		"LOGNAME=" + who.Username,
		"GSV_UID=" + strconv.FormatUint(uint64(who.Uid), 10),
		"LANG=C.UTF-8",
		"PWD=" + dir,
	}
}

// startShell starts input under /bin/sh in dir and returns its job, whose
// done channel is closed once the command has ended (exited, timed out or
// been stopped), its output is drained and its group is killed and
// reaped. Only the job's stop, its timeout and EndCommands end it
// early.
func (d *Device) startShell(who Who, dir, input string, timeout time.Duration) (*shellJob, error) {
	j := &shellJob{stopping: make(chan struct{}), done: make(chan struct{})}
	if !d.shells.add(j) {
		return nil, abi.E(abi.Path("shell"), "the daemon is shutting down")
	}
	started := make(chan error, 1)
	go d.runShell(j, who, dir, input, timeout, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return j, nil
}

// runShell starts the command, reports the start on started, and waits
// for it. It runs locked to its OS thread until the shell is reaped:
// Pdeathsig fires when the thread that forked the shell ends, and a
// locked thread ends only with its goroutine.
func (d *Device) runShell(j *shellJob, who Who, dir, input string, timeout time.Duration, started chan<- error) {
	defer d.shells.remove(j)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	pr, pw, err := os.Pipe()
	if err != nil {
		started <- abi.E(abi.Path("shell"), fmt.Sprintf("output pipe: %v", err))
		return
	}
	defer pr.Close()
	cmd := exec.Command("/bin/sh", "-c", input)
	cmd.Dir = dir
	cmd.Env = d.shellEnv(who, dir)
	cmd.Stdin = nil // /dev/null
	// One *os.File for both: the child writes straight into our pipe, in
	// order, and Wait returns when the shell exits rather than when every
	// holder of the pipe has closed it.
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		pw.Close()
		started <- abi.E(abi.Path("shell"), fmt.Sprintf("starting /bin/sh: %v", abi.CauseText(err)))
		return
	}
	pw.Close()
	pid := cmd.Process.Pid
	guard, guardW, err := startGuard(pid)
	if err != nil {
		d.killGroup(pid, syscall.SIGKILL)
		cmd.Wait()
		started <- abi.E(abi.Path("shell"), fmt.Sprintf("starting the command's guard: %v", abi.CauseText(err)))
		return
	}
	defer guardW.Close()
	j.pgid = pid
	started <- nil
	d.log.Debug("shell.exec started", "uid", who.Uid, "user", who.Username, "dir", dir, "pgid", pid)

	out := &tailBuffer{max: maxShellOutput}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()

	timer := time.AfterFunc(timeout, func() {
		j.stop("timed out after " + strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64) + "s")
	})
	exited := make(chan struct{})
	stopperDone := make(chan struct{})
	go func() { // the stopper: SIGTERM, then SIGKILL after the grace
		defer close(stopperDone)
		select {
		case <-exited:
			return
		case <-j.stopping:
		}
		d.killGroup(pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(shellKillGrace):
			d.killGroup(pid, syscall.SIGKILL)
		}
	}()

	// Wait for the shell to exit without reaping it: its zombie keeps its
	// pid, and so the group's id, from being reused until the group is
	// killed below.
	werr := waitExited(pid)
	timer.Stop()
	close(exited)
	var stopped bool // whether the command was stopped before it exited
	select {
	case <-j.stopping:
		stopped = true
	default:
	}
	// Output still in the pipe, or written by background children for a
	// moment more; then kill what is left of the group and stop listening.
	select {
	case <-drained:
	case <-time.After(shellDrainGrace):
	}
	d.killGroup(pid, syscall.SIGKILL)
	pr.SetReadDeadline(time.Now())
	<-drained
	<-stopperDone
	guard.Process.Kill() // the group is dead: the guard has nothing to do
	guard.Wait()
	if err := cmd.Wait(); werr == nil {
		werr = err
	}

	output, truncated := out.text()
	r := &abi.ShellExecResult{Output: output, Truncated: truncated}
	var exitErr *exec.ExitError
	if stopped {
		r.Status = "failed"
		r.Error = j.why
	} else {
		switch {
		case werr == nil:
			r.Status = "completed"
			r.ExitCode = new(int)
		case errors.As(werr, &exitErr):
			code := exitCode(exitErr)
			r.Status = "failed"
			r.ExitCode = &code
			r.Error = "exit code " + strconv.Itoa(code)
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.Error = "killed by " + unix.SignalName(ws.Signal()) + " (exit code " + strconv.Itoa(code) + ")"
			}
		default:
			r.Status = "failed"
			r.Error = "waiting for the command: " + abi.CauseText(werr)
		}
	}
	d.log.Debug("shell.exec ended", "uid", who.Uid, "pgid", pid, "status", r.Status, "exitCode", r.ExitCode)
	j.res = r
	close(j.done)
}

// startGuard starts the guard of process group pgid: a /bin/sh outside
// the group that reads its stdin, a pipe whose write end only the daemon
// holds, and kills the group (SIGKILL) when it reads end of file, which
// happens only when the daemon has died without killing the group itself.
// It returns the guard and the pipe's write end, to be closed only after
// the guard is killed and reaped. The daemon kills the guard before it
// reaps the group's leader, so that the group's id is still the command's
// whenever the guard may act.
func startGuard(pgid int) (*exec.Cmd, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	g := exec.Command("/bin/sh", "-c", `read _; kill -s KILL -- "-$1"`, "gsv-shell-guard", strconv.Itoa(pgid))
	g.Dir = "/"
	g.Env = []string{"PATH=" + shellPath}
	g.Stdin = r
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = g.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	return g, w, nil
}

// waitExited waits until the child pid has exited, leaving it unreaped.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// killGroup sends sig to the process group pgid.
func (d *Device) killGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && err != syscall.ESRCH {
		d.log.Warn("shell.exec: signalling the command's group", "pgid", pgid, "signal", sig, "err", err)
	}
}

// exitCode is the shell's exit code, or 128+signal if a signal killed it,
// as a shell reports it in $?.
func exitCode(e *exec.ExitError) int {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return e.ExitCode()
}

// tailBuffer is an io.Writer that keeps the last max bytes written to it
// (a ring buffer) and counts them all.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte // len(buf) <= max; once full, the oldest byte is at start
	start int
	total int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if len(p) >= b.max {
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		b.start = 0
		return n, nil
	}
	if room := b.max - len(b.buf); room > 0 {
		c := min(room, len(p))
		b.buf = append(b.buf, p[:c]...)
		p = p[c:]
	}
	for len(p) > 0 {
		c := copy(b.buf[b.start:], p)
		p = p[c:]
		b.start = (b.start + c) % b.max
	}
	return n, nil
}

// text returns the kept output as valid UTF-8 and whether earlier output
// was dropped, in which case it starts with a "[... N bytes truncated
// ...]" line. A character cut by the ring's edge is dropped whole.
func (b *tailBuffer) text() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := make([]byte, 0, len(b.buf))
	kept = append(kept, b.buf[b.start:]...)
	kept = append(kept, b.buf[:b.start]...)
	dropped := b.total - int64(len(kept))
	if dropped == 0 {
		return strings.ToValidUTF8(string(kept), "\uFFFD"), false
	}
	for i := 0; i < utf8.UTFMax-1 && len(kept) > 0 && !utf8.RuneStart(kept[0]); i++ {
		kept = kept[1:]
		dropped++
	}
	return "[... " + strconv.FormatInt(dropped, 10) + " bytes truncated ...]\n" +
		strings.ToValidUTF8(string(kept), "\uFFFD"), true
}
