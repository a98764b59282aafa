package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// Cmd is one command of a box.
type Cmd struct {
	Argv []string
	Cwd  string   // a guest path
	Env  []string // the whole environment
	// Stdin is the command's stdin; nil is empty.
	Stdin io.Reader
	// Stdout and Stderr receive its output until Done.
	Stdout, Stderr io.Writer
	// MaxProcesses, if not 0 and under the runtime's MaxProcesses, is how
	// many processes it may run at once (a prlimit wrapper sets it, at the
	// cost of one more exec).
	MaxProcesses int
}

// Exit is how a command ended: its exit code (128+signal if a signal
// killed it, as a shell reports it), the signal if one did, or why it
// could not be waited for.
type Exit struct {
	Code   int
	Signal syscall.Signal
	Err    error
}

// Proc is a running command.
type Proc struct {
	cmd    *exec.Cmd
	waited <-chan error // cmd.Wait's result, from its launcher
	init   int          // the sandbox's pid 1, in the host's pid namespace
	nsID   string
	done   chan struct{}
	exit   Exit
	errMu  sync.Mutex
}

// Start starts c in a fresh sandbox of b and returns once it runs.
func (b *Box) Start(c Cmd) (*Proc, error) {
	// Close waits for a Start under way: the box's directories stay open
	// until bwrap has them.
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed {
		return nil, errors.New("the session is closed")
	}
	if len(c.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer infoR.Close()
	args := append([]string(nil), b.args...)
	args = append(args, "--chdir", c.Cwd, "--info-fd", "3", "--")
	if c.MaxProcesses > 0 && c.MaxProcesses < MaxProcesses {
		args = append(args, "/usr/bin/prlimit", "--nproc="+strconv.Itoa(c.MaxProcesses), "--")
	}
	args = append(args, c.Argv...)
	cmd := exec.Command(b.r.bwrap, args...)
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = "/"
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	cmd.Stderr = c.Stderr
	cmd.ExtraFiles = append([]*os.File{infoW}, b.fds...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if !b.r.rootless {
		groups := b.spec.HostGroups
		if groups == nil {
			groups = []uint32{} // setgroups(0): none of the daemon's
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: b.spec.HostUID, Gid: b.spec.hostGID(), Groups: groups}
	}
	// bwrap starts at the sandboxes' priority, from a thread that lives
	// as long as it (Pdeathsig): see launcher.
	l, err := b.r.launch.get(b.spec.HostUID)
	var waited <-chan error
	if err == nil {
		waited, err = l.start(cmd)
	}
	infoW.Close()
	if err != nil {
		return nil, fmt.Errorf("starting bwrap: %w", err)
	}
	p := &Proc{cmd: cmd, waited: waited, done: make(chan struct{})}
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&info); err == nil && info.ChildPid > 0 {
		p.init = info.ChildPid
		p.nsID, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.init))
	}
	go p.wait()
	return p, nil
}

// wait waits for bwrap and records how the command ended.
func (p *Proc) wait() {
	defer close(p.done)
	err := <-p.waited
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			p.exit.Signal = ws.Signal()
			p.exit.Code = 128 + int(ws.Signal())
		default:
			p.exit.Code = ws.ExitStatus()
			if p.exit.Code > 128 && p.exit.Code < 128+65 {
				p.exit.Signal = syscall.Signal(p.exit.Code - 128)
			}
		}
	default:
		p.exit.Err = err
		p.exit.Code = -1
	}
}

// Done is closed once the command and every process of its sandbox are
// gone and its output is written.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exit is how the command ended; valid once Done is closed.
func (p *Proc) Exit() Exit { return p.exit }

// Started says whether the sandbox came up (its pid 1 ran).
func (p *Proc) Started() bool { return p.init > 0 }

// Signal sends sig to every process of the command's sandbox.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.init <= 0 {
		p.cmd.Process.Signal(sig)
		return
	}
	if sig == syscall.SIGKILL {
		p.Kill()
		return
	}
	for _, pid := range p.members() {
		syscall.Kill(pid, sig)
	}
}

// Kill ends the sandbox at once: its pid 1 gets SIGKILL, which the kernel
// turns into SIGKILL for every process of its pid namespace.
func (p *Proc) Kill() {
	if p.init > 0 {
		if id, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.init)); id == p.nsID {
			syscall.Kill(p.init, syscall.SIGKILL)
		}
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
}

// members lists the host pids of the processes in the sandbox's pid
// namespace, its pid 1 last.
func (p *Proc) members() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == p.init {
			continue
		}
		if id, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && id == p.nsID {
			pids = append(pids, pid)
		}
	}
	return append(pids, p.init)
}
