package vfs

import (
	"context"
	"sync"
)

// Input is a file whose handle collects everything written between open
// and close and delivers it as one unit (one user message) when the file
// is closed. Empty input delivers nothing. Deliver's error is the error of
// close(2) (FUSE flush) or of the 9P clunk. Reading it gives end of file
// at once (a tree walker that opens every file, such as tar, rsync, cp -r
// or grep -r, copies it as an empty file): an open for reading needs read
// permission, one for writing write permission, as for any file.
type Input struct {
	Meta
	Deliver func(ctx context.Context, cred Cred, data []byte) error
	// Max is the most bytes one open may collect; 0 means MaxLine.
	Max int
}

var _ File = (*Input)(nil)

// Open implements File.
func (in *Input) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := in.Access(ctx, cred, WantOf(flags)); err != nil {
		return nil, err
	}
	return &inputHandle{in: in, cred: cred}, nil
}

type inputHandle struct {
	in   *Input
	cred Cred
	mu   sync.Mutex
	buf  []byte
	err  error
}

var (
	_ Flusher   = (*inputHandle)(nil)
	_ Truncater = (*inputHandle)(nil)
)

// Read is end of file: an input holds nothing to read.
func (h *inputHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, nil
}

// Write collects p. Offsets are ignored: the input is what was written, in
// order.
func (h *inputHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	max := h.in.Max
	if max == 0 {
		max = MaxLine
	}
	if len(h.buf)+len(p) > max {
		h.err = ErrLineTooLong
		return 0, h.err
	}
	h.buf = append(h.buf, p...)
	return len(p), nil
}

// Flush delivers what has been collected since the last delivery. A flush
// with nothing collected (a shell closes a duplicate descriptor before it
// writes) delivers nothing.
func (h *inputHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		err := h.err
		h.err, h.buf = nil, nil
		return err
	}
	if len(h.buf) == 0 {
		return nil
	}
	data := h.buf
	h.buf = nil
	return h.in.Deliver(context.WithoutCancel(ctx), h.cred, data)
}

func (h *inputHandle) Truncate(ctx context.Context, size int64) error { return nil }
func (h *inputHandle) Close(ctx context.Context) error                { return h.Flush(ctx) }
