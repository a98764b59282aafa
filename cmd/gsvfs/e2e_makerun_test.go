package main_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// makeRun is `make run` of the repository's Makefile in a directory of its
// own, whose bin/ is the binaries under test (GO=true: nothing is built;
// DEBS=: nothing is installed), mounting on mnt with the state state.
type makeRun struct {
	t          *testing.T
	dir        string
	mnt, state string
}

func newMakeRun(t *testing.T) *makeRun {
	t.Helper()
	requireFUSE(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	base := newBase(t)
	m := &makeRun{t: t, dir: filepath.Join(base, "work"), mnt: filepath.Join(base, "mnt", "gsv"), state: filepath.Join(base, "state")}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.dir, "Makefile"), mk, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binDir, filepath.Join(m.dir, "bin")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 8 && mountCount(t, m.mnt) > 0; i++ {
			syscall.Unmount(m.mnt, syscall.MNT_DETACH)
		}
	})
	return m
}

// session is a script running in a session of its own.
type session struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when it has ended
}

// start runs script (which runs make) with bash in a session of its own,
// so that a signal to its process group reaches make, gsvfs and the rest
// of the pipeline at once, as a terminal's Ctrl-C does.
func (m *makeRun) start(script string) *session {
	m.t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), "GSV_STATE="+m.state, "MAKEFLAGS=", raceEnv,
		"RUN=make --no-print-directory run GO=true DEBS= MOUNT="+m.mnt)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	s := &session{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	m.t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	})
	return s
}

// signal sends sig to the session's process group.
func (s *session) signal(sig syscall.Signal) { syscall.Kill(-s.cmd.Process.Pid, sig) }

// wait waits for the session's script to end.
func (s *session) wait(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(toolsLimit):
		t.Fatalf("still running %v after a signal:\n%s", toolsLimit, s.out.String())
	}
}

// waitMounted waits until the mount serves GSV's passwd.
func (m *makeRun) waitMounted(s *session) {
	m.t.Helper()
	deadline := time.Now().Add(toolsLimit)
	for {
		if b, err := os.ReadFile(filepath.Join(m.mnt, "etc", "passwd")); err == nil && bytes.Contains(b, []byte("root:x:0:0:")) {
			return
		}
		select {
		case <-s.done:
			m.t.Fatalf("make run ended without mounting %s:\n%s", m.mnt, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("make run did not mount %s:\n%s", m.mnt, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// daemonPid returns the pid of the gsvfs serving m.mnt.
func (m *makeRun) daemonPid() int {
	m.t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		args := strings.Split(string(b), "\x00")
		if len(args) >= 3 && filepath.Base(args[0]) == "gsvfs" && args[1] == "mount" && args[2] == m.mnt {
			return pid
		}
	}
	m.t.Fatalf("no gsvfs serving %s", m.mnt)
	return 0
}

// TestMakeRunRecovers: make run mounts again over the stale mount a daemon
// killed outright left (kill -9), as gsvfs mount does.
func TestMakeRunRecovers(t *testing.T) {
	m := newMakeRun(t)
	s := m.start(`exec $RUN`)
	m.waitMounted(s)
	syscall.Kill(m.daemonPid(), syscall.SIGKILL)
	s.wait(t)
	if _, err := os.Stat(m.mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after kill -9 the mount is not stale (stat: %v); the test shows nothing", err)
	}

	s = m.start(`exec $RUN`)
	m.waitMounted(s)
	s.signal(syscall.SIGINT)
	s.wait(t)
}

// TestMakeRunCtrlCThroughTee: Ctrl-C of `make run 2>&1 | tee log` (SIGINT to
// make, gsvfs and tee at once) unmounts: the daemon does not die writing
// its log to the pipe tee no longer reads.
func TestMakeRunCtrlCThroughTee(t *testing.T) {
	m := newMakeRun(t)
	s := m.start(`$RUN 2>&1 | tee log`)
	m.waitMounted(s)
	daemon := m.daemonPid()
	s.signal(syscall.SIGINT)
	s.wait(t)
	// The daemon may finish its shutdown after its parents are gone.
	deadline := time.Now().Add(toolsLimit)
	for syscall.Kill(daemon, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("gsvfs %d still runs %v after Ctrl-C", daemon, toolsLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := mountCount(t, m.mnt); n != 0 {
		_, err := os.Stat(m.mnt)
		t.Fatalf("after Ctrl-C, %s is still mounted %d times (stat: %v)\n%s", m.mnt, n, err, s.out.String())
	}
}
