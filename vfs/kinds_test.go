package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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

// linesOf feeds writes to a lines with cap max and returns what it saw:
// each line, "!" for a refused one (in the fuzz target, lines are marked
// "L" and refusals "R"); and for each write whether it failed.
func linesOf(max int, writes [][]byte) (seen []string, bad []bool, rest string) {
	return linesMarked(max, writes, "", "!")
}

func linesMarked(max int, writes [][]byte, line, refused string) (seen []string, bad []bool, rest string) {
	l := lines{max: max}
	for _, w := range writes {
		ps, b := l.add(w)
		for _, p := range ps {
			if p.refused {
				seen = append(seen, refused)
			} else {
				seen = append(seen, line+string(p.line))
			}
		}
		bad = append(bad, b)
	}
	return seen, bad, string(l.rest())
}

func TestLines(t *testing.T) {
	const max = 8
	tests := []struct {
		name   string
		writes []string
		want   []string // lines completed ("!" refused), in order, across writes
		bad    []bool   // which writes fail with ErrLineTooLong
		rest   string
	}{
		{"newline", []string{"a\n"}, []string{"a"}, []bool{false}, ""},
		{"no newline waits for close", []string{"a"}, nil, []bool{false}, "a"},
		{"two lines", []string{"a\nb\n"}, []string{"a", "b"}, []bool{false}, ""},
		{"trailing fragment", []string{"a\nb"}, []string{"a"}, []bool{false}, "b"},
		{"pieces join", []string{"se", "nd x", "yz\n"}, []string{"send xyz"}, []bool{false, false, false}, ""},
		{"empty line", []string{"\n"}, []string{""}, []bool{false}, ""},
		{"at the cap", []string{"12345678\n"}, []string{"12345678"}, []bool{false}, ""},
		{"over the cap", []string{"123456789\nok\n"}, []string{"!", "ok"}, []bool{true}, ""},
		{"over the cap in pieces", []string{"12345", "6789", "more", "x\nok\n"}, []string{"!", "ok"}, []bool{false, true, true, true}, ""},
		{"refused line never runs at close", []string{"123456789"}, []string{"!"}, []bool{true}, ""},
		{"line after a refused one", []string{"123456789\n", "ok"}, []string{"!"}, []bool{true, false}, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ws [][]byte
			for _, w := range tt.writes {
				ws = append(ws, []byte(w))
			}
			seen, bad, rest := linesOf(max, ws)
			if strings.Join(seen, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("lines %q, want %q", seen, tt.want)
			}
			if fmt.Sprint(bad) != fmt.Sprint(tt.bad) {
				t.Fatalf("failed writes %v, want %v", bad, tt.bad)
			}
			if rest != tt.rest {
				t.Fatalf("rest %q, want %q", rest, tt.rest)
			}
		})
	}
}

// FuzzLines: however a byte stream is cut into writes, the lines (and
// refusals) are those of one write of the whole stream.
func FuzzLines(f *testing.F) {
	f.Add([]byte("send hello\nkill noarchive\n"), []byte{3, 1, 200})
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nb\nccc"), []byte{5, 5, 5, 5, 5, 5, 5, 5, 5})
	f.Add([]byte("\n\n\nx\n"), []byte{1})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		const max = 16
		var ws [][]byte
		rest := data
		for _, c := range cuts {
			if len(rest) == 0 {
				break
			}
			n := min(int(c)%(2*max)+1, len(rest))
			ws = append(ws, rest[:n])
			rest = rest[n:]
		}
		if len(rest) > 0 {
			ws = append(ws, rest)
		}
		want, _, wantRest := linesMarked(max, [][]byte{data}, "L", "R")
		got, bad, gotRest := linesMarked(max, ws, "L", "R")
		if !slices.Equal(got, want) || gotRest != wantRest {
			t.Fatalf("cut into %d writes: lines %q rest %q; one write: %q rest %q", len(ws), got, gotRest, want, wantRest)
		}
		for _, l := range got {
			if len(l) > max+1 || strings.Contains(l, "\n") {
				t.Fatalf("line %q: over the cap or holds a newline", l)
			}
		}
		refused := slices.Contains(want, "R")
		if refused != slices.Contains(bad, true) {
			t.Fatalf("refused %v but failed writes %v", refused, bad)
		}
	})
}

func TestCtlReadBack(t *testing.T) {
	var ran []string
	var rejected int
	c := &Ctl{Meta: allow{}, Exec: func(ctx context.Context, cred Cred, line string) (string, error) {
		if ctx.Err() != nil {
			t.Error("command ran with a cancelled context")
		}
		ran = append(ran, line)
		if line == "bad" {
			return "", Errorf(syscall.EINVAL, "unknown verb bad")
		}
		return "done " + line, nil
	}, Reject: func(ctx context.Context, cred Cred, err error) { rejected++ }}
	h, _ := c.Open(context.Background(), nil, os.O_RDWR)
	if _, err := h.Write(context.Background(), []byte("one\n"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, _ := h.Read(context.Background(), buf, 0)
	if string(buf[:n]) != "done one\n" {
		t.Fatalf("read back %q", buf[:n])
	}
	_, err := h.Write(context.Background(), []byte("bad\nnot run\nnor this"), 0)
	if Errno(err) != syscall.EINVAL {
		t.Fatalf("bad line: %v", err)
	}
	n, _ = h.Read(context.Background(), buf, 0)
	if string(buf[:n]) != "unknown verb bad\n" {
		t.Fatalf("error read back %q", buf[:n])
	}
	// The rest of the line the failed write began is discarded too.
	if _, err := h.Write(context.Background(), []byte(" one\n"), 0); err != nil {
		t.Fatal(err)
	}
	// A long line in 4 KiB pieces is one command, run at its newline.
	big := strings.Repeat("z", 16<<10)
	for i := 0; i < len(big); i += 4096 {
		if _, err := h.Write(context.Background(), []byte(big[i:i+4096]), 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(ran) != 2 {
		t.Fatalf("a piece of a line ran: %d commands", len(ran))
	}
	h.Write(context.Background(), []byte("\n"), 0)
	// Over the cap: refused whole, told once.
	huge := bytes.Repeat([]byte("h"), MaxLine/2+1)
	if _, err := h.Write(context.Background(), huge, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(context.Background(), huge, 0); err != ErrLineTooLong {
		t.Fatalf("a line over the cap: %v", err)
	}
	if _, err := h.Write(context.Background(), []byte("hh\nlast"), 0); err != ErrLineTooLong {
		t.Fatalf("the end of a refused line: %v", err)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"one", "bad", big, "last"}; !slices.Equal(ran, want) || rejected != 1 {
		t.Fatalf("ran %d commands (%.20q), rejected %d", len(ran), ran, rejected)
	}
}

// TestCtlContext: a command runs until its write is abandoned for good or
// the handle is closed.
func TestCtlContext(t *testing.T) {
	started := make(chan struct{})
	c := &Ctl{Meta: allow{}, Exec: func(ctx context.Context, cred Cred, line string) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	h, _ := c.Open(context.Background(), nil, os.O_WRONLY)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := h.Write(ctx, []byte("wait\n"), 0); done <- err }()
	<-started
	select {
	case err := <-done:
		t.Fatalf("write returned %v before its context ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("write: %v", err)
	}
	h.Close(context.Background())
}

func TestCallQueues(t *testing.T) {
	c := &Call{Meta: allow{}, Do: func(ctx context.Context, cred Cred, req []byte) []byte {
		return bytes.ToUpper(req)
	}}
	h, _ := c.Open(context.Background(), nil, os.O_RDWR)
	defer h.Close(context.Background())
	h.Write(context.Background(), []byte("a\nb\n"), 0)
	buf := make([]byte, 100)
	// One frame per read.
	for _, want := range []string{"A\n", "B\n", ""} {
		n, err := h.Read(context.Background(), buf, 999)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("read %q (%v), want %q", buf[:n], err, want)
		}
	}
	// A frame larger than the buffer is read in pieces, then the next.
	h.Write(context.Background(), []byte("abcdef\nxy\n"), 0)
	var got []string
	small := make([]byte, 4)
	for {
		n, _ := h.Read(context.Background(), small, 0)
		if n == 0 {
			break
		}
		got = append(got, string(small[:n]))
	}
	if want := []string{"ABCD", "EF\n", "XY\n"}; !slices.Equal(got, want) {
		t.Fatalf("reads %q, want %q", got, want)
	}
}

// TestCallOffWrite: the write returns before the request is answered; the
// read waits for the answer; an interrupted read ends the wait, not the
// request; closing the handle cancels it.
func TestCallOffWrite(t *testing.T) {
	release := make(chan struct{})
	cancelled := make(chan struct{})
	c := &Call{Meta: allow{}, Do: func(ctx context.Context, cred Cred, req []byte) []byte {
		if string(req) == "forever" {
			<-ctx.Done()
			close(cancelled)
			return []byte("cancelled")
		}
		<-release
		return []byte("answer " + string(req))
	}}
	h, _ := c.Open(context.Background(), nil, os.O_RDWR)
	start := time.Now()
	if _, err := h.Write(context.Background(), []byte("slow\n"), 0); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Minute { // the answer waits for release
		t.Fatalf("the write waited %v for the answer", d)
	}
	buf := make([]byte, 100)
	if _, err := h.Read(WithNonblocking(context.Background()), buf, 0); err != ErrWouldBlock {
		t.Fatalf("non-blocking read before the answer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := h.Read(ctx, buf, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("interrupted read: %v", err)
	}
	go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	n, err := h.Read(context.Background(), buf, 0)
	if err != nil || string(buf[:n]) != "answer slow\n" {
		t.Fatalf("read %q (%v)", buf[:n], err)
	}
	h.Write(context.Background(), []byte("forever"), 0)
	h.(Flusher).Flush(context.Background()) // the final line without a newline
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("Close returned before the request's context ended")
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
	case <-time.After(time.Minute):
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

// TestStreamNoWait: O_NOFOLLOW opens and size-followers never wait; a
// non-blocking read that would wait is EAGAIN; the size grows with the
// records that reach the handle.
func TestStreamNoWait(t *testing.T) {
	sub := &chanSub{ch: make(chan []byte, 10)}
	s := &Stream{Meta: allow{}, Subscribe: func(ctx context.Context, cred Cred) (Subscription, error) { return sub, nil }}
	buf := make([]byte, 64)
	read := func(h Handle, ctx context.Context) (string, error) {
		t.Helper()
		done := make(chan struct{})
		var n int
		var err error
		go func() { defer close(done); n, err = h.Read(ctx, buf, 0) }()
		select {
		case <-done:
			return string(buf[:n]), err
		case <-time.After(time.Minute):
			t.Fatal("the read waited")
			return "", nil
		}
	}

	walker, _ := s.Open(context.Background(), nil, os.O_RDONLY|syscall.O_NOFOLLOW)
	if got, err := read(walker, context.Background()); got != "" || err != nil {
		t.Fatalf("O_NOFOLLOW read of an idle stream: %q %v, want EOF", got, err)
	}
	sub.ch <- []byte("r1\n")
	if got, err := read(walker, context.Background()); got != "r1\n" || err != nil {
		t.Fatalf("O_NOFOLLOW read with a record pending: %q %v", got, err)
	}
	walker.Close(context.Background())

	h, _ := s.Open(context.Background(), nil, os.O_RDONLY)
	if _, err := read(h, WithNonblocking(context.Background())); err != ErrWouldBlock || Errno(err) != syscall.EAGAIN {
		t.Fatalf("non-blocking read of an idle stream: %v, want EAGAIN", err)
	}
	sz := h.(Sizer)
	if n := sz.Size(false); n != 0 {
		t.Fatalf("size %d before any record", n)
	}
	sub.ch <- []byte("r2\n")
	sub.ch <- []byte("r3\n")
	if n := sz.Size(false); n != 6 {
		t.Fatalf("size %d with two records pending, want 6", n)
	}
	if got, _ := read(h, context.Background()); got != "r2\nr3\n" {
		t.Fatalf("read %q", got)
	}
	if n := sz.Size(true); n != 6 {
		t.Fatalf("size %d after reading them, want 6", n)
	}
	// Its size asked through the handle (tail), it no longer waits.
	if got, err := read(h, context.Background()); got != "" || err != nil {
		t.Fatalf("read of a size-followed stream: %q %v, want EOF", got, err)
	}
	sub.ch <- []byte("r4\n")
	if n := sz.Size(false); n != 9 {
		t.Fatalf("size %d, want 9", n)
	}
	h.Close(context.Background())
}

func TestInputOneMessagePerOpen(t *testing.T) {
	var got []string
	in := &Input{Meta: allow{}, Deliver: func(ctx context.Context, cred Cred, data []byte) error {
		got = append(got, string(data))
		return nil
	}}
	// A reader (a tree walker) reads end of file and delivers nothing.
	r, err := in.Open(context.Background(), nil, os.O_RDONLY)
	if err != nil {
		t.Fatalf("input opened for reading: %v", err)
	}
	if n, err := r.Read(context.Background(), make([]byte, 8), 0); n != 0 || err != nil {
		t.Fatalf("read of an input: %d, %v; want end of file", n, err)
	}
	r.(Flusher).Flush(context.Background())
	r.Close(context.Background())
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
	s := &Sequential{Meta: allow{}, OpenReader: func(ctx context.Context, cred Cred) (Reader, error) {
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

// TestCallBacklog: a handle that is written to and never read holds at
// most MaxCallBacklog requests; reading answers makes room again.
func TestCallBacklog(t *testing.T) {
	c := &Call{Meta: allow{}, Do: func(ctx context.Context, cred Cred, req []byte) []byte { return req }}
	h, _ := c.Open(context.Background(), nil, os.O_RDWR)
	defer h.Close(context.Background())
	for i := 0; i < MaxCallBacklog; i++ {
		if _, err := h.Write(context.Background(), []byte("x\n"), 0); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if _, err := h.Write(context.Background(), []byte("y\n"), 0); !errors.Is(err, ErrCallBacklog) || Errno(err) != syscall.EAGAIN {
		t.Fatalf("write over the backlog: %v, want ErrCallBacklog (EAGAIN)", err)
	}
	buf := make([]byte, 16)
	if n, err := h.Read(context.Background(), buf, 0); err != nil || string(buf[:n]) != "x\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if _, err := h.Write(context.Background(), []byte("z\n"), 0); err != nil {
		t.Fatalf("write after a read: %v", err)
	}
}
