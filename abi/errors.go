package abi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Kind classifies an error. Its value is the contract's syscall code; the
// same kind gives the errno a POSIX transport returns (Errno), the text of
// a 9P Rerror (the error's message) and the code of a response frame.
type Kind int

// The kinds of the contract's error table.
const (
	Other          Kind = 500 // anything else
	Invalid        Kind = 400 // bad request, unknown verb, device does not implement
	Permission     Kind = 403 // permission denied, device access denied
	NotExist       Kind = 404 // no such process, conversation, schedule, segment, file
	Busy           Kind = 409 // busy: conversation running, already exists
	SetupRequired  Kind = 425 // setup required
	NotImplemented Kind = 501 // a field or mode of the contract not built yet (NotYet)
	Offline        Kind = 503 // device offline, no active connection
	Timeout        Kind = 504 // device route or IPC timed out
)

// kindTable is the one table of the kinds: the errno a POSIX transport
// returns and the text of an error with no cause. NotImplemented is
// EOPNOTSUPP, not ENOSYS: the FUSE kernel takes ENOSYS from some
// operations (FLUSH, FSYNC) as "never ask again" for the whole mount.
var kindTable = map[Kind]struct {
	errno syscall.Errno
	text  string
}{
	Invalid:        {syscall.EINVAL, "bad request"},
	Permission:     {syscall.EACCES, "permission denied"},
	NotExist:       {syscall.ENOENT, "not found"},
	Busy:           {syscall.EBUSY, "busy"},
	SetupRequired:  {syscall.EAGAIN, "setup required"},
	NotImplemented: {syscall.EOPNOTSUPP, "not supported yet"},
	Offline:        {syscall.EHOSTDOWN, "device offline"},
	Timeout:        {syscall.ETIMEDOUT, "timed out"},
	Other:          {syscall.EIO, "internal error"},
}

// Errno returns the errno of the kind; EIO for a kind not in the table.
func (k Kind) Errno() syscall.Errno {
	if e, ok := kindTable[k]; ok {
		return e.errno
	}
	return syscall.EIO
}

// String returns the kind's text, shown when an error has no cause.
func (k Kind) String() string {
	if e, ok := kindTable[k]; ok {
		return e.text
	}
	return fmt.Sprintf("kind %d", int(k))
}

// Op is the operation an error concerns: a syscall name ("proc.history")
// or another named step ("attach", "frame").
type Op string

// Path is the thing an error concerns: a namespace path, a process or
// schedule id, a config key.
type Path string

// Error is the error value of every syscall: which operation failed (Op),
// on what (Path), how (Kind) and why (Err). Its Error text is what a user
// reads from an err view, a 9P Rerror and a response frame's message.
type Error struct {
	Op   Op
	Path Path
	Kind Kind
	Err  error
}

// E builds an *Error from its arguments, told apart by type as in
// upspin's errors.E: an Op, a Path, a Kind, an error (the cause) and a
// string (the cause's text). A cause that is itself an *Error lends its
// Kind when none is given; a cause that is a syscall.Errno gives the
// matching kind. An argument of any other type is a programming error:
// E reports it in the message rather than dropping it.
func E(args ...any) error {
	e := &Error{}
	for _, a := range args {
		switch a := a.(type) {
		case Op:
			e.Op = a
		case Path:
			e.Path = a
		case Kind:
			e.Kind = a
		case string:
			e.Err = errors.New(a)
		case error:
			e.Err = a
		case nil:
		default:
			e.Err = fmt.Errorf("abi.E: argument of type %T (%v)", a, a)
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

// WithOp returns err as an error of the operation op: an *Error with no Op
// gets op; one of op already is returned as it is; anything else becomes
// the cause of a new *Error of op. A nil err stays nil.
func WithOp(op Op, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e == err {
		if e.Op == op {
			return err
		}
		if e.Op == "" {
			c := *e
			c.Op = op
			return &c
		}
	}
	return E(op, err)
}

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

// Error returns "op: path: cause", leaving out empty parts; with no cause
// it names the kind. A cause of the same op does not repeat it.
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
	add(string(e.Op))
	add(string(e.Path))
	if e.Err != nil {
		var inner *Error
		if errors.As(e.Err, &inner) && inner == e.Err {
			if inner.Op == e.Op && e.Op != "" {
				add(strings.TrimPrefix(inner.Error(), string(e.Op)+": "))
			} else {
				add(inner.Error())
			}
		} else {
			add(CauseText(e.Err))
		}
	} else {
		add(e.Kind.String())
	}
	return b.String()
}

// CauseText returns the text of err. An *os.PathError, *os.LinkError or
// *os.SyscallError in err's chain (which name host paths or calls) gives
// only the text of its own cause; any other error gives err.Error().
func CauseText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return CauseText(pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return CauseText(le.Err)
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return CauseText(se.Err)
	}
	return err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errno maps the error to an errno: a precise errno of a file system cause
// wins, else the kind's.
func (e *Error) Errno() syscall.Errno {
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		switch errno {
		case syscall.ENOTDIR, syscall.EISDIR, syscall.EEXIST, syscall.ENOTEMPTY,
			syscall.EXDEV, syscall.ENAMETOOLONG, syscall.ENOSPC, syscall.EROFS, syscall.EPERM,
			syscall.ELOOP, syscall.EOPNOTSUPP, syscall.ENXIO, syscall.EDQUOT, syscall.EAGAIN:
			return errno
		}
	}
	return e.Kind.Errno()
}

// NotYet is the error for a part of the contract that is not built yet:
// a NotImplemented (501) "not supported yet: <field>", then where it is
// planned (a sentence naming the doc), so that a caller of a seed's field
// learns it is known and coming, never that it is an unknown field.
func NotYet(field, planned string) error {
	return E(NotImplemented, fmt.Sprintf("not supported yet: %s (%s)", field, planned))
}

// Code returns the syscall code of err: its Kind if it is an *Error, else
// the kind its errno or context error implies.
func Code(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return int(e.Kind)
	}
	return int(kindFromErr(err))
}

// KindOf returns the Kind of err (Code as a Kind).
func KindOf(err error) Kind { return Kind(Code(err)) }
