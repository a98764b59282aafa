package codemode

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/quickjs"
)

// engine is the one place that touches quickjs. It holds no quickjs.Value:
// scripts are evaluated with Eval, which converts the value to Go and
// frees it, and the Go functions a script calls take and return strings
// only, which quickjs converts and frees itself. So no value's lifetime is
// ours to get wrong, and a double free cannot come from this package.
type engine struct {
	vm       *quickjs.VM
	deadline *atomic.Int64 // Unix ns; moved while the block runs
	limits   Limits
	// inCall is set while the block waits for a nested call's answer,
	// which may move the deadline: the engine is not interrupted then.
	inCall atomic.Bool
}

// errTimeLimit is the run passing its wall time inside the engine.
var errTimeLimit = errors.New("time limit exceeded")

// newEngine returns an engine with no way out: no module loader (import
// fails), no std or os helpers, no timers. Its limits are set by limit.
func newEngine() (*engine, error) {
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, err
	}
	vm.SetCanBlock(false)
	vm.SetModuleLoader(func(*quickjs.VM, string) (string, error) {
		return "", errors.New("modules are not available in CodeMode")
	}, nil)
	return &engine{vm: vm}, nil
}

// limit sets the engine's memory and call depth bounds to l's, and its
// wall time to end at *deadline (read at every check: the worker moves
// it when a nested call held the clock).
func (e *engine) limit(l Limits, deadline *atomic.Int64) {
	e.limits, e.deadline = l, deadline
	e.vm.SetMemoryLimit(uintptr(l.MemoryBytes))
	e.vm.SetMaxStackSize(uintptr(l.StackDepth))
}

// register makes f (a Go function over strings) the global name.
func (e *engine) register(name string, f any) error {
	return e.vm.RegisterFunc(name, f, false)
}

// late says whether the wall time has passed.
func (e *engine) late() bool { return time.Now().UnixNano() >= e.deadline.Load() }

// watch interrupts the engine once the wall time has passed, and again
// every few milliseconds until stop is called: an interrupt requested
// between two calls into the engine is cleared by the next, which the
// next request then stops. The deadline is read anew each time.
func (e *engine) watch() (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			wait := time.Duration(e.deadline.Load() - time.Now().UnixNano())
			if wait <= 0 {
				if !e.inCall.Load() {
					e.vm.Interrupt()
				}
				wait = 5 * time.Millisecond
			}
			t := time.NewTimer(wait)
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-ended }
}

// eval evaluates src as global code and drops its value.
func (e *engine) eval(src string) error {
	if e.late() {
		return errTimeLimit
	}
	_, err := e.vm.Eval(src, quickjs.EvalGlobal)
	return e.limitErr(err)
}

// drain runs the pending jobs (promise reactions, await continuations);
// it reports how many ran.
func (e *engine) drain() (int, error) {
	if e.late() {
		return 0, errTimeLimit
	}
	n, err := e.vm.ExecutePendingJobs()
	return n, e.limitErr(err)
}

// outOfMemory says whether the engine is at its memory limit: a small
// allocation fails. The engine drops a promise reaction it has no memory
// to queue (quickjs ignores JS_EnqueueJob's failure), so a block whose
// value filled the memory never settles; this tells that from a block
// that waits for nothing.
func (e *engine) outOfMemory() bool {
	_, err := e.vm.Eval("[0, 1, 2, 3, 4, 5, 6, 7].length", quickjs.EvalGlobal)
	if err == nil {
		return false
	}
	// An engine that cannot even make the InternalError throws null.
	msg := err.Error()
	return strings.Contains(msg, "out of memory") || msg == "null"
}

// limitErr turns the engine's errors for a limit into errTimeLimit or a
// message that names the limit.
func (e *engine) limitErr(err error) error {
	if err == nil {
		return nil
	}
	return limitError(err.Error(), e.limits, e.late())
}

// limitError is the error for an engine message msg: the limit it names,
// or msg itself.
func limitError(msg string, l Limits, late bool) error {
	switch {
	case strings.Contains(msg, "interrupted") && late:
		return errTimeLimit
	case strings.Contains(msg, "out of memory"):
		return fmt.Errorf("memory limit exceeded (%d MiB): %s", l.MemoryBytes>>20, msg)
	case strings.Contains(msg, "stack overflow"):
		return fmt.Errorf("stack overflow (call depth limit %d): %s", l.StackDepth, msg)
	}
	return errors.New(msg)
}
