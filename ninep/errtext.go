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
// (cut to fit, whole UTF-8) and, when err has an errno of its own that the
// message does not already say, ": " and that errno's strerror.
func errorText(err error, limit int) string {
	text := err.Error()
	if text == "" {
		text = "unknown error"
	}
	tag := ""
	if e, ok := ownErrno(err); ok && e != 0 && RemoteErrno(text) != e {
		tag = ": " + e.Error()
	}
	if limit < len(tag)+1 {
		tag = ""
	}
	if max := limit - len(tag); len(text) > max {
		text = text[:max]
		for len(text) > 0 && !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	return text + tag
}
