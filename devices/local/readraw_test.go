package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// fs.readraw reads a regular file the caller may read, bounded by Max:
// a FIFO, a device or an oversized file is a 400 at once, never a block.
func TestReadRawRegularBounded(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	ctx := context.Background()
	home := filepath.Join(k.dataPath, "home", "alice")
	if err := os.WriteFile(filepath.Join(home, "small"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "big"), []byte(strings.Repeat("x", 2000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(home, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		max  int64
		want string // "" for success
	}{
		{"~/small", 0, ""},
		{"~/small", 6, ""},
		{"~/small", 5, "larger than 5 bytes"},
		{"~/big", 1024, "larger than 1024 bytes"},
		{"~/fifo", 0, "not a regular file"},
		{"/dev/zero", 0, "not in the data tree"},
	}
	for _, tt := range tests {
		start := time.Now()
		b, err := kernel.Do(ctx, k.Kernel, &kernel.Caller{Identity: alice}, abi.FsReadraw, &abi.FileArgs{Path: tt.path, Max: tt.max})
		switch {
		case tt.want == "" && (err != nil || string(b) != "hello\n"):
			t.Errorf("%s (max %d): %q, %v", tt.path, tt.max, b, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s (max %d): %v, want an error with %q", tt.path, tt.max, err, tt.want)
		}
		if d := time.Since(start); d > liveness { // (a fifo opened would block for good)
			t.Errorf("%s took %v", tt.path, d)
		}
	}
}
