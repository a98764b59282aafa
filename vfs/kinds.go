package vfs

import (
	"context"
	"hash/fnv"
	"io/fs"
	"os"
	"syscall"
)

// Want is the access an operation needs.
type Want uint8

const (
	WantRead  Want = 4
	WantWrite Want = 2
	WantExec  Want = 1
)

// WantOf returns the access that open flags need.
func WantOf(flags int) Want {
	var w Want
	switch flags & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		w = WantRead
	case os.O_WRONLY:
		w = WantWrite
	default:
		w = WantRead | WantWrite
	}
	if flags&os.O_TRUNC != 0 {
		w |= WantWrite
	}
	return w
}

// Meta supplies a synthetic node's attributes and decides who may use it.
// The tree's owner implements it; the node kinds in this package call it on
// every Attr and Open.
type Meta interface {
	Attr(ctx context.Context, cred Cred) (Attr, error)
	// Access returns nil if cred may use the node as want says, else an
	// error (normally one whose Errno is EACCES).
	Access(ctx context.Context, cred Cred, want Want) error
}

// openRead is the check at the open of a read-only file: flags must not ask
// for writing (ErrReadOnly) and cred must be allowed to read m.
func openRead(ctx context.Context, m Meta, cred Cred, flags int) error {
	if WantOf(flags)&WantWrite != 0 {
		return ErrReadOnly
	}
	return m.Access(ctx, cred, WantRead)
}

// PathIno returns a stable inode number for a synthetic path. The top bit is
// set so that it never collides with the inode numbers of real files.
func PathIno(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64() | 1<<63
}

// MaxLine is the longest line a ctl or call file accepts.
const MaxLine = 1 << 20

// MaxCallBacklog is how many requests one call handle holds that are not
// yet answered or whose answers are not yet read.
const MaxCallBacklog = 64

// ErrCallBacklog is returned by a write to a call handle that holds
// MaxCallBacklog requests: read some answers first.
var ErrCallBacklog = Errorf(syscall.EAGAIN, "too many requests: read the answers to the earlier ones first")

// ErrLineTooLong is returned for a ctl or call line over MaxLine bytes.
var ErrLineTooLong = Errorf(syscall.EINVAL, "line too long: a ctl or call line may be at most 1 MiB")

// ModeOf is a convenience for building Attr modes.
func ModeOf(dir bool, perm fs.FileMode) fs.FileMode {
	if dir {
		return fs.ModeDir | perm
	}
	return perm
}
