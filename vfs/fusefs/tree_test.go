package fusefs

// The test tree: synthetic files built from the vfs kinds, and a small
// writable in-memory data directory.

import (
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/vfs"
)

var testTime = time.Unix(1700000000, 0)

// allowMeta allows everything and reports fixed attributes.
type allowMeta struct{ a vfs.Attr }

func (m allowMeta) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) { return m.a, nil }
func (m allowMeta) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error {
	return nil
}

func meta(path string, dir bool, perm iofs.FileMode) allowMeta {
	return allowMeta{vfs.Attr{
		Ino:       vfs.PathIno(path),
		Mode:      vfs.ModeOf(dir, perm),
		Mtime:     testTime,
		User:      "root",
		Group:     "root",
		Synthetic: !dir,
	}}
}

// testAuth makes the Cred "uidN" for host uid N and refuses uid 1002.
type testAuth struct{}

func (testAuth) Authenticate(ctx context.Context, p vfs.Peer) (vfs.Cred, error) {
	if p.Transport != "fuse" {
		return nil, fmt.Errorf("transport %q", p.Transport)
	}
	if p.HostUID == 1002 {
		return nil, vfs.ErrPermission
	}
	return fmt.Sprintf("uid%d", p.HostUID), nil
}

type testTree struct {
	root *vfs.StaticDir
	hub  *hub
	data *memDir

	mu  sync.Mutex
	ctl []string // "cred line" per executed ctl command
}

func newTestTree() *testTree {
	t := &testTree{hub: &hub{subs: map[*chanSub]struct{}{}}}
	t.data = newMemFS().root
	t.root = vfs.NewDir(meta("/", true, 0o755),
		vfs.DirEntry{Name: "view", Node: &vfs.View{
			Meta: meta("/view", false, 0o444),
			Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
				return []byte("hello\n"), nil
			},
		}},
		vfs.DirEntry{Name: "ctl", Node: &vfs.Ctl{
			Meta: meta("/ctl", false, 0o666),
			Exec: func(ctx context.Context, cred vfs.Cred, line string) (string, error) {
				if strings.HasPrefix(line, "bad") {
					return "", vfs.Errorf(syscall.EINVAL, "unknown verb")
				}
				t.mu.Lock()
				t.ctl = append(t.ctl, fmt.Sprintf("%v %s", cred, line))
				t.mu.Unlock()
				return "ok", nil
			},
		}},
		vfs.DirEntry{Name: "call", Node: &vfs.Call{
			Meta: meta("/call", false, 0o666),
			Do: func(ctx context.Context, cred vfs.Cred, req []byte) []byte {
				return []byte(strings.ToUpper(string(req)))
			},
		}},
		vfs.DirEntry{Name: "stream", Node: &vfs.Stream{
			Meta:      meta("/stream", false, 0o444),
			Subscribe: t.hub.Subscribe,
		}},
		vfs.DirEntry{Name: "data", Node: t.data},
	)
	return t
}

func (t *testTree) ctlLines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.ctl...)
}

// hub feeds every subscription the records published.
type hub struct {
	mu   sync.Mutex
	subs map[*chanSub]struct{}
}

func (h *hub) Subscribe(ctx context.Context, cred vfs.Cred) (vfs.Subscription, error) {
	s := &chanSub{h: h, ch: make(chan []byte, 64)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s, nil
}

func (h *hub) publish(rec string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.ch <- []byte(rec):
		default:
		}
	}
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

type chanSub struct {
	h  *hub
	ch chan []byte
}

func (s *chanSub) Next(ctx context.Context) ([]byte, error) {
	select {
	case b := <-s.ch:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *chanSub) Poll() ([]byte, bool) {
	select {
	case b := <-s.ch:
		return b, true
	default:
		return nil, false
	}
}

func (s *chanSub) Close() {
	s.h.mu.Lock()
	delete(s.h.subs, s)
	s.h.mu.Unlock()
}

// memFS is a writable in-memory tree guarded by one lock.
type memFS struct {
	mu   sync.Mutex
	ino  uint64
	root *memDir
}

type memDir struct {
	fs    *memFS
	ino   uint64
	mode  iofs.FileMode
	mtime time.Time
	kids  map[string]vfs.Node // *memDir or *memFile
}

type memFile struct {
	fs    *memFS
	ino   uint64
	mode  iofs.FileMode
	mtime time.Time
	data  []byte
}

var (
	_ vfs.Dir       = (*memDir)(nil)
	_ vfs.Creator   = (*memDir)(nil)
	_ vfs.Remover   = (*memDir)(nil)
	_ vfs.Renamer   = (*memDir)(nil)
	_ vfs.Setter    = (*memDir)(nil)
	_ vfs.File      = (*memFile)(nil)
	_ vfs.Setter    = (*memFile)(nil)
	_ vfs.Truncater = (*memHandle)(nil)
)

func newMemFS() *memFS {
	m := &memFS{ino: 100}
	m.root = m.newDir(0o755)
	return m
}

func (m *memFS) next() uint64 { m.ino++; return m.ino }

func (m *memFS) newDir(perm iofs.FileMode) *memDir {
	return &memDir{fs: m, ino: m.next(), mode: iofs.ModeDir | perm, mtime: time.Now(), kids: map[string]vfs.Node{}}
}

func (d *memDir) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	return vfs.Attr{Ino: d.ino, Mode: d.mode, Mtime: d.mtime}, nil
}

func (d *memDir) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if n, ok := d.kids[name]; ok {
		return n, nil
	}
	return nil, vfs.ErrNotExist
}

func (d *memDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	var out []vfs.DirEntry
	for name, n := range d.kids {
		out = append(out, vfs.DirEntry{Name: name, Node: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (d *memDir) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm iofs.FileMode) (vfs.Node, vfs.Handle, error) {
	d.fs.mu.Lock()
	n, ok := d.kids[name]
	if !ok {
		n = &memFile{fs: d.fs, ino: d.fs.next(), mode: perm.Perm(), mtime: time.Now()}
		d.kids[name] = n
		d.mtime = time.Now()
	}
	d.fs.mu.Unlock()
	if ok && flags&os.O_EXCL != 0 {
		return nil, nil, vfs.ErrExist
	}
	f, isFile := n.(*memFile)
	if !isFile {
		return nil, nil, vfs.ErrIsDir
	}
	h, err := f.Open(ctx, cred, flags)
	return f, h, err
}

func (d *memDir) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm iofs.FileMode) (vfs.Node, error) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if _, ok := d.kids[name]; ok {
		return nil, vfs.ErrExist
	}
	nd := d.fs.newDir(perm.Perm())
	d.kids[name] = nd
	d.mtime = time.Now()
	return nd, nil
}

func (d *memDir) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	n, ok := d.kids[name]
	if !ok {
		return vfs.ErrNotExist
	}
	switch sub, isDir := n.(*memDir); {
	case isDir && !dir:
		return vfs.ErrIsDir
	case !isDir && dir:
		return vfs.ErrNotDir
	case isDir && len(sub.kids) > 0:
		return vfs.Errorf(syscall.ENOTEMPTY, "directory not empty")
	}
	delete(d.kids, name)
	d.mtime = time.Now()
	return nil
}

func (d *memDir) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	nd, ok := newDir.(*memDir)
	if !ok {
		return vfs.Errorf(syscall.EXDEV, "cross-device rename")
	}
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	n, ok := d.kids[name]
	if !ok {
		return vfs.ErrNotExist
	}
	if old, ok := nd.kids[newName].(*memDir); ok && len(old.kids) > 0 {
		return vfs.Errorf(syscall.ENOTEMPTY, "directory not empty")
	}
	delete(d.kids, name)
	nd.kids[newName] = n
	d.mtime, nd.mtime = time.Now(), time.Now()
	return nil
}

func (d *memDir) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	d.fs.mu.Lock()
	if s.Size != nil {
		d.fs.mu.Unlock()
		return vfs.Attr{}, vfs.ErrIsDir
	}
	if s.Mode != nil {
		d.mode = iofs.ModeDir | s.Mode.Perm()
	}
	if s.Mtime != nil {
		d.mtime = *s.Mtime
	}
	d.fs.mu.Unlock()
	return d.Attr(ctx, cred)
}

func (f *memFile) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return vfs.Attr{Ino: f.ino, Mode: f.mode, Size: int64(len(f.data)), Mtime: f.mtime}, nil
}

func (f *memFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	if flags&os.O_TRUNC != 0 {
		f.fs.mu.Lock()
		f.data, f.mtime = nil, time.Now()
		f.fs.mu.Unlock()
	}
	return &memHandle{f: f, append: flags&os.O_APPEND != 0}, nil
}

func (f *memFile) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	f.fs.mu.Lock()
	if s.Size != nil {
		f.truncate(*s.Size)
	}
	if s.Mode != nil {
		f.mode = s.Mode.Perm()
	}
	if s.Mtime != nil {
		f.mtime = *s.Mtime
	}
	f.fs.mu.Unlock()
	return f.Attr(ctx, cred)
}

// truncate needs f.fs.mu.
func (f *memFile) truncate(size int64) {
	if size <= int64(len(f.data)) {
		f.data = f.data[:size]
	} else {
		f.data = append(f.data, make([]byte, size-int64(len(f.data)))...)
	}
	f.mtime = time.Now()
}

type memHandle struct {
	f      *memFile
	append bool
}

func (h *memHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.f.fs.mu.Lock()
	defer h.f.fs.mu.Unlock()
	if off >= int64(len(h.f.data)) {
		return 0, nil
	}
	return copy(p, h.f.data[off:]), nil
}

func (h *memHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.f.fs.mu.Lock()
	defer h.f.fs.mu.Unlock()
	if h.append {
		off = int64(len(h.f.data))
	}
	if end := off + int64(len(p)); end > int64(len(h.f.data)) {
		h.f.truncate(end)
	}
	copy(h.f.data[off:], p)
	h.f.mtime = time.Now()
	return len(p), nil
}

func (h *memHandle) Truncate(ctx context.Context, size int64) error {
	h.f.fs.mu.Lock()
	defer h.f.fs.mu.Unlock()
	h.f.truncate(size)
	return nil
}

func (h *memHandle) Close(ctx context.Context) error { return nil }
