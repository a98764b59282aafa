package fusefs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// childEnv makes the test binary act as a mounting daemon for
// TestStaleMount: it mounts the test tree on the directory named, says
// "ready" and serves until killed.
const childEnv = "FUSEFS_TEST_CHILD_MOUNT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		srv, err := Mount(dir, newTestTree().root, testAuth{}, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child mount:", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		srv.Wait()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mountTree mounts a fresh test tree on a temporary directory, unmounted
// when the test ends.
func mountTree(t *testing.T) (*testTree, string) {
	t.Helper()
	tree := newTestTree()
	return tree, mountRoot(t, tree.root)
}

func TestView(t *testing.T) {
	_, mnt := mountTree(t)
	if got := vfstest.Must(t, mnt, `cat "$M/view"`); got != "hello\n" {
		t.Errorf("cat view = %q", got)
	}
	// A view reports the size of its rendering and keeps the tree's inode
	// number.
	want := fmt.Sprintf("6 %d 444 regular file", vfs.PathIno("/view"))
	if got := strings.TrimSpace(vfstest.Must(t, mnt, `stat -c '%s %i %a %F' "$M/view"`)); got != want {
		t.Errorf("stat view = %q, want %q", got, want)
	}
	ls := vfstest.Must(t, mnt, `ls -a "$M"`)
	if got := strings.Fields(ls); strings.Join(got, " ") != ". .. call ctl data stream view" {
		t.Errorf("ls -a = %q", ls)
	}
	if _, errs, err := vfstest.Sh(mnt, `echo x > "$M/view"`); err == nil || !strings.Contains(errs, "Permission denied") {
		t.Errorf("writing view: err %v, stderr %q", err, errs)
	}
	if _, errs, err := vfstest.Sh(mnt, `cat "$M/nonesuch"`); err == nil || !strings.Contains(errs, "No such file") {
		t.Errorf("cat nonesuch: err %v, stderr %q", err, errs)
	}
	if _, errs, err := vfstest.Sh(mnt, `touch "$M/new"`); err == nil || !strings.Contains(errs, "Read-only file system") {
		t.Errorf("touch in static dir: err %v, stderr %q", err, errs)
	}
}

func TestCtl(t *testing.T) {
	tree, mnt := mountTree(t)
	vfstest.Must(t, mnt, `echo start job1 > "$M/ctl"`)
	vfstest.Must(t, mnt, `printf 'a\nb\n' > "$M/ctl"`)
	// A last line without a newline runs too.
	vfstest.Must(t, mnt, `printf 'c' > "$M/ctl"`)
	if got, want := strings.Join(tree.ctlLines(), "|"), "uid0 start job1|uid0 a|uid0 b|uid0 c"; got != want {
		t.Errorf("ctl lines %q, want %q", got, want)
	}
	// dash's echo says only "I/O error"; bash's and coreutils' echo show
	// the errno the tree chose.
	if _, errs, err := vfstest.Sh(mnt, `echo bad verb > "$M/ctl"`); err == nil {
		t.Errorf("sh: echo bad > ctl succeeded, stderr %q", errs)
	}
	for _, args := range [][]string{
		{"bash", "-c", `echo bad verb > "$M/ctl"`},
		{"sh", "-c", `/bin/echo bad verb > "$M/ctl"`},
	} {
		if _, err := exec.LookPath(args[0]); err != nil {
			continue
		}
		_, errs, err := vfstest.Run(mnt, args...)
		if err == nil || !strings.Contains(errs, "Invalid argument") {
			t.Errorf("%q: err %v, stderr %q", args, err, errs)
		}
	}
	if got := len(tree.ctlLines()); got != 4 {
		t.Errorf("%d ctl lines ran, want 4", got)
	}
}

func TestCall(t *testing.T) {
	_, mnt := mountTree(t)
	got := vfstest.Must(t, mnt, `exec 3<>"$M/call"; echo hi >&3; cat <&3`)
	if got != "HI\n" {
		t.Errorf("call = %q, want %q", got, "HI\n")
	}
	got = vfstest.Must(t, mnt, `exec 3<>"$M/call"; echo one >&3; echo two >&3; cat <&3`)
	if got != "ONE\nTWO\n" {
		t.Errorf("queued calls = %q", got)
	}
}

func TestStreamInterrupt(t *testing.T) {
	// cat gets SIGINT's default action even if this binary was started
	// with it ignored (run as a background job of a non-interactive
	// shell): an ignored signal is inherited across exec, a caught one is
	// reset.
	if signal.Ignored(os.Interrupt) {
		signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	}
	tree, mnt := mountTree(t)
	cmd := exec.Command("cat", filepath.Join(mnt, "stream"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
	}()

	// Wait for the subscription, then see a record come through.
	deadline := time.Now().Add(time.Minute)
	for tree.hub.count() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("cat never opened the stream")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tree.hub.publish("event 1\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "event 1\n" {
		t.Fatalf("stream read %q, %v", line, err)
	}

	// cat is now blocked in read(2) on the stream. Ctrl-C.
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("cat: %v", err)
		}
		t.Logf("cat died %v after SIGINT", time.Since(start))
	case <-time.After(time.Minute): // blocked for good, without the interrupt
		t.Fatal("cat of the stream did not return within a minute of SIGINT")
	}

	// The mount keeps serving, and the handle was released.
	if got := vfstest.Must(t, mnt, `cat "$M/view"`); got != "hello\n" {
		t.Errorf("cat view after interrupt = %q", got)
	}
	for tree.hub.count() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("stream subscription never closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDataDir(t *testing.T) {
	_, mnt := mountTree(t)
	d := mnt + "/data"
	check := func(script, want string) {
		t.Helper()
		if got := vfstest.Must(t, d, script); got != want {
			t.Errorf("%s: got %q, want %q", script, got, want)
		}
	}
	check(`echo hello > "$M/a" && cat "$M/a"`, "hello\n")
	check(`echo more >> "$M/a" && cat "$M/a"`, "hello\nmore\n")
	check(`echo hello > "$M/a" && cat "$M/a"`, "hello\n") // O_TRUNC of an existing file
	check(`cp "$M/a" "$M/b" && cat "$M/b"`, "hello\n")
	check(`echo other > "$M/c" && mv "$M/b" "$M/c" && cat "$M/c" && ls "$M"`, "hello\na\nc\n")
	check(`mkdir "$M/sub" && echo needle > "$M/sub/n" && echo hay > "$M/sub/h" && cd "$M" && grep -r needle .`, "./sub/n:needle\n")
	check(`stat -c '%s %F %a' "$M/a" "$M/sub"`, "6 regular file 644\n0 directory 755\n")
	check(`chmod 600 "$M/a" && stat -c %a "$M/a"`, "600\n")
	check(`touch -d @1000000000 "$M/a" && stat -c %Y "$M/a"`, "1000000000\n")
	check(`truncate -s 2 "$M/a" && cat "$M/a"`, "he")
	check(`: > "$M/a" && stat -c %s "$M/a"`, "0\n")

	ls := vfstest.Must(t, d, `ls -l "$M"`)
	for _, want := range []string{"-rw------- 1 root root 0", " a\n", " c\n", "drwxr-xr-x 1 root root", " sub\n"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls -l lacks %q:\n%s", want, ls)
		}
	}

	// The inode number is the tree's and survives a rename.
	ino1 := vfstest.Must(t, d, `stat -c %i "$M/c"`)
	check(`mv "$M/c" "$M/sub/c2" && stat -c %i "$M/sub/c2"`, ino1)
	if n, err := strconv.ParseUint(strings.TrimSpace(ino1), 10, 64); err != nil || n <= 100 {
		t.Errorf("inode %q is not the tree's", ino1)
	}

	check(`rm "$M/a" && test ! -e "$M/a" && ls "$M"`, "sub\n")
	if _, errs, err := vfstest.Sh(d, `rmdir "$M/sub"`); err == nil || !strings.Contains(errs, "not empty") {
		t.Errorf("rmdir non-empty: %v %q", err, errs)
	}
	check(`rm -r "$M/sub" && ls -A "$M"`, "")
}

func TestOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run commands as another uid")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	tree, mnt := mountTree(t)
	// t.TempDir's directories are 0700; let uid 1001 through.
	for p := filepath.Dir(mnt); p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	as := func(uid int) []string {
		u := strconv.Itoa(uid)
		return []string{"setpriv", "--reuid", u, "--regid", u, "--clear-groups"}
	}
	out, errs, err := vfstest.Sh(mnt, `cat "$M/view" && echo from-1001 > "$M/ctl"`, as(1001)...)
	if err != nil || out != "hello\n" {
		t.Fatalf("as uid 1001: %q %q %v", out, errs, err)
	}
	if got := tree.ctlLines(); len(got) != 1 || got[0] != "uid1001 from-1001" {
		t.Errorf("ctl saw %q", got)
	}
	// The authenticator refuses uid 1002.
	_, errs, err = vfstest.Sh(mnt, `cat "$M/view"`, as(1002)...)
	if err == nil || !strings.Contains(errs, "Permission denied") {
		t.Errorf("as uid 1002: %v %q", err, errs)
	}
}

func TestStaleMount(t *testing.T) {
	vfstest.Mountable(t)
	dir := t.TempDir()
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Skipf("child could not mount: %q %v", line, err)
	}
	if got := vfstest.Must(t, dir, `cat "$M/view"`); got != "hello\n" {
		t.Fatalf("child mount serves %q", got)
	}
	cmd.Process.Kill() // SIGKILL: no unmount
	cmd.Wait()
	if _, err := os.Stat(dir); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}

	srv, err := Mount(dir, newTestTree().root, testAuth{}, Options{Logger: vfstest.Logger(t)})
	if err != nil {
		t.Fatalf("Mount over a stale mount: %v", err)
	}
	defer func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
		srv.Wait()
	}()
	if got := vfstest.Must(t, dir, `cat "$M/view"`); got != "hello\n" {
		t.Errorf("remount serves %q", got)
	}
}

func TestUnmountClosesHandles(t *testing.T) {
	vfstest.Mountable(t)
	dir := t.TempDir()
	tree := newTestTree()
	srv, err := Mount(dir, tree.root, testAuth{}, Options{Logger: vfstest.Logger(t)})
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot mount: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// A process holds the stream open across the unmount.
	cmd := exec.Command("sh", "-c", `exec 3<"$M/stream"; echo open; exec sleep 30`)
	cmd.Env = append(os.Environ(), "M="+dir)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "open\n" {
		t.Fatalf("child said %q", line)
	}
	if tree.hub.count() != 1 {
		t.Fatalf("%d subscriptions", tree.hub.count())
	}
	// Busy: the mount is detached lazily; serving ends when the holder goes.
	if err := srv.Unmount(); err != nil {
		t.Fatalf("Unmount: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "view")); err == nil {
		t.Errorf("mount still visible after Unmount")
	}
	cmd.Process.Kill()
	cmd.Wait()
	waited := make(chan struct{})
	go func() { srv.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("Wait did not return after the last user left")
	}
	if n := tree.hub.count(); n != 0 {
		t.Errorf("%d subscriptions left open", n)
	}
}

// TestFromGo drives the mount with system calls from this process.
func TestFromGo(t *testing.T) {
	_, mnt := mountTree(t)
	b, err := os.ReadFile(filepath.Join(mnt, "view"))
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	f, err := os.OpenFile(filepath.Join(mnt, "ctl"), os.O_RDWR|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("bad\n"); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("write bad: %v", err)
	}
	buf := make([]byte, 64)
	n, _ := f.ReadAt(buf, 0)
	if got := string(buf[:n]); got != "unknown verb\n" {
		t.Errorf("ctl result after bad = %q", got)
	}
	if _, err := f.WriteString("good\n"); err != nil {
		t.Errorf("write good: %v", err)
	}
	n, _ = f.ReadAt(buf, 0)
	if got := string(buf[:n]); got != "ok\n" {
		t.Errorf("ctl result = %q", got)
	}
	if err := f.Truncate(0); err != nil {
		t.Errorf("ftruncate ctl: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := os.Truncate(filepath.Join(mnt, "view"), 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("truncate view: %v, want EPERM", err)
	}
	if err := os.Chmod(filepath.Join(mnt, "ctl"), 0o600); !errors.Is(err, syscall.EPERM) {
		t.Errorf("chmod ctl: %v, want EPERM", err)
	}
}
