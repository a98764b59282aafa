package repos

import (
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Who wrote what: the room observes the devices room's fs.changed
// signals (every change made through the dispatcher: the FUSE mount's,
// a 9P client's, fs.write's, each as its identity) and keeps, for each
// home and workspace, the last writer of each path changed since its
// last commit. A batch's commit names them: the changed paths are
// grouped by writer and committed one commit per writer, in the order
// they first wrote, each with that writer as author and committer, so
// that git log --author and git blame tell who changed what. A path no
// signal names (a sandboxed shell's write, which runs as its session's
// user, straight to the disk) is the tree owner's.

// maxJournal bounds the paths the journal holds; past it a change is
// not recorded (its path falls to the tree's owner).
const maxJournal = 100000

// writer is a change's author: a user, and the process whose work it was.
type writer struct {
	name string
	uid  uint32
	pid  string
}

// noted is a path's last writer, and the order it was noted in.
type noted struct {
	w   writer
	seq uint64
}

// journal is the writers of the paths changed since each tree's last
// commit, by tree (/home/<user> or /workspaces/<id>) and path under it.
type journal struct {
	mu     sync.Mutex                  // guards every field
	trees  map[string]map[string]noted // by tree, then path relative to it
	active map[string]burst            // when each tree's writes since its last commit began and last came
	n      int                         // paths held
	seq    uint64
	off    bool // the room closed: note nothing more
}

// burst is a tree's writes since its last commit: the first's time and
// the last's.
type burst struct{ first, last time.Time }

// The keeper waits for a burst of writes to a tree to pause before it
// walks the tree (so that it does not compete with the writer), but no
// longer than maxDefer after the burst began.
const (
	quietFor = time.Second
	maxDefer = 30 * time.Second
)

// busy reports whether tree is being written now: a write came within
// quietFor and the burst began under maxDefer ago.
func (j *journal) busy(tree string, now time.Time) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, ok := j.active[tree]
	return ok && now.Sub(b.last) < quietFor && now.Sub(b.first) < maxDefer
}

// treeOf splits a namespace path into its tree (/home/alice,
// /workspaces/<id>) and the path under it; ok is false for any other.
func treeOf(p string) (tree, rel string, ok bool) {
	var top string
	switch {
	case strings.HasPrefix(p, "/home/"):
		top = "/home/"
	case strings.HasPrefix(p, "/workspaces/"):
		top = "/workspaces/"
	default:
		return "", "", false
	}
	name, rest, _ := strings.Cut(p[len(top):], "/")
	if name == "" {
		return "", "", false
	}
	return top + name, rest, true
}

// observe records an fs.changed signal; it runs under the bus's lock
// and returns at once.
func (j *journal) observe(ev *kernel.Event, _ kernel.Audience) {
	if ev.Signal != abi.SigFsChanged.Name {
		return
	}
	p, ok := ev.Payload.(abi.FsChanged)
	if !ok {
		return
	}
	w := writer{name: p.Username, uid: p.Uid, pid: p.Pid}
	now := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.off {
		return
	}
	for _, at := range []string{p.From, p.Path} {
		tree, rel, ok := treeOf(at)
		if !ok || rel == "" {
			continue
		}
		if j.trees == nil {
			j.trees, j.active = map[string]map[string]noted{}, map[string]burst{}
		}
		b := j.active[tree]
		if b.first.IsZero() {
			b.first = now
		}
		b.last = now
		j.active[tree] = b
		m := j.trees[tree]
		if m == nil {
			m = map[string]noted{}
			j.trees[tree] = m
		}
		if _, had := m[rel]; !had {
			if j.n >= maxJournal {
				continue
			}
			j.n++
		}
		j.seq++
		m[rel] = noted{w: w, seq: j.seq}
	}
}

// drain takes the writers noted for tree.
func (j *journal) drain(tree string) map[string]noted {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.trees[tree]
	delete(j.trees, tree)
	delete(j.active, tree)
	j.n -= len(m)
	return m
}

// close stops noting and forgets every writer.
func (j *journal) close() {
	j.mu.Lock()
	j.off, j.trees, j.active, j.n = true, nil, nil, 0
	j.mu.Unlock()
}

// writerOf is who changed rel: its own entry or its nearest directory's
// (a directory removed or renamed whole); ok is false when none is noted.
func writerOf(m map[string]noted, rel string) (noted, bool) {
	for p := rel; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if n, ok := m[p]; ok {
			return n, true
		}
	}
	return noted{}, false
}

// group is one writer's share of a batch: the paths they changed.
type group struct {
	w     writer
	first uint64 // their first note's order; 0 with an unsigned change
	paths []string
}

// groupByWriter splits the changed paths by who wrote them, the
// unsigned ones (no note) to owner, in the order the writers first wrote
// (the owner's unsigned share first).
func groupByWriter(changed []string, m map[string]noted, owner writer) []*group {
	by := map[writer]*group{}
	var out []*group
	for _, p := range changed {
		n, ok := writerOf(m, p)
		w := owner
		if ok {
			w = n.w
		}
		seq := n.seq // 0 for an unsigned change
		g := by[w]
		if g == nil {
			g = &group{w: w, first: seq}
			by[w] = g
			out = append(out, g)
		}
		g.first = min(g.first, seq)
		g.paths = append(g.paths, p)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].first < out[b].first })
	return out
}

// signatureOf is w in a commit, as signature is a caller.
func (r *Room) signatureOf(w writer) object.Signature {
	name := w.name
	if w.pid != "" {
		name += " (" + w.pid + ")"
	}
	return object.Signature{Name: name, Email: w.name + "@gsv", When: r.now().Truncate(time.Second)}
}

// commitByWriter commits the change from parent (whose files are old)
// to the files now: one commit per group, each taking its paths from now
// into the tree before it, with subject + its paths as the message (tail
// added to the last). It returns the last commit.
func (r *Room) commitByWriter(g *git.Repository, parent plumbing.Hash, old, now flatTree, groups []*group, subject, tail string) (plumbing.Hash, error) {
	cur := make(flatTree, len(old))
	for p, e := range old {
		cur[p] = e
	}
	head := parent
	for i, gr := range groups {
		for _, p := range gr.paths {
			if e, ok := now[p]; ok {
				cur[p] = e
			} else {
				delete(cur, p)
			}
		}
		th, err := writeTree(g.Storer, cur)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		msg := subject + summarize(gr.paths)
		if i == len(groups)-1 {
			msg += tail
		}
		sig := r.signatureOf(gr.w)
		cm := &object.Commit{Author: sig, Committer: sig, Message: msg + "\n", TreeHash: th}
		if !head.IsZero() {
			cm.ParentHashes = []plumbing.Hash{head}
		}
		if head, err = putObject(g.Storer, cm); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return head, nil
}
