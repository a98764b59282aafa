package ninep

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// The test tree:
//
//	/          vfs.StaticDir
//	  view     vfs.View: "hello\n"
//	  whoami   vfs.View: the caller's Cred (a vfs.Peer, see testAuth)
//	  ctl      vfs.Ctl: "bad..." fails with "unknown verb: bad", else "ok"
//	  call     vfs.Call: echoes the request upper-cased
//	  stream   vfs.Stream: records from testTree.feed, blocks until ctx ends
//	  panic    a file whose reads panic
//	  late     a file whose reads block until cancelled, then succeed
//	  data/    memDir: a writable in-memory directory

var fixedTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// allow is a vfs.Meta that lets everyone do everything.
type allow struct {
	path string
	dir  bool
}

func (m allow) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	return vfs.Attr{Ino: vfs.PathIno(m.path), Mode: vfs.ModeOf(m.dir, 0755), Mtime: fixedTime,
		User: "gsv", Group: "gsv", Synthetic: !m.dir}, nil
}

func (m allow) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error { return nil }

// testAuth accepts a peer that has no secret unless it came over TCP, and a
// peer whose secret is "good-token". The Cred is the Peer itself.
type testAuth struct{}

func (testAuth) Authenticate(ctx context.Context, p vfs.Peer) (vfs.Cred, error) {
	switch {
	case p.User == "evil":
		return nil, vfs.ErrPermission
	case len(p.Secret) > 0 && string(p.Secret) != "good-token":
		return nil, errors.New("bad token")
	case len(p.Secret) == 0 && p.Transport == "9p-tcp":
		return nil, errors.New("authentication required")
	}
	return p, nil
}

type testTree struct {
	root    *vfs.StaticDir
	feed    chan []byte // records for the stream file
	data    *memDir
	subs    atomic.Int64 // open stream subscriptions
	waiting atomic.Int64 // stream reads blocked in Next
}

func newTestTree() *testTree {
	tt := &testTree{feed: make(chan []byte), data: newMemDir(new(atomic.Uint64), 0777)}
	tt.root = vfs.NewDir(allow{"/", true},
		vfs.DirEntry{Name: "view", Node: &vfs.View{Meta: allow{path: "/view"},
			Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) { return []byte("hello\n"), nil }}},
		vfs.DirEntry{Name: "whoami", Node: &vfs.View{Meta: allow{path: "/whoami"},
			Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
				p, _ := cred.(vfs.Peer)
				return fmt.Appendf(nil, "%s %s %d %q\n", p.User, p.Transport, p.HostUID, p.Secret), nil
			}}},
		vfs.DirEntry{Name: "ctl", Node: &vfs.Ctl{Meta: allow{path: "/ctl"},
			Exec: func(ctx context.Context, cred vfs.Cred, line string) (string, error) {
				if strings.HasPrefix(line, "bad") {
					return "", vfs.Errorf(syscall.EINVAL, "unknown verb: bad")
				}
				return "ok", nil
			}}},
		vfs.DirEntry{Name: "call", Node: &vfs.Call{Meta: allow{path: "/call"},
			Do: func(ctx context.Context, cred vfs.Cred, req []byte) []byte {
				return []byte(strings.ToUpper(string(req)))
			}}},
		vfs.DirEntry{Name: "stream", Node: &vfs.Stream{Meta: allow{path: "/stream"},
			Subscribe: func(ctx context.Context, cred vfs.Cred) (vfs.Subscription, error) {
				tt.subs.Add(1)
				return &testSub{tt: tt, closed: make(chan struct{})}, nil
			}}},
		vfs.DirEntry{Name: "panic", Node: &funcFile{Meta: allow{path: "/panic"},
			read: func(ctx context.Context, p []byte) (int, error) { panic("boom") }}},
		vfs.DirEntry{Name: "late", Node: &funcFile{Meta: allow{path: "/late"},
			read: func(ctx context.Context, p []byte) (int, error) {
				<-ctx.Done()
				return copy(p, "finished anyway\n"), nil
			}}},
		vfs.DirEntry{Name: "data", Node: tt.data},
	)
	return tt
}

// testSub is a subscription fed by testTree.feed.
type testSub struct {
	tt     *testTree
	once   sync.Once
	closed chan struct{}
}

func (s *testSub) Next(ctx context.Context) ([]byte, error) {
	s.tt.waiting.Add(1)
	defer s.tt.waiting.Add(-1)
	select {
	case rec := <-s.tt.feed:
		return rec, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closed:
		return nil, errors.New("subscription closed")
	}
}

func (s *testSub) Poll() ([]byte, bool) { return nil, false }

func (s *testSub) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.tt.subs.Add(-1)
	})
}

// funcFile is a file whose reads call read.
type funcFile struct {
	vfs.Meta
	read func(ctx context.Context, p []byte) (int, error)
}

func (f *funcFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	return funcHandle{f}, nil
}

type funcHandle struct{ f *funcFile }

func (h funcHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	return h.f.read(ctx, p)
}
func (h funcHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, vfs.ErrReadOnly
}
func (h funcHandle) Close(ctx context.Context) error { return nil }

// memDir and memFile are a small writable in-memory tree. Inode numbers
// come from a counter per tree, so they are the same in every run.
type memDir struct {
	next *atomic.Uint64
	ino  uint64
	mu   sync.Mutex
	mode fs.FileMode
	kids map[string]vfs.Node
}

var (
	_ vfs.Creator = (*memDir)(nil)
	_ vfs.Remover = (*memDir)(nil)
	_ vfs.Renamer = (*memDir)(nil)
	_ vfs.Setter  = (*memDir)(nil)
	_ vfs.Setter  = (*memFile)(nil)
)

func newMemDir(next *atomic.Uint64, perm fs.FileMode) *memDir {
	return &memDir{next: next, ino: next.Add(1), mode: perm, kids: map[string]vfs.Node{}}
}

func (d *memDir) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return vfs.Attr{Ino: d.ino, Mode: fs.ModeDir | d.mode, Mtime: fixedTime, User: "gsv", Group: "gsv"}, nil
}

func (d *memDir) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n, ok := d.kids[name]; ok {
		return n, nil
	}
	return nil, vfs.ErrNotExist
}

func (d *memDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []vfs.DirEntry
	for name, n := range d.kids {
		out = append(out, vfs.DirEntry{Name: name, Node: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (d *memDir) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm fs.FileMode) (vfs.Node, vfs.Handle, error) {
	d.mu.Lock()
	n, ok := d.kids[name]
	if ok && flags&os.O_EXCL != 0 {
		d.mu.Unlock()
		return nil, nil, vfs.ErrExist
	}
	if !ok {
		n = &memFile{ino: d.next.Add(1), mode: perm}
		d.kids[name] = n
	}
	d.mu.Unlock()
	f, ok := n.(*memFile)
	if !ok {
		return nil, nil, vfs.ErrIsDir
	}
	h, err := f.Open(ctx, cred, flags)
	return f, h, err
}

func (d *memDir) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm fs.FileMode) (vfs.Node, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.kids[name]; ok {
		return nil, vfs.ErrExist
	}
	nd := newMemDir(d.next, perm)
	d.kids[name] = nd
	return nd, nil
}

func (d *memDir) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.kids[name]
	if !ok {
		return vfs.ErrNotExist
	}
	sub, isDir := n.(*memDir)
	switch {
	case dir && !isDir:
		return vfs.ErrNotDir
	case !dir && isDir:
		return vfs.ErrIsDir
	case isDir:
		sub.mu.Lock()
		empty := len(sub.kids) == 0
		sub.mu.Unlock()
		if !empty {
			return vfs.Errorf(syscall.ENOTEMPTY, "directory not empty")
		}
	}
	delete(d.kids, name)
	return nil
}

func (d *memDir) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	nd, ok := newDir.(*memDir)
	if !ok {
		return vfs.Errorf(syscall.EXDEV, "cross-device rename")
	}
	first, second := d, nd
	if first.ino > second.ino {
		first, second = second, first
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	if second != first {
		second.mu.Lock()
		defer second.mu.Unlock()
	}
	n, ok := d.kids[name]
	if !ok {
		return vfs.ErrNotExist
	}
	delete(d.kids, name)
	nd.kids[newName] = n
	return nil
}

func (d *memDir) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	if s.Size != nil {
		return vfs.Attr{}, vfs.ErrIsDir
	}
	if s.Mode != nil {
		d.mu.Lock()
		d.mode = s.Mode.Perm()
		d.mu.Unlock()
	}
	return d.Attr(ctx, cred)
}

type memFile struct {
	ino   uint64
	mu    sync.Mutex
	mode  fs.FileMode
	data  []byte
	mtime time.Time
}

func (f *memFile) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return vfs.Attr{Ino: f.ino, Mode: f.mode, Size: int64(len(f.data)), Mtime: f.mtime, User: "gsv", Group: "gsv"}, nil
}

func (f *memFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	if flags&os.O_TRUNC != 0 {
		f.mu.Lock()
		f.data = nil
		f.mu.Unlock()
	}
	return memHandle{f}, nil
}

func (f *memFile) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	f.mu.Lock()
	if s.Mode != nil {
		f.mode = s.Mode.Perm()
	}
	if s.Size != nil {
		n := int(*s.Size)
		if n <= len(f.data) {
			f.data = f.data[:n]
		} else {
			f.data = append(f.data, make([]byte, n-len(f.data))...)
		}
	}
	if s.Mtime != nil {
		f.mtime = *s.Mtime
	}
	f.mu.Unlock()
	return f.Attr(ctx, cred)
}

type memHandle struct{ f *memFile }

func (h memHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if off >= int64(len(h.f.data)) {
		return 0, nil
	}
	return copy(p, h.f.data[off:]), nil
}

func (h memHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if end := int(off) + len(p); end > len(h.f.data) {
		h.f.data = append(h.f.data, make([]byte, end-len(h.f.data))...)
	}
	return copy(h.f.data[off:], p), nil
}

func (h memHandle) Close(ctx context.Context) error { return nil }

// serveUnix serves srv on a unix socket in a fresh directory with Serve and
// returns the socket path. Serve is stopped, and must return, at cleanup.
func serveUnix(t testing.TB, srv *Server) string {
	t.Helper()
	l := vfstest.ListenUnix(t)
	serveListener(t, srv, l)
	return l.Addr().String()
}

// serveTCP serves srv on a fresh TCP port of 127.0.0.1 and returns its
// dial string, tcp!host!port. Serve is stopped, and must return, at cleanup.
func serveTCP(t testing.TB, srv *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveListener(t, srv, l)
	host, port, _ := net.SplitHostPort(l.Addr().String())
	return "tcp!" + host + "!" + port
}

// serveAsUID serves srv on a fresh unix socket whose every peer is host
// uid uid (as SO_PEERCRED would say of a process running as uid), and
// returns the socket's path.
func serveAsUID(t testing.TB, srv *Server, uid int) string {
	t.Helper()
	l := vfstest.ListenUnix(t)
	servePeers(t, srv, l, func(net.Conn) vfs.Peer {
		return vfs.Peer{Transport: "9p-unix", HostUID: uid, HostGID: uid}
	})
	return l.Addr().String()
}

// serveListener serves srv on l with Serve. Serve is stopped, and must
// return, at cleanup.
func serveListener(t testing.TB, srv *Server, l net.Listener) {
	servePeers(t, srv, l, nil)
}

// servePeers is serveListener with peerOf naming each connection's peer
// (see Serve).
func servePeers(t testing.TB, srv *Server, l net.Listener, peerOf func(net.Conn) vfs.Peer) {
	vfstest.Serve(t, l, func(ctx context.Context, l net.Listener) error { return srv.Serve(ctx, l, peerOf) })
}
