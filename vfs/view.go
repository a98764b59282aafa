package vfs

import (
	"bytes"
	"context"
	"sync"
	"time"
)

// View is a read-only file rendered when opened: every read of one handle
// sees the same snapshot.
//
// A view's size is that of the rendering a reader would get now: Attr
// renders it (for a cred that may read the view; reads are free, so a
// rendering never writes nor starts work), so that a copier that trusts
// the size (tar, rsync, cp) copies every byte, and reads of an open
// handle end at its snapshot's end. A stat through an open handle that
// names it (FUSE's lseek to the end) reports that snapshot's size.
type View struct {
	Meta
	// Render returns the content cred reads.
	Render func(ctx context.Context, cred Cred) ([]byte, error)
	// RenderAt, if set, is used instead of Render: it also says when the
	// content last changed (the view's mtime); the zero time leaves the
	// Meta's mtime.
	RenderAt func(ctx context.Context, cred Cred) ([]byte, time.Time, error)
	// Grows says that the content only grows, as a log's does: a read of
	// an open handle at or past its snapshot's end renders again, and if
	// the new content begins with the snapshot, the snapshot becomes the
	// new content and the read goes on in it (tail -f sees new lines). New
	// content that does not begin with the snapshot (a log rotated) ends
	// that read and replaces the snapshot, so that the reader, told by the
	// size that the file shrank, reads the new content from its start.
	Grows bool
}

var _ File = (*View)(nil)

// render renders the view for cred: its content and mtime (zero: none).
func (v *View) render(ctx context.Context, cred Cred) ([]byte, time.Time, error) {
	if v.RenderAt != nil {
		return v.RenderAt(ctx, cred)
	}
	b, err := v.Render(ctx, cred)
	return b, time.Time{}, err
}

// Attr implements Node: the Meta's attributes, with the size (and, with
// RenderAt, the mtime) of what an open by cred would read now. A cred that
// may not read the view, a rendering that fails, or a context made by
// WithoutContent reports the Meta's.
func (v *View) Attr(ctx context.Context, cred Cred) (Attr, error) {
	a, err := v.Meta.Attr(ctx, cred)
	if err != nil || !ContentWanted(ctx) || v.Meta.Access(ctx, cred, WantRead) != nil {
		return a, err
	}
	b, mt, err := v.render(ctx, cred)
	if err != nil {
		return a, nil
	}
	a.Size = int64(len(b))
	if !mt.IsZero() {
		a.Mtime = mt
	}
	return a, nil
}

// Open implements File. Opening for writing fails with EACCES.
func (v *View) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, v, cred, flags); err != nil {
		return nil, err
	}
	b, _, err := v.render(ctx, cred)
	if err != nil {
		return nil, err
	}
	if v.Grows {
		return &logHandle{v: v, cred: cred, b: b}, nil
	}
	return &snapshot{b: b}, nil
}

// snapshot is an open View.
type snapshot struct{ b []byte }

var _ Sizer = (*snapshot)(nil)

func (s *snapshot) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if off >= int64(len(s.b)) {
		return 0, nil
	}
	return copy(p, s.b[off:]), nil
}
func (s *snapshot) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}
func (s *snapshot) Close(ctx context.Context) error { return nil }

// Size implements Sizer: the snapshot's size for a stat that names this
// handle; none (the view's own, rendered anew) for any other.
func (s *snapshot) Size(own bool) int64 {
	if !own {
		return -1
	}
	return int64(len(s.b))
}

// logHandle is an open View that Grows.
type logHandle struct {
	v    *View
	cred Cred

	mu sync.Mutex
	b  []byte
}

var _ Sizer = (*logHandle)(nil)

func (h *logHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < 0 {
		return 0, Errorf(22 /* EINVAL */, "negative offset")
	}
	if off >= int64(len(h.b)) {
		b, _, err := h.v.render(ctx, h.cred)
		if err != nil {
			return 0, err
		}
		grown := bytes.HasPrefix(b, h.b)
		h.b = b
		if !grown || off >= int64(len(b)) {
			return 0, nil
		}
	}
	return copy(p, h.b[off:]), nil
}
func (h *logHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}
func (h *logHandle) Close(ctx context.Context) error { return nil }

// Size implements Sizer as snapshot's does.
func (h *logHandle) Size(own bool) int64 {
	if !own {
		return -1
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(len(h.b))
}

// WithoutContent returns a context for an Attr whose caller needs only the
// node's type, mode and inode (a directory listing that gives names and
// types): a node may then skip the work that only finds its size and
// mtime (rendering a view).
func WithoutContent(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutContentKey{}, true)
}

// ContentWanted reports whether an Attr made with ctx should find the
// node's size and mtime (ctx was not made by WithoutContent).
func ContentWanted(ctx context.Context) bool {
	v, _ := ctx.Value(withoutContentKey{}).(bool)
	return !v
}

type withoutContentKey struct{}
