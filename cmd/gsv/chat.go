package main

// gsv chat, and the event following that gsv send --wait shares with it:
// open /proc/<pid>/events over 9P before sending, then print the run's
// stream deltas until its proc.run.finished. A run parked at a checkpoint
// is shown; gsv chat takes its answer as a line (/continue, /refocus
// TEXT, /abort), gsv send --wait names the commands that answer it.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// event is one frame of a process's event stream: the signal's name and
// its payload, which payload decodes as the signal's abi type.
type event struct {
	Signal  string          `json:"signal"`
	Payload json.RawMessage `json:"payload"`
	err     error           // the stream failed; the channel closes after this
}

// payload decodes ev's payload as sig's; false if it is not one.
func payload[P any](ev event, sig abi.Signal[P]) (P, bool) {
	var p P
	return p, ev.Signal == sig.Name && json.Unmarshal(ev.Payload, &p) == nil
}

// events is an open /proc/<pid>/events.
type events struct {
	fid *client.Fid
	ch  chan event
}

// openEvents opens pid's event stream; its cursor starts now. A goroutine
// reads it into ch until the stream fails.
func openEvents(pid string) (*events, error) {
	fsys, err := mount()
	if err != nil {
		return nil, err
	}
	// The connection lives on while the events fid is open.
	defer fsys.Close()
	fid, err := fsys.Open("/proc/"+pid+"/events", plan9.OREAD)
	if err != nil {
		return nil, fmt.Errorf("open /proc/%s/events: %w", pid, err)
	}
	e := &events{fid: fid, ch: make(chan event, 64)}
	go func() {
		defer close(e.ch)
		br := bufio.NewReaderSize(fid, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 && err == nil {
				var ev event
				if jerr := json.Unmarshal(line, &ev); jerr == nil {
					e.ch <- ev
				}
			}
			if err != nil {
				e.ch <- event{err: fmt.Errorf("/proc/%s/events: %w", pid, err)}
				return
			}
		}
	}()
	return e, nil
}

// close ends the stream. A read blocked in the daemon ends with the
// connection, at the latest when gsv exits, so close does not wait.
func (e *events) close() {
	go e.fid.Close()
}

// line is one line of stdin, or its end (ok false) or failure.
type line struct {
	text string
	err  error
}

// readLines reads r line by line into a channel, closed at EOF.
func readLines(r io.Reader) <-chan line {
	ch := make(chan line)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			ch <- line{text: sc.Text()}
		}
		if err := sc.Err(); err != nil {
			ch <- line{err: err}
		}
	}()
	return ch
}

// runWatch follows one run of a process through its events.
type runWatch struct {
	c      *cli
	evs    *events
	pid    string
	runID  string
	errOut io.Writer
	// note is where tool activity goes (default: errOut).
	note io.Writer
	// lines and sigs, when set, make the watch interactive: a HIL request
	// is asked on stdin, and SIGINT aborts the run.
	lines <-chan line
	sigs  <-chan os.Signal

	midLine  bool // the last text printed did not end a line
	streamed bool // deltas were printed since the last proc.run.output

	// parked is the checkpoint a run of the process is parked at, shown
	// and not decided yet; refocusing says a bare r asked for the
	// refocus text, the next line.
	parked     *parkedAt
	refocusing bool
}

// parkedAt names a run's checkpoint.
type parkedAt struct {
	runID string
	seq   int64
}

// finish is how following a run ended.
type finish struct {
	status, errText string
	hil             *abi.HilRequest // waiting on this request (non-interactive, or stdin ended)
	eof             bool            // stdin ended while asking
	interrupted     bool            // SIGINT aborted the run
	exit            bool            // a second SIGINT: leave
}

func (f finish) err() error {
	switch f.status {
	case "error":
		if f.errText == "" {
			return errors.New("run failed")
		}
		return errors.New("run failed: " + f.errText)
	case "aborted":
		return errors.New("run aborted")
	}
	return nil
}

func (w *runWatch) print(s string) {
	if s == "" {
		return
	}
	fmt.Fprint(w.c.out, s)
	w.midLine = !strings.HasSuffix(s, "\n")
}

func (w *runWatch) endLine() {
	if w.midLine {
		fmt.Fprintln(w.c.out)
		w.midLine = false
	}
}

func (w *runWatch) noteOut() io.Writer {
	if w.note != nil {
		return w.note
	}
	return w.errOut
}

// follow prints the run's text as it streams, and its tool calls in brief,
// until the run finishes, waits on a human it cannot ask, or is aborted.
func (w *runWatch) follow() (finish, error) {
	for {
		// Lines are read here only to answer a parked checkpoint.
		var answers <-chan line
		if w.parked != nil && w.lines != nil {
			answers = w.lines
		}
		select {
		case l, ok := <-answers:
			if f, done := w.answer(l, ok); done {
				return f, nil
			}
		case ev, ok := <-w.evs.ch:
			if !ok {
				return finish{}, errors.New("event stream closed")
			}
			if ev.err != nil {
				return finish{}, ev.err
			}
			if f, done := w.event(ev); done {
				return f, nil
			}
		case <-w.sigs:
			return w.interrupt(), nil
		}
	}
}

// event shows one event of the stream; done says that following ends,
// with f: the run finished, or waits on a human it cannot ask. An event
// whose payload is not its signal's is skipped.
func (w *runWatch) event(ev event) (f finish, done bool) {
	switch ev.Signal {
	case abi.SigEventsLost.Name: // the kernel's: its reader fell behind
		var p abi.EventsLost
		if json.Unmarshal(ev.Payload, &p) == nil {
			w.endLine()
			fmt.Fprintf(w.errOut, "gsv: %d events lost\n", p.Dropped)
		}
	case abi.SigProcRunStream.Name:
		if p, ok := payload(ev, abi.SigProcRunStream); ok && p.RunID == w.runID {
			w.print(p.Text)
			w.streamed = true
		}
	case abi.SigProcRunOutput.Name:
		if p, ok := payload(ev, abi.SigProcRunOutput); ok && p.RunID == w.runID {
			if !w.streamed {
				w.print(p.Text)
			}
			w.streamed = false
			w.endLine()
		}
	case abi.SigProcRunToolStarted.Name:
		if p, ok := payload(ev, abi.SigProcRunToolStarted); ok && p.RunID == w.runID {
			w.endLine()
			fmt.Fprintf(w.noteOut(), "  -> %s (%s)\n", p.ToolName, p.Syscall)
		}
	case abi.SigProcRunToolFinished.Name:
		if p, ok := payload(ev, abi.SigProcRunToolFinished); ok && p.RunID == w.runID {
			w.endLine()
			res := "done"
			if p.IsError {
				res = "failed"
			}
			fmt.Fprintf(w.noteOut(), "  <- %s %s\n", p.ToolName, res)
		}
	case abi.SigProcRunHilRequested.Name:
		p, ok := payload(ev, abi.SigProcRunHilRequested)
		if !ok || p.Request == nil || p.Request.RunID != w.runID {
			return finish{}, false
		}
		w.endLine()
		if w.lines == nil {
			return finish{hil: p.Request}, true
		}
		return w.ask(p.Request)
	case abi.SigProcRunCheckpoint.Name:
		if p, ok := payload(ev, abi.SigProcRunCheckpoint); ok {
			w.endLine()
			w.showParked(&parkedAt{p.RunID, p.Seq}, checkpointHead(p.Seq, p.Reason, &p.Snapshot, p.SoftContinueAt, time.Now()))
		}
	case abi.SigProcRunDirective.Name:
		if p, ok := payload(ev, abi.SigProcRunDirective); ok && w.isParked(p.RunID, p.Seq) && p.Result == "delivered" {
			w.endLine()
			what := cell(p.Type)
			if len(p.EffectsApplied) > 0 {
				what += ", effects: " + cell(strings.Join(p.EffectsApplied, ", "))
			}
			fmt.Fprintf(w.noteOut(), "(checkpoint %d decided elsewhere: %s)\n", p.Seq, what)
			w.parked, w.refocusing = nil, false
		}
	case abi.SigProcRunResumed.Name:
		if p, ok := payload(ev, abi.SigProcRunResumed); ok && w.isParked(p.RunID, p.Seq) {
			w.endLine()
			switch p.How {
			case "soft-continue":
				fmt.Fprintf(w.noteOut(), "(checkpoint %d: no answer within the grace; the run continues)\n", p.Seq)
			default:
				fmt.Fprintf(w.noteOut(), "(checkpoint %d: the run continues)\n", p.Seq)
			}
			w.parked, w.refocusing = nil, false
		}
	case abi.SigProcRunFinished.Name:
		p, ok := payload(ev, abi.SigProcRunFinished)
		if !ok {
			return finish{}, false
		}
		if p.RunID == w.runID {
			w.endLine()
			return finish{status: p.Status, errText: p.Error}, true
		}
		if w.parked != nil && w.parked.runID == p.RunID {
			w.parked, w.refocusing = nil, false
		}
	}
	return finish{}, false
}

// isParked says whether checkpoint seq of run is the one shown parked.
func (w *runWatch) isParked(run string, seq int64) bool {
	return w.parked != nil && w.parked.runID == run && w.parked.seq == seq
}

// showParked shows a checkpoint a run of the process parked at, head
// describing it. Interactive, it asks for the answer, which follow reads
// while it goes on following the events (a supervised checkpoint may
// continue by itself meanwhile); else it names the commands that answer.
func (w *runWatch) showParked(at *parkedAt, head string) {
	w.parked, w.refocusing = at, false
	if w.lines == nil {
		fmt.Fprintf(w.errOut, "%s\n  answer: gsv continue %s --checkpoint %d [effects], or gsv abort %s --checkpoint %d\n",
			head, w.pid, at.seq, w.pid, at.seq)
		return
	}
	fmt.Fprintln(w.c.out, head)
	w.print(checkpointHint + "? ")
}

// checkParked shows the checkpoint the process's run is parked at, if
// any: a message queued behind a parked run waits for its answer.
func (w *runWatch) checkParked() {
	r, err := get[abi.RunInfo](w.c, abi.ProcRunGet.Name, &abi.PidArgs{Pid: w.pid})
	if err != nil || r.Pending == nil {
		return
	}
	p := r.Pending
	w.showParked(&parkedAt{r.RunID, p.Seq}, checkpointHead(p.Seq, p.Reason, &p.Snapshot, p.SoftContinueAt, time.Now()))
}

// answer decides the parked checkpoint with the line l (ok false: stdin
// ended): c continues, r TEXT refocuses (a bare r asks for the text), a
// aborts. done says that following should stop: stdin ended.
func (w *runWatch) answer(l line, ok bool) (finish, bool) {
	out := w.c.out
	at := w.parked
	w.midLine = false // the answer ended the prompt's line
	if !ok || l.err != nil {
		fmt.Fprintln(out)
		fmt.Fprintf(w.errOut, "gsv: no answer; checkpoint %d is still pending (gsv continue %s --checkpoint %d)\n", at.seq, w.pid, at.seq)
		return finish{eof: true}, true
	}
	if !w.c.isTTY {
		fmt.Fprintln(out, l.text) // echo the piped answer
	}
	var d abi.Directive
	if w.refocusing {
		w.refocusing = false
		hint := strings.TrimSpace(l.text)
		if hint == "" {
			w.print(checkpointHint + "? ")
			return finish{}, false
		}
		d = abi.Directive{Type: "refocus", Hint: hint}
	} else {
		a := parseCheckpointAnswer(l.text)
		switch a.kind {
		case "continue":
			d = abi.Directive{Type: "continue"}
		case "refocus":
			if a.text == "" {
				w.refocusing = true
				w.print("refocus on: ")
				return finish{}, false
			}
			d = abi.Directive{Type: "refocus", Hint: a.text}
		case "abort":
			d = abi.Directive{Type: "abort", Reason: a.text}
		default:
			fmt.Fprintf(out, "checkpoint %d is waiting for an answer\n", at.seq)
			w.print(checkpointHint + "? ")
			return finish{}, false
		}
	}
	seq := at.seq
	r, err := get[abi.DirectiveResult](w.c, abi.ProcDirective.Name, &abi.DirectiveArgs{Pid: w.pid, Checkpoint: &seq, Directive: d})
	if err != nil {
		fmt.Fprintf(w.errOut, "gsv: %v\n", err)
		w.print(checkpointHint + "? ")
		return finish{}, false
	}
	fmt.Fprintln(out, directiveLine(r))
	w.parked = nil
	return finish{}, false
}

// ask asks on stdin whether to approve h and answers it. done says that
// following should stop: stdin ended, or SIGINT aborted the run.
func (w *runWatch) ask(h *abi.HilRequest) (finish, bool) {
	out := w.c.out
	fmt.Fprintf(out, "approval needed (%s): %s (%s)\n  args: %s\n", h.RequestID, h.ToolName, h.Syscall, brief(string(h.Args), 10, 2000))
	fmt.Fprint(out, "approve? [y/N/a(lways)] ")
	var l line
	var ok bool
	select {
	case l, ok = <-w.lines:
	case <-w.sigs:
		fmt.Fprintln(out)
		return w.interrupt(), true
	}
	if !ok || l.err != nil {
		fmt.Fprintln(out)
		fmt.Fprintf(w.errOut, "gsv: no answer; request %s is still pending (gsv hil --pid %s approve|deny %s)\n", h.RequestID, w.pid, h.RequestID)
		return finish{hil: h, eof: true}, true
	}
	a := &abi.HilArgs{Pid: w.pid, RequestID: h.RequestID, Decision: "deny"}
	switch strings.ToLower(strings.TrimSpace(l.text)) {
	case "y", "yes":
		a.Decision = "approve"
	case "a", "always":
		a.Decision, a.Remember = "approve", true
	}
	if !w.c.isTTY {
		fmt.Fprintln(out, l.text) // echo the piped answer
	}
	if _, err := w.c.call(abi.ProcHil.Name, a); err != nil {
		fmt.Fprintf(w.errOut, "gsv: %v\n", err)
		return finish{}, false
	}
	if a.Decision == "approve" {
		fmt.Fprintln(out, "approved")
	} else {
		fmt.Fprintln(out, "denied")
	}
	return finish{}, false
}

// interrupt aborts the run after a SIGINT; a second SIGINT before the
// abort returns means leave.
func (w *runWatch) interrupt() finish {
	w.endLine()
	fmt.Fprintln(w.errOut, "^C: aborting the run (^C again to exit)")
	done := make(chan error, 1)
	go func() {
		_, err := w.c.call(abi.ProcAbort.Name, &abi.PidArgs{Pid: w.pid})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(w.errOut, "gsv: %v\n", err)
		}
		return finish{status: "aborted", interrupted: true}
	case <-w.sigs:
		return finish{exit: true}
	}
}

func (c *cli) chatCmd() *cobra.Command {
	var conv string
	cmd := &cobra.Command{
		Use:   "chat [PID] [--conv C]",
		Short: "Talk with a process interactively (default: your init)",
		Long: "Each line read from stdin is sent to the process (proc.send) and its answer is printed as it\n" +
			"streams from /proc/<pid>/events. When the process asks to run a tool that needs approval, the\n" +
			"request is shown and answered from stdin: y approves, a approves from now on, anything else\n" +
			"denies. When the run parks at a checkpoint (a spent budget, gsv stop, supervision) the\n" +
			"checkpoint is shown and answered with a line: /continue (or c), /refocus TEXT (or r TEXT; a\n" +
			"bare r asks for the text), /abort [REASON] (or a); a supervised checkpoint may continue by\n" +
			"itself meanwhile. Ctrl-C while waiting aborts the run; a second Ctrl-C exits. EOF ends the\n" +
			"chat.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid := ""
			if len(args) == 1 {
				pid = args[0]
			}
			pid, err := c.resolvePid(pid)
			if err != nil {
				return err
			}
			evs, err := openEvents(pid)
			if err != nil {
				return err
			}
			defer evs.close()
			in := cmd.InOrStdin()
			if f, ok := in.(*os.File); ok && isTerminal(f) {
				c.isTTY = true
			}
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, os.Interrupt)
			defer signal.Stop(sigs)
			lines := readLines(in)
			errOut := cmd.ErrOrStderr()
			if c.isTTY {
				fmt.Fprintf(errOut, "chat with %s, conversation %s; Ctrl-D ends it\n", pid, orDefault(conv))
			}
			interrupted := false
			for {
				if c.isTTY {
					fmt.Fprint(c.out, "> ")
				}
				var l line
				var ok bool
				select {
				case l, ok = <-lines:
				case <-sigs:
					if interrupted {
						fmt.Fprintln(c.out)
						return nil
					}
					interrupted = true
					fmt.Fprintln(c.out)
					fmt.Fprintln(errOut, "^C again to exit")
					continue
				}
				if !ok {
					if c.isTTY {
						fmt.Fprintln(c.out)
					}
					return nil
				}
				if l.err != nil {
					return l.err
				}
				if strings.TrimSpace(l.text) == "" {
					continue
				}
				interrupted = false
				r, err := get[abi.SendResult](c, abi.ProcSend.Name, &abi.SendArgs{Pid: pid, ConversationID: conv, Message: l.text})
				if err != nil {
					fmt.Fprintf(errOut, "gsv: %v\n", err)
					continue
				}
				if r.Queued {
					fmt.Fprintln(errOut, "(queued behind the active run)")
				}
				w := &runWatch{c: c, evs: evs, pid: pid, runID: r.RunID, errOut: errOut, note: c.out, lines: lines, sigs: sigs}
				if r.Queued {
					w.checkParked()
				}
				f, err := w.follow()
				if err != nil {
					return err
				}
				switch {
				case f.exit, f.eof:
					return nil
				case f.interrupted:
					interrupted = true
				case f.status == "error":
					fmt.Fprintf(errOut, "gsv: %v\n", f.err())
				case f.status == "aborted":
					fmt.Fprintln(errOut, "(run aborted)")
				}
			}
		},
	}
	cmd.Flags().StringVar(&conv, "conv", "", "the conversation (default: default)")
	return cmd
}
