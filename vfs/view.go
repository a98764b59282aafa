package vfs

import (
	"context"
)

// View is a read-only file rendered when opened: every read of one handle
// sees the same snapshot.
type View struct {
	Meta
	Render func(ctx context.Context, cred Cred) ([]byte, error)
}

var _ File = (*View)(nil)

// Open implements File. Opening for writing fails with EACCES.
func (v *View) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, v, cred, flags); err != nil {
		return nil, err
	}
	b, err := v.Render(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &snapshot{b: b}, nil
}

// snapshot is an open View.
type snapshot struct{ b []byte }

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
