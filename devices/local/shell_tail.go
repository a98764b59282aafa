package local

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// tailBuffer is an io.Writer that keeps the last max bytes written to it
// (a ring buffer) and counts them all.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte // len(buf) <= max; once full, the oldest byte is at start
	start int
	total int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if len(p) >= b.max {
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		b.start = 0
		return n, nil
	}
	if room := b.max - len(b.buf); room > 0 {
		c := min(room, len(p))
		b.buf = append(b.buf, p[:c]...)
		p = p[c:]
	}
	for len(p) > 0 {
		c := copy(b.buf[b.start:], p)
		p = p[c:]
		b.start = (b.start + c) % b.max
	}
	return n, nil
}

// written is how many bytes were written since the buffer was last
// taken.
func (b *tailBuffer) written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// text returns the kept output as valid UTF-8 and whether earlier output
// was dropped, in which case it starts with a "[... N bytes truncated
// ...]" line. A character cut by the ring's edge is dropped whole.
func (b *tailBuffer) text() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, trunc, _ := b.textLocked(false)
	return s, trunc
}

// take is text for output read piece by piece: it returns what text
// returns and empties the buffer, so that the next take returns only
// what is written after. Unless final, an incomplete character at the
// end is kept back for the next take, so that a character written in two
// pieces is returned whole.
func (b *tailBuffer) take(final bool) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, trunc, held := b.textLocked(!final)
	b.buf = append(b.buf[:0], held...)
	b.start = 0
	b.total = int64(len(held))
	return s, trunc
}

// textLocked is text; with holdBack, an incomplete character at the end
// is left out of it and returned as held.
func (b *tailBuffer) textLocked(holdBack bool) (s string, truncated bool, held []byte) {
	kept := make([]byte, 0, len(b.buf))
	kept = append(kept, b.buf[b.start:]...)
	kept = append(kept, b.buf[:b.start]...)
	dropped := b.total - int64(len(kept))
	if holdBack {
		if n := incompleteTail(kept); n > 0 {
			held = append([]byte(nil), kept[len(kept)-n:]...)
			kept = kept[:len(kept)-n]
		}
	}
	if dropped == 0 {
		return strings.ToValidUTF8(string(kept), "\uFFFD"), false, held
	}
	for i := 0; i < utf8.UTFMax-1 && len(kept) > 0 && !utf8.RuneStart(kept[0]); i++ {
		kept = kept[1:]
		dropped++
	}
	return "[... " + strconv.FormatInt(dropped, 10) + " bytes truncated ...]\n" +
		strings.ToValidUTF8(string(kept), "\uFFFD"), true, held
}

// incompleteTail is the length of the incomplete UTF-8 character that p
// ends with, if any: the start of a character whose remaining bytes are
// yet to come.
func incompleteTail(p []byte) int {
	for n := 1; n < utf8.UTFMax && n <= len(p); n++ {
		c := p[len(p)-n]
		if !utf8.RuneStart(c) {
			continue
		}
		var want int
		switch {
		case c < 0x80:
			return 0
		case c&0xE0 == 0xC0:
			want = 2
		case c&0xF0 == 0xE0:
			want = 3
		case c&0xF8 == 0xF0:
			want = 4
		default:
			return 0 // not a valid start: nothing more will complete it
		}
		if want > n {
			return n
		}
		return 0
	}
	return 0
}
