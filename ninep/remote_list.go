package ninep

// The listings of a RemoteDir: a directory read to its end in whole
// messages, its entries' attributes kept for readdirTTL, and the next
// directories of a walker listed ahead (readAheadDirs).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"9fans.net/go/plan9"

	"gsvfs.dev/gsvfs/vfs"
)

// listing is what one ReadDir of a directory returned.
type listing struct {
	until   time.Time
	changes uint64 // remote.changes before the listing was read
	attrs   map[string]vfs.Attr
	dirs    []string       // the names of its directories, in the server's order
	dirAt   map[string]int // the index of each in dirs
}

// dirRead is one read of a directory's listing, done when done is closed.
type dirRead struct {
	done    chan struct{}
	state   atomic.Int32 // a read ahead: aheadQueued, aheadStarted or aheadDropped
	changes uint64       // remote.changes before the read
	start   time.Time    // when the read began
	dirs    []*plan9.Dir
	err     error
}

// The states of a read ahead: waiting for a slot, reading, or dropped by
// the ReadDir it was for before it started (that ReadDir reads itself).
const (
	aheadQueued int32 = iota
	aheadStarted
	aheadDropped
)

// remember keeps the listing of dir for readdirTTL.
func (r *remote) remember(dir string, l *listing) {
	r.listMu.Lock()
	defer r.listMu.Unlock()
	if r.listings == nil {
		r.listings = map[string]*listing{}
	}
	if len(r.listings) >= maxListings {
		now := time.Now()
		for p, l := range r.listings {
			if now.After(l.until) {
				delete(r.listings, p)
			}
		}
		if len(r.listings) >= maxListings {
			clear(r.listings)
		}
	}
	r.listings[dir] = l
}

// listed returns the attributes of name in the fresh listing of dir, if
// there is one, nothing has changed through the tree since it was read,
// and it holds name.
func (r *remote) listed(dir, name string) (*cachedAttr, bool) {
	r.listMu.Lock()
	defer r.listMu.Unlock()
	l := r.listings[dir]
	if l == nil {
		return nil, false
	}
	if time.Now().After(l.until) || l.changes != r.changes.Load() {
		delete(r.listings, dir)
		return nil, false
	}
	a, ok := l.attrs[name]
	if !ok {
		return nil, false
	}
	return &cachedAttr{a, l.until, l.changes}, true
}

// forget drops the listing of dir: something in it changed.
func (r *remote) forget(dir string) {
	r.changes.Add(1)
	r.listMu.Lock()
	delete(r.listings, dir)
	r.listMu.Unlock()
}

// parent is the path of the directory holding p.
func parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// ReadDir implements vfs.Dir: the directory is opened and read to its
// end, unless its listing was read ahead (see readAheadDirs) within
// readdirTTL and nothing has changed through the tree since; the entries
// carry their attributes.
func (d *remoteDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	if err := d.r.access(ctx, cred, vfs.WantRead); err != nil {
		return nil, err
	}
	got, err := d.r.readAheadOf(ctx, d.path)
	if err != nil {
		return nil, err
	}
	if got == nil {
		got = &dirRead{changes: d.r.changes.Load(), start: time.Now()} // before the read: a change during it voids it
		if got.dirs, err = d.r.readList(ctx, d.path); err != nil {
			return nil, err
		}
	}
	until := got.start.Add(readdirTTL)
	out := make([]vfs.DirEntry, 0, len(got.dirs))
	l := &listing{until: until, changes: got.changes, attrs: make(map[string]vfs.Attr, len(got.dirs)), dirAt: map[string]int{}}
	for _, di := range got.dirs {
		if di.Name == "." || di.Name == ".." {
			continue
		}
		if !d.r.goodName(di.Name) {
			name := di.Name
			if len(name) > MaxNameLen+1 {
				name = name[:MaxNameLen+1] + "..."
			}
			return nil, vfs.Errorf(syscall.EIO, fmt.Sprintf("/%s: the server listed a bad name %q: refused", d.path, name))
		}
		a := d.r.attr(di)
		l.attrs[di.Name] = a
		c := &cachedAttr{a, until, got.changes}
		n := d.r.node(d.child(di.Name), a)
		switch n := n.(type) {
		case *remoteDir:
			n.cached.Store(c)
			l.dirAt[di.Name] = len(l.dirs)
			l.dirs = append(l.dirs, di.Name)
		case *remoteFile:
			n.cached.Store(c)
		}
		out = append(out, vfs.DirEntry{Name: di.Name, Node: n, Attr: &c.a})
	}
	d.r.remember(d.path, l)
	d.r.readAhead(d.path)
	return out, nil
}

// readList reads the listing of the directory p: a Twalk and a Topen,
// Treads of a whole message until an empty one, and a Tclunk. The 9fans
// client reports the end of a connection as it reports an empty read
// (io.EOF); the clunk's answer, which follows the empty read's, shows the
// connection was alive, and a clunk on a failed connection fails at once.
func (r *remote) readList(ctx context.Context, p string) ([]*plan9.Dir, error) {
	return do(ctx, r, func() ([]*plan9.Dir, error) {
		fid, err := r.fsys.Open(p, plan9.OREAD)
		if err != nil {
			return nil, err
		}
		bp := dirBufs.Get().(*[]byte)
		defer dirBufs.Put(bp)
		buf := *bp
		var dirs []*plan9.Dir
		total := 0
		for {
			n, err := fid.Read(buf)
			if err == io.EOF {
				break
			}
			if total += n; err == nil && total > MaxListing {
				err = refusal{vfs.Errorf(syscall.EFBIG, fmt.Sprintf("/%s: a listing of more than %d bytes: refused", p, MaxListing))}
			}
			if err == nil {
				dirs, err = unpackDirs(dirs, buf[:n])
			}
			if err != nil {
				fid.Close()
				return nil, err
			}
		}
		if err := fid.Close(); connErr(err) {
			return nil, err
		}
		return dirs, nil
	}, nil)
}

// dirBufs holds the buffers of directory reads: each asks for a whole
// message of stats.
var dirBufs = sync.Pool{New: func() any { b := make([]byte, RemoteChunk); return &b }}

// unpackDirs appends the stats of a directory read's data b to dirs.
func unpackDirs(dirs []*plan9.Dir, b []byte) ([]*plan9.Dir, error) {
	for len(b) > 0 {
		if len(b) < 2 {
			return dirs, plan9.ProtocolError("short stat in a directory read")
		}
		n := int(b[0]) | int(b[1])<<8
		if len(b) < n+2 {
			return dirs, plan9.ProtocolError("short stat in a directory read")
		}
		d, err := plan9.UnmarshalDir(b[:n+2])
		if err != nil {
			return dirs, err
		}
		dirs = append(dirs, d)
		b = b[n+2:]
	}
	return dirs, nil
}

// readAheadOf returns the listing of dir read ahead, waiting for it if it
// is in flight, when there is one that stands (read within readdirTTL,
// nothing changed through the tree since it began); else nil. It is
// forgotten either way: a listing read ahead serves one ReadDir. One that
// still waits for a slot is dropped: the caller reads at once instead of
// behind the other reads ahead.
func (r *remote) readAheadOf(ctx context.Context, dir string) (*dirRead, error) {
	r.aheadMu.Lock()
	a := r.ahead[dir]
	delete(r.ahead, dir)
	r.aheadMu.Unlock()
	if a == nil || a.state.CompareAndSwap(aheadQueued, aheadDropped) {
		return nil, nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.dead:
		return nil, r.deadErr
	}
	if a.err != nil || a.changes != r.changes.Load() || time.Since(a.start) >= readdirTTL {
		return nil, nil
	}
	return a, nil
}

// readAhead starts reading the listings of the directories that follow
// dir in its parent's fresh listing, up to readAheadDirs of them, when dir
// is in that listing: a walker lists them next. The reads run as the tree
// does every call, as the identity fsys attached with; a read that fails
// is forgotten, and the ReadDir it was for reads again.
func (r *remote) readAhead(dir string) {
	if dir == "" {
		return
	}
	p, name := parent(dir), dir[strings.LastIndexByte(dir, '/')+1:]
	var next []string
	r.listMu.Lock()
	if l := r.listings[p]; l != nil && time.Now().Before(l.until) && l.changes == r.changes.Load() {
		if i, ok := l.dirAt[name]; ok {
			next = l.dirs[i+1 : min(len(l.dirs), i+1+readAheadDirs)]
		}
	}
	r.listMu.Unlock()
	if len(next) == 0 {
		return
	}
	r.aheadMu.Lock()
	defer r.aheadMu.Unlock()
	if r.ahead == nil {
		r.ahead = map[string]*dirRead{}
	}
	for _, n := range next {
		c := n
		if p != "" {
			c = p + "/" + n
		}
		if r.ahead[c] != nil {
			continue
		}
		if len(r.ahead) >= maxAhead {
			r.pruneAhead()
			if len(r.ahead) >= maxAhead {
				return
			}
		}
		a := &dirRead{done: make(chan struct{})}
		r.ahead[c] = a
		go r.fetch(c, a)
	}
}

// pruneAhead forgets the listings read ahead that no longer stand.
// r.aheadMu is held.
func (r *remote) pruneAhead() {
	for p, a := range r.ahead {
		select {
		case <-a.done:
			if a.err != nil || time.Since(a.start) >= readdirTTL {
				delete(r.ahead, p)
			}
		default:
		}
	}
}

// fetch reads the listing of dir ahead into a, in one of r.aheadSlots.
func (r *remote) fetch(dir string, a *dirRead) {
	defer close(a.done)
	select {
	case r.aheadSlots <- struct{}{}:
	case <-r.dead:
		a.err = r.deadErr
		return
	}
	defer func() { <-r.aheadSlots }()
	if !a.state.CompareAndSwap(aheadQueued, aheadStarted) {
		a.err = errors.New("dropped")
		return
	}
	a.changes, a.start = r.changes.Load(), time.Now()
	a.dirs, a.err = r.readList(context.Background(), dir)
}
