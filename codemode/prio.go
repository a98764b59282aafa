package codemode

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// How a worker is started so that it runs after the daemon's service of
// every user (docs/codemode.md, "How it runs"): at workerNice, from a
// thread that runs nothing else (hold, for a worker of Run; a Runner's
// launcher, in the Runner's cpu cgroup), and that lives as long as the
// worker, whose parent-death signal follows it.

// hold starts the worker, reports the start on started and waits for
// the worker's end, on an OS thread of its own (goOwnThread) for the
// worker's whole life, which ends with it: the worker's parent-death
// signal (Pdeathsig) fires when the thread that started it ends. The
// thread is made workerNice steps nicer before the fork, so that the
// worker is born at that priority; no other goroutine ever runs on it.
// The goroutine is the worker's: it ends when the worker does, which
// kill brings about.
func (p *process) hold(started chan<- error) {
	defer close(p.exited)
	if err := lowerThread(workerNice); err != nil {
		p.werr = fmt.Errorf("worker priority: %w", err)
		started <- p.werr
		return
	}
	if err := p.cmd.Start(); err != nil {
		p.werr = err
		started <- err
		return
	}
	started <- nil
	p.werr = p.cmd.Wait()
}

// workerNice is how many steps nicer than the daemon a worker runs (at
// most nice 19): its block's CPU comes after the daemon's service of
// every other caller (nice is weighted: 10 steps give about a tenth of
// the weight of the daemon's threads). It is set on the starting thread
// before the fork (nice is per thread on Linux, and a child inherits its
// thread's), so no instruction of a worker runs at the daemon's
// priority, and a worker (or its block) cannot take it back: that needs
// CAP_SYS_NICE.
const workerNice = 10

// goOwnThread runs f in a new goroutine locked to an OS thread that is
// not the process's main thread, and that ends when f returns: f may
// change the thread's priority, and what the thread started dies with it
// (Pdeathsig). The runtime does not end the main thread (it parks it for
// good), so a goroutine that finds itself on it holds it while another
// takes over, and leaves it as it found it.
func goOwnThread(f func()) {
	go func() {
		runtime.LockOSThread() // never unlocked but on the main thread
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		// Locked here, the main thread cannot run the next goroutine.
		moved := make(chan struct{})
		goOwnThread(func() {
			close(moved)
			f()
		})
		<-moved
		runtime.UnlockOSThread()
	}()
}

// lowerThread makes the calling thread by steps nicer than it is (at
// most nice 19). The caller runs on a thread of its own (goOwnThread).
func lowerThread(by int) error {
	tid := unix.Gettid()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid) // 20 - nice
	if err != nil {
		return err
	}
	return unix.Setpriority(unix.PRIO_PROCESS, tid, min(20-prio+by, 19))
}

// launcher starts a Runner's workers from one OS thread, locked for its
// whole life, made workerNice steps nicer and moved into the Runner's
// cpu cgroup as it starts: each worker is born at that priority and in
// that group (a child inherits its thread's nice and cgroup), and none
// runs an instruction at the daemon's. The thread runs nothing else, so
// no thread that serves anyone is ever changed. It is moved once: a move
// into a cgroup waits for an RCU grace period and holds up every fork of
// the host meanwhile, which a move per worker would cost each start.
//
// A worker's parent-death signal fires when the thread that started it
// ends, so the thread lives until the daemon dies, or until its Runner is
// closed and the last worker it started has been waited for: a live
// daemon never loses a worker to a thread's end, and a daemon killed
// outright takes every worker with it. Each worker is waited for by a
// thread of its own made as nice, which ends with the wait.
type launcher struct {
	reqs     chan launch
	stop     chan struct{}  // closed by close: start no more
	children sync.WaitGroup // the workers started, until waited for
}

// newLauncher starts a launcher whose thread moves itself into the cpu
// cgroup whose tasks file is tasks ("": none). It returns once the thread
// is ready, with why it is not in the cgroup if it could not move (it
// then starts workers at their nice alone).
func newLauncher(tasks string) (l *launcher, moveErr error) {
	l = &launcher{reqs: make(chan launch), stop: make(chan struct{})}
	ready := make(chan error, 1)
	goOwnThread(func() { l.run(tasks, ready) })
	return l, <-ready
}

// run is the launcher's goroutine, on a thread of its own: see launcher.
// A thread that cannot be made nicer starts nothing: each start fails.
func (l *launcher) run(tasks string, ready chan<- error) {
	prioErr := lowerThread(workerNice)
	var moveErr error
	if prioErr == nil && tasks != "" {
		moveErr = os.WriteFile(tasks, []byte(strconv.Itoa(unix.Gettid())), 0)
	}
	ready <- moveErr
	for {
		select {
		case r := <-l.reqs:
			if prioErr != nil {
				r.done <- fmt.Errorf("worker priority: %w", prioErr)
				continue
			}
			if err := r.p.cmd.Start(); err != nil {
				r.done <- err
				continue
			}
			l.children.Add(1)
			p := r.p
			// Reaping a worker costs a core for a moment (the kernel's
			// release_task walks the dead worker's /proc entries): it is
			// done on a thread of its own, made as nice as the worker,
			// never on one that serves anyone.
			goOwnThread(func() {
				defer l.children.Done()
				defer close(p.exited)
				_ = lowerThread(workerNice)
				p.werr = p.cmd.Wait()
			})
			r.done <- nil
		case <-l.stop:
			l.children.Wait()
			return
		}
	}
}

// start starts p's command from the launcher's thread and returns once
// it has started (or failed to); p.exited is closed once it has been
// waited for.
func (l *launcher) start(p *process) error {
	r := launch{p: p, done: make(chan error, 1)}
	select {
	case l.reqs <- r:
	case <-l.stop:
		return errors.New("the runner is closed")
	}
	return <-r.done
}

// launch is a worker for a launcher to start, and where it answers.
type launch struct {
	p    *process
	done chan error // the start's result
}

// close makes the launcher start nothing more; its thread ends once the
// workers it started have been waited for.
func (l *launcher) close() { close(l.stop) }
