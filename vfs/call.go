package vfs

import (
	"bytes"
	"context"
	"sync"
)

// Call is a request/response file: each request written to a handle is
// answered by one response frame that the same handle then reads. A
// request is one line (framed as for Ctl: it ends only at its newline, or
// at close; over MaxLine it is refused with EINVAL). Offsets are ignored.
//
// A write queues its requests and returns at once; each handle answers its
// requests in order, one at a time, off the write (so no caller's slow
// request holds up a write of the same file by another). A read returns at
// most one response frame: the rest of the frame being read, else the next
// answer, waiting for it while a request is unanswered (until ctx ends;
// ErrWouldBlock at once if ctx is Nonblocking); with nothing unanswered
// and nothing unread it returns 0 (end of file). So `read` in a shell loop
// gets exactly one answer per request, and `cat` gets the answers to the
// requests written before it, then EOF.
//
// Requests run with a context that ends when the handle is closed (the
// client is gone): a request whose answer nobody can read any more is
// cancelled. Interrupting a read ends the wait, never the request.
type Call struct {
	Meta
	// Do answers one request. Failures belong in the response.
	Do func(ctx context.Context, cred Cred, req []byte) []byte
}

var _ File = (*Call)(nil)

// Open implements File.
func (c *Call) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := c.Access(ctx, cred, WantOf(flags)); err != nil {
		return nil, err
	}
	h := &callHandle{call: c, cred: cred, turn: make(turn, 1), ready: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

type callHandle struct {
	call   *Call
	cred   Cred
	ctx    context.Context // the requests' context: ends when the handle is closed
	cancel context.CancelFunc
	turn   turn // serialises reads
	worker sync.WaitGroup

	mu      sync.Mutex
	lines   lines
	queue   [][]byte      // requests not yet started
	working bool          // the worker goroutine is running
	unanswd int           // requests written and not yet answered
	answers [][]byte      // responses not yet read in full, in order
	pos     int           // read cursor into answers[0]
	ready   chan struct{} // closed (and replaced) when an answer arrives
	closed  bool
}

var (
	_ Flusher   = (*callHandle)(nil)
	_ Truncater = (*callHandle)(nil)
)

// Read returns at most one response frame (see Call).
func (h *callHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.turn.take(ctx); err != nil {
		return 0, err
	}
	defer h.turn.give()
	for {
		h.mu.Lock()
		if len(h.answers) > 0 {
			a := h.answers[0]
			n := copy(p, a[h.pos:])
			h.pos += n
			if h.pos == len(a) {
				h.answers[0] = nil
				h.answers, h.pos = h.answers[1:], 0
			}
			h.mu.Unlock()
			return n, nil
		}
		if h.unanswd == 0 {
			h.mu.Unlock()
			return 0, nil
		}
		ready := h.ready
		h.mu.Unlock()
		if Nonblocking(ctx) {
			return 0, ErrWouldBlock
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Write queues the requests p completes and returns. A handle holding
// MaxCallBacklog requests unanswered or unread refuses the write whole
// (ErrCallBacklog): a client that never reads cannot grow the daemon.
func (h *callHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unanswd+len(h.answers) >= MaxCallBacklog {
		return 0, ErrCallBacklog
	}
	ps, bad := h.lines.add(p)
	for _, pc := range ps {
		if !pc.refused {
			h.queueLocked(pc.line)
		}
	}
	if bad {
		return 0, ErrLineTooLong
	}
	return len(p), nil
}

// queueLocked queues a request and starts the handle's worker if it is not
// running. Blank lines are no requests.
func (h *callHandle) queueLocked(req []byte) {
	if len(bytes.TrimSpace(req)) == 0 || h.closed {
		return
	}
	h.queue = append(h.queue, req)
	h.unanswd++
	if !h.working {
		h.working = true
		h.worker.Add(1)
		go h.work()
	}
}

// work answers the queued requests in order, then ends; Close waits for it.
func (h *callHandle) work() {
	defer h.worker.Done()
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.working = false
			h.mu.Unlock()
			return
		}
		req := h.queue[0]
		h.queue[0] = nil
		h.queue = h.queue[1:]
		h.mu.Unlock()
		resp := h.call.Do(h.ctx, h.cred, req)
		if len(resp) == 0 || resp[len(resp)-1] != '\n' {
			resp = append(resp, '\n')
		}
		h.mu.Lock()
		h.answers = append(h.answers, resp)
		h.unanswd--
		close(h.ready)
		h.ready = make(chan struct{})
		h.mu.Unlock()
	}
}

// Flush queues a final request written without a newline.
func (h *callHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.lines.rest(); len(l) > 0 {
		h.queueLocked(l)
	}
	return nil
}

func (h *callHandle) Truncate(ctx context.Context, size int64) error { return nil }

// Close cancels the requests still running or queued and waits for the
// worker to end.
func (h *callHandle) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.worker.Wait()
	return nil
}
