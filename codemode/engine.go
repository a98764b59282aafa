package codemode

import (
	"errors"
	"fmt"
	"strings"
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
	deadline time.Time
	limits   Limits
}

// errTimeLimit is the run passing its wall time inside the engine.
var errTimeLimit = errors.New("time limit exceeded")

// newEngine returns an engine with limits set and no way out: no module
// loader (import fails), no std or os helpers, no timers.
func newEngine(l Limits, start time.Time) (*engine, error) {
	vm, err := quickjs.NewVM()
	if err != nil {
		return nil, err
	}
	vm.SetMemoryLimit(uintptr(l.MemoryBytes))
	vm.SetMaxStackSize(uintptr(l.StackDepth))
	vm.SetCanBlock(false)
	vm.SetModuleLoader(func(*quickjs.VM, string) (string, error) {
		return "", errors.New("modules are not available in CodeMode")
	}, nil)
	return &engine{vm: vm, deadline: start.Add(l.Wall), limits: l}, nil
}

// register makes f (a Go function over strings) the global name.
func (e *engine) register(name string, f any) error {
	return e.vm.RegisterFunc(name, f, false)
}

// arm sets the eval timeout to what is left of the wall time; it reports
// errTimeLimit when nothing is.
func (e *engine) arm() error {
	left := time.Until(e.deadline)
	if left <= 0 {
		return errTimeLimit
	}
	return e.vm.SetEvalTimeout(left)
}

// eval evaluates src as global code and drops its value.
func (e *engine) eval(src string) error {
	if err := e.arm(); err != nil {
		return err
	}
	_, err := e.vm.Eval(src, quickjs.EvalGlobal)
	return e.limitErr(err)
}

// drain runs the pending jobs (promise reactions, await continuations);
// it reports how many ran.
func (e *engine) drain() (int, error) {
	if err := e.arm(); err != nil {
		return 0, err
	}
	n, err := e.vm.ExecutePendingJobs()
	return n, e.limitErr(err)
}

// limitErr turns the engine's errors for a limit into errTimeLimit or a
// message that names the limit.
func (e *engine) limitErr(err error) error {
	if err == nil {
		return nil
	}
	return limitError(err.Error(), e.limits, !time.Now().Before(e.deadline))
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
