package kernel

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// MaxLabel is the longest label, title or other one-line name a syscall
// accepts, in bytes.
const MaxLabel = 256

// CheckText reports whether s may be stored as a one-line name such as a
// label, a title or a conversation id: valid UTF-8, at most max bytes, and
// no control characters (C0, DEL, C1: newline, NUL, ESC and the like), so
// that a name rendered into a view, a status file or a table row can never
// forge a line or a terminal sequence. The error is Invalid and names field.
func CheckText(field, s string, max int) error {
	if len(s) > max {
		return abi.E(abi.Invalid, fmt.Sprintf("%s is %d bytes; the limit is %d", field, len(s), max))
	}
	if !utf8.ValidString(s) {
		return abi.E(abi.Invalid, fmt.Sprintf("%s is not valid UTF-8", field))
	}
	for i, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return abi.E(abi.Invalid, fmt.Sprintf("%s has a control character %U at byte %d", field, r, i))
		}
	}
	return nil
}
