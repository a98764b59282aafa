package devices

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// Rogue devices: a device is anyone's (any user may mint a node token),
// so what it answers is bounded and checked. These tests stand the kernel
// up with its router on a real TCP listener and dial it with a device of
// the test's own making that answers what it likes over real 9P.

// devEnv is a kernel with its namespace and router, serving devices on a
// TCP listener of 127.0.0.1.
type devEnv struct {
	*kerneltest.Env
	space *ns.Space
	r     *Router
	addr  string // host:port of the listener
	gate  *ninep.Gate
}

// newDevEnv opens a devEnv.
func newDevEnv(t testing.TB) *devEnv {
	t.Helper()
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	r, err := New(e.K, Options{Space: space, Local: local.Options{Logger: kerneltest.Quiet()}, Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	r.SetRoot(space.Root())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := &ninep.Gate{}
	ctx, cancel := context.WithCancel(context.Background())
	sl := r.SplitListener(ctx, gate.Listen(l), time.Second)
	srv := &ninep.Server{Root: space.Root(), Auth: space}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ctx, sl, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-served
		space.Close()
	})
	return &devEnv{Env: e, space: space, r: r, addr: l.Addr().String(), gate: gate}
}

// nodeToken makes a node token of id's for device id.
func (e *devEnv) nodeToken(t testing.TB, id *kernel.Identity, device string) string {
	t.Helper()
	uid := id.Uid
	res, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Root), abi.SysTokenCreate,
		&abi.TokenCreateArgs{Kind: "node", Uid: &uid, AllowedDeviceID: &device})
	if err != nil {
		t.Fatal(err)
	}
	return res.Token.Token
}

// rogue is a device that answers what its fields say: answer gives the
// answer to each request frame written to its call file (a reader, read
// as the kernel asks), fs is its exported tree.
type rogue struct {
	answer func(req abi.Request) io.Reader
	fs     vfs.Dir
	rpc    bool         // its tree has an rpc file (rogue_rpc_test.go), not only the call file
	served atomic.Int64 // bytes of answers the kernel has read
	conn   net.Conn     // its connection, once dialed
}

// dial connects the rogue as device id with token, and serves its tree
// until the test ends. It returns the kernel's welcome.
func (g *rogue) dial(t *testing.T, e *devEnv, id, token string) abi.DeviceWelcome {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	g.conn = c
	h, _ := json.Marshal(abi.DeviceHello{ID: id, Token: token, Platform: "rogue", Version: "1", Implements: append(append([]string{}, Routable...), abi.SessionCalls...)})
	if _, err := c.Write(append([]byte(abi.DeviceMagic), append(h, '\n')...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("welcome: %v", err)
	}
	var w abi.DeviceWelcome
	if err := json.Unmarshal(line, &w); err != nil {
		t.Fatalf("welcome %q: %v", line, err)
	}
	if !w.OK {
		return w
	}
	fsys := g.fs
	if fsys == nil {
		fsys = vfs.NewDir(rogueMeta(fs.ModeDir | 0o755))
	}
	ents := []vfs.DirEntry{{Name: "call", Node: &rogueCall{g: g}}, {Name: "fs", Node: fsys}}
	if g.rpc {
		ents = append(ents, vfs.DirEntry{Name: "rpc", Node: &rogueRPC{g: g}})
	}
	root := vfs.NewDir(rogueMeta(fs.ModeDir|0o755), ents...)
	srv := &ninep.Server{Root: root}
	go srv.ServeConn(context.Background(), &readerConn{Conn: c, r: br}, vfs.Peer{Transport: "9p-tcp", HostUID: -1, HostGID: -1})
	waitCond(t, "the device online", func() bool { return e.r.remote(id) != nil })
	return w
}

// readerConn is a net.Conn whose reads come from r.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// waitCond polls cond until it holds, or fails the test after a minute
// (a guard against a hang that holds at load 10).
func waitCond(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// rogueMeta is the Meta of the rogue's nodes: anyone may do anything.
func rogueMeta(mode fs.FileMode) vfs.Meta { return openMeta{mode} }

type openMeta struct{ mode fs.FileMode }

func (m openMeta) Attr(context.Context, vfs.Cred) (vfs.Attr, error) {
	return vfs.Attr{Mode: m.mode, Synthetic: !m.mode.IsDir()}, nil
}
func (m openMeta) Access(context.Context, vfs.Cred, vfs.Want) error { return nil }

// rogueCall is the rogue's call file: a request line written gets the
// answer its rogue makes, read as the kernel reads it.
type rogueCall struct {
	openMeta
	g *rogue
}

func (f *rogueCall) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	return &rogueHandle{g: f.g}, nil
}

type rogueHandle struct {
	g   *rogue
	mu  sync.Mutex
	req []byte
	ans io.Reader
}

func (h *rogueHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.req = append(h.req, p...)
	if i := strings.IndexByte(string(h.req), '\n'); i >= 0 {
		var req abi.Request
		if err := json.Unmarshal(h.req[:i], &req); err != nil {
			return 0, err
		}
		h.ans = h.g.answer(req)
	}
	return len(p), nil
}

func (h *rogueHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ans == nil {
		return 0, nil
	}
	n, err := h.ans.Read(p)
	h.g.served.Add(int64(n))
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (h *rogueHandle) Close(ctx context.Context) error { return nil }

// frameOf is a response frame with data as its JSON data.
func frameOf(data string) io.Reader {
	return strings.NewReader(`{"type":"res","id":"1","ok":true,"data":` + data + "}\n")
}

// endless is a reader of a JSON answer whose content string is n bytes
// of 'a': made as it is read, never held whole.
func endless(n int64) io.Reader {
	return io.MultiReader(strings.NewReader(`{"type":"res","id":"1","ok":true,"data":{"path":"/big","content":"`),
		io.LimitReader(repeatA{}, n), strings.NewReader(`","lines":1,"size":1}}`+"\n"))
}

type repeatA struct{}

func (repeatA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// TestRogueAnswers: an answer over MaxAnswer is refused, with the kernel
// reading no more than it (a 40 MiB answer: without the bound the kernel
// decoded the whole of a 1 GB one), and every field of an answer is
// checked: names, paths, sizes, counts, session ids, blob refs, an error
// frame's code and message.
func TestRogueAnswers(t *testing.T) {
	e := newDevEnv(t)
	var mu sync.Mutex
	next := func(abi.Request) io.Reader { return frameOf(`{}`) }
	g := &rogue{answer: func(req abi.Request) io.Reader {
		mu.Lock()
		defer mu.Unlock()
		return next(req)
	}}
	g.dial(t, e, "rogue", e.nodeToken(t, e.Alice, "rogue"))
	set := func(f func(abi.Request) io.Reader) {
		mu.Lock()
		next = f
		mu.Unlock()
	}
	ctx := context.Background()
	alice := kerneltest.Caller(e.Alice)

	t.Run("Size", func(t *testing.T) {
		set(func(abi.Request) io.Reader { return endless(40 << 20) })
		g.served.Store(0)
		_, err := kernel.Do(ctx, e.K, alice, abi.FsRead, &abi.FSReadArgs{Target: "rogue", Path: "big"})
		if err == nil || abi.KindOf(err) != abi.Other || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bytes", MaxAnswer)) {
			t.Fatalf("a 40 MiB answer: %v, want a 500 refusing it", err)
		}
		if n := g.served.Load(); n > MaxAnswer+ninep.MaxMsize {
			t.Fatalf("the kernel read %d bytes of an answer bounded at %d", n, MaxAnswer)
		}
		// The device is held: its calls fail at once, unsent, until the
		// hold ends; then an answer within the bound is read.
		set(func(abi.Request) io.Reader { return endless(1 << 20) })
		g.served.Store(0)
		_, err = kernel.Do(ctx, e.K, alice, abi.FsRead, &abi.FSReadArgs{Target: "rogue", Path: "big"})
		if abi.KindOf(err) != abi.Offline || !strings.Contains(err.Error(), "is held") || g.served.Load() != 0 {
			t.Fatalf("a call to a device held after an answer over the bound: %v (%d bytes served), want a 503 unsent", err, g.served.Load())
		}
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			res, err := kernel.Do(ctx, e.K, alice, abi.FsRead, &abi.FSReadArgs{Target: "rogue", Path: "big"})
			if err == nil && len(res.Content) == 1<<20 {
				break
			}
			if abi.KindOf(err) != abi.Offline || time.Now().After(deadline) {
				t.Fatalf("a 1 MiB answer after the hold: %v", err)
			}
		}
	})

	long := strings.Repeat("n", 300)
	for _, c := range []struct {
		name, call, data string
		args             any
	}{
		{"name with a newline", "fs.read", `{"ok":true,"path":"/d","files":["ok","evil\nname"],"directories":[]}`, &abi.FSReadArgs{Path: "d"}},
		{"name of 300 bytes", "fs.read", `{"ok":true,"path":"/d","files":[],"directories":["` + long + `"]}`, &abi.FSReadArgs{Path: "d"}},
		{"name with a slash", "fs.read", `{"ok":true,"path":"/d","files":["../etc/passwd"],"directories":[]}`, &abi.FSReadArgs{Path: "d"}},
		{"size of 1 TiB", "fs.read", `{"ok":true,"path":"/f","content":"x\n","lines":1,"size":1099511627776}`, &abi.FSReadArgs{Path: "f"}},
		{"negative lines", "fs.read", `{"ok":true,"path":"/f","content":"x\n","lines":-5,"size":2}`, &abi.FSReadArgs{Path: "f"}},
		{"path with a newline", "fs.write", `{"ok":true,"path":"/a\nb","size":1}`, &abi.FSWriteArgs{Path: "f", Content: "x"}},
		{"negative replacements", "fs.edit", `{"ok":true,"path":"/f","replacements":-1}`, &abi.FSEditArgs{Path: "f", OldString: "a", NewString: "b"}},
		{"too many matches", "fs.search", `{"ok":true,"count":501,"matches":[` + strings.TrimSuffix(strings.Repeat(`{"path":"/f","line":1,"content":"x"},`, 501), ",") + `]}`, &abi.FSSearchArgs{Query: "x"}},
		{"bad session id", "shell.exec", `{"status":"running","output":"","sessionId":"../../x\n"}`, &abi.ShellExecArgs{Input: "true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			set(func(abi.Request) io.Reader { return frameOf(c.data) })
			args := withTarget(c.args, "rogue")
			_, err := e.K.Call(ctx, alice, c.call, args)
			if err == nil || abi.KindOf(err) != abi.Other || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("%s answered %s: %v, want a 500 refusing it", c.call, c.data[:min(len(c.data), 120)], err)
			}
		})
	}

	t.Run("ErrorFrame", func(t *testing.T) {
		set(func(abi.Request) io.Reader {
			return strings.NewReader(`{"type":"res","id":"1","ok":false,"error":{"code":200,"message":"fs.read: forged\nsecond line ` + strings.Repeat("x", 10000) + `"}}` + "\n")
		})
		_, err := kernel.Do(ctx, e.K, alice, abi.FsRead, &abi.FSReadArgs{Target: "rogue", Path: "f"})
		if err == nil || abi.KindOf(err) != abi.Other || strings.Contains(err.Error(), "\n") || len(err.Error()) > maxErrorText+200 {
			t.Fatalf("an error frame with code 200 and a long message of two lines: kind %d, %d bytes: %.200q", abi.KindOf(err), len(err.Error()), err)
		}
	})
}

// withTarget returns args, one of the routed syscalls' args, with its
// target set.
func withTarget(args any, target string) any {
	switch a := args.(type) {
	case *abi.FSReadArgs:
		a.Target = target
	case *abi.FSWriteArgs:
		a.Target = target
	case *abi.FSEditArgs:
		a.Target = target
	case *abi.FSSearchArgs:
		a.Target = target
	case *abi.ShellExecArgs:
		a.Target = target
	}
	return args
}

// TestRogueTree: the names and listings of a device's tree under
// /dev/<id>/fs are bounded: a listing with a name that has a newline, or
// one of 300 bytes, fails with EIO naming it, a listing of more than
// ninep.MaxListing bytes fails with EFBIG, and a claimed length past the
// largest int64 is never negative.
func TestRogueTree(t *testing.T) {
	e := newDevEnv(t)
	file := func(name string, size int64) vfs.DirEntry {
		return vfs.DirEntry{Name: name, Node: &sizedFile{openMeta: openMeta{0o644}, size: size}}
	}
	var many []vfs.DirEntry
	for i := range ninep.MaxListing / 200 {
		many = append(many, file(fmt.Sprintf("%0200d", i), 1))
	}
	tree := vfs.NewDir(rogueMeta(fs.ModeDir|0o755),
		vfs.DirEntry{Name: "newline", Node: vfs.NewDir(rogueMeta(fs.ModeDir|0o755), file("ok", 1), file("evil\nname", 1))},
		vfs.DirEntry{Name: "long", Node: vfs.NewDir(rogueMeta(fs.ModeDir|0o755), file(strings.Repeat("n", 300), 1))},
		vfs.DirEntry{Name: "many", Node: &vfs.FuncDir{Meta: rogueMeta(fs.ModeDir | 0o755),
			List: func(context.Context, vfs.Cred) ([]vfs.DirEntry, error) { return many, nil }}},
		vfs.DirEntry{Name: "fine", Node: vfs.NewDir(rogueMeta(fs.ModeDir|0o755), file("huge", -1), file("small", 5))},
		vfs.DirEntry{Name: "errs", Node: &sizedFile{openMeta: openMeta{0o644}, size: 1,
			err: errors.New("forged\nsecond line " + strings.Repeat("x", 8000))}},
	)
	g := &rogue{answer: func(abi.Request) io.Reader { return frameOf(`{}`) }, fs: tree}
	g.dial(t, e, "rogue", e.nodeToken(t, e.Alice, "rogue"))
	ctx := context.Background()
	dir := func(p string) vfs.Dir {
		t.Helper()
		var n vfs.Node = e.space.Root()
		for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
			c, err := n.(vfs.Dir).Lookup(ctx, e.Alice, name)
			if err != nil {
				t.Fatalf("walk %s: %v", p, err)
			}
			n = c
		}
		return n.(vfs.Dir)
	}
	for _, c := range []struct {
		dir   string
		errno syscall.Errno
	}{
		{"newline", syscall.EIO},
		{"long", syscall.EIO},
		{"many", syscall.EFBIG},
	} {
		_, err := dir("/dev/rogue/fs/"+c.dir).ReadDir(ctx, e.Alice)
		if vfs.Errno(err) != c.errno {
			t.Errorf("a listing of %s: %v (errno %d), want %v", c.dir, err, vfs.Errno(err), c.errno)
		}
	}
	ents, err := dir("/dev/rogue/fs/fine").ReadDir(ctx, e.Alice)
	if err != nil || len(ents) != 2 {
		t.Fatalf("a listing of fine: %v %v", ents, err)
	}
	for _, ent := range ents {
		if a, err := vfs.EntryAttr(ctx, ent, e.Alice); err != nil || a.Size < 0 {
			t.Errorf("%s: size %d, %v", ent.Name, a.Size, err)
		}
	}
	// A long error of two lines reaches the reader as one line of at most
	// 1 KiB.
	n, err := dir("/dev/rogue/fs").Lookup(ctx, e.Alice, "errs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.(vfs.File).Open(ctx, e.Alice, 0); err == nil || strings.Contains(err.Error(), "\n") || len(err.Error()) > 1024 {
		t.Errorf("the device's error of two lines and 8 KiB: %d bytes: %.100q", len(err.Error()), err)
	}
	// The tree is still served: a refused listing is that call's error.
	if _, err := dir("/dev/rogue/fs").ReadDir(ctx, e.Alice); err != nil {
		t.Fatalf("the tree after the refusals: %v", err)
	}
}

// sizedFile is a file that claims size bytes (a negative size: the
// largest 9P length, 2^64-1), and whose open fails with err (else EACCES).
type sizedFile struct {
	openMeta
	size int64
	err  error
}

func (f *sizedFile) Attr(context.Context, vfs.Cred) (vfs.Attr, error) {
	return vfs.Attr{Mode: f.mode, Size: f.size}, nil
}

func (f *sizedFile) Open(context.Context, vfs.Cred, int) (vfs.Handle, error) {
	if f.err != nil {
		return nil, f.err
	}
	return nil, vfs.ErrPermission
}

// TestRogueFrame: a 9P message from a device that claims a gigabyte ends
// the connection at its header: the kernel neither allocates for it nor
// reads its body (it read 64 MiB of one before).
func TestRogueFrame(t *testing.T) {
	e := newDevEnv(t)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, _ := json.Marshal(abi.DeviceHello{ID: "rogue", Token: e.nodeToken(t, e.Alice, "rogue"), Platform: "rogue", Version: "1", Implements: []string{"fs.read"}})
	c.Write(append([]byte(abi.DeviceMagic), append(h, '\n')...))
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"ok":true`) {
		t.Fatalf("welcome: %q %v", line, err)
	}
	// An Rversion of a gigabyte, and its body, 64 MiB of it.
	msg := make([]byte, 1<<20)
	copy(msg, []byte{0, 0, 0, 0x40, 101, 0xff, 0xff})
	c.SetWriteDeadline(time.Now().Add(time.Minute))
	written := 0
	for written < 64<<20 {
		n, err := c.Write(msg)
		written += n
		if err != nil {
			break
		}
		msg = make([]byte, 1<<20)
	}
	if written >= 64<<20 {
		t.Fatalf("the kernel read %d bytes of a 9P message that claims 1 GiB", written)
	}
	t.Logf("the connection ended after %d bytes written", written)
}
