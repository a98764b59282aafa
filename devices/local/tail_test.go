package local

import (
	"bytes"
	"fmt"
	"testing"
)

func TestTailBuffer(t *testing.T) {
	var all bytes.Buffer
	b := &tailBuffer{max: 10}
	for _, s := range []string{"abc", "", "defgh", "ij", "k", "lmnopqrstuvwxyz0123", "45", "6789"} {
		b.Write([]byte(s))
		all.WriteString(s)
		got, trunc := b.text()
		want := all.String()
		if len(want) > 10 {
			want = fmt.Sprintf("[... %d bytes truncated ...]\n%s", len(want)-10, want[len(want)-10:])
		}
		if got != want || trunc != (all.Len() > 10) {
			t.Fatalf("after %q: %q %v, want %q", s, got, trunc, want)
		}
	}
	// A character cut by the ring's edge is dropped whole.
	b = &tailBuffer{max: 4}
	b.Write([]byte("aé€")) // 1+2+3 bytes: the last 4 are é's second byte and €
	if got, _ := b.text(); got != "[... 3 bytes truncated ...]\n€" {
		t.Fatalf("cut rune: %q", got)
	}
}

// take returns what was written since the last take; a character split
// between takes is returned whole by the later one.
func TestTailBufferTake(t *testing.T) {
	b := &tailBuffer{max: 8}
	b.Write([]byte("ab\xc3"))
	if s, trunc := b.take(false); s != "ab" || trunc {
		t.Fatalf("first take: %q %v", s, trunc)
	}
	b.Write([]byte("\xa9cd"))
	if s, _ := b.take(false); s != "écd" {
		t.Fatalf("second take: %q", s)
	}
	b.Write([]byte("0123456789"))
	if s, trunc := b.take(true); s != "[... 2 bytes truncated ...]\n23456789" || !trunc {
		t.Fatalf("truncated take: %q %v", s, trunc)
	}
	if s, trunc := b.take(true); s != "" || trunc {
		t.Fatalf("empty take: %q %v", s, trunc)
	}
}
