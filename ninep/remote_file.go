package ninep

// The 9P client side as a vfs tree: RemoteDir.

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/vfs"
)

// The files of a RemoteDir and their open handles: reads split into
// pieces in flight, writes, and the handle's end.

// remoteFile is a file of the server.
type remoteFile struct {
	remoteNode
	excl bool // DMAPPEND or DMEXCL: read in turn
}

// SetAttr implements vfs.Setter with a Twstat, then a Tstat.
func (f *remoteFile) SetAttr(ctx context.Context, cred vfs.Cred, s vfs.SetAttr) (vfs.Attr, error) {
	return f.setAttr(ctx, cred, s, false)
}

// Open implements vfs.File with a Twalk and a Topen.
func (f *remoteFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	if err := f.r.access(ctx, cred, vfs.WantOf(flags)); err != nil {
		return nil, err
	}
	mode := omode(flags)
	if flags&os.O_TRUNC != 0 {
		f.r.forget(parent(f.path))
	}
	fid, err := do(ctx, f.r, func() (*client.Fid, error) { return f.r.fsys.Open(f.path, mode) }, closeFid)
	if err != nil {
		return nil, err
	}
	bulk := !f.excl && f.size.Load() > 0 && flags&os.O_TRUNC == 0
	return newRemoteHandle(f.r, f.path, fid, bulk, flags), nil
}

func closeFid(fid *client.Fid) { fid.Close() }

// remoteHandle is an open file of the server: one fid.
type remoteHandle struct {
	r      *remote
	dir    string // the path of the file's directory
	fid    *client.Fid
	bulk   bool // a data file: read in pieces, concurrently, at offsets
	append bool // O_APPEND: write at the end

	// turn is held by the Read in progress of a handle that is not bulk;
	// pending is the Tread it (or a Read abandoned before it) started.
	turn    chan struct{}
	pending *pendingRead
}

// pendingRead is one Tread of a handle read in turn.
type pendingRead struct {
	off  int64
	done chan struct{} // closed when data and err are set
	data []byte
	err  error
}

func newRemoteHandle(r *remote, p string, fid *client.Fid, bulk bool, flags int) *remoteHandle {
	return &remoteHandle{r: r, dir: parent(p), fid: fid, bulk: bulk, append: flags&os.O_APPEND != 0, turn: make(chan struct{}, 1)}
}

// Read implements vfs.Handle (see RemoteDir for how).
func (h *remoteHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if h.bulk {
		return h.readBulk(ctx, p, off)
	}
	return h.readTurn(ctx, p, off)
}

// eof checks, after a read found the end of the file, that it was not the
// connection's end (the client reports both as io.EOF): a Tstat of the fid
// must succeed.
func (h *remoteHandle) eof() error {
	if _, err := h.fid.Stat(); connErr(err) {
		return fmt.Errorf("connection closed: %w", err)
	}
	return nil
}

// readBulk reads p at off in RemoteChunk pieces, RemoteReadAhead at once.
// The pieces are read into a buffer of the call's own, so that a Read
// abandoned by ctx leaves nothing writing into p.
func (h *remoteHandle) readBulk(ctx context.Context, p []byte, off int64) (int, error) {
	size := len(p)
	buf, err := do(ctx, h.r, func() ([]byte, error) {
		buf := make([]byte, size)
		pieces := (size + RemoteChunk - 1) / RemoteChunk
		ns := make([]int, pieces)
		errs := make([]error, pieces)
		sem := make(chan struct{}, RemoteReadAhead)
		var wg sync.WaitGroup
		for i := range pieces {
			lo, hi := i*RemoteChunk, min((i+1)*RemoteChunk, size)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				n, err := h.fid.ReadAt(buf[lo:hi], off+int64(lo))
				if err == io.EOF {
					err = h.eof()
					if err == nil {
						err = io.EOF
					}
				}
				if connErr(err) && err != io.EOF {
					// At once: the other pieces may never return.
					h.r.kill(err)
				}
				ns[i], errs[i] = n, err
			})
		}
		wg.Wait()
		n := 0
		for i := range pieces {
			n += ns[i]
			if errs[i] == io.EOF {
				return buf[:n], nil
			}
			if errs[i] != nil {
				if n > 0 && !connErr(errs[i]) {
					return buf[:n], nil
				}
				return buf[:n], errs[i]
			}
			if ns[i] < min((i+1)*RemoteChunk, size)-i*RemoteChunk {
				break
			}
		}
		return buf[:n], nil
	}, nil)
	if err != nil {
		return 0, err
	}
	return copy(p, buf), nil
}

// readTurn reads p at off with one Tread, after any Read of the handle
// before it: if an abandoned Read left a Tread at off in flight, its
// answer is this Read's.
func (h *remoteHandle) readTurn(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.r.lost(); err != nil {
		return 0, err
	}
	select {
	case h.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-h.turn }()
	var nonblock <-chan time.Time
	if vfs.Nonblocking(ctx) {
		t := time.NewTimer(nonblockWait)
		defer t.Stop()
		nonblock = t.C
	}
	for {
		pr := h.pending
		if pr == nil {
			pr = h.startRead(off, len(p))
		}
		select {
		case <-pr.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-nonblock:
			return 0, vfs.ErrWouldBlock
		case <-h.r.dead:
			return 0, h.r.deadErr
		}
		h.pending = nil
		if pr.off != off {
			continue // an abandoned read of another offset: not ours
		}
		n := copy(p, pr.data)
		if n < len(pr.data) {
			// The rest answers the next Read, at the offset after.
			h.pending = &pendingRead{off: off + int64(n), done: pr.done, data: pr.data[n:]}
		}
		if pr.err != nil && n == 0 {
			return 0, h.r.mapErr(pr.err)
		}
		return n, nil
	}
}

// startRead starts one Tread of size bytes at off and makes it the
// handle's pending read. The fid's own offset is used by nothing else (bulk
// reads and writes give theirs), and only one such Tread is in flight.
func (h *remoteHandle) startRead(off int64, size int) *pendingRead {
	pr := &pendingRead{off: off, done: make(chan struct{})}
	h.pending = pr
	go func() {
		defer close(pr.done)
		buf := make([]byte, min(size, RemoteChunk))
		if _, err := h.fid.Seek(off, 0); err != nil {
			pr.err = err
			return
		}
		n, err := h.fid.Read(buf)
		if err == io.EOF {
			err = h.eof()
		}
		if connErr(err) {
			h.r.kill(err)
		}
		pr.data, pr.err = buf[:n], err
	}()
	return pr
}

// Write implements vfs.Handle with Twrites at off (with O_APPEND, at the
// length a Tstat gives). p is copied first: an abandoned write goes on.
func (h *remoteHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	b := append([]byte(nil), p...)
	h.r.forget(h.dir)
	return do(ctx, h.r, func() (int, error) {
		if h.append {
			d, err := h.fid.Stat()
			if err != nil {
				return 0, err
			}
			off = int64(d.Length)
		}
		return h.fid.WriteAt(b, off)
	}, nil)
}

// Truncate implements vfs.Truncater with a Twstat of the open fid.
func (h *remoteHandle) Truncate(ctx context.Context, size int64) error {
	var d plan9.Dir
	d.Null()
	d.Length = uint64(size)
	h.r.forget(h.dir)
	_, err := do(ctx, h.r, func() (struct{}, error) { return struct{}{}, h.fid.Wstat(&d) }, nil)
	return err
}

// Close implements vfs.Handle with a Tclunk.
func (h *remoteHandle) Close(ctx context.Context) error {
	_, err := do(context.WithoutCancel(ctx), h.r, func() (struct{}, error) { return struct{}{}, h.fid.Close() }, nil)
	return err
}
