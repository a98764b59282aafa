package vfs

import (
	"context"
	"sync"
	"syscall"
)

// Subscription is a stream of records, each one line of output.
type Subscription interface {
	// Next blocks until the next record or until ctx ends.
	Next(ctx context.Context) ([]byte, error)
	// Poll returns the next record if one is ready.
	Poll() ([]byte, bool)
	// Close ends the subscription.
	Close()
}

// Stream is a file whose reads block until the next record arrives. Each
// handle has its own subscription, starting at the time of the open.
//
// A read waits only for a reader that reads the file as a stream (cat):
// a handle opened with O_NOFOLLOW (tree walkers: cp -r, tar, rsync,
// grep -r) or whose own size was asked (tail, which seeks to the end) never
// waits: a read returns the records pending, else 0 (end of file); and a
// read on a non-blocking descriptor (O_NONBLOCK) that would wait fails
// with ErrWouldBlock (EAGAIN). A handle's size (Sizer) is the bytes of the
// records that have reached it, read or not, so tail -f sees it grow.
type Stream struct {
	Meta
	Subscribe func(ctx context.Context, cred Cred) (Subscription, error)
}

var _ File = (*Stream)(nil)

// Open implements File.
func (s *Stream) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, s, cred, flags); err != nil {
		return nil, err
	}
	sub, err := s.Subscribe(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &streamHandle{sub: sub, turn: make(turn, 1), noWait: flags&syscall.O_NOFOLLOW != 0}, nil
}

// maxBuffered bounds the records a handle takes from its subscription
// to report its size before they are read.
const maxBuffered = 1 << 20

type streamHandle struct {
	sub  Subscription
	turn turn // serialises reads

	mu      sync.Mutex
	left    []byte // records taken from sub, not yet read
	read    int64  // bytes returned by reads
	noWait  bool   // reads never wait (see Stream)
	waiting bool   // a read is waiting in sub.Next: only it takes records
}

var _ Sizer = (*streamHandle)(nil)

// Read returns pending records, waiting for the first one unless the
// handle or ctx says not to (see Stream). Concurrent reads of one handle
// take turns; each gives up when its own ctx ends. Offsets are ignored.
func (h *streamHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.turn.take(ctx); err != nil {
		return 0, err
	}
	defer h.turn.give()
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		h.pollLocked(len(p))
		if len(h.left) > 0 {
			n := copy(p, h.left)
			h.left = h.left[n:]
			if len(h.left) == 0 {
				h.left = nil
			}
			h.read += int64(n)
			return n, nil
		}
		if h.noWait {
			return 0, nil
		}
		if Nonblocking(ctx) {
			return 0, ErrWouldBlock
		}
		h.waiting = true
		h.mu.Unlock()
		rec, err := h.sub.Next(ctx)
		h.mu.Lock()
		h.waiting = false
		if err != nil {
			return 0, err
		}
		h.left = append(h.left, rec...)
	}
}

// pollLocked takes the records ready in the subscription until left holds
// want bytes. Records are taken in order: never while a read waits in Next.
func (h *streamHandle) pollLocked(want int) {
	for !h.waiting && len(h.left) < want {
		rec, ok := h.sub.Poll()
		if !ok {
			return
		}
		h.left = append(h.left, rec...)
	}
}

// Size implements Sizer: the bytes read so far and those pending. Asked
// through this very handle (own), it makes reads never wait: the reader
// follows the file's size.
func (h *streamHandle) Size(own bool) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if own {
		h.noWait = true
	}
	h.pollLocked(maxBuffered)
	return h.read + int64(len(h.left))
}

func (h *streamHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}

func (h *streamHandle) Close(ctx context.Context) error {
	h.sub.Close()
	return nil
}
