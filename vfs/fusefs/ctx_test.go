package fusefs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/vfs"
)

// TestWriteNotInterrupted: a signal to a process writing a ctl file (the
// kernel sends INTERRUPT, as it does for the Go runtime's SIGURG) does
// not cancel the command it runs.
func TestWriteNotInterrupted(t *testing.T) {
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	ctl := &vfs.Ctl{Meta: meta("/ctl", false, 0o777), Exec: func(ctx context.Context, cred vfs.Cred, line string) (string, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
		ended <- ctx.Err()
		return "", ctx.Err()
	}}
	mnt := mountRoot(t, vfs.NewDir(meta("/", true, 0o777), vfs.DirEntry{Name: "ctl", Node: ctl}))
	cmd := exec.Command("sh", "-c", `trap 'echo trapped >&2' USR1; echo go > "$1"`, "sh", filepath.Join(mnt, "ctl"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-started
	time.Sleep(50 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGUSR1)
	if err := <-ended; err != nil {
		t.Fatalf("the command's context ended (%v) on a signal to its writer", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the write failed: %v", err)
	}
}
