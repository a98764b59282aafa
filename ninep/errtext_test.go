package ninep

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/vfs"
)

// errnoErr is an error with an errno of its own and a text that says
// nothing of it, as a kernel error's can be.
type errnoErr struct {
	text  string
	errno syscall.Errno
}

func (e errnoErr) Error() string        { return e.text }
func (e errnoErr) Errno() syscall.Errno { return e.errno }

// TestErrnoCrossesRerror: the errno of a server's error is the errno
// RemoteErrno reads from its Rerror text, whatever the text says and
// however short the message must be cut; a text that already says its
// errno is sent as it is.
func TestErrnoCrossesRerror(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		errno syscall.Errno
		same  bool // the text is sent unchanged
	}{
		{"a bad ctl line", errnoErr{`notification.create: level "zzz": want info, success, warning or error`, syscall.EINVAL}, syscall.EINVAL, false},
		{"words that guess another", errnoErr{"proc.send: x: conversation is closed: open it again to send", syscall.EBUSY}, syscall.EBUSY, false},
		{"words that guess it", errnoErr{"proc.send: x: no such process", syscall.ENOENT}, syscall.ENOENT, true},
		{"a vfs error", vfs.ErrPermission, syscall.EACCES, true},
		{"a wrapped syscall errno", fmt.Errorf("open: %w", syscall.EROFS), syscall.EROFS, false},
		{"io/fs", fmt.Errorf("lookup: %w", fs.ErrNotExist), syscall.ENOENT, false},
		{"a quota", errnoErr{"home is full", syscall.EDQUOT}, syscall.EDQUOT, false},
		{"an error with no errno", errors.New("unknown fid"), syscall.EINVAL, true}, // guessed from its words
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, msize := range []uint32{MaxMsize, MinMsize} {
				r := errorFcall(1, c.err, msize)
				if got := RemoteErrno(r.Ename); got != c.errno {
					t.Errorf("msize %d: %q reads as %v, want %v", msize, r.Ename, got, c.errno)
				}
				if len(r.Ename) > int(msize)-rerrorHdr || !utf8.ValidString(r.Ename) {
					t.Errorf("msize %d: a text of %d bytes", msize, len(r.Ename))
				}
				if msize == MaxMsize && c.same && r.Ename != c.err.Error() {
					t.Errorf("%q became %q", c.err.Error(), r.Ename)
				}
			}
		})
	}
	// A message too long for the Rerror is cut, its errno kept.
	long := errnoErr{strings.Repeat("é", MinMsize), syscall.EINVAL}
	r := errorFcall(1, long, MinMsize)
	if RemoteErrno(r.Ename) != syscall.EINVAL || !strings.HasSuffix(r.Ename, ": invalid argument") {
		t.Fatalf("a long message: %q", r.Ename)
	}
}

// FuzzErrorText: whatever an error's text and errno, its Rerror fits the
// limit and RemoteErrno reads the errno back from it.
func FuzzErrorText(f *testing.F) {
	f.Add(`notification.create: level "zzz": want info`, uint8(7), uint16(8192))
	f.Add("proc.send: x: no such process", uint8(0), uint16(30))
	f.Add(strings.Repeat("é", 300)+": permission denied", uint8(7), uint16(40))
	f.Add("", uint8(3), uint16(0))
	f.Fuzz(func(t *testing.T, text string, i uint8, limit uint16) {
		e := taggedErrnos[int(i)%len(taggedErrnos)]
		got := errorText(errnoErr{text, e}, int(limit))
		if len(got) > int(limit) {
			t.Fatalf("%q in %d bytes: %q (%d bytes)", text, limit, got, len(got))
		}
		if int(limit) >= len(": "+e.Error())+1 && RemoteErrno(got) != e {
			t.Fatalf("%q (%v) in %d bytes: %q reads as %v", text, e, limit, got, RemoteErrno(got))
		}
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("%q: %q is not UTF-8", text, got)
		}
	})
}
