package main_test

// Sandboxes against a real daemon (issue 20): what a user reads and
// writes from inside an exec session, a shell.exec and a CodeMode block's
// shell is what the namespace lets them, file by file (item 1); a
// CodeMode worker dies with a daemon killed outright, and the daemon
// removes what a dead daemon left staged as it starts (item 15); a
// sandbox's command line names no host path (item 17).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sbProbe is one access a sandbox tries: r reads a file, l lists a
// directory, w opens an existing file for writing (appending nothing), c
// creates (and removes) a new file.
type sbProbe struct {
	op, path string
	want     bool
}

// sbMatrix is what user me may do to the files sbFiles makes, other
// being the other user: the namespace's verdicts, which the FUSE mount
// gives too (the test checks it).
func sbMatrix(me, other string, archives map[string]string) []sbProbe {
	o, m := "/home/"+other, "/home/"+me
	return []sbProbe{
		{"r", o + "/secret.txt", false},
		{"w", o + "/secret.txt", false},
		{"r", o + "/group.txt", true}, // both are in the users group
		{"w", o + "/group.txt", false},
		{"r", o + "/public.txt", true},
		{"w", o + "/public.txt", false},
		{"c", o + "/new.txt", false},
		{"l", o + "/private", false},
		{"r", o + "/private/in.txt", false},
		{"r", m + "/secret.txt", true},
		{"w", m + "/secret.txt", true},
		{"l", m + "/private", true},
		{"r", m + "/private/in.txt", true},
		{"c", m + "/new.txt", true},
		{"r", "/home/root/secret.txt", false},
		{"r", "/home/root/public.txt", true},
		{"c", "/home/root/new.txt", false},
		{"r", "/workspaces/w/rootgroup.txt", false},
		{"r", "/workspaces/w/open.txt", true},
		{"w", "/workspaces/w/open.txt", false},
		{"c", "/workspaces/w/new.txt", false},
		{"l", filepath.Dir(archives[other]), false},
		{"r", archives[other], false},
		{"r", archives[me], true},
	}
}

// sbUnder keeps the probes of paths at or below one of prefixes.
func sbUnder(ps []sbProbe, prefixes ...string) []sbProbe {
	var out []sbProbe
	for _, p := range ps {
		for _, pre := range prefixes {
			if p.path == pre || strings.HasPrefix(p.path, strings.TrimSuffix(pre, "/")+"/") {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// sbScript is a shell script that tries each probe (its path under
// prefix) and prints "<op> <path> yes|no" for each.
func sbScript(ps []sbProbe, prefix string) string {
	var b strings.Builder
	b.WriteString(`t() { if "$@" 2>/dev/null; then echo yes; else echo no; fi; }
r() { cat -- "$1" >/dev/null; }
l() { ls -- "$1" >/dev/null; }
w() { ( : >>"$1" ); }
c() { ( : >"$1" ) && rm -f -- "$1"; }
`)
	for _, p := range ps {
		fmt.Fprintf(&b, "printf '%%s %%s ' %s '%s'; t %s '%s%s'\n", p.op, p.path, p.op, prefix, p.path)
	}
	return b.String()
}

// sbCheck compares a probe script's output with ps.
func sbCheck(t *testing.T, where string, ps []sbProbe, out string) {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			got[f[0]+" "+f[1]] = f[2]
		}
	}
	var bad []string
	for _, p := range ps {
		want := map[bool]string{true: "yes", false: "no"}[p.want]
		if g := got[p.op+" "+p.path]; g != want {
			bad = append(bad, p.op+" "+p.path+": got "+g+", want "+want)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%s:\n  %s\noutput:\n%s", where, strings.Join(bad, "\n  "), out)
	}
}

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("sandboxes need bubblewrap (bwrap)")
	}
}

// The whole permission matrix from inside sandboxes, as alice and bob:
// other users' 0600 files and 0700 directories, 0640 files of the users
// group, root's home, /workspaces, /var/sessions (real archives of
// conversations) and blobs, read and written from an exec session (two
// sets of mounts), shell.exec (a working directory in each part of the
// tree, bob's home among them) and a CodeMode block's shell. The files
// are made through the mount by their owners; the FUSE mount's own
// verdicts are the matrix's.
func TestE2ESandboxPermissions(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	requireBwrap(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	M := d.mnt
	unixAddr := []string{"GSV_ADDR=unix!" + d.sock}
	hosts := map[string]int{"alice": aliceHost, "bob": bobHost}
	ok := func(r shResult, what string) string {
		t.Helper()
		if r.err != nil || r.code != 0 {
			t.Fatalf("%s: %v", what, r)
		}
		return r.stdout
	}

	// Each user's files, made through the mount as that user.
	for name, host := range hosts {
		ok(d.shAs(host, `H="$1/home/$2"
			echo secret > "$H/secret.txt" && chmod 600 "$H/secret.txt" &&
			echo group > "$H/group.txt" && chmod 640 "$H/group.txt" &&
			echo public > "$H/public.txt" && chmod 644 "$H/public.txt" &&
			mkdir "$H/private" && chmod 700 "$H/private" && echo in > "$H/private/in.txt"`, M, name), name+"'s files")
	}
	ok(d.sh(`echo secret > "$1/home/root/secret.txt" && chmod 600 "$1/home/root/secret.txt" &&
		echo public > "$1/home/root/public.txt" && chmod 644 "$1/home/root/public.txt" &&
		mkdir "$1/workspaces/w" && echo rg > "$1/workspaces/w/rootgroup.txt" && chmod 640 "$1/workspaces/w/rootgroup.txt" &&
		echo open > "$1/workspaces/w/open.txt" && chmod 644 "$1/workspaces/w/open.txt"`, M), "root's files")

	// A real archived conversation of each user: a process spoken to,
	// then killed, archives its conversation under /var/sessions/<user>.
	archives := map[string]string{}
	for name, host := range hosts {
		pid := strings.TrimSpace(ok(gsvAs(host, unixAddr, "spawn", "task"), name+": gsv spawn"))
		ok(gsvAs(host, unixAddr, "send", "--pid", pid, "a message to archive"), name+": gsv send")
		ok(gsvAs(host, unixAddr, "kill", pid), name+": gsv kill")
		dir := filepath.Join(d.state, "fs", "var", "sessions", name)
		waitFor(t, 20*time.Second, name+"'s archive", func() bool {
			ms, _ := filepath.Glob(filepath.Join(dir, pid, "*", "*.jsonl.gz"))
			if len(ms) == 0 {
				return false
			}
			archives[name] = "/" + strings.TrimPrefix(ms[0], filepath.Join(d.state, "fs")+"/")
			return true
		})
	}
	// A blob of bob's: a large output of his session.
	bsid := strings.TrimSpace(ok(gsvAs(bobHost, unixAddr, "session", "open"), "bob: gsv session open"))
	ok(gsvAs(bobHost, unixAddr, "exec", bsid, "--", "head", "-c", "40000", "/dev/zero"), "bob: a large output")
	blobs, _ := filepath.Glob(filepath.Join(d.state, "blobs", "sha256", "*"))
	if len(blobs) == 0 {
		t.Fatal("no blob")
	}

	for _, u := range []struct{ me, other string }{{"alice", "bob"}, {"bob", "alice"}} {
		host := hosts[u.me]
		ps := sbMatrix(u.me, u.other, archives)
		blobProbes := []sbProbe{{"r", blobs[0], false}, {"l", filepath.Dir(blobs[0]), false}}

		// The namespace's verdicts, through the mount: the same matrix.
		sbCheck(t, u.me+" on the FUSE mount", ps, ok(d.shAs(host, sbScript(ps, M)), u.me+": probes on the mount"))

		// shell.exec and CodeMode's shell in each part of the tree: the
		// working directory mounted (read-only outside the user's own
		// tree), the home read-write.
		for _, cwd := range []string{"/home/" + u.other, "/home", "/home/root", "/workspaces", "/var/sessions"} {
			want := append(sbUnder(ps, cwd, "/home/"+u.me), blobProbes...)
			script := sbScript(want, "")
			args, _ := json.Marshal(map[string]any{"input": script, "cwd": cwd})
			var res struct {
				Status string
				Output string
			}
			out := ok(gsvAs(host, unixAddr, "call", "shell.exec", string(args)), u.me+": gsv call shell.exec in "+cwd)
			if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != "completed" {
				t.Fatalf("%s: shell.exec in %s: %v %q", u.me, cwd, err, out)
			}
			sbCheck(t, u.me+"'s shell.exec in "+cwd, want, res.Output)

			js, _ := json.Marshal(script)
			jc, _ := json.Marshal(cwd)
			code := fmt.Sprintf(`const r = await shell(%s, {cwd: %s});
if (r.status !== "completed") throw new Error(JSON.stringify(r));
return r.output;`, js, jc)
			out = ok(gsvAs(host, unixAddr, "codemode", "--json", "-e", code), u.me+": gsv codemode in "+cwd)
			var cm struct {
				Status string
				Result string
			}
			if err := json.Unmarshal([]byte(out), &cm); err != nil || cm.Status != "completed" {
				t.Fatalf("%s: codemode in %s: %v %q", u.me, cwd, err, out)
			}
			sbCheck(t, u.me+"'s CodeMode shell in "+cwd, want, cm.Result)
		}

		// Exec sessions: the whole data tree read-only (the home
		// read-write), then the other's home, root's home, the user's
		// own archives and /workspaces/w one by one.
		for _, mounts := range [][]string{
			{"/home:/home:ro", "~:/home/" + u.me + ":rw", "/workspaces:/workspaces:ro", "/var/sessions:/var/sessions:ro"},
			{"/home/" + u.other + ":/home/" + u.other + ":ro", "/home/root:/home/root:ro",
				"/var/sessions/" + u.me + ":/var/sessions/" + u.me + ":ro", "/workspaces/w:/workspaces/w:rw"},
		} {
			args := []string{"session", "open"}
			var guests []string
			for _, m := range mounts {
				args = append(args, "--mount", m)
				guests = append(guests, strings.Split(m, ":")[1])
			}
			sid := strings.TrimSpace(ok(gsvAs(host, unixAddr, args...), u.me+": gsv "+strings.Join(args, " ")))
			want := append(sbUnder(ps, guests...), blobProbes...)
			out := ok(gsvAs(host, unixAddr, "exec", sid, "--", "sh", "-c", sbScript(want, "")), u.me+": gsv exec")
			sbCheck(t, u.me+"'s session mounting "+strings.Join(guests, " "), want, out)
		}
		// The other's archives, and the blob store, are no directory the
		// user may mount.
		for _, m := range []string{"/var/sessions/" + u.other + ":/a:ro", "/var/blobs:/b:ro"} {
			if r := gsvAs(host, unixAddr, "session", "open", "--mount", m); r.code == 0 || !strings.Contains(r.stderr, "(403)") {
				t.Errorf("%s: a session mounting %s: %v", u.me, m, r)
			}
		}
	}
}

// workerPids are the pids of the CodeMode workers among pid's children.
func workerPids(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if env, _ := os.ReadFile("/proc/" + e.Name() + "/environ"); strings.Contains(string(env), "GSV_CODEMODE_WORKER=1") {
			out = append(out, p)
		}
	}
	return out
}

// procCPU is the CPU time (user and system, in clock ticks) pid has used
// and its state, or -1 if it is gone.
func procCPU(pid int) (int, string) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1, ""
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if len(f) < 13 {
		return -1, ""
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s, f[0]
}

// A CodeMode block in a busy loop dies with a daemon killed outright,
// and so do the warm workers: none runs on, reparented, to its wall time.
func TestE2ECodeModeDiesWithDaemon(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	daemonPid := d.cmd.Process.Pid
	cmd := exec.Command(gsvBin, "codemode", "--timeout", "5m", "-e", "while (true) {}")
	cmd.Env = append(os.Environ(), "GSV_ADDR=unix!"+d.sock, raceEnv)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	// The block is running: a worker of the daemon has used CPU.
	var busy int
	waitFor(t, 30*time.Second, "a busy CodeMode worker", func() bool {
		for _, p := range workerPids(daemonPid) {
			if cpu, _ := procCPU(p); cpu >= 20 {
				busy = p
				return true
			}
		}
		return false
	})
	workers := workerPids(daemonPid)
	d.kill()
	waitFor(t, 20*time.Second, fmt.Sprintf("the workers %v (busy: %d) to die with the daemon", workers, busy), func() bool {
		for _, p := range workers {
			if cpu, state := procCPU(p); cpu >= 0 && state != "Z" {
				return false
			}
		}
		return true
	})
}

// stagedUnder lists the mount points at or below dir.
func stagedUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			out = append(out, fs[4])
		}
	}
	return out
}

// The staging of a daemon killed outright (its sessions' mounts under
// /run/gsvfs) is removed by the next daemon as it starts, before any
// session opens.
func TestE2EStaleStagingRemovedAtStart(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	unixAddr := []string{"GSV_ADDR=unix!" + d.sock}
	r := gsvAs(aliceHost, unixAddr, "session", "open", "--mount", "~:/work:rw")
	if r.code != 0 {
		t.Fatalf("gsv session open: %v", r)
	}
	dirs, _ := filepath.Glob(fmt.Sprintf("/run/gsvfs/%d-*", d.cmd.Process.Pid))
	if len(dirs) != 1 || len(stagedUnder(t, dirs[0])) == 0 {
		t.Fatalf("the daemon's staging: %v", dirs)
	}
	staging := dirs[0]
	d.kill()
	if len(stagedUnder(t, staging)) == 0 {
		t.Fatalf("%s was unmounted by a daemon killed outright", staging)
	}
	// The next daemon on the same state; no session is opened.
	d2 := startDaemon(t, base, daemonOpts{})
	if left := stagedUnder(t, staging); len(left) != 0 {
		t.Fatalf("the next daemon left the dead one's mounts: %v", left)
	}
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Fatalf("the next daemon left %s: %v", staging, err)
	}
	d2.stop()
}

// A sandbox's command line names no host path (its directories are
// bound from descriptors), and its mount table names no staging path.
func TestE2ESandboxHidesHostPaths(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	d := startDaemon(t, newBase(t), daemonOpts{})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	unixAddr := []string{"GSV_ADDR=unix!" + d.sock}
	probe := `tr '\0' ' ' </proc/1/cmdline; echo; cat /proc/self/mountinfo`
	sid := strings.TrimSpace(gsvAs(aliceHost, unixAddr, "session", "open", "--mount", "~:/work:rw").stdout)
	outs := map[string]string{}
	r := gsvAs(aliceHost, unixAddr, "exec", sid, "--", "sh", "-c", probe)
	if r.code != 0 {
		t.Fatalf("gsv exec: %v", r)
	}
	outs["session"] = r.stdout
	args, _ := json.Marshal(map[string]any{"input": probe})
	r = gsvAs(aliceHost, unixAddr, "call", "shell.exec", string(args))
	var res struct{ Output string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("gsv call shell.exec: %v", r)
	}
	outs["shell.exec"] = res.Output
	for what, out := range outs {
		cmdline, mountinfo, _ := strings.Cut(out, "\n")
		if !strings.Contains(cmdline, "bwrap") {
			t.Fatalf("%s: /proc/1/cmdline %q", what, cmdline)
		}
		for _, p := range []string{d.state, "/run/gsvfs"} {
			if strings.Contains(cmdline, p) {
				t.Errorf("%s: /proc/1/cmdline names %s: %s", what, p, cmdline)
			}
		}
		if strings.Contains(mountinfo, "/run/gsvfs") {
			t.Errorf("%s: /proc/self/mountinfo names the staging directory:\n%s", what, mountinfo)
		}
	}
}
