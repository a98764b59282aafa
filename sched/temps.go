package sched

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// Scratch files: the temporary files editors make in /var/spool/cron,
// kept in memory per caller (maxTemps, maxTempSize, tempTTL).

// validTempName says whether name may be a scratch file: any file name
// (vfs.CheckName).
func validTempName(name string) error { return vfs.CheckName(name) }

// temp returns the caller's scratch file name, or nil.
func (d *cronDir) temp(c *kernel.Caller, name string) *tempNode {
	d.mu.Lock()
	f := d.temps[c.Uid][name]
	d.mu.Unlock()
	if f == nil {
		return nil
	}
	return d.tempNode(c, name, f)
}

func (d *cronDir) tempNode(c *kernel.Caller, name string, f *tempFile) *tempNode {
	host := c.HostUID
	if host < 0 {
		host = int(c.Uid)
	}
	return &tempNode{name: name, uid: c.Uid, gid: c.Gid, hostUID: uint32(host), user: c.Username, f: f}
}

// tempsOf returns uid's scratch files, making the map if need be. d.mu is
// held.
func (d *cronDir) tempsOfLocked(uid uint32) map[string]*tempFile {
	ts := d.temps[uid]
	if ts == nil {
		ts = map[string]*tempFile{}
		d.temps[uid] = ts
	}
	return ts
}

func errTooManyTemps() error {
	return vfs.Errorf(syscall.ENOSPC, fmt.Sprintf("too many scratch files in %s (at most %d)", cronDirPath, maxTemps))
}

// sweep drops scratch files unused for tempTTL. d.mu is held.
func (d *cronDir) sweepLocked() {
	cut := time.Now().Add(-tempTTL)
	for uid, ts := range d.temps {
		for name, f := range ts {
			f.mu.Lock()
			old := f.used.Before(cut) && f.open == 0
			f.mu.Unlock()
			if old {
				delete(ts, name)
			}
		}
		if len(ts) == 0 {
			delete(d.temps, uid)
		}
	}
}

// tempFile is the content of a scratch file.
type tempFile struct {
	mu    sync.Mutex
	data  []byte
	mode  fs.FileMode
	mtime time.Time
	used  time.Time
	open  int // handles open
}

func (f *tempFile) bytes() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used = time.Now()
	return append([]byte(nil), f.data...)
}

// tempNode is a scratch file as its owner sees it.
type tempNode struct {
	name    string
	uid     uint32
	gid     uint32
	hostUID uint32
	user    string
	f       *tempFile
}

var (
	_ vfs.File   = (*tempNode)(nil)
	_ vfs.Setter = (*tempNode)(nil)
)

func (n *tempNode) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	return vfs.Attr{Ino: vfs.PathIno(fmt.Sprintf("%s/%s\x00%d", cronDirPath, n.name, n.uid)), Mode: n.f.mode,
		Size: int64(len(n.f.data)), Mtime: n.f.mtime, Uid: n.hostUID, Gid: n.gid, User: n.user, Group: "users",
		Synthetic: true}, nil
}

// Access lets only the owner in (the vfs kinds' Meta does this for the
// others; fusefs asks for access(2)).
func (n *tempNode) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error {
	if ns.CallerOf(cred, "").Uid != n.uid {
		return vfs.ErrPermission
	}
	return nil
}

func (n *tempNode) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	if err := n.Access(ctx, cred, vfs.WantOf(flags)); err != nil {
		return nil, err
	}
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	if flags&os.O_TRUNC != 0 && vfs.WantOf(flags)&vfs.WantWrite != 0 {
		n.f.data, n.f.mtime = nil, time.Now()
	}
	n.f.used = time.Now()
	n.f.open++
	return &tempHandle{f: n.f, write: vfs.WantOf(flags)&vfs.WantWrite != 0, appendOnly: flags&os.O_APPEND != 0}, nil
}

func (n *tempNode) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	if err := n.Access(ctx, cred, vfs.WantWrite); err != nil {
		return vfs.Attr{}, err
	}
	n.f.mu.Lock()
	if s.Size != nil {
		if err := n.f.resizeLocked(*s.Size); err != nil {
			n.f.mu.Unlock()
			return vfs.Attr{}, err
		}
	}
	if s.Mode != nil {
		n.f.mode = s.Mode.Perm()
	}
	if s.Mtime != nil {
		n.f.mtime = *s.Mtime
	}
	n.f.mu.Unlock()
	return n.Attr(ctx, cred)
}

// resize cuts or extends the data. f.mu is held.
func (f *tempFile) resizeLocked(size int64) error {
	switch {
	case size < 0:
		return vfs.Errorf(syscall.EINVAL, "negative size")
	case size > maxTempSize:
		return vfs.Errorf(syscall.EFBIG, "scratch file too large")
	case size <= int64(len(f.data)):
		f.data = f.data[:size]
	default:
		f.data = append(f.data, make([]byte, int(size)-len(f.data))...)
	}
	f.mtime, f.used = time.Now(), time.Now()
	return nil
}

// tempHandle is an open scratch file: reads and writes at offsets, like
// a file on disk.
type tempHandle struct {
	f          *tempFile
	write      bool
	appendOnly bool
	once       sync.Once
}

var _ vfs.Truncater = (*tempHandle)(nil)

func (h *tempHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.used = time.Now()
	if off < 0 || off >= int64(len(h.f.data)) {
		return 0, nil
	}
	return copy(p, h.f.data[off:]), nil
}

func (h *tempHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if !h.write {
		return 0, vfs.ErrReadOnly
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if h.appendOnly {
		off = int64(len(h.f.data))
	}
	end := off + int64(len(p))
	if off < 0 || end > maxTempSize {
		return 0, vfs.Errorf(syscall.EFBIG, "scratch file too large")
	}
	if end > int64(len(h.f.data)) {
		h.f.data = append(h.f.data, make([]byte, int(end)-len(h.f.data))...)
	}
	copy(h.f.data[off:], p)
	h.f.mtime, h.f.used = time.Now(), time.Now()
	return len(p), nil
}

func (h *tempHandle) Truncate(ctx context.Context, size int64) error {
	if !h.write {
		return vfs.ErrReadOnly
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.f.resizeLocked(size)
}

func (h *tempHandle) Close(ctx context.Context) error {
	h.once.Do(func() {
		h.f.mu.Lock()
		h.f.open--
		h.f.used = time.Now()
		h.f.mu.Unlock()
	})
	return nil
}
