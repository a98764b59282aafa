package ninep

// The calls of a RemoteDir to its 9P client, and their errors: a call
// that waits for the client, the connection or ctx, whichever ends
// first; an Rerror's text as the tree reports it, and its errno.

import (
	"context"
	"errors"
	"strings"
	"syscall"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/vfs"
)

// connErr reports whether err, returned by the 9fans client, is a failure
// of the connection rather than an Rerror or a refusal of the client's own
// (or of the tree's: a refusal).
func connErr(err error) bool {
	if err == nil {
		return false
	}
	var ce client.Error
	var pe plan9.ProtocolError
	var rf refusal
	return !errors.As(err, &ce) && !errors.As(err, &pe) && !errors.As(err, &rf)
}

// refusal is an answer of the server that the tree refuses (a listing too
// long): the call's error, not the connection's.
type refusal struct{ err error }

func (e refusal) Error() string { return e.err.Error() }
func (e refusal) Unwrap() error { return e.err }

// result is what one client call returned.
type result[T any] struct {
	v   T
	err error
}

// do runs fn, a call of the 9fans client, and waits for it, for ctx to end,
// or for the connection to fail, whichever is first. The client does not
// wake the callers still waiting when its connection fails (only the one
// reading the connection sees the error), so fn runs in a goroutine of its
// own; a call abandoned this way is left to finish (or to wait for ever on
// a dead connection), and drop is given what a call abandoned by ctx
// returns successfully, to release it.
func do[T any](ctx context.Context, r *remote, fn func() (T, error), drop func(T)) (T, error) {
	var zero T
	if err := r.lost(); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	ch := make(chan result[T], 1)
	go func() {
		v, err := fn()
		if connErr(err) {
			r.kill(err)
		}
		ch <- result[T]{v, err}
	}()
	var cause error
	select {
	case res := <-ch:
		if res.err != nil {
			return res.v, r.mapErr(res.err)
		}
		return res.v, nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-r.dead:
		cause = r.deadErr
	}
	go func() {
		if res := <-ch; res.err == nil && drop != nil {
			drop(res.v)
		}
	}()
	return zero, cause
}

// mapErr turns an error of the client into a vfs error.
func (r *remote) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var rf refusal
	if errors.As(err, &rf) {
		return rf.err
	}
	if connErr(err) {
		if lerr := r.lost(); lerr != nil {
			return lerr
		}
		return vfs.Errorf(syscall.EIO, err.Error())
	}
	text := errText(err.Error())
	return vfs.Errorf(RemoteErrno(text), text)
}

// maxErrText bounds the text of a server's Rerror as the tree reports it.
const maxErrText = 1024

// errText is an Rerror's text as the tree reports it: one line (control
// characters become spaces) of at most maxErrText bytes.
func errText(s string) string {
	s = strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, s)
	if len(s) > maxErrText {
		s = strings.ToValidUTF8(s[:maxErrText-3], "") + "..."
	}
	return s
}

// remoteErrnos maps words of Rerror texts to errnos, most specific first.
var remoteErrnos = []struct {
	text  string
	errno syscall.Errno
}{
	{"not a directory", syscall.ENOTDIR},
	{"is a directory", syscall.EISDIR},
	{"not empty", syscall.ENOTEMPTY},
	{"does not exist", syscall.ENOENT},
	{"no such", syscall.ENOENT},
	{"not found", syscall.ENOENT},
	{"already exists", syscall.EEXIST},
	{"file exists", syscall.EEXIST},
	{"exists", syscall.EEXIST},
	{"permission denied", syscall.EACCES},
	{"access denied", syscall.EACCES},
	{"read-only", syscall.EACCES},
	{"write-only", syscall.EACCES},
	{"not permitted", syscall.EPERM},
	{"cross-device", syscall.EXDEV},
	{"name too long", syscall.ENAMETOOLONG},
	{"too long", syscall.EINVAL},
	{"no space", syscall.ENOSPC},
	{"not supported", syscall.ENOTSUP},
	{"not implemented", syscall.ENOTSUP},
	{"nothing to read yet", syscall.EAGAIN},
	{"temporarily unavailable", syscall.EAGAIN},
	{"too many", syscall.EAGAIN},
	{"interrupted", syscall.EINTR},
	{"timed out", syscall.ETIMEDOUT},
	{"offline", syscall.EHOSTDOWN},
	{"host is down", syscall.EHOSTDOWN},
	{"invalid", syscall.EINVAL},
	{"malformed", syscall.EINVAL},
	{"unknown", syscall.EINVAL},
	{"bad ", syscall.EINVAL},
}

// RemoteErrno reads the errno of a 9P Rerror text (9P2000 carries none):
// a text that ends with an errno's strerror (": invalid argument", which
// our server adds to every error that has an errno, see errorText) is
// that errno; else it is guessed from the words: "file does not exist"
// and "no such file" are ENOENT, "permission denied" EACCES, "file
// exists" EEXIST, "unknown verb" EINVAL, and so on; a text it does not
// know is EIO.
func RemoteErrno(text string) syscall.Errno {
	if e, ok := errnoOfEnd(text); ok {
		return e
	}
	t := strings.ToLower(text)
	for _, e := range remoteErrnos {
		if strings.Contains(t, e.text) {
			return e.errno
		}
	}
	return syscall.EIO
}
