package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
)

// ShellRunner starts shell commands for shell.exec's jobs. The host
// runner (HostRunner, hostShell) runs /bin/sh as the daemon's user in a
// process group of its own; a sandbox runtime is another runner (the
// local device's, for its callers but root). The jobs (polls, stdin,
// timeouts, expiry) are the Shell's, whatever the runner. Its method is
// unexported: the runners are this package's.
type ShellRunner interface {
	// start starts c and returns its handle once it runs, or why it
	// could not start (nothing then runs).
	start(ctx context.Context, c *shellCommand) (shellHandle, error)
}

// shellCommand is one command for a runner to start.
type shellCommand struct {
	who   Who
	dir   string   // the real working directory (the host runner's)
	cwd   string   // the working directory's namespace path (a sandbox's)
	env   []string // the whole environment
	input string   // the text /bin/sh -c runs
	// stdin says the command's stdin is a pipe that writeInput writes;
	// otherwise it is /dev/null.
	stdin bool
	// out receives stdout and stderr, merged in the order written, until
	// the command's handle is done.
	out io.Writer
}

// shellHandle is a started command.
type shellHandle interface {
	// writeInput writes p to the command's stdin, giving up at deadline;
	// an error if its stdin is /dev/null, closed, or the command ended.
	writeInput(p []byte, deadline time.Time) (int, error)
	// kill stops the command: every process of it gets SIGTERM now and
	// SIGKILL shellKillGrace later if the command has not ended. It
	// returns at once; only the first kill counts.
	kill()
	// done is closed once the command has ended (exited or killed), its
	// output is all written to out and every process of it is gone.
	done() <-chan struct{}
	// exit is how the command ended; valid once done is closed.
	exit() shellExit
}

// shellExit is how a command ended.
type shellExit struct {
	// killed: kill was called before the command exited by itself.
	killed bool
	// code is its exit code, 128+signal if a signal killed the shell (as
	// $? reports it); nil if it was not waited for.
	code *int
	// signal killed the shell, if not 0.
	signal syscall.Signal
	// err is why it could not be waited for.
	err error
}

// HostRunner is the runner of commands on the host (hostShell), logging
// to log.
func HostRunner(log *slog.Logger) ShellRunner {
	if log == nil {
		log = slog.Default()
	}
	return hostShell{log: log}
}

// hostShell is the runner of commands on the host: /bin/sh -c as the
// daemon's own user, leading its own process group, which the runner
// kills whole when the shell exits, when it is killed and when the
// daemon dies (see hostProc).
type hostShell struct {
	log *slog.Logger
	// view, if not nil, shows a command the data tree's directories at
	// their namespace paths (the local device's root: /home and the
	// rest, see Device.runner), in a mount namespace of its own; nil: the
	// host's file system as it is.
	view *nsView
}

// nsView is how a host command sees the namespace: binds, made in a root
// of its own at root (see enterBinds).
type nsView struct {
	root  string
	binds []pathBind
}

// pathBind is a real directory (under the state directory) shown at its
// namespace path.
type pathBind struct{ real, ns string }

// hostProc is a command of hostShell: a shell leading its process group.
type hostProc struct {
	pgid int
	log  *slog.Logger
	view *nsView // see hostShell

	// stdin is the write end of its stdin pipe (nil for /dev/null);
	// stdinMu keeps writes whole, one after another; closeStdin closes it
	// without waiting for a write.
	stdinMu    sync.Mutex
	stdin      *os.File
	stdinClose sync.Once

	// stopping is closed by the first kill.
	stopOnce sync.Once
	stopping chan struct{}
	// ended is closed when everything is gone; ex is then how it ended.
	ended chan struct{}
	ex    shellExit
}

func (p *hostProc) done() <-chan struct{} { return p.ended }
func (p *hostProc) exit() shellExit       { return p.ex }
func (p *hostProc) kill()                 { p.stopOnce.Do(func() { close(p.stopping) }) }

func (p *hostProc) writeInput(b []byte, deadline time.Time) (int, error) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return 0, errStdinClosed
	}
	if err := p.stdin.SetWriteDeadline(deadline); err != nil {
		return 0, errStdinClosed // closed as the command ended
	}
	n, err := p.stdin.Write(b)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		err = errStdinClosed
	}
	return n, err
}

// closeStdin closes the command's stdin, which ends a pending write.
func (p *hostProc) closeStdin() {
	p.stdinClose.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		}
	})
}

// errStdinClosed is why input cannot be written to a command.
var errStdinClosed = errors.New("the command's stdin is closed")

// start starts the command and returns once it runs (see run).
func (h hostShell) start(ctx context.Context, c *shellCommand) (shellHandle, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &hostProc{log: h.log, view: h.view, stopping: make(chan struct{}), ended: make(chan struct{})}
	started := make(chan error, 1)
	sandbox.GoOwnThread(func() { p.run(c, started) })
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// run starts the command, reports the start on started, and waits for
// it. It runs on an OS thread of its own (sandbox.GoOwnThread) until the
// shell is reaped: Pdeathsig fires when the thread that forked the shell
// ends. The thread is made sandbox.Nice steps nicer first, so that root's
// commands too come after the daemon's service of every user (root may
// renice them).
//
// When the shell exits, whatever is left of its group (background
// children) may write to the output for shellDrainGrace more and is then
// killed (SIGKILL). A kill sends the group SIGTERM and, if the shell has
// not exited shellKillGrace later, SIGKILL. A daemon that dies without
// doing so takes the group with it: the shell has Pdeathsig SIGKILL, and a
// guard process outside the group kills the group when a pipe only the
// daemon writes to closes (see startGuard).
//
// With a view, the command runs in a mount namespace and root of its own
// in which each bind's real directory is at its namespace path over the
// host's file system (enterBinds), with the namespace path of its working
// directory as its cwd and HOME and PWD as namespace paths: a path means
// the same in the command as in fs.*. The namespace is the command's
// own thread's (unshare(CLONE_NEWNS) affects only it), which ends with
// the command. A view that cannot be made (the daemon is not root) leaves
// the command on the host's paths.
func (p *hostProc) run(c *shellCommand, started chan<- error) {
	defer close(p.ended)
	if err := sandbox.LowerThread(sandbox.Nice); err != nil {
		started <- abi.E(abi.Path("shell"), fmt.Sprintf("the command's priority: %v", err))
		return
	}
	dir, env := c.dir, c.env
	if v := p.view; v != nil {
		// The thread is this command's alone (sandbox.GoOwnThread) and
		// ends with it: a mount namespace given to it goes with it.
		if unshared, err := enterBinds(v.root, v.binds); err != nil {
			if unshared {
				started <- abi.E(abi.Path("shell"), fmt.Sprintf("the namespace's view: %v", err))
				return
			}
			p.log.Debug("shell.exec: the data tree stays at its real paths", "err", err)
		} else if ns, ok := nsPathOf(v.binds, dir); ok {
			dir, env = ns, nsEnv(v.binds, env)
		}
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		started <- abi.E(abi.Path("shell"), fmt.Sprintf("output pipe: %v", err))
		return
	}
	defer pr.Close()
	cmd := exec.Command("/bin/sh", "-c", c.input)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil // /dev/null
	var inR *os.File
	if c.stdin {
		if inR, p.stdin, err = os.Pipe(); err != nil {
			pw.Close()
			started <- abi.E(abi.Path("shell"), fmt.Sprintf("input pipe: %v", err))
			return
		}
		cmd.Stdin = inR
	}
	defer p.closeStdin()
	// One *os.File for both: the child writes straight into our pipe, in
	// order, and Wait returns when the shell exits rather than when every
	// holder of the pipe has closed it.
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	pw.Close()
	if inR != nil {
		inR.Close()
	}
	if err != nil {
		started <- abi.E(abi.Path("shell"), fmt.Sprintf("starting /bin/sh: %v", abi.CauseText(err)))
		return
	}
	pid := cmd.Process.Pid
	guard, guardW, err := startGuard(pid)
	if err != nil {
		p.killGroup(pid, syscall.SIGKILL)
		cmd.Wait()
		started <- abi.E(abi.Path("shell"), fmt.Sprintf("starting the command's guard: %v", abi.CauseText(err)))
		return
	}
	defer guardW.Close()
	p.pgid = pid
	started <- nil
	p.log.Debug("shell.exec started", "uid", c.who.Uid, "user", c.who.Username, "dir", c.dir, "pgid", pid)

	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			c.out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()

	exited := make(chan struct{})
	stopperDone := make(chan struct{})
	go func() { // the stopper: SIGTERM, then SIGKILL after the grace
		defer close(stopperDone)
		select {
		case <-exited:
			return
		case <-p.stopping:
		}
		p.killGroup(pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(shellKillGrace):
			p.killGroup(pid, syscall.SIGKILL)
		}
	}()

	// Wait for the shell to exit without reaping it: its zombie keeps its
	// pid, and so the group's id, from being reused until the group is
	// killed below.
	werr := waitExited(pid)
	close(exited)
	select {
	case <-p.stopping:
		p.ex.killed = true
	default:
	}
	p.closeStdin()
	// Output still in the pipe, or written by background children for a
	// moment more; then kill what is left of the group and stop listening.
	select {
	case <-drained:
	case <-time.After(shellDrainGrace):
	}
	p.killGroup(pid, syscall.SIGKILL)
	pr.SetReadDeadline(time.Now())
	<-drained
	<-stopperDone
	guard.Process.Kill() // the group is dead: the guard has nothing to do
	guard.Wait()
	if err := cmd.Wait(); werr == nil {
		werr = err
	}
	var exitErr *exec.ExitError
	switch {
	case werr == nil:
		p.ex.code = new(int)
	case errors.As(werr, &exitErr):
		code := exitCode(exitErr)
		p.ex.code = &code
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.ex.signal = ws.Signal()
		}
	default:
		p.ex.err = werr
	}
	p.log.Debug("shell.exec ended", "uid", c.who.Uid, "pgid", pid, "exitCode", p.ex.code, "killed", p.ex.killed)
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
func (p *hostProc) killGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && err != syscall.ESRCH {
		p.log.Warn("shell.exec: signalling the command's group", "pgid", pgid, "signal", sig, "err", err)
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

// enterBinds gives the calling thread (locked to its goroutine) a mount
// namespace and a root of its own, in which the data tree's directories
// are at their namespace paths over the host's file system: a tmpfs at
// root (a directory the daemon keeps empty) gets every entry of the
// host's / and /var (bind mounts, or the same symbolic links), except that
// each bind's real directory takes its namespace path's place, and the
// thread chroots into it. Nothing reaches the host's namespace (/ is made
// private first), and no directory is made on the host. It reports
// whether the thread left the process's namespace (it must then never be
// unlocked).
func enterBinds(root string, binds []pathBind) (unshared bool, err error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return false, fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return true, fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return true, fmt.Errorf("the root's tmpfs: %w", err)
	}
	// The directories to fill: / and those above a bind (/var).
	fill := map[string]bool{"/": true}
	own := map[string]string{} // namespace path -> real directory
	for _, b := range binds {
		own[b.ns] = b.real
		for d := path.Dir(b.ns); d != "/"; d = path.Dir(d) {
			fill[d] = true
		}
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range ents {
			p := path.Join(dir, e.Name())
			seen[p] = true
			if _, ok := own[p]; ok || p == root {
				continue
			}
			if fill[p] && e.IsDir() {
				if err := os.Mkdir(root+p, 0o755); err != nil {
					return err
				}
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			if err := mirror(root, p, e.Type()); err != nil {
				return err
			}
		}
		// Directories the host lacks above or at a bind (/var/sessions).
		for p := range fill {
			if path.Dir(p) == dir && !seen[p] && p != "/" {
				if err := os.Mkdir(root+p, 0o755); err != nil {
					return err
				}
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		for p, real := range own {
			if path.Dir(p) != dir {
				continue
			}
			if err := os.Mkdir(root+p, 0o755); err != nil {
				return err
			}
			if err := unix.Mount(real, root+p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s: %w", p, err)
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return true, err
	}
	if err := unix.Chroot(root); err != nil {
		return true, fmt.Errorf("chroot: %w", err)
	}
	return true, unix.Chdir("/")
}

// mirror puts the host's p (of type t) at root+p: the same symbolic link,
// or a bind mount of the directory or file.
func mirror(root, p string, t fs.FileMode) error {
	dst := root + p
	switch {
	case t&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case t.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
	default:
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(p, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	return nil
}

// nsPathOf is the namespace path of the real path p under one of binds.
func nsPathOf(binds []pathBind, p string) (string, bool) {
	for _, b := range binds {
		if p == b.real {
			return b.ns, true
		}
		if rest, ok := strings.CutPrefix(p, b.real+"/"); ok {
			return b.ns + "/" + rest, true
		}
	}
	return "", false
}

// nsEnv is env with HOME and PWD as namespace paths where binds show them.
func nsEnv(binds []pathBind, env []string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		out[i] = kv
		for _, k := range []string{"HOME=", "PWD="} {
			if v, ok := strings.CutPrefix(kv, k); ok {
				if ns, ok := nsPathOf(binds, v); ok {
					out[i] = k + ns
				}
			}
		}
	}
	return out
}
