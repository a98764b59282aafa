package vfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type allow struct{}

func (allow) Attr(ctx context.Context, cred Cred) (Attr, error) { return Attr{Mode: 0o666}, nil }
func (allow) Access(ctx context.Context, cred Cred, want Want) error {
	return nil
}

func TestLines(t *testing.T) {
	big := strings.Repeat("x", LargeWrite)
	tests := []struct {
		name   string
		writes []string
		want   []string // lines completed, in order, across writes
		rest   string
		err    bool
	}{
		{"newline", []string{"a\n"}, []string{"a"}, "", false},
		{"no newline short write", []string{"a"}, []string{"a"}, "", false},
		{"two lines", []string{"a\nb\n"}, []string{"a", "b"}, "", false},
		{"trailing fragment", []string{"a\nb"}, []string{"a", "b"}, "", false},
		{"large chunks join", []string{big, big, "end\n"}, []string{big + big + "end"}, "", false},
		{"large chunk then short", []string{big, "z"}, []string{big + "z"}, "", false},
		{"large pending at close", []string{big}, nil, big, false},
		{"too long", []string{strings.Repeat("y", MaxLine+1)}, nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l lines
			var got []string
			var err error
			for _, w := range tt.writes {
				var ls [][]byte
				ls, err = l.add([]byte(w))
				for _, x := range ls {
					got = append(got, string(x))
				}
			}
			if (err != nil) != tt.err {
				t.Fatalf("err = %v", err)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("lines %d, want %d", len(got), len(tt.want))
			}
			if r := string(l.rest()); r != tt.rest {
				t.Fatalf("rest %d bytes, want %d", len(r), len(tt.rest))
			}
		})
	}
}

func TestCtlReadBack(t *testing.T) {
	var ran []string
	c := &Ctl{Meta: allow{}, Exec: func(ctx context.Context, cred Cred, line string) (string, error) {
		if ctx.Err() != nil {
			t.Error("command ran with a cancelled context")
		}
		ran = append(ran, line)
		if line == "bad" {
			return "", Errorf(syscall.EINVAL, "unknown verb bad")
		}
		return "done " + line, nil
	}}
	h, _ := c.Open(context.Background(), nil, os.O_RDWR)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a cancelled context must not stop the command
	if _, err := h.Write(ctx, []byte("one\n"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, _ := h.Read(context.Background(), buf, 0)
	if string(buf[:n]) != "done one\n" {
		t.Fatalf("read back %q", buf[:n])
	}
	_, err := h.Write(context.Background(), []byte("bad"), 0)
	if Errno(err) != syscall.EINVAL {
		t.Fatalf("bad line: %v", err)
	}
	n, _ = h.Read(context.Background(), buf, 0)
	if string(buf[:n]) != "unknown verb bad\n" {
		t.Fatalf("error read back %q", buf[:n])
	}
	big := bytes.Repeat([]byte("z"), LargeWrite)
	h.Write(context.Background(), big, 0)
	if len(ran) != 2 {
		t.Fatalf("large write ran early: %d", len(ran))
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 3 || len(ran[2]) != LargeWrite {
		t.Fatalf("pending line not run at close: %d", len(ran))
	}
}

func TestCallQueues(t *testing.T) {
	c := &Call{Meta: allow{}, Do: func(ctx context.Context, cred Cred, req []byte) []byte {
		return bytes.ToUpper(req)
	}}
	h, _ := c.Open(context.Background(), nil, os.O_RDWR)
	h.Write(context.Background(), []byte("a\nb\n"), 0)
	buf := make([]byte, 100)
	n, _ := h.Read(context.Background(), buf, 999)
	if string(buf[:n]) != "A\nB\n" {
		t.Fatalf("got %q", buf[:n])
	}
	if n, _ := h.Read(context.Background(), buf, 0); n != 0 {
		t.Fatal("no EOF after the response")
	}
}

type chanSub struct {
	ch     chan []byte
	closed bool
}

func (s *chanSub) Next(ctx context.Context) ([]byte, error) {
	select {
	case b := <-s.ch:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
func (s *chanSub) Poll() ([]byte, bool) {
	select {
	case b := <-s.ch:
		return b, true
	default:
		return nil, false
	}
}
func (s *chanSub) Close() { s.closed = true }

func TestStreamConcurrentReadsCancel(t *testing.T) {
	sub := &chanSub{ch: make(chan []byte, 10)}
	s := &Stream{Meta: allow{}, Subscribe: func(ctx context.Context, cred Cred) (Subscription, error) { return sub, nil }}
	if _, err := s.Open(context.Background(), nil, os.O_WRONLY); err == nil {
		t.Fatal("stream opened for writing")
	}
	h, _ := s.Open(context.Background(), nil, os.O_RDONLY)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.Read(ctx, make([]byte, 10), 0)
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("blocked reads did not end on cancel")
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) || Errno(err) != syscall.EINTR {
			t.Fatalf("err %v", err)
		}
	}
	sub.ch <- []byte("r1\n")
	sub.ch <- []byte("r2\n")
	buf := make([]byte, 4)
	n, _ := h.Read(context.Background(), buf, 0)
	m, _ := h.Read(context.Background(), buf[n:], 0)
	if string(buf[:n+m]) != "r1\nr" {
		t.Fatalf("got %q", buf[:n+m])
	}
	h.Close(context.Background())
	if !sub.closed {
		t.Fatal("subscription not closed")
	}
}

func TestInputOneMessagePerOpen(t *testing.T) {
	var got []string
	in := &Input{Meta: allow{}, Deliver: func(ctx context.Context, cred Cred, data []byte) error {
		got = append(got, string(data))
		return nil
	}}
	if _, err := in.Open(context.Background(), nil, os.O_RDWR); err == nil {
		t.Fatal("input opened for reading")
	}
	h, _ := in.Open(context.Background(), nil, os.O_WRONLY)
	f := h.(Flusher)
	f.Flush(context.Background()) // the shell's early close of a dup: nothing to deliver
	h.Write(context.Background(), []byte("line one\n"), 0)
	h.Write(context.Background(), []byte("line two\n"), 9)
	if len(got) != 0 {
		t.Fatal("delivered before close")
	}
	h.Close(context.Background())
	if len(got) != 1 || got[0] != "line one\nline two\n" {
		t.Fatalf("got %q", got)
	}
}

// strReader streams s in pieces of 7 bytes.
type strReader struct {
	s      string
	closed *int
}

func (r *strReader) Read(ctx context.Context, p []byte) (int, error) {
	n := copy(p[:min(len(p), 7)], r.s)
	r.s = r.s[n:]
	return n, nil
}
func (r *strReader) Close() error { *r.closed++; return nil }

func TestSequential(t *testing.T) {
	text := strings.Repeat("0123456789abcdef", 5000)
	opens, closed := 0, 0
	s := &Sequential{Meta: allow{}, Open_: func(ctx context.Context, cred Cred) (Reader, error) {
		opens++
		return &strReader{s: text, closed: &closed}, nil
	}}
	h, _ := s.Open(context.Background(), nil, os.O_RDONLY)
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for off := int64(0); ; {
		n, err := h.Read(context.Background(), buf, off)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		out.Write(buf[:n])
		off += int64(n)
	}
	if out.String() != text || opens != 1 {
		t.Fatalf("sequential read: %d bytes, %d opens", out.Len(), opens)
	}
	// A re-read of an earlier offset starts over.
	n, _ := h.Read(context.Background(), buf[:10], 16)
	if string(buf[:n]) != "0123456789" || opens != 2 {
		t.Fatalf("rewind read %q opens %d", buf[:n], opens)
	}
	// Reading past the end is EOF.
	if n, _ := h.Read(context.Background(), buf, int64(len(text)+5)); n != 0 {
		t.Fatal("read past end")
	}
	h.Close(context.Background())
	if closed != opens {
		t.Fatalf("closed %d of %d readers", closed, opens)
	}
}

// denyWrite lets everyone read and no one write.
type denyWrite struct{ allow }

func (denyWrite) Access(ctx context.Context, cred Cred, want Want) error {
	if want&WantWrite != 0 {
		return ErrPermission
	}
	return nil
}

func TestBacked(t *testing.T) {
	path := t.TempDir() + "/f"
	if err := os.WriteFile(path, []byte("hello, world\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opens := 0
	b := &Backed{Meta: allow{}, OpenFile: func(ctx context.Context, cred Cred) (*os.File, error) {
		opens++
		return os.Open(path)
	}}
	ctx := context.Background()
	if _, err := b.Open(ctx, nil, os.O_RDWR); Errno(err) != syscall.EACCES {
		t.Fatalf("open for writing: %v", err)
	}
	if opens != 0 {
		t.Fatal("OpenFile called for a refused open")
	}
	h, err := b.Open(ctx, nil, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	bf, ok := h.(BackingFiler)
	if !ok || bf.BackingFile() == nil {
		t.Fatal("a Backed handle does not offer its file")
	}
	buf := make([]byte, 5)
	for _, c := range []struct {
		off  int64
		want string
	}{{0, "hello"}, {7, "world"}, {10, "ld\n"}, {13, ""}, {100, ""}} {
		n, err := h.Read(ctx, buf, c.off)
		if err != nil || string(buf[:n]) != c.want {
			t.Errorf("read at %d: %q, %v; want %q, nil", c.off, buf[:n], err, c.want)
		}
	}
	if _, err := h.Read(ctx, buf, -1); Errno(err) != syscall.EINVAL {
		t.Errorf("read at -1: %v", err)
	}
	if _, err := h.Write(ctx, []byte("x"), 0); Errno(err) != syscall.EACCES {
		t.Errorf("write: %v", err)
	}
	// The file grows: the handle reads on.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("more\n")
	f.Close()
	if n, err := h.Read(ctx, buf, 13); err != nil || string(buf[:n]) != "more\n" {
		t.Errorf("read after growth: %q, %v", buf[:n], err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bf.BackingFile().Stat(); err == nil {
		t.Error("Close left the file open")
	}
}

func TestDocument(t *testing.T) {
	ctx := context.Background()
	state := "one\ntwo\n"
	var applied []string
	d := &Document{Meta: allow{}, Max: 64,
		Render: func(ctx context.Context, cred Cred) ([]byte, error) { return []byte(state), nil },
		Apply: func(ctx context.Context, cred Cred, data []byte) error {
			if ctx.Err() != nil {
				t.Error("applied with a cancelled context")
			}
			applied = append(applied, string(data))
			if strings.Contains(string(data), "bad") {
				return Errorf(syscall.EINVAL, "bad line")
			}
			state = string(data)
			return nil
		}}
	read := func(h Handle) string {
		var out []byte
		buf := make([]byte, 3)
		for {
			n, err := h.Read(ctx, buf, int64(len(out)))
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return string(out)
			}
			out = append(out, buf[:n]...)
		}
	}
	open := func(flags int) Handle {
		h, err := d.Open(ctx, nil, flags)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write := func(h Handle, s string, off int64) {
		if _, err := h.Write(ctx, []byte(s), off); err != nil {
			t.Fatal(err)
		}
	}
	flush := func(h Handle) error { return h.(Flusher).Flush(ctx) }

	// A read-only open is a snapshot and applies nothing.
	h := open(os.O_RDONLY)
	state = "changed\n"
	if got := read(h); got != "one\ntwo\n" {
		t.Errorf("snapshot %q", got)
	}
	if _, err := h.Write(ctx, []byte("x"), 0); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write to a read-only open: %v", err)
	}
	h.Close(ctx)
	if applied != nil {
		t.Fatalf("applied %q", applied)
	}

	// O_TRUNC: a flush before any write (a shell closing a duplicate)
	// applies nothing; the writes are applied, whole, at the next flush.
	h = open(os.O_WRONLY | os.O_TRUNC)
	if err := flush(h); err != nil || applied != nil {
		t.Fatalf("early flush: %v %q", err, applied)
	}
	write(h, "new ", 0)
	write(h, "text\n", 4)
	if err := flush(h); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Join(applied, "|") != "new text\n" {
		t.Fatalf("applied %q", applied)
	}

	// O_APPEND starts from the rendering and writes at its end whatever
	// the offset; the handle reads its own writes.
	applied = nil
	h = open(os.O_RDWR | os.O_APPEND)
	write(h, "more\n", 0)
	if got := read(h); got != "new text\nmore\n" {
		t.Errorf("read back %q", got)
	}
	if err := h.Close(ctx); err != nil || strings.Join(applied, "|") != "new text\nmore\n" {
		t.Fatalf("append: %v %q", err, applied)
	}

	// Offsets and ftruncate, as an editor writing in place does.
	applied = nil
	h = open(os.O_WRONLY)
	write(h, "NEW", 0)
	if err := h.(Truncater).Truncate(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil || strings.Join(applied, "|") != "NEW text\n" {
		t.Fatalf("in place: %v %q", err, applied)
	}

	// Apply's error is close's; the state stays.
	applied = nil
	h = open(os.O_WRONLY | os.O_TRUNC)
	write(h, "bad\n", 0)
	if err := flush(h); Errno(err) != syscall.EINVAL {
		t.Fatalf("bad flush: %v", err)
	}
	if err := h.Close(ctx); err != nil || len(applied) != 1 || state != "NEW text\n" {
		t.Fatalf("close after a failed flush: %v %q %q", err, applied, state)
	}

	// Truncated and never written: applied empty at release only.
	applied = nil
	h = open(os.O_WRONLY | os.O_TRUNC)
	if err := flush(h); err != nil || applied != nil {
		t.Fatalf("flush: %v %q", err, applied)
	}
	if err := h.Close(ctx); err != nil || len(applied) != 1 || applied[0] != "" {
		t.Fatalf("release: %v %q", err, applied)
	}

	// Too large: the write fails and nothing is applied.
	applied = nil
	h = open(os.O_WRONLY | os.O_TRUNC)
	if _, err := h.Write(ctx, make([]byte, 65), 0); Errno(err) != syscall.EFBIG {
		t.Fatalf("large write: %v", err)
	}
	if err := flush(h); Errno(err) != syscall.EFBIG {
		t.Fatalf("flush after a failed write: %v", err)
	}
	if err := h.Close(ctx); err != nil || applied != nil {
		t.Fatalf("close after a failed write: %v %q", err, applied)
	}

	// Access and a nil Apply.
	if _, err := (&Document{Meta: denyWrite{}, Render: d.Render, Apply: d.Apply}).Open(ctx, nil, os.O_WRONLY); !errors.Is(err, ErrPermission) {
		t.Errorf("denied write: %v", err)
	}
	if _, err := (&Document{Meta: allow{}, Render: d.Render}).Open(ctx, nil, os.O_RDWR); !errors.Is(err, ErrReadOnly) {
		t.Errorf("nil Apply: %v", err)
	}
}
