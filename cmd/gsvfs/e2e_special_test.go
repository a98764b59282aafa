package main_test

// Special files in the data tree: a FIFO a sandbox made never blocks the
// daemon, and a sandbox makes no device node.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// specialLimit bounds each open of a special file in the tests: it only
// guards liveness (an open that blocks never ends).
const specialLimit = liveness

// boundedAs runs script with sh -c as host uid (setpriv; 0: the test's own
// user) and returns what it did. A script not ended within limit fails
// t: the FUSE connection of mnt is then aborted, which frees a reader
// stuck in it (a blocked open of the mount is not killable otherwise).
func boundedAs(t *testing.T, mnt string, uid int, limit time.Duration, script string, args ...string) shResult {
	t.Helper()
	argv := append([]string{"sh", "-c", script, "sh"}, args...)
	if uid != 0 {
		u := strconv.Itoa(uid)
		argv = append([]string{"setpriv", "--reuid", u, "--regid", u, "--clear-groups"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "HOME=/"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return shResult{stdout: stdout.String(), stderr: stderr.String(), err: err, code: cmd.ProcessState.ExitCode()}
	case <-time.After(limit):
	}
	cmd.Process.Kill()
	abortFUSE(t, mnt)
	select {
	case <-done:
	case <-time.After(limit):
	}
	t.Fatalf("%q did not end within %v (the FUSE connection was aborted)", script, limit)
	return shResult{}
}

// abortFUSE aborts the FUSE connection of the mount at mnt.
func abortFUSE(t *testing.T, mnt string) {
	const conns = "/sys/fs/fuse/connections"
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if !strings.Contains(string(b), " - fusectl ") { // not mounted here
		if err := syscall.Mount("fusectl", conns, "fusectl", 0, ""); err != nil {
			t.Logf("mount fusectl: %v", err)
		}
	}
	// The mount point itself may hang: take the device from mountinfo.
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMount(f[4]) == mnt {
			_, minor, _ := strings.Cut(f[2], ":")
			if err := os.WriteFile(conns+"/"+minor+"/abort", []byte("1"), 0); err != nil {
				t.Logf("abort: %v", err)
			}
		}
	}
}

// A FIFO made in a home from inside a sandbox: each open of it through
// FUSE or 9P fails at once with ENXIO (it never waits for a writer, and
// pins no daemon thread), tree walkers (grep -r, tar) finish, the daemon
// serves on; the sandbox could make no device node.
func TestE2ESpecialFiles(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	unixAddr := "GSV_ADDR=unix!" + d.sock
	home := filepath.Join(d.state, "fs", "home", "alice")

	// From alice's sandbox: a FIFO, and device nodes (a char device, a
	// block device; a 0:0 "whiteout", which Linux lets anyone make).
	r := gsvAs(aliceHost, []string{unixAddr}, "call", "shell.exec", `{"input":"echo needle > ~/a.txt; mkfifo ~/fifo && echo fifo-made; mknod ~/null c 1 3 && echo null-made; mknod ~/blk b 7 0 && echo blk-made; mknod ~/wh c 0 0 && echo wh-made; true"}`)
	if r.code != 0 || !strings.Contains(r.stdout, "fifo-made") {
		t.Fatalf("alice's sandbox makes a FIFO: %v", r)
	}
	for _, dev := range []string{"null", "blk"} {
		if strings.Contains(r.stdout, dev+"-made") {
			t.Errorf("alice's sandbox made the device node %s: %v", dev, r)
		}
		if _, err := os.Lstat(filepath.Join(home, dev)); err == nil {
			t.Errorf("a device node %s is in alice's home", dev)
		}
	}
	if fi, err := os.Lstat(filepath.Join(home, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO on disk: %v %v", fi, err)
	}
	specials := []string{"fifo"}
	if _, err := os.Lstat(filepath.Join(home, "wh")); err == nil {
		specials = append(specials, "wh")
	}

	for _, name := range specials {
		p := d.p("/home/alice/" + name)
		for _, c := range []struct {
			who    string
			uid    int
			script string
		}{
			{"alice cat", aliceHost, `cat "$1"`},
			{"alice write", aliceHost, `echo x > "$1"`},
			{"alice truncate", aliceHost, `truncate -s 0 "$1"`},
			{"root cat", 0, `cat "$1"`},
		} {
			r := boundedAs(t, d.mnt, c.uid, specialLimit, c.script, p)
			if r.code == 0 || !strings.Contains(r.stderr, "No such device or address") {
				t.Errorf("%s %s over FUSE: %v, want ENXIO", c.who, name, r)
			}
		}
		// Over 9P, as root.
		errc := make(chan error, 1)
		go func() {
			fid, err := root.Open("/home/alice/"+name, plan9.OREAD)
			if err == nil {
				fid.Close()
			}
			errc <- err
		}()
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "no such device or address") {
				t.Errorf("9P open of %s: %v, want no such device or address", name, err)
			}
		case <-time.After(specialLimit):
			t.Fatalf("a 9P open of %s did not end within %v", name, specialLimit)
		}
	}

	// Over FUSE, mknod (and so mkfifo) is not supported at all.
	r = boundedAs(t, d.mnt, aliceHost, specialLimit, `mkfifo "$1"`, d.p("/home/alice/fifo2"))
	if r.code == 0 || !strings.Contains(r.stderr, "not supported") {
		t.Errorf("mkfifo over FUSE: %v, want EOPNOTSUPP", r)
	}
	// Many opens: none pins a daemon thread.
	r = boundedAs(t, d.mnt, aliceHost, 4*specialLimit, `for i in $(seq 400); do cat "$1" 2>/dev/null; done; echo done`, d.p("/home/alice/fifo"))
	if r.stdout != "done\n" {
		t.Fatalf("400 opens of the FIFO: %v", r)
	}
	// Tree walkers finish, reading the regular files and refusing the FIFO.
	r = boundedAs(t, d.mnt, aliceHost, specialLimit, `grep -r needle "$1"`, d.p("/home/alice"))
	if !strings.Contains(r.stdout, "a.txt:needle") {
		t.Errorf("grep -r over a home with a FIFO: %v", r)
	}
	r = boundedAs(t, d.mnt, aliceHost, specialLimit, `tar cf - -C "$1" . | tar tf -`, d.p("/home/alice"))
	if !strings.Contains(r.stdout, "./a.txt") { // (the FIFO shows as an empty file: tar reads nothing of it)
		t.Errorf("tar over a home with a FIFO: %v", r)
	}
	// fs.read refuses it too, and the daemon serves on.
	r = gsvAs(aliceHost, []string{unixAddr}, "call", "fs.read", `{"path":"~/fifo"}`)
	if !strings.Contains(r.stdout+r.stderr, "not a regular file") && !strings.Contains(r.stdout+r.stderr, "no such device") {
		t.Errorf("fs.read of the FIFO: %v", r)
	}
	mustOK(t, call9p(t, root, "sys.whoami", nil), nil)
	if b, err := os.ReadFile(d.p("/home/alice/a.txt")); err != nil || string(b) != "needle\n" {
		t.Fatalf("a regular file after all that: %q %v", b, err)
	}
}
