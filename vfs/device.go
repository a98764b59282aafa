package vfs

import (
	"context"
	"syscall"
)

// Device is a file in the manner of /dev/null, /dev/zero and /dev/random:
// it holds nothing (its size is 0) and every open may read and write as
// its Meta allows. A read fills the reader's buffer with Fill, as many
// bytes as asked, at any offset, without end; with no Fill (null) it is
// end of file at once. A write is taken whole and discarded, and
// truncation is accepted. A handle opened with O_NOFOLLOW (the tree
// walkers: cp -r, tar, rsync, grep -r) reads end of file at once, so a
// walk of the tree ends; cat, head and dd read the bytes.
type Device struct {
	Meta
	// Fill writes len(p) bytes of the device into p; nil: end of file.
	Fill func(p []byte)
}

var _ File = (*Device)(nil)

// Open implements File.
func (d *Device) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := d.Access(ctx, cred, WantOf(flags)); err != nil {
		return nil, err
	}
	fill := d.Fill
	if flags&syscall.O_NOFOLLOW != 0 {
		fill = nil
	}
	return deviceHandle{fill: fill}, nil
}

type deviceHandle struct{ fill func([]byte) }

var _ Truncater = deviceHandle{}

// Read implements Handle: p filled, whatever off is; 0 for a handle
// with no fill.
func (h deviceHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if h.fill == nil {
		return 0, nil
	}
	h.fill(p)
	return len(p), nil
}

// Write implements Handle: p is discarded.
func (h deviceHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return len(p), nil
}

// Truncate implements Truncater: there is nothing to cut.
func (h deviceHandle) Truncate(ctx context.Context, size int64) error { return nil }

// Close implements Handle.
func (h deviceHandle) Close(ctx context.Context) error { return nil }
