package devices

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// newSpace opens a kernel with its namespace and the router added, as the
// daemon has them.
func newSpace(t *testing.T) (*kerneltest.Env, *ns.Space) {
	t.Helper()
	return newSpaceOn(t, kerneltest.Open(t))
}

// newSpaceOn is newSpace on the kernel of e.
func newSpaceOn(t *testing.T, e *kerneltest.Env) (*kerneltest.Env, *ns.Space) {
	t.Helper()
	space := ns.New(e.K)
	r, err := New(e.K, Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { space.Close() })
	r.SetRoot(space.Root())
	return e, space
}

// serve answers the request frame req as id.
func serve(t *testing.T, k *kernel.Kernel, id *kernel.Identity, req string) abi.Response {
	t.Helper()
	var r abi.Response
	out := k.Serve(context.Background(), kerneltest.Caller(id), []byte(req))
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("response %q: %v", out, err)
	}
	return r
}

// A target routes: none or "gsv" is the local device; a device nobody
// knows is refused by the seed's checks (403 to a user, who has no access
// to it; 503 to root, who may use every device but finds it offline),
// for every routable syscall, before anything runs.
func TestRouteTarget(t *testing.T) {
	e, _ := newSpace(t)
	for _, target := range []string{``, `,"target":"gsv"`} {
		r := serve(t, e.K, e.Alice, `{"call":"fs.write","args":{"path":"~/t.txt","content":"x"`+target+`}}`)
		if !r.OK || !strings.Contains(string(mustJSON(t, r.Data)), `"ok":true`) {
			t.Fatalf("target %q: %+v", target, r)
		}
	}
	for _, req := range []string{
		`{"call":"fs.read","args":{"path":"/etc/passwd","target":"laptop"}}`,
		`{"call":"fs.write","args":{"path":"~/x","content":"","target":"laptop"}}`,
		`{"call":"fs.edit","args":{"path":"~/x","oldString":"a","newString":"b","target":"laptop"}}`,
		`{"call":"fs.delete","args":{"path":"~/x","target":"laptop"}}`,
		`{"call":"fs.search","args":{"query":"x","target":"laptop"}}`,
	} {
		r := serve(t, e.K, e.Alice, req)
		if r.OK || r.Error.Code != 403 || !strings.Contains(r.Error.Message, `Access denied to device "laptop"`) {
			t.Errorf("alice %s: %+v", req, r.Error)
		}
		r = serve(t, e.K, e.Root, req)
		if r.OK || r.Error.Code != 503 || !strings.Contains(r.Error.Message, `Device offline: "laptop"`) {
			t.Errorf("root %s: %+v", req, r.Error)
		}
	}
	r := serve(t, e.K, e.Root, `{"call":"shell.exec","args":{"input":"true","target":"laptop"}}`)
	if r.OK || r.Error.Code != 503 || !strings.HasPrefix(r.Error.Message, "shell.exec: ") {
		t.Errorf("shell.exec on laptop: %+v", r.Error)
	}
	r = serve(t, e.K, e.Root, `{"call":"shell.exec","args":{"input":"printf ok","target":"gsv"}}`)
	if !r.OK || string(mustJSON(t, r.Data)) != `{"exitCode":0,"output":"ok","status":"completed"}` {
		t.Errorf("shell.exec on gsv: %+v", r)
	}
}

// fs.* reaches the whole namespace as the caller: views render, ctl files
// run their lines, and the nodes' permissions hold.
func TestFSNamespace(t *testing.T) {
	e, _ := newSpace(t)
	ctx := context.Background()
	read := func(id *kernel.Identity, p string) *abi.FSReadResult {
		t.Helper()
		r, err := kernel.Do(ctx, e.K, kerneltest.Caller(id), abi.FsRead, &abi.FSReadArgs{Path: p})
		if err != nil {
			t.Fatalf("fs.read %s: %v", p, err)
		}
		return r
	}
	if r := read(e.Alice, "/etc/passwd"); !r.OK || !strings.Contains(r.Content, "\talice:x:") || r.Path != "/etc/passwd" {
		t.Fatalf("/etc/passwd: %+v", r)
	}
	if r := read(e.Alice, "/"); !r.OK || !r.Dir || strings.Join(r.Directories, " ") != "dev etc home sys var workspaces" {
		t.Fatalf("/: %+v", r)
	}
	if r := read(e.Alice, "/var"); !r.OK || strings.Join(r.Directories, " ") != "log sessions" { // log: the audit log (ns)
		t.Fatalf("/var: %+v", r)
	}
	if r := read(e.Alice, "/sys/config"); !r.OK || !strings.Contains(strings.Join(r.Files, " "), "ctl") {
		t.Fatalf("/sys/config: %+v", r)
	}
	if r := read(e.Alice, "/nosuch"); r.OK || !strings.Contains(r.Error, "/nosuch") {
		t.Fatalf("/nosuch: %+v", r)
	}
	// A ctl file runs what fs.write writes, with the writer's authority.
	write := func(id *kernel.Identity, p, content string) *abi.FSWriteResult {
		t.Helper()
		r, err := kernel.Do(ctx, e.K, kerneltest.Caller(id), abi.FsWrite, &abi.FSWriteArgs{Path: p, Content: content})
		if err != nil {
			t.Fatalf("fs.write %s: %v", p, err)
		}
		return r
	}
	if r := write(e.Root, "/sys/config/ctl", "set config/test/greeting hello\n"); !r.OK {
		t.Fatalf("root's ctl write: %+v", r)
	}
	if r := read(e.Root, "/sys/config/config/test/greeting"); !r.OK || r.Content != "     1\thello\n" {
		t.Fatalf("the key set through fs.write: %+v", r)
	}
	if r := write(e.Alice, "/sys/config/ctl", "set config/test/greeting bye\n"); r.OK {
		t.Fatalf("alice set a system key: %+v", r)
	}
	if r := write(e.Alice, "/etc/passwd", "x"); r.OK || !strings.Contains(r.Error, "/etc/passwd") {
		t.Fatalf("alice wrote /etc/passwd: %+v", r)
	}
	if r, err := kernel.Do(ctx, e.K, kerneltest.Caller(e.Root), abi.FsDelete, &abi.FSDeleteArgs{Path: "/etc/passwd"}); err != nil || r.OK {
		t.Fatalf("deleted /etc/passwd: %+v %v", r, err)
	}
	// The data tree is still served from its files.
	if r := write(e.Alice, "~/n.txt", "one\n"); !r.OK || r.Path != "/home/alice/n.txt" {
		t.Fatalf("data write: %+v", r)
	}
	if r := read(e.Bob, "/home/alice/n.txt"); !r.OK || r.Content != "     1\tone\n" {
		t.Fatalf("data read: %+v", r)
	}
}

// The results' JSON is the seed's: exactly the keys of each shape.
func TestResultJSON(t *testing.T) {
	ec := 0
	for _, tc := range []struct {
		v    any
		want string
	}{
		{&abi.FSReadResult{Error: "x: no"}, `{"error":"x: no","ok":false}`},
		{&abi.FSReadResult{OK: true, Dir: true, Path: "/d"}, `{"directories":[],"files":[],"ok":true,"path":"/d"}`},
		{&abi.FSReadResult{OK: true, Path: "/f"}, `{"content":"","lines":0,"ok":true,"path":"/f","size":0}`},
		{&abi.FSWriteResult{OK: true, Path: "/f"}, `{"ok":true,"path":"/f","size":0}`},
		{&abi.FSEditResult{OK: true, Path: "/f", Replacements: 1}, `{"ok":true,"path":"/f","replacements":1}`},
		{&abi.FSDeleteResult{Error: "no"}, `{"error":"no","ok":false}`},
		{&abi.FSSearchResult{OK: true}, `{"count":0,"matches":[],"ok":true}`},
		{&abi.FSSearchResult{OK: true, Count: 1, Matches: []abi.FSMatch{{Path: "/f", Line: 2, Content: "c"}}, Truncated: true},
			`{"count":1,"matches":[{"path":"/f","line":2,"content":"c"}],"ok":true,"truncated":true}`},
		{&abi.ShellExecResult{Status: "completed", ExitCode: &ec}, `{"exitCode":0,"output":"","status":"completed"}`},
		{&abi.ShellExecResult{Status: "failed", Error: "timed out after 1s", Output: "o", Truncated: true}, `{"error":"timed out after 1s","output":"o","status":"failed","truncated":true}`},
		{&abi.ShellExecResult{Error: "empty input"}, `{"error":"empty input","ok":false}`},
	} {
		if got := string(mustJSON(t, tc.v)); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.v, got, tc.want)
		}
	}
	var r abi.FSReadResult
	if err := json.Unmarshal([]byte(`{"directories":[],"files":["a"],"ok":true,"path":"/d"}`), &r); err != nil || !r.Dir || r.Files[0] != "a" {
		t.Errorf("decoding a listing: %+v %v", r, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A namespace directory the caller may not search or read refuses fs.read
// with the namespace's own error: a 403 naming the directory once.
func TestNSReadPermission(t *testing.T) {
	e, space := newSpace(t)
	sub := vfs.NewDir(ns.RootMeta("/secret/sub", 0o755))
	space.Bind("/secret", vfs.NewDir(ns.RootMeta("/secret", 0o700), vfs.DirEntry{Name: "sub", Node: sub}))
	for _, p := range []string{"/secret", "/secret/sub"} {
		r := serve(t, e.K, e.Alice, `{"call":"fs.read","args":{"path":"`+p+`"}}`)
		got := string(mustJSON(t, r.Data))
		if r.Error != nil {
			got = r.Error.Message
		}
		if !strings.Contains(got, "/secret: permission denied") || strings.Count(got, "/secret") != 1 {
			t.Errorf("alice reading %s: %+v %s", p, r.Error, got)
		}
	}
}
