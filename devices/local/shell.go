package local

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// shell.exec on the gsv target: a real /bin/sh run by the daemon, with its
// working directory in the data tree, as a job the caller can poll.

const (
	// defaultShellTimeout is a command's time limit when timeoutMs is not
	// given; maxShellTimeout is the largest a caller may ask for.
	defaultShellTimeout = 120 * time.Second
	maxShellTimeout     = 600 * time.Second
	// maxShellOutput is how much of a command's output (stdout and stderr
	// merged) one result of shell.exec carries at most: the last bytes,
	// which matter most in a build log (the seed's 200,000 characters).
	maxShellOutput = 200_000
	// shellDrainGrace is how long, after the shell exits, the runner keeps
	// reading output that its leftover background children still write to
	// the inherited pipe before it kills them.
	shellDrainGrace = 200 * time.Millisecond
	// shellKillGrace is how long a stopped command's shell has to exit
	// after its group gets SIGTERM; then the group gets SIGKILL.
	shellKillGrace = time.Second
	// shellPath is the PATH of a command's environment.
	shellPath = "/usr/local/bin:/usr/bin:/bin"
)

// Exec is shell.exec on the local device: its Shell (see Shell.Exec),
// with commands run for root on the host (hostShell) and for everyone else
// in a sandbox of their own (sandboxShell, see docs/sessions.md): the
// caller's home read-write and the working directory, each at its
// namespace path, over a read-only base system, as an unprivileged host
// uid, with the network the caller's process capability allows; nothing
// else of the host, the state directory or other users is there. The
// agent's Shell tool makes the same syscall as the process's owner.
//
// The command runs in cwd (default: the caller's cwd), a namespace path
// ("~", "~/src", "/workspaces/x") that must be a directory of the data
// tree the caller may search (shellDir); the process's working directory
// is its real directory under the state dir. Its environment is a fixed
// minimal one (shellEnv: PATH, HOME as the caller's real home directory,
// USER, GSV_UID, LANG, PWD): the daemon's own environment, which may hold
// secrets, is never passed on.
//
// Known limitation: the working directory is always under the state dir,
// never inside the daemon's own FUSE mount, and the shell is /bin/sh with
// a PATH of system directories only: a child blocking on a path the
// daemon itself serves would deadlock the daemon against itself.
//
// A start obeys the caller's process capability (who.Process): unless it
// is HostWide (root's default), the command runs in a sandbox, root's
// too, whose working directory must be a path the capability allows (a
// 403 otherwise, nothing started), whose home is mounted only as the
// capability allows it (read-write, read-only, or not at all: the
// sandbox's own scratch home is then there), with the network it allows
// and its max_processes; its timeout is at most the capability's
// max_timeout_ns, as it is at most maxShellTimeout.
func (d *Device) Exec(ctx context.Context, who Who, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	if a.SessionID == "" {
		var err error
		if a, err = d.capShell(who, a); err != nil {
			return nil, err
		}
	}
	return d.shell.Exec(ctx, who, a)
}

// capShell checks a start of shell.exec against who's process capability
// and returns its args with the timeout the capability allows.
func (d *Device) capShell(who Who, a *abi.ShellExecArgs) (*abi.ShellExecArgs, error) {
	pc := who.processCap()
	if who.IsRoot() && HostWide(pc, true) {
		return a, nil // on the host
	}
	cwd := a.Cwd
	if cwd == "" {
		cwd = who.Cwd
	}
	p, err := clean(who, cwd)
	if err != nil {
		return nil, abi.E(abi.Op("cwd"), err)
	}
	if capMode(pc, who, p) == "" {
		return nil, abi.E(abi.Op("cwd"), abi.Path(p), abi.Permission,
			"your process capability allows no command here: give a cwd under one of its mounts ("+capMounts(pc)+")")
	}
	if pc.MaxTimeoutNs > 0 {
		limit := time.Duration(pc.MaxTimeoutNs)
		t := defaultShellTimeout
		if a.TimeoutMs > 0 {
			t = min(time.Duration(a.TimeoutMs)*time.Millisecond, maxShellTimeout)
		}
		if t > limit {
			b := *a
			b.TimeoutMs = max(limit.Milliseconds(), 1)
			a = &b
		}
	}
	return a, nil
}

// capMounts lists pc's mounts as "prefix mode, ...", "none" if it has
// none.
func capMounts(pc abi.ProcessCap) string {
	if len(pc.Mounts) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, m := range pc.Mounts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.Prefix + " " + m.Mode)
	}
	return b.String()
}

// ShellOptions configure a Shell.
type ShellOptions struct {
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// Wait is how long a start or poll waits for its command to end
	// before it answers "running"; zero means 10 s.
	Wait time.Duration
	// Dir resolves a start's cwd (as given, "" if none) for who: the
	// working directory as the command sees it (guest: a sandbox's path)
	// and its real directory on the host. Its error is the start's
	// {ok:false, error}. Required.
	Dir func(ctx context.Context, who Who, cwd string) (guest, real string, err error)
	// Env is the whole environment of a command run for who in the real
	// directory dir; nil means DefaultShellEnv.
	Env func(who Who, dir string) []string
	// Runner is the runner of who's commands; nil means HostRunner for
	// everyone.
	Runner func(who Who) ShellRunner
}

// Shell is shell.exec's job machinery, standalone: the table of jobs
// (wait budget, background, polls, stdin, expiry, the output
// tail, timeouts) over a runner. The local device has one; a device
// daemon that exports a directory has one of its own (devices/export).
type Shell struct {
	log  *slog.Logger
	opts ShellOptions
	jobs shellJobs // the running commands
}

// NewShell returns a Shell; its janitor starts with its first command.
func NewShell(opts ShellOptions) *Shell {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	sh := &Shell{log: opts.Logger, opts: opts}
	sh.jobs.wait = opts.Wait
	return sh
}

// Close kills every running command's process group, reaps its shell,
// ends the janitor and refuses new commands from then on; it returns once
// every command is gone.
func (sh *Shell) Close() { sh.jobs.close() }

// runner is the runner of who's commands.
func (sh *Shell) runner(who Who) ShellRunner {
	if sh.opts.Runner != nil {
		return sh.opts.Runner(who)
	}
	return hostShell{log: sh.log}
}

// env is the environment of a command run for who in dir.
func (sh *Shell) env(who Who, dir string) []string {
	if sh.opts.Env != nil {
		return sh.opts.Env(who, dir)
	}
	return DefaultShellEnv(who, dir)
}

// DefaultShellEnv is the fixed minimal environment of a command run for
// who in the real directory dir: PATH (system directories), HOME (who's
// Home, dir if none), USER, LOGNAME, GSV_UID, LANG and PWD.
func DefaultShellEnv(who Who, dir string) []string {
	home := who.Home
	if home == "" {
		home = dir
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

// Exec is shell.exec on a Shell: input run with `/bin/sh -c` by the
// Shell's runner for who, in the directory its Dir resolves cwd to.
//
// Every command is a job (the seed's shell session): a start returns its
// final result if the command ends within the wait budget
// (shellWaitBudget, 10 s), else {status:"running", sessionId, output so
// far}; with background:true it returns {status:"running", sessionId,
// output:""} at once. A call with the sessionId continues it (see
// continueShell): an empty input polls, any other is written to the
// command's stdin, which is a pipe for a background command and /dev/null
// otherwise. Each result carries the output not returned before. The final
// result is returned once: the job is then gone and a call on it is a 404
// "Unknown shell session: <id>", as is a call on another user's job (root
// may call on any). A job not updated (started, called on, ended) for
// shellJobTTL (24 h) is removed, its command killed.
//
// The final result is the seed's: {status:"completed", output,
// exitCode:0, truncated?} when the shell exited 0; {status:"failed",
// output, exitCode, error, truncated?} when it exited non-zero (a shell
// killed by a signal reports 128+signal, as $? does); {status:"failed",
// output, error, truncated?} when it timed out ("Command timed out"), the
// daemon shut down, or it could not be waited for; and {ok:false, error}
// when it could not be started. A result of a poll also has the sessionId.
//
// The command runs in the directory Dir resolves cwd to, with the
// environment Env gives (DefaultShellEnv: a fixed minimal one). Its
// stdout and stderr share one pipe. One result carries at most
// maxShellOutput bytes of output, keeping the tail; a truncated output
// begins with a "[... N bytes truncated ...]" line.
//
// The command runs under the Shell's runner (hostShell: its own process
// group, which the Shell owns until the group is gone; see hostProc.run),
// and ends at the latest:
//   - at its timeout (timeoutMs, default 2m, at most 10m);
//   - when the caller of a start is gone (a client that closed its handle,
//     Ctrl-C, a 9P Tflush or a closed connection; an agent run aborted)
//     before the start returned: the call returns ctx.Err() at once while
//     the command is killed. A caller of a poll that is gone leaves the
//     command running;
//   - when its job expires, and when the Shell is closed (Close; the
//     local device's EndCommands), which returns once every command is gone;
//     commands asked for after it are refused.
//
// Known limitations:
//   - A process that leaves the group (setsid, setpgid) is no longer the
//     command's, and nothing kills it.
//   - A background command's stdin is never closed: a command that reads
//     it to its end runs until its timeout.
func (sh *Shell) Exec(ctx context.Context, who Who, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	if a.SessionID != "" {
		return sh.continueShell(ctx, who, a)
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
	cwd, dir, err := sh.opts.Dir(ctx, who, a.Cwd)
	if err != nil {
		return notStarted(err), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err // nothing started yet: the caller is gone
	}
	s, err := sh.startShell(ctx, who, cwd, dir, a.Input, timeout, a.Background)
	if err != nil {
		return notStarted(err), nil
	}
	if a.Background {
		// At once, with no output: what the command writes is the polls'.
		return &abi.ShellExecResult{Status: "running", SessionID: s.id}, nil
	}
	_, wait := sh.jobs.limits()
	budget := time.NewTimer(wait)
	defer budget.Stop()
	select {
	case <-s.h.done():
		return sh.finish(s)
	case <-ctx.Done():
		sh.log.Debug("shell.exec: caller gone, killing the command", "uid", who.Uid, "job", s.id)
		s.stop("cancelled")
		sh.jobs.drop(s)
		return nil, ctx.Err()
	case <-budget.C:
		if s.ended() {
			return sh.finish(s)
		}
		return s.running(), nil
	}
}

// notStarted is shell.exec's result for a command that did not start.
func notStarted(err error) *abi.ShellExecResult {
	return &abi.ShellExecResult{Error: err.Error()}
}

// shellDir resolves cwd (the caller's cwd if empty) and checks that it is
// a directory who may search; it returns its namespace path and its real
// path.
func (d *Device) shellDir(ctx context.Context, who Who, cwd string) (string, string, error) {
	if cwd == "" {
		cwd = who.Cwd
	}
	rel, err := resolve(who, cwd)
	if err != nil {
		return "", "", abi.E(abi.Op("cwd"), err)
	}
	fi, err := d.access(ctx, who, rel, vfs.WantExec)
	if err != nil {
		return "", "", abi.E(abi.Op("cwd"), err)
	}
	if !fi.IsDir() {
		return "", "", abi.E(abi.Op("cwd"), abi.Path("/"+rel), syscall.ENOTDIR)
	}
	return "/" + rel, d.dataPath + "/" + rel, nil
}

// shellEnv is the fixed environment of a command run for who in dir:
// DefaultShellEnv with HOME the real directory of who's home.
func (d *Device) shellEnv(who Who, dir string) []string {
	home := dir
	if rel, err := resolve(who, who.Home); err == nil {
		home = d.dataPath + "/" + rel
	}
	who.Home = home
	return DefaultShellEnv(who, dir)
}

// runner is the runner of who's commands: the host for root (unless
// root's process capability is narrower than the host's), a sandbox with
// who's grant for everyone else. Root's host commands see the data tree
// at its namespace paths (/home, /workspaces, /var/sessions in place of
// the host's) when the daemon may make mount namespaces (it runs as
// root): a path means the same in root's shell, its CodeMode blocks'
// shell() and fs.*.
func (d *Device) runner(who Who) ShellRunner {
	if who.IsRoot() && HostWide(who.processCap(), true) {
		return hostShell{log: d.log, view: d.rootView()}
	}
	return sandboxShell{d: d}
}

// rootView is how root's host commands see the namespace: the data
// tree's directories at their namespace paths (made in a root of their
// own under STATE/shellroot, an empty directory), or nil when the daemon
// cannot make mount namespaces (it does not run as root).
func (d *Device) rootView() *nsView {
	if os.Geteuid() != 0 {
		return nil
	}
	root := filepath.Join(d.stateDir, "shellroot")
	if err := os.MkdirAll(root, 0o700); err != nil {
		d.log.Debug("shell.exec: no root for root's commands", "err", err)
		return nil
	}
	v := &nsView{root: root}
	for _, top := range dataRoots {
		v.binds = append(v.binds, pathBind{real: d.dataPath + "/" + top, ns: "/" + top})
	}
	return v
}
