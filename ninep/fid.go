package ninep

import (
	"context"
	"log/slog"
	"sync"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// loc is where a fid is: a node, the name it was reached by and the
// location of the directory it was reached from (nil at the root). Locs are
// immutable and shared between fids.
type loc struct {
	node   vfs.Node
	name   string
	parent *loc
}

// parentDir returns the directory l was reached from, or nil at the root.
func (l *loc) parentDir() vfs.Dir {
	if l.parent == nil {
		return nil
	}
	d, _ := l.parent.node.(vfs.Dir)
	return d
}

type openState uint8

const (
	fidClosed  openState = iota // walked or attached, not open
	fidOpening                  // a Topen or Tcreate is in progress
	fidOpen                     // open; handle set for files
)

// fid is one fid of a connection.
//
// A fid is reserved (in the table, not ready) while the Tattach, Tauth or
// Twalk making it runs, and published (ready) when it succeeds; requests
// only ever see ready fids. refs counts the table's reference and one per
// request using the fid; the handle is closed when it drops to zero, so a
// Tclunk racing a blocked Tread closes the handle when the read returns.
type fid struct {
	num  uint32
	cred vfs.Cred   // set before publication, then immutable
	auth *authState // non-nil for auth fids; set before publication
	p    *principal // what the fid counts against; guarded by conn.mu

	refs  int  // guarded by conn.mu
	ready bool // guarded by conn.mu

	mu     sync.Mutex // guards the fields below
	loc    *loc
	qid    proto.Qid
	state  openState
	omode  proto.Mode
	handle vfs.Handle

	dirMu sync.Mutex // serialises directory reads; guards dir
	dir   dirState
}

// authState is what an auth fid has collected.
type authState struct {
	uname, aname string

	mu     sync.Mutex
	secret []byte
}

// dirState is the progress of a directory read on an open fid. A fid is
// opened at most once, so it starts zero.
type dirState struct {
	ents    []vfs.DirEntry // the listing taken at offset 0
	next    int            // next entry of ents to encode
	pending []byte         // an encoded entry that did not fit the last read
	offset  uint64         // the offset the next read must ask for (or 0)
}

// snapshot returns the fid's mutable location and state.
func (f *fid) snapshot() fidState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fidState{loc: f.loc, qid: f.qid, state: f.state, omode: f.omode, handle: f.handle}
}

// fidState is a fid's fields as one snapshot read them, together.
type fidState struct {
	loc    *loc
	qid    proto.Qid
	state  openState
	omode  proto.Mode
	handle vfs.Handle
}

// beginOpen moves a closed fid to the opening state (which keeps other
// Topens and Tcreates off it) and returns where it is. The caller must
// defer abandonOpen.
func (f *fid) beginOpen() (*loc, proto.Qid, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != fidClosed {
		return nil, proto.Qid{}, errAlreadyOpen
	}
	f.state = fidOpening
	return f.loc, f.qid, nil
}

// abandonOpen returns a fid left opening by a failed Topen or Tcreate to
// the closed state; it does nothing once the open has succeeded.
func (f *fid) abandonOpen() {
	f.mu.Lock()
	if f.state == fidOpening {
		f.state = fidClosed
	}
	f.mu.Unlock()
}

// reserveFid puts a fid numbered num in the table, not yet ready, counted
// against p (unless p is nil: see chargeFid). It fails if num is in use (or
// is NOFID) or p holds Server.MaxFids fids.
func (c *conn) reserveFid(num uint32, p *principal) (*fid, error) {
	if num == NOFID {
		return nil, errUnknownFid
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.fids[num]; ok {
		return nil, errFidInUse
	}
	if p != nil {
		if err := c.srv.acquireFid(p); err != nil {
			return nil, err
		}
	}
	f := &fid{num: num, refs: 1, p: p}
	c.fids[num] = f
	return f, nil
}

// chargeFid counts the reserved fid f, reserved with no principal, against
// p, or fails if p holds Server.MaxFids fids.
func (c *conn) chargeFid(f *fid, p *principal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.srv.acquireFid(p); err != nil {
		return err
	}
	f.p = p
	return nil
}

// uncountLocked stops counting f, which has left the table. c.mu is held.
func (c *conn) uncountLocked(f *fid) {
	if f.p != nil {
		c.srv.releaseFid(f.p)
		f.p = nil
	}
}

// publishFid makes a reserved fid visible to requests.
func (c *conn) publishFid(f *fid) {
	c.mu.Lock()
	f.ready = true
	c.mu.Unlock()
}

// unreserveFid removes a reserved fid that was never published.
func (c *conn) unreserveFid(f *fid) {
	c.mu.Lock()
	if c.fids[f.num] == f && !f.ready {
		delete(c.fids, f.num)
		c.uncountLocked(f)
	}
	c.mu.Unlock()
}

// getFid returns the ready fid num with a reference for the caller, who
// must putFid it.
func (c *conn) getFid(num uint32) (*fid, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.fids[num]
	if !ok || !f.ready {
		return nil, errUnknownFid
	}
	f.refs++
	return f, nil
}

// fileFid is getFid for a request that an auth fid may not make.
func (c *conn) fileFid(num uint32) (*fid, error) {
	f, err := c.getFid(num)
	if err != nil {
		return nil, err
	}
	if f.auth != nil {
		c.putFid(f)
		return nil, errAuthFid
	}
	return f, nil
}

// putFid drops a reference to f. Dropping the last one closes f's handle
// and returns Close's error.
func (c *conn) putFid(f *fid) error {
	c.mu.Lock()
	f.refs--
	last := f.refs == 0
	c.mu.Unlock()
	if !last {
		return nil
	}
	return c.closeHandle(f)
}

// unlinkFid removes f from the table (dropping the table's reference) so
// that its number may be reused. It reports false if f was no longer there
// (a concurrent Tclunk or Tremove took it). The caller holds a reference.
func (c *conn) unlinkFid(f *fid) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fids[f.num] != f {
		return false
	}
	delete(c.fids, f.num)
	c.uncountLocked(f)
	f.refs--
	return true
}

// takeFid removes fid num from the table and returns it with a reference
// for the caller (who must finish it), or errUnknownFid.
func (c *conn) takeFid(num uint32) (*fid, error) {
	f, err := c.getFid(num)
	if err != nil {
		return nil, err
	}
	if !c.unlinkFid(f) {
		c.putFid(f)
		return nil, errUnknownFid
	}
	return f, nil
}

// closeHandle closes f's handle, if any. It is called once, when the last
// reference to f goes.
func (c *conn) closeHandle(f *fid) error {
	f.mu.Lock()
	h := f.handle
	f.handle = nil
	f.state = fidClosed
	f.mu.Unlock()
	if h == nil {
		return nil
	}
	err := h.Close(context.WithoutCancel(c.ctx))
	if err != nil {
		c.log.Debug("9p close", "fid", f.num, "err", err)
	}
	return err
}

// clunkAll removes every fid from the table and closes the handles of those
// no request uses. It runs when the connection or session ends, after every
// handler has returned.
func (c *conn) clunkAll() {
	c.mu.Lock()
	var last []*fid
	for num, f := range c.fids {
		delete(c.fids, num)
		c.uncountLocked(f)
		f.refs--
		if f.refs == 0 {
			last = append(last, f)
		}
	}
	c.mu.Unlock()
	if len(last) > 0 {
		c.log.Debug("9p releasing unclunked fids", slog.Int("count", len(last)))
	}
	for _, f := range last {
		c.closeHandle(f)
	}
}
