package ninep

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Errnos across 9P2000. An Rerror carries text only (9P2000.u's errno
// field is not 9P2000), so the server writes the text so that the client
// reads the errno back: a text that ends with ": " and an errno's
// strerror ("...: invalid argument") is that errno (RemoteErrno looks at
// the end first), and the server adds that ending to any error that has
// an errno of its own (an Errno method, a syscall.Errno, io/fs's errors)
// unless RemoteErrno of its text already gives it. So a bad ctl line is
// EINVAL through `gsvfs mount --kernel` as it is locally, whatever its
// message says; a plain error the server knows no errno of keeps its text
// (EIO, or what the words guess).

// taggedErrnos are the errnos whose strerror may end an Rerror, in the
// order RemoteErrno tries them (a longer text before one it ends with).
var taggedErrnos = []syscall.Errno{
	syscall.ENOENT, syscall.EACCES, syscall.EPERM, syscall.EEXIST, syscall.ENOTDIR, syscall.EISDIR,
	syscall.ENOTEMPTY, syscall.EINVAL, syscall.EBUSY, syscall.EAGAIN, syscall.EINTR, syscall.ETIMEDOUT,
	syscall.EHOSTDOWN, syscall.EXDEV, syscall.ENAMETOOLONG, syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS,
	syscall.ELOOP, syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EFBIG, syscall.ENOTCONN, syscall.ECONNREFUSED,
	syscall.EBADF, syscall.EIO,
}

// errnoOfEnd returns the errno whose strerror ends text (after ": ", or
// as the whole text).
func errnoOfEnd(text string) (syscall.Errno, bool) {
	for _, e := range taggedErrnos {
		s := e.Error()
		if text == s || strings.HasSuffix(text, ": "+s) {
			return e, true
		}
	}
	return 0, false
}

// ownErrno returns the errno err carries itself, if any: an Errno method
// (a vfs error, an *abi.Error), a syscall.Errno, or io/fs's errors.
func ownErrno(err error) (syscall.Errno, bool) {
	var en interface{ Errno() syscall.Errno }
	if errors.As(err, &en) {
		return en.Errno(), true
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		return se, true
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT, true
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES, true
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST, true
	}
	return 0, false
}

// errorText is the Rerror text of err in at most limit bytes: its message
// (cut to fit, whole UTF-8) and, when err has an errno of its own that
// the message (as cut) does not already say, ": " and that errno's
// strerror, for which the message is cut further.
func errorText(err error, limit int) string {
	text := err.Error()
	if text == "" {
		text = "unknown error"
	}
	text = cut(text, limit)
	e, ok := ownErrno(err)
	if !ok || e == 0 || RemoteErrno(text) == e {
		return text
	}
	tag := ": " + e.Error()
	if limit < len(tag) {
		return text
	}
	return cut(text, limit-len(tag)) + tag
}

// cut is s in at most n bytes, ending on a whole UTF-8 sequence when s is
// valid UTF-8.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:max(n, 0)]
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
