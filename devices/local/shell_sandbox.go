package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
)

// sandboxShell is the runner of shell.exec commands for every caller but
// root: each command runs in a sandbox of its own with the caller's
// grant: their home read-write at its namespace path, the working
// directory at its own (read-write only in a tree the caller owns), their
// process capability's network (full if it allows it), nothing else of
// the host. Root's commands run on the host (hostShell): root's authority
// is the host's.
type sandboxShell struct {
	d *Device
}

// sandboxProc is a command of sandboxShell.
type sandboxProc struct {
	proc  *sandbox.Proc
	box   *sandbox.Box
	stdin *os.File // the write end of its stdin pipe; nil for empty stdin

	stdinMu    sync.Mutex
	stdinClose sync.Once
	stopOnce   sync.Once
	ended      chan struct{}
	ex         shellExit
	stopped    atomic.Bool // kill was called
}

// start opens the command's box and starts /bin/sh -c in it.
func (r sandboxShell) start(ctx context.Context, c *shellCommand) (shellHandle, error) {
	d := r.d
	rt, err := d.sessions.runtime(d.Sessions)
	if err != nil {
		return nil, err
	}
	who := c.who
	pc := who.processCap()
	home := path.Join("/home", who.Username)
	// The home as the capability allows it (not at all: the sandbox's own
	// scratch home is there), and the working directory, which Exec
	// checked the capability allows, where the home's mount does not give
	// it as the capability does.
	homeMode := ""
	if _, err := resolve(who, home); err == nil {
		homeMode = capMode(pc, who, home)
	}
	var ms []abi.ProcessMount
	if homeMode != "" {
		ms = append(ms, abi.ProcessMount{HostPath: home, GuestPath: home, Mode: homeMode})
	}
	inHome := c.cwd == home || strings.HasPrefix(c.cwd, home+"/")
	if !inHome || homeMode == "" || capMode(pc, who, c.cwd) != homeMode {
		// Checked as any mount: read-only outside the caller's own tree.
		// A working directory above the home (/home) goes first, so that
		// the home is mounted on it, not hidden by it.
		cwd := abi.ProcessMount{HostPath: c.cwd, GuestPath: c.cwd, Mode: abi.MountRW}
		if strings.HasPrefix(home, strings.TrimSuffix(c.cwd, "/")+"/") {
			ms = append([]abi.ProcessMount{cwd}, ms...)
		} else {
			ms = append(ms, cwd)
		}
	}
	mounts, _, err := d.sessionMounts(ctx, who, pc, ms)
	defer func() {
		for _, m := range mounts {
			m.Dir.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	scratch, err := d.scratch(ctx, who.Uid)
	if err != nil {
		return nil, err
	}
	id := "sh_" + randomText()
	hostUID, hostGID, groups := who.hostIDs()
	box, err := rt.Open(sandbox.Spec{
		ID: id, HostUID: hostUID, HostGID: hostGID, HostGroups: groups, Uid: who.Uid, Gid: who.gid(),
		Mounts: mounts, ScratchRoot: scratch, Home: home, Network: slices.Contains(pc.Networks, abi.NetworkFull),
	})
	if err != nil {
		return nil, abi.E(abi.Path("shell"), abi.Offline, err.Error())
	}
	p := &sandboxProc{box: box, ended: make(chan struct{})}
	cmd := sandbox.Cmd{Argv: []string{"/bin/sh", "-c", c.input}, Cwd: c.cwd, Env: c.sandboxEnv(home),
		Stdout: c.out, Stderr: c.out, MaxProcesses: cmpOr(pc.MaxProcesses, maxExecProcesses)}
	var inR *os.File
	if c.stdin {
		if inR, p.stdin, err = os.Pipe(); err != nil {
			box.Close()
			return nil, abi.E(abi.Path("shell"), fmt.Sprintf("input pipe: %v", err))
		}
		cmd.Stdin = inR
	}
	p.proc, err = box.Start(cmd)
	if inR != nil {
		inR.Close()
	}
	if err != nil {
		p.closeStdin()
		box.Close()
		return nil, abi.E(abi.Path("shell"), err.Error())
	}
	go func() {
		defer close(p.ended)
		<-p.proc.Done()
		p.closeStdin()
		box.Close()
		d.staleHome(who.Username, who.IsRoot()) // it may have written in the home
		ex := p.proc.Exit()
		p.ex = shellExit{killed: p.stopped.Load(), err: ex.Err, signal: ex.Signal}
		if ex.Err == nil {
			code := ex.Code
			p.ex.code = &code
		}
	}()
	return p, nil
}

// sandboxEnv is c's environment inside a sandbox: the host shell's, with
// the guest home and working directory.
func (c *shellCommand) sandboxEnv(home string) []string {
	env := make([]string, 0, len(c.env))
	for _, kv := range c.env {
		switch {
		case strings.HasPrefix(kv, "HOME="):
			kv = "HOME=" + home
		case strings.HasPrefix(kv, "PWD="):
			kv = "PWD=" + c.cwd
		}
		env = append(env, kv)
	}
	return append(env, "TMPDIR=/tmp")
}

func (p *sandboxProc) done() <-chan struct{} { return p.ended }
func (p *sandboxProc) exit() shellExit       { return p.ex }

// kill sends every process of the sandbox SIGTERM, then SIGKILL after
// shellKillGrace.
func (p *sandboxProc) kill() {
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		p.proc.Signal(syscall.SIGTERM)
		go func() {
			select {
			case <-p.ended:
			case <-time.After(shellKillGrace):
				p.proc.Kill()
			}
		}()
	})
}

func (p *sandboxProc) writeInput(b []byte, deadline time.Time) (int, error) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return 0, errStdinClosed
	}
	if err := p.stdin.SetWriteDeadline(deadline); err != nil {
		return 0, errStdinClosed
	}
	n, err := p.stdin.Write(b)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		err = errStdinClosed
	}
	return n, err
}

func (p *sandboxProc) closeStdin() {
	p.stdinClose.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		}
	})
}
