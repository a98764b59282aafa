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
