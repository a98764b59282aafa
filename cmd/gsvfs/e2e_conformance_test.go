package main_test

// The conformance suite, in the manner of hugelgupf/p9's: one table of
// namespace scenarios, written against nsOps, run over every transport.
// The FUSE transport runs real commands on the mount (cat, echo, ls -l,
// stat, grep -r, cp, rm, mv, mkdir); the 9P transport speaks 9P2000 to the
// daemon's unix socket with 9fans.net/go/plan9/client. Each transport gets
// a daemon of its own on a fresh state, so the scenarios of one never see
// what the other did.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/google/jsonschema-go/jsonschema"
)

// nsOps is one way of using the namespace. Paths are namespace paths
// ("/home/root/x").
type nsOps interface {
	Name() string
	// ReadFile returns the whole content of p (cat).
	ReadFile(p string) (string, error)
	// WriteFile creates or truncates p and writes line and a newline
	// (echo line > p).
	WriteFile(p, line string) error
	// Append appends line and a newline to p (echo line >> p).
	Append(p, line string) error
	// List returns the names in dir with their modes as ls -l shows them
	// ("-rw-r--r--", "drwxr-xr-x").
	List(dir string) (map[string]string, error)
	// Stat returns p's mode (as ls -l shows it) and size.
	Stat(p string) (statInfo, error)
	// Remove removes the file p (rm).
	Remove(p string) error
	// Rename renames old to new in the same directory, replacing an
	// existing new (mv).
	Rename(old, new string) error
	// Mkdir makes the directory p with the default mode (mkdir).
	Mkdir(p string) error
	// Chmod sets p's permission bits (chmod).
	Chmod(p string, perm os.FileMode) error
	// Copy copies the file src to dst (cp).
	Copy(src, dst string) error
	// Call opens /sys/call for reading and writing and, on that one
	// handle, writes each request as one line and reads what the handle
	// then gives; it returns what was read.
	Call(reqs ...string) (string, error)
	// Ctl writes line as one command to the ctl file p.
	Ctl(p, line string) error
	// Grep returns the files under dir whose content contains text
	// (grep -r -l), or errUnsupported.
	Grep(dir, text string) ([]string, error)
}

type statInfo struct {
	mode string // as ls -l shows it
	size int64
}

var errUnsupported = errors.New("not supported by this transport")

// opError is a failed operation: errno is what the command's message
// named (FUSE), msg the message itself (the command's stderr, or the 9P
// Rerror text).
type opError struct {
	op, path string
	errno    syscall.Errno
	msg      string
}

func (e *opError) Error() string {
	return fmt.Sprintf("%s %s: %s (errno %d)", e.op, e.path, strings.TrimSpace(e.msg), int(e.errno))
}

// wantErr requires err to be a failure that is errno over FUSE and whose
// Rerror text contains text over 9P (case-insensitively; alternatives are
// separated by '|').
func wantErr(t *testing.T, ns nsOps, err error, errno syscall.Errno, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want a failure (errno %v over FUSE, %q over 9P)", ns.Name(), errno, text)
	}
	var oe *opError
	if !errors.As(err, &oe) {
		t.Fatalf("%s: %v: not an opError", ns.Name(), err)
	}
	switch ns.Name() {
	case "fuse", "rmount":
		if oe.errno != errno {
			t.Fatalf("%s: %v: want %v (%q)", ns.Name(), err, errno, errno.Error())
		}
	case "9p":
		for _, alt := range strings.Split(text, "|") {
			if strings.Contains(strings.ToLower(oe.msg), strings.ToLower(alt)) {
				return
			}
		}
		t.Fatalf("9p: %v: want an error containing %q", err, text)
	}
}

// notFound is the 9P text of a missing file: the server's, or the 9fans
// client's own when a walk stops short.
const notFound = "no such file|not found"

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ---- FUSE: real commands on the mount ----

type fuseOps struct {
	d    *daemon
	name string // "fuse", or "rmount" for a remote mount (gsvfs mount --kernel)
}

func (f *fuseOps) Name() string { return f.name }

func (f *fuseOps) run(op, p, script string, args ...string) (string, error) {
	r := f.d.sh(script, args...)
	if r.err != nil || r.code != 0 {
		return r.stdout, &opError{op: op, path: p, errno: errnoOf(r.stderr), msg: r.stderr + fmt.Sprint(" ", r.err)}
	}
	return r.stdout, nil
}

func (f *fuseOps) ReadFile(p string) (string, error) {
	return f.run("cat", p, `cat -- "$1"`, f.d.p(p))
}

// The echo of the FUSE ops is coreutils' (env echo), not dash's builtin:
// that one reports every write error as "I/O error", hiding the errno.

func (f *fuseOps) WriteFile(p, line string) error {
	_, err := f.run("echo >", p, `env echo "$2" > "$1"`, f.d.p(p), line)
	return err
}

func (f *fuseOps) Append(p, line string) error {
	_, err := f.run("echo >>", p, `env echo "$2" >> "$1"`, f.d.p(p), line)
	return err
}

func (f *fuseOps) List(dir string) (map[string]string, error) {
	out, err := f.run("ls -l", dir, `ls -l -- "$1"`, f.d.p(dir))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == "total" {
			continue
		}
		if len(fields) < 9 {
			return nil, fmt.Errorf("ls -l %s: cannot parse %q", dir, line)
		}
		mode := fields[0]
		if len(mode) > 10 { // ACL or security context marker
			mode = mode[:10]
		}
		m[strings.Join(fields[8:], " ")] = mode
	}
	return m, nil
}

func (f *fuseOps) Stat(p string) (statInfo, error) {
	out, err := f.run("stat", p, `stat -c '%A %s' -- "$1"`, f.d.p(p))
	if err != nil {
		return statInfo{}, err
	}
	var st statInfo
	if _, err := fmt.Sscanf(out, "%s %d", &st.mode, &st.size); err != nil {
		return st, fmt.Errorf("stat %s: cannot parse %q", p, out)
	}
	return st, nil
}

func (f *fuseOps) Remove(p string) error {
	_, err := f.run("rm", p, `rm -- "$1"`, f.d.p(p))
	return err
}

func (f *fuseOps) Rename(old, new string) error {
	_, err := f.run("mv", old, `mv -f -- "$1" "$2"`, f.d.p(old), f.d.p(new))
	return err
}

func (f *fuseOps) Mkdir(p string) error {
	_, err := f.run("mkdir", p, `mkdir -- "$1"`, f.d.p(p))
	return err
}

func (f *fuseOps) Chmod(p string, perm os.FileMode) error {
	_, err := f.run("chmod", p, `chmod "$2" -- "$1"`, f.d.p(p), strconv.FormatUint(uint64(perm.Perm()), 8))
	return err
}

func (f *fuseOps) Copy(src, dst string) error {
	_, err := f.run("cp", src, `cp -- "$1" "$2"`, f.d.p(src), f.d.p(dst))
	return err
}

func (f *fuseOps) Call(reqs ...string) (string, error) {
	return f.run("call", "/sys/call", `f=$1; shift; exec 3<>"$f" || exit 1
		for r in "$@"; do printf '%s\n' "$r" >&3 && cat <&3 || exit 1; done`, append([]string{f.d.p("/sys/call")}, reqs...)...)
}

func (f *fuseOps) Ctl(p, line string) error {
	if len(line) < 64<<10 {
		_, err := f.run("echo > ctl", p, `env echo "$2" > "$1"`, f.d.p(p), line)
		return err
	}
	// Too long for an argument: write it from a host file.
	tmp, err := os.CreateTemp(f.d.work, "ctl-line-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.WriteString(tmp, line+"\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	_, err = f.run("cat > ctl", p, `cat -- "$2" > "$1"`, f.d.p(p), tmp.Name())
	return err
}

func (f *fuseOps) Grep(dir, text string) ([]string, error) {
	r := f.d.sh(`grep -r -l -- "$2" "$1"`, f.d.p(dir), text)
	if r.code == 1 && r.stderr == "" { // no match
		return nil, nil
	}
	if r.err != nil || r.code != 0 {
		return nil, &opError{op: "grep -r", path: dir, errno: errnoOf(r.stderr), msg: r.stderr}
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		rel, err := filepath.Rel(f.d.mnt, l)
		if err != nil {
			return nil, err
		}
		out = append(out, "/"+filepath.ToSlash(rel))
	}
	return out, nil
}

// ---- 9P: 9fans.net/go/plan9/client on the unix socket ----

type ninepOps struct{ fsys *client.Fsys }

func (n *ninepOps) Name() string { return "9p" }

func nerr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op: op, path: p, msg: err.Error()}
}

func (n *ninepOps) ReadFile(p string) (string, error) {
	fid, err := n.fsys.Open(p, plan9.OREAD)
	if err != nil {
		return "", nerr("open", p, err)
	}
	defer fid.Close()
	b, err := io.ReadAll(fid)
	return string(b), nerr("read", p, err)
}

// writeRaw creates or truncates p and writes b.
func (n *ninepOps) writeRaw(p string, b []byte) error {
	var fid *client.Fid
	var err error
	if _, serr := n.fsys.Stat(p); serr == nil {
		fid, err = n.fsys.Open(p, plan9.OWRITE|plan9.OTRUNC)
	} else {
		fid, err = n.fsys.Create(p, plan9.OWRITE, 0o644)
	}
	if err != nil {
		return nerr("open", p, err)
	}
	_, err = fid.Write(b)
	if cerr := fid.Close(); err == nil {
		err = cerr
	}
	return nerr("write", p, err)
}

func (n *ninepOps) WriteFile(p, line string) error { return n.writeRaw(p, []byte(line+"\n")) }

func (n *ninepOps) Append(p, line string) error {
	d, err := n.fsys.Stat(p)
	if err != nil {
		return n.writeRaw(p, []byte(line+"\n")) // as >> creates it
	}
	fid, err := n.fsys.Open(p, plan9.OWRITE)
	if err != nil {
		return nerr("open", p, err)
	}
	_, err = fid.WriteAt([]byte(line+"\n"), int64(d.Length))
	if cerr := fid.Close(); err == nil {
		err = cerr
	}
	return nerr("write", p, err)
}

// lsMode renders a 9P mode as ls -l does.
func lsMode(m plan9.Perm) string {
	b := []byte("----------")
	if m&plan9.DMDIR != 0 {
		b[0] = 'd'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	return string(b)
}

func (n *ninepOps) List(dir string) (map[string]string, error) {
	fid, err := n.fsys.Open(dir, plan9.OREAD)
	if err != nil {
		return nil, nerr("open", dir, err)
	}
	defer fid.Close()
	ds, err := fid.Dirreadall()
	if err != nil {
		return nil, nerr("read", dir, err)
	}
	m := map[string]string{}
	for _, d := range ds {
		m[d.Name] = lsMode(d.Mode)
	}
	return m, nil
}

func (n *ninepOps) Stat(p string) (statInfo, error) {
	d, err := n.fsys.Stat(p)
	if err != nil {
		return statInfo{}, nerr("stat", p, err)
	}
	return statInfo{mode: lsMode(d.Mode), size: int64(d.Length)}, nil
}

func (n *ninepOps) Remove(p string) error { return nerr("remove", p, n.fsys.Remove(p)) }

func (n *ninepOps) Rename(old, new string) error {
	if path.Dir(old) != path.Dir(new) {
		return errUnsupported // 9P2000 renames within a directory
	}
	var d plan9.Dir
	d.Null()
	d.Name = path.Base(new)
	return nerr("wstat", old, n.fsys.Wstat(old, &d))
}

func (n *ninepOps) Mkdir(p string) error {
	fid, err := n.fsys.Create(p, plan9.OREAD, plan9.DMDIR|0o755)
	if err != nil {
		return nerr("create", p, err)
	}
	return nerr("clunk", p, fid.Close())
}

func (n *ninepOps) Chmod(p string, perm os.FileMode) error {
	old, err := n.fsys.Stat(p)
	if err != nil {
		return nerr("stat", p, err)
	}
	var d plan9.Dir
	d.Null()
	d.Mode = old.Mode&plan9.DMDIR | plan9.Perm(perm.Perm())
	return nerr("wstat", p, n.fsys.Wstat(p, &d))
}

func (n *ninepOps) Copy(src, dst string) error {
	s, err := n.ReadFile(src)
	if err != nil {
		return err
	}
	return n.writeRaw(dst, []byte(s))
}

func (n *ninepOps) Call(reqs ...string) (string, error) {
	fid, err := n.fsys.Open("/sys/call", plan9.ORDWR)
	if err != nil {
		return "", nerr("open", "/sys/call", err)
	}
	defer fid.Close()
	var out strings.Builder
	for _, req := range reqs {
		if _, err := fid.Write([]byte(req + "\n")); err != nil {
			return out.String(), nerr("write", "/sys/call", err)
		}
		b, err := io.ReadAll(fid)
		out.Write(b)
		if err != nil {
			return out.String(), nerr("read", "/sys/call", err)
		}
	}
	return out.String(), nil
}

func (n *ninepOps) Ctl(p, line string) error {
	fid, err := n.fsys.Open(p, plan9.OWRITE)
	if err != nil {
		return nerr("open", p, err)
	}
	_, err = fid.Write([]byte(line + "\n"))
	if cerr := fid.Close(); err == nil {
		err = cerr
	}
	return nerr("write", p, err)
}

func (n *ninepOps) Grep(dir, text string) ([]string, error) { return nil, errUnsupported }

// ---- the scenarios ----

// cenv is what a scenario runs with: the transport, its daemon, and a
// scratch directory of its own under /home/root.
type cenv struct {
	ns  nsOps
	d   *daemon
	dir string
}

// in returns the namespace path of name in the scenario's scratch dir.
func (x *cenv) in(name string) string { return x.dir + "/" + name }

// frame calls through /sys/call and parses the response frame.
func (x *cenv) frame(t *testing.T, req string) callFrame {
	t.Helper()
	out, err := x.ns.Call(req)
	if err != nil {
		t.Fatalf("call %s: %v", req, err)
	}
	return parseFrame(t, out)
}

func (x *cenv) read(t *testing.T, p string) string {
	t.Helper()
	s, err := x.ns.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (x *cenv) wantContent(t *testing.T, p, want string) {
	t.Helper()
	if got := x.read(t, p); got != want {
		t.Fatalf("%s holds %q, want %q", p, got, want)
	}
}

type scenario struct {
	name string
	only string // "fuse" or "9p" if only that transport can express it
	run  func(t *testing.T, x *cenv)
}

const passwdRoot = "root:x:0:0:root:/home/root:/bin/sh\n"

var scenarios = []scenario{
	{name: "PasswdShowsRoot", run: func(t *testing.T, x *cenv) {
		s := x.read(t, "/etc/passwd")
		if !strings.HasPrefix(s, passwdRoot) {
			t.Fatalf("/etc/passwd = %q, want it to start with %q", s, passwdRoot)
		}
		if g := x.read(t, "/etc/group"); !strings.Contains(g, "root:x:0:") || !strings.Contains(g, "users:x:100:") {
			t.Fatalf("/etc/group = %q, want the root and users groups", g)
		}
	}},
	{name: "WriteRead", run: func(t *testing.T, x *cenv) {
		f := x.in("note.txt")
		must(t, x.ns.WriteFile(f, "hello world"))
		x.wantContent(t, f, "hello world\n")
		must(t, x.ns.WriteFile(f, "bye")) // truncates
		x.wantContent(t, f, "bye\n")
		st, err := x.ns.Stat(f)
		must(t, err)
		if st != (statInfo{"-rw-r--r--", 4}) {
			t.Fatalf("stat %s = %+v, want -rw-r--r-- and 4 bytes", f, st)
		}
	}},
	{name: "Append", run: func(t *testing.T, x *cenv) {
		f := x.in("log")
		must(t, x.ns.WriteFile(f, "one"))
		must(t, x.ns.Append(f, "two"))
		must(t, x.ns.Append(f, "three"))
		x.wantContent(t, f, "one\ntwo\nthree\n")
		st, err := x.ns.Stat(f)
		must(t, err)
		if st.size != 14 {
			t.Fatalf("stat %s = %+v, want 14 bytes", f, st)
		}
		// Appending to a file that does not exist yet creates it.
		must(t, x.ns.Append(x.in("new"), "first"))
		x.wantContent(t, x.in("new"), "first\n")
	}},
	{name: "Copy", run: func(t *testing.T, x *cenv) {
		a, b := x.in("a"), x.in("b")
		must(t, x.ns.WriteFile(a, "copied text"))
		must(t, x.ns.Copy(a, b))
		x.wantContent(t, b, "copied text\n")
		x.wantContent(t, a, "copied text\n")
	}},
	{name: "RenameOverExisting", run: func(t *testing.T, x *cenv) {
		a, b := x.in("a"), x.in("b")
		must(t, x.ns.WriteFile(a, "AAA"))
		must(t, x.ns.WriteFile(b, "BBB"))
		must(t, x.ns.Rename(a, b))
		x.wantContent(t, b, "AAA\n")
		_, err := x.ns.Stat(a)
		wantErr(t, x.ns, err, syscall.ENOENT, notFound)
		ls, err := x.ns.List(x.dir)
		must(t, err)
		if len(ls) != 1 || ls["b"] == "" {
			t.Fatalf("after mv a b, %s holds %v, want only b", x.dir, ls)
		}
	}},
	{name: "Remove", run: func(t *testing.T, x *cenv) {
		f := x.in("doomed")
		must(t, x.ns.WriteFile(f, "x"))
		must(t, x.ns.Remove(f))
		_, err := x.ns.ReadFile(f)
		wantErr(t, x.ns, err, syscall.ENOENT, notFound)
		ls, err := x.ns.List(x.dir)
		must(t, err)
		if len(ls) != 0 {
			t.Fatalf("after rm, %s holds %v", x.dir, ls)
		}
		err = x.ns.Remove(f)
		wantErr(t, x.ns, err, syscall.ENOENT, notFound)
	}},
	{name: "Mkdir", run: func(t *testing.T, x *cenv) {
		sub := x.in("sub")
		must(t, x.ns.Mkdir(sub))
		st, err := x.ns.Stat(sub)
		must(t, err)
		if st.mode != "drwxr-xr-x" {
			t.Fatalf("stat %s: mode %s, want drwxr-xr-x", sub, st.mode)
		}
		must(t, x.ns.WriteFile(sub+"/inner", "deep"))
		x.wantContent(t, sub+"/inner", "deep\n")
		wantErr(t, x.ns, x.ns.Mkdir(sub), syscall.EEXIST, "exist")
	}},
	{name: "ListModes", run: func(t *testing.T, x *cenv) {
		must(t, x.ns.WriteFile(x.in("plain"), "p"))
		must(t, x.ns.WriteFile(x.in("private"), "s"))
		must(t, x.ns.Chmod(x.in("private"), 0o600))
		must(t, x.ns.Mkdir(x.in("dir")))
		must(t, x.ns.Chmod(x.in("dir"), 0o700))
		wantLs(t, x, x.dir, map[string]string{"plain": "-rw-r--r--", "private": "-rw-------", "dir": "drwx------"}, true)
		wantLs(t, x, "/sys", map[string]string{"call": "-rw-rw-rw-", "events": "-r--r--r--", "config": "dr-xr-xr-x"}, false)
		wantLs(t, x, "/etc", map[string]string{"passwd": "-r--r--r--", "group": "-r--r--r--"}, false)
		wantLs(t, x, "/sys/config", map[string]string{"ctl": "-rw-rw-rw-", "err": "-r--r--r--", "config": "dr-xr-xr-x"}, false)
		wantLs(t, x, "/", map[string]string{"etc": "dr-xr-xr-x", "sys": "dr-xr-xr-x", "home": "drwxr-xr-x", "workspaces": "drwxr-xr-x"}, false)
		// A ctl or call file's size is 0; a view's is its content's.
		passwd, err := x.ns.ReadFile("/etc/passwd")
		must(t, err)
		for p, want := range map[string]statInfo{"/sys/call": {"-rw-rw-rw-", 0}, "/etc/passwd": {"-r--r--r--", int64(len(passwd))}} {
			st, err := x.ns.Stat(p)
			must(t, err)
			if st != want {
				t.Errorf("stat %s = %+v, want %+v", p, st, want)
			}
		}
	}},
	{name: "CreateModeIsTheCallers", only: "fuse", run: func(t *testing.T, x *cenv) {
		// The mode of a new file or directory is what the caller asked
		// for after its own umask, as on any POSIX file system; the
		// daemon's umask plays no part.
		r := x.d.sh(`umask 002 && echo x > "$1/f" && mkdir "$1/d" && umask 000 && echo y > "$1/g" && stat -c '%a %n' "$1/f" "$1/d" "$1/g"`, x.d.p(x.dir))
		if r.code != 0 {
			t.Fatal(r)
		}
		got := strings.ReplaceAll(r.stdout, x.d.p(x.dir)+"/", "")
		if want := "664 f\n775 d\n666 g\n"; got != want {
			t.Fatalf("modes of new files with umask 002 (f, d) and 000 (g):\n%s\nwant:\n%s", got, want)
		}
	}},
	{name: "GrepRecursive", only: "fuse", run: func(t *testing.T, x *cenv) {
		must(t, x.ns.Mkdir(x.in("d")))
		must(t, x.ns.WriteFile(x.in("d/hay"), "just hay"))
		must(t, x.ns.WriteFile(x.in("d/needle"), "a needle-4711 in it"))
		must(t, x.ns.WriteFile(x.in("top"), "needle-4711 again"))
		got, err := x.ns.Grep(x.dir, "needle-4711")
		must(t, err)
		slices.Sort(got)
		want := []string{x.in("d/needle"), x.in("top")}
		if !slices.Equal(got, want) {
			t.Fatalf("grep -r -l needle-4711 %s = %q, want %q", x.dir, got, want)
		}
		// Views are found by grep too, though they report size 0.
		got, err = x.ns.Grep("/etc", "root:x:0:0")
		must(t, err)
		if !slices.Equal(got, []string{"/etc/passwd"}) {
			t.Fatalf("grep -r -l root:x:0:0 /etc = %q", got)
		}
	}},
	{name: "CallConfigGet", run: func(t *testing.T, x *cenv) {
		f := x.frame(t, `{"type":"req","id":"c1","call":"sys.config.get","args":{}}`)
		if f.ID != "c1" {
			t.Errorf("response id %q, want c1", f.ID)
		}
		var r struct {
			Entries []struct{ Key, Value string }
		}
		mustOK(t, f, &r)
		found := false
		for _, e := range r.Entries {
			found = found || e.Key == "config/server/name" && e.Value == "gsv"
		}
		if !found {
			t.Fatalf("sys.config.get has no config/server/name=gsv: %s", f.Data)
		}
		// No type or id: still answered.
		f = x.frame(t, `{"call":"sys.config.get","args":{"key":"config/ai/provider"}}`)
		mustOK(t, f, &r)
		if len(r.Entries) != 1 || r.Entries[0].Value != "offline" {
			t.Fatalf("sys.config.get config/ai/provider: %s", f.Data)
		}
	}},
	{name: "CallUnknown", run: func(t *testing.T, x *cenv) {
		f := x.frame(t, `{"type":"req","id":"u1","call":"nope.nope","args":{}}`)
		if f.OK || f.Error == nil || f.Error.Code != 400 || !strings.Contains(f.Error.Message, `unknown syscall "nope.nope"`) || f.ID != "u1" {
			t.Fatalf("unknown call: got %+v (error %+v), want ok:false code 400 unknown syscall", f, f.Error)
		}
	}},
	{name: "CallMalformedJSON", run: func(t *testing.T, x *cenv) {
		f := x.frame(t, `{"call":"sys.config.get","args":{`)
		if f.OK || f.Error == nil || f.Error.Code != 400 || !strings.Contains(f.Error.Message, "malformed") {
			t.Fatalf("malformed frame: got %+v (error %+v), want ok:false code 400 malformed", f, f.Error)
		}
	}},
	{name: "CtlUnknownVerb", run: func(t *testing.T, x *cenv) {
		err := x.ns.Ctl("/sys/config/ctl", "nonsense")
		wantErr(t, x.ns, err, syscall.EINVAL, "unknown verb")
		msg := x.read(t, "/sys/config/err")
		if !strings.Contains(msg, `unknown verb "nonsense"`) {
			t.Fatalf("/sys/config/err = %q, want the unknown verb message", msg)
		}
	}},
	{name: "CtlSetConfig", run: func(t *testing.T, x *cenv) {
		_, err := x.ns.ReadFile("/sys/config/users/0/ai/model")
		wantErr(t, x.ns, err, syscall.ENOENT, notFound)
		must(t, x.ns.Ctl("/sys/config/ctl", "set users/0/ai/model m1"))
		x.wantContent(t, "/sys/config/users/0/ai/model", "m1\n")
		// A value with spaces, rc-quoted.
		must(t, x.ns.Ctl("/sys/config/ctl", "set users/0/ai/prompt 'be brief, it''s late'"))
		x.wantContent(t, "/sys/config/users/0/ai/prompt", "be brief, it's late\n")
		f := x.frame(t, `{"call":"sys.config.get","args":{"key":"users/0/ai/model"}}`)
		var r struct{ Entries []struct{ Key, Value string } }
		mustOK(t, f, &r)
		if len(r.Entries) != 1 || r.Entries[0].Value != "m1" {
			t.Fatalf("sys.config.get after set: %s", f.Data)
		}
	}},
	{name: "ViewsAreReadOnly", run: func(t *testing.T, x *cenv) {
		for _, p := range []string{"/etc/passwd", "/etc/group", "/sys/config/config/ai/provider", "/sys/config/err"} {
			err := x.ns.WriteFile(p, "pwned")
			wantErr(t, x.ns, err, syscall.EACCES, "read-only")
		}
		if s := x.read(t, "/etc/passwd"); !strings.HasPrefix(s, passwdRoot) || strings.Contains(s, "pwned") {
			t.Fatalf("/etc/passwd after a refused write: %q", s)
		}
		x.wantContent(t, "/sys/config/config/ai/provider", "offline\n")
	}},
	{name: "DotDotNotReachable", run: func(t *testing.T, x *cenv) {
		// Through syscalls, no path with ".." is accepted.
		for _, req := range []string{
			`{"call":"fs.write","args":{"path":"/home/root/../../escape","content":"x"}}`,
			`{"call":"fs.write","args":{"path":"../../../../escape","content":"x"}}`,
			`{"call":"fs.read","args":{"path":"/home/root/../root/.."}}`,
		} {
			f := x.frame(t, req)
			var op struct {
				OK    *bool  `json:"ok"`
				Error string `json:"error"`
			}
			json.Unmarshal(f.Data, &op)
			if f.OK && (op.OK == nil || *op.OK) {
				t.Fatalf("%s: succeeded: %s", req, f.Data)
			}
			if !strings.Contains(string(f.Data)+fmt.Sprint(f.Error), "'..'") {
				t.Errorf("%s: failure does not name '..': %s %+v", req, f.Data, f.Error)
			}
		}
		// Nothing escaped into the host's state directory.
		filepath.WalkDir(x.d.state, func(p string, de os.DirEntry, err error) error {
			if err == nil && de.Name() == "escape" {
				t.Errorf("fs.write with .. created %s on the host", p)
			}
			return nil
		})
		// A walk through ".." stays inside the tree.
		passwd := x.read(t, "/etc/passwd")
		x.wantContent(t, "/home/root/../../etc/passwd", passwd)
		if x.ns.Name() == "9p" {
			// 9P: ".." of the root is the root.
			x.wantContent(t, "/../../../etc/passwd", passwd)
			x.wantContent(t, "/home/../../../../etc/passwd", passwd)
		}
	}},
	{name: "CtlLineTooLong", run: func(t *testing.T, x *cenv) {
		line := "set config/big " + strings.Repeat("x", 1<<20+(512<<10))
		err := x.ns.Ctl("/sys/config/ctl", line)
		wantErr(t, x.ns, err, syscall.EINVAL, "1 MiB")
		_, err = x.ns.Stat("/sys/config/config/big")
		wantErr(t, x.ns, err, syscall.ENOENT, notFound)
		// Contract: "the full message of the last failure by the calling
		// user in a directory is readable from that directory's err
		// view". Over FUSE that is the only place a user who got EINVAL
		// can learn why.
		if msg := x.read(t, "/sys/config/err"); !strings.Contains(msg, "1 MiB") {
			t.Errorf("/sys/config/err after an oversized ctl line = %q, want the line-too-long message", msg)
		}
		// The daemon still serves ctl lines afterwards.
		must(t, x.ns.Ctl("/sys/config/ctl", "set users/0/ai/after big"))
		x.wantContent(t, "/sys/config/users/0/ai/after", "big\n")
	}},
	{name: "CallSameHandle", run: func(t *testing.T, x *cenv) {
		// Requests and responses alternate on one handle, a bad frame
		// included; each response answers its own request.
		out, err := x.ns.Call(
			`{"type":"req","id":"s1","call":"sys.whoami","args":{}}`,
			`not json at all`,
			`{"type":"req","id":"s3","call":"sys.config.get","args":{"key":"config/server/name"}}`)
		must(t, err)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("3 requests on one handle: %d responses %q", len(lines), out)
		}
		var w struct {
			Process struct {
				Uid      uint32 `json:"uid"`
				Username string `json:"username"`
			} `json:"process"`
		}
		f := parseFrame(t, lines[0])
		mustOK(t, f, &w)
		if f.ID != "s1" || w.Process.Username != "root" || w.Process.Uid != 0 {
			t.Fatalf("sys.whoami over %s = %s, want root", x.ns.Name(), lines[0])
		}
		if f := parseFrame(t, lines[1]); f.OK || f.Error == nil || f.Error.Code != 400 {
			t.Fatalf("bad frame: %s, want ok:false code 400", lines[1])
		}
		var r struct{ Entries []struct{ Key, Value string } }
		f = parseFrame(t, lines[2])
		mustOK(t, f, &r)
		if f.ID != "s3" || len(r.Entries) != 1 || r.Entries[0].Value != "gsv" {
			t.Fatalf("sys.config.get after a bad frame: %s", lines[2])
		}
	}},
	{name: "SyscallsDescribed", run: func(t *testing.T, x *cenv) {
		// /sys/syscalls: a read-only directory per syscall root may
		// make, whichever room registered it; each has
		// a one-line doc and the JSON Schemas of its args and result,
		// which admit real args and the result the daemon answers.
		ls, err := x.ns.List("/sys/syscalls")
		must(t, err)
		var list struct{ Syscalls []string }
		mustOK(t, x.frame(t, `{"call":"sys.syscall.list","args":{}}`), &list)
		for _, name := range list.Syscalls {
			if ls[name] == "" {
				t.Errorf("sys.syscall.list has %s, ls /sys/syscalls does not", name)
			}
		}
		if ls["sys.whoami"] == "" {
			t.Fatalf("ls /sys/syscalls = %v: no sys.whoami", ls)
		}
		schemas := map[string]*jsonschema.Resolved{}
		for name, mode := range ls {
			if mode != "dr-xr-xr-x" || !slices.Contains(list.Syscalls, name) {
				t.Errorf("/sys/syscalls/%s: mode %s; sys.syscall.list has it: %v", name, mode, slices.Contains(list.Syscalls, name))
			}
			if doc := x.read(t, "/sys/syscalls/"+name+"/doc"); strings.Count(doc, "\n") != 1 || len(doc) < 10 {
				t.Errorf("/sys/syscalls/%s/doc = %q, want one line", name, doc)
			}
			var f struct{ Args, Result *jsonschema.Schema }
			if err := json.Unmarshal([]byte(x.read(t, "/sys/syscalls/"+name+"/schema")), &f); err != nil || f.Args == nil || f.Result == nil {
				t.Fatalf("/sys/syscalls/%s/schema: %v", name, err)
			}
			for i, s := range []*jsonschema.Schema{f.Args, f.Result} {
				rs, err := s.Resolve(nil)
				if err != nil {
					t.Errorf("/sys/syscalls/%s/schema [%d]: %v", name, i, err)
				}
				schemas[fmt.Sprint(name, i)] = rs
			}
		}
		for _, c := range []struct{ call, args string }{
			{"sys.whoami", `{}`},
			{"sys.config.get", `{"key":"config/server/name"}`},
			{"sys.user.list", `{}`},
		} {
			args, result := schemas[c.call+"0"], schemas[c.call+"1"]
			if args == nil || result == nil {
				t.Errorf("%s: no schema in /sys/syscalls", c.call)
				continue
			}
			var a, r any
			json.Unmarshal([]byte(c.args), &a)
			if err := args.Validate(a); err != nil {
				t.Errorf("%s: args %s refused: %v", c.call, c.args, err)
			}
			f := x.frame(t, `{"call":"`+c.call+`","args":`+c.args+`}`)
			mustOK(t, f, &r)
			if err := result.Validate(r); err != nil {
				t.Errorf("%s: its result %s refused: %v", c.call, f.Data, err)
			}
		}
		wantLs(t, x, "/sys/syscalls/sys.whoami", map[string]string{"doc": "-r--r--r--", "schema": "-r--r--r--"}, true)
		err = x.ns.WriteFile("/sys/syscalls/sys.whoami/doc", "x")
		wantErr(t, x.ns, err, syscall.EACCES, "read-only")
		_, err = x.ns.ReadFile("/sys/syscalls/nope.nope/doc")
		wantErr(t, x.ns, err, syscall.ENOENT, notFound)
	}},
}

// wantLs requires dir's listing to have the given modes; with exact, to
// have no other names.
func wantLs(t *testing.T, x *cenv, dir string, want map[string]string, exact bool) {
	t.Helper()
	got, err := x.ns.List(dir)
	must(t, err)
	for name, mode := range want {
		if got[name] != mode {
			t.Errorf("ls -l %s: %s has mode %q, want %q (listing %v)", dir, name, got[name], mode, got)
		}
	}
	if exact && len(got) != len(want) {
		t.Errorf("ls -l %s = %v, want exactly %v", dir, got, want)
	}
}

// transports start a daemon for a transport and return its nsOps.
var transports = []struct {
	name  string
	start func(t *testing.T) (nsOps, *daemon)
}{
	{"fuse", func(t *testing.T) (nsOps, *daemon) {
		d := startDaemon(t, newBase(t), daemonOpts{mount: true})
		return &fuseOps{d, "fuse"}, d
	}},
	{"rmount", func(t *testing.T) (nsOps, *daemon) {
		// gsvfs mount DIR --kernel unix!SOCK: a second process with no
		// kernel, serving the daemon's namespace over 9P on a FUSE mount.
		k := startDaemon(t, newBase(t), daemonOpts{})
		d := startRemoteMount(t, k, "unix!"+k.sock)
		return &fuseOps{d, "rmount"}, d
	}},
	{"9p", func(t *testing.T) (nsOps, *daemon) {
		d := startDaemon(t, newBase(t), daemonOpts{})
		return &ninepOps{d.dial(t)}, d
	}},
}

func TestE2EConformance(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ns, d := tr.start(t)
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					if s.only != "" && s.only != tr.name && !(s.only == "fuse" && tr.name == "rmount") {
						t.Skipf("%s only", s.only)
					}
					x := &cenv{ns: ns, d: d, dir: "/home/root/" + s.name}
					must(t, ns.Mkdir(x.dir))
					s.run(t, x)
				})
			}
			d.stop()
		})
	}
}

// startRemoteMount starts gsvfs mount DIR --kernel addr on a mount point of
// its own, attached to the daemon k (addr is k's socket or listener), and
// waits until DIR/etc/passwd reads as k's. The returned daemon's stop
// stops the mount, then k.
func startRemoteMount(t testing.TB, k *daemon, addr string, args ...string) *daemon {
	t.Helper()
	requireFUSE(t)
	base := newBase(t)
	d := &daemon{
		t:      t,
		base:   base,
		state:  k.state,
		mnt:    filepath.Join(base, "mnt"),
		work:   filepath.Join(base, "work"),
		sock:   k.sock,
		stderr: &syncBuffer{},
		done:   make(chan struct{}),
		kernel: k,
	}
	args = append([]string{"mount", d.mnt, "--kernel", addr}, args...)
	d.cmd = exec.Command(gsvfsBin, args...)
	d.cmd.Dir = d.work
	d.cmd.Stdout = d.stderr
	d.cmd.Stderr = d.stderr
	d.cmd.Env = append(os.Environ(), "GSV_STATE=", "GSV_TOKEN=", "GSV_USER=", raceEnv)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start gsvfs: %v", err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(d.cleanup)
	if err := d.waitReady(startTimeout); err != nil {
		t.Fatalf("gsvfs %s: %v\nstderr:\n%s", strings.Join(args, " "), err, d.stderr.String())
	}
	return d
}
