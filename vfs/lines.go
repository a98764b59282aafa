package vfs

import (
	"bytes"
	"context"
)

// lines cuts the bytes written to a ctl or call handle into lines. A line
// ends only at a newline, however many writes carry it (bash's echo writes
// a long line in 4 KiB pieces, 9P clients in iounit pieces); a final line
// without one is taken by rest, when the file is closed. A line longer than
// max is refused whole: none of it is returned, and the rest of it, up to
// its newline, is discarded as it arrives.
type lines struct {
	max      int // the longest line; 0 means MaxLine
	pending  []byte
	skipping bool // discarding the rest of a line
	refusing bool // the line being discarded was refused (not dropped)
}

// piece is one thing the bytes written said, in order: a complete line, or
// a refused one.
type piece struct {
	line    []byte
	refused bool // a line over the cap; line is nil
}

// add takes the next bytes written and returns, in order, the lines they
// complete and the lines they refuse. bad reports whether any byte of p
// belongs to a refused line: the write that carries it fails with
// ErrLineTooLong. The pieces depend only on the bytes written so far, not
// on how the writes cut them.
func (l *lines) add(p []byte) (out []piece, bad bool) {
	max := l.max
	if max <= 0 {
		max = MaxLine
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if l.skipping {
			bad = bad || l.refusing
			if i < 0 {
				return out, bad
			}
			l.skipping = false
			p = p[i+1:]
			continue
		}
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if len(l.pending)+len(seg) > max {
			bad = true
			out = append(out, piece{refused: true})
			l.pending = nil
			if i < 0 {
				l.skipping, l.refusing = true, true
				return out, bad
			}
			p = p[i+1:]
			continue
		}
		if i < 0 {
			l.pending = append(l.pending, seg...)
			return out, bad
		}
		line := append(l.pending, seg...) // a fresh array, or pending's
		l.pending = nil
		out = append(out, piece{line: line})
		p = p[i+1:]
	}
	return out, bad
}

// drop discards what is pending after a write that failed part way: the
// rest of a line the write began is not run either.
func (l *lines) drop(p []byte) {
	l.pending = nil
	if len(p) > 0 && p[len(p)-1] != '\n' {
		l.skipping, l.refusing = true, false
	}
}

// rest returns and clears a final line written without a newline. The
// rest of a refused line is nothing: its refusal was the error of the
// write that carried it.
func (l *lines) rest() []byte {
	b := l.pending
	l.pending, l.skipping, l.refusing = nil, false, false
	return b
}

// turn is a lock that a waiter gives up on when its context ends: reads
// of one handle take turns. Make it with make(turn, 1).
type turn chan struct{}

// take waits for the turn until ctx ends.
func (t turn) take(ctx context.Context) error {
	select {
	case t <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give ends a turn that take began.
func (t turn) give() { <-t }

// opCtx returns the context a command runs with: it ends when ctx ends (a
// transport abandoning the request for good) or when the handle is closed
// (handle, the client gone), whichever comes first.
func opCtx(ctx, handle context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(handle, cancel)
	return c, func() { stop(); cancel() }
}
