package export

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The pipe file: process.exec.pipe on the device, its stdin and stdout
// carried over one open handle of the file (the kernel's side is
// devices.remotePipe). An open handle is one piped exec:
//
//  1. The kernel writes one request frame, process.exec.pipe with its
//     abi.ExecArgs (a session of the device, opened before with
//     process.session.open), ending in a newline.
//  2. Its next read answers one response frame: {} when the command
//     runs, or the error of its start (a 409 for a session that runs an
//     exec, a 404 for no such session).
//  3. From then on a write is bytes for the command's stdin (a write of
//     no bytes closes it: the command reads end of file), and a read
//     returns the next bytes of its stdout, waiting for them; a read
//     answers end of file (no bytes) once the command has ended and its
//     last output was read. A read waiting gives up when its request is
//     flushed.
//  4. The clunk of the handle stops the command (SIGTERM, then SIGKILL
//     after a second), even while a read waits.
//
// How the command ended is its session's last exec
// (process.session.get's last_exec), as for any exec there.

// maxPipeRequest bounds the request line of a pipe.
const maxPipeRequest = 1 << 20

// pipeFile is the tree's pipe file.
type pipeFile struct {
	allow
	e *Export
}

var _ vfs.File = (*pipeFile)(nil)

// Open implements vfs.File: a handle for one piped exec.
func (f *pipeFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	h := &pipeHandle{e: f.e, out: make(chan []byte), outDone: make(chan struct{}), stopped: make(chan struct{})}
	return h, nil
}

// pipeHandle is one open of the pipe file.
type pipeHandle struct {
	e *Export

	mu      sync.Mutex    // guards the fields below
	req     []byte        // the request line so far
	answer  []byte        // the start's response frame, until it is read
	p       abi.ExecPipe  // the command, once it started
	left    []byte        // stdout read from the pump and not yet returned
	stopped chan struct{} // closed by Close: the pump gives up
	once    sync.Once

	out     chan []byte   // the pump's chunks of stdout
	outDone chan struct{} // closed when the pump has read stdout's end
	inMu    sync.Mutex    // serialises stdin writes
}

var _ vfs.Flusher = (*pipeHandle)(nil)

// Write implements vfs.Handle: the request line, then stdin.
func (h *pipeHandle) Write(ctx context.Context, b []byte, off int64) (int, error) {
	h.mu.Lock()
	p := h.p
	if p == nil && h.answer == nil {
		defer h.mu.Unlock()
		if len(h.req)+len(b) > maxPipeRequest {
			return 0, abi.E(abi.Invalid, fmt.Sprintf("a pipe's request is one line of at most %d bytes", maxPipeRequest))
		}
		h.req = append(h.req, b...)
		i := bytes.IndexByte(h.req, '\n')
		if i < 0 {
			return len(b), nil
		}
		if i != len(h.req)-1 {
			return 0, abi.E(abi.Invalid, "a pipe's request is one line: write stdin after reading its answer")
		}
		h.answer = h.start(h.req)
		h.req = nil
		return len(b), nil
	}
	h.mu.Unlock()
	if p == nil {
		return 0, abi.E(abi.Invalid, "the pipe's command did not start: read its answer")
	}
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if len(b) == 0 {
		return 0, p.Stdin().Close()
	}
	return p.Stdin().Write(b)
}

// start starts the command a request line asks for and answers the
// response frame. h.mu is held.
func (h *pipeHandle) start(line []byte) []byte {
	req, err := abi.DecodeRequest(line)
	if err != nil {
		return abi.EncodeResponse("", abi.ProcessExecPipe.Name, nil, err)
	}
	if req.Call != abi.ProcessExecPipe.Name {
		return abi.EncodeResponse(req.ID, req.Call, nil, abi.E(abi.Op(req.Call), abi.Invalid, "the pipe file starts process.exec.pipe only"))
	}
	var a abi.ExecArgs
	if err := abi.DecodeArgs(req.Args, &a); err != nil {
		return abi.EncodeResponse(req.ID, req.Call, nil, abi.WithOp(abi.Op(req.Call), err))
	}
	s, err := h.e.sessions.get()
	if err != nil {
		return abi.EncodeResponse(req.ID, req.Call, nil, abi.WithOp(abi.Op(req.Call), err))
	}
	p, err := s.ExecPipe(context.Background(), h.e.who, &a)
	if err != nil {
		return abi.EncodeResponse(req.ID, req.Call, nil, abi.WithOp(abi.Op(req.Call), err))
	}
	h.p = p
	go h.pump(p.Stdout())
	return abi.EncodeResponse(req.ID, req.Call, struct{}{}, nil)
}

// pump reads the command's stdout for the reads of the handle, until its
// end (which the command's end brings, or the handle's Close).
func (h *pipeHandle) pump(r io.Reader) {
	defer close(h.outDone)
	for {
		buf := make([]byte, 32<<10)
		n, err := r.Read(buf)
		if n > 0 {
			select {
			case h.out <- buf[:n]:
			case <-h.stopped:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Read implements vfs.Handle: the start's answer, then stdout.
func (h *pipeHandle) Read(ctx context.Context, b []byte, off int64) (int, error) {
	h.mu.Lock()
	if len(h.answer) > 0 {
		n := copy(b, h.answer)
		h.answer = h.answer[n:] // once read (empty, not nil): stdout follows
		h.mu.Unlock()
		return n, nil
	}
	p := h.p
	if len(h.left) > 0 {
		n := copy(b, h.left)
		h.left = h.left[n:]
		h.mu.Unlock()
		return n, nil
	}
	h.mu.Unlock()
	if p == nil {
		return 0, abi.E(abi.Invalid, "write the pipe's request first")
	}
	select {
	case chunk := <-h.out:
		n := copy(b, chunk)
		if n < len(chunk) {
			h.mu.Lock()
			h.left = chunk[n:]
			h.mu.Unlock()
		}
		return n, nil
	case <-h.outDone:
		// The pump hands over each chunk before it ends: nothing is left.
		return 0, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Flush implements vfs.Flusher: the clunk stops the command at once,
// before a read still waiting returns.
func (h *pipeHandle) Flush(ctx context.Context) error {
	h.stop()
	return nil
}

// stop stops the command, if it started; the pump gives up.
func (h *pipeHandle) stop() {
	h.once.Do(func() {
		h.mu.Lock()
		p := h.p
		close(h.stopped)
		h.mu.Unlock()
		if p != nil {
			p.Stop()
			p.Stdin().Close()
		}
	})
}

// Close implements vfs.Handle: the command is stopped.
func (h *pipeHandle) Close(ctx context.Context) error {
	h.stop()
	return nil
}
