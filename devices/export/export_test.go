package export_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/devices/export"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// serve opens an export of a fresh directory with opts (Root is set
// here) and serves its tree over 9P on a unix socket, as the device
// daemon serves it on its connection; it returns the export, its root and
// a 9P client attached to it.
func serve(t *testing.T, opts export.Options) (*export.Export, string, *client.Fsys) {
	t.Helper()
	root := t.TempDir()
	opts.Root = root
	if opts.Logger == nil {
		opts.Logger = vfstest.Logger(t)
	}
	e, err := export.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	l := vfstest.ListenUnix(t)
	srv := &ninep.Server{Root: e.Tree()}
	vfstest.Serve(t, l, func(ctx context.Context, l net.Listener) error { return srv.Serve(ctx, l, nil) })
	fsys, err := ninep.Mount("unix!"+l.Addr().String(), "kernel", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return e, root, fsys
}

// response is a response frame as the kernel reads it.
type response struct {
	Type  string         `json:"type"`
	ID    string         `json:"id"`
	OK    bool           `json:"ok"`
	Data  map[string]any `json:"data"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// caller is one open handle of the call file.
type caller struct {
	t   *testing.T
	fid *client.Fid
	r   *bufio.Reader
}

func openCall(t *testing.T, fsys *client.Fsys) *caller {
	t.Helper()
	fid, err := fsys.Open("call", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fid.Close() })
	return &caller{t: t, fid: fid, r: bufio.NewReader(fid)}
}

// send writes the request line req.
func (c *caller) send(req string) {
	c.t.Helper()
	if _, err := c.fid.Write([]byte(req + "\n")); err != nil {
		c.t.Fatalf("write %s: %v", req, err)
	}
}

// recv reads one response frame.
func (c *caller) recv() response {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read response: %v (%q)", err, line)
	}
	var r response
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		c.t.Fatalf("response %q: %v", line, err)
	}
	if r.Type != "res" {
		c.t.Fatalf("response %q: type %q", line, r.Type)
	}
	return r
}

// do makes the call name with args and returns its response.
func (c *caller) do(name string, args any) response {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": "1", "call": name, "args": args})
	c.send(string(b))
	return c.recv()
}

// ok is do for a call that must succeed (the frame; its data may still
// be {ok:false}).
func (c *caller) ok(name string, args any) map[string]any {
	c.t.Helper()
	r := c.do(name, args)
	if !r.OK || r.Error != nil {
		c.t.Fatalf("%s %v: %+v", name, args, r.Error)
	}
	return r.Data
}

// fails is do for a call that must fail with code, its message holding
// want.
func (c *caller) fails(name string, args any, code int, want string) {
	c.t.Helper()
	r := c.do(name, args)
	if r.OK || r.Error == nil || r.Error.Code != code || !strings.Contains(r.Error.Message, want) ||
		!strings.HasPrefix(r.Error.Message, name+": ") {
		c.t.Fatalf("%s %v: %+v, want %d %q (beginning with %s)", name, args, r.Error, code, want, name)
	}
}

func readFile(t *testing.T, fsys *client.Fsys, name string) (string, error) {
	fid, err := fsys.Open(name, plan9.OREAD)
	if err != nil {
		return "", err
	}
	defer fid.Close()
	b, err := io.ReadAll(fid)
	return string(b), err
}

func TestTreeFiles(t *testing.T) {
	_, root, fsys := serve(t, export.Options{})
	os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello\n"), 0o644)
	if got, err := readFile(t, fsys, "fs/hello.txt"); err != nil || got != "hello\n" {
		t.Fatalf("read fs/hello.txt = %q, %v", got, err)
	}
	// Create and write a new file; it is a real file of Root.
	fid, err := fsys.Create("fs/new.txt", plan9.OWRITE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Write([]byte("made over 9P\n")); err != nil {
		t.Fatal(err)
	}
	fid.Close()
	if b, err := os.ReadFile(filepath.Join(root, "new.txt")); err != nil || string(b) != "made over 9P\n" {
		t.Fatalf("new.txt = %q, %v", b, err)
	}
	if fi, _ := os.Stat(filepath.Join(root, "new.txt")); fi.Mode().Perm() != 0o640 {
		t.Errorf("new.txt mode = %v, want 0640", fi.Mode())
	}
	// Mkdir, then rename the file into it (wstat of the name).
	if fid, err := fsys.Create("fs/sub", plan9.OREAD, plan9.DMDIR|0o755); err != nil {
		t.Fatal(err)
	} else {
		fid.Close()
	}
	d := plan9.Dir{}
	d.Null()
	d.Name = "renamed.txt"
	if err := fsys.Wstat("fs/new.txt", &d); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "renamed.txt")); err != nil {
		t.Fatalf("renamed: %v", err)
	}
	// Truncate and chmod (wstat).
	d.Null()
	d.Length = 3
	d.Mode = 0o600
	if err := fsys.Wstat("fs/renamed.txt", &d); err != nil {
		t.Fatalf("truncate, chmod: %v", err)
	}
	if fi, _ := os.Stat(filepath.Join(root, "renamed.txt")); fi.Size() != 3 || fi.Mode().Perm() != 0o600 {
		t.Errorf("after wstat: size %d mode %v", fi.Size(), fi.Mode())
	}
	st, err := fsys.Stat("fs/renamed.txt")
	if err != nil || st.Length != 3 {
		t.Fatalf("stat: %+v, %v", st, err)
	}
	// Readdir.
	fid, err = fsys.Open("fs", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := fid.Dirreadall()
	fid.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if want := []string{"hello.txt", "renamed.txt", "sub"}; !slices.Equal(names, want) {
		t.Errorf("readdir = %v, want %v", names, want)
	}
	// Remove a file and an empty directory.
	if err := fsys.Remove("fs/renamed.txt"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("fs/sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "sub")); !os.IsNotExist(err) {
		t.Errorf("sub still there: %v", err)
	}
}

func TestSymlinks(t *testing.T) {
	_, root, fsys := serve(t, export.Options{})
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret\n"), 0o644)
	os.WriteFile(filepath.Join(root, "in.txt"), []byte("inside\n"), 0o644)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink(filepath.Dir(outside), filepath.Join(root, "outdir"))
	os.Symlink("in.txt", filepath.Join(root, "in-link"))
	// A link inside Root is followed.
	if got, err := readFile(t, fsys, "fs/in-link"); err != nil || got != "inside\n" {
		t.Errorf("read fs/in-link = %q, %v", got, err)
	}
	// A link out of Root is not.
	if got, err := readFile(t, fsys, "fs/out"); err == nil {
		t.Errorf("read fs/out = %q, want refused", got)
	}
	if _, err := fsys.Open("fs/outdir/secret", plan9.OREAD); err == nil {
		t.Errorf("walk through fs/outdir: not refused")
	}
	c := openCall(t, fsys)
	if d := c.ok("fs.read", map[string]any{"path": "out"}); d["ok"] != false {
		t.Errorf("fs.read of a link out: %v, want {ok:false}", d)
	}
	if d := c.ok("fs.read", map[string]any{"path": "outdir/secret"}); d["ok"] != false {
		t.Errorf("fs.read through a link out: %v, want {ok:false}", d)
	}
	if d := c.ok("fs.write", map[string]any{"path": "outdir/secret", "content": "pwned"}); d["ok"] != false {
		t.Errorf("fs.write through a link out: %v, want {ok:false}", d)
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret\n" {
		t.Errorf("the outside file changed: %q", b)
	}
	if d := c.ok("fs.read", map[string]any{"path": "in-link"}); d["ok"] != true {
		t.Errorf("fs.read of a link inside: %v", d)
	}
}

func TestReadOnly(t *testing.T) {
	_, root, fsys := serve(t, export.Options{ReadOnly: true})
	os.WriteFile(filepath.Join(root, "f"), []byte("x\n"), 0o644)
	if _, err := fsys.Create("fs/new", plan9.OWRITE, 0o644); err == nil {
		t.Error("create in a read-only export: no error")
	}
	if _, err := fsys.Open("fs/f", plan9.OWRITE); err == nil {
		t.Error("open for writing in a read-only export: no error")
	}
	if err := fsys.Remove("fs/f"); err == nil {
		t.Error("remove in a read-only export: no error")
	}
	if got, err := readFile(t, fsys, "fs/f"); err != nil || got != "x\n" {
		t.Errorf("read = %q, %v", got, err)
	}
	c := openCall(t, fsys)
	c.fails("fs.write", map[string]any{"path": "f", "content": "y"}, 403, "read-only")
	c.fails("fs.edit", map[string]any{"path": "f", "oldString": "x", "newString": "y"}, 403, "read-only")
	c.fails("fs.delete", map[string]any{"path": "f"}, 403, "read-only")
	if d := c.ok("fs.read", map[string]any{"path": "f"}); d["content"] != "     1\tx\n" {
		t.Errorf("fs.read = %v", d)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "f")); string(b) != "x\n" {
		t.Errorf("f = %q", b)
	}
}

func TestFSCalls(t *testing.T) {
	e, root, fsys := serve(t, export.Options{})
	c := openCall(t, fsys)
	want := []string{"fs.read", "fs.write", "fs.edit", "fs.delete", "fs.search", "shell.exec"}
	if _, err := exec.LookPath("bwrap"); err == nil {
		want = append(want, "process.session.open", "process.exec", "process.exec.start", "process.session.signal",
			"process.session.list", "process.session.get", "process.session.wait", "process.session.output", "process.blob.read", "process.exec.pipe")
	}
	if got := e.Implements(); !slices.Equal(got, want) {
		t.Errorf("Implements = %v", got)
	}
	// fs.write makes the parents; paths are relative to Root, or absolute.
	d := c.ok("fs.write", map[string]any{"path": "proj/a.go", "content": "package a\n\nfunc A() {}\n", "target": "laptop"})
	if d["ok"] != true || d["path"] != filepath.Join(root, "proj/a.go") || d["size"] != float64(23) {
		t.Fatalf("fs.write = %v", d)
	}
	d = c.ok("fs.write", map[string]any{"path": filepath.Join(root, "proj/b.txt"), "content": "one\ntwo A\n"})
	if d["ok"] != true {
		t.Fatalf("fs.write absolute = %v", d)
	}
	d = c.ok("fs.read", map[string]any{"path": "proj/a.go", "offset": 2, "limit": 1})
	if d["content"] != "     3\tfunc A() {}\n" || d["lines"] != float64(3) {
		t.Errorf("fs.read = %v", d)
	}
	d = c.ok("fs.read", map[string]any{"path": "proj"})
	if !slices.Equal(toStrings(d["files"]), []string{"a.go", "b.txt"}) {
		t.Errorf("fs.read of a directory = %v", d)
	}
	d = c.ok("fs.edit", map[string]any{"path": "proj/a.go", "oldString": "A()", "newString": "B()"})
	if d["ok"] != true || d["replacements"] != float64(1) {
		t.Errorf("fs.edit = %v", d)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "proj/a.go")); !strings.Contains(string(b), "func B()") {
		t.Errorf("a.go = %q", b)
	}
	d = c.ok("fs.edit", map[string]any{"path": "proj/a.go", "oldString": "nowhere", "newString": "x"})
	if d["ok"] != false || !strings.Contains(d["error"].(string), "not found") {
		t.Errorf("fs.edit not found = %v", d)
	}
	d = c.ok("fs.search", map[string]any{"query": "B", "path": "proj"})
	if d["count"] != float64(1) {
		t.Errorf("fs.search = %v", d)
	}
	d = c.ok("fs.search", map[string]any{"query": "A", "include": "*.txt"})
	ms, _ := d["matches"].([]any)
	if d["count"] != float64(1) || len(ms) != 1 || ms[0].(map[string]any)["path"] != filepath.Join(root, "proj/b.txt") {
		t.Errorf("fs.search include = %v", d)
	}
	d = c.ok("fs.delete", map[string]any{"path": "proj"})
	if d["ok"] != true {
		t.Errorf("fs.delete = %v", d)
	}
	if _, err := os.Stat(filepath.Join(root, "proj")); !os.IsNotExist(err) {
		t.Errorf("proj still there: %v", err)
	}
	d = c.ok("fs.read", map[string]any{"path": "proj/a.go"})
	if d["ok"] != false {
		t.Errorf("fs.read of a deleted file = %v", d)
	}
	// The device's paths: outside Root, "..", "~" outside Root.
	c.fails("fs.read", map[string]any{"path": "/etc/passwd"}, 403, "outside the device's export "+root)
	c.fails("fs.read", map[string]any{"path": "a/../../x"}, 400, "'..'")
	t.Setenv("HOME", "/nonexistent-home") // New read $HOME already: still outside
	c.fails("fs.write", map[string]any{"path": "~/x", "content": ""}, 403, "outside the device's export")
	c.fails("fs.delete", map[string]any{"path": root}, 403, "root")
	// Strict args, unknown calls, malformed frames.
	c.fails("fs.read", map[string]any{"path": "x", "uid": 1}, 400, `unknown field "uid"`)
	c.fails("proc.spawn", map[string]any{}, 400, "device does not implement proc.spawn")
	for _, bad := range []string{`{"call":`, `{"id":"7"}`, `[1,2]`, `{"call":"fs.read","args":[1]}`} {
		c.send(bad)
		if r := c.recv(); r.OK || r.Error == nil || r.Error.Code != 400 {
			t.Errorf("frame %s: %+v, want 400", bad, r)
		}
	}
}

func TestFSReadHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	e, err := export.New(export.Options{Root: home, Logger: vfstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	os.MkdirAll(filepath.Join(home, "src"), 0o755)
	os.WriteFile(filepath.Join(home, "src/go.mod"), []byte("module x\n"), 0o644)
	l := vfstest.ListenUnix(t)
	srv := &ninep.Server{Root: e.Tree()}
	vfstest.Serve(t, l, func(ctx context.Context, l net.Listener) error { return srv.Serve(ctx, l, nil) })
	fsys, err := ninep.Mount("unix!"+l.Addr().String(), "kernel", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	c := openCall(t, fsys)
	if d := c.ok("fs.read", map[string]any{"path": "~/src/go.mod"}); d["content"] != "     1\tmodule x\n" {
		t.Errorf("fs.read ~/src/go.mod = %v", d)
	}
	if d := c.ok("shell.exec", map[string]any{"input": "pwd; cat go.mod", "cwd": "~/src"}); d["output"] != filepath.Join(home, "src")+"\nmodule x\n" {
		t.Errorf("shell.exec in ~/src = %v", d)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestShellExec(t *testing.T) {
	_, root, fsys := serve(t, export.Options{ShellWait: 500 * time.Millisecond})
	c := openCall(t, fsys)
	// A command that ends within the budget: its final result, run in Root.
	d := c.ok("shell.exec", map[string]any{"input": "pwd; echo $USER; exit 3"})
	if d["status"] != "failed" || d["exitCode"] != float64(3) || !strings.HasPrefix(d["output"].(string), root+"\n") {
		t.Errorf("start = %v", d)
	}
	if d := c.ok("shell.exec", map[string]any{"input": "true"}); d["status"] != "completed" || d["sessionId"] != nil {
		t.Errorf("start true = %v", d)
	}
	// One that outlives the budget: running, then polled to its end.
	d = c.ok("shell.exec", map[string]any{"input": "echo first; sleep 1; echo second"})
	if d["status"] != "running" || d["output"] != "first\n" {
		t.Fatalf("start = %v", d)
	}
	sid := d["sessionId"].(string)
	out := ""
	for d["status"] == "running" {
		d = c.ok("shell.exec", map[string]any{"sessionId": sid, "input": ""})
		out += d["output"].(string)
	}
	if d["status"] != "completed" || out != "second\n" || d["sessionId"] != sid {
		t.Errorf("final poll = %v, output %q", d, out)
	}
	c.fails("shell.exec", map[string]any{"sessionId": sid, "input": ""}, 404, "Unknown shell session")
	// Background with stdin.
	d = c.ok("shell.exec", map[string]any{"input": "read a; echo got $a", "background": true})
	if d["status"] != "running" || d["output"] != "" {
		t.Fatalf("background = %v", d)
	}
	sid = d["sessionId"].(string)
	d = c.ok("shell.exec", map[string]any{"sessionId": sid, "input": "yes\n"})
	out = d["output"].(string)
	for d["status"] == "running" {
		d = c.ok("shell.exec", map[string]any{"sessionId": sid, "input": ""})
		out += d["output"].(string)
	}
	if d["status"] != "completed" || out != "got yes\n" {
		t.Errorf("background with stdin = %v", d)
	}
	// Timeout.
	d = c.ok("shell.exec", map[string]any{"input": "sleep 30", "timeoutMs": 200})
	for d["status"] == "running" {
		d = c.ok("shell.exec", map[string]any{"sessionId": d["sessionId"], "input": ""})
	}
	if d["status"] != "failed" || d["error"] != "Command timed out" {
		t.Errorf("timeout = %v", d)
	}
	// A cwd outside Root, a bad cwd, an empty input.
	c.fails("shell.exec", map[string]any{"input": "true", "cwd": "/"}, 403, "outside the device's export")
	if d := c.ok("shell.exec", map[string]any{"input": "true", "cwd": "nope"}); d["ok"] != false {
		t.Errorf("missing cwd = %v", d)
	}
	if d := c.ok("shell.exec", map[string]any{"input": " "}); d["ok"] != false {
		t.Errorf("empty input = %v", d)
	}
}

func TestNoShell(t *testing.T) {
	e, _, fsys := serve(t, export.Options{NoShell: true})
	if slices.Contains(e.Implements(), "shell.exec") {
		t.Errorf("Implements = %v", e.Implements())
	}
	openCall(t, fsys).fails("shell.exec", map[string]any{"input": "true"}, 400, "device does not implement shell.exec")
}

// pidOf waits for the pid a command wrote to file.
func pidOf(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
	}
	t.Fatalf("no pid in %s", file)
	return 0
}

// gone waits until pid no longer exists.
func gone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
	}
	t.Fatalf("%s: process %d still runs", what, pid)
}

func TestShellCancelledStart(t *testing.T) {
	_, root, fsys := serve(t, export.Options{})
	pidFile := filepath.Join(root, "pid")
	fid, err := fsys.Open("call", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"call": "shell.exec", "args": map[string]any{"input": "echo $$ > pid; exec sleep 600"}})
	if _, err := fid.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, pidFile)
	fid.Close() // the caller is gone before the answer: the command is killed
	gone(t, pid, "cancelled start")
	// A poll's caller gone leaves the command running.
	c := openCall(t, fsys)
	d := c.ok("shell.exec", map[string]any{"input": "echo $$ > pid2; exec sleep 600", "background": true})
	pid = pidOf(t, filepath.Join(root, "pid2"))
	fid, err = fsys.Open("call", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(map[string]any{"call": "shell.exec", "args": map[string]any{"sessionId": d["sessionId"], "input": ""}})
	fid.Write(append(b, '\n'))
	time.Sleep(100 * time.Millisecond)
	fid.Close()
	time.Sleep(200 * time.Millisecond)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("a cancelled poll killed its command: %v", err)
	}
}

func TestCloseEndsCommands(t *testing.T) {
	e, root, fsys := serve(t, export.Options{})
	c := openCall(t, fsys)
	c.ok("shell.exec", map[string]any{"input": "trap '' TERM; echo $$ > pid; while :; do sleep 1; done", "background": true})
	pid := pidOf(t, filepath.Join(root, "pid"))
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return")
	}
	gone(t, pid, "Close")
	if d := c.ok("shell.exec", map[string]any{"input": "true"}); d["ok"] != false {
		t.Errorf("a command after Close = %v, want refused", d)
	}
}

// A FIFO in the export is never served: an open of it, to read or to
// write, is ENXIO at once (a reader would otherwise get ESPIPE on its
// reads, and a blocking open would wait for a peer).
func TestSpecialFiles(t *testing.T) {
	_, root, fsys := serve(t, export.Options{})
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []uint8{plan9.OREAD, plan9.OWRITE, plan9.ORDWR} {
		errc := make(chan error, 1)
		go func() {
			fid, err := fsys.Open("fs/fifo", mode)
			if err == nil {
				fid.Close()
			}
			errc <- err
		}()
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "no such device or address") {
				t.Errorf("open mode %d of a FIFO: %v, want no such device or address", mode, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("open mode %d of a FIFO has not ended", mode)
		}
	}
}
