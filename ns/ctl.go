package ns

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// CtlLine is one parsed ctl command:
//
//	verb word word key=value key='value with spaces'
//
// Quoting is rc's: single quotes, with ” for a quote inside. Rest is the
// text after the verb verbatim, for verbs that carry free text (send). A
// line whose arguments start with '{' carries a JSON args object instead;
// so does a line that is only a JSON object (its Verb is "").
type CtlLine struct {
	Verb  string
	Words []string
	Opts  map[string]string
	Rest  string
	JSON  json.RawMessage
	// read records how a verb used each option (readLooked: Opt,
	// LookupOpt; readText: Text); it is shared by copies of the line.
	read map[string]uint8
	// dup lists the options given more than once, in order.
	dup []string
}

// How a verb used an option (CtlLine.read).
const (
	readLooked uint8 = 1 << iota // the verb asked for it by name
	readText                     // the verb took the line as text
)

// Opt returns the value of the option key ("" if absent) and records that
// the verb knows it.
func (l CtlLine) Opt(key string) string {
	v, _ := l.LookupOpt(key)
	return v
}

// LookupOpt returns the value of the option key and whether the line has
// it, and records that the verb knows it.
func (l CtlLine) LookupOpt(key string) (string, bool) {
	if l.read != nil {
		l.read[key] |= readLooked
	}
	v, ok := l.Opts[key]
	return v, ok
}

// checkOpts returns a 400 naming an option the verb did not read, or one
// it asked for by name that the line gives more than once (network=full
// network=none: which one?), if any. Options of a verb that takes its
// line as text (Text) and never asks for them are words of that text,
// repeated or not.
func (l CtlLine) checkOpts() error {
	for _, k := range l.dup {
		if l.read[k]&readLooked != 0 {
			return abi.E(abi.Invalid, fmt.Sprintf("option %q is given more than once", k))
		}
	}
	first := "" // the first in sort order, so that the error is stable
	for k := range l.Opts {
		if l.read[k] == 0 && (first == "" || k < first) {
			first = k
		}
	}
	if first == "" {
		return nil
	}
	return abi.E(abi.Invalid, fmt.Sprintf("unknown option %q", first))
}

// Text returns the text after the verb (Rest) for verbs that carry free
// text (send, set): its key=value words are part of the text, so all
// options count as known.
func (l CtlLine) Text() string {
	for k := range l.Opts {
		l.read[k] |= readText
	}
	return l.Rest
}

// Args checks the number of words of a line without JSON args: from min
// to max (max < 0: no bound), else a 400 "usage: " and usage. A verb
// that takes no words checks Args(0, 0, usage), so that "stop now" is
// refused as "stop x=1" is, never run as "stop".
func (l CtlLine) Args(min, max int, usage string) error {
	if l.JSON != nil {
		return nil
	}
	if n := len(l.Words); n < min || (max >= 0 && n > max) {
		return abi.E(abi.Invalid, "usage: "+usage)
	}
	return nil
}

// ParseCtl parses one ctl line (a trailing newline is allowed).
func ParseCtl(line string) (CtlLine, error) {
	var l CtlLine
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	if !utf8.ValidString(line) {
		return l, abi.E(abi.Path("ctl"), abi.Invalid, "line is not valid UTF-8")
	}
	if strings.ContainsRune(line, 0) {
		return l, abi.E(abi.Path("ctl"), abi.Invalid, "line contains a NUL byte")
	}
	line = strings.TrimLeft(line, " \t")
	if line == "" {
		return l, abi.E(abi.Path("ctl"), abi.Invalid, "empty command")
	}
	if line[0] == '{' {
		return l, l.setJSON(line)
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		l.Verb = line
		return l, nil
	}
	l.Verb = line[:i]
	l.Rest = strings.TrimLeft(line[i:], " \t")
	if strings.HasPrefix(l.Rest, "{") {
		return l, l.setJSON(l.Rest)
	}
	words, err := splitRc(l.Rest)
	if err != nil {
		return l, err
	}
	for _, w := range words {
		if k, v, ok := strings.Cut(w.text, "="); ok && w.keyed && validOptKey(k) {
			if l.Opts == nil {
				l.Opts = map[string]string{}
				l.read = map[string]uint8{}
			}
			if _, again := l.Opts[k]; again && !slices.Contains(l.dup, k) {
				l.dup = append(l.dup, k)
			}
			l.Opts[k] = v
			continue
		}
		l.Words = append(l.Words, w.text)
	}
	return l, nil
}

func (l *CtlLine) setJSON(s string) error {
	s = strings.TrimSpace(s)
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		return abi.E(abi.Path("ctl"), abi.Invalid, fmt.Sprintf("malformed JSON args: %v", err))
	}
	l.JSON = json.RawMessage(s)
	return nil
}

func validOptKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

type rcWord struct {
	text  string
	keyed bool // the '=' of key=value was outside quotes
}

// splitRc splits s into words as rc does: blanks separate words, single
// quotes quote, and ” inside quotes is a quote.
func splitRc(s string) ([]rcWord, error) {
	var out []rcWord
	var cur strings.Builder
	inWord, quoted, keyed := false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted:
			if c == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					cur.WriteByte('\'')
					i++
				} else {
					quoted = false
				}
			} else {
				cur.WriteByte(c)
			}
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, rcWord{cur.String(), keyed})
				cur.Reset()
				inWord, keyed = false, false
			}
		default:
			if c == '=' && !keyed && cur.Len() > 0 && !strings.Contains(cur.String(), "=") {
				keyed = true
			}
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, abi.E(abi.Path("ctl"), abi.Invalid, "unterminated quote")
	}
	if inWord {
		out = append(out, rcWord{cur.String(), keyed})
	}
	return out, nil
}

// Lead is a ctl line's leading words, its leading options and the text
// after them, as SplitLead cuts them.
type Lead struct {
	Words []string
	Opts  map[string]string
	Text  string
}

// SplitLead splits rest (a line's text, CtlLine.Text) into n words, then
// the options of keys that follow them, then the text: a verb whose
// leading words and options come first and whose rest is free text, as
// written (its own key=value words are text). A leading option given
// twice is a 400 (which one would count?).
func SplitLead(rest string, n int, keys ...string) (Lead, error) {
	var out Lead
	out.Opts = map[string]string{}
	s := strings.TrimLeft(rest, " \t")
	next := func() (string, string) {
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return s, ""
		}
		return s[:i], strings.TrimLeft(s[i:], " \t")
	}
	for len(out.Words) < n && s != "" {
		var w string
		w, s = next()
		out.Words = append(out.Words, w)
	}
	for s != "" {
		w, after := next()
		k, v, ok := strings.Cut(w, "=")
		if !ok || !slices.Contains(keys, k) {
			break
		}
		if _, again := out.Opts[k]; again {
			return out, abi.E(abi.Invalid, fmt.Sprintf("option %q is given more than once", k))
		}
		out.Opts[k], s = v, after
	}
	out.Text = s
	return out, nil
}

// Ms parses the option key of l as milliseconds or a duration
// (DurationMs); 0 if l does not have it.
func (l Lead) Ms(key string) (int64, error) {
	v, ok := l.Opts[key]
	if !ok {
		return 0, nil
	}
	return DurationMs(key, v)
}

// DurationMs parses the value v of the option key as milliseconds or a Go
// duration (5s, 1m30s); anything else, or a negative number, is a 400.
func DurationMs(key, v string) (int64, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d.Milliseconds(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, abi.E(abi.Invalid, fmt.Sprintf("%s=%q: want milliseconds or a duration (such as 5s)", key, v))
	}
	return n, nil
}
