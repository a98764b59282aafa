package sandbox

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testUID is a host uid no host user has, testGID its gid and testGroup
// a supplementary group of the box.
const (
	testUID   = 1_610_612_000
	testGID   = 1_610_612_001
	testGroup = 1_610_612_002
)

// newBox opens a box over a fresh directory of the box's uid mounted rw
// at /work and one of root's ro at /data.
func newBox(t *testing.T, network bool) (*Box, string, string) {
	return newBoxWith(t, network)
}

// newBoxWith is newBox with more mounts.
func newBoxWith(t *testing.T, network bool, more ...Mount) (*Box, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	r, err := NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	base := t.TempDir()
	work, data := filepath.Join(base, "work"), filepath.Join(base, "data")
	os.Mkdir(work, 0o755)
	os.Mkdir(data, 0o755)
	os.WriteFile(filepath.Join(data, "d.txt"), []byte("data\n"), 0o644)
	os.Chown(work, testUID, testGID)
	open := func(p string) *os.File {
		f, err := os.OpenFile(p, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	b, err := r.Open(Spec{
		ID: "t" + strings.ReplaceAll(t.Name(), "/", "_"), HostUID: testUID, HostGID: testGID, HostGroups: []uint32{testGID, testGroup},
		Uid: 1000, Gid: 100,
		Mounts:      append([]Mount{{Dir: open(work), Guest: "/work", RW: true}, {Dir: open(data), Guest: "/data"}}, more...),
		ScratchRoot: filepath.Join(base, "scratch"), Home: "/home/alice", Network: network,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, work, data
}

// run runs argv in b and returns its output and exit.
func run(t *testing.T, b *Box, argv ...string) (string, Exit) {
	t.Helper()
	var out strings.Builder
	p, err := b.Start(Cmd{Argv: argv, Cwd: "/work", Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &out, MaxProcesses: 64})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		p.Kill()
		t.Fatalf("%v: did not end", argv)
	}
	return out.String(), p.Exit()
}

func TestBoxMountsAndUser(t *testing.T) {
	b, work, data := newBox(t, false)
	out, ex := run(t, b, "sh", "-c", "id -u; echo hi > /work/new.txt; cat /data/d.txt; echo x > /data/no.txt; echo rc=$?")
	if ex.Code != 0 {
		t.Fatalf("exit %+v: %s", ex, out)
	}
	if !strings.HasPrefix(out, "1000\n") || !strings.Contains(out, "data\n") || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("output: %q", out)
	}
	if got, _ := os.ReadFile(filepath.Join(work, "new.txt")); string(got) != "hi\n" {
		t.Fatalf("rw write: %q", got)
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(work, "new.txt"), &st)
	if st.Uid != testUID || st.Gid != testGID {
		t.Fatalf("a file the sandbox made is owned by %d:%d on disk, want %d:%d", st.Uid, st.Gid, testUID, testGID)
	}
	if _, err := os.Stat(filepath.Join(data, "no.txt")); err == nil {
		t.Fatal("a ro mount took a write")
	}
	out, _ = run(t, b, "sh", "-c", "cat /etc/shadow; ls /root; ls "+filepath.Dir(work)+"; echo end")
	if strings.Contains(out, "root:") || !strings.Contains(out, "end") {
		t.Fatalf("saw outside: %q", out)
	}
}

// The host kernel checks a box's accesses against the files' owners and
// modes on disk, with the box's uid, gid and supplementary groups: another
// uid's 0600 file and a 0700 directory are closed, a 0640 file of one of
// its groups is open. An IDMap mount shows root's files as the box's own,
// and what the box makes there is root's on disk.
func TestBoxHostPermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "root.txt"), []byte("root\n"), 0o600)
	hf, err := os.OpenFile(host, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	b, work, _ := newBoxWith(t, false, Mount{Dir: hf, Guest: "/host", RW: true, IDMap: true})
	other := testUID + 100
	for _, f := range []struct {
		name string
		uid  int
		gid  int
		mode os.FileMode
	}{
		{"other-secret", other, other, 0o600},
		{"other-group", other, testGroup, 0o640},
		{"other-group-no", other, other + 1, 0o640},
		{"other-public", other, other, 0o644},
	} {
		p := filepath.Join(work, f.name)
		os.WriteFile(p, []byte(f.name+"\n"), f.mode)
		os.Chown(p, f.uid, f.gid)
		os.Chmod(p, f.mode)
	}
	os.Mkdir(filepath.Join(work, "other-dir"), 0o700)
	os.WriteFile(filepath.Join(work, "other-dir", "in"), []byte("in\n"), 0o644)
	os.Chown(filepath.Join(work, "other-dir"), other, other)
	out, ex := run(t, b, "sh", "-c", `for f in other-secret other-group other-group-no other-public other-dir/in /host/root.txt; do
		if cat $f >/dev/null 2>&1; then echo "$f yes"; else echo "$f no"; fi; done
		echo made > /host/made; id -u; id -g`)
	want := "other-secret no\nother-group yes\nother-group-no no\nother-public yes\nother-dir/in no\n/host/root.txt yes\n1000\n100\n"
	if ex.Code != 0 || out != want {
		t.Fatalf("exit %+v:\n%s\nwant\n%s", ex, out, want)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(host, "made"), &st); err != nil || st.Uid != 0 || st.Gid != 0 {
		t.Fatalf("a file made on an IDMap mount: %v, owned %d:%d on disk, want 0:0", err, st.Uid, st.Gid)
	}
}

// No host path is on a sandbox's command line: its directories are bound
// from descriptors.
func TestBoxCmdlineNamesNoHostPath(t *testing.T) {
	b, work, data := newBox(t, false)
	out, ex := run(t, b, "sh", "-c", `tr '\0' ' ' </proc/1/cmdline; echo; cat /proc/self/mountinfo`)
	if ex.Code != 0 {
		t.Fatalf("exit %+v: %s", ex, out)
	}
	cmdline, _, _ := strings.Cut(out, "\n")
	for _, p := range []string{RunDir, filepath.Dir(work), b.scratch} {
		if strings.Contains(cmdline, p) {
			t.Errorf("the sandbox's /proc/1/cmdline names %s: %s", p, cmdline)
		}
	}
	if strings.Contains(out, RunDir) {
		t.Errorf("the sandbox's mountinfo names the staging directory:\n%s", out)
	}
	_ = data
}

func TestBoxNetwork(t *testing.T) {
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
	port := strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")
	probe := "exec 3<>/dev/tcp/127.0.0.1/" + port + " && cat <&3"
	for _, network := range []bool{false, true} {
		b, _, _ := newBox(t, network)
		out, ex := run(t, b, "bash", "-c", probe)
		if network != (ex.Code == 0 && strings.Contains(out, "hello")) {
			t.Errorf("network %v: exit %d, %q", network, ex.Code, out)
		}
	}
}

func TestBoxKillTakesTree(t *testing.T) {
	b, _, _ := newBox(t, false)
	var out strings.Builder
	p, err := b.Start(Cmd{Argv: []string{"sh", "-c", "trap '' TERM; (trap '' TERM; sleep 1000) & sleep 1000"}, Cwd: "/", Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); len(p.members()) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("members %d", len(p.members()))
		}
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
		t.Fatal("TERM ended a tree that traps it")
	case <-time.After(300 * time.Millisecond):
	}
	p.Kill()
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatal("kill did not end it")
	}
	if ex := p.Exit(); ex.Code != 137 {
		t.Fatalf("exit %+v", ex)
	}
}

// MaxProcesses is the sandbox's RLIMIT_NPROC from its first process on:
// the command sees it, and a fork past it fails.
func TestBoxMaxProcesses(t *testing.T) {
	b, _, _ := newBox(t, false)
	out, ex := run(t, b, "grep", "Max processes", "/proc/self/limits")
	if f := strings.Fields(out); ex.Code != 0 || len(f) < 4 || f[2] != "64" || f[3] != "64" {
		t.Fatalf("the limits of a command: %q %+v", out, ex)
	}
	// Without a Cmd's own ceiling, the runtime's holds: inherited, no wrapper.
	var o strings.Builder
	p, err := b.Start(Cmd{Argv: []string{"sh", "-c", "grep 'Max processes' /proc/self/limits; cat /proc/1/cmdline | tr '\\0' ' '"}, Cwd: "/",
		Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &o, Stderr: &o})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if f := strings.Fields(o.String()); len(f) < 4 || f[2] != strconv.Itoa(MaxProcesses) || f[3] != strconv.Itoa(MaxProcesses) {
		t.Fatalf("the runtime's ceiling: %q", o.String())
	}
	o.Reset()
	p, err = b.Start(Cmd{Argv: []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait"}, Cwd: "/work",
		Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &o, Stderr: &o, MaxProcesses: 4})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if !strings.Contains(strings.ToLower(o.String()), "fork") {
		t.Fatalf("8 processes under a ceiling of 4: %q %+v", o.String(), p.Exit())
	}
}

// A rootless runtime runs as the daemon's own user: its box binds its
// directories by descriptor (none of which the command inherits), shows
// only them, and writes as that user. The test runs itself again as
// nobody (setpriv) for it.
func TestRootless(t *testing.T) {
	if base := os.Getenv("SANDBOX_ROOTLESS_BASE"); base != "" {
		rootlessChild(t, base)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to become another user")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv")
	}
	base, err := os.MkdirTemp("", "rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	for _, d := range []string{"work", "data", "other"} {
		os.Mkdir(filepath.Join(base, d), 0o755)
	}
	os.WriteFile(filepath.Join(base, "data", "d.txt"), []byte("data\n"), 0o644)
	os.WriteFile(filepath.Join(base, "other", "secret"), []byte("secret\n"), 0o644)
	filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", os.Args[0], "-test.run", "^TestRootless$", "-test.v")
	cmd.Env = append(os.Environ(), "SANDBOX_ROOTLESS_BASE="+base, "HOME="+base)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRootless") {
		t.Fatalf("the rootless run as nobody: %v\n%s", err, out)
	}
	fi, err := os.Stat(filepath.Join(base, "work", "new"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatalf("the box's file on the host: %v %v", fi, err)
	}
}

// rootlessChild is TestRootless as nobody, over base.
func rootlessChild(t *testing.T, base string) {
	r, err := NewRootlessRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	open := func(p string) *os.File {
		f, err := os.OpenFile(p, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	work, data := open(filepath.Join(base, "work")), open(filepath.Join(base, "data"))
	b, err := r.Open(Spec{ID: "rootless", Uid: 65534, Gid: 65534,
		Mounts:      []Mount{{Dir: work, Guest: "/work", RW: true}, {Dir: data, Guest: "/data"}},
		ScratchRoot: filepath.Join(base, "scratch"), Home: "/home/nobody"})
	work.Close() // the box keeps its own descriptors
	data.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out, ex := run(t, b, "sh", "-c", `echo made > new; cat /data/d.txt; touch /data/x 2>/dev/null && echo data-writable;
		ls /proc/self/fd | tr '\n' ' '; echo; ls `+base+` 2>&1 | head -1; id -u`)
	if ex.Code != 0 || !strings.Contains(out, "data\n") || strings.Contains(out, "data-writable") || !strings.Contains(out, "65534\n") {
		t.Fatalf("the rootless box: exit %d: %q", ex.Code, out)
	}
	// Only stdin, stdout, stderr and ls's own directory: no mount's fd.
	if fds := strings.Fields(strings.Split(out, "\n")[1]); len(fds) > 4 {
		t.Fatalf("the command inherited descriptors: %v (%q)", fds, out)
	}
	if strings.Contains(out, "other") {
		t.Fatalf("the box sees the host's directory: %q", out)
	}
	// Its commands run Nice steps nicer than the daemon (no cgroup: nice
	// alone), and cannot take it back.
	nice, err := niceOf("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	want := min(nice+Nice, 19)
	out, _ = run(t, b, "sh", "-c", "renice -n 0 -p $$ 2>/dev/null; cat /proc/$$/stat")
	_, rest, _ := strings.Cut(out, ") ")
	if f := strings.Fields(rest); len(f) < 17 || f[16] != strconv.Itoa(want) {
		t.Fatalf("a rootless command's stat: %q, want nice %d", out, want)
	}
}
