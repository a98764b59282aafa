package local_test

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// A piped exec (process.exec.pipe) is a long-lived peer over its stdin
// and stdout: lines go both ways while it runs, as the session's user, in
// its sandbox; the session is busy meanwhile; stdout ends when the
// command ends (stopped, or its stdin closed), and its receipt keeps its
// stderr.
func TestExecPipe(t *testing.T) {
	needSandbox(t)
	k, _, alice, bob := newKernel(t)
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
	ctx := context.Background()
	as := func(id *kernel.Identity) *kernel.Caller { return &kernel.Caller{Identity: id} }

	// bob cannot pipe into alice's session.
	if _, err := kernel.Do(ctx, k.Kernel, as(bob), abi.ProcessExecPipe, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"cat"}}); abi.KindOf(err) != abi.NotExist {
		t.Fatalf("bob's pipe into alice's session: %v", err)
	}
	// An echo server: each line read is answered with the uid and the line.
	p, err := kernel.Do(ctx, k.Kernel, as(alice), abi.ProcessExecPipe, &abi.ExecArgs{SessionID: s.SessionID,
		Argv: []string{"sh", "-c", `echo started >&2; while read l; do echo "$(id -u) $l"; done; echo bye >&2`}})
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(p.Stdout())
	for _, l := range []string{"one", "two"} {
		if _, err := io.WriteString(p.Stdin(), l+"\n"); err != nil {
			t.Fatal(err)
		}
		got, err := out.ReadString('\n')
		if err != nil || got != "1000 "+l+"\n" {
			t.Fatalf("answer to %q: %q, %v", l, got, err)
		}
	}
	// The session is busy: one exec at a time.
	if _, err := kernel.Do(ctx, k.Kernel, as(alice), abi.ProcessExec, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"true"}}); abi.KindOf(err) != abi.Busy {
		t.Fatalf("an exec beside the pipe: %v", err)
	}
	if p.Receipt() != nil {
		t.Fatal("a receipt before the end")
	}
	// Closing stdin ends it; stdout ends; the receipt keeps stderr.
	p.Stdin().Close()
	if rest, err := io.ReadAll(out); err != nil || len(rest) != 0 {
		t.Fatalf("after stdin's close: %q, %v", rest, err)
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatal("the piped exec did not end")
	}
	r := p.Receipt()
	if r == nil || r.Status != abi.ExecOK || r.ExitCode != 0 || text(r.Stderr) != "started\nbye\n" || r.Stdout != nil && text(r.Stdout) != "" {
		t.Fatalf("receipt %+v stderr %q", r, text(r.Stderr))
	}

	// Stop ends a command that does not read its stdin; stdout ends at once.
	p, err = kernel.Do(ctx, k.Kernel, as(alice), abi.ProcessExecPipe, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := io.ReadAll(p.Stdout()); read <- err }()
	p.Stop()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("stdout after Stop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("stdout did not end after Stop")
	}
	<-p.Done()
	if r := p.Receipt(); r.Status != abi.ExecSignaled {
		t.Fatalf("receipt after Stop: %+v", r)
	}
	// A piped exec takes its stdin from its caller, not a blob.
	if _, err := kernel.Do(ctx, k.Kernel, as(alice), abi.ProcessExecPipe, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"cat"}, StdinRef: "sha256:00"}); abi.KindOf(err) != abi.Invalid || !strings.Contains(err.Error(), "stdin_ref") {
		t.Fatalf("a pipe with stdin_ref: %v", err)
	}
}
