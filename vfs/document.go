package vfs

import (
	"context"
	"os"
	"sync"
)

// Document is a readable and writable text file that stands for a piece of
// state as a whole (a crontab): it is rendered when opened and, when it has
// been written, its whole new content is applied when the file is closed.
//
// A handle sees one snapshot: the rendering at open, or nothing if opened
// with O_TRUNC. Writes change the handle's copy at their offsets (with
// O_APPEND, at its end, whatever the offset: a synthetic file reports size
// 0, so the kernel's append offset is 0), ftruncate cuts or extends it, and
// reads see those changes. At close(2) (FUSE flush, 9P clunk) a handle
// whose copy was written since the last apply gives the whole copy to
// Apply, whose error is close(2)'s. A handle opened with O_TRUNC and never
// written applies its empty copy when it is released (so `: > file`
// empties the document) but not at an earlier flush: a shell closes a
// duplicate descriptor of `cat > file` before cat writes anything.
type Document struct {
	Meta
	// Render returns the current content for cred.
	Render func(ctx context.Context, cred Cred) ([]byte, error)
	// Apply replaces the state with data. A nil Apply makes the file
	// read-only.
	Apply func(ctx context.Context, cred Cred, data []byte) error
	// Max is the largest content a handle may hold; 0 means MaxLine.
	Max int
}

var _ File = (*Document)(nil)

// Attr implements Node: the Meta's attributes, with the size of the
// rendering an open by cred would read now (see View.Attr).
func (d *Document) Attr(ctx context.Context, cred Cred) (Attr, error) {
	a, err := d.Meta.Attr(ctx, cred)
	if err != nil || !ContentWanted(ctx) || d.Meta.Access(ctx, cred, WantRead) != nil {
		return a, err
	}
	if b, err := d.Render(ctx, cred); err == nil {
		a.Size = int64(len(b))
	}
	return a, nil
}

// ErrDocumentTooLarge is returned by a write that would make a Document
// larger than its Max.
var ErrDocumentTooLarge = Errorf(27 /* EFBIG */, "document too large")

// Open implements File.
func (d *Document) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	want := WantOf(flags)
	if want&WantWrite != 0 && d.Apply == nil {
		return nil, ErrReadOnly
	}
	if err := d.Access(ctx, cred, want); err != nil {
		return nil, err
	}
	h := &docHandle{d: d, cred: cred, write: want&WantWrite != 0, appendOnly: flags&os.O_APPEND != 0}
	if flags&os.O_TRUNC != 0 {
		h.truncated = true
		return h, nil
	}
	b, err := d.Render(ctx, cred)
	if err != nil {
		return nil, err
	}
	h.buf = b
	return h, nil
}

type docHandle struct {
	d          *Document
	cred       Cred
	write      bool
	appendOnly bool

	mu        sync.Mutex
	buf       []byte
	dirty     bool  // written since the last apply
	truncated bool  // opened with O_TRUNC and not applied yet
	err       error // a write failed: the content is incomplete, never apply it
}

var (
	_ Flusher   = (*docHandle)(nil)
	_ Truncater = (*docHandle)(nil)
	_ Sizer     = (*docHandle)(nil)
)

// Size implements Sizer: the handle's copy, for a stat that names it.
func (h *docHandle) Size(own bool) int64 {
	if !own {
		return -1
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(len(h.buf))
}

func (h *docHandle) max() int {
	if h.d.Max > 0 {
		return h.d.Max
	}
	return MaxLine
}

func (h *docHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < 0 || off >= int64(len(h.buf)) {
		return 0, nil
	}
	return copy(p, h.buf[off:]), nil
}

// Write changes the handle's copy at off (at its end with O_APPEND).
func (h *docHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if !h.write {
		return 0, ErrReadOnly
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.appendOnly {
		off = int64(len(h.buf))
	}
	if off < 0 {
		return 0, Errorf(22 /* EINVAL */, "negative offset")
	}
	end := off + int64(len(p))
	if end > int64(h.max()) {
		h.err = ErrDocumentTooLarge
		return 0, h.err
	}
	if end > int64(len(h.buf)) {
		h.buf = append(h.buf, make([]byte, int(end)-len(h.buf))...)
	}
	copy(h.buf[off:], p)
	h.dirty = true
	return len(p), nil
}

// Truncate cuts or extends the handle's copy.
func (h *docHandle) Truncate(ctx context.Context, size int64) error {
	if !h.write {
		return ErrReadOnly
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if size < 0 {
		return Errorf(22 /* EINVAL */, "negative size")
	}
	if size > int64(h.max()) {
		return ErrDocumentTooLarge
	}
	if size <= int64(len(h.buf)) {
		h.buf = h.buf[:size]
	} else {
		h.buf = append(h.buf, make([]byte, int(size)-len(h.buf))...)
	}
	h.dirty = true
	return nil
}

// apply gives the copy to Apply if it changed (or, at release, if it was
// truncated at open and never applied). A failed write is reported once
// instead, and nothing is applied.
func (h *docHandle) apply(ctx context.Context, release bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		err := h.err
		h.err, h.dirty, h.truncated = nil, false, false
		return err
	}
	if !h.dirty && !(release && h.truncated) {
		return nil
	}
	h.dirty, h.truncated = false, false
	data := append([]byte(nil), h.buf...)
	return h.d.Apply(context.WithoutCancel(ctx), h.cred, data)
}

// Flush applies what was written since the last apply.
func (h *docHandle) Flush(ctx context.Context) error { return h.apply(ctx, false) }

// Close applies what is still pending.
func (h *docHandle) Close(ctx context.Context) error { return h.apply(ctx, true) }
