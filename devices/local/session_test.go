package local_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Exec sessions through the dispatcher, in real bubblewrap sandboxes.

// sessionCall makes a process.* syscall as id.
func sessionCall[R any](t *testing.T, k *env, id *kernel.Identity, name string, args any) (R, error) {
	t.Helper()
	var zero R
	res, err := k.Call(context.Background(), &kernel.Caller{Identity: id}, name, args)
	if err != nil {
		return zero, err
	}
	return res.(R), nil
}

// openSession opens a session as id or fails the test.
func openSession(t *testing.T, k *env, id *kernel.Identity, loc abi.ProcessLocalTarget) *abi.SessionOpenResult {
	t.Helper()
	r, err := sessionCall[*abi.SessionOpenResult](t, k, id, "process.session.open", &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &loc}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "ready" || r.Isolation == nil {
		t.Fatalf("open: %+v", r)
	}
	t.Cleanup(func() {
		k.Call(context.Background(), k.KernelCaller(), "process.session.signal", &abi.SessionSignalArgs{SessionID: r.SessionID, Signal: "kill"})
	})
	return r
}

// execIn runs argv in session sid as id.
func execIn(t *testing.T, k *env, id *kernel.Identity, sid string, argv ...string) *abi.ExecResult {
	t.Helper()
	r, err := sessionCall[*abi.ExecResult](t, k, id, "process.exec", &abi.ExecArgs{SessionID: sid, Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// text is an output's inline text ("" for none).
func text(o *abi.ExecOutput) string {
	if o == nil || o.InlineText == nil {
		return ""
	}
	return o.InlineText.Text
}

// reown gives the files a test made on disk (as root) their owners'
// disk ids, as the daemon keeps them.
func reown(t *testing.T, k *env) {
	t.Helper()
	if err := k.d.Reown("."); err != nil {
		t.Fatal(err)
	}
}

func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sessions need root")
	}
}

func TestSessionMounts(t *testing.T) {
	needSandbox(t)
	k, _, alice, _ := newKernel(t)
	os.MkdirAll(filepath.Join(k.dataPath, "home/alice/proj"), 0o755)
	os.MkdirAll(filepath.Join(k.dataPath, "home/alice/data"), 0o755)
	os.WriteFile(filepath.Join(k.dataPath, "home/alice/data/in.txt"), []byte("input\n"), 0o644)
	os.MkdirAll(filepath.Join(k.dataPath, "home/bob/shared"), 0o755)
	os.MkdirAll(filepath.Join(k.dataPath, "home/bob/private"), 0o700)
	reown(t, k)
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none", Mounts: []abi.ProcessMount{
		{HostPath: "~/proj", GuestPath: "/work", Mode: "rw"},
		{HostPath: "~/data", GuestPath: "/data", Mode: "ro"},
		{HostPath: "/home/bob/shared", GuestPath: "/shared", Mode: "rw"},
	}})
	// bob's directory is alice's to read only: the mount is narrowed, and says so.
	if m := s.Isolation.Mounts; len(m) != 3 || m[0].Mode != "rw" || m[1].Mode != "ro" || m[2].Mode != "ro" || m[0].HostPath != "/home/alice/proj" {
		t.Fatalf("applied mounts %+v", m)
	}
	r := execIn(t, k, alice, s.SessionID, "sh", "-c", `id -u; pwd; echo out > /work/made.txt; cat /data/in.txt;
		echo x > /data/no.txt || echo ro-data; echo x > /shared/no.txt || echo ro-shared`)
	if r.Status != "ok" || r.ExitCode != 0 || text(r.Stdout) != "1000\n/work\ninput\nro-data\nro-shared\n" {
		t.Fatalf("exec: %+v %q %q", r, text(r.Stdout), text(r.Stderr))
	}
	if b, _ := os.ReadFile(filepath.Join(k.dataPath, "home/alice/proj/made.txt")); string(b) != "out\n" {
		t.Fatalf("a rw write did not land: %q", b)
	}
	// Nothing outside the mounts: the state dir, other homes, the host's secrets.
	r = execIn(t, k, alice, s.SessionID, "sh", "-c", "cat /etc/shadow; ls "+k.StateDir()+"; ls /home/bob; cat "+filepath.Join(k.StateDir(), "gsv.db")+"; echo end")
	if out := text(r.Stdout); out != "end\n" {
		t.Fatalf("saw outside its mounts: %q %q", out, text(r.Stderr))
	}
}

func TestSessionNetwork(t *testing.T) {
	needSandbox(t)
	k, _, alice, _ := newKernel(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	probe := "exec 3<>/dev/tcp/" + strings.Replace(ln.Addr().String(), ":", "/", 1) + " && cat <&3"
	for _, mode := range []string{"none", "full"} {
		s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: mode})
		r := execIn(t, k, alice, s.SessionID, "bash", "-c", probe)
		if reached := r.ExitCode == 0 && text(r.Stdout) == "hello\n"; reached != (mode == "full") {
			t.Errorf("network %s: reached the host's listener: %v (%+v)", mode, reached, r)
		}
	}
}

func TestSessionSignalTakesTree(t *testing.T) {
	needSandbox(t)
	k, _, alice, bob := newKernel(t)
	os.MkdirAll(filepath.Join(k.dataPath, "home/alice/proj"), 0o755)
	reown(t, k)
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none", Mounts: []abi.ProcessMount{{HostPath: "~/proj", GuestPath: "/work", Mode: "rw"}}})
	done := make(chan *abi.ExecResult, 1)
	go func() {
		r, _ := sessionCall[*abi.ExecResult](t, k, alice, "process.exec", &abi.ExecArgs{SessionID: s.SessionID,
			Argv: []string{"sh", "-c", "trap '' TERM; (trap '' TERM; sleep 1000 & touch /work/ready; sleep 1000) & sleep 1000"}})
		done <- r
	}()
	// Every TERM trap is set once ready exists.
	ready := filepath.Join(k.dataPath, "home/alice/proj/ready")
	for deadline := time.Now().Add(liveness); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exec never started its tree")
		}
	}
	// bob may not signal it: to him it does not exist (not_found).
	if res, err := sessionCall[*abi.SessionSignalResult](t, k, bob, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "kill"}); err != nil || res.Status != abi.SignalNotFound {
		t.Fatalf("bob's signal: %+v, %v", res, err)
	}
	grace := int64(200 * time.Millisecond)
	start := time.Now()
	res, err := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "term", GraceTimeoutNs: &grace})
	if err != nil || res.Status != "signaled" || res.ExitCode == nil || *res.ExitCode != 137 {
		t.Fatalf("signal: %+v %v", res, err)
	}
	if d := time.Since(start); d > liveness { // its processes sleep 1000 s
		t.Fatalf("term took %v", d)
	}
	if r := <-done; r == nil || r.Status != "signaled" {
		t.Fatalf("exec receipt %+v", r)
	}
	again, _ := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "term"})
	if again.Status != "already_exited" {
		t.Fatalf("second signal %+v", again)
	}
	if _, err := sessionCall[*abi.ExecResult](t, k, alice, "process.exec", &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"true"}}); kindOf(err) != abi.Busy {
		t.Fatalf("exec in an ended session: %v", err)
	}
}

func TestSessionBlobOutput(t *testing.T) {
	needSandbox(t)
	k, _, alice, bob := newKernel(t)
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
	r := execIn(t, k, alice, s.SessionID, "sh", "-c", "head -c 10000000 /dev/urandom | tee /tmp/out; sha256sum /tmp/out >&2")
	if r.Status != "ok" || r.Stdout == nil || r.Stdout.Blob == nil || r.Stdout.Blob.SizeBytes != 10_000_000 {
		t.Fatalf("receipt %+v", r)
	}
	want := strings.Fields(text(r.Stderr))[0]
	if r.Stdout.Blob.BlobRef != "sha256:"+want {
		t.Fatalf("blob ref %s, the output's sha256 %s", r.Stdout.Blob.BlobRef, want)
	}
	var all []byte
	for off := int64(0); off < 10_000_000; {
		b, err := sessionCall[*abi.BlobReadResult](t, k, alice, "process.blob.read", &abi.BlobReadArgs{BlobRef: r.Stdout.Blob.BlobRef, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b.Bytes...)
		off += int64(len(b.Bytes))
	}
	if sum := sha256.Sum256(all); hex.EncodeToString(sum[:]) != want {
		t.Fatal("the blob's bytes do not match")
	}
	if _, err := sessionCall[*abi.BlobReadResult](t, k, bob, "process.blob.read", &abi.BlobReadArgs{BlobRef: r.Stdout.Blob.BlobRef}); kindOf(err) != abi.NotExist {
		t.Fatalf("bob read alice's blob: %v", err)
	}
	r, err := sessionCall[*abi.ExecResult](t, k, alice, "process.exec", &abi.ExecArgs{SessionID: s.SessionID,
		Argv: []string{"head", "-c", "10000000", "/dev/zero"}, OutputMode: "require_inline"})
	if err != nil || r.Status != "error" || r.ErrorCode != "inline_required_too_large" || r.Stdout != nil {
		t.Fatalf("require_inline: %+v %v", r, err)
	}
	// Small output is inline, text or bytes.
	r = execIn(t, k, alice, s.SessionID, "printf", `\377\376`)
	if r.Stdout == nil || r.Stdout.InlineBytes == nil || string(r.Stdout.InlineBytes.Bytes) != "\xff\xfe" {
		t.Fatalf("bytes: %+v", r.Stdout)
	}
}

func TestSessionTTL(t *testing.T) {
	needSandbox(t)
	k, _, alice, _ := newKernel(t)
	ttl := int64(1200 * time.Millisecond)
	r, err := sessionCall[*abi.SessionOpenResult](t, k, alice, "process.session.open", &abi.SessionOpenArgs{
		Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "none"}}, SessionTTLNs: &ttl})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sessionCall[*abi.ExecResult](t, k, alice, "process.exec", &abi.ExecArgs{SessionID: r.SessionID, Argv: []string{"sleep", "100"}})
	if err != nil || ex.Status != "signaled" {
		t.Fatalf("an exec past the session's end: %+v %v", ex, err)
	}
	info, err := sessionCall[*abi.SessionInfo](t, k, alice, "process.session.get", &abi.SessionGetArgs{SessionID: r.SessionID})
	if err != nil || info.State != "ended" {
		t.Fatalf("after its TTL: %+v %v", info, err)
	}
}

func TestSessionBadInput(t *testing.T) {
	needSandbox(t)
	k, root, alice, bob := newKernel(t)
	os.MkdirAll(filepath.Join(k.dataPath, "home/bob/private"), 0o700)
	os.MkdirAll(filepath.Join(k.dataPath, "home/alice/proj"), 0o755)
	os.WriteFile(filepath.Join(k.dataPath, "home/alice/file"), nil, 0o644)
	os.Symlink("/etc", filepath.Join(k.dataPath, "home/alice/escape"))
	reown(t, k)
	zero := int64(0)
	mount := func(host, guest, mode string) *abi.SessionOpenArgs {
		return &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "none",
			Mounts: []abi.ProcessMount{{HostPath: host, GuestPath: guest, Mode: mode}}}}}
	}
	for _, c := range []struct {
		name string
		id   *kernel.Identity
		args *abi.SessionOpenArgs
		kind abi.Kind
	}{
		{"unreadable", alice, mount("/home/bob/private", "/p", "ro"), abi.Permission},
		{"dotdot", alice, mount("~/proj/../../bob", "/p", "ro"), abi.Invalid},
		{"symlink", alice, mount("~/escape", "/p", "ro"), abi.Permission},
		{"symlink below", alice, mount("~/escape/ssh", "/p", "ro"), 0},
		{"not a dir", alice, mount("~/file", "/p", "ro"), abi.Invalid},
		{"missing", alice, mount("~/nothing", "/p", "ro"), abi.NotExist},
		{"host path", alice, mount("/usr", "/p", "ro"), abi.Permission},
		{"guest over base", alice, mount("~/proj", "/usr/x", "rw"), abi.Invalid},
		{"guest root", alice, mount("~/proj", "/", "rw"), abi.Invalid},
		{"mode", alice, mount("~/proj", "/p", "rwx"), abi.Invalid},
		{"network", alice, &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "some"}}}, abi.Invalid},
		{"no target", alice, &abi.SessionOpenArgs{}, abi.Invalid},
		{"ttl 0", alice, &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "none"}}, SessionTTLNs: &zero}, abi.Invalid},
	} {
		_, err := sessionCall[*abi.SessionOpenResult](t, k, c.id, "process.session.open", c.args)
		if c.kind == 0 && kindOf(err) >= 400 && kindOf(err) < 500 {
			continue // any refusal
		}
		if kindOf(err) != c.kind {
			t.Errorf("%s: %v, want %d", c.name, err, c.kind)
		} else if !strings.HasPrefix(err.Error(), "process.session.open: ") {
			t.Errorf("%s: error does not name its syscall: %v", c.name, err)
		}
	}
	list, _ := sessionCall[*abi.SessionListResult](t, k, root, "process.session.list", &abi.SessionListArgs{})
	if len(list.Sessions) != 0 {
		t.Fatalf("refused opens left sessions: %+v", list.Sessions)
	}
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
	for _, c := range []struct {
		name string
		id   *kernel.Identity
		args *abi.ExecArgs
		kind abi.Kind
	}{
		{"empty argv", alice, &abi.ExecArgs{SessionID: s.SessionID}, abi.Invalid},
		{"another's", bob, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"true"}}, abi.NotExist},
		{"output mode", alice, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"true"}, OutputMode: "maybe"}, abi.Invalid},
		{"timeout 0", alice, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"true"}, TimeoutNs: &zero}, abi.Invalid},
		{"unknown blob", alice, &abi.ExecArgs{SessionID: s.SessionID, Argv: []string{"cat"}, StdinRef: "sha256:" + strings.Repeat("0", 64)}, abi.NotExist},
	} {
		if _, err := sessionCall[*abi.ExecResult](t, k, c.id, "process.exec", c.args); kindOf(err) != c.kind {
			t.Errorf("exec %s: %v, want %d", c.name, err, c.kind)
		}
	}
	if _, err := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "hup"}); kindOf(err) != abi.Invalid {
		t.Errorf("signal hup: %v", err)
	}
	// A grace is at most maxSignalGrace (grace=99999h: issue 20, item 18);
	// the refused signal leaves the session open.
	long := int64(99999 * time.Hour)
	if _, err := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "term", GraceTimeoutNs: &long}); kindOf(err) != abi.Invalid {
		t.Errorf("signal term with a grace of 99999h: %v", err)
	}
	if g, _ := sessionCall[*abi.SessionInfo](t, k, alice, "process.session.get", &abi.SessionGetArgs{SessionID: s.SessionID}); g == nil || g.State != "ready" {
		t.Errorf("after a refused signal the session is %+v", g)
	}
	// Root sees everyone's sessions; bob sees none of alice's.
	if l, _ := sessionCall[*abi.SessionListResult](t, k, bob, "process.session.list", &abi.SessionListArgs{}); len(l.Sessions) != 0 {
		t.Errorf("bob lists %+v", l.Sessions)
	}
	if l, _ := sessionCall[*abi.SessionListResult](t, k, root, "process.session.list", &abi.SessionListArgs{}); len(l.Sessions) != 1 {
		t.Errorf("root lists %+v", l.Sessions)
	}
}

// A process capability that processCap could not read is refused when it
// is set (400, naming the problem), so that it never fails every user's
// open with a 500; sys.config.unset removes one (issue 20, item 18).
func TestProcessCapConfigRule(t *testing.T) {
	k, root, _, _ := newKernel(t)
	ctx := context.Background()
	set := func(key, val string) error {
		v, _ := json.Marshal(val)
		_, err := k.Call(ctx, &kernel.Caller{Identity: root}, "sys.config.set", &abi.ConfigSetArgs{Key: key, Value: v})
		return err
	}
	for _, key := range []string{"config/process/cap", "users/1000/process/cap"} {
		for _, c := range []struct{ val, want string }{
			{`{"networks":["none"`, "the process capability does not parse"},
			{`{"netwrks":["none"]}`, `unknown field "netwrks"`},
			{`{"networks":["some"]}`, `network "some": want none or full`},
			{`{"mounts":[{"prefix":"rel","mode":"rw"}]}`, "mount prefix"},
			{`{"max_sessions":-1}`, "may not be negative"},
			{`null`, "is a JSON object"},
			{`[]`, "is a JSON object"},
		} {
			if err := set(key, c.val); kindOf(err) != abi.Invalid || !strings.Contains(err.Error(), key+": ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("set %s %s: %v, want a 400 saying %q", key, c.val, err, c.want)
			}
		}
		res, err := k.Call(ctx, &kernel.Caller{Identity: root}, "sys.config.get", &abi.ConfigGetArgs{Key: key})
		if err != nil || len(res.(*abi.ConfigGetResult).Entries) != 0 {
			t.Errorf("refused capabilities were stored: %+v, %v", res, err)
		}
	}
	if err := set("users/1000/process/cap", `{"networks":["none"],"mounts":[{"prefix":"~","mode":"ro"}]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Call(ctx, &kernel.Caller{Identity: root}, "sys.config.unset", &abi.ConfigUnsetArgs{Key: "users/1000/process/cap"}); err != nil {
		t.Errorf("unset: %v", err)
	}
}

// The process capability in config narrows what an open may ask.
func TestSessionCapability(t *testing.T) {
	needSandbox(t)
	k, root, alice, _ := newKernel(t)
	os.MkdirAll(filepath.Join(k.dataPath, "home/alice/proj"), 0o755)
	reown(t, k)
	set := func(key, val string) {
		if _, err := k.Call(context.Background(), &kernel.Caller{Identity: root}, "sys.config.set", &abi.ConfigSetArgs{Key: key, Value: []byte(`"` + strings.ReplaceAll(val, `"`, `\"`) + `"`)}); err != nil {
			t.Fatal(err)
		}
	}
	set("users/1000/process/cap", `{"networks":["none"],"mounts":[{"prefix":"~","mode":"ro"}],"max_sessions":1}`)
	open := func(network, mode string) (*abi.SessionOpenResult, error) {
		return sessionCall[*abi.SessionOpenResult](t, k, alice, "process.session.open", &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{
			NetworkMode: network, Mounts: []abi.ProcessMount{{HostPath: "~/proj", GuestPath: "/w", Mode: mode}}}}})
	}
	if _, err := open("full", "ro"); kindOf(err) != abi.Permission {
		t.Fatalf("network full against the capability: %v", err)
	}
	r, err := open("none", "rw")
	if err != nil || r.Isolation.Mounts[0].Mode != "ro" {
		t.Fatalf("rw under a ro capability: %+v %v", r, err)
	}
	if _, err := open("none", "ro"); kindOf(err) != abi.Permission {
		t.Fatalf("a second session over max_sessions 1: %v", err)
	}
	if _, err := sessionCall[*abi.SessionOpenResult](t, k, alice, "process.session.open", &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{
		NetworkMode: "none", Mounts: []abi.ProcessMount{{HostPath: "/workspaces", GuestPath: "/w", Mode: "ro"}}}}}); kindOf(err) != abi.Permission {
		t.Fatalf("a mount outside the capability's prefixes: %v", err)
	}
}

// kindOf is err's kind, 0 for nil.
func kindOf(err error) abi.Kind {
	var e *abi.Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if err != nil {
		return abi.Other
	}
	return 0
}

// A blob is kept while a session whose receipt holds it is kept, and
// removed after: the session ended and its retention passed.
func TestSessionBlobCollected(t *testing.T) {
	needSandbox(t)
	k, _, alice, _ := newKernel(t)
	k.d.SetSessionRetention(500 * time.Millisecond)
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
	r := execIn(t, k, alice, s.SessionID, "head", "-c", "100000", "/dev/zero")
	if r.Stdout == nil || r.Stdout.Blob == nil {
		t.Fatalf("receipt %+v", r)
	}
	file := filepath.Join(k.StateDir(), "blobs", "sha256", strings.TrimPrefix(r.Stdout.Blob.BlobRef, "sha256:"))
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the blob's file: %v", err)
	}
	if _, err := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: "term"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sessionCall[*abi.BlobReadResult](t, k, alice, "process.blob.read", &abi.BlobReadArgs{BlobRef: r.Stdout.Blob.BlobRef}); err != nil {
		t.Fatalf("the blob of an ended session, within its retention: %v", err)
	}
	deadline := time.Now().Add(liveness)
	for {
		_, err := os.Stat(file)
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the blob outlived its session's retention")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := sessionCall[*abi.BlobReadResult](t, k, alice, "process.blob.read", &abi.BlobReadArgs{BlobRef: r.Stdout.Blob.BlobRef}); kindOf(err) != abi.NotExist {
		t.Fatalf("a collected blob: %v", err)
	}
}

// A session past its TTL runs nothing more, though its janitor has not
// ended it yet: every exec and signal checks the expiry itself.
func TestSessionExpiryChecked(t *testing.T) {
	needSandbox(t)
	k, _, alice, _ := newKernel(t)
	k.d.SetJanitorPeriod(time.Hour) // the janitor never comes by in this test
	ttl := int64(300 * time.Millisecond)
	for _, tc := range []struct {
		name string
		call func(sid string) error
		kind abi.Kind
	}{
		{"exec", func(sid string) error {
			r, err := sessionCall[*abi.ExecResult](t, k, alice, "process.exec", &abi.ExecArgs{SessionID: sid, Argv: []string{"true"}})
			if err == nil {
				t.Logf("receipt %+v", r)
			}
			return err
		}, abi.Busy},
		{"signal", func(sid string) error {
			r, err := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: sid, Signal: "int"})
			if err == nil && r.Status != abi.SignalAlreadyExited {
				return errors.New("signal of an expired session: " + r.Status)
			}
			return err
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sessionCall[*abi.SessionOpenResult](t, k, alice, "process.session.open", &abi.SessionOpenArgs{
				Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "none"}}, SessionTTLNs: &ttl})
			if err != nil {
				t.Fatal(err)
			}
			for time.Now().UnixNano() <= *r.ExpiresAtNs {
				time.Sleep(time.Until(time.Unix(0, *r.ExpiresAtNs)) + time.Millisecond)
			}
			if err := tc.call(r.SessionID); kindOf(err) != tc.kind {
				t.Fatalf("%s past the TTL: %v, want kind %d", tc.name, err, tc.kind)
			}
			info, err := sessionCall[*abi.SessionInfo](t, k, alice, "process.session.get", &abi.SessionGetArgs{SessionID: r.SessionID})
			if err != nil || info.State != "ended" {
				t.Fatalf("after an %s past its TTL: %+v %v", tc.name, info, err)
			}
		})
	}
}
