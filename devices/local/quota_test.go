package local_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
)

// setConfig sets key to val as root.
func setConfig(t *testing.T, k *env, root *kernel.Identity, key, val string) {
	t.Helper()
	if _, err := k.Call(context.Background(), &kernel.Caller{Identity: root}, "sys.config.set",
		&abi.ConfigSetArgs{Key: key, Value: []byte(strconv.Quote(val))}); err != nil {
		t.Fatal(err)
	}
}

func TestParseQuota(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"1", 1, false}, {"512M", 512 << 20, false}, {"10G", 10 << 30, false}, {"2KiB", 2048, false},
		{"3kb", 3072, false}, {"1T", 1 << 40, false}, {"none", 0, false}, {" 7 ", 7, false},
		{"0", 0, true}, {"-1", 0, true}, {"", 0, true}, {"12Q", 0, true}, {"M", 0, true},
		{"99999999999T", 0, true}, {"1.5G", 0, true}, {"NaN", 0, true},
	} {
		got, err := local.ParseQuota(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("ParseQuota(%q) = %d, %v; want %d (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

// A user's sandboxes keep their /tmp (and scratch home) in a tmpfs of
// their tmp quota: a write past it is ENOSPC to that user alone.
func TestQuotaTmp(t *testing.T) {
	needSandbox(t)
	k, root, alice, bob := newKernel(t)
	setConfig(t, k, root, "users/1000/quota/tmp", "1M")
	fill := "head -c 3000000 /dev/zero > /tmp/big; echo rc=$?; head -c 3000000 /dev/zero > ~/big; echo rc=$?"
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
	r := execIn(t, k, alice, s.SessionID, "sh", "-c", fill)
	if out := text(r.Stdout); out != "rc=1\nrc=1\n" || !strings.Contains(text(r.Stderr), "No space left on device") {
		t.Fatalf("alice fills her tmp past its quota: %q %q", out, text(r.Stderr))
	}
	// Her shell.exec shares the same scratch.
	res, err := k.Call(context.Background(), &kernel.Caller{Identity: alice}, "shell.exec", &abi.ShellExecArgs{Input: "head -c 3000000 /dev/zero > /tmp/big"})
	if err != nil || !strings.Contains(res.(*abi.ShellExecResult).Output, "No space left on device") {
		t.Fatalf("alice's shell.exec fills /tmp past her quota: %+v %v", res, err)
	}
	// bob's sandboxes have the default, and are not touched by hers.
	s = openSession(t, k, bob, abi.ProcessLocalTarget{NetworkMode: "none"})
	r = execIn(t, k, bob, s.SessionID, "sh", "-c", fill)
	if out := text(r.Stdout); out != "rc=0\nrc=0\n" {
		t.Fatalf("bob's tmp: %q %q", out, text(r.Stderr))
	}
}

// Exec output kept for a user (running captures, blobs held by their
// sessions) stays under their output quota: past it, a stream is cut and
// the receipt says why; forgotten sessions give the room back.
func TestQuotaOutput(t *testing.T) {
	needSandbox(t)
	k, root, alice, bob := newKernel(t)
	k.d.SetSessionRetention(200 * time.Millisecond)
	setConfig(t, k, root, "users/1000/quota/output", "300000")
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
	r := execIn(t, k, alice, s.SessionID, "head", "-c", "200000", "/dev/zero")
	if r.Stdout == nil || r.Stdout.Blob == nil || r.Stdout.Blob.SizeBytes != 200000 || r.ErrorCode != "" {
		t.Fatalf("a first blob within the quota: %+v", r)
	}
	r = execIn(t, k, alice, s.SessionID, "head", "-c", "200000", "/dev/urandom")
	if r.Status != abi.ExecOK || r.ErrorCode != "output_quota" || !strings.Contains(r.Error, "quota of 300000 bytes") ||
		r.Stdout == nil || r.Stdout.Blob == nil || r.Stdout.Blob.SizeBytes != 100000 || !r.Stdout.Blob.Truncated {
		t.Fatalf("a second output past the quota: %+v %+v", r, r.Stdout)
	}
	// bob's quota is his own.
	sb := openSession(t, k, bob, abi.ProcessLocalTarget{NetworkMode: "none"})
	if r := execIn(t, k, bob, sb.SessionID, "head", "-c", "500000", "/dev/urandom"); r.ErrorCode != "" || r.Stdout.Blob.SizeBytes != 500000 {
		t.Fatalf("bob's output: %+v", r)
	}
	// Once alice's session is forgotten, its blobs' room is hers again.
	if _, err := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "kill"}); err != nil {
		t.Fatal(err)
	}
	// (Each try in a session of its own, killed if it was cut: what it
	// kept goes with it.)
	deadline := time.Now().Add(liveness)
	for {
		s = openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
		r = execIn(t, k, alice, s.SessionID, "head", "-c", "250000", "/dev/urandom")
		if r.ErrorCode == "" && r.Stdout.Blob.SizeBytes == 250000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the room of a forgotten session: %+v", r)
		}
		k.Call(context.Background(), k.KernelCaller(), "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "kill"})
		time.Sleep(50 * time.Millisecond) // until the janitor forgets the ended sessions
	}
}

// A home's quota binds the daemon's writes to it (EDQUOT, for its owner
// alone); a sandbox that wrote past it makes the next daemon write count
// the home again and find it over, and the next sandbox gets it
// read-only.
func TestQuotaHome(t *testing.T) {
	needSandbox(t)
	k, root, alice, bob := newKernel(t)
	setConfig(t, k, root, "config/quota/home", "10K")
	setConfig(t, k, root, "users/1001/quota/home", "none") // bob: no limit
	write := func(id *kernel.Identity, p string, n int) string {
		t.Helper()
		res, err := k.Call(context.Background(), &kernel.Caller{Identity: id}, "fs.write", &abi.FSWriteArgs{Path: p, Content: strings.Repeat("x", n)})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*abi.FSWriteResult).Error
	}
	if e := write(alice, "~/a", 6000); e != "" {
		t.Fatalf("a first write within the quota: %s", e)
	}
	if e := write(alice, "~/b", 6000); !strings.Contains(e, "disk quota exceeded") || !strings.Contains(e, "quota of 10240 bytes") {
		t.Fatalf("a write past the quota: %q", e)
	}
	if e := write(alice, "~/a", 9000); e != "" { // replacing: 9000 in all
		t.Fatalf("a replacement within the quota: %s", e)
	}
	if e := write(bob, "~/big", 50000); e != "" {
		t.Fatalf("bob, with no quota: %s", e)
	}
	if _, err := k.Call(context.Background(), &kernel.Caller{Identity: alice}, "fs.delete", &abi.FSDeleteArgs{Path: "~/a"}); err != nil {
		t.Fatal(err)
	}
	if e := write(alice, "~/b", 6000); e != "" {
		t.Fatalf("a write after a delete freed room: %s", e)
	}
	// A sandbox is not bound inside an exec: it writes past the quota ...
	res, err := k.Call(context.Background(), &kernel.Caller{Identity: alice}, "shell.exec", &abi.ShellExecArgs{Input: "head -c 20000 /dev/zero > ~/c && echo wrote"})
	if err != nil || !strings.Contains(res.(*abi.ShellExecResult).Output, "wrote") {
		t.Fatalf("a sandbox's write: %+v %v", res, err)
	}
	// ... and then the daemon counts the home again: over, refused.
	if e := write(alice, "~/d", 1); !strings.Contains(e, "disk quota exceeded") {
		t.Fatalf("a write after a sandbox filled the home: %q", e)
	}
	// The next sandbox has the home read-only, and says so.
	s, err := sessionCall[*abi.SessionOpenResult](t, k, alice, "process.session.open", &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{
		NetworkMode: "none", Mounts: []abi.ProcessMount{{HostPath: "~", GuestPath: "/h", Mode: "rw"}}}}})
	if err != nil || s.Isolation.Mounts[0].Mode != abi.MountRO {
		t.Fatalf("a session over a home at its quota: %+v %v", s, err)
	}
	k.Call(context.Background(), k.KernelCaller(), "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "kill"})
	res, err = k.Call(context.Background(), &kernel.Caller{Identity: alice}, "shell.exec", &abi.ShellExecArgs{Input: "touch ~/e || echo refused; rm -f ~/c; echo rm=$?"})
	if out := res.(*abi.ShellExecResult).Output; err != nil || !strings.Contains(out, "Read-only file system") || !strings.Contains(out, "refused") {
		t.Fatalf("a shell over a home at its quota: %q %v", out, err)
	}
	// Freed through the daemon, the home takes writes again.
	if _, err := k.Call(context.Background(), &kernel.Caller{Identity: alice}, "fs.delete", &abi.FSDeleteArgs{Path: "~/c"}); err != nil {
		t.Fatal(err)
	}
	if e := write(alice, "~/d", 100); e != "" {
		t.Fatalf("a write once the home is under its quota: %s", e)
	}
	// A quota that does not parse fails the write, never no limit.
	setConfig(t, k, root, "users/1000/quota/home", "lots")
	deadline := time.Now().Add(liveness)
	for e := ""; !strings.Contains(e, "users/1000/quota/home"); e = write(alice, "~/d", 100) {
		if time.Now().After(deadline) {
			t.Fatalf("a write under an unparsable quota: %q", e)
		}
		time.Sleep(50 * time.Millisecond) // the quota is read again within a second
	}
}

// FuzzParseQuota: any text parses to a positive size, or to no limit
// only as "none", or is an error; a size parses back to itself.
func FuzzParseQuota(f *testing.F) {
	for _, s := range []string{"1", "512M", "10G", "2KiB", "none", "NONE", "0", "-1", "", "1e9", "9223372036854775807", "8E", "1T", " 3 K ", "NaN", "Inf", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := local.ParseQuota(s)
		switch {
		case err != nil:
			if n != 0 {
				t.Fatalf("ParseQuota(%q) = %d with an error", s, n)
			}
		case n == 0:
			if !strings.EqualFold(strings.TrimSpace(s), "none") {
				t.Fatalf("ParseQuota(%q) = no limit", s)
			}
		case n < 0:
			t.Fatalf("ParseQuota(%q) = %d", s, n)
		default:
			if m, err := local.ParseQuota(strconv.FormatInt(n, 10)); err != nil || m != n {
				t.Fatalf("ParseQuota(%q) = %d, which parses back as %d, %v", s, n, m, err)
			}
		}
	})
}
