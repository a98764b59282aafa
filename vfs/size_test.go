package vfs

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// deny refuses every access.
type deny struct{ allow }

func (deny) Access(ctx context.Context, cred Cred, want Want) error { return ErrPermission }

// readAllAt reads h from off to its end, a read of 4 bytes at a time.
func readAllAt(t *testing.T, h Handle, off int64) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 4)
	for {
		n, err := h.Read(context.Background(), buf, off)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if n == 0 {
			return b.String()
		}
		b.Write(buf[:n])
		off += int64(n)
	}
}

// TestSizeIsContent: every kind of rendered file reports, at a stat, the
// size of what an open reads (a copier that trusts the size copies every
// byte), not 0; a reader that may not read it, a listing's type-only
// stat (WithoutContent) and a failed rendering report the Meta's.
func TestSizeIsContent(t *testing.T) {
	ctx := context.Background()
	mtime := time.Unix(1700000000, 0)
	content := "status: running\nqueued: 2\n"
	render := func(ctx context.Context, cred Cred) ([]byte, error) { return []byte(content), nil }
	for _, tc := range []struct {
		name      string
		node      File
		size      int64
		mtime     time.Time
		noContent bool // a WithoutContent stat reports 0
	}{
		{"view", &View{Meta: allow{}, Render: render}, int64(len(content)), time.Time{}, true},
		{"view with its mtime", &View{Meta: allow{}, RenderAt: func(ctx context.Context, cred Cred) ([]byte, time.Time, error) {
			return []byte(content), mtime, nil
		}}, int64(len(content)), mtime, true},
		{"unreadable view", &View{Meta: deny{}, Render: render}, 0, time.Time{}, false},
		{"failing view", &View{Meta: allow{}, Render: func(ctx context.Context, cred Cred) ([]byte, error) {
			return nil, ErrNotExist
		}}, 0, time.Time{}, false},
		{"document", &Document{Meta: allow{}, Render: render}, int64(len(content)), time.Time{}, true},
		{"sequential with a size", &Sequential{Meta: allow{}, Size: func(ctx context.Context, cred Cred) (int64, error) { return 42, nil }}, 42, time.Time{}, true},
		{"sequential without", &Sequential{Meta: allow{}}, 0, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.node.Attr(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.Size != tc.size || !a.Mtime.Equal(tc.mtime) {
				t.Errorf("attr: size %d mtime %v, want %d %v", a.Size, a.Mtime, tc.size, tc.mtime)
			}
			if tc.noContent {
				if a, _ := tc.node.Attr(WithoutContent(ctx), nil); a.Size != 0 {
					t.Errorf("a type-only attr rendered: size %d", a.Size)
				}
			}
			if tc.size == int64(len(content)) {
				h, err := tc.node.Open(ctx, nil, os.O_RDONLY)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close(ctx)
				if got := readAllAt(t, h, 0); got != content {
					t.Errorf("read %q, want %q", got, content)
				}
				sz := h.(Sizer)
				if n := sz.Size(true); n != int64(len(content)) {
					t.Errorf("the handle's own size %d, want %d", n, len(content))
				}
				if n := sz.Size(false); n >= 0 {
					t.Errorf("the handle answers a stat that does not name it: %d", n)
				}
			}
		})
	}
}

// TestViewGrows: a log view's handle reads what was added since its open
// (tail -f after the size grew), and after a rotation (new content that
// does not begin with the old) reads the new content from its start.
func TestViewGrows(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	log := "run 1\n"
	set := func(s string) { mu.Lock(); log = s; mu.Unlock() }
	v := &View{Meta: allow{}, Grows: true, Render: func(ctx context.Context, cred Cred) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		return []byte(log), nil
	}}
	h, err := v.Open(ctx, nil, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if got := readAllAt(t, h, 0); got != "run 1\n" {
		t.Fatalf("first read %q", got)
	}
	set("run 1\nrun 2\n")
	if a, _ := v.Attr(ctx, nil); a.Size != 12 {
		t.Fatalf("size after a run: %d, want 12", a.Size)
	}
	if got := readAllAt(t, h, 6); got != "run 2\n" {
		t.Fatalf("read past the old end: %q, want the new line", got)
	}
	// An earlier offset still reads the (grown) snapshot.
	if got := readAllAt(t, h, 0); got != "run 1\nrun 2\n" {
		t.Fatalf("reread: %q", got)
	}
	set("run 3\n") // rotated
	if got := readAllAt(t, h, 12); got != "" {
		t.Fatalf("read at the old end after a rotation: %q, want end of file", got)
	}
	if got := readAllAt(t, h, 0); got != "run 3\n" {
		t.Fatalf("read from the start after a rotation: %q, want the new log", got)
	}
	if _, err := h.Write(ctx, []byte("x"), 0); err == nil {
		t.Fatal("a log view took a write")
	}
}

// TestInputReadsEmpty: every open of an input for reading (a tree
// walker's) reads end of file at once and delivers nothing.
func TestInputReadsEmpty(t *testing.T) {
	ctx := context.Background()
	delivered := 0
	in := &Input{Meta: allow{}, Deliver: func(ctx context.Context, cred Cred, data []byte) error {
		delivered++
		return nil
	}}
	for _, flags := range []int{os.O_RDONLY, os.O_RDWR} {
		h, err := in.Open(ctx, nil, flags)
		if err != nil {
			t.Fatalf("open %#o: %v", flags, err)
		}
		n, err := h.Read(ctx, make([]byte, 16), 0)
		if n != 0 || (err != nil && err != io.EOF) {
			t.Fatalf("read: %d, %v", n, err)
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if delivered != 0 {
		t.Fatalf("reading delivered %d messages", delivered)
	}
	if _, err := (&Input{Meta: deny{}}).Open(ctx, nil, os.O_RDONLY); err == nil {
		t.Fatal("an input opened without read permission")
	}
}
