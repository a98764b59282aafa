package kernel

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

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
	// the inherited pipe before it stops listening.
	shellDrainGrace = 200 * time.Millisecond
	// shellPath is the PATH of a command's environment.
	shellPath = "/usr/local/bin:/usr/bin:/bin"
)

type shellExecArgs struct {
	Target    string `json:"target"`
	Cwd       string `json:"cwd"`
	Input     string `json:"input"`
	SessionID string `json:"sessionId"`
	TimeoutMs int64  `json:"timeoutMs"`
}

// registerShell registers shell.exec.
//
// shell.exec runs input with `/bin/sh -c` and returns the seed's result:
// {status:"completed", output, exitCode, truncated?} when the shell exited
// (whatever its exit code; a shell killed by a signal reports 128+signal),
// {status:"failed", output, error, truncated?} when it timed out or could
// not be waited for, and {ok:false, error} when it could not be started
// (bad target aside, which is a 503 frame error as for fs.*).
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
// The command is its own process group. It runs until it exits or until
// its timeout (timeoutMs, default 2m, at most 10m), when the whole group is
// killed and the result says "timed out after Ns". Background children
// still running when the shell exits are left alone (they lose the output
// pipe after shellDrainGrace: redirect their output to keep them quiet).
//
// A cancelled ctx ends the wait, not the work: the dispatcher's callers
// may cancel spuriously (a FUSE interrupt on the ctl write that carried
// the call), so the command is bound only by its own timeout. When ctx ends
// first the syscall returns ctx.Err() at once and the command runs on to
// its end or its timeout in the background, where a goroutine reaps it.
//
// Known limitations:
//   - The command runs as the daemon's host user, not as the caller's
//     mapped host user: it can read and write whatever the daemon can,
//     including other users' files and the state dir. The cwd permission
//     check is policy, not a sandbox. shell.exec is therefore gated by
//     capability (the users group has it; tokens may drop it) and, for
//     agents, by human approval.
//   - The working directory is always under the state dir, never inside
//     the daemon's own FUSE mount, and the shell is /bin/sh with a PATH
//     of system directories only: a child blocking on a path the daemon
//     itself serves would deadlock the daemon against itself.
//   - Sessions (polling a running command, writing its stdin) are not
//     supported yet: a sessionId is refused.
func (k *Kernel) registerShell() {
	Handle(k, "shell.exec", 0, func(ctx context.Context, c *Caller, a *shellExecArgs) (map[string]any, error) {
		if err := checkTarget(a.Target); err != nil {
			return nil, err
		}
		if a.SessionID != "" {
			return opErr(E(Invalid, msg("shell sessions are not supported yet"))), nil
		}
		if strings.TrimSpace(a.Input) == "" {
			return opErr(E(Invalid, msg("empty input"))), nil
		}
		if strings.ContainsRune(a.Input, 0) {
			return opErr(E(Invalid, msg("input contains a NUL byte"))), nil
		}
		timeout := defaultShellTimeout
		if a.TimeoutMs > 0 {
			timeout = min(time.Duration(a.TimeoutMs)*time.Millisecond, maxShellTimeout)
		}
		dir, err := k.shellDir(ctx, c.Identity, a.Cwd)
		if err != nil {
			return opErr(err), nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err // nothing started yet: the caller is gone
		}
		job, err := k.startShell(c.Identity, dir, a.Input, timeout)
		if err != nil {
			return opErr(err), nil
		}
		select {
		case res := <-job:
			return res, nil
		case <-ctx.Done():
			k.log.Debug("shell.exec: caller gone, command left to run", "uid", c.Uid, "dir", dir)
			return nil, ctx.Err()
		}
	})
}

// shellDir resolves cwd (the caller's cwd if empty) and checks that it is
// a directory id may search; it returns its real path.
func (k *Kernel) shellDir(ctx context.Context, id *Identity, cwd string) (string, error) {
	if cwd == "" {
		cwd = id.Cwd
	}
	rel, err := resolve(id, cwd)
	if err != nil {
		return "", E("cwd", err)
	}
	fi, err := k.access(ctx, id, rel, vfs.WantExec)
	if err != nil {
		return "", E("cwd", err)
	}
	if !fi.IsDir() {
		return "", E("cwd", "/"+rel, syscall.ENOTDIR)
	}
	return k.dataPath + "/" + rel, nil
}

// shellEnv is the fixed environment of a command run for id in dir.
func (k *Kernel) shellEnv(id *Identity, dir string) []string {
	home := dir
	if rel, err := resolve(id, id.Home); err == nil {
		home = k.dataPath + "/" + rel
	}
	return []string{
		"PATH=" + shellPath,
		"HOME=" + home,
		"USER=" + id.Username,
		"LOGNAME=" + id.Username,
		"GSV_UID=" + strconv.FormatUint(uint64(id.Uid), 10),
		"LANG=C.UTF-8",
		"PWD=" + dir,
	}
}

// startShell starts input under /bin/sh in dir and returns a channel that
// receives the result once the command has ended (or timed out) and its
// output is drained. The command's life is independent of any caller's
// context: only timeout ends it early.
func (k *Kernel) startShell(id *Identity, dir, input string, timeout time.Duration) (<-chan map[string]any, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, E("shell", Msgf("output pipe: %v", err))
	}
	cmd := exec.Command("/bin/sh", "-c", input)
	cmd.Dir = dir
	cmd.Env = k.shellEnv(id, dir)
	cmd.Stdin = nil // /dev/null
	// One *os.File for both: the child writes straight into our pipe, in
	// order, and Wait returns when the shell exits rather than when every
	// holder of the pipe has closed it.
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, E("shell", Msgf("starting /bin/sh: %v", causeText(err)))
	}
	pw.Close()
	pgid := cmd.Process.Pid
	k.log.Debug("shell.exec started", "uid", id.Uid, "user", id.Username, "dir", dir, "pgid", pgid)

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

	res := make(chan map[string]any, 1)
	go func() {
		defer pr.Close()
		var timedOut bool
		var mu sync.Mutex
		timer := time.AfterFunc(timeout, func() {
			mu.Lock()
			timedOut = true
			mu.Unlock()
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
				k.log.Warn("shell.exec: killing timed-out command", "pgid", pgid, "err", err)
			}
		})
		werr := cmd.Wait()
		timer.Stop()
		mu.Lock()
		killed := timedOut
		mu.Unlock()
		// Output still in the pipe, or written by background children
		// for a moment more; then stop listening.
		select {
		case <-drained:
		case <-time.After(shellDrainGrace):
			pr.SetReadDeadline(time.Now())
			<-drained
		}
		output, truncated := out.text()
		r := map[string]any{"output": output}
		if truncated {
			r["truncated"] = true
		}
		var exitErr *exec.ExitError
		switch {
		case killed:
			r["status"] = "failed"
			r["error"] = "timed out after " + strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64) + "s"
		case werr == nil:
			r["status"] = "completed"
			r["exitCode"] = 0
		case errors.As(werr, &exitErr):
			r["status"] = "completed"
			r["exitCode"] = exitCode(exitErr)
		default:
			r["status"] = "failed"
			r["error"] = "waiting for the command: " + causeText(werr)
		}
		k.log.Debug("shell.exec ended", "uid", id.Uid, "pgid", pgid, "status", r["status"], "exitCode", r["exitCode"])
		res <- r
	}()
	return res, nil
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
