package local

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// ExecPipe is process.exec.pipe: process.exec whose command's stdin and
// stdout stay open to the caller, for a long-lived peer that speaks over
// them (a stdio MCP server). The command runs in the session's sandbox
// as every exec does, occupies the session until it ends, and, unless a
// gives a timeout, may run until the session's exec ceiling
// (max_timeout_ns) or the session's end. Its stderr is kept as an exec's
// is, in its receipt.
func (x *Sessions) ExecPipe(ctx context.Context, who Who, a *abi.ExecArgs) (abi.ExecPipe, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, abi.E(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, abi.E(err)
	}
	_, run, err := x.startExec(ctx, who, a, &execStdio{stdin: inR, stdout: outW})
	// The command holds its own ends now (or never will).
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p := &execPipe{in: inW, out: outR, run: run}
	go p.drainAfterEnd()
	return p, nil
}

// pipeDrain is how long a piped exec's stdout may still be read after
// the command ended: its last words are in the pipe; a reader still
// blocked then (a pipe some process kept open) gets an error.
const pipeDrain = time.Second

// execPipe is a running piped exec (abi.ExecPipe).
type execPipe struct {
	in  *os.File
	out *os.File
	run *execRun

	closeOut sync.Once
}

var _ abi.ExecPipe = (*execPipe)(nil)

// drainAfterEnd ends stdout's reads pipeDrain after the command ended.
// It lives as long as the command, which its session's end ends.
func (p *execPipe) drainAfterEnd() {
	<-p.run.done
	p.out.SetReadDeadline(time.Now().Add(pipeDrain))
	p.in.Close()
}

// Stdin implements abi.ExecPipe.
func (p *execPipe) Stdin() io.WriteCloser { return p.in }

// Stdout implements abi.ExecPipe: reads of the command's stdout, ended
// (io.EOF) once the command ended and its last words were read.
func (p *execPipe) Stdout() io.ReadCloser { return pipeReader{p} }

// Done implements abi.ExecPipe.
func (p *execPipe) Done() <-chan struct{} { return p.run.done }

// Receipt implements abi.ExecPipe.
func (p *execPipe) Receipt() *abi.ExecResult {
	select {
	case <-p.run.done:
		return p.run.result
	default:
		return nil
	}
}

// Stop implements abi.ExecPipe.
func (p *execPipe) Stop() { p.run.stop(abi.ExecSignaled, syscall.SIGTERM, signalGrace) }

// pipeReader reads a piped exec's stdout: a read past the drain after
// the command's end is io.EOF.
type pipeReader struct{ p *execPipe }

func (r pipeReader) Read(b []byte) (int, error) {
	n, err := r.p.out.Read(b)
	if err != nil && n == 0 && os.IsTimeout(err) {
		return 0, io.EOF
	}
	return n, err
}

func (r pipeReader) Close() error {
	var err error
	r.p.closeOut.Do(func() { err = r.p.out.Close() })
	return err
}
