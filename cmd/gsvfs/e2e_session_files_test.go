package main_test

// The files of exec sessions, driven by bash through the FUSE mount as
// the host users the daemon maps: /dev/gsv/shell/clone opens a session,
// its ctl starts an exec, wait blocks for the receipt, stdout shows the
// output, a large output is a blob at /var/blobs/sha256/<hex>, and one
// user never sees another's sessions or blobs.

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bashAs runs script with bash -c as the host uid (and gid) with setpriv
// (args are $1...).
func bashAs(uid int, script string, args ...string) shResult {
	u := strconv.Itoa(uid)
	return runCmd("/", nil, nil, "setpriv", append([]string{"--reuid", u, "--regid", u, "--clear-groups", "bash", "-c", script, "bash"}, args...)...)
}

// execReceipt is the part of a process.exec receipt the test reads.
type execReceipt struct {
	ExitCode int    `json:"exit_code"`
	Status   string `json:"status"`
	Stdout   *struct {
		InlineText *struct {
			Text string `json:"text"`
		} `json:"inline_text"`
		Blob *struct {
			BlobRef   string `json:"blob_ref"`
			SizeBytes int64  `json:"size_bytes"`
			Truncated bool   `json:"truncated"`
		} `json:"blob"`
	} `json:"stdout"`
}

func TestE2ESessionFiles(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("exec sessions need bubblewrap (bwrap)")
	}
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	M := d.mnt
	as := func(uid int, script string, args ...string) string {
		t.Helper()
		r := bashAs(uid, script, args...)
		if r.err != nil || r.code != 0 {
			t.Fatalf("%s %q: %v", script, args, r)
		}
		return r.stdout
	}
	// fail runs script as uid, which must fail with errno.
	fail := func(uid int, errno syscall.Errno, script string, args ...string) shResult {
		t.Helper()
		r := bashAs(uid, script, args...)
		if r.code == 0 || errnoOf(r.stderr) != errno {
			t.Fatalf("%s %q: %v, want %v", script, args, r, errno)
		}
		return r
	}
	receipt := func(s string) execReceipt {
		t.Helper()
		var r execReceipt
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("receipt %q: %v", s, err)
		}
		return r
	}

	// alice opens a session through clone with her project mounted
	// read-write, and reads its id back on the same descriptor.
	as(aliceHost, `mkdir "$1/home/alice/proj"`, M)
	sid := strings.TrimSpace(as(aliceHost, `exec 3<>"$1/dev/gsv/shell/clone"; echo 'open network=none mount=/home/alice/proj:/work:rw' >&3; read sid <&3; echo "$sid"`, M))
	if !strings.HasPrefix(sid, "ps_") || strings.ContainsAny(sid, " /") {
		t.Fatalf("clone gave session id %q", sid)
	}
	S := M + "/dev/gsv/shell/" + sid
	if ls := as(aliceHost, `ls "$1/dev/gsv/shell"`, M); ls != "clone\nerr\n"+sid+"\n" {
		t.Fatalf("alice: ls /dev/gsv/shell:\n%s", ls)
	}
	if ls := as(aliceHost, `ls "$1"`, S); ls != "ctl\nerr\nstatus\nstderr\nstdout\nwait\n" {
		t.Fatalf("alice: ls %s:\n%s", S, ls)
	}
	if st := as(aliceHost, `cat "$1/status"`, S); !strings.Contains(st, `"session_id": "`+sid+`"`) ||
		!strings.Contains(st, `"user": "alice"`) || !strings.Contains(st, `"state": "ready"`) || !strings.Contains(st, `"guest_path": "/work"`) {
		t.Fatalf("status:\n%s", st)
	}
	if st := as(aliceHost, `cat "$1/dev/gsv/status"`, M); !strings.Contains(st, "id: gsv\n") || !strings.Contains(st, "online: true\n") ||
		!strings.Contains(st, " process.session.open ") || !strings.Contains(st, "sandbox: bubblewrap") || !strings.Contains(st, "sessions: 1\n") {
		t.Fatalf("/dev/gsv/status:\n%s", st)
	}

	// An exec: its ctl line returns at once, wait gives the receipt,
	// stdout the output; the file it wrote is in alice's home.
	as(aliceHost, `echo 'exec sh -c "echo hi > /work/out.txt; echo done"' > "$1/ctl"`, S)
	if r := receipt(as(aliceHost, `cat "$1/wait"`, S)); r.ExitCode != 0 || r.Status != "ok" {
		t.Fatalf("receipt: %+v", r)
	}
	if w := as(aliceHost, `cat "$1/wait"`, S); !strings.Contains(w, `"exit_code": 0`) {
		t.Fatalf("wait:\n%s", w)
	}
	if out := as(aliceHost, `cat "$1/stdout"`, S); out != "done\n" {
		t.Fatalf("stdout: %q", out)
	}
	if out := as(aliceHost, `cat "$1/stderr"`, S); out != "" {
		t.Fatalf("stderr: %q", out)
	}
	// A copier that trusts the size (tar) copies the output whole.
	if out := as(aliceHost, `set -o pipefail; tar -C "$1" -cf - stdout | tar -xOf - stdout`, S); out != "done\n" {
		t.Fatalf("stdout through tar: %q", out)
	}
	if out := as(aliceHost, `cat "$1/home/alice/proj/out.txt"`, M); out != "hi\n" {
		t.Fatalf("out.txt in alice's home: %q", out)
	}

	// bob sees nothing of alice's session; root sees it.
	if ls := as(bobHost, `ls -a "$1/dev/gsv/shell"`, M); strings.Contains(ls, sid) || ls != ".\n..\nclone\nerr\n" {
		t.Fatalf("bob: ls /dev/gsv/shell:\n%s", ls)
	}
	fail(bobHost, syscall.ENOENT, `ls "$1"`, S)
	fail(bobHost, syscall.ENOENT, `cat "$1/stdout"`, S)
	fail(bobHost, syscall.ENOENT, `echo 'exec true' > "$1/ctl"`, S)
	if ls := as(0, `ls "$1/dev/gsv/shell"`, M); !strings.Contains(ls, sid+"\n") {
		t.Fatalf("root: ls /dev/gsv/shell:\n%s", ls)
	}

	// A 10 MB output is a blob, whose bytes at /var/blobs/sha256/<hex>
	// have that digest; stdout reads the same bytes.
	as(aliceHost, `echo 'exec sh -c "head -c 10000000 /dev/urandom"' > "$1/ctl"`, S)
	r := receipt(as(aliceHost, `cat "$1/wait"`, S))
	if r.ExitCode != 0 || r.Stdout == nil || r.Stdout.Blob == nil || r.Stdout.Blob.SizeBytes != 10_000_000 || r.Stdout.Blob.Truncated {
		t.Fatalf("receipt of the 10 MB exec: %+v", r)
	}
	hex, ok := strings.CutPrefix(r.Stdout.Blob.BlobRef, "sha256:")
	if !ok || len(hex) != 64 {
		t.Fatalf("blob ref %q", r.Stdout.Blob.BlobRef)
	}
	B := M + "/var/blobs/sha256"
	if ls := as(aliceHost, `ls "$1"`, B); ls != hex+"\n" {
		t.Fatalf("alice: ls /var/blobs/sha256:\n%s", ls)
	}
	if out := as(aliceHost, `stat -c %s "$1/$2"; sha256sum < "$1/$2"`, B, hex); out != "10000000\n"+hex+"  -\n" {
		t.Fatalf("alice: the blob's size and digest: %q, want %s", out, hex)
	}
	if out := as(aliceHost, `sha256sum < "$1/stdout"`, S); out != hex+"  -\n" {
		t.Fatalf("alice: the digest of stdout: %q, want %s", out, hex)
	}
	if ls := as(bobHost, `ls "$1"`, B); ls != "" {
		t.Fatalf("bob: ls /var/blobs/sha256:\n%s", ls)
	}
	fail(bobHost, syscall.ENOENT, `cat "$1/$2" > /dev/null`, B, hex)

	// A bad open line fails the write with the errno of its error, and
	// the message is in the directory's err view.
	fail(aliceHost, syscall.EINVAL, `exec 3<>"$1/dev/gsv/shell/clone"; echo 'open network=moon' >&3`, M)
	if msg := as(aliceHost, `cat "$1/dev/gsv/shell/err"`, M); !strings.Contains(msg, "process.session.open") || !strings.Contains(msg, `"moon"`) {
		t.Fatalf("err after a bad open: %q", msg)
	}
	fail(aliceHost, syscall.EINVAL, `echo 'open frob=1' > "$1/dev/gsv/shell/clone"`, M)
	if msg := as(aliceHost, `cat "$1/dev/gsv/shell/err"`, M); !strings.Contains(msg, `unknown option "frob"`) {
		t.Fatalf("err after an unknown option: %q", msg)
	}

	// A reader's signal ends its wait; signal int ends the exec; close
	// ends the session.
	as(aliceHost, `echo 'exec sleep 600' > "$1/ctl"`, S)
	start := time.Now()
	if out := as(aliceHost, `timeout -s INT 1 cat "$1/wait"; echo "rc=$?"`, S); out != "rc=124\n" {
		t.Fatalf("an interrupted wait: %q", out)
	}
	if el := time.Since(start); el > liveness { // (not interrupted, it would wait 10 min)
		t.Fatalf("an interrupted wait took %v", el)
	}
	if st := as(aliceHost, `cat "$1/status"`, S); !strings.Contains(st, `"state": "running"`) {
		t.Fatalf("status while sleep runs:\n%s", st)
	}
	as(aliceHost, `echo 'signal int' > "$1/ctl"`, S)
	if r := receipt(as(aliceHost, `cat "$1/wait"`, S)); r.Status != "signaled" {
		t.Fatalf("receipt after signal int: %+v", r)
	}
	as(aliceHost, `echo close > "$1/ctl"`, S)
	if st := as(aliceHost, `cat "$1/status"`, S); !strings.Contains(st, `"state": "ended"`) {
		t.Fatalf("status after close:\n%s", st)
	}
	fail(aliceHost, syscall.EINVAL, `echo 'signal hup' > "$1/ctl"`, S)
	if msg := as(aliceHost, `cat "$1/err"`, S); !strings.Contains(msg, "process.session.signal") || !strings.Contains(msg, `"hup"`) {
		t.Fatalf("session err: %q", msg)
	}
}
