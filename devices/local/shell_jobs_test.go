package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
)

// shellCall calls shell.exec as id and returns its data or its error.
func shellCall(ctx context.Context, k *env, id *kernel.Identity, a *abi.ShellExecArgs) (map[string]any, error) {
	res, err := k.Call(ctx, &kernel.Caller{Identity: id}, "shell.exec", a)
	if err != nil {
		return nil, err
	}
	return asMap(res), nil
}

// liveness bounds every wait for something that must happen: a guard
// against a hang that holds on a 2-core machine at load 10, never a
// measure of speed.
const liveness = time.Minute

// gateWait is shell that waits until the test opens its gate (openGate):
// a command that ends when the test says, not after a sleep that a loaded
// machine may outlast.
const gateWait = "while [ ! -e gate ]; do sleep 0.02; done"

// openGate lets root's commands waiting in gateWait go on.
func openGate(t *testing.T, k *env) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(k.dataPath, "home/root/gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitCond polls cond until it holds, or fails the test after liveness.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(liveness); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, liveness)
		}
	}
}

// pollUntilDone polls session sid as id until its final result, and
// returns it with the output of every poll joined.
func pollUntilDone(t *testing.T, k *env, id *kernel.Identity, sid string) (map[string]any, string) {
	t.Helper()
	var all strings.Builder
	for deadline := time.Now().Add(liveness); time.Now().Before(deadline); {
		r, err := shellCall(context.Background(), k, id, &abi.ShellExecArgs{SessionID: sid})
		if err != nil {
			t.Fatalf("poll %s: %v", sid, err)
		}
		all.WriteString(r["output"].(string))
		if r["sessionId"] != sid {
			t.Fatalf("poll %s: result names %v", sid, r["sessionId"])
		}
		if r["status"] != "running" {
			return r, all.String()
		}
	}
	t.Fatalf("session %s did not end", sid)
	return nil, ""
}

// requireUnknown checks that err is the 404 of an unknown session sid.
func requireUnknown(t *testing.T, err error, sid string) {
	t.Helper()
	var ke *abi.Error
	if !errors.As(err, &ke) || ke.Kind != abi.NotExist || err.Error() != "shell.exec: Unknown shell session: "+sid {
		t.Fatalf("session %s: err = %v, want a 404 Unknown shell session", sid, err)
	}
}

// background:true returns at once with the session; polls return the
// output piece by piece and then the final result, once.
func TestShellBackgroundPoll(t *testing.T) {
	k, root, _, _ := newKernel(t)
	// The command ends only once the test opens its gate: a start that
	// waited for it would wait the whole 2 min budget.
	k.d.SetShellLimits(0, 2*time.Minute)
	start := time.Now()
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo one; " + gateWait + "; echo two", Background: true})
	if el := time.Since(start); el > liveness {
		t.Fatalf("a background start took %v", el)
	}
	openGate(t, k)
	sid, _ := r["sessionId"].(string)
	if r["status"] != "running" || !regexp.MustCompile(`^sh_[a-z0-9]+$`).MatchString(sid) || r["output"] != "" {
		t.Fatalf("background start: %v", r)
	}
	if _, ok := r["exitCode"]; ok {
		t.Fatalf("running has an exit code: %v", r)
	}
	fin, all := pollUntilDone(t, k, root, sid)
	if fin["status"] != "completed" || fin["exitCode"] != 0 || all != "one\ntwo\n" {
		t.Fatalf("final %v, output %q", fin, all)
	}
	_, err := shellCall(context.Background(), k, root, &abi.ShellExecArgs{SessionID: sid})
	requireUnknown(t, err, sid)
}

// A start waits up to the wait budget, then returns running with the
// output so far; a command done within it returns its final result and
// no session.
func TestShellWaitBudget(t *testing.T) {
	k, root, _, _ := newKernel(t)
	k.d.SetShellLimits(0, 300*time.Millisecond)
	start := time.Now()
	// The command ends only once the test opens its gate: the start
	// returns at the budget, running, with what was written by then.
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo first; " + gateWait + "; echo second"})
	if el := time.Since(start); el < 300*time.Millisecond || el > liveness {
		t.Fatalf("start returned after %v", el)
	}
	sid, _ := r["sessionId"].(string)
	if r["status"] != "running" || sid == "" || !strings.HasPrefix("first\n", r["output"].(string)) {
		t.Fatalf("start: %v", r)
	}
	openGate(t, k)
	fin, all := pollUntilDone(t, k, root, sid)
	if all = r["output"].(string) + all; fin["status"] != "completed" || all != "first\nsecond\n" {
		t.Fatalf("final %v, output %q", fin, all)
	}
	k.d.SetShellLimits(0, 0) // the default budget, for a command done within it
	r = shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo quick"})
	if _, ok := r["sessionId"]; ok || r["status"] != "completed" || r["output"] != "quick\n" {
		t.Fatalf("quick: %v", r)
	}
}

// Non-empty input is written to a background command's stdin; a
// foreground command's stdin is /dev/null; an ended command's is closed.
func TestShellStdin(t *testing.T) {
	k, root, _, _ := newKernel(t)
	k.d.SetShellLimits(0, 2*time.Second)
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "cat", Background: true})
	sid := r["sessionId"].(string)
	for _, line := range []string{"hello\n", "again\n"} {
		r, err := shellCall(context.Background(), k, root, &abi.ShellExecArgs{SessionID: sid, Input: line})
		if err != nil || r["status"] != "running" || r["output"] != line {
			t.Fatalf("write %q: %v %v", line, r, err)
		}
	}
	k.d.SetShellLimits(0, 100*time.Millisecond)
	r = shellExec(t, k, root, &abi.ShellExecArgs{Input: "read x; " + gateWait + "; echo got $x; exit 2", Background: true})
	sid2 := r["sessionId"].(string)
	if r, err := shellCall(context.Background(), k, root, &abi.ShellExecArgs{SessionID: sid2, Input: "yes\n"}); err != nil || r["status"] != "running" {
		t.Fatalf("write yes: %v %v", r, err)
	}
	// Once the command has ended, writing more is a 409 and leaves the
	// result to read.
	openGate(t, k)
	waitCond(t, "the command's end", func() bool { return k.d.ShellJobs()[sid2] })
	_, err := shellCall(context.Background(), k, root, &abi.ShellExecArgs{SessionID: sid2, Input: "more\n"})
	if abi.KindOf(err) != abi.Busy {
		t.Fatalf("write to an ended command: %v", err)
	}
	fin, all := pollUntilDone(t, k, root, sid2)
	if fin["status"] != "failed" || fin["exitCode"] != 2 || fin["error"] != "exit code 2" || !strings.HasSuffix(all, "got yes\n") {
		t.Fatalf("read: %v %q", fin, all)
	}
	// A foreground command, still running after the budget: stdin is /dev/null.
	r = shellExec(t, k, root, &abi.ShellExecArgs{Input: "sleep 600"})
	_, err = shellCall(context.Background(), k, root, &abi.ShellExecArgs{SessionID: r["sessionId"].(string), Input: "x\n"})
	if abi.KindOf(err) != abi.Invalid || !strings.Contains(err.Error(), "/dev/null") {
		t.Fatalf("write to a foreground command: %v", err)
	}
}

// A timed-out session fails with "Command timed out" and its output; a
// non-zero exit fails with its output and exit code.
func TestShellSessionEnds(t *testing.T) {
	k, root, _, _ := newKernel(t)
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo hi; sleep 600", TimeoutMs: 1500, Background: true})
	fin, all := pollUntilDone(t, k, root, r["sessionId"].(string))
	if fin["status"] != "failed" || fin["error"] != "Command timed out" || all != "hi\n" {
		t.Fatalf("timeout: %v %q", fin, all)
	}
	if _, ok := fin["exitCode"]; ok {
		t.Fatalf("timed out with an exit code: %v", fin)
	}
	r = shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo out; exit 3", Background: true})
	fin, all = pollUntilDone(t, k, root, r["sessionId"].(string))
	if fin["status"] != "failed" || fin["exitCode"] != 3 || fin["error"] != "exit code 3" || all != "out\n" {
		t.Fatalf("exit 3: %v %q", fin, all)
	}
}

// Cancelling a poll leaves the command running and its output unread.
func TestShellPollCancel(t *testing.T) {
	k, root, _, _ := newKernel(t)
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: gateWait + "; echo end", Background: true})
	sid := r["sessionId"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := shellCall(ctx, k, root, &abi.ShellExecArgs{SessionID: sid}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled poll: %v", err)
	}
	openGate(t, k)
	fin, all := pollUntilDone(t, k, root, sid)
	if fin["status"] != "completed" || all != "end\n" {
		t.Fatalf("after a cancelled poll: %v %q", fin, all)
	}
}

// A session is its caller's: another user's call on it is the same 404
// as an unknown one; root may poll any.
func TestShellSessionOwner(t *testing.T) {
	k, root, alice, bob := newKernel(t)
	who := func(id *kernel.Identity) local.Who {
		return local.Who{Identity: id, Uid: id.Uid, Username: id.Username, Home: id.Home, Cwd: id.Home}
	}
	// alice's command runs in a sandbox of hers.
	r, err := k.d.Exec(context.Background(), who(alice), &abi.ShellExecArgs{Input: "cat", Background: true})
	if err != nil || r.Status != "running" {
		t.Fatalf("alice's start: %+v %v", r, err)
	}
	sid := r.SessionID
	for _, a := range []*abi.ShellExecArgs{{SessionID: sid}, {SessionID: sid, Input: "bob\n"}} {
		_, err := k.d.Exec(context.Background(), who(bob), a)
		requireUnknown(t, abi.WithOp("shell.exec", err), sid)
	}
	got, err := k.d.Exec(context.Background(), who(alice), &abi.ShellExecArgs{SessionID: sid, Input: "alice\n"})
	if err != nil || got.Output != "alice\n" {
		t.Fatalf("alice's write: %+v %v", got, err)
	}
	got, err = k.d.Exec(context.Background(), who(root), &abi.ShellExecArgs{SessionID: sid, Input: "root\n"})
	if err != nil || got.Output != "root\n" {
		t.Fatalf("root's write: %+v %v", got, err)
	}
}

// A session not updated for the TTL is removed and its command killed,
// and so is a finished one never read.
func TestShellSessionExpiry(t *testing.T) {
	k, root, _, _ := newKernel(t)
	k.d.SetShellLimits(300*time.Millisecond, 0)
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "echo $$ > pgid; sleep 600", Background: true})
	sid := r["sessionId"].(string)
	pgid := readPgid(t, filepath.Join(k.dataPath, "home/root"))
	r = shellExec(t, k, root, &abi.ShellExecArgs{Input: "true", Background: true})
	done := r["sessionId"].(string)
	waitGroupGone(t, pgid, liveness)
	waitCond(t, "both sessions' expiry", func() bool { return len(k.d.ShellJobs()) == 0 })
	for _, id := range []string{sid, done} {
		_, err := shellCall(context.Background(), k, root, &abi.ShellExecArgs{SessionID: id})
		requireUnknown(t, err, id)
	}
}

// Polls keep a session alive past the TTL.
func TestShellSessionTouched(t *testing.T) {
	k, root, _, _ := newKernel(t)
	// (A TTL that holds between two polls at load 10.)
	k.d.SetShellLimits(1500*time.Millisecond, 100*time.Millisecond)
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "sleep 4; echo late", Background: true})
	fin, all := pollUntilDone(t, k, root, r["sessionId"].(string))
	if fin["status"] != "completed" || all != "late\n" {
		t.Fatalf("polled past the TTL: %v %q", fin, all)
	}
}

// A background session's output over the cap keeps its tail.
func TestShellSessionTail(t *testing.T) {
	k, root, _, _ := newKernel(t)
	r := shellExec(t, k, root, &abi.ShellExecArgs{Input: "seq 1 100000", Background: true})
	sid := r["sessionId"].(string)
	waitCond(t, "seq's end", func() bool { return k.d.ShellJobs()[sid] }) // all output in, none read
	fin, all := pollUntilDone(t, k, root, sid)
	if fin["status"] != "completed" || fin["truncated"] != true || !strings.HasPrefix(all, "[... ") || !strings.HasSuffix(all, "\n99999\n100000\n") {
		t.Fatalf("tail: %v ...%q", fin["truncated"], all[max(0, len(all)-40):])
	}
	if _, rest, _ := strings.Cut(all, "\n"); len(rest) != local.MaxShellOutput {
		t.Fatalf("kept %d bytes", len(rest))
	}
}

// Close kills the commands of running sessions, background ones too.
func TestShellCloseKillsSessions(t *testing.T) {
	k, root, _, _ := newKernel(t)
	shellExec(t, k, root, &abi.ShellExecArgs{Input: stubbornTree, Background: true})
	pgid := readPgid(t, filepath.Join(k.dataPath, "home/root"))
	start := time.Now()
	k.Close()
	if el := time.Since(start); el > local.ShellKillGrace+liveness { // its processes sleep 600 s
		t.Fatalf("Close took %v", el)
	}
	waitGroupGone(t, pgid, liveness)
}
