package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Kind classifies an error. Its value is the syscall code of the contract;
// the same kind yields the errno a POSIX transport reports, the Rerror text
// 9P sends (the error's message) and the code of a response frame.
type Kind int

// The kinds of the contract's error table.
const (
	Other         Kind = 500 // anything else
	Invalid       Kind = 400 // bad request, unknown verb, device does not implement
	Permission    Kind = 403 // permission denied, device access denied
	NotExist      Kind = 404 // no such process, conversation, schedule, segment, file
	Busy          Kind = 409 // busy: conversation running, already exists
	SetupRequired Kind = 425 // setup required
	Offline       Kind = 503 // device offline, no active connection
	Timeout       Kind = 504 // device route or IPC timed out
)

var kindErrno = map[Kind]syscall.Errno{
	Invalid:       syscall.EINVAL,
	Permission:    syscall.EACCES,
	NotExist:      syscall.ENOENT,
	Busy:          syscall.EBUSY,
	SetupRequired: syscall.EAGAIN,
	Offline:       syscall.EHOSTDOWN,
	Timeout:       syscall.ETIMEDOUT,
	Other:         syscall.EIO,
}

var kindText = map[Kind]string{
	Invalid:       "bad request",
	Permission:    "permission denied",
	NotExist:      "not found",
	Busy:          "busy",
	SetupRequired: "setup required",
	Offline:       "device offline",
	Timeout:       "timed out",
	Other:         "internal error",
}

// Errno returns the errno for k.
func (k Kind) Errno() syscall.Errno {
	if e, ok := kindErrno[k]; ok {
		return e
	}
	return syscall.EIO
}

func (k Kind) String() string {
	if s, ok := kindText[k]; ok {
		return s
	}
	return fmt.Sprintf("kind %d", int(k))
}

// Error is the kernel's error value: which operation failed, on what, how
// (Kind) and why. Its Error text is the message a user reads from an err
// view, a 9P Rerror and the message of a response frame.
type Error struct {
	Op   string // the syscall or operation, e.g. "sys.config.set"
	Path string // the file or record it concerned, if any
	Kind Kind
	Err  error // the underlying error, if any
}

// E builds an *Error from its arguments, in the manner of upspin's
// errors.E: a string is the Op (the first) or the Path (the second), a Kind
// is the kind, an error is the cause, and a msg(..) value is the cause's
// text. A cause that is itself an *Error lends its Kind when none is given.
func E(args ...any) error {
	e := &Error{}
	for _, a := range args {
		switch a := a.(type) {
		case string:
			if e.Op == "" {
				e.Op = a
			} else {
				e.Path = a
			}
		case Kind:
			e.Kind = a
		case msg:
			e.Err = errors.New(string(a))
		case error:
			e.Err = a
		}
	}
	if e.Kind == 0 {
		var inner *Error
		if errors.As(e.Err, &inner) {
			e.Kind = inner.Kind
		} else {
			e.Kind = kindFromErr(e.Err)
		}
	}
	return e
}

// msg is free text given to E as the cause.
type msg string

// Msgf formats the cause of an error for E.
func Msgf(format string, args ...any) msg { return msg(fmt.Sprintf(format, args...)) }

func kindFromErr(err error) Kind {
	switch {
	case err == nil:
		return Other
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return NotExist
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return Permission
	case errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EBUSY):
		return Busy
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.EISDIR):
		return Invalid
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	}
	return Other
}

// Error returns "op: path: cause", omitting empty parts; with no cause it
// names the kind.
func (e *Error) Error() string {
	var b strings.Builder
	add := func(s string) {
		if s == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(s)
	}
	add(e.Op)
	add(e.Path)
	if e.Err != nil {
		var inner *Error
		if errors.As(e.Err, &inner) && inner.Op == e.Op {
			// Avoid "op: op: ..." when an error is wrapped by its own op.
			add(strings.TrimPrefix(inner.Error(), e.Op+": "))
		} else {
			add(causeText(e.Err))
		}
	} else {
		add(e.Kind.String())
	}
	return b.String()
}

// causeText strips the Go-specific prefixes of os errors ("open /x: ...")
// that would reveal host paths.
func causeText(err error) string {
	var pe interface{ Unwrap() error }
	if errors.As(err, &pe) {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return errno.Error()
		}
	}
	return err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errno maps the kind to an errno (see the contract's table).
func (e *Error) Errno() syscall.Errno {
	// A precise errno from the cause wins for filesystem errors.
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		switch errno {
		case syscall.ENOTDIR, syscall.EISDIR, syscall.EEXIST, syscall.ENOTEMPTY,
			syscall.EXDEV, syscall.ENAMETOOLONG, syscall.ENOSPC, syscall.EROFS, syscall.EPERM,
			syscall.ELOOP, syscall.EOPNOTSUPP:
			return errno
		}
	}
	return e.Kind.Errno()
}

// Code returns the syscall code for err: its Kind if it is an *Error.
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return int(e.Kind)
	}
	return int(kindFromErr(err))
}
