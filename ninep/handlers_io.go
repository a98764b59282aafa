package ninep

// The handlers of Tread and Twrite: a file's data through its handle, a
// directory's listing as whole stat entries (see handlers.go for the
// rules every handler follows).

import (
	"errors"
	"io"
	"sync"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// read handles Tread. Checked: fid exists and is open for reading (OREAD,
// ORDWR or OEXEC); the offset fits an int64. The count is cut to the
// iounit. An auth fid reads as empty. A directory returns whole stat
// entries; its offset must be 0 (which takes a fresh listing) or where the
// previous read ended. A file is read with Handle.Read; data returned with
// an error is still sent, io.EOF is no error. Cancellation ends
// Handle.Read (a blocked stream read returns ctx.Err(), and a flushed
// request's failure is not answered).
func (c *conn) read(r *request, m *proto.TRead) (proto.FCall, error) {
	f, err := c.getFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	if int64(m.Offset) < 0 {
		return nil, errBadOffset
	}
	count := min(m.Count, c.iounit())
	reply := &proto.RRead{Header: hdr(r, proto.Rread)}
	if f.auth != nil {
		return reply, nil
	}
	snap := f.snapshot()
	l, qid, state, omode, h := snap.loc, snap.qid, snap.state, snap.omode, snap.handle
	if state != fidOpen {
		return nil, errNotOpen
	}
	if omode&3 == proto.Owrite {
		return nil, errNotOpenRead
	}
	var data []byte
	if qid.Qtype&qtDir != 0 {
		data, err = c.readDir(r, f, l, m.Offset, count)
		if err != nil {
			return nil, err
		}
	} else {
		buf := getReadBuf(count)
		n, err := h.Read(r.ctx, buf, int64(m.Offset))
		if n < 0 || n > len(buf) {
			putReadBuf(buf)
			return nil, errBadCount
		}
		if n == 0 && err != nil && !errors.Is(err, io.EOF) {
			putReadBuf(buf)
			return nil, err
		}
		data = append([]byte(nil), buf[:n]...)
		putReadBuf(buf)
	}
	reply.Count, reply.Data = uint32(len(data)), data
	return reply, nil
}

// readBufs holds the buffers Tread hands to a handle's Read: a client
// asks for up to an iounit (128 KiB for the 9fans client) and most reads
// return a few bytes, so a fresh zeroed buffer per read is most of the
// garbage a connection makes. A handle's Read writes only what it returns
// (io.Reader's contract; handles that read in the background read into
// buffers of their own), and only that is copied out of the buffer.
var readBufs sync.Pool

// getReadBuf returns a buffer of n bytes, from readBufs if one is big
// enough.
func getReadBuf(n uint32) []byte {
	if b, ok := readBufs.Get().(*[]byte); ok && uint32(cap(*b)) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

// putReadBuf gives b back to readBufs.
func putReadBuf(b []byte) {
	readBufs.Put(&b)
}

// readDir returns the next whole stat entries of the directory at l: each
// entry's attributes as the listing gave them, else its node's Attr.
func (c *conn) readDir(r *request, f *fid, l *loc, offset uint64, count uint32) ([]byte, error) {
	dir, ok := l.node.(vfs.Dir)
	if !ok {
		return nil, errWalkNonDir
	}
	f.dirMu.Lock()
	defer f.dirMu.Unlock()
	d := &f.dir
	if offset == 0 {
		ents, err := dir.ReadDir(r.ctx, f.cred)
		if err != nil {
			return nil, err
		}
		*d = dirState{ents: ents}
	} else if offset != d.offset {
		return nil, errDirOffset
	}
	out := make([]byte, 0, count)
	for {
		if d.pending == nil {
			if d.next >= len(d.ents) {
				break
			}
			e := d.ents[d.next]
			d.next++
			if e.Node == nil || !validName(e.Name) {
				continue
			}
			a, err := vfs.EntryAttr(r.ctx, e, f.cred)
			if err != nil {
				if r.ctx.Err() != nil {
					d.next--
					return nil, err
				}
				c.log.Debug("9p dirread: skipping entry", "name", e.Name, "err", err)
				continue
			}
			st, err := statOf(a, e.Name)
			if err != nil {
				c.log.Debug("9p dirread: skipping entry", "name", e.Name, "err", err)
				continue
			}
			d.pending = st.Compose()
		}
		if len(out)+len(d.pending) > int(count) {
			if len(out) == 0 {
				return nil, errDirCount
			}
			break
		}
		out = append(out, d.pending...)
		d.pending = nil
	}
	d.offset += uint64(len(out))
	return out, nil
}

// write handles Twrite. Checked: fid exists and is open for writing (OWRITE
// or ORDWR) and is not a directory; the offset fits an int64. On an auth
// fid the data is appended to the secret (at most 8 KiB in all). A file is
// written with Handle.Write; a short count with an error reports the count.
// Cancellation is passed to Handle.Write: a Tflush or the connection's end
// abandons the write for good, and a ctl command it runs is cancelled (a
// call file's write only queues its requests).
func (c *conn) write(r *request, m *proto.TWrite) (proto.FCall, error) {
	f, err := c.getFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	if int64(m.Offset) < 0 {
		return nil, errBadOffset
	}
	if f.auth != nil {
		a := f.auth
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(a.secret)+len(m.Data) > maxSecret {
			return nil, errSecretTooLong
		}
		a.secret = append(a.secret, m.Data...)
		return &proto.RWrite{Header: hdr(r, proto.Rwrite), Count: uint32(len(m.Data))}, nil
	}
	snap := f.snapshot()
	qid, state, omode, h := snap.qid, snap.state, snap.omode, snap.handle
	if state != fidOpen {
		return nil, errNotOpen
	}
	if qid.Qtype&qtDir != 0 {
		return nil, vfs.ErrIsDir
	}
	if mode := omode & 3; mode != proto.Owrite && mode != proto.Ordwr {
		return nil, errNotOpenWrite
	}
	n, err := h.Write(r.ctx, m.Data, int64(m.Offset))
	if n < 0 || n > len(m.Data) {
		return nil, errBadCount
	}
	if err != nil && n == 0 {
		return nil, err
	}
	return &proto.RWrite{Header: hdr(r, proto.Rwrite), Count: uint32(n)}, nil
}
