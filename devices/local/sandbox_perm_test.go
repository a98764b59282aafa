package local_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
)

// The permission matrix, run from inside sandboxes: what a user reads
// and writes in an exec session and in shell.exec is what the namespace
// lets them, file by file (issue 20, item 1).

// probe is one access a sandbox tries: r reads a file, l lists a
// directory, w opens an existing file for writing (appending nothing), c
// creates (and removes) a new file.
type probe struct {
	op, path string
	want     bool
}

// matrixFiles makes the files of the matrix, each through the device as
// its owner (so with the disk owners the daemon gives): for u in alice
// and bob, /home/<u>/{secret.txt 0600, group.txt 0640, public.txt 0644,
// private/ 0700 with in.txt}; root's /home/root/{secret,public}.txt and
// /workspaces/w/{rootgroup.txt 0640, open.txt 0644}; and an archive of
// each user's under /var/sessions/<u>, 0600, made by the kernel as proc
// makes them.
func matrixFiles(t *testing.T, k *env, root, alice, bob *kernel.Identity) {
	t.Helper()
	ctx := context.Background()
	put := func(id *kernel.Identity, p string, mode fs.FileMode) {
		t.Helper()
		res, err := k.Call(ctx, &kernel.Caller{Identity: id}, "fs.write", &abi.FSWriteArgs{Path: p, Content: p + "\n"})
		if err != nil || !res.(*abi.FSWriteResult).OK {
			t.Fatalf("fs.write %s: %v %+v", p, err, res)
		}
		if _, err := k.Call(ctx, &kernel.Caller{Identity: id}, "fs.setattr", &local.SetattrArgs{Path: strings.TrimPrefix(p, "/"), Set: abi.SetAttr{Mode: &mode}}); err != nil {
			t.Fatalf("chmod %s: %v", p, err)
		}
	}
	mkdir := func(id *kernel.Identity, p string, mode fs.FileMode) {
		t.Helper()
		if _, err := k.Call(ctx, &kernel.Caller{Identity: id}, "fs.mkdir", &local.MkdirArgs{Path: strings.TrimPrefix(p, "/"), Perm: mode}); err != nil {
			t.Fatalf("mkdir %s: %v", p, err)
		}
	}
	for _, u := range []struct {
		id   *kernel.Identity
		name string
	}{{alice, "alice"}, {bob, "bob"}} {
		h := "/home/" + u.name
		put(u.id, h+"/secret.txt", 0o600)
		put(u.id, h+"/group.txt", 0o640)
		put(u.id, h+"/public.txt", 0o644)
		mkdir(u.id, h+"/private", 0o700)
		put(u.id, h+"/private/in.txt", 0o644)
		f, err := kernel.Do(ctx, k.Kernel, k.KernelCaller(), abi.FsCreate,
			&abi.FileArgs{Path: "/var/sessions/" + u.name + "/p_1/c/seg.jsonl.gz", Perm: 0o600})
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("archived conversation of " + u.name + "\n")
		f.Close()
	}
	put(root, "/home/root/secret.txt", 0o600)
	put(root, "/home/root/public.txt", 0o644)
	mkdir(root, "/workspaces/w", 0o755)
	put(root, "/workspaces/w/rootgroup.txt", 0o640)
	put(root, "/workspaces/w/open.txt", 0o644)
}

// matrix is the expected matrix for user me, other being the other user;
// the namespace's own verdicts (checked against fs.read for the reads).
func matrix(me, other string, extra ...probe) []probe {
	o, m := "/home/"+other, "/home/"+me
	return append([]probe{
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
		{"r", m + "/group.txt", true},
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
		{"l", "/var/sessions/" + other + "/p_1", false},
		{"r", "/var/sessions/" + other + "/p_1/c/seg.jsonl.gz", false},
		{"r", "/var/sessions/" + me + "/p_1/c/seg.jsonl.gz", true},
	}, extra...)
}

// under keeps the probes of paths at or below one of prefixes.
func under(ps []probe, prefixes ...string) []probe {
	var out []probe
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

// probeScript is a shell script that tries each probe and prints
// "<op> <path> yes|no" for each.
func probeScript(ps []probe) string {
	var b strings.Builder
	b.WriteString(`t() { if "$@" 2>/dev/null; then echo yes; else echo no; fi; }
r() { cat -- "$1" >/dev/null; }
l() { ls -- "$1" >/dev/null; }
w() { ( : >>"$1" ); }
c() { ( : >"$1" ) && rm -f -- "$1"; }
`)
	for _, p := range ps {
		b.WriteString("printf '%s %s ' " + p.op + " '" + p.path + "'; t " + p.op + " '" + p.path + "'\n")
	}
	return b.String()
}

// checkProbes compares a probe script's output with ps.
func checkProbes(t *testing.T, where string, ps []probe, out string) {
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

func TestSandboxPermissionMatrix(t *testing.T) {
	needSandbox(t)
	k, root, alice, bob := newKernel(t)
	matrixFiles(t, k, root, alice, bob)
	ctx := context.Background()
	// A blob of bob's: large output kept under the state directory.
	bs := openSession(t, k, bob, abi.ProcessLocalTarget{NetworkMode: "none"})
	br := execIn(t, k, bob, bs.SessionID, "head", "-c", "40000", "/dev/zero")
	if br.Stdout == nil || br.Stdout.Blob == nil {
		t.Fatalf("no blob: %+v", br)
	}
	blob := filepath.Join(k.StateDir(), "blobs", "sha256", strings.TrimPrefix(br.Stdout.Blob.BlobRef, "sha256:"))
	if _, err := os.Stat(blob); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		id        *kernel.Identity
		me, other string
	}{{alice, "alice", "bob"}, {bob, "bob", "alice"}} {
		ps := matrix(u.me, u.other, probe{"r", blob, false}, probe{"l", filepath.Dir(blob), false})
		// The namespace's verdicts are the matrix's: fs.read as the user.
		for _, p := range ps {
			if p.op != "r" || !strings.HasPrefix(p.path, "/home") && !strings.HasPrefix(p.path, "/var/sessions") && !strings.HasPrefix(p.path, "/workspaces") {
				continue
			}
			res, err := k.Call(ctx, &kernel.Caller{Identity: u.id}, "fs.read", &abi.FSReadArgs{Path: p.path})
			if ok := err == nil && res.(*abi.FSReadResult).OK; ok != p.want {
				t.Errorf("%s: the namespace's fs.read %s: %v, the matrix says %v", u.me, p.path, ok, p.want)
			}
		}

		// An exec session mounting the whole data tree (read-only, the
		// home read-write), and one mounting the other user's home, root's
		// home and the other's archives one by one.
		for _, ms := range [][]abi.ProcessMount{
			{{HostPath: "/home", GuestPath: "/home", Mode: "ro"}, {HostPath: "~", GuestPath: "/home/" + u.me, Mode: "rw"},
				{HostPath: "/workspaces", GuestPath: "/workspaces", Mode: "ro"}, {HostPath: "/var/sessions", GuestPath: "/var/sessions", Mode: "ro"}},
			{{HostPath: "/home/" + u.other, GuestPath: "/home/" + u.other, Mode: "ro"}, {HostPath: "/home/root", GuestPath: "/home/root", Mode: "ro"},
				{HostPath: "/var/sessions/" + u.me, GuestPath: "/var/sessions/" + u.me, Mode: "ro"}, {HostPath: "/workspaces/w", GuestPath: "/workspaces/w", Mode: "rw"}},
		} {
			s := openSession(t, k, u.id, abi.ProcessLocalTarget{NetworkMode: "none", Mounts: ms})
			var seen []string
			for _, m := range s.Isolation.Mounts {
				seen = append(seen, m.GuestPath)
			}
			want := under(ps, seen...)
			want = append(want, under(ps, filepath.Dir(blob))...)
			r := execIn(t, k, u.id, s.SessionID, "sh", "-c", probeScript(want))
			if r.Status != "ok" {
				t.Fatalf("%s: exec: %+v %q", u.me, r, text(r.Stderr))
			}
			checkProbes(t, u.me+"'s session mounting "+strings.Join(seen, " "), want, text(r.Stdout))
		}

		// shell.exec in each part of the data tree: the working directory
		// is mounted (read-only outside the caller's tree), the home
		// read-write.
		for _, cwd := range []string{"/home/" + u.other, "/home", "/home/root", "/workspaces", "/var/sessions"} {
			want := under(ps, cwd, "/home/"+u.me)
			want = append(want, under(ps, filepath.Dir(blob))...)
			res, err := k.Call(ctx, &kernel.Caller{Identity: u.id}, "shell.exec", &abi.ShellExecArgs{Cwd: cwd, Input: probeScript(want)})
			if err != nil {
				t.Fatalf("%s: shell.exec in %s: %v", u.me, cwd, err)
			}
			r := res.(*abi.ShellExecResult)
			if r.Status != "completed" {
				t.Fatalf("%s: shell.exec in %s: %+v", u.me, cwd, r)
			}
			checkProbes(t, u.me+"'s shell.exec in "+cwd, want, r.Output)
		}

		// The blob store is no directory of the namespace to mount.
		_, err := sessionCall[*abi.SessionOpenResult](t, k, u.id, "process.session.open", &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{
			NetworkMode: "none", Mounts: []abi.ProcessMount{{HostPath: "/var/blobs", GuestPath: "/blobs", Mode: "ro"}}}}})
		if kindOf(err) != abi.Permission {
			t.Errorf("%s: a session mounting /var/blobs: %v", u.me, err)
		}
	}
}

// A data tree made before disk owners were kept (every file the host's
// root's) is swept at the device's first start: each file gets its
// owner's disk ids, and a sandbox then reads only what the namespace
// allows; the sweep does not run again.
func TestOwnersSweep(t *testing.T) {
	needSandbox(t)
	k, _, alice, _ := newKernel(t)
	data := k.dataPath
	for _, f := range []struct {
		rel  string
		mode os.FileMode
	}{
		{"home/bob/secret.txt", 0o600},
		{"home/bob/sub/deep.txt", 0o600},
		{"home/alice/mine.txt", 0o600},
		{"workspaces/w/rootgroup.txt", 0o640},
		{"var/sessions/bob/p_1/c/seg.jsonl.gz", 0o600},
	} {
		p := filepath.Join(data, f.rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(f.rel+"\n"), f.mode)
	}
	os.Symlink("secret.txt", filepath.Join(data, "home/bob/link"))
	// What a daemon before the sweep left: everything root's, no marker.
	filepath.Walk(data, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 0, 0) })
	os.Remove(filepath.Join(data, ".owners"))
	k2 := reopen(t, k)

	base := local.SandboxUIDBase
	for rel, want := range map[string][2]int{
		"home":                                {base, base},
		"home/bob":                            {base + 1001, base + 100},
		"home/bob/secret.txt":                 {base + 1001, base + 100},
		"home/bob/link":                       {base + 1001, base + 100},
		"home/bob/sub/deep.txt":               {base + 1001, base + 100},
		"home/alice/mine.txt":                 {base + 1000, base + 100},
		"workspaces/w/rootgroup.txt":          {base, base},
		"var/sessions":                        {base, base},
		"var/sessions/bob/p_1/c/seg.jsonl.gz": {base + 1001, base + 100},
	} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(data, rel), &st); err != nil || [2]int{int(st.Uid), int(st.Gid)} != want {
			t.Errorf("%s: owned %d:%d on disk (%v), want %d:%d", rel, st.Uid, st.Gid, err, want[0], want[1])
		}
	}
	s := openSession(t, k2, alice, abi.ProcessLocalTarget{NetworkMode: "none", Mounts: []abi.ProcessMount{
		{HostPath: "/home", GuestPath: "/home", Mode: "ro"}, {HostPath: "/var/sessions", GuestPath: "/var/sessions", Mode: "ro"}}})
	r := execIn(t, k2, alice, s.SessionID, "sh", "-c", probeScript(nil)+`for f in /home/bob/secret.txt /home/bob/sub/deep.txt /var/sessions/bob/p_1/c/seg.jsonl.gz /home/alice/mine.txt; do
		printf '%s ' $f; t r $f; done`)
	want := "/home/bob/secret.txt no\n/home/bob/sub/deep.txt no\n/var/sessions/bob/p_1/c/seg.jsonl.gz no\n/home/alice/mine.txt yes\n"
	if text(r.Stdout) != want {
		t.Fatalf("alice after the sweep: %q %q, want %q", text(r.Stdout), text(r.Stderr), want)
	}
	// Swept once: a file made root's now stays so across a restart.
	os.Lchown(filepath.Join(data, "home/bob/secret.txt"), 0, 0)
	reopen(t, k2)
	var st syscall.Stat_t
	if syscall.Lstat(filepath.Join(data, "home/bob/secret.txt"), &st); st.Uid != 0 {
		t.Fatalf("the sweep ran again: owned by %d", st.Uid)
	}
}

// The daemon keeps disk owners true: every file it makes has its
// owner's disk ids (a write, a create, a directory, a link, an archive
// the kernel makes under /var/sessions, a new home), a rename into
// another owner's tree (root's) re-owns what it moves, and what root's
// session makes in another owner's tree is that owner's once the exec
// ends.
func TestDiskOwnersKept(t *testing.T) {
	needSandbox(t)
	k, root, alice, bob := newKernel(t)
	ctx := context.Background()
	base := local.SandboxUIDBase
	aliceIDs, bobIDs, rootIDs := [2]int{base + 1000, base + 100}, [2]int{base + 1001, base + 100}, [2]int{base, base}
	call := func(id *kernel.Identity, name string, args any) any {
		t.Helper()
		res, err := k.Call(ctx, &kernel.Caller{Identity: id}, name, args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	call(alice, "fs.write", &abi.FSWriteArgs{Path: "~/deep/dir/w.txt", Content: "x"})
	f := call(alice, "fs.open", &local.OpenArgs{Path: "home/alice/o.txt", Flags: os.O_WRONLY | os.O_CREATE, Perm: 0o600}).(*os.File)
	f.Close()
	call(alice, "fs.mkdir", &local.MkdirArgs{Path: "home/alice/d", Perm: 0o700})
	call(alice, "fs.symlink", &local.SymlinkArgs{Target: "/etc/passwd", Path: "home/alice/l"})
	call(root, "fs.write", &abi.FSWriteArgs{Path: "/workspaces/r.txt", Content: "x"})
	a := call(k.KernelCaller().Identity, "fs.create", &abi.FileArgs{Path: "/var/sessions/bob/p_9/c/s.jsonl.gz", Perm: 0o600}).(*os.File)
	a.Close()
	// Root moves alice's tree into bob's.
	call(root, "fs.rename", &local.RenameArgs{Old: "home/alice/deep", New: "home/bob/deep"})
	// Root's session writes where bob lets others write.
	call(bob, "fs.mkdir", &local.MkdirArgs{Path: "home/bob/drop", Perm: 0o777})
	s := openSession(t, k, root, abi.ProcessLocalTarget{NetworkMode: "none", Mounts: []abi.ProcessMount{{HostPath: "/home/bob", GuestPath: "/bob", Mode: "rw"}}})
	if r := execIn(t, k, root, s.SessionID, "sh", "-c", "echo r > /bob/drop/from-root && mkdir /bob/drop/sub"); r.ExitCode != 0 {
		t.Fatalf("root's exec: %+v %q", r, text(r.Stderr))
	}
	for rel, want := range map[string][2]int{
		"home/alice":                        aliceIDs,
		"home/alice/o.txt":                  aliceIDs,
		"home/alice/d":                      aliceIDs,
		"home/alice/l":                      aliceIDs,
		"workspaces/r.txt":                  rootIDs,
		"var/sessions/bob":                  bobIDs,
		"var/sessions/bob/p_9/c/s.jsonl.gz": bobIDs,
		"home/bob/deep":                     bobIDs,
		"home/bob/deep/dir/w.txt":           bobIDs,
		"home/bob/drop/from-root":           bobIDs,
		"home/bob/drop/sub":                 bobIDs,
	} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(k.dataPath, rel), &st); err != nil || [2]int{int(st.Uid), int(st.Gid)} != want {
			t.Errorf("%s: owned %d:%d on disk (%v), want %d:%d", rel, st.Uid, st.Gid, err, want[0], want[1])
		}
	}
}
