package main_test

import (
	"strings"
	"testing"
	"time"
)

// Processes talk to each other, end to end with the offline model: mail
// and a call through /proc/<pid>/ctl over the mount, the call's reply and
// the ipc file; a delegation and a watch through the gsv CLI; a send
// through /sys/call over 9P; cross-owner refused.
func TestE2EIPC(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(uid int, args ...string) string {
		t.Helper()
		r := gsvAs(uid, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %v: %v", args, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	a := gsv(aliceHost, "spawn", "task", "--label", "manager")
	b := gsv(aliceHost, "spawn", "task", "--label", "worker")
	bobs := gsv(bobHost, "spawn", "task")
	M := d.mnt
	as := func(script string, args ...string) shResult { return d.shAs(aliceHost, script, args...) }
	waitText := func(what, file, want string) string {
		t.Helper()
		var last shResult
		for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			last = as(`cat "$1"`, file)
			if last.code == 0 && strings.Contains(last.stdout, want) {
				return last.stdout
			}
		}
		t.Fatalf("%s: %s never showed %q: %v", what, file, want, last)
		return ""
	}

	// Mail: b sees a process.message from a.
	if r := as(`echo "mail $2 please review ~/notes.md" > "$1/proc/$3/ctl"`, M, b, a); r.code != 0 {
		t.Fatalf("mail: %v", r)
	}
	h := waitText("the mail", M+"/proc/"+b+"/conversations/default/history", `"kind":"process.message"`)
	if !strings.Contains(h, `"pid":"`+a+`"`) || !strings.Contains(h, "please review ~/notes.md") {
		t.Fatalf("b's history: %s", h)
	}

	// A call: accepted at once, answered later into a's conversation.
	if r := as(`echo "call $2 timeout=60000 summarize ~/notes.md" > "$1/proc/$3/ctl"`, M, b, a); r.code != 0 {
		t.Fatalf("call: %v", r)
	}
	ipc := waitText("the call's reply", M+"/proc/"+a+"/ipc", "replied")
	if !strings.Contains(ipc, b) || !strings.Contains(ipc, " out ") {
		t.Fatalf("a's ipc file: %s", ipc)
	}
	tr := waitText("the reply in a's transcript", M+"/proc/"+a+"/conversations/default/transcript", "ipc.reply from process "+b)
	if !strings.Contains(tr, "summarize ~/notes.md") { // the offline model echoes the call it answered
		t.Fatalf("a's transcript: %s", tr)
	}

	// Cross-owner: a's ctl may not reach bob's process, which is, for
	// alice, a pid that does not exist; the error comes from the write.
	if r := d.shAs(aliceHost, `/bin/echo "mail $2 hi" > "$1/proc/$3/ctl"`, M, bobs, a); r.code == 0 || errnoOf(r.stderr) != 2 /* ENOENT */ {
		t.Fatalf("cross-owner mail: %v", r)
	}
	if r := gsvAs(aliceHost, env, "ipc", "call", "--from", a, bobs, "hi"); r.code == 0 || !strings.Contains(r.stderr, bobs+": no such process (404)") {
		t.Fatalf("cross-owner call: %v", r)
	}

	// A delegation through the CLI: a worker, child of a, answers.
	out := gsv(aliceHost, "ipc", "delegate", "--from", a, "--label", "flaky-hunter", "find", "the", "flaky", "test")
	f := strings.Fields(out)
	if len(f) < 3 || f[1] != "worker" {
		t.Fatalf("gsv ipc delegate: %q", out)
	}
	callID, worker := f[0], f[2]
	if st := gsv(aliceHost, "call", "proc.status", `{"pid":"`+worker+`"}`); !strings.Contains(st, `"parent": "`+a+`"`) || !strings.Contains(st, "flaky-hunter") {
		t.Fatalf("the worker: %s", st)
	}
	waitText("the delegation's answer", M+"/proc/"+a+"/ipc", callID)
	for deadline := time.Now().Add(liveness); ; time.Sleep(50 * time.Millisecond) {
		if l := gsv(aliceHost, "ipc", "list", "--pid", a); strings.Contains(l, callID) && strings.Contains(l[strings.Index(l, callID):], "replied") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delegation never replied: %s", gsv(aliceHost, "ipc", "list", "--pid", a))
		}
	}

	// A watch through the CLI: the next run of b that finishes is told
	// to a, once.
	wid := gsv(aliceHost, "watch", "--from", a, "proc.run.finished", b)
	if !strings.HasPrefix(wid, "watch_") || !strings.Contains(gsv(aliceHost, "watch", "--list", "--from", a), wid) {
		t.Fatalf("gsv watch: %q", wid)
	}
	if r := as(`echo 'one more thing' > "$1/proc/$2/conversations/default/in"`, M, b); r.code != 0 {
		t.Fatalf("send to b: %v", r)
	}
	waitText("the watched signal", M+"/proc/"+a+"/conversations/default/transcript", "signal proc.run.finished from process "+b)
	if l := gsv(aliceHost, "watch", "--list", "--from", a); strings.Contains(l, wid) {
		t.Fatalf("the once-watch is still listed: %s", l)
	}

	// Over 9P: root names alice's process as the source.
	var sent struct {
		RunID string `json:"runId"`
	}
	mustOK(t, call9p(t, root, "proc.ipc.send", map[string]any{"pid": b, "sourcePid": a, "message": "over nine p"}), &sent)
	if sent.RunID == "" {
		t.Fatalf("proc.ipc.send over 9P: %+v", sent)
	}
	waitText("the 9P mail", M+"/proc/"+b+"/conversations/default/history", "over nine p")
}
