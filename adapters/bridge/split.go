package bridge

import (
	"strings"
	"unicode/utf8"
)

// Split cuts text into pieces of at most max bytes, each cut at the last
// line break before the limit, else the last blank, else the last whole
// UTF-8 character: the messages a platform with a MaxText of max takes.
// Text that fits (or a max below 1) is one piece; empty text is none.
func Split(text string, max int) []string {
	if text == "" {
		return nil
	}
	if max < 1 || len(text) <= max {
		return []string{text}
	}
	var out []string
	for len(text) > max {
		// A break just past the limit cuts there too (the break goes).
		cut := strings.LastIndexByte(text[:max+1], '\n')
		if cut <= 0 {
			cut = strings.LastIndexByte(text[:max+1], ' ')
		}
		if cut <= 0 {
			cut = max
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			if cut == 0 { // max is smaller than the first character
				_, cut = utf8.DecodeRuneInString(text)
			}
			out = append(out, text[:cut])
			text = text[cut:]
			continue
		}
		out = append(out, text[:cut])
		text = text[cut+1:] // the break itself goes
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}
