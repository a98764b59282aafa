// Package codemode runs one JavaScript block in a worker process.
//
// A block is the body of an async function: top-level await is valid and
// its value is what it returns. It sees argv, args, console.* (captured as
// logs), shell(input, options) and fs.read/write/edit/delete/search(args);
// each wrapper is a nested call that the parent serves with a CallFunc (in
// gsvfs, a syscall made as a process). Nothing else leaves the block: no
// network, no host file system, no timers.
//
// The engine (modernc.org/quickjs, pure Go) runs in a child process, the
// worker, so that nothing a script does (a bug in the engine, an
// allocation the Go runtime cannot make, a stack overflow) can take the
// caller down: the worker is killed at the wall time or when the caller's
// context ends, and a worker that dies or writes garbage is a failed
// Result. The worker is the caller's own binary run with a hidden
// subcommand that calls WorkerMain (gsvfs codemode-worker).
//
// The parent and the worker speak JSON lines over the worker's stdin and
// stdout:
//
//	parent → worker  {"code":…,"argv":…,"args":…,"limits":…}     the Request, once
//	worker → parent  {"id":1,"call":"fs.read","args":{…}}        a nested call
//	parent → worker  {"id":1,"result":{…}} | {"id":1,"error":"…"} its answer
//	worker → parent  {"log":"…"}                                   one console line
//	worker → parent  {"done":{"status":"completed","result":…}}  the end
package codemode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// CallFunc serves one nested call of a block: name is the syscall
// ("shell.exec", "fs.read", …), args its JSON arguments. Its result or its
// error is what the block's wrapper returns or throws.
type CallFunc func(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)

// Request is one block to run.
type Request struct {
	// Code is the body of an async function.
	Code string `json:"code"`
	// Argv is the block's argv (positional arguments).
	Argv []string `json:"argv,omitempty"`
	// Args is the block's args (--arg key=value); ArgsJSON, when set, is
	// the whole args object instead (--args-json), any JSON value.
	Args     map[string]string `json:"args,omitempty"`
	ArgsJSON json.RawMessage   `json:"argsJson,omitempty"`
	// Limits bound the run; a zero field takes its default.
	Limits Limits `json:"limits"`
}

// Limits bound one run. Exceeding one fails the run with an error that
// names it ("memory limit exceeded", "time limit exceeded", "stack
// overflow").
type Limits struct {
	// MemoryBytes bounds the engine's heap (default 64 MiB).
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// Wall bounds the whole run, nested calls included (default 30 s).
	Wall time.Duration `json:"wall,omitempty"`
	// StackDepth bounds the depth of JavaScript calls (default and
	// maximum: the engine's own bound, 5000 frames). The engine counts
	// frames, not bytes, so the bound is a depth.
	StackDepth int `json:"stackDepth,omitempty"`
}

// Defaults of Limits.
const (
	DefaultMemoryBytes = 64 << 20
	DefaultWall        = 30 * time.Second
	DefaultStackDepth  = 5000
)

// withDefaults returns l with each zero (or out of range) field set to its
// default.
func (l Limits) withDefaults() Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.Wall <= 0 {
		l.Wall = DefaultWall
	}
	if l.StackDepth <= 0 || l.StackDepth > DefaultStackDepth {
		l.StackDepth = DefaultStackDepth
	}
	return l
}

// Statuses of a Result.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
)

// Result is the end of a run: completed with the block's return value
// (JSON; null for undefined), or failed with an error. Logs are the
// console lines the block wrote, in order, in both cases.
type Result struct {
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Logs   []string        `json:"logs,omitempty"`
}

// Bounds of what a worker may send.
const (
	maxLine     = 64 << 20 // one protocol line
	maxLogs     = 1000     // console lines kept
	maxLogBytes = 1 << 20  // their total size
	killGrace   = 2 * time.Second
	stderrKeep  = 4 << 10
)

// WorkerEnv is set (to "1") in the environment of every worker. A test
// binary that is its own worker checks it in TestMain.
const WorkerEnv = "GSV_CODEMODE_WORKER"

// wire is one protocol line, either way.
type wire struct {
	ID     int64           `json:"id,omitempty"`
	Call   string          `json:"call,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *string         `json:"error,omitempty"`
	Log    *string         `json:"log,omitempty"`
	Done   *Result         `json:"done,omitempty"`
}

// failed is a failed Result with msg as its error and logs.
func failed(msg string, logs []string) *Result {
	return &Result{Status: StatusFailed, Error: msg, Logs: logs}
}

// Run runs req in a worker started as worker (its argv, such as
// {os.Executable(), "codemode-worker"}) and serves the worker's nested
// calls with call, one at a time, each under a context that ends with the
// run. It returns the worker's Result. The run fails, and Run kills the
// worker, when the wall time passes ("time limit exceeded"), when ctx ends
// ("aborted"), when the worker dies or breaks the protocol. Run returns an
// error only when the worker cannot be started.
func Run(ctx context.Context, worker []string, req Request, call CallFunc) (*Result, error) {
	if len(worker) == 0 {
		return nil, errors.New("codemode: no worker command")
	}
	req.Limits = req.Limits.withDefaults()
	line, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("codemode: request: %w", err)
	}
	cmd := exec.Command(worker[0], worker[1:]...)
	cmd.Env = []string{WorkerEnv + "=1"}
	cmd.Dir = "/"
	cmd.WaitDelay = time.Second
	stderr := &tail{max: stderrKeep}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("codemode: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("codemode: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("codemode: start worker: %w", err)
	}
	waited := make(chan error, 1)
	var once sync.Once
	var waitErr error
	wait := func() error {
		once.Do(func() { waitErr = cmd.Wait(); waited <- waitErr })
		return waitErr
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = wait()
	}()

	runCtx, cancel := context.WithTimeout(ctx, req.Limits.Wall)
	defer cancel()
	killAt := time.NewTimer(req.Limits.Wall + killGrace)
	defer killAt.Stop()

	stop := make(chan struct{})
	defer close(stop)
	msgs := make(chan wire)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), maxLine)
		for sc.Scan() {
			var m wire
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				readErr <- fmt.Errorf("worker wrote a line that is not the protocol: %.80q", sc.Bytes())
				return
			}
			select {
			case msgs <- m:
			case <-stop:
				return
			}
		}
		if err := sc.Err(); err != nil {
			readErr <- fmt.Errorf("worker output: %w", err)
			return
		}
		readErr <- io.EOF
	}()

	// A worker that ended before it read the request fails this write;
	// what it wrote and its exit, read below, tell why.
	stdin.Write(append(line, '\n'))

	var logs []string
	logBytes := 0
	answers := make(chan wire, 1)
	busy := false
	for {
		select {
		case m := <-msgs:
			switch {
			case m.Done != nil:
				res := m.Done
				if res.Status != StatusCompleted && res.Status != StatusFailed {
					return failed(fmt.Sprintf("worker ended with status %q", res.Status), logs), nil
				}
				if res.Status == StatusCompleted && len(res.Result) == 0 {
					res.Result = json.RawMessage("null")
				}
				res.Logs = logs
				return res, nil
			case m.Log != nil:
				if len(logs) < maxLogs && logBytes+len(*m.Log) <= maxLogBytes {
					logs = append(logs, *m.Log)
					logBytes += len(*m.Log)
				} else if len(logs) == maxLogs || logBytes+len(*m.Log) > maxLogBytes {
					if n := len(logs); n == 0 || logs[n-1] != "… (logs truncated)" {
						logs = append(logs, "… (logs truncated)")
					}
				}
			case m.Call != "":
				if busy {
					return failed("worker made a nested call before the last one was answered", logs), nil
				}
				busy = true
				go func(m wire) {
					a := wire{ID: m.ID}
					args := m.Args
					if len(args) == 0 {
						args = json.RawMessage("{}")
					}
					r, err := call(runCtx, m.Call, args)
					if err != nil {
						s := err.Error()
						a.Error = &s
					} else {
						if len(r) == 0 {
							r = json.RawMessage("null")
						}
						a.Result = r
					}
					answers <- a
				}(m)
			default:
				return failed(fmt.Sprintf("worker wrote an unknown message: %.80s", mustJSON(m)), logs), nil
			}
		case a := <-answers:
			busy = false
			b, err := json.Marshal(a)
			if err != nil {
				s := "answer is not JSON: " + err.Error()
				b, _ = json.Marshal(wire{ID: a.ID, Error: &s})
			}
			if _, err := stdin.Write(append(b, '\n')); err != nil {
				// The worker is gone; its exit is read next.
				continue
			}
		case err := <-readErr:
			if err == io.EOF {
				werr := wait()
				return failed(fmt.Sprintf("worker died before it finished: %v%s", exitText(werr), stderr.text()), logs), nil
			}
			if ctx.Err() != nil {
				return failed("aborted: "+ctx.Err().Error(), logs), nil
			}
			return failed(err.Error(), logs), nil
		case <-ctx.Done():
			return failed("aborted: "+ctx.Err().Error(), logs), nil
		case <-killAt.C:
			return failed(fmt.Sprintf("time limit exceeded (%v): worker killed", req.Limits.Wall), logs), nil
		}
	}
}

// exitText says how a worker ended.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// text is the kept stderr as ": <first lines>", or "".
func (t *tail) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(bytes.ToValidUTF8(t.buf, []byte("?"))))
	if s == "" {
		return ""
	}
	lines := strings.SplitN(s, "\n", 6)
	if len(lines) > 5 {
		lines = lines[:5]
	}
	return ": " + strings.Join(lines, "; ")
}
