package main_test

// Everyday tools over the real mount (issue 21, section 2): copiers keep
// every view's bytes, tree walkers exit 0, mtimes move when content does,
// and tail -f follows the scheduler's log.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// toolsLimit guards the liveness of one wait in these tests; it holds at
// load 10.
const toolsLimit = 60 * time.Second

// waitIdle waits until the process at base (a /proc/<pid> path) has no
// run and no queue, reading its status with cat.
func waitIdle(t *testing.T, d *daemon, base string) {
	t.Helper()
	deadline := time.Now().Add(toolsLimit)
	for {
		st, err := d.cat(base + "/status")
		if err == nil && strings.Contains(st, "state: idle\n") && strings.Contains(st, "queued: 0\n") && strings.Contains(st, "run: -\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not idle: %q (%v)", base, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// busyProc spawns a process, gives it two exchanges with the offline model
// and compacts them into a segment, so that every view of it has content.
func busyProc(t *testing.T, d *daemon) (pid, base string) {
	t.Helper()
	pid = spawnProc(t, d)
	base = d.p("/proc/" + pid)
	conv := base + "/conversations/default"
	for _, msg := range []string{"first message", "second message"} {
		d.mustSh(t, `echo "$2" > "$1/in"`, conv, msg)
		waitIdle(t, d, base)
	}
	d.mustSh(t, `echo 'compact keep=1 summary=earlier' > "$1/ctl"`, conv)
	d.mustSh(t, `echo 'open second title=Second' > "$1/conversations/ctl"`, base)
	return pid, base
}

// viewsOf returns the regular files under dir (relative paths) that a copy
// must reproduce byte for byte: everything but the streams (events: what
// was pending), the ctl files (what a handle reads is its own last result)
// and in (reads as empty).
func viewsOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		switch fi.Name() {
		case "events", "ctl", "in":
			return nil
		}
		if fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestE2ECopiesKeepViews: tar, rsync, cp -r and Python's shutil.copy copy
// every view of a process byte for byte (a view's stat size is its
// content's), and exit 0.
func TestE2ECopiesKeepViews(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	pid, base := busyProc(t, d)
	out := filepath.Join(d.base, "copies")

	must := []string{"status", "run", "ipc", "conversations/default/info", "conversations/default/policy",
		"conversations/default/history", "conversations/default/transcript", "conversations/second/info"}
	copies := []struct{ name, script string }{
		{"tar", `mkdir -p "$2/tar" && tar -C "$1/proc" -cf "$2/p.tar" "$3" && tar -C "$2/tar" -xf "$2/p.tar"`},
		{"rsync", `mkdir -p "$2/rsync" && rsync -r "$1/proc/$3" "$2/rsync/"`},
		{"cp -r", `mkdir -p "$2/cp" && cp -r "$1/proc/$3" "$2/cp/"`},
		{"shutil.copy", `mkdir -p "$2/shutil/$3" && cd "$1/proc/$3" && find . -type f ! -name events ! -name ctl ! -name in | python3 -c '
import os, shutil, sys
dst = sys.argv[1]
for p in sys.stdin.read().split():
    os.makedirs(os.path.join(dst, os.path.dirname(p)), exist_ok=True)
    shutil.copy(p, os.path.join(dst, p))
' "$2/shutil/$3"`},
	}
	for _, c := range copies {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "rsync" {
				if _, err := exec.LookPath("rsync"); err != nil {
					t.Skip("no rsync")
				}
			}
			if r := d.sh(c.script, d.mnt, out, pid); r.code != 0 {
				t.Fatalf("%s: %v", c.name, r)
			}
			dir := filepath.Join(out, strings.Fields(strings.ReplaceAll(c.name, ".", " "))[0], pid)
			files := viewsOf(t, dir)
			seen := map[string]bool{}
			for _, f := range files {
				got, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				want, err := d.cat(filepath.Join(base, f))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, []byte(want)) {
					t.Errorf("%s of %s: %d bytes %.60q, want %d bytes %.60q", c.name, f, len(got), got, len(want), want)
				}
				seen[f] = len(got) > 0
			}
			for _, f := range must {
				if !seen[f] {
					t.Errorf("%s: %s is missing or empty in the copy (files: %q)", c.name, f, files)
				}
			}
			segs := 0
			for _, f := range files {
				if strings.Contains(f, "/segments/") && seen[f] {
					segs++
				}
			}
			if segs != 2 {
				t.Errorf("%s: the segment's meta and messages: %d of them copied with content (files: %q)", c.name, segs, files)
			}
		})
	}
}

// TestE2ETreeWalkersExitZero: grep -r, cp -r, tar and rsync over a process
// (in files and streams included) finish with exit 0: in reads as empty.
func TestE2ETreeWalkersExitZero(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	pid, _ := busyProc(t, d)
	out := filepath.Join(d.base, "walk")
	tools := []struct {
		name, script string
		code         int
	}{
		{"grep -r", `grep -r zzz-no-such-text "$1/proc/$3"`, 1}, // 1: no line matched; 2 is an error
		{"cp -r", `rm -rf "$2" && mkdir -p "$2" && cp -r "$1/proc/$3" "$2/"`, 0},
		{"tar", `tar -C "$1/proc" -cf - "$3" | tar -tvf -`, 0},
		{"rsync", `rm -rf "$2" && mkdir -p "$2" && rsync -r "$1/proc/$3" "$2/"`, 0},
	}
	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			if tool.name == "rsync" {
				if _, err := exec.LookPath("rsync"); err != nil {
					t.Skip("no rsync")
				}
			}
			r := runCmd(d.work, nil, nil, "bash", "-o", "pipefail", "-c", tool.script, "bash", d.mnt, out, pid)
			if r.code != tool.code || r.stderr != "" {
				t.Fatalf("%s: %v (want exit %d, no message)", tool.name, r, tool.code)
			}
		})
	}
	// The copies hold in as an empty file.
	fi, err := os.Stat(filepath.Join(out, pid, "conversations", "default", "in"))
	if err != nil || fi.Size() != 0 {
		t.Fatalf("rsync'd in: %v %v", fi, err)
	}
}

// newerThan lists what find -newer ref finds under dirs (paths relative to
// base).
func newerThan(t *testing.T, d *daemon, base, ref string, dirs ...string) []string {
	t.Helper()
	r := d.sh(`ref=$1 base=$2; shift 2; cd "$base" && find "$@" -newer "$ref"`, append([]string{ref, base}, dirs...)...)
	if r.code != 0 {
		t.Fatalf("find -newer: %v", r)
	}
	return strings.Fields(r.stdout)
}

// settle touches ref until nothing under dirs is newer than it: the
// changes under way when it is called have all been made.
func settle(t *testing.T, d *daemon, base, ref string, dirs ...string) {
	t.Helper()
	deadline := time.Now().Add(toolsLimit)
	for {
		d.mustSh(t, `touch "$1"`, ref)
		if n := newerThan(t, d, base, ref, dirs...); len(n) == 0 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("still newer than the reference: %q", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EMtimes: a synthetic file's mtime is when its content last
// changed, a directory's when an entry came or went: find -newer finds
// exactly what changed.
func TestE2EMtimes(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	pid := spawnProc(t, d)
	base := d.p("/proc/" + pid)
	ref := filepath.Join(d.work, "ref")
	contains := func(list []string, want ...string) bool {
		for _, w := range want {
			found := false
			for _, l := range list {
				found = found || l == w
			}
			if !found {
				return false
			}
		}
		return true
	}

	// A message lands: the history, the transcript, the conversation's
	// info, the status and the run change; the policy, the process's own
	// directory and the conversations listing do not.
	settle(t, d, base, ref, ".")
	d.mustSh(t, `echo 'what changed?' > "$1/conversations/default/in"`, base)
	waitIdle(t, d, base)
	got := newerThan(t, d, base, ref, ".")
	if want := []string{"./status", "./run", "./conversations/default/history", "./conversations/default/transcript",
		"./conversations/default/info"}; !contains(got, want...) {
		t.Errorf("after a message, newer: %q; want at least %q", got, want)
	}
	for _, not := range []string{".", "./conversations", "./conversations/default/policy", "./ctl"} {
		if contains(got, not) {
			t.Errorf("after a message, %s is newer; it did not change (newer: %q)", not, got)
		}
	}

	// An entry comes: the conversations directory changes.
	settle(t, d, base, ref, ".")
	d.mustSh(t, `echo 'open other' > "$1/conversations/ctl"`, base)
	if got := newerThan(t, d, base, ref, "./conversations", "-maxdepth", "0"); len(got) != 1 {
		t.Errorf("after a conversation opened, newer: %q; want ./conversations", got)
	}
	// The policy changes alone.
	settle(t, d, base, ref, ".")
	d.mustSh(t, `echo 'policy keep=5' > "$1/conversations/default/ctl"`, base)
	if got := newerThan(t, d, base, ref, "."); !contains(got, "./conversations/default/policy") || contains(got, "./conversations/default/history") {
		t.Errorf("after a policy change, newer: %q; want the policy and not the history", got)
	}

	// /proc changes when a process is spawned.
	settle(t, d, d.mnt, ref, "proc", "-maxdepth", "0")
	spawnProc(t, d)
	if got := newerThan(t, d, d.mnt, ref, "proc", "-maxdepth", "0"); len(got) != 1 {
		t.Errorf("after a spawn, /proc is not newer: %q", got)
	}
}

// TestE2ETailSchedulerLog: tail -f of /gsv/var/log/gsv/scheduler shows each
// new run as it is logged, without "file truncated".
func TestE2ETailSchedulerLog(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	d.mustSh(t, `echo '@every 1h  event init:0 tick  # name=tick' >> "$1/var/spool/cron/root"`, d.mnt)
	logPath := d.p("/var/log/gsv/scheduler")
	d.mustGsv(t, "sched", "run", "tick")

	tail := exec.Command("tail", "-f", logPath)
	tail.Dir = d.work
	tail.Env = append(os.Environ(), "LC_ALL=C")
	var stderr syncBuffer
	tail.Stderr = &stderr
	lines := catStream(t, tail)
	waitOpen(t, tail.Process.Pid, logPath)
	if l := nextLine(t, lines, toolsLimit); !strings.Contains(l, `"schedule":"tick"`) {
		t.Fatalf("tail's first line: %q", l)
	}
	for i := range 2 {
		d.mustGsv(t, "sched", "run", "tick")
		if l := nextLine(t, lines, toolsLimit); !strings.Contains(l, `"schedule":"tick"`) {
			t.Fatalf("run %d: tail printed %q", i+2, l)
		}
	}
	if s := stderr.String(); s != "" {
		t.Fatalf("tail -f: %s", s)
	}
}

// TestE2ERemoteErrnosAndDf: through a remote mount (gsvfs mount --kernel)
// a failure has the errno it has on the kernel's own mount (a bad ctl
// line is EINVAL, not EIO), and df shows the kernel's figures, not zeros.
func TestE2ERemoteErrnosAndDf(t *testing.T) {
	k := startDaemon(t, newBase(t), daemonOpts{mount: true})
	r := startRemoteMount(t, k, "unix!"+k.sock)
	k.mustSh(t, `echo 'open other' > "$1/proc/init:0/conversations/ctl" && echo 'close other' > "$1/proc/init:0/conversations/ctl"`, k.mnt)
	for _, c := range []struct {
		name, script string
		errno        syscall.Errno
	}{
		{"a notify level", `echo 'create title=x level=zzz' > "$1/var/notify/ctl"`, syscall.EINVAL},
		{"an unknown verb", `echo 'bogus' > "$1/var/notify/ctl"`, syscall.EINVAL},
		{"a ctl usage", `echo 'abort now' > "$1/proc/init:0/ctl"`, syscall.EINVAL},
		{"a config usage", `echo 'unset' > "$1/sys/config/ctl"`, syscall.EINVAL},
		{"a closed conversation", `echo hi > "$1/proc/init:0/conversations/other/in"`, syscall.EBUSY},
		{"a missing file", `cat "$1/proc/init:0/nosuch"`, syscall.ENOENT},
		{"a view", `echo x > "$1/etc/passwd"`, syscall.EACCES},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []*daemon{k, r} {
				res := runCmd(m.work, nil, nil, "bash", "-c", c.script, "bash", m.mnt)
				if res.code == 0 || errnoOf(res.stderr) != c.errno {
					t.Errorf("on %s: %v; want %v", m.mnt, res, c.errno)
				}
			}
		})
	}

	df := func(p string) (size, avail int64) {
		t.Helper()
		res := k.sh(`df -B1 --output=size,avail "$1" | tail -1`, p)
		f := strings.Fields(res.stdout)
		if res.code != 0 || len(f) != 2 {
			t.Fatalf("df %s: %v", p, res)
		}
		size, _ = strconv.ParseInt(f[0], 10, 64)
		avail, _ = strconv.ParseInt(f[1], 10, 64)
		return size, avail
	}
	ks, ka := df(k.mnt)
	rs, ra := df(r.mnt)
	if rs == 0 || rs != ks || ra-ka > 64<<20 || ka-ra > 64<<20 {
		t.Fatalf("df of the remote mount: size %d avail %d; of the kernel's: size %d avail %d", rs, ra, ks, ka)
	}
}
