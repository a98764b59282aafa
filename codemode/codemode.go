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
//	worker → parent  {"ready":true}                               ready for a request
//	parent → worker  {"code":…,"argv":…,"args":…,"limits":…}     the Request, once
//	worker → parent  {"id":1,"call":"fs.read","args":{…}}        a nested call
//	parent → worker  {"id":1,"held":0,"result":{…}}                its answer, or
//	parent → worker  {"id":1,"held":0,"error":"…"}                 its error
//	worker → parent  {"wait":true}                                 it waits for an answer
//	worker → parent  {"log":"…"}                                   one console line
//	worker → parent  {"done":{"status":"completed","result":…}}  the end
//
// An answer's held is the time (ns) the call spent waiting for a human
// (Hold): the worker moves its deadline by as much.
//
// A nested call does not wait for its answer: the worker sends the calls
// a block makes before it waits (Promise.all) together in one write (or
// when it logs or ends), then a wait line,
// and the parent serves up to maxCallsInFlight of them at once, answering
// each when it ends (out of order; answers that end together leave in
// one write). A call the worker waits for alone (await in a loop) is
// served on the parent's reading goroutine, with no goroutine to wake:
// nothing else comes from the worker until it is answered. A run returns
// once every call it started has ended.
//
// A worker starts, drops its privileges and makes its engine before it
// reads a request, so a Runner keeps one started (warm) and a run does not
// wait for a process to start.
package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// CallFunc serves one nested call of a block: name is the syscall
// ("shell.exec", "fs.read", …), args its JSON arguments. Its result or its
// error is what the block's wrapper returns or throws. ctx ends when the
// run does (its wall time, an abort); a call that waits for a human marks
// the wait with Hold(ctx), so that the wait does not count against the
// run's wall time.
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

// MaxResult bounds a block's result: its return value as JSON. A block
// that returns more fails ("result too large"): the worker refuses to
// send it, and the parent refuses a result over it whatever a worker
// sends. Code that makes more output writes it to a file (fs.write) and
// returns its path.
const MaxResult = 1 << 20

// MaxCallArgs bounds the arguments (JSON) of one nested call of a block;
// a call with more throws in the block ("arguments too large") and is
// not made.
const MaxCallArgs = 4 << 20

// Bounds of the protocol. Every line a worker sends is read with a bound
// (maxLine): a line past it fails the run as soon as the bound is passed,
// so what a run holds of a worker's output is bounded before it is
// parsed, whatever the worker does.
const (
	maxErrorText  = 64 << 10                   // a failed run's error text, cut past it
	maxLine       = MaxCallArgs + 64<<10       // one line a worker sends: a call, a log line, its end
	maxAnswerLine = 64 << 20                   // one line the parent sends: the request, an answer
	maxAnswer     = maxAnswerLine - (64 << 10) // an answer's result (fs.read may return 25 MiB)
	maxLogs       = 1000                       // console lines kept
	maxLogBytes   = 1 << 20                    // their total size
	maxLogLine    = 512 << 10                  // one line, cut past it (as JSON at most 6x: under maxLine)
	killGrace     = 2 * time.Second
	stderrKeep    = 4 << 10
)

// WorkerEnv is set (to "1") in the environment of every worker. A test
// binary that is its own worker checks it in TestMain.
const WorkerEnv = "GSV_CODEMODE_WORKER"

// wire is one protocol line, either way.
type wire struct {
	ID     int64           `json:"id,omitempty"`
	Held   int64           `json:"held,omitempty"`
	Ready  bool            `json:"ready,omitempty"`
	Wait   bool            `json:"wait,omitempty"`
	Call   string          `json:"call,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *string         `json:"error,omitempty"`
	Log    *string         `json:"log,omitempty"`
	Done   *Result         `json:"done,omitempty"`
}

// failed is a failed Result with msg (cut to maxErrorText) as its error
// and logs.
func failed(msg string, logs []string) *Result {
	return &Result{Status: StatusFailed, Error: cutText(msg, maxErrorText), Logs: logs}
}

// cutText is s cut to at most max bytes at a character boundary, marked
// as cut.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "… (cut)"
	i := max - len(mark)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
}

// resultTooLarge is the error of a run whose result is n bytes of JSON.
func resultTooLarge(n int) string {
	return fmt.Sprintf("result too large: %d bytes as JSON (a block's result is at most %d bytes; write more to a file and return its path)", n, MaxResult)
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
