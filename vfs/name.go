package vfs

import (
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"
)

// MaxName is the longest file name a tree takes, in bytes: Linux's
// NAME_MAX.
const MaxName = 255

// The errors of CheckName.
var (
	ErrBadName     = Errorf(syscall.EINVAL, "invalid file name")
	ErrNameTooLong = Errorf(syscall.ENAMETOOLONG, "file name longer than "+strconv.Itoa(MaxName)+" bytes")
)

// CheckName is the one rule for a file name that a tree is asked to look
// up, make or rename to: one path element of 1 to MaxName bytes of valid
// UTF-8, not "." or "..", without '/' or NUL. It returns nil for such a
// name, ErrNameTooLong (ENAMETOOLONG) for one over MaxName bytes and
// ErrBadName (EINVAL) for any other. Whoever adds a rule of its own (a
// device's answers refuse control characters too) checks it after this
// one.
func CheckName(name string) error {
	switch {
	case len(name) > MaxName:
		return ErrNameTooLong
	case name == "" || name == "." || name == "..",
		strings.ContainsAny(name, "/\x00"),
		!utf8.ValidString(name):
		return ErrBadName
	}
	return nil
}
