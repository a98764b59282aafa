package vfs

import (
	"context"
	"slices"
	"sync"
)

// Reader reads a rendering sequentially, in order, into p; it returns 0
// and nil at the end. It is how a Sequential view streams content that is
// too large to hold.
type Reader interface {
	Read(ctx context.Context, p []byte) (int, error)
	Close() error
}

// Sequential is a read-only view rendered as a stream when opened: each
// open gets a Reader (normally over one consistent snapshot of the state),
// and reads at increasing offsets are served from it without holding the
// whole rendering. A read at an earlier offset starts a fresh Reader and
// skips forward.
//
// Its size is what Size says (the length of the whole rendering, found
// without rendering it: an archive's recorded length), or the Meta's when
// Size is nil (a rendering that waits, such as an exec's receipt, has
// none).
type Sequential struct {
	Meta
	// OpenReader returns a Reader of the rendering for cred, from its
	// start: at each open, and again at each read that goes back.
	OpenReader func(ctx context.Context, cred Cred) (Reader, error)
	// Size, if set, returns the length of what an open by cred would read
	// now. It must be cheap and free, as a stat's work is.
	Size func(ctx context.Context, cred Cred) (int64, error)
}

var _ File = (*Sequential)(nil)

// Attr implements Node: the Meta's attributes, with Size's size for a
// cred that may read the file.
func (s *Sequential) Attr(ctx context.Context, cred Cred) (Attr, error) {
	a, err := s.Meta.Attr(ctx, cred)
	if err != nil || s.Size == nil || !ContentWanted(ctx) || s.Meta.Access(ctx, cred, WantRead) != nil {
		return a, err
	}
	if n, err := s.Size(ctx, cred); err == nil && n >= 0 {
		a.Size = n
	}
	return a, nil
}

// Open implements File.
func (s *Sequential) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, s, cred, flags); err != nil {
		return nil, err
	}
	r, err := s.OpenReader(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &seqHandle{s: s, cred: cred, r: r}, nil
}

type seqHandle struct {
	s    *Sequential
	cred Cred
	mu   sync.Mutex
	r    Reader
	pos  int64  // offset of the first byte of left
	left []byte // read from r, not yet returned
	eof  bool
}

// Read serves off from the stream: bytes already read but not returned are
// kept, so a transport that re-reads the tail of a short read is served.
func (h *seqHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < h.pos {
		// Rewind: start over and skip to off.
		h.r.Close()
		r, err := h.s.OpenReader(ctx, h.cred)
		if err != nil {
			return 0, err
		}
		h.r, h.pos, h.left, h.eof = r, 0, nil, false
	}
	// Drop what lies before off.
	for h.pos+int64(len(h.left)) <= off && !h.eof {
		h.pos += int64(len(h.left))
		h.left = h.left[:0]
		if err := h.fill(ctx, len(p)); err != nil {
			return 0, err
		}
	}
	if skip := off - h.pos; skip > 0 {
		if skip >= int64(len(h.left)) {
			return 0, nil
		}
		h.left = h.left[skip:]
		h.pos = off
	}
	for len(h.left) < len(p) && !h.eof {
		if err := h.fill(ctx, len(p)-len(h.left)); err != nil {
			return 0, err
		}
	}
	n := copy(p, h.left)
	h.left = h.left[n:]
	h.pos += int64(n)
	return n, nil
}

// fill reads more bytes from the reader (want of them, or 32 KiB if more)
// straight into the free end of left.
func (h *seqHandle) fill(ctx context.Context, want int) error {
	h.left = slices.Grow(h.left, max(want, 32<<10))
	n, err := h.r.Read(ctx, h.left[len(h.left):cap(h.left)])
	if err != nil {
		return err
	}
	if n == 0 {
		h.eof = true
		return nil
	}
	h.left = h.left[:len(h.left)+n]
	return nil
}

func (h *seqHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}

func (h *seqHandle) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.r.Close()
}
