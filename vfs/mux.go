package vfs

import (
	"bytes"
	"context"
	"sync"
	"syscall"
)

// MaxMuxInflight is how many requests one Mux handle holds at once,
// running or answered and not yet read: a write that could bring it past
// this is refused whole (ErrCallBacklog).
const MaxMuxInflight = 256

// Mux is a multiplexed call file: one open handle carries many requests
// at once, as one 9P connection carries many tagged messages. A request
// is one line (framed as for Call: it ends only at its newline, or at
// close; over MaxLine it is refused with EINVAL) that carries a tag of
// the writer's choosing, which Tag reads; the request's answer, one
// response frame, carries it back. Offsets are ignored.
//
// A write starts each request it completes in a goroutine of its own and
// returns at once: requests run concurrently, and a slow one holds up no
// other. A line that Tag says is a cancel cancels the requests running
// with its tag (their contexts end; each still answers, with whatever its
// cancellation makes it say); it has no answer of its own. Answers queue
// in the order they are ready. A read returns the answers queued, as
// many whole ones as fit, or the next piece of one that does not (the
// rest comes at the next reads, before any other answer); with none
// queued it waits for the next one for as long as the handle is open, so
// a reader can keep a read waiting for the answers to come (until ctx
// ends; ErrWouldBlock at once if ctx is Nonblocking; a handle opened with
// O_NOFOLLOW, a tree walker's, never waits: it reads 0, end of file).
// Closing the handle cancels every request it runs and waits for them.
type Mux struct {
	Meta
	// Tag reads a request line: the tag of the request, or, for a line
	// that cancels one (cancel true), of the request it cancels.
	Tag func(req []byte) (tag string, cancel bool)
	// Do answers one request. Failures belong in the response. ctx ends
	// when the request is cancelled or the handle closed.
	Do func(ctx context.Context, cred Cred, req []byte) []byte
}

var _ File = (*Mux)(nil)

// Open implements File.
func (m *Mux) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := m.Access(ctx, cred, WantOf(flags)); err != nil {
		return nil, err
	}
	h := &muxHandle{mux: m, cred: cred, turn: make(turn, 1), ready: make(chan struct{}),
		running: map[string][]*muxReq{}, noWait: flags&syscall.O_NOFOLLOW != 0}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

// muxReq is one request running on a muxHandle.
type muxReq struct{ cancel context.CancelFunc }

type muxHandle struct {
	mux    *Mux
	cred   Cred
	ctx    context.Context // the requests' context: ends when the handle is closed
	cancel context.CancelFunc
	turn   turn // serialises reads
	noWait bool // reads never wait (O_NOFOLLOW)
	wg     sync.WaitGroup

	mu      sync.Mutex
	lines   lines
	running map[string][]*muxReq // the requests running, by tag
	held    int                  // requests running or answered and not read in full
	answers [][]byte             // answers not yet read in full, in the order they were ready
	pos     int                  // read cursor into answers[0]
	ready   chan struct{}        // closed (and replaced) when an answer arrives or the handle closes
	closed  bool
}

var (
	_ Flusher   = (*muxHandle)(nil)
	_ Truncater = (*muxHandle)(nil)
)

// Read returns queued answers, waiting for one (see Mux).
func (h *muxHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.turn.take(ctx); err != nil {
		return 0, err
	}
	defer h.turn.give()
	for {
		h.mu.Lock()
		if len(h.answers) > 0 {
			n := h.takeLocked(p)
			h.mu.Unlock()
			return n, nil
		}
		if h.closed || h.noWait {
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

// takeLocked copies the answers that fit into p: the rest of a piece
// being read, else as many whole answers as fit, else the first piece of
// the next one.
func (h *muxHandle) takeLocked(p []byte) int {
	if h.pos > 0 {
		n := copy(p, h.answers[0][h.pos:])
		if h.pos += n; h.pos == len(h.answers[0]) {
			h.popLocked()
		}
		return n
	}
	n := 0
	for len(h.answers) > 0 && len(h.answers[0]) <= len(p)-n {
		n += copy(p[n:], h.answers[0])
		h.popLocked()
	}
	if n == 0 {
		n = copy(p, h.answers[0])
		h.pos = n
	}
	return n
}

// popLocked drops the first answer, read in full.
func (h *muxHandle) popLocked() {
	h.answers[0] = nil
	h.answers, h.pos = h.answers[1:], 0
	h.held--
}

// Write starts the requests p completes and returns (see Mux). A write
// that could bring the handle past MaxMuxInflight requests is refused
// whole (ErrCallBacklog).
func (h *muxHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held+bytes.Count(p, []byte{'\n'}) > MaxMuxInflight {
		return 0, ErrCallBacklog
	}
	ps, bad := h.lines.add(p)
	for _, pc := range ps {
		if !pc.refused {
			h.startLocked(pc.line)
		}
	}
	if bad {
		return 0, ErrLineTooLong
	}
	return len(p), nil
}

// startLocked runs a request line, or cancels the requests it names.
// Blank lines are no requests.
func (h *muxHandle) startLocked(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 || h.closed {
		return
	}
	tag, cancel := h.mux.Tag(line)
	if cancel {
		for _, r := range h.running[tag] {
			r.cancel()
		}
		return
	}
	ctx, stop := context.WithCancel(h.ctx)
	r := &muxReq{cancel: stop}
	h.running[tag] = append(h.running[tag], r)
	h.held++
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		resp := h.mux.Do(ctx, h.cred, line)
		stop()
		if len(resp) == 0 || resp[len(resp)-1] != '\n' {
			resp = append(resp, '\n')
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		rs := h.running[tag]
		for i, x := range rs {
			if x == r {
				rs = append(rs[:i], rs[i+1:]...)
				break
			}
		}
		if len(rs) == 0 {
			delete(h.running, tag)
		} else {
			h.running[tag] = rs
		}
		if h.closed {
			h.held--
			return
		}
		h.answers = append(h.answers, resp)
		h.wakeLocked()
	}()
}

// wakeLocked wakes the reads waiting for an answer.
func (h *muxHandle) wakeLocked() {
	close(h.ready)
	h.ready = make(chan struct{})
}

// Flush starts a final request written without a newline.
func (h *muxHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.lines.rest(); len(l) > 0 {
		h.startLocked(l)
	}
	return nil
}

func (h *muxHandle) Truncate(ctx context.Context, size int64) error { return nil }

// Close cancels the requests still running, waits for them, and ends
// the reads waiting (end of file).
func (h *muxHandle) Close(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		h.answers, h.pos = nil, 0
		h.wakeLocked()
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	return nil
}
