package devices

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/vfs"
)

// What a device answers is data to the kernel, and a device may be
// anyone's: every answer read from a device's call file is bounded before
// it is decoded, and checked after.
//
//   - An answer is at most MaxAnswer bytes; the kernel stops reading at
//     MaxAnswer+1 and the call fails (500 "answered ... with more than
//     ... bytes: refused"). Nothing past what the kernel asks for crosses
//     the connection (9P reads are the kernel's requests).
//   - Answers of one owner's devices that run past answerSlotAfter bytes
//     are read and decoded answerSlots at a time, so that the memory
//     large answers take is bounded per user, not per call.
//   - The decoded result is checked (checkAnswer): names one line of at
//     most 255 bytes with no '/', paths one line of at most 4096 bytes,
//     session ids and blob refs of their form, counts and sizes not
//     negative and within what an answer can carry, at most
//     local.MaxSearchMatches matches. An error frame's code is one of the
//     kinds of abi (else 500) and its message one line of at most
//     maxErrorText bytes.

// MaxAnswer is the largest answer, in bytes, the kernel reads from a
// device for one routed call: an fs.read of a file at the largest size a
// device reads (25 MiB) with numbered lines of about 40 bytes, with room
// to spare. A larger answer fails the call.
const MaxAnswer = abi.MaxAnswer

// answerSlotAfter is how much of an answer is read before it must take
// one of its owner's answer slots; answerSlots is how many each owner has.
const (
	answerSlotAfter = 256 << 10
	answerSlots     = 2
)

// A device that answered over MaxAnswer is held: for holdFirst, then
// twice as long at each further strike up to holdMost, its calls fail at
// once (503) without reaching it, on this connection and the ones it
// makes again. Refusing what it sends costs the kernel a read of
// MaxAnswer bytes; a held device costs it a check.
const (
	holdFirst = time.Second
	holdMost  = time.Minute
)

// hold is a device's hold.
type hold struct {
	mu    sync.Mutex    // guards until and next
	until time.Time     // calls before it fail at once
	next  time.Duration // the length of the next hold
}

// holdOf returns the hold of device id, one for all its connections.
func (r *Router) holdOf(id string) *hold {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holds == nil {
		r.holds = map[string]*hold{}
	}
	h := r.holds[id]
	if h == nil {
		h = &hold{}
		r.holds[id] = h
	}
	return h
}

// strike holds the device after an answer over MaxAnswer.
func (h *hold) strike() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.next == 0 {
		h.next = holdFirst
	}
	h.until = time.Now().Add(h.next)
	h.next = min(2*h.next, holdMost)
}

// check fails a call of name to device id while the device is held.
func (h *hold) check(id, name string) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if left := time.Until(h.until); left > 0 {
		return abi.E(abi.Path(id), abi.Offline, fmt.Sprintf("device %q is held for %s: it answered with more than %d bytes; %s was not sent", id, left.Round(time.Millisecond), MaxAnswer, name))
	}
	return nil
}

// maxErrorText bounds the message of a device's error frame.
const maxErrorText = 4096

// maxPath bounds a path a device answers (PATH_MAX).
const maxPath = 4096

// errAnswerTooLarge is the error of an answer over MaxAnswer.
type errAnswerTooLarge struct{}

func (errAnswerTooLarge) Error() string {
	return fmt.Sprintf("the answer is larger than %d bytes", MaxAnswer)
}

// answerSlots returns the answer slots of the devices of uid.
func (r *Router) answerSlots(uid uint32) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots == nil {
		r.slots = map[uint32]chan struct{}{}
	}
	s := r.slots[uid]
	if s == nil {
		s = make(chan struct{}, answerSlots)
		r.slots[uid] = s
	}
	return s
}

// answerReader reads one answer of a device: at most MaxAnswer bytes, and
// past answerSlotAfter only while it holds one of slots (until release),
// which it waits for unless stop closes.
type answerReader struct {
	r     io.Reader
	slots chan struct{}
	stop  <-chan struct{}
	n     int64
	held  bool
	err   error // why it stopped reading, if it was its own decision
}

func (a *answerReader) Read(p []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	if a.n >= answerSlotAfter && !a.held && a.slots != nil {
		select {
		case a.slots <- struct{}{}:
			a.held = true
		case <-a.stop:
			a.err = errors.New("the caller gave up")
			return 0, a.err
		}
	}
	if rest := MaxAnswer + 1 - a.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := a.r.Read(p)
	a.n += int64(n)
	if a.n > MaxAnswer {
		a.err = errAnswerTooLarge{}
		return 0, a.err
	}
	return n, err
}

// release gives back the slot the reader holds.
func (a *answerReader) release() {
	if a.held {
		<-a.slots
		a.held = false
	}
}

// readAnswer reads one answer frame from r, to its newline or r's end,
// and decodes it (abi.DecodeResponse), its data into res (a pointer to
// the result): at most MaxAnswer bytes, past answerSlotAfter in one of
// slots (nil: none needed), unless stop closes first.
func readAnswer(r io.Reader, slots chan struct{}, stop <-chan struct{}, res any) (abi.Response, error) {
	ar := &answerReader{r: r, slots: slots, stop: stop}
	defer ar.release()
	b, err := bufio.NewReaderSize(ar, 16<<10).ReadBytes('\n')
	if ar.err != nil {
		return abi.Response{}, ar.err
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return abi.Response{}, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return abi.Response{}, io.ErrUnexpectedEOF
	}
	return abi.DecodeResponse(b, res)
}

// answerKind is the kind of a device's error code: one of abi's, else
// Other.
func answerKind(code int) abi.Kind {
	switch k := abi.Kind(code); k {
	case abi.Invalid, abi.Permission, abi.NotExist, abi.Busy, abi.SetupRequired, abi.Offline, abi.Timeout, abi.Other:
		return k
	}
	return abi.Other
}

// oneLine is s as one line of valid UTF-8 of at most max bytes: control
// characters become spaces, and a longer text is cut with "...".
func oneLine(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return ' '
		}
		return c
	}, s)
	if len(s) > max {
		cut := max - 3
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// checkName reports whether a device may answer name as a file's name:
// a file name (vfs.CheckName) without a control character.
func checkName(what, name string) error {
	switch err := vfs.CheckName(name); {
	case err == vfs.ErrNameTooLong:
		return fmt.Errorf("%s of %d bytes (at most %d)", what, len(name), vfs.MaxName)
	case err != nil:
		return fmt.Errorf("%s %q: %v", what, name, err)
	case hasControl(name):
		return fmt.Errorf("%s %q with a control character", what, name)
	}
	return nil
}

// checkPath reports whether a device may answer p as a path.
func checkPath(what, p string) error {
	switch {
	case len(p) > maxPath:
		return fmt.Errorf("%s of %d bytes (at most %d)", what, len(p), maxPath)
	case hasControl(p):
		return fmt.Errorf("%s %q with a control character", what, p)
	}
	return nil
}

// hasControl reports whether s has a control character or a NUL.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// checkCount reports whether a device may answer n as a count or size.
func checkCount(what string, n int64) error {
	if n < 0 || n > MaxAnswer {
		return fmt.Errorf("%s %d (0 to %d)", what, n, MaxAnswer)
	}
	return nil
}

// validSessionID is the form of a session id a device answers.
var validSessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// checkSessionID reports whether a device may answer sid as a session id
// ("" where none is due).
func checkSessionID(sid string, need bool) error {
	if sid == "" && !need {
		return nil
	}
	if !validSessionID.MatchString(sid) {
		return fmt.Errorf("session id %q (1 to 128 letters, digits, '.', '_' or '-')", oneLine(sid, 64))
	}
	return nil
}

// validBlobRef is the form of a blob ref a device answers.
var validBlobRef = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// checkExec reports whether a device may answer r as an exec's result.
func checkExec(r *abi.ExecResult) error {
	if r == nil {
		return nil
	}
	for _, o := range []*abi.ExecOutput{r.Stdout, r.Stderr} {
		if o == nil || o.Blob == nil {
			continue
		}
		if !validBlobRef.MatchString(o.Blob.BlobRef) {
			return fmt.Errorf("blob ref %q", oneLine(o.Blob.BlobRef, 80))
		}
		if o.Blob.SizeBytes < 0 {
			return fmt.Errorf("blob size %d", o.Blob.SizeBytes)
		}
	}
	return nil
}

// checkAnswer reports whether res, a result a device answered, is one the
// kernel takes (see the comment above).
func checkAnswer(res any) error {
	switch r := res.(type) {
	case *abi.FSReadResult:
		if !r.OK {
			r.Error = oneLine(r.Error, maxErrorText)
			return nil
		}
		if err := checkPath("path", r.Path); err != nil {
			return err
		}
		for _, names := range [][]string{r.Files, r.Directories} {
			for _, n := range names {
				if err := checkName("name", n); err != nil {
					return err
				}
			}
		}
		if err := checkCount("size", r.Size); err != nil {
			return err
		}
		return checkCount("lines", int64(r.Lines))
	case *abi.FSWriteResult:
		r.Error = oneLine(r.Error, maxErrorText)
		if err := checkPath("path", r.Path); err != nil {
			return err
		}
		return checkCount("size", int64(r.Size))
	case *abi.FSEditResult:
		r.Error = oneLine(r.Error, maxErrorText)
		if err := checkPath("path", r.Path); err != nil {
			return err
		}
		return checkCount("replacements", int64(r.Replacements))
	case *abi.FSDeleteResult:
		r.Error = oneLine(r.Error, maxErrorText)
		return checkPath("path", r.Path)
	case *abi.FSSearchResult:
		r.Error = oneLine(r.Error, maxErrorText)
		if len(r.Matches) > local.MaxSearchMatches {
			return fmt.Errorf("%d matches (at most %d)", len(r.Matches), local.MaxSearchMatches)
		}
		if err := checkCount("count", int64(r.Count)); err != nil {
			return err
		}
		for _, m := range r.Matches {
			if err := checkPath("path", m.Path); err != nil {
				return err
			}
			if err := checkCount("line", int64(m.Line)); err != nil {
				return err
			}
		}
	case *abi.ShellExecResult:
		r.Error = oneLine(r.Error, maxErrorText)
		return checkSessionID(r.SessionID, r.Status == "running")
	case *abi.SessionOpenResult:
		r.Error = oneLine(r.Error, maxErrorText)
		return checkSessionID(r.SessionID, true)
	case *abi.SessionInfo:
		if err := checkSessionID(r.SessionID, true); err != nil {
			return err
		}
		return checkExec(r.LastExec)
	case *abi.SessionListResult:
		for i := range r.Sessions {
			if err := checkAnswer(&r.Sessions[i]); err != nil {
				return err
			}
		}
	case *abi.ExecResult:
		return checkExec(r)
	case *abi.BlobReadResult:
		if r.SizeBytes < 0 {
			return fmt.Errorf("blob size %d", r.SizeBytes)
		}
	}
	return nil
}
