package vfs

import (
	"context"
	"sync"
)

// Ctl is a command file: each line written is one command, executed before
// the write that completes the line returns. A handle opened for reading
// and writing reads back the result (or error text) of its last command.
//
// A line ends only at its newline; a final line without one runs when the
// file is closed (close(2), 9P clunk), and its failure is then the error of
// close(2), which shells ignore: the tree's owner records failures where
// they can be read (the err view). A write fails with its first failing
// command: the lines after it in that write, and the rest of a line the
// write began, do not run. A line over MaxLine is refused whole (EINVAL on
// every write that carries part of it, and Reject is told once); the lines
// around it run as usual.
//
// A command runs with a context that ends when the write's does (9P Tflush
// or the connection's end; FUSE never cancels a write) or when the handle
// is closed.
type Ctl struct {
	Meta
	// Exec runs one command line for cred and returns its result text.
	Exec func(ctx context.Context, cred Cred, line string) (string, error)
	// Reject, if set, is told of a line the handle refused before any
	// command ran (a line over MaxLine), so the owner can record it.
	Reject func(ctx context.Context, cred Cred, err error)
}

var _ File = (*Ctl)(nil)

// Open implements File.
func (c *Ctl) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := c.Access(ctx, cred, WantOf(flags)); err != nil {
		return nil, err
	}
	h := &ctlHandle{ctl: c, cred: cred}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

type ctlHandle struct {
	ctl    *Ctl
	cred   Cred
	ctx    context.Context // ends when the handle is closed
	cancel context.CancelFunc

	mu     sync.Mutex
	lines  lines
	result []byte
	pos    int // read cursor into result; each command resets it
}

var (
	_ Flusher   = (*ctlHandle)(nil)
	_ Truncater = (*ctlHandle)(nil)
)

// Read returns the last command's result from a cursor that each command
// resets: offsets are ignored, because a shell's `exec 3<>ctl` shares one
// file position between its writes and its reads.
func (h *ctlHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := copy(p, h.result[h.pos:])
	h.pos += n
	return n, nil
}

// Write runs every line that p completes, in order (see Ctl).
func (h *ctlHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps, bad := h.lines.add(p)
	for _, pc := range ps {
		if pc.refused {
			h.result, h.pos = []byte(ErrLineTooLong.Error()+"\n"), 0
			if h.ctl.Reject != nil {
				h.ctl.Reject(ctx, h.cred, ErrLineTooLong)
			}
			continue
		}
		if err := h.run(ctx, pc.line); err != nil {
			h.lines.drop(p)
			return 0, err
		}
	}
	if bad {
		return 0, ErrLineTooLong
	}
	return len(p), nil
}

func (h *ctlHandle) run(ctx context.Context, line []byte) error {
	ctx, cancel := opCtx(ctx, h.ctx)
	defer cancel()
	res, err := h.ctl.Exec(ctx, h.cred, string(line))
	h.pos = 0
	if err != nil {
		h.result = []byte(err.Error() + "\n")
		return err
	}
	if res != "" && res[len(res)-1] != '\n' {
		res += "\n"
	}
	h.result = []byte(res)
	return nil
}

// Flush runs a final line written without a newline.
func (h *ctlHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.lines.rest(); len(l) > 0 {
		return h.run(ctx, l)
	}
	return nil
}

// Truncate accepts O_TRUNC and ftruncate (shell redirection truncates).
func (h *ctlHandle) Truncate(ctx context.Context, size int64) error { return nil }

// Close runs a final line still pending, then ends the handle's context.
func (h *ctlHandle) Close(ctx context.Context) error {
	err := h.Flush(ctx)
	h.cancel()
	return err
}
