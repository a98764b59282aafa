package repos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The undoable home: each user's home is also the repository
// <user>/home (kind "home", private), committed in batches by the room's
// home keeper. Every HomeEvery it walks each user's home through the
// namespace as that user (the same nodes and syscalls as their own ls
// and cat: nothing is read with more than their rights), reads the files
// whose size or mtime changed since its last walk, and commits the home
// on main when the tree differs: one commit per writer of the batch's
// changes (journal.go), each its writer's, its message the paths that
// writer changed. A file over
// maxHomeFile bytes is recorded in the message, not stored; so are
// symbolic links and names the walk cannot read. A write acknowledged
// before a crash is on disk, and the first walk after the restart
// records it.

// The home keeper's bounds.
const (
	maxHomeFile  = 1 << 20 // a file stored in the home's history
	maxHomeFiles = 20000   // files one walk records
	maxHomeDepth = 32      // directories deep
	homeRepo     = "home"  // the name of each user's home repository
)

// objectStorer is where a walk's blobs go.
type objectStorer = storer.EncodedObjectStorer

// homeSeen is what the keeper knew of a file at its last walk.
type homeSeen struct {
	size  int64
	mtime time.Time
	hash  plumbing.Hash
}

// Start starts the home keeper (Options.HomeEvery; negative: none).
func (r *Room) Start(ctx context.Context) error {
	if r.homeEvery < 0 {
		return nil
	}
	r.wg.Add(1)
	go r.homeKeeper()
	return nil
}

// homeKeeper commits every user's home and every workspace's working
// tree each homeEvery (keepOnce) until Close.
func (r *Room) homeKeeper() {
	defer r.wg.Done()
	t := time.NewTicker(r.homeEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		r.keepOnce(ctx)
		cancel()
	}
}

// CommitHome walks the home of the user uid as that user and commits it
// to <user>/home if it changed; it returns the new head, or "" if
// nothing changed. The keeper calls it; so do tests.
func (r *Room) CommitHome(ctx context.Context, uid uint32) (string, error) {
	u, err := r.k.UserOf(ctx, uid)
	if err != nil {
		return "", err
	}
	id, err := r.k.IdentityOf(ctx, uid)
	if err != nil {
		return "", err
	}
	rec, err := r.ensure(ctx, &record{Owner: u.Username, Name: homeRepo, OwnerUid: u.Uid, Kind: "home",
		Description: "every change to " + u.Home}, "refs/heads/main")
	if err != nil {
		return "", err
	}
	r.homeMu.Lock()
	seen := r.homeSeen[uid]
	r.homeMu.Unlock()
	if seen == nil {
		seen = map[string]homeSeen{}
	}
	unlock := r.lock(rec)
	defer unlock()
	g, err := r.open(rec)
	if err != nil {
		return "", err
	}
	// The writers noted before the walk: the walk sees their changes.
	notes := r.journal.drain(path.Clean(u.Home))
	w := &homeWalk{r: r, ctx: ctx, cred: id, seen: seen, next: map[string]homeSeen{}, files: flatTree{}, st: g.Storer}
	dir, err := w.find(u.Home)
	if err != nil {
		return "", err
	}
	if err := w.walk(dir, "", 0); err != nil {
		return "", err
	}
	r.homeMu.Lock()
	r.homeSeen[uid] = w.next
	r.homeMu.Unlock()
	th, err := writeTree(g.Storer, w.files)
	if err != nil {
		return "", err
	}
	ref := plumbing.NewBranchReferenceName("main")
	var old *plumbing.Reference
	parent := plumbing.ZeroHash
	if cur, err := g.Reference(ref, false); err == nil {
		old, parent = cur, cur.Hash()
		if cm, err := g.CommitObject(parent); err == nil && cm.TreeHash == th {
			return "", nil
		}
	}
	oldFiles, changed, err := changedPaths(g.Storer, parent, w.files)
	if err != nil {
		return "", err
	}
	tail := ""
	if len(w.skipped) > 0 {
		tail = "\n\nRecorded, not stored:\n" + strings.Join(w.skipped, "\n")
	}
	groups := groupByWriter(changed, notes, writer{name: u.Username, uid: u.Uid})
	h, err := r.commitByWriter(g, parent, oldFiles, w.files, groups, "home: ", tail)
	if err != nil {
		return "", err
	}
	if err := g.Storer.CheckAndSetReference(plumbing.NewHashReference(ref, h), old); err != nil {
		return "", err
	}
	r.touch(ctx, rec)
	return h.String(), nil
}

// changedPaths are the files of the commit parent's tree (none when
// zero) and the paths whose entries differ between them and f, sorted.
func changedPaths(s objectStorer, parent plumbing.Hash, f flatTree) (flatTree, []string, error) {
	old := flatTree{}
	if !parent.IsZero() {
		cm, err := object.GetCommit(s, parent)
		if err != nil {
			return nil, nil, err
		}
		if old, err = flatten(s, cm.TreeHash); err != nil {
			return nil, nil, err
		}
	}
	var out []string
	for p, e := range f {
		if o, ok := old[p]; !ok || o != e {
			out = append(out, p)
		}
	}
	for p := range old {
		if _, ok := f[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return old, out, nil
}

// summarize names up to 20 paths, and how many more.
func summarize(paths []string) string {
	if len(paths) == 0 {
		return "no files"
	}
	n := min(len(paths), 20)
	s := strings.Join(paths[:n], ", ")
	if len(paths) > n {
		s += fmt.Sprintf(" and %d more", len(paths)-n)
	}
	return s
}

// homeWalk is one walk of a home.
type homeWalk struct {
	r       *Room
	ctx     context.Context
	cred    vfs.Cred
	seen    map[string]homeSeen
	next    map[string]homeSeen
	files   flatTree
	skipped []string
	st      objectStorer
}

// find walks from the namespace root to the absolute path p.
func (w *homeWalk) find(p string) (vfs.Dir, error) {
	var n vfs.Node = w.r.space.Root()
	for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
		d, ok := n.(vfs.Dir)
		if !ok {
			return nil, abi.E(abi.NotExist, abi.Path(p), "not a directory")
		}
		c, err := d.Lookup(w.ctx, w.cred, name)
		if err != nil {
			return nil, err
		}
		n = c
	}
	d, ok := n.(vfs.Dir)
	if !ok {
		return nil, abi.E(abi.NotExist, abi.Path(p), "not a directory")
	}
	return d, nil
}

// walk records the files under d (at rel) into w.files.
func (w *homeWalk) walk(d vfs.Dir, rel string, depth int) error {
	if depth > maxHomeDepth {
		w.skipped = append(w.skipped, rel+"/ (too deep)")
		return nil
	}
	list, err := d.ReadDir(w.ctx, w.cred)
	if err != nil {
		return err
	}
	for _, e := range list {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		p := e.Name
		if rel != "" {
			p = rel + "/" + e.Name
		}
		if _, err := cleanPath(p); err != nil {
			w.skipped = append(w.skipped, p+" (a name git cannot hold)")
			continue
		}
		var a vfs.Attr
		if e.Attr != nil {
			a = *e.Attr
		} else if a, err = e.Node.Attr(w.ctx, w.cred); err != nil {
			w.skipped = append(w.skipped, p+" (unreadable)")
			continue
		}
		switch {
		case a.Mode.IsDir():
			sub, ok := e.Node.(vfs.Dir)
			if !ok {
				continue
			}
			if err := w.walk(sub, p, depth+1); err != nil {
				w.skipped = append(w.skipped, p+"/ (unreadable)")
			}
		case a.Mode.Type() != 0:
			w.skipped = append(w.skipped, p+" (not a regular file)")
		case a.Size > maxHomeFile:
			w.skipped = append(w.skipped, fmt.Sprintf("%s (%d bytes)", p, a.Size))
		case len(w.files) >= maxHomeFiles:
			w.skipped = append(w.skipped, p+" (over the file count)")
		default:
			h, err := w.blob(e.Node, p, a)
			if err != nil {
				w.skipped = append(w.skipped, p+" (unreadable)")
				continue
			}
			mode := filemode.Regular
			if a.Mode&0o100 != 0 {
				mode = filemode.Executable
			}
			w.files[p] = entry{mode: mode, hash: h}
		}
	}
	return nil
}

// blob is the hash of the file n at p, read (and stored) only if its
// size or mtime changed since the last walk.
func (w *homeWalk) blob(n vfs.Node, p string, a vfs.Attr) (plumbing.Hash, error) {
	if s, ok := w.seen[p]; ok && s.size == a.Size && s.mtime.Equal(a.Mtime) {
		w.next[p] = s
		return s.hash, nil
	}
	f, ok := n.(vfs.File)
	if !ok {
		return plumbing.ZeroHash, errors.New("not a file")
	}
	h, err := f.Open(w.ctx, w.cred, os.O_RDONLY)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer h.Close(w.ctx)
	var buf []byte
	chunk := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := h.Read(w.ctx, chunk, off)
		buf = append(buf, chunk[:n]...)
		off += int64(n)
		if len(buf) > maxHomeFile {
			return plumbing.ZeroHash, errors.New("grew over the limit")
		}
		if err == io.EOF || n == 0 && err == nil {
			break
		}
		if err != nil {
			return plumbing.ZeroHash, err
		}
	}
	hash, err := putBlob(w.st, buf)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	w.next[p] = homeSeen{size: a.Size, mtime: a.Mtime, hash: hash}
	return hash, nil
}
