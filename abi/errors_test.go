package abi

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// errnoOf is the errno a POSIX transport gives err: its Errno().
func errnoOf(err error) syscall.Errno {
	var e *Error
	if errors.As(err, &e) {
		return e.Errno()
	}
	return syscall.EIO
}

func TestErrno(t *testing.T) {
	tests := []struct {
		err   error
		errno syscall.Errno
		code  int
	}{
		{E(Path("x"), Invalid), syscall.EINVAL, 400},
		{E(Path("x"), Permission), syscall.EACCES, 403},
		{E(Path("x"), NotExist), syscall.ENOENT, 404},
		{E(Path("x"), Busy), syscall.EBUSY, 409},
		{E(Path("x"), SetupRequired), syscall.EAGAIN, 425},
		{E(Path("x"), NotImplemented), syscall.EOPNOTSUPP, 501},
		{NotYet("media", "planned"), syscall.EOPNOTSUPP, 501},
		{E(Path("x"), Offline), syscall.EHOSTDOWN, 503},
		{E(Path("x"), Timeout), syscall.ETIMEDOUT, 504},
		{E(Path("x"), errors.New("boom")), syscall.EIO, 500},
		{E(Path("x"), syscall.ENOENT), syscall.ENOENT, 404},
		{E(Path("x"), syscall.ENOTEMPTY), syscall.ENOTEMPTY, 409},
	}
	for _, tt := range tests {
		if got := errnoOf(tt.err); got != tt.errno {
			t.Errorf("%v: errno %v, want %v", tt.err, got, tt.errno)
		}
		if got := Code(tt.err); got != tt.code {
			t.Errorf("%v: code %d, want %d", tt.err, got, tt.code)
		}
	}
	if s := E(Op("sys.config.set"), Path("k"), Permission, "nope").Error(); s != "sys.config.set: k: nope" {
		t.Errorf("text %q", s)
	}
}

// TestWithOp: the dispatcher's naming of an error keeps a cause's own op
// and never repeats its own.
func TestWithOp(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{E(Path("p_1"), NotExist, "no such process"), "proc.history: p_1: no such process"},
		{E(Op("proc.history"), Path("p_1"), NotExist, "no such process"), "proc.history: p_1: no such process"},
		{E(Op("fs.readraw"), Path("/x"), Permission), "proc.history: fs.readraw: /x: permission denied"},
		{errors.New("boom"), "proc.history: boom"},
		{E(Op("cwd"), Path("/x"), syscall.ENOTDIR), "proc.history: cwd: /x: not a directory"},
		{E(Path("p_1"), E(Op("fs.read"), Path("/y"), syscall.ENOENT)), "proc.history: p_1: fs.read: /y: no such file or directory"},
		{E(Path("p_1"), E(Op("proc.history"), Path("/y"), NotExist)), "proc.history: p_1: /y: not found"},
		{E(Path("p_1"), fmt.Errorf("load: %w", fmt.Errorf("row 3: %w", syscall.ENOENT))), "proc.history: p_1: load: row 3: no such file or directory"},
		{E(Path("/x"), &os.PathError{Op: "open", Path: "/host/secret/x", Err: syscall.ENOENT}), "proc.history: /x: no such file or directory"},
		{E(Path("/x"), fmt.Errorf("mkdir: %w", &os.PathError{Op: "mkdir", Path: "/host/x", Err: syscall.EEXIST})), "proc.history: /x: file exists"},
		{E(Path("/x"), &os.LinkError{Op: "rename", Old: "/host/a", New: "/host/b", Err: syscall.EXDEV}), "proc.history: /x: invalid cross-device link"},
		{E(Path("/x"), os.NewSyscallError("fchmod", syscall.EPERM)), "proc.history: /x: operation not permitted"},
	} {
		got := WithOp("proc.history", tc.err)
		if got.Error() != tc.want {
			t.Errorf("WithOp(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if Code(got) != Code(tc.err) {
			t.Errorf("WithOp(%v) code %d, want %d", tc.err, Code(got), Code(tc.err))
		}
	}
	if WithOp("x", nil) != nil {
		t.Error("WithOp of nil is not nil")
	}
	if s := E(42).Error(); s != "abi.E: argument of type int (42)" {
		t.Errorf("a bad argument reads %q", s)
	}
}

// FuzzParseMount: any text parses or is a 400; what parses has a host
// and a guest path and a mode, and its text form parses back the same.
func FuzzParseMount(f *testing.F) {
	for _, s := range []string{"~/proj:/work:rw", "/home/a/x:/x", "host:/srv:/data:ro", ":", "a:b:c:d", "x:/y:rx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMount(s)
		if err != nil {
			if KindOf(err) != Invalid {
				t.Fatalf("ParseMount(%q): %v, want a 400", s, err)
			}
			return
		}
		if m.HostPath == "" || m.GuestPath == "" || (m.Mode != MountRO && m.Mode != MountRW) || strings.Contains(m.GuestPath, ":") {
			t.Fatalf("ParseMount(%q) = %+v", s, m)
		}
		back, err := ParseMount(m.HostPath + ":" + m.GuestPath + ":" + m.Mode)
		if err != nil || back != m {
			t.Fatalf("ParseMount(%q) = %+v; its text parses to %+v, %v", s, m, back, err)
		}
	})
}
