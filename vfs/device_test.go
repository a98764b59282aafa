package vfs

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
)

// TestDevice: a device fills every read, at any offset, without end (or
// ends at once with no Fill); an O_NOFOLLOW open (a tree walker) reads
// end of file at once; writes are taken whole and truncation accepted.
func TestDevice(t *testing.T) {
	ctx := context.Background()
	ones := &Device{Meta: allow{}, Fill: func(p []byte) { copy(p, bytes.Repeat([]byte{1}, len(p))) }}
	null := &Device{Meta: allow{}}
	for _, tc := range []struct {
		name  string
		d     *Device
		flags int
		want  int
	}{
		{"fill", ones, os.O_RDWR, 4096},
		{"walker", ones, os.O_RDONLY | syscall.O_NOFOLLOW, 0},
		{"null", null, os.O_RDWR, 0},
	} {
		h, err := tc.d.Open(ctx, nil, tc.flags)
		if err != nil {
			t.Fatalf("%s: open: %v", tc.name, err)
		}
		p := make([]byte, 4096)
		for _, off := range []int64{0, 1 << 40} {
			n, err := h.Read(ctx, p, off)
			if n != tc.want || err != nil || (n > 0 && !bytes.Equal(p, bytes.Repeat([]byte{1}, n))) {
				t.Errorf("%s: read at %d: %d, %v; want %d", tc.name, off, n, err, tc.want)
			}
		}
		if n, err := h.Write(ctx, []byte("discarded"), 7); n != 9 || err != nil {
			t.Errorf("%s: write: %d, %v", tc.name, n, err)
		}
		if err := h.(Truncater).Truncate(ctx, 0); err != nil {
			t.Errorf("%s: truncate: %v", tc.name, err)
		}
		h.Close(ctx)
	}
}
