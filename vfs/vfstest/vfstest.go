// Package vfstest is the shared harness of the transports' tests: what a
// test needs to mount a vfs tree with FUSE and use it from a shell, or to
// serve it over 9P on a socket and read it with the 9fans client. It knows
// no transport itself (the transports' own tests import it), so a test
// passes its server's Serve or its mount's directory in.
package vfstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// Logger returns a debug-level logger that writes to t's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Mountable skips the test when FUSE cannot be used here (no /dev/fuse).
func Mountable(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
}

// RunTimeout is how long Run lets a command run before it kills it: a
// guard against a hang that holds on a 2-core machine at load 10.
const RunTimeout = time.Minute

// Run runs the command args with $M set to the mount point mnt (and the C
// locale), and returns its stdout and stderr. A command still running
// after RunTimeout is killed and reported as timed out.
func Run(mnt string, args ...string) (string, string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "M="+mnt, "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), errb.String(), err
	case <-time.After(RunTimeout):
		cmd.Process.Kill()
		<-done
		return out.String(), errb.String(), fmt.Errorf("timed out: %q", args)
	}
}

// Sh runs script with sh -c (after prefix, a command such as setpriv that
// runs it as another user), with $M set to the mount point mnt.
func Sh(mnt, script string, prefix ...string) (string, string, error) {
	return Run(mnt, append(prefix, "sh", "-c", script)...)
}

// Must runs script with Sh and fails the test if it fails; it returns
// the script's stdout.
func Must(t testing.TB, mnt, script string) string {
	t.Helper()
	out, errs, err := Sh(mnt, script)
	if err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", script, err, out, errs)
	}
	return out
}

// ListenUnix listens on a unix socket in a fresh directory under
// os.TempDir (t.TempDir's paths may be too long for a socket); the
// listener and the directory go at cleanup.
func ListenUnix(t testing.TB) net.Listener {
	t.Helper()
	dir, err := os.MkdirTemp("", "vfstest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "9p.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Serve runs serve (a server's Serve loop on l) until the test ends; at
// cleanup it cancels serve's context and fails the test unless serve
// returns context.Canceled within a minute.
func Serve(t testing.TB, l net.Listener, serve func(ctx context.Context, l net.Listener) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Serve returned %v, want context.Canceled", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("Serve did not return after cancel")
		}
	})
}

// ReadFile opens name on fsys for reading and returns all of it, failing
// the test on any error.
func ReadFile(t testing.TB, fsys *client.Fsys, name string) string {
	t.Helper()
	fid, err := fsys.Open(name, plan9.OREAD)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer fid.Close()
	b, err := io.ReadAll(fid)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}
