package devices

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// pidIn waits (a minute at most: a liveness guard) for the pid a command
// writes to file.
func pidIn(t *testing.T, file string) int {
	t.Helper()
	var pid int
	waitCond(t, "a pid in "+file, func() bool {
		b, err := os.ReadFile(file)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

// TestChannel: the routed calls of a real device process share its
// connection's one call channel: many at once, a command that runs holds
// up no read, a caller that gives up cancels its own call only (its
// command is killed on the device; the channel goes on), and the
// device's death fails every call waiting at once, with 503, and ends
// the channel's goroutines.
func TestChannel(t *testing.T) {
	e := newDevEnv(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := startSubDevice(t, e, "sub", e.nodeToken(t, e.Alice, "sub"), dir)
	d := e.r.remote("sub")
	if d.ch == nil {
		t.Fatal("the device's connection has no call channel")
	}
	alice := kerneltest.Caller(e.Alice)
	read := func(ctx context.Context) error {
		res, err := kernel.Do(ctx, e.K, alice, abi.FsRead, &abi.FSReadArgs{Target: "sub", Path: "f"})
		if err == nil && (!res.OK || !strings.Contains(res.Content, "hello")) {
			err = errors.New("fs.read answered " + res.Error + res.Content)
		}
		return err
	}
	exec := func(ctx context.Context, input string) error {
		_, err := kernel.Do(ctx, e.K, alice, abi.ShellExec, &abi.ShellExecArgs{Target: "sub", Input: input})
		return err
	}

	t.Run("ManyAtOnce", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- exec(ctx, "echo $$ > p0; exec sleep 600") }()
		pid := pidIn(t, filepath.Join(dir, "p0"))
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- read(context.Background())
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a read beside a running command: %v", err)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the command answered before it was cancelled: %v", err)
		default:
		}
		// The caller gives up: its call fails with its ctx, its command
		// is killed on the device, and the channel goes on.
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call: %v", err)
		}
		waitCond(t, "the cancelled command killed", func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) })
		if err := read(context.Background()); err != nil {
			t.Fatalf("a read after a cancelled call: %v", err)
		}
	})

	t.Run("DeviceDies", func(t *testing.T) {
		const n = 8
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- exec(context.Background(), "echo $$ > d"+strconv.Itoa(i)+"; exec sleep 600") }()
		}
		for i := range n {
			pidIn(t, filepath.Join(dir, "d"+strconv.Itoa(i)))
		}
		dev.Process.Kill()
		deadline := time.After(time.Minute) // a liveness guard: it is at once
		for range n {
			select {
			case err := <-errs:
				if abi.KindOf(err) != abi.Offline {
					t.Fatalf("a call when its device died: %v, want a 503", err)
				}
			case <-deadline:
				t.Fatal("the calls of a dead device still wait after a minute")
			}
		}
		ended := make(chan struct{})
		go func() { d.ch.wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(time.Minute):
			t.Fatal("the channel's goroutines still run a minute after its device died")
		}
	})
}
