package main_test

// Symbolic and hard links in a user's own tree, through the real mount
// with the real ln, readlink, ls and python3 -m venv.

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestE2ELinks(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	root := d.dial(t)
	alice, bob := aliceHost, bobHost
	addUser(t, root, "alice", alice)
	addUser(t, root, "bob", bob)
	home := d.p("/home/alice")

	t.Run("Symlinks", func(t *testing.T) {
		r := d.shAs(alice, `cd "$1" && echo hi > f && ln -s f s && ln -s /usr/bin/python3 py &&
			readlink s py && cat s && stat -c '%F %s' s && ls -l`, home)
		if r.code != 0 {
			t.Fatalf("ln -s as alice: %v", r)
		}
		for _, want := range []string{"f\n/usr/bin/python3\nhi\nsymbolic link 1\n", " s -> f\n", " py -> /usr/bin/python3\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("ln -s, readlink, cat, stat, ls -l: %v\nwant %q", r, want)
			}
		}
		if !strings.Contains(r.stdout, "\nlrwxrwxrwx 1 "+strconv.Itoa(alice)+" users ") {
			t.Errorf("ls -l does not show the link as alice's: %q", r.stdout)
		}
		// The target is the client's to resolve: an absolute one runs the
		// client host's python3.
		if r := d.shAs(alice, `"$1/py" -c 'print(6*7)'`, home); r.code != 0 || r.stdout != "42\n" {
			t.Errorf("running a link to /usr/bin/python3: %v", r)
		}
		if r := d.shAs(alice, `rm "$1/s" && ls "$1"`, home); r.code != 0 || strings.Contains(r.stdout, "s\n") || !strings.Contains(r.stdout, "f\n") {
			t.Errorf("rm of a link: %v", r)
		}
	})

	t.Run("HardLinks", func(t *testing.T) {
		r := d.shAs(alice, `cd "$1" && echo one > a && ln a b && echo two >> b && cat a && stat -c '%h %i' a b`, home)
		if r.code != 0 {
			t.Fatalf("ln as alice: %v", r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 4 || lines[0] != "one" || lines[1] != "two" || lines[2] != lines[3] || !strings.HasPrefix(lines[2], "2 ") {
			t.Errorf("hard link a, b: %v", r)
		}
		// Across owners: refused, whoever asks.
		if r := d.shAs(bob, `echo b > "$1/bobfile"`, d.p("/home/bob")); r.code != 0 {
			t.Fatal(r)
		}
		r = d.shAs(alice, `ln "$1" "$2"`, d.p("/home/bob/bobfile"), home+"/stolen")
		if r.code == 0 || (errnoOf(r.stderr) != syscall.EXDEV && !strings.Contains(r.stderr, "Permission denied")) {
			t.Errorf("alice hard-links bob's file into her home: %v", r)
		}
		r = d.sh(`ln "$1" "$2"`, d.p("/home/bob/bobfile"), home+"/rootmade")
		if r.code == 0 || !strings.Contains(r.stderr, "Invalid cross-device link") {
			t.Errorf("root hard-links across owners: %v", r)
		}
		if _, err := os.Lstat(home + "/stolen"); err == nil {
			t.Error("a refused hard link exists")
		}
	})

	t.Run("NoEscape", func(t *testing.T) {
		// A link is resolved by the client, as the client: a link to
		// bob's 0600 file reads nothing alice cannot read.
		if r := d.shAs(bob, `echo s3cret > "$1" && chmod 600 "$1"`, d.p("/home/bob/secret")); r.code != 0 {
			t.Fatal(r)
		}
		r := d.shAs(alice, `ln -s ../bob/secret "$1/x" && ln -s "$2" "$1/y" && cat "$1/x"; cat "$1/y"`, home, d.p("/home/bob/secret"))
		if strings.Contains(r.stdout, "s3cret") || strings.Count(r.stderr, "Permission denied") != 2 {
			t.Errorf("alice reads bob's secret through her links: %v", r)
		}
		// The daemon's own calls follow no link: fs.read of alice's link
		// to bob's file (as root, who could read the file itself).
		f := call9p(t, root, "fs.read", map[string]any{"path": "/home/alice/x"})
		if strings.Contains(string(f.Data), "s3cret") || !strings.Contains(string(f.Data), `"ok":false`) {
			t.Errorf("fs.read followed a link: %s", f.Data)
		}
		// Over 9P (no symbolic links in 9P2000) a link reads as its target.
		if s, err := readAll9p(root, "/home/alice/x"); err != nil || s != "../bob/secret" {
			t.Errorf("9P read of a link: %q, %v", s, err)
		}
	})

	t.Run("Venv", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/python3"); err != nil {
			t.Skip("needs /usr/bin/python3")
		}
		// As alice, with the system python3 (no ensurepip needed).
		r := d.shAs(alice, `cd "$1" && /usr/bin/python3 -m venv --without-pip v && ls -l v/bin && v/bin/python -c 'import sys; print(sys.prefix)'`, home)
		if r.code != 0 || !strings.Contains(r.stdout, home+"/v\n") || !strings.Contains(r.stdout, "python -> ") {
			t.Fatalf("python3 -m venv as alice: %v", r)
		}
		// As root, with root's own python3 and pip.
		py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		if err != nil {
			t.Skipf("no python3 for root: %v", err)
		}
		// ensurepip installs pip into the venv: thousands of small files,
		// longer than cmdTimeout on a busy machine.
		rootHome := d.p("/home/root")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		cmd := exec.CommandContext(ctx, "sh", "-c", `cd "$1" && "$2" -m venv v && v/bin/python -m pip --version && v/bin/python -c 'import sys; print(sys.prefix)'`,
			"sh", rootHome, strings.TrimSpace(string(py)))
		cmd.Dir = d.work
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), rootHome+"/v\n") || !strings.Contains(string(out), "pip ") {
			t.Fatalf("python3 -m venv as root: %v\n%s", err, out)
		}
		t.Logf("python3 -m venv with pip as root: %v", time.Since(start))
	})
}
