package ninep

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// patternFile is a read-only file of size bytes, byte i being pattern(i).
// Its reads count how many are in flight at once (the most in maxInflight)
// and, if block is set, wait until their context ends.
type patternFile struct {
	allow
	size        int64
	block       bool
	inflight    atomic.Int64
	maxInflight atomic.Int64
	reads       atomic.Int64
}

func pattern(i int64) byte { return byte(i*7 + i>>9) }

func (f *patternFile) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	return vfs.Attr{Ino: vfs.PathIno(f.path), Mode: 0o444, Size: f.size, Mtime: fixedTime, User: "gsv", Group: "gsv"}, nil
}

func (f *patternFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	return patternHandle{f}, nil
}

type patternHandle struct{ f *patternFile }

func (h patternHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	f := h.f
	f.reads.Add(1)
	n := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxInflight.Load()
		if n <= m || f.maxInflight.CompareAndSwap(m, n) {
			break
		}
	}
	if f.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	time.Sleep(2 * time.Millisecond) // a disk, or a network, behind the server
	if off >= f.size {
		return 0, nil
	}
	p = p[:min(int64(len(p)), f.size-off)]
	for i := range p {
		p[i] = pattern(off + int64(i))
	}
	return len(p), nil
}

func (h patternHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, vfs.ErrReadOnly
}

func (h patternHandle) Close(ctx context.Context) error { return nil }

// remoteTest serves the test tree (plus /pattern, 4 MiB, and /gate, a
// sized file whose reads block) on a unix socket, attaches to it over a
// connection the test holds, and returns the RemoteDir of the root.
func remoteTest(t *testing.T) (*testTree, vfs.Dir, net.Conn, *patternFile, *patternFile) {
	t.Helper()
	tt := newTestTree()
	pf := &patternFile{allow: allow{path: "/pattern"}, size: 4 << 20}
	gate := &patternFile{allow: allow{path: "/gate"}, size: 1 << 20, block: true}
	tt.root.Add("pattern", pf)
	tt.root.Add("gate", gate)
	sock := serveUnix(t, &Server{Root: tt.root, Auth: testAuth{}})
	// Through a relay, whose end towards the server a test may cut.
	pl := vfstest.ListenUnix(t)
	go func() {
		c, err := pl.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("unix", sock)
		if err != nil {
			c.Close()
			return
		}
		relayMu.Lock()
		relays[t] = s
		relayMu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		io.Copy(c, s)
		c.Close()
	}()
	t.Cleanup(func() {
		relayMu.Lock()
		delete(relays, t)
		relayMu.Unlock()
	})
	nc, err := net.Dial("unix", pl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := c.Attach(nil, "glenda", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Release()
	t.Cleanup(func() { nc.Close() })
	return tt, RemoteDir(fsys, "/", RemoteOptions{}), nc, pf, gate
}

// relays holds each test's connection from its relay to the server.
var (
	relayMu sync.Mutex
	relays  = map[*testing.T]net.Conn{}
)

func lookup(t *testing.T, d vfs.Dir, names ...string) vfs.Node {
	t.Helper()
	var n vfs.Node = d
	for _, name := range names {
		dd, ok := n.(vfs.Dir)
		if !ok {
			t.Fatalf("%s: not a directory", name)
		}
		var err error
		if n, err = dd.Lookup(context.Background(), nil, name); err != nil {
			t.Fatalf("lookup %s: %v", name, err)
		}
	}
	return n
}

func open(t *testing.T, n vfs.Node, flags int) vfs.Handle {
	t.Helper()
	h, err := n.(vfs.File).Open(context.Background(), nil, flags)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// readAll reads h from 0 to its end in reads of size n.
func readAll(t *testing.T, h vfs.Handle, n int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, n)
	for {
		m, err := h.Read(context.Background(), buf, int64(len(out)))
		if err != nil {
			t.Fatalf("read at %d: %v", len(out), err)
		}
		if m == 0 {
			return out
		}
		out = append(out, buf[:m]...)
	}
}

func wantErrno(t *testing.T, err error, errno syscall.Errno, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded, want %v", errno)
	}
	if vfs.Errno(err) != errno || !bytes.Contains([]byte(err.Error()), []byte(text)) {
		t.Fatalf("err = %v (errno %v), want %v and a text containing %q", err, vfs.Errno(err), errno, text)
	}
}

func TestRemoteSynthetic(t *testing.T) {
	ctx := context.Background()
	_, root, _, _, _ := remoteTest(t)
	view := lookup(t, root, "view")
	a, err := view.Attr(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A view has the length of its rendering, and is synthetic (QTTMP).
	if !a.Synthetic || a.Size != 6 || a.Mode != 0o755 || a.User != "gsv" || a.Mtime.Unix() != fixedTime.Unix() || a.Ino != vfs.PathIno("/view") {
		t.Errorf("attr of view = %+v", a)
	}
	if got := readAll(t, open(t, view, os.O_RDONLY), 4096); string(got) != "hello\n" {
		t.Errorf("view = %q", got)
	}
	_, err = view.(vfs.File).Open(ctx, nil, os.O_WRONLY)
	wantErrno(t, err, syscall.EACCES, "file is read-only")
	_, err = root.Lookup(ctx, nil, "nope")
	wantErrno(t, err, syscall.ENOENT, "file does not exist")
	_, err = lookup(t, root, "data").(vfs.Dir).Lookup(ctx, nil, "nope")
	wantErrno(t, err, syscall.ENOENT, "")

	ctl := open(t, lookup(t, root, "ctl"), os.O_RDWR)
	_, err = ctl.Write(ctx, []byte("bad thing\n"), 0)
	wantErrno(t, err, syscall.EINVAL, "unknown verb: bad")
	if _, err := ctl.Write(ctx, []byte("good thing\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctl, 100); string(got) != "ok\n" {
		t.Errorf("ctl answered %q", got)
	}
	call := open(t, lookup(t, root, "call"), os.O_RDWR)
	if _, err := call.Write(ctx, []byte("hello there\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, call, 100); string(got) != "HELLO THERE\n" {
		t.Errorf("call answered %q", got)
	}

	ents, err := root.ReadDir(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range ents {
		a, err := e.Node.Attr(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		names[e.Name] = a.Mode.IsDir()
	}
	if len(names) != 10 || !names["data"] || names["view"] {
		t.Errorf("listing of / = %v", names)
	}
}

func TestRemoteDataFiles(t *testing.T) {
	ctx := context.Background()
	tt, root, _, _, _ := remoteTest(t)
	data := lookup(t, root, "data").(vfs.Dir)
	cr := data.(vfs.Creator)
	_, h, err := cr.Create(ctx, nil, "f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(ctx, []byte("hello world\n"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Write(ctx, []byte("W"), 6); err != nil {
		t.Fatal(err)
	}
	if err := h.(vfs.Truncater).Truncate(ctx, 9); err != nil {
		t.Fatal(err)
	}
	h.Close(ctx)
	f := lookup(t, data, "f")
	a, err := f.Attr(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != 9 || a.Mode != 0o640 || a.Synthetic {
		t.Errorf("attr of f = %+v", a)
	}
	if got := readAll(t, open(t, f, os.O_RDONLY), 3); string(got) != "hello Wor" {
		t.Errorf("f = %q", got)
	}
	// O_TRUNC, then O_APPEND.
	h = open(t, f, os.O_WRONLY|os.O_TRUNC)
	if _, err := h.Write(ctx, []byte("one\n"), 0); err != nil {
		t.Fatal(err)
	}
	h = open(t, f, os.O_WRONLY|os.O_APPEND)
	if _, err := h.Write(ctx, []byte("two\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, open(t, f, os.O_RDONLY), 100); string(got) != "one\ntwo\n" {
		t.Errorf("f after trunc and append = %q", got)
	}
	// Create of an existing name: EEXIST with O_EXCL, else an open.
	_, _, err = cr.Create(ctx, nil, "f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	wantErrno(t, err, syscall.EEXIST, "exists")
	_, h, err = cr.Create(ctx, nil, "f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, h, 100); string(got) != "one\ntwo\n" {
		t.Errorf("f opened by create = %q", got)
	}
	h.Close(ctx)
	// chmod, mkdir, rename, remove.
	mode := fs.FileMode(0o600)
	if a, err := f.(vfs.Setter).SetAttr(ctx, nil, vfs.SetAttr{Mode: &mode}); err != nil || a.Mode != 0o600 {
		t.Fatalf("chmod: %+v, %v", a, err)
	}
	sub, err := cr.Mkdir(ctx, nil, "sub", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := sub.Attr(ctx, nil); err != nil || a.Mode != fs.ModeDir|0o750 {
		t.Fatalf("mkdir: %+v, %v", a, err)
	}
	dmode := fs.FileMode(0o700)
	if a, err := sub.(vfs.Setter).SetAttr(ctx, nil, vfs.SetAttr{Mode: &dmode}); err != nil || a.Mode != fs.ModeDir|0o700 {
		t.Fatalf("chmod dir: %+v, %v", a, err)
	}
	_, err = cr.Mkdir(ctx, nil, "sub", 0o750)
	wantErrno(t, err, syscall.EEXIST, "exists")
	rn := data.(vfs.Renamer)
	if err := rn.Rename(ctx, nil, "f", data, "g"); err != nil {
		t.Fatal(err)
	}
	_, err = data.Lookup(ctx, nil, "f")
	wantErrno(t, err, syscall.ENOENT, "")
	if got := readAll(t, open(t, lookup(t, data, "g"), os.O_RDONLY), 100); string(got) != "one\ntwo\n" {
		t.Errorf("g = %q", got)
	}
	err = rn.Rename(ctx, nil, "g", sub.(vfs.Dir), "g")
	wantErrno(t, err, syscall.EXDEV, "")
	rm := data.(vfs.Remover)
	if err := rm.Remove(ctx, nil, "g", false); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, rm.Remove(ctx, nil, "g", false), syscall.ENOENT, "")
	if err := rm.Remove(ctx, nil, "sub", true); err != nil {
		t.Fatal(err)
	}
	tt.data.mu.Lock()
	left := len(tt.data.kids)
	tt.data.mu.Unlock()
	if left != 0 {
		t.Errorf("data holds %d names after the removes", left)
	}
}

// TestRemoteLargeFile writes 20 MB through RemoteDir and reads it back in
// one read and in FUSE-sized reads made concurrently, as the kernel's
// readahead does.
func TestRemoteLargeFile(t *testing.T) {
	ctx := context.Background()
	_, root, _, _, _ := remoteTest(t)
	data := lookup(t, root, "data").(vfs.Dir)
	want := make([]byte, 20<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	_, h, err := data.(vfs.Creator).Create(ctx, nil, "big", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(want); off += 1 << 20 {
		if n, err := h.Write(ctx, want[off:off+1<<20], int64(off)); err != nil || n != 1<<20 {
			t.Fatalf("write at %d: %d, %v", off, n, err)
		}
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	big := lookup(t, data, "big")
	rh := open(t, big, os.O_RDONLY)
	got := make([]byte, len(want)+100)
	n, err := rh.Read(ctx, got, 0)
	if err != nil || n != len(want) || !bytes.Equal(got[:n], want) {
		t.Fatalf("one read of 20 MB: %d bytes, %v; equal %v", n, err, bytes.Equal(got[:n], want))
	}
	// 128 KiB reads, 8 at once.
	got = make([]byte, len(want))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var failed atomic.Value
	for off := 0; off < len(want); off += 128 << 10 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n, err := rh.Read(ctx, got[off:off+128<<10], int64(off))
			if err != nil || n != 128<<10 {
				failed.Store(errors.New("short read"))
			}
		})
	}
	wg.Wait()
	if failed.Load() != nil || !bytes.Equal(got, want) {
		t.Fatal("concurrent 128 KiB reads do not give the file")
	}
	// At the end: nothing.
	if n, err := rh.Read(ctx, got[:10], int64(len(want))); n != 0 || err != nil {
		t.Fatalf("read at the end: %d, %v", n, err)
	}
}

// TestRemoteReadsInFlight: one large read keeps several Treads in flight.
func TestRemoteReadsInFlight(t *testing.T) {
	ctx := context.Background()
	_, root, _, pf, _ := remoteTest(t)
	h := open(t, lookup(t, root, "pattern"), os.O_RDONLY)
	buf := make([]byte, 2<<20)
	n, err := h.Read(ctx, buf, 1000)
	if err != nil || n != len(buf) {
		t.Fatalf("read: %d, %v", n, err)
	}
	for i := range buf {
		if buf[i] != pattern(int64(1000+i)) {
			t.Fatalf("byte %d is %d, want %d", 1000+i, buf[i], pattern(int64(1000+i)))
		}
	}
	if m := pf.maxInflight.Load(); m < 4 {
		t.Errorf("at most %d Treads were in flight for a 2 MiB read, want several", m)
	}
	// A read over the end stops at it.
	n, err = h.Read(ctx, buf, pf.size-100)
	if err != nil || n != 100 {
		t.Fatalf("read over the end: %d, %v", n, err)
	}
}

// TestRemoteCancel: a cancelled read returns at once; a stream record that
// its Tread brings answers the next read.
func TestRemoteCancel(t *testing.T) {
	tt, root, _, _, _ := remoteTest(t)
	h := open(t, lookup(t, root, "stream"), os.O_RDONLY)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := h.Read(ctx, make([]byte, 100), 0)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > rpcTimeout {
		t.Fatalf("cancelled read: %v after %v", err, time.Since(start))
	}
	_, err = h.Read(vfs.WithNonblocking(context.Background()), make([]byte, 100), 0)
	wantErrno(t, err, syscall.EAGAIN, "")
	go func() { tt.feed <- []byte("record one\n") }()
	buf := make([]byte, 100)
	n, err := h.Read(context.Background(), buf, 0)
	if err != nil || string(buf[:n]) != "record one\n" {
		t.Fatalf("read after the cancelled one: %q, %v", buf[:n], err)
	}
}

// TestRemoteConnectionLost: when the connection ends (closed by the
// client, or by the server's side), every read in flight (blocked at the
// server) fails at once, and so does every later call.
func TestRemoteConnectionLost(t *testing.T) {
	for _, side := range []string{"client", "server"} {
		t.Run(side, func(t *testing.T) {
			_, root, nc, _, gate := remoteTest(t)
			ctx := context.Background()
			var handles []vfs.Handle
			for _, name := range []string{"late", "stream", "gate", "gate"} {
				handles = append(handles, open(t, lookup(t, root, name), os.O_RDONLY))
			}
			errs := make(chan error, len(handles))
			for _, h := range handles {
				go func() {
					_, err := h.Read(ctx, make([]byte, 256<<10), 0)
					errs <- err
				}()
			}
			deadline := time.Now().Add(rpcTimeout)
			for gate.inflight.Load() < 2*4 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if gate.inflight.Load() < 2*4 {
				t.Fatalf("%d reads of gate are in flight, want 8 (two reads of four pieces)", gate.inflight.Load())
			}
			if side == "client" {
				nc.Close()
			} else {
				relayMu.Lock()
				relays[t].Close()
				relayMu.Unlock()
			}
			start := time.Now()
			for range handles {
				select {
				case err := <-errs:
					wantErrno(t, err, syscall.EIO, "connection lost")
				case <-time.After(rpcTimeout):
					t.Fatalf("a read still waits %v after the connection was closed", rpcTimeout)
				}
			}
			if d := time.Since(start); d > rpcTimeout {
				t.Errorf("reads failed %v after the connection was closed", d)
			}
			_, err := root.Lookup(ctx, nil, "view")
			wantErrno(t, err, syscall.EIO, "connection lost")
			for _, h := range handles {
				h.Close(ctx)
			}
		})
	}
}

func TestRemoteErrno(t *testing.T) {
	for text, want := range map[string]syscall.Errno{
		"file does not exist":        syscall.ENOENT,
		"file 'a/b' not found":       syscall.ENOENT,
		"no such file or directory":  syscall.ENOENT,
		"permission denied":          syscall.EACCES,
		"file is read-only":          syscall.EACCES,
		"file exists":                syscall.EEXIST,
		"not a directory":            syscall.ENOTDIR,
		"directory not empty":        syscall.ENOTEMPTY,
		"sys.config: unknown verb x": syscall.EINVAL,
		"something odd":              syscall.EIO,
	} {
		if got := RemoteErrno(text); got != want {
			t.Errorf("RemoteErrno(%q) = %v, want %v", text, got, want)
		}
	}
}
