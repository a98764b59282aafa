package devices

import (
	"context"
	"os"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Changes of the data tree: after each change made through the
// dispatcher (the mount's and 9P's fs.* syscalls as their identity, and
// fs.write, fs.edit, fs.delete) the devices room publishes fs.changed
// with the path and its writer, to the writer and root. A run of writes
// to one file by one writer is one signal a second (noteEvery), not one
// per write(2). The repos room's home keeper reads them to name each
// change's author.

// noteEvery is how often one writer's writes to one file are signalled.
const noteEvery = time.Second

// maxRecent bounds the writes remembered for noteEvery; past it the
// memory is cleared (a few signals more, never fewer).
const maxRecent = 4096

// lastWrite is who a file's last write signal named, and when.
type lastWrite struct {
	id *kernel.Identity
	at time.Time
}

// changes publishes fs.changed.
type changes struct {
	k      *kernel.Kernel
	mu     sync.Mutex           // guards recent
	recent map[string]lastWrite // each file's last write signal, by path relative to the data root
}

// note publishes that c changed the data tree path rel (relative to the
// data root) by op; from is a rename's old path.
func (n *changes) note(c *kernel.Caller, op, rel, from string) {
	if c == nil || c.Identity == nil {
		return
	}
	p := &abi.FsChanged{Op: op, Path: "/" + strings.TrimPrefix(rel, "/"), Pid: c.Pid, Uid: c.Uid, Username: c.Username}
	if from != "" {
		p.From = "/" + strings.TrimPrefix(from, "/")
	}
	kernel.Publish(n.k, abi.SigFsChanged, *p, kernel.Audience{Uids: []uint32{c.Uid}})
}

// noteWrite is note of a write to rel: at most one a noteEvery per
// writer and file.
func (n *changes) noteWrite(c *kernel.Caller, rel string) {
	if c == nil || c.Identity == nil || rel == "" {
		return
	}
	now := time.Now()
	n.mu.Lock()
	if n.recent == nil || len(n.recent) >= maxRecent {
		n.recent = map[string]lastWrite{}
	}
	if last, ok := n.recent[rel]; ok && last.id == c.Identity && now.Sub(last.at) < noteEvery {
		n.mu.Unlock()
		return
	}
	n.recent[rel] = lastWrite{c.Identity, now}
	n.mu.Unlock()
	n.note(c, "write", rel, "")
}

// forget drops what noteWrite remembers of rel, so that the next write
// after a remove or rename is signalled.
func (n *changes) forget(rel string) {
	n.mu.Lock()
	delete(n.recent, strings.TrimPrefix(rel, "/"))
	n.mu.Unlock()
}

// wrap returns h that also notes, after each success, the change its
// args describe (rel "" notes nothing).
func wrap[A, R any](h func(context.Context, *kernel.Caller, *A) (R, error), note func(c *kernel.Caller, a *A, res R)) func(context.Context, *kernel.Caller, *A) (R, error) {
	return func(ctx context.Context, c *kernel.Caller, a *A) (R, error) {
		res, err := h(ctx, c, a)
		if err == nil {
			note(c, a, res)
		}
		return res, err
	}
}

// writes reports whether open(2) flags change the file.
func writes(flags int) bool {
	return flags&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0
}

// inDataTree reports whether the namespace path p is a data tree's.
func inDataTree(p string) bool {
	for _, top := range []string{"/home/", "/workspaces/", "/var/sessions/"} {
		if strings.HasPrefix(p, top) {
			return true
		}
	}
	return false
}

// noteRouted notes a routed fs.write, fs.edit or fs.delete that the
// local device served (ok) at the namespace path p.
func (n *changes) noteRouted(c *kernel.Caller, local bool, ok bool, op, p string) {
	if !local || !ok || !inDataTree(p) {
		return
	}
	n.forget(strings.TrimPrefix(p, "/"))
	n.note(c, op, p, "")
}
