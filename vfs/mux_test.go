package vfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// muxOf is a Mux whose requests are "TAG WORD" lines and whose cancel
// lines are "!TAG"; do answers a request.
func muxOf(do func(ctx context.Context, tag, word string) string) *Mux {
	return &Mux{Meta: allow{},
		Tag: func(req []byte) (string, bool) {
			if t, ok := bytes.CutPrefix(req, []byte("!")); ok {
				return string(t), true
			}
			tag, _, _ := bytes.Cut(req, []byte(" "))
			return string(tag), false
		},
		Do: func(ctx context.Context, cred Cred, req []byte) []byte {
			tag, word, _ := strings.Cut(string(req), " ")
			return []byte(tag + " " + do(ctx, tag, word))
		}}
}

// readAnswers reads n answers from h, one line each, however the reads
// cut them.
func readAnswers(t *testing.T, h Handle, n int, buf []byte) []string {
	t.Helper()
	var got []string
	var line []byte
	for len(got) < n {
		k, err := h.Read(context.Background(), buf, 0)
		if err != nil || k == 0 {
			t.Fatalf("read: %d %v after %q", k, err, got)
		}
		line = append(line, buf[:k]...)
		for {
			i := bytes.IndexByte(line, '\n')
			if i < 0 {
				break
			}
			got = append(got, string(line[:i]))
			line = line[i+1:]
		}
	}
	if len(line) > 0 {
		t.Fatalf("a piece of an answer left: %q", line)
	}
	return got
}

// TestMuxConcurrent: the requests of one handle run at once and answer
// in the order they are ready, each with its tag; a slow one holds up no
// other; the reads pack whole answers and give a long one in pieces,
// before any other.
func TestMuxConcurrent(t *testing.T) {
	release := make(chan struct{})
	m := muxOf(func(ctx context.Context, tag, word string) string {
		if word == "slow" {
			<-release
		}
		return strings.ToUpper(word)
	})
	h, _ := m.Open(context.Background(), nil, os.O_RDWR)
	defer h.Close(context.Background())
	if _, err := h.Write(context.Background(), []byte("1 slow\n2 fast\n3 quick\n"), 0); err != nil {
		t.Fatal(err)
	}
	got := readAnswers(t, h, 2, make([]byte, 100))
	slices.Sort(got)
	if want := []string{"2 FAST", "3 QUICK"}; !slices.Equal(got, want) {
		t.Fatalf("answers before the slow one: %q, want %q", got, want)
	}
	close(release)
	if got := readAnswers(t, h, 1, make([]byte, 100)); got[0] != "1 SLOW" {
		t.Fatalf("the slow one: %q", got)
	}

	// Two answers ready: one read takes both; a long one comes in
	// pieces, none mixed with another answer.
	h.Write(context.Background(), []byte("4 a\n5 b\n"), 0)
	deadline := time.Now().Add(time.Minute)
	for {
		h.(*muxHandle).mu.Lock()
		n := len(h.(*muxHandle).answers)
		h.(*muxHandle).mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the answers are not ready within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	buf := make([]byte, 100)
	if n, err := h.Read(context.Background(), buf, 0); err != nil || (string(buf[:n]) != "4 A\n5 B\n" && string(buf[:n]) != "5 B\n4 A\n") {
		t.Fatalf("one read of two answers: %q %v", buf[:n], err)
	}
	long := strings.Repeat("x", 50)
	h.Write(context.Background(), []byte("6 "+long+"\n7 y\n"), 0)
	got = readAnswers(t, h, 2, make([]byte, 8))
	slices.Sort(got)
	if want := []string{"6 " + strings.ToUpper(long), "7 Y"}; !slices.Equal(got, want) {
		t.Fatalf("a long answer in pieces: %q, want %q", got, want)
	}
}

// TestMuxCancel: a cancel line ends the context of the request it names
// (which answers), and no other; closing the handle cancels every
// request still running and waits for it.
func TestMuxCancel(t *testing.T) {
	ended := make(chan string, 10)
	m := muxOf(func(ctx context.Context, tag, word string) string {
		<-ctx.Done()
		ended <- tag
		return "cancelled"
	})
	h, _ := m.Open(context.Background(), nil, os.O_RDWR)
	h.Write(context.Background(), []byte("1 wait\n2 wait\n!1\n"), 0)
	if got := readAnswers(t, h, 1, make([]byte, 100)); got[0] != "1 cancelled" {
		t.Fatalf("the cancelled request: %q", got)
	}
	select {
	case tag := <-ended:
		if tag != "1" {
			t.Fatalf("request %s ended", tag)
		}
	default:
		t.Fatal("no request ended")
	}
	if len(ended) != 0 {
		t.Fatal("the cancel ended another request too")
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-ended:
		if tag != "2" {
			t.Fatalf("request %s ended at Close", tag)
		}
	default:
		t.Fatal("Close returned before the request it cancelled ended")
	}
}

// TestMuxWaits: a read with nothing in flight waits for an answer while
// the handle is open: its ctx ends it, a non-blocking one is EAGAIN, the
// handle's Close ends it with end of file; a tree walker's handle
// (O_NOFOLLOW) never waits.
func TestMuxWaits(t *testing.T) {
	m := muxOf(func(ctx context.Context, tag, word string) string { return word })
	h, _ := m.Open(context.Background(), nil, os.O_RDWR)
	buf := make([]byte, 100)
	if _, err := h.Read(WithNonblocking(context.Background()), buf, 0); err != ErrWouldBlock {
		t.Fatalf("non-blocking read: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.Read(ctx, buf, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read with nothing in flight: %v", err)
	}
	// A read waiting before the request is written gets its answer.
	type read struct {
		n   int
		err error
	}
	got := make(chan read, 1)
	go func() {
		n, err := h.Read(context.Background(), buf, 0)
		got <- read{n, err}
	}()
	h.Write(context.Background(), []byte("1 hi\n"), 0)
	if r := <-got; r.err != nil || string(buf[:r.n]) != "1 hi\n" {
		t.Fatalf("a read waiting before the request: %q %v", buf[:r.n], r.err)
	}
	go func() {
		n, err := h.Read(context.Background(), buf, 0)
		got <- read{n, err}
	}()
	time.Sleep(10 * time.Millisecond) // not a synchronisation: the read may start after Close too
	h.Close(context.Background())
	if r := <-got; r.err != nil || r.n != 0 {
		t.Fatalf("a read waiting at Close: %d %v, want end of file", r.n, r.err)
	}
	w, _ := m.Open(context.Background(), nil, os.O_RDWR|syscall.O_NOFOLLOW)
	defer w.Close(context.Background())
	if n, err := w.Read(context.Background(), buf, 0); n != 0 || err != nil {
		t.Fatalf("a walker's read: %d %v", n, err)
	}
}

// TestMuxBacklog: a handle holds at most MaxMuxInflight requests: a
// write past them is refused whole; reading answers makes room.
func TestMuxBacklog(t *testing.T) {
	m := muxOf(func(ctx context.Context, tag, word string) string { return word })
	h, _ := m.Open(context.Background(), nil, os.O_RDWR)
	defer h.Close(context.Background())
	full := bytes.Repeat([]byte("t w\n"), MaxMuxInflight)
	if _, err := h.Write(context.Background(), full, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(context.Background(), []byte("u w\n"), 0); err != ErrCallBacklog {
		t.Fatalf("a write past the backlog: %v", err)
	}
	readAnswers(t, h, 1, make([]byte, 4))
	if _, err := h.Write(context.Background(), []byte("u w\n"), 0); err != nil {
		t.Fatalf("a write after an answer was read: %v", err)
	}
}
