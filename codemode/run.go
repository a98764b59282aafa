package codemode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Run runs req in a worker started as worker (its argv, such as
// {os.Executable(), "codemode-worker"}) and serves the worker's nested
// calls with call, in order, each under a context that ends with the run.
// It returns the worker's Result. The run fails, and Run kills the
// worker, when the wall time passes ("time limit exceeded"), when ctx ends
// ("aborted"), when the worker dies or breaks the protocol. Run returns an
// error only when the worker cannot be started.
func Run(ctx context.Context, worker []string, req Request, call CallFunc) (*Result, error) {
	if len(worker) == 0 {
		return nil, errors.New("codemode: no worker command")
	}
	res, p, err := runFresh(ctx, worker, nil, req, call)
	if p != nil {
		p.kill()
	}
	return res, err
}

// runFresh starts a worker as argv (from l, if not nil: startWorker),
// waits until it is ready and runs req on it (see Run). The caller ends
// the worker it returns (nil when none started).
func runFresh(ctx context.Context, argv []string, l *launcher, req Request, call CallFunc) (*Result, *process, error) {
	p, err := startWorker(argv, l)
	if err != nil {
		return nil, nil, err
	}
	if err := p.awaitReady(); err != nil {
		return failed(err.Error(), nil), p, nil
	}
	res, _ := p.run(ctx, req, call)
	return res, p, nil
}

// Runner runs blocks in workers started as one argv, and keeps warmWorkers
// workers started ahead (their privileges dropped, their engines made,
// waiting for a request), so that a run does not wait for a process to
// start. Each worker runs one block: nothing of one run is left for the
// next. The worker that replaces a warm one starts when the run that took
// it ends, so that its start does not compete with the run.
//
// A Runner starts its workers from a launcher: one OS thread of its own,
// made workerNice steps nicer and moved once into the Runner's cpu cgroup
// (RunnerOptions.CPUGroup), so that every worker is born there and at
// that priority (see launcher).
type Runner struct {
	argv  []string
	log   *slog.Logger
	group string // the workers' cpu cgroup (v1) directory; "": none

	once     sync.Once      // starts fill and the launcher at the first Run
	launch   *launcher      // starts the workers, made by once
	ready    chan *process  // warm workers, handed from fill to a Run
	want     chan time.Time // one per warm worker fill is to start, not before its time
	stop     chan struct{}  // closed by Close
	wg       sync.WaitGroup
	mu       sync.Mutex
	done     bool     // Close was called
	starting *process // the worker fill waits for, killed by Close
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Log gets the Runner's warnings; nil is slog.Default().
	Log *slog.Logger
	// CPUGroup, if not "", is the directory of a cpu cgroup (v1) that
	// every worker of the Runner is born in: its launcher thread moves
	// itself into it once, before its first start. The daemon gives the
	// group a small weight (the sandboxes' group), so that all the
	// blocks that run at once, whoever runs them, weigh about one
	// background task against the daemon's service of every user. A
	// group the launcher cannot join is logged, and the workers run at
	// their nice alone.
	CPUGroup string
}

// NewRunner returns a Runner of workers started as argv, with log, in no
// cpu cgroup of its own. It starts no process until its first Run.
func NewRunner(argv []string, log *slog.Logger) *Runner {
	return NewRunnerWith(argv, RunnerOptions{Log: log})
}

// NewRunnerWith returns a Runner of workers started as argv, configured
// by o. It starts no process (and no thread) until its first Run.
func NewRunnerWith(argv []string, o RunnerOptions) *Runner {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	r := &Runner{argv: argv, log: log, group: o.CPUGroup, ready: make(chan *process, warmWorkers), want: make(chan time.Time, warmWorkers), stop: make(chan struct{})}
	for range warmWorkers {
		r.want <- time.Time{}
	}
	return r
}

// refillDelay is how long after a run's end its replacement starts: the
// start of a worker takes a core for a few milliseconds, which the
// caller of the run that ended needs for its result.
const refillDelay = 20 * time.Millisecond

// warmWorkers is how many workers a Runner keeps ready: two, so that a
// run that follows another at once still finds one.
const warmWorkers = 2

// Run is the package's Run with a warm worker when one is ready (else one
// started now). A warm worker that died while it waited (it wrote
// nothing and ran nothing) is replaced once by a fresh one.
func (r *Runner) Run(ctx context.Context, req Request, call CallFunc) (*Result, error) {
	if len(r.argv) == 0 {
		return nil, errors.New("codemode: no worker command")
	}
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return nil, errors.New("codemode: the runner is closed")
	}
	r.once.Do(func() {
		tasks := ""
		if r.group != "" {
			tasks = filepath.Join(r.group, "tasks")
		}
		var moveErr error
		r.launch, moveErr = newLauncher(tasks)
		if moveErr != nil {
			r.log.Warn("codemode: the workers run outside their cpu cgroup, at nice alone", "group", r.group, "error", moveErr)
		}
		r.wg.Add(1)
		go r.fill()
	})
	r.mu.Unlock()
	var p *process
	select {
	case p = <-r.ready:
		res, spoke := p.run(ctx, req, call)
		r.reap(p)
		// Its replacement, soon after: the caller gets its result first.
		// The send never blocks: one want per warm worker taken.
		r.want <- time.Now().Add(refillDelay)
		if spoke || ctx.Err() != nil {
			return res, nil
		}
		r.log.Warn("codemode: a warm worker died before it ran its block; starting another", "error", res.Error)
	default:
	}
	res, p, err := runFresh(ctx, r.argv, r.launch, req, call)
	if p != nil {
		r.reap(p)
	}
	return res, err
}

// reap kills p and waits for its end in a goroutine Close waits for: the
// result of a run does not wait for its worker's exit.
func (r *Runner) reap(p *process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		p.kill()
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		p.kill()
	}()
}

// fill starts a warm worker for each want until Close.
func (r *Runner) fill() {
	defer r.wg.Done()
	for {
		var at time.Time
		select {
		case at = <-r.want:
		case <-r.stop:
			return
		}
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-r.stop:
				return
			}
		}
		p, err := r.startWarm()
		if err != nil {
			r.log.Error("codemode: start a warm worker", "error", err)
			select {
			case <-time.After(time.Second):
				r.want <- time.Time{} // try again: the want is still owed
				continue
			case <-r.stop:
				return
			}
		}
		select {
		case r.ready <- p:
		case <-r.stop:
			p.kill()
			return
		}
	}
}

// startWarm starts a worker and waits until it is ready for a request.
func (r *Runner) startWarm() (*process, error) {
	p, err := startWorker(r.argv, r.launch)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		p.kill()
		return nil, errors.New("closed")
	}
	r.starting = p
	r.mu.Unlock()
	err = p.awaitReady()
	r.mu.Lock()
	r.starting = nil
	r.mu.Unlock()
	if err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// Close kills the warm workers and stops starting others; runs under way
// go on to their end. Run fails after Close.
func (r *Runner) Close() error {
	r.mu.Lock()
	if !r.done {
		r.done = true
		close(r.stop)
	}
	if r.starting != nil {
		_ = r.starting.cmd.Process.Kill()
	}
	r.mu.Unlock()
	r.wg.Wait()
	for {
		select {
		case p := <-r.ready:
			p.kill()
		default:
			// The launcher's thread ends once the workers of the runs
			// under way have ended.
			if r.launch != nil {
				r.launch.close()
			}
			return nil
		}
	}
}

// process is one started worker: its request is not written yet.
type process struct {
	cmd    *exec.Cmd
	in     *os.File      // the worker's stdin, blocking
	out    *bufio.Reader // its stdout, blocking
	outF   *os.File
	stderr *tail
	exited chan struct{} // closed once hold has waited for the worker
	werr   error         // cmd.Wait's, once exited is closed
	closed sync.Once
}

// startWorker starts a worker as argv: from launcher l, or, when l is
// nil, from an OS thread of its own made for it (hold). Its stdin and
// stdout are blocking pipes: a nested call's round trip wakes the
// reader's thread directly, not through the poller.
func startWorker(argv []string, l *launcher) (*process, error) {
	inR, inW, err := blockingPipe()
	if err != nil {
		return nil, fmt.Errorf("codemode: %w", err)
	}
	outR, outW, err := blockingPipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("codemode: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{WorkerEnv + "=1"}
	cmd.Dir = "/"
	cmd.WaitDelay = time.Second
	cmd.Stdin, cmd.Stdout = inR, outW
	// A worker dies with the daemon, even one killed outright: see hold
	// and launcher, and WorkerMain, which arms the signal again once it
	// has dropped its privileges (a change of credentials clears it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, in: inW, outF: outR, out: bufio.NewReaderSize(outR, 64<<10), stderr: &tail{max: stderrKeep}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if l != nil {
		err = l.start(p)
	} else {
		started := make(chan error, 1)
		goOwnThread(func() { p.hold(started) })
		err = <-started
	}
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("codemode: start worker: %w", err)
	}
	return p, nil
}

// blockingPipe is a close-on-exec pipe whose ends block (os.Pipe's are
// non-blocking, read through the poller).
func blockingPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}

// awaitReady reads the worker's first line, which says it is ready for
// a request (its engine made, its privileges dropped).
func (p *process) awaitReady() error {
	b, err := readLine(p.out, maxLine)
	if err != nil {
		werr := p.wait()
		return fmt.Errorf("worker died before it was ready: %v%s", exitText(werr), p.stderr.text())
	}
	var m wire
	if json.Unmarshal(b, &m) != nil {
		return fmt.Errorf("worker wrote a line that is not the protocol: %.80q", b)
	}
	if !m.Ready {
		return fmt.Errorf("worker's first line does not say it is ready: %.80q", b)
	}
	return nil
}

// kill ends the worker and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.wait()
}

// wait waits for the worker's end and closes the parent's ends.
func (p *process) wait() error {
	<-p.exited
	p.closed.Do(func() {
		p.in.Close()
		p.outF.Close()
	})
	return p.werr
}

// run runs req on p to its end (see Run); the caller kills p. spoke
// reports whether the worker wrote anything (a worker that wrote nothing
// made no call).
func (p *process) run(ctx context.Context, req Request, call CallFunc) (res *Result, spoke bool) {
	req.Limits = req.Limits.withDefaults()
	line, err := json.Marshal(req)
	if err != nil {
		return failed("codemode: request: "+err.Error(), nil), true
	}
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	clk := &clock{deadline: time.Now().Add(req.Limits.Wall), wake: make(chan struct{}, 1)}
	callCtx = context.WithValue(callCtx, clockKey{}, clk)
	finished := make(chan struct{})
	var why atomic.Pointer[string] // why the watchdog killed the worker
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.watch(ctx, clk, req.Limits.Wall, cancelCalls, finished, &why)
	}()
	defer func() {
		close(finished)
		wg.Wait()
	}()

	// A worker that ended before it read the request fails this write;
	// what it wrote and its exit, read below, tell why.
	_, _ = p.in.Write(append(line, '\n'))

	// The nested calls run concurrently, up to maxCallsInFlight at once,
	// each answered when it ends (out of order). The run returns once
	// every call it started has ended: on a completed run, the calls the
	// block did not wait for run to their end (as a block's wall time
	// allows); otherwise they are cancelled first.
	var calls sync.WaitGroup
	answers := &answerWriter{w: p.in}
	slots := make(chan struct{}, maxCallsInFlight)
	serve := func(name string, args json.RawMessage) (json.RawMessage, error) {
		r, cerr := call(callCtx, name, args)
		if cerr != nil && callCtx.Err() != nil && ctx.Err() == nil {
			// The run's wall time ended the call.
			cerr = fmt.Errorf("%s: time limit exceeded (%v)", name, req.Limits.Wall)
		}
		return r, cerr
	}
	completed := false
	defer func() {
		if !completed {
			cancelCalls()
		}
		calls.Wait()
	}()

	var logs []string
	logBytes := 0
	for {
		b, err := readLine(p.out, maxLine)
		if err != nil {
			if w := why.Load(); w != nil {
				return failed(*w, logs), true
			}
			if errors.Is(err, errLineTooLong) {
				return failed(fmt.Sprintf("the worker sent a line over %d bytes: the run is stopped (a block's result is at most %d bytes, a call's args %d)", maxLine, MaxResult, MaxCallArgs), logs), true
			}
			if err == io.EOF {
				werr := p.wait()
				if w := why.Load(); w != nil {
					return failed(*w, logs), true
				}
				return failed(fmt.Sprintf("worker died before it finished: %v%s", exitText(werr), p.stderr.text()), logs), spoke
			}
			return failed("worker output: "+err.Error(), logs), true
		}
		spoke = true
		var m wire
		if err := json.Unmarshal(b, &m); err != nil {
			return failed(fmt.Sprintf("worker wrote a line that is not the protocol: %.80q", b), logs), true
		}
		switch {
		case m.Done != nil:
			res := m.Done
			if res.Status != StatusCompleted && res.Status != StatusFailed {
				return failed(fmt.Sprintf("worker ended with status %q", res.Status), logs), true
			}
			if res.Status == StatusCompleted && len(res.Result) == 0 {
				res.Result = json.RawMessage("null")
			}
			if len(res.Result) > MaxResult {
				return failed(resultTooLarge(len(res.Result)), logs), true
			}
			res.Error = cutText(res.Error, maxErrorText)
			res.Logs = logs
			completed = true
			return res, true
		case m.Wait:
			// The worker waits for an answer (see waitNext).
		case m.Log != nil:
			logs, logBytes = addLog(logs, logBytes, *m.Log)
		case m.Call != "":
			args := m.Args
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			if len(slots) == 0 && waitNext(p.out) {
				// The only call in flight, and the worker waits for it
				// (a block awaiting each call in turn): nothing comes
				// from the worker until it is answered, so it is served
				// here, with no goroutine to wake.
				r, cerr := serve(m.Call, args)
				answers.write(answerLine(m.ID, clk.takeHeld(), r, cerr))
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-callCtx.Done():
				// The run is ending (its watchdog kills the worker): the
				// call is not made.
				answers.write(answerLine(m.ID, 0, nil, fmt.Errorf("%s: the run is ending: %v", m.Call, callCtx.Err())))
				continue
			}
			calls.Add(1)
			go func(id int64, name string) {
				defer calls.Done()
				defer func() { <-slots }()
				r, cerr := serve(name, args)
				answers.write(answerLine(id, clk.takeHeld(), r, cerr))
			}(m.ID, m.Call)
		default:
			return failed(fmt.Sprintf("worker wrote an unknown message: %.80s", mustJSON(m)), logs), true
		}
	}
}

// waitNext reports whether r's next line, already buffered and the last
// there, is the worker's wait line.
func waitNext(r *bufio.Reader) bool {
	n := r.Buffered()
	if n != len(waitLine) {
		return false
	}
	b, _ := r.Peek(n)
	return bytes.Equal(b, waitLine)
}

// answerWriter writes the answers of a run's nested calls to its worker:
// the answers that end while one is written go together in the next
// write, so that the worker wakes once for them. A write to a worker that
// is gone fails; its end is read by the run.
type answerWriter struct {
	w       io.Writer
	mu      sync.Mutex // guards buf and writing
	buf     []byte     // answers not written yet
	writing bool       // a write is under way: its writer writes buf next
}

// write writes line, or leaves it to the write under way.
func (a *answerWriter) write(line []byte) {
	a.mu.Lock()
	a.buf = append(a.buf, line...)
	if a.writing {
		a.mu.Unlock()
		return
	}
	a.writing = true
	for len(a.buf) > 0 {
		b := a.buf
		a.buf = nil
		a.mu.Unlock()
		_, _ = a.w.Write(b)
		a.mu.Lock()
	}
	a.writing = false
	a.mu.Unlock()
}

// maxCallsInFlight bounds the nested calls of one run served at once.
const maxCallsInFlight = 4

// addLog adds one console line to logs (of logBytes bytes in all) within
// the bounds, marking once where they were cut.
func addLog(logs []string, logBytes int, line string) ([]string, int) {
	if len(logs) < maxLogs && logBytes+len(line) <= maxLogBytes {
		return append(logs, line), logBytes + len(line)
	}
	if n := len(logs); n == 0 || logs[n-1] != logsCut {
		logs = append(logs, logsCut)
	}
	return logs, logBytes
}

// logsCut ends logs that were cut.
const logsCut = "… (logs truncated)"

// answerLine is the protocol line answering call id: its result r or its
// error, and the time it held the clock.
func answerLine(id int64, held time.Duration, r json.RawMessage, err error) []byte {
	b := make([]byte, 0, len(r)+48)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"held":`...)
	b = strconv.AppendInt(b, int64(held), 10)
	switch {
	case err != nil:
		msg, _ := json.Marshal(err.Error())
		b = append(append(b, `,"error":`...), msg...)
	case len(r) == 0:
		b = append(b, `,"result":null`...)
	case len(r) > maxAnswer:
		b = append(b, fmt.Sprintf(`,"error":"the call's result is %d bytes, over the %d a block takes"`, len(r), maxAnswer)...)
	case !json.Valid(r):
		b = append(b, `,"error":"the call's result is not JSON"`...)
	default:
		b = append(append(b, `,"result":`...), r...)
	}
	return append(b, "}\n"...)
}

// watch is the run's watchdog: when ctx ends it cancels the nested calls
// and kills the worker ("aborted"); at the wall time (moved by the time
// calls held the clock) it cancels the nested calls, and killGrace later
// kills the worker ("time limit exceeded … worker killed"), unless the
// run finished first. It sets why before it kills.
func (p *process) watch(ctx context.Context, clk *clock, wall time.Duration, cancelCalls func(), finished <-chan struct{}, why *atomic.Pointer[string]) {
	t := time.NewTimer(wall)
	defer t.Stop()
	kill := func(msg string) {
		why.Store(&msg)
		cancelCalls()
		_ = p.cmd.Process.Kill()
	}
	for {
		select {
		case <-finished:
			return
		case <-ctx.Done():
			kill("aborted: " + ctx.Err().Error())
			return
		case <-clk.wake:
		case <-t.C:
		}
		left, holding := clk.left()
		switch {
		case holding:
			t.Stop() // the release wakes this loop
		case left > 0:
			t.Reset(left)
		case left > -killGrace:
			cancelCalls()
			t.Reset(killGrace + left)
		default:
			kill(fmt.Sprintf("time limit exceeded (%v): worker killed", wall))
			return
		}
	}
}

// clock is a run's wall time: its deadline moves by the time nested
// calls hold it (Hold).
type clock struct {
	mu       sync.Mutex
	deadline time.Time // moved by the holds that ended
	holds    int       // holds in progress
	since    time.Time // the start of the holds in progress
	held     time.Duration
	wake     chan struct{} // told of every change
}

type clockKey struct{}

// Hold stops the wall clock of the run whose nested call has ctx until
// release is called (once; later calls do nothing): time a call spends
// waiting for a human does not count against the run's wall time. With a
// ctx of no run, Hold does nothing.
func Hold(ctx context.Context) (release func()) {
	c, _ := ctx.Value(clockKey{}).(*clock)
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	if c.holds == 0 {
		c.since = time.Now()
	}
	c.holds++
	c.mu.Unlock()
	c.tell()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.holds--
			if c.holds == 0 {
				d := time.Since(c.since)
				c.deadline = c.deadline.Add(d)
				c.held += d
			}
			c.mu.Unlock()
			c.tell()
		})
	}
}

func (c *clock) tell() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// left is the wall time left, and whether a hold is in progress.
func (c *clock) left() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Until(c.deadline), c.holds > 0
}

// takeHeld returns the time held since the last takeHeld.
func (c *clock) takeHeld() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.held
	c.held = 0
	return d
}

// errLineTooLong is a protocol line past its bound.
var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most max bytes from r: it stops reading
// (errLineTooLong) as soon as the line passes max, so that what it holds
// is bounded whatever the other side sends.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if err == nil && line == nil && len(chunk) <= max {
			return chunk, nil // the common case: no copy
		}
		if len(line)+len(chunk) > max {
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return line, nil
			}
			return nil, err
		}
		return line, nil
	}
}
