package codemode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"modernc.org/quickjs"
)

// prelude sets the block's globals up from the host functions the worker
// registers (__gsv_*) and removes those from the global object (the
// wrappers keep them in a closure, so a block cannot fake its result or
// speak the protocol). It runs before the request is read; the one global
// it leaves, __gsv_start, deletes itself and starts the block. The block
// is compiled by the AsyncFunction constructor as global code: it sees
// the globals, not the prelude's closure, even when its text closes the
// function body early.
const prelude = `(function () {
  "use strict";
  const send = globalThis.__gsv_send, wait = globalThis.__gsv_wait, log = globalThis.__gsv_log,
        done = globalThis.__gsv_done, codeOf = globalThis.__gsv_code,
        inputOf = globalThis.__gsv_input;
  for (const k of ["__gsv_send", "__gsv_wait", "__gsv_log", "__gsv_done", "__gsv_code", "__gsv_input"]) {
    delete globalThis[k];
  }
  const errText = (e) => {
    if (e instanceof Error) return e.name + ": " + e.message;
    try { return "uncaught: " + (typeof e === "string" ? e : JSON.stringify(e)); } catch (_) { return "uncaught: " + String(e); }
  };
  // A nested call is sent at once and answered later: calls made
  // before the block awaits (Promise.all) are all in flight together.
  // waiting maps a call's id to its promise's [resolve, reject]; pump,
  // queued as a job behind the ones that made the calls, waits for at
  // least one answer and settles every answer that came.
  const waiting = new Map();
  const P = Promise, then = Promise.prototype.then, settled = Promise.resolve(), parse = JSON.parse;
  let pumpQueued = false;
  const pump = () => {
    pumpQueued = false;
    const as = parse(wait());
    for (let i = 0; i < as.length; i++) {
      const a = as[i], w = waiting.get(a.id);
      if (w === undefined) continue;
      waiting.delete(a.id);
      if (a.error !== undefined) w[1](new Error(a.error));
      else w[0](a.result === undefined ? null : a.result);
    }
    if (waiting.size > 0) queuePump();
  };
  const queuePump = () => {
    if (!pumpQueued) { pumpQueued = true; then.call(settled, pump); }
  };
  const invoke = (name, args) => {
    try {
      const s = JSON.stringify(args === undefined ? {} : args);
      if (typeof s !== "string") throw new TypeError(name + ": arguments must be JSON");
      const r = send(name, s);
      if (r.charCodeAt(0) === 123) throw new Error(parse(r).error);
      return new P((res, rej) => { waiting.set(+r, [res, rej]); queuePump(); });
    } catch (e) {
      return P.reject(e);
    }
  };
  const text = (x) => {
    if (typeof x === "string") return x;
    if (x instanceof Error) return errText(x);
    try { const s = JSON.stringify(x); return s === undefined ? String(x) : s; } catch (_) { return String(x); }
  };
  const logger = (level) => (...a) => { log(level, a.map(text).join(" ")); };
  globalThis.console = Object.freeze({
    log: logger("log"), info: logger("info"), warn: logger("warn"),
    error: logger("error"), debug: logger("debug"),
  });
  globalThis.shell = async (command, options) => {
    const o = options || {};
    const a = { input: command === undefined || command === null ? "" : String(command) };
    for (const k of ["target", "cwd", "sessionId", "timeoutMs", "background"]) {
      if (o[k] !== undefined && o[k] !== null) a[k] = o[k];
    }
    return invoke("shell.exec", a);
  };
  const fsCall = (name) => (args) => invoke(name, args === undefined ? {} : args);
  globalThis.fs = Object.freeze({
    read: fsCall("fs.read"), write: fsCall("fs.write"), edit: fsCall("fs.edit"),
    delete: fsCall("fs.delete"), search: fsCall("fs.search"),
  });
  // mcp.<server>.<tool>(args): a tool of the owner's MCP servers, its
  // result unwrapped (structured content, else text, parsed as JSON when
  // it is; a large result's blob), its error thrown.
  const mcpResult = (server, tool, r) => {
    const blocks = (r && Array.isArray(r.content)) ? r.content : [];
    const texts = blocks.filter((b) => b && b.type === "text").map((b) => b.text);
    if (r && r.isError) throw new Error("mcp." + server + "." + tool + ": " + (texts.join("\n") || "the tool failed"));
    if (r && r.blob) return r.blob;
    if (r && r.structuredContent !== undefined && r.structuredContent !== null) return r.structuredContent;
    if (blocks.length > 0 && texts.length === blocks.length) {
      const t = texts.join("\n");
      try { return JSON.parse(t); } catch (_) { return t; }
    }
    return blocks;
  };
  const named = (f) => new Proxy(Object.freeze({}), {
    get: (_, k) => (typeof k !== "string" || k === "then") ? undefined : f(k),
  });
  globalThis.mcp = named((server) => named((tool) => (args) =>
    invoke("sys.mcp.call", { serverId: server, name: tool, arguments: args === undefined ? {} : args }).then((r) => mcpResult(server, tool, r))));
  // keep holds the block's promise (and so its value) for as long as the
  // engine lives: an engine out of memory drops a reaction it cannot
  // queue without a word, and the worker then finds the memory still full
  // (engine.outOfMemory). Its property exists already: setting it
  // allocates nothing.
  const keep = { p: null };
  Object.defineProperty(globalThis, Symbol("gsv.keep"), { value: keep });
  const AsyncFunction = (async function () {}).constructor;
  const stringify = JSON.stringify, resolve = Promise.resolve.bind(Promise), reject = Promise.reject.bind(Promise);
  globalThis.__gsv_start = function () {
    delete globalThis.__gsv_start;
    const input = JSON.parse(inputOf());
    globalThis.argv = Object.freeze(input.argv || []);
    globalThis.args = input.args === undefined || input.args === null ? {} : input.args;
    // pkg.<name>: a module's exports, its source run as a CommonJS
    // module body on first use (a module that throws fails its uses);
    // a block without modules has no pkg.
    if (input.modules !== undefined) {
      const mods = {};
      for (const m of input.modules) {
        let exp, err;
        Object.defineProperty(mods, m.name, { enumerable: true, get: () => {
          if (err !== undefined) throw err;
          if (exp === undefined) {
            try {
              const module = { exports: {} };
              new Function("module", "exports", m.source)(module, module.exports);
              exp = module.exports;
            } catch (e) {
              err = new Error("pkg." + m.name + ": " + errText(e));
              throw err;
            }
          }
          return exp;
        } });
      }
      globalThis.pkg = Object.freeze(mods);
    }
    let fn;
    try {
      fn = new AsyncFunction(codeOf());
    } catch (e) {
      done(stringify({ ok: false, error: errText(e) }));
      return;
    }
    let p;
    try { p = resolve(fn()); } catch (e) { p = reject(e); }
    keep.p = p;
    p.then((v) => {
      let s;
      try {
        s = stringify({ ok: true, result: v === undefined ? null : v });
        if (s === undefined) throw new TypeError("not JSON");
      } catch (e) {
        s = stringify({ ok: false, error: "the block's return value is not JSON: " + errText(e) });
      }
      done(s);
    }, (e) => { done(stringify({ ok: false, error: errText(e) })); });
  };
})();
`

// WorkerMain is the worker: it drops its privileges, makes its engine,
// then reads a Request on stdin, runs the block, makes its nested calls
// and writes its logs and its Result on stdout (see the package
// documentation), and returns the process's exit code. A binary that runs
// blocks calls it from a hidden subcommand.
func WorkerMain() int {
	// The worker runs on the main thread, which lives as long as the
	// process: the parent-death signal armed below stays armed.
	runtime.LockOSThread()
	parent := os.Getppid()
	if err := dropPrivileges(); err != nil {
		fmt.Fprintln(os.Stderr, "codemode worker:", err)
		return 2
	}
	if err := dieWithParent(parent); err != nil {
		fmt.Fprintln(os.Stderr, "codemode worker:", err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	// Nothing else may write to the protocol's stream.
	os.Stdout = os.Stderr
	w := &worker{in: bufio.NewReaderSize(os.Stdin, 64<<10), out: out, pending: map[int64]bool{}}
	warmUp()
	e, err := newEngine()
	if err == nil {
		err = w.register(e)
	}
	if err == nil {
		// The block's globals are set up before there is a block.
		_, err = e.vm.Eval(prelude, quickjs.EvalGlobal)
	}
	if err := w.send(wire{Ready: true}); err != nil {
		fmt.Fprintln(os.Stderr, "codemode worker:", err)
		return 2
	}
	line, rerr := readLine(w.in, maxAnswerLine)
	if rerr != nil {
		fmt.Fprintln(os.Stderr, "codemode worker: no request:", rerr)
		return 2
	}
	if err := json.Unmarshal(line, &w.req); err != nil {
		fmt.Fprintln(os.Stderr, "codemode worker: bad request:", err)
		return 2
	}
	var res *Result
	if err != nil {
		res = failed("engine: "+err.Error(), nil)
	} else {
		res = w.run(e)
	}
	if err := w.send(wire{Done: res}); err != nil {
		fmt.Fprintln(os.Stderr, "codemode worker:", err)
		return 2
	}
	// The engine is not closed: the process ends, which frees it whole,
	// and a script that broke the engine cannot break its teardown.
	return 0
}

// warmUp runs a throwaway block through a throwaway engine, so that the
// run that follows finds the engine's code paged in and the goroutine's
// stack grown: a warm worker's block starts at once.
func warmUp() {
	e, err := newEngine()
	if err != nil {
		return
	}
	defer e.vm.Close()
	e.vm.RegisterFunc("f", func(s string) string { return s }, false)
	e.vm.Eval(`(async function () { const g = async (a) => JSON.parse(f(JSON.stringify(a))); let n = 0; for (let i = 0; i < 20; i++) n += (await g({i})).i; return [n, new (async function () {}).constructor("return 1")] })()`, quickjs.EvalGlobal)
	e.vm.ExecutePendingJobs()
}

// worker is the child's side of the protocol.
type worker struct {
	e      *engine
	in     *bufio.Reader
	out    *bufio.Writer
	req    Request
	input  string // the block's argv and args, as JSON
	nextID int64
	// pending are the ids of the calls sent and not answered yet.
	pending map[int64]bool
	done    string // the block's end, as the prelude encodes it
	ended   bool
	nlogs   int
	nbytes  int
	// deadline is the end of the run's wall time (Unix ns), moved by the
	// time nested calls held the clock.
	deadline atomic.Int64
}

// send writes one protocol line.
func (w *worker) send(m wire) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := w.out.Write(append(b, '\n')); err != nil {
		return err
	}
	return w.out.Flush()
}

// waitLine tells the parent that the worker waits for an answer and
// sends nothing until one comes (see wait).
var waitLine = []byte(`{"wait":true}` + "\n")

// sendCall is __gsv_send: it writes nested call name with args (JSON) to
// the parent and returns its id (decimal), or an error as {"error":…}
// when the call cannot be made. The calls a block makes until it waits
// leave together when it waits (Promise.all: one write), logs or ends.
func (w *worker) sendCall(name, args string) string {
	if len(args) > MaxCallArgs {
		return errJSON(fmt.Sprintf("%s: arguments too large: %d bytes as JSON (at most %d)", name, len(args), MaxCallArgs))
	}
	w.nextID++
	id := w.nextID
	b := make([]byte, 0, len(args)+len(name)+40)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"call":`...)
	b = strconv.AppendQuoteToASCII(b, name)
	b = append(b, `,"args":`...)
	b = append(b, args...)
	b = append(b, "}\n"...)
	if !json.Valid(b) {
		return errJSON("arguments are not JSON")
	}
	if _, err := w.out.Write(b); err != nil {
		return errJSON("the parent is gone: " + err.Error())
	}
	w.pending[id] = true
	return strconv.FormatInt(id, 10)
}

// wait is __gsv_wait: it sends the calls not sent yet, blocks the block
// until at least one pending call is answered, and returns the answers
// that came meanwhile as a JSON array of the parent's answer lines
// ({"id":…,"result":…} or {"id":…,"error":…}), which the prelude
// settles. The time the calls held the clock moves the deadline.
func (w *worker) wait() string {
	if len(w.pending) == 0 {
		return "[]"
	}
	w.e.inCall.Store(true)
	defer w.e.inCall.Store(false)
	// The calls not sent yet, then the wait: the parent may serve a call
	// it reads just before a wait on its reading goroutine, since nothing
	// else comes from the worker until that call is answered.
	_, err := w.out.Write(waitLine)
	if err == nil {
		err = w.out.Flush()
	}
	if err != nil {
		os.Exit(3) // the parent is gone: nothing is left to do
	}
	batch := []byte{'['}
	for {
		line, err := readLine(w.in, maxAnswerLine)
		if err != nil {
			os.Exit(3) // the parent is gone
		}
		id, held, ok := answerHead(line)
		if ok && w.pending[id] {
			delete(w.pending, id)
			if held > 0 {
				w.deadline.Add(held)
			}
			if len(batch) > 1 {
				batch = append(batch, ',')
			}
			batch = append(batch, bytes.TrimRight(line, "\n")...)
		}
		// More answers, already here, join this batch; the batch stops
		// at about one line's bound.
		if len(batch) > 1 && (!lineBuffered(w.in) || len(batch) > maxAnswerLine) {
			break
		}
	}
	return string(append(batch, ']'))
}

// lineBuffered reports whether r holds a whole line already.
func lineBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// answerHead reads the id and held of an answer line: the parent writes
// them first, as answerLine does ({"id":N,"held":M,…}); a line of
// another shape is decoded as JSON.
func answerHead(line []byte) (id, held int64, ok bool) {
	if rest, found := bytes.CutPrefix(line, []byte(`{"id":`)); found {
		if i := bytes.IndexByte(rest, ','); i > 0 {
			if id, err := strconv.ParseInt(string(rest[:i]), 10, 64); err == nil {
				if h, found := bytes.CutPrefix(rest[i:], []byte(`,"held":`)); found {
					if j := bytes.IndexAny(h, ",}"); j > 0 {
						if held, err := strconv.ParseInt(string(h[:j]), 10, 64); err == nil {
							return id, held, true
						}
					}
				}
			}
		}
	}
	var a struct {
		ID   int64 `json:"id"`
		Held int64 `json:"held"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return 0, 0, false
	}
	return a.ID, a.Held, true
}

func errJSON(msg string) string {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return string(b)
}

// log is __gsv_log: one console line, sent at once so that a run that is
// killed keeps the lines before.
func (w *worker) log(level, msg string) {
	if w.nlogs > maxLogs || w.nbytes > maxLogBytes {
		return
	}
	if level != "log" && level != "info" {
		msg = level + ": " + msg
	}
	if !utf8.ValidString(msg) {
		msg = string([]rune(msg))
	}
	msg = cutText(msg, maxLogLine)
	w.nlogs++
	w.nbytes += len(msg)
	_ = w.send(wire{Log: &msg})
}

// register makes the worker's host functions the engine's globals; the
// prelude takes them away from the block.
func (w *worker) register(e *engine) error {
	w.e = e
	for name, f := range map[string]any{
		"__gsv_send":  w.sendCall,
		"__gsv_wait":  w.wait,
		"__gsv_log":   w.log,
		"__gsv_done":  func(s string) { w.done, w.ended = s, true },
		"__gsv_code":  func() string { return w.req.Code },
		"__gsv_input": func() string { return w.input },
	} {
		if err := e.register(name, f); err != nil {
			return err
		}
	}
	return nil
}

// run runs the request's block on e to its end.
func (w *worker) run(e *engine) *Result {
	l := w.req.Limits.withDefaults()
	w.deadline.Store(time.Now().Add(l.Wall).UnixNano())
	e.limit(l, &w.deadline)
	stop := e.watch()
	defer stop()
	var args any = w.req.Args
	if len(w.req.ArgsJSON) > 0 {
		args = w.req.ArgsJSON
	}
	input := map[string]any{"argv": w.req.Argv, "args": args}
	if len(w.req.Modules) > 0 {
		input["modules"] = w.req.Modules
	}
	inputJSON, err := json.Marshal(input)
	if err != nil {
		return failed("arguments: "+err.Error(), nil)
	}
	w.input = string(inputJSON)
	if err := e.eval("__gsv_start()"); err != nil {
		return w.end(err, l)
	}
	for !w.ended {
		n, err := e.drain()
		if err != nil {
			return w.end(err, l)
		}
		if n == 0 && !w.ended {
			if e.outOfMemory() {
				return failed(fmt.Sprintf("memory limit exceeded (%d MiB): the engine has no memory left to settle the block's promise (a block's result is at most 1 MiB as JSON)", l.MemoryBytes>>20), nil)
			}
			return failed("the block's promise never settles (a block has no timers or events to wait for)", nil)
		}
	}
	return w.end(nil, l)
}

// end is the Result of a block that ended (err nil: w.done holds how) or
// stopped with err.
func (w *worker) end(err error, l Limits) *Result {
	if err != nil {
		if errors.Is(err, errTimeLimit) {
			return failed(fmt.Sprintf("time limit exceeded (%v)", l.Wall), nil)
		}
		return failed(err.Error(), nil)
	}
	var d struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
		Error  string          `json:"error"`
	}
	if jerr := json.Unmarshal([]byte(w.done), &d); jerr != nil {
		return failed("the block's end is not JSON: "+jerr.Error(), nil)
	}
	if !d.OK {
		if d.Error == "uncaught: null" { // quickjs throws null when it cannot make its error
			d.Error += fmt.Sprintf(" (the block threw null, or the engine ran out of memory making its error: memory limit %d MiB)", l.MemoryBytes>>20)
		}
		err := limitError(cutText(d.Error, maxErrorText), l, time.Now().UnixNano() >= w.deadline.Load())
		if errors.Is(err, errTimeLimit) {
			return failed(fmt.Sprintf("time limit exceeded (%v)", l.Wall), nil)
		}
		return failed(err.Error(), nil)
	}
	if len(d.Result) > MaxResult {
		return failed(resultTooLarge(len(d.Result)), nil)
	}
	return &Result{Status: StatusCompleted, Result: d.Result}
}

// dieWithParent arms the parent-death signal (SIGKILL) again: the change
// of credentials in dropPrivileges cleared the one the daemon set, and a
// worker must not outlive a daemon killed outright (a block in a busy loop
// would run on to its wall time). A parent gone before it was armed (the
// worker then has another parent than parent) is an error.
func dieWithParent(parent int) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if os.Getppid() != parent {
		return fmt.Errorf("the daemon that started the worker is gone")
	}
	return nil
}

// nobody is the uid and gid a worker started by root runs as.
const nobody = 65534

// dropPrivileges makes a worker started by root nobody, with no groups,
// no capabilities and no way to regain any (no_new_privs), before it
// reads a script: a script's only way out is its nested calls, made by
// the parent as the caller; a flaw in the engine gets no more. A worker
// that cannot drop them does not run.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	if err := unix.Setgroups(nil); err != nil {
		return fmt.Errorf("dropping groups: %w", err)
	}
	if err := unix.Setresgid(nobody, nobody, nobody); err != nil {
		return fmt.Errorf("dropping the gid: %w", err)
	}
	if err := unix.Setresuid(nobody, nobody, nobody); err != nil {
		return fmt.Errorf("dropping the uid: %w", err)
	}
	if os.Geteuid() == 0 || os.Getegid() == 0 {
		return fmt.Errorf("still root after dropping privileges")
	}
	return nil
}
