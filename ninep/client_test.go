package ninep

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/vfs/vfstest"
)

func mountTest(t *testing.T) (*testTree, string, *client.Fsys) {
	t.Helper()
	tt := newTestTree()
	// A real debug-level handler exercises the logging paths under -race.
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sock := serveUnix(t, &Server{Root: tt.root, Auth: testAuth{}, Logger: log})
	fsys, err := Mount("unix!"+sock, "glenda", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return tt, sock, fsys
}

func TestClientView(t *testing.T) {
	_, _, fsys := mountTest(t)
	if got := vfstest.ReadFile(t, fsys, "view"); got != "hello\n" {
		t.Errorf("view = %q, want %q", got, "hello\n")
	}
	// The unix peer is identified by SO_PEERCRED.
	want := fmt.Sprintf("glenda 9p-unix %d \"\"\n", os.Getuid())
	if got := vfstest.ReadFile(t, fsys, "whoami"); got != want {
		t.Errorf("whoami = %q, want %q", got, want)
	}
	if _, err := fsys.Open("view", plan9.OWRITE); err == nil || err.Error() != "file is read-only" {
		t.Errorf("open view for writing: err = %v, want file is read-only", err)
	}
	if _, err := fsys.Open("nope", plan9.OREAD); err == nil || err.Error() != "file does not exist" {
		t.Errorf("open nope: err = %v, want file does not exist", err)
	}
}

func TestClientCtl(t *testing.T) {
	_, _, fsys := mountTest(t)
	fid, err := fsys.Open("ctl", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	_, err = fid.Write([]byte("bad thing\n"))
	if err == nil || err.Error() != "unknown verb: bad" {
		t.Fatalf("write bad: err = %v, want unknown verb: bad", err)
	}
	if _, err := fid.Write([]byte("good thing\n")); err != nil {
		t.Fatalf("write good: %v", err)
	}
	buf := make([]byte, 100)
	n, err := fid.ReadAt(buf[:3], 0)
	if err != nil || string(buf[:n]) != "ok\n" {
		t.Errorf("read ctl result = %q, %v; want ok", buf[:n], err)
	}
}

func TestClientCall(t *testing.T) {
	_, _, fsys := mountTest(t)
	fid, err := fsys.Open("call", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	if _, err := fid.Write([]byte("hello there\n")); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(fid)
	if err != nil || string(b) != "HELLO THERE\n" {
		t.Errorf("call response = %q, %v; want HELLO THERE", b, err)
	}
}

func TestClientData(t *testing.T) {
	_, _, fsys := mountTest(t)
	fid, err := fsys.Create("data/f", plan9.ORDWR, 0640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(fid)
	if err != nil || string(b) != "abcdef" {
		t.Errorf("read back %q, %v", b, err)
	}
	fid.Close()
	if _, err := fsys.Create("data/f", plan9.ORDWR, 0640); err == nil || err.Error() != "file exists" {
		t.Errorf("create existing: err = %v, want file exists", err)
	}

	d, err := fsys.Stat("data/f")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "f" || d.Length != 6 || d.Mode != 0640 || d.Uid != "gsv" || d.Qid.Type != plan9.QTFILE {
		t.Errorf("stat data/f = %v", d)
	}

	// wstat: rename, truncate, chmod.
	var nd plan9.Dir
	nd.Null()
	nd.Name = "g"
	if err := fsys.Wstat("data/f", &nd); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if _, err := fsys.Stat("data/f"); err == nil {
		t.Errorf("data/f still exists after rename")
	}
	nd.Null()
	nd.Length = 2
	nd.Mode = 0600
	if err := fsys.Wstat("data/g", &nd); err != nil {
		t.Fatalf("truncate+chmod: %v", err)
	}
	if got := vfstest.ReadFile(t, fsys, "data/g"); got != "ab" {
		t.Errorf("after truncate: %q", got)
	}
	if d, err := fsys.Stat("data/g"); err != nil || d.Mode != 0600 || d.Length != 2 {
		t.Errorf("stat data/g = %v, %v", d, err)
	}
	// A wstat that touches nothing is a sync.
	nd.Null()
	if err := fsys.Wstat("data/g", &nd); err != nil {
		t.Errorf("sync wstat: %v", err)
	}
	// Changing the uid is refused.
	nd.Null()
	nd.Uid = "root"
	if err := fsys.Wstat("data/g", &nd); err == nil || err.Error() != "wstat cannot change uid" {
		t.Errorf("chown: err = %v", err)
	}

	// mkdir, listing, remove.
	sub, err := fsys.Create("data/sub", plan9.OREAD, plan9.DMDIR|0755)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Qid().Type != plan9.QTDIR {
		t.Errorf("mkdir qid type %#x", sub.Qid().Type)
	}
	sub.Close()
	dfid, err := fsys.Open("data", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := dfid.Dirreadall()
	dfid.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"g", "sub"}) {
		t.Errorf("data listing = %v", names)
	}
	if err := fsys.Remove("data/g"); err != nil {
		t.Errorf("remove data/g: %v", err)
	}
	if err := fsys.Remove("data/sub"); err != nil {
		t.Errorf("remove data/sub: %v", err)
	}
	if err := fsys.Remove("view"); err == nil || err.Error() != "operation not supported" {
		t.Errorf("remove view: err = %v", err)
	}
	if _, err := fsys.Stat("data/g"); err == nil {
		t.Errorf("data/g still exists after remove")
	}
}

func TestClientDirList(t *testing.T) {
	_, _, fsys := mountTest(t)
	fid, err := fsys.Open(".", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	dirs, err := fid.Dirreadall()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		names = append(names, d.Name)
		if d.Name == "data" && d.Mode&plan9.DMDIR == 0 {
			t.Errorf("data is not a directory: %v", d)
		}
	}
	want := []string{"call", "ctl", "data", "late", "panic", "stream", "view", "whoami"}
	if !slices.Equal(names, want) {
		t.Errorf("root listing = %v, want %v", names, want)
	}
	// A directory cannot be opened for writing.
	if _, err := fsys.Open("data", plan9.OWRITE); err == nil || err.Error() != "is a directory" {
		t.Errorf("open dir for writing: err = %v", err)
	}
}

// A panic in a node's Read becomes an Rerror, and the server keeps serving.
func TestClientPanic(t *testing.T) {
	_, _, fsys := mountTest(t)
	fid, err := fsys.Open("panic", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fid.Read(make([]byte, 10))
	if err == nil || err.Error() != "internal server error" {
		t.Errorf("read of panicking file: err = %v", err)
	}
	fid.Close()
	if got := vfstest.ReadFile(t, fsys, "view"); got != "hello\n" {
		t.Errorf("after panic, view = %q", got)
	}
}

func TestMountAuth(t *testing.T) {
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}}
	sock := serveUnix(t, srv)

	fsys, err := Mount(sock, "glenda", []byte("good-token"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("glenda 9p-unix %d \"good-token\"\n", os.Getuid())
	if got := vfstest.ReadFile(t, fsys, "whoami"); got != want {
		t.Errorf("whoami = %q, want %q", got, want)
	}
	fsys.Close()

	if _, err := Mount(sock, "glenda", []byte("wrong")); err == nil || err.Error() != "bad token" {
		t.Errorf("mount with wrong token: err = %v", err)
	}
	if _, err := Mount(sock, "evil", nil); err == nil || err.Error() != "permission denied" {
		t.Errorf("mount as evil: err = %v", err)
	}

	// Over TCP the peer must authenticate.
	addr := serveTCP(t, srv)
	if _, err := Mount(addr, "glenda", nil); err == nil || err.Error() != "authentication required" {
		t.Errorf("tcp mount without token: err = %v", err)
	}
	fsys, err = Mount(addr, "glenda", []byte("good-token"))
	if err != nil {
		t.Fatal(err)
	}
	if got := vfstest.ReadFile(t, fsys, "whoami"); got != "glenda 9p-tcp -1 \"good-token\"\n" {
		t.Errorf("tcp whoami = %q", got)
	}
	fsys.Close()

	// Without an Authenticator, Tauth is refused and attach gets a nil Cred.
	sock2 := serveUnix(t, &Server{Root: tt.root})
	if _, err := Mount(sock2, "glenda", []byte("x")); err == nil || err.Error() != "authentication not required" {
		t.Errorf("auth on server without Auth: err = %v", err)
	}
	fsys, err = Mount(sock2, "glenda", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := vfstest.ReadFile(t, fsys, "whoami"); got != "  0 \"\"\n" {
		t.Errorf("whoami without Auth = %q", got)
	}
	fsys.Close()
}

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct{ in, network, addr string }{
		{"unix!/tmp/x.sock", "unix", "/tmp/x.sock"},
		{"/tmp/x.sock", "unix", "/tmp/x.sock"},
		{"x.sock", "unix", "x.sock"},
		{"tcp!example.com!5640", "tcp", "example.com:5640"},
		{"tcp!example.com", "tcp", "example.com:564"},
		{"tcp!example.com!9fs", "tcp", "example.com:564"},
		{"net!10.0.0.1!99", "tcp", "10.0.0.1:99"},
		{"tcp!::1!564", "tcp", "[::1]:564"},
		{"tls!example.com!5641", "tls", "example.com:5641"},
		{"ws!example.com!80", "ws", "example.com:80"},
		{"wss!example.com!443", "wss", "example.com:443"},
	} {
		n, a, err := ParseAddr(tc.in)
		if err != nil || n != tc.network || a != tc.addr {
			t.Errorf("ParseAddr(%q) = %q, %q, %v; want %q, %q", tc.in, n, a, err, tc.network, tc.addr)
		}
	}
	for _, bad := range []string{"", "unix!", "tcp!", "tcp!host!", "tcp!h!1!2", "udp!h!1"} {
		if _, _, err := ParseAddr(bad); err == nil {
			t.Errorf("ParseAddr(%q) succeeded", bad)
		}
	}
	if _, err := Dial("unix!" + strings.Repeat("x", 10) + "/nonexistent"); err == nil {
		t.Errorf("Dial of a missing socket succeeded")
	}
}

func TestErrorTruncation(t *testing.T) {
	long := errors.New(strings.Repeat("é", 1000))
	r := errorFcall(7, long, MinMsize)
	if n := len(r.Compose()); n > MinMsize {
		t.Errorf("Rerror is %d bytes, msize %d", n, MinMsize)
	}
	if !utf8.ValidString(r.Ename) || r.Tag != 7 {
		t.Errorf("truncated Rerror %v", r)
	}
}
