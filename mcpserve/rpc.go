package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ninep"
)

// RPCPath is the file an RPC holds open: the kernel's multiplexed call
// file (a vfs.Mux over the dispatcher, as /sys/call is a vfs.Call).
const RPCPath = "/sys/rpc"

// maxLine is the longest request line /sys/rpc takes (vfs.MaxLine).
const maxLine = 1 << 20

// maxInflight bounds the calls in flight on one RPC at once (the
// cancelled ones until their answers come): half of what one open of
// /sys/rpc holds (vfs.MaxMuxInflight), which counts cancel lines too.
const maxInflight = 128

// RPC is a Caller over one 9P connection to the kernel, attached as one
// identity: one open of /sys/rpc, held for the connection's life. Every
// call is a request frame written to it with an id of its own; a reader
// goroutine keeps a Tread waiting on it and hands each answer, cut at
// its newline, to the call its id names. Calls run at once and answer
// in the order they finish; a call whose ctx ends sends a cancel frame
// (the kernel cancels that request) and returns. The connection's end
// fails every call in flight at once.
type RPC struct {
	nc       net.Conn
	fid      *client.Fid
	iounit   int
	inflight chan struct{} // a token per call in flight
	wmu      sync.Mutex    // serialises writes: a frame's pieces never interleave
	ended    chan struct{} // closed when the connection ends
	wg       sync.WaitGroup

	mu      sync.Mutex
	next    uint64
	pending map[string]chan []byte // calls sent and not answered, by id
	err     error                  // why the connection ended

	// redial makes another connection attached as the same identity
	// (Events); nil for an RPC made on a connection (no redial).
	redial func() (*client.Fsys, net.Conn, error)
	// streams are the event streams open (Events): the RPC's end closes
	// them.
	streams map[*eventStream]bool
}

var _ Caller = (*RPC)(nil)

// Dial connects to the kernel at addr (a dial string, see ninep.Dial),
// attaches as user (with token, if not nil; a unix socket's peer is its
// host uid without one) and opens /sys/rpc.
func Dial(d ninep.Dialer, addr, user string, token []byte) (*RPC, error) {
	nc, err := d.Dial(addr)
	if err != nil {
		return nil, err
	}
	r, err := attach(nc, user, token)
	if err != nil {
		nc.Close()
		return nil, err
	}
	r.redial = func() (*client.Fsys, net.Conn, error) {
		nc, err := d.Dial(addr)
		if err != nil {
			return nil, nil, err
		}
		fsys, err := attachFsys(nc, user, token)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return fsys, nc, nil
	}
	return r, nil
}

// attach speaks 9P on nc: version, auth (with token), attach, and an
// open of /sys/rpc; then it starts the reader.
func attach(nc net.Conn, user string, token []byte) (*RPC, error) {
	fsys, err := attachFsys(nc, user, token)
	if err != nil {
		return nil, err
	}
	fid, err := fsys.Open(RPCPath, plan9.ORDWR)
	fsys.Close()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", RPCPath, err)
	}
	r := &RPC{nc: nc, fid: fid, iounit: 128 << 10, inflight: make(chan struct{}, maxInflight),
		ended: make(chan struct{}), pending: map[string]chan []byte{}}
	r.wg.Add(1)
	go r.reader()
	return r, nil
}

// attachFsys speaks 9P on nc: version, auth (with token) and attach.
func attachFsys(nc net.Conn, user string, token []byte) (*client.Fsys, error) {
	c, err := client.NewConn(nc)
	if err != nil {
		return nil, err
	}
	var afid *client.Fid
	if token != nil {
		if afid, err = c.Auth(user, ""); err != nil {
			return nil, err
		}
		if _, err := afid.Write(token); err != nil {
			afid.Close()
			return nil, err
		}
	}
	fsys, err := c.Attach(afid, user, "")
	if afid != nil {
		afid.Close()
	}
	return fsys, err
}

// Done is closed when the connection ends (the kernel went away, or
// Close).
func (r *RPC) Done() <-chan struct{} { return r.ended }

// Err is why the connection ended, once Done is closed.
func (r *RPC) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close ends the connection: every call in flight fails, and the kernel
// cancels their requests. It waits for the reader to end.
func (r *RPC) Close() error {
	r.end(errors.New("closed"))
	r.wg.Wait()
	return nil
}

// Call implements Caller: one request frame on /sys/rpc.
func (r *RPC) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	select {
	case r.inflight <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.ended:
		return nil, r.gone()
	}
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		<-r.inflight
		return nil, r.gone()
	}
	r.next++
	id := strconv.FormatUint(r.next, 10)
	got := make(chan []byte, 1)
	r.pending[id] = got
	r.mu.Unlock()
	req, err := encodeRequest(id, name, args)
	if err == nil && len(req) > maxLine {
		err = &CallError{Code: int(abi.Invalid), Message: fmt.Sprintf("%s: the request is %d bytes: at most %d", name, len(req), maxLine)}
	}
	if err == nil {
		err = r.write(req)
	}
	if err != nil {
		r.forget(id)
		return nil, err
	}
	select {
	case a := <-got:
		if a == nil {
			return nil, r.gone()
		}
		return decodeAnswer(name, a)
	case <-ctx.Done():
		r.abandon(id)
		return nil, ctx.Err()
	}
}

// gone is the error of a call on a connection that ended.
func (r *RPC) gone() error {
	return fmt.Errorf("the connection to the kernel ended: %v", r.Err())
}

// write writes one frame, whole, on the fid.
func (r *RPC) write(frame []byte) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if _, err := r.fid.Write(frame); err != nil {
		select {
		case <-r.ended:
			return r.gone()
		default:
		}
		return fmt.Errorf("writing to %s: %w", RPCPath, err)
	}
	return nil
}

// forget drops the call id, whose request was never sent, and gives
// back its place.
func (r *RPC) forget(id string) {
	r.mu.Lock()
	_, ok := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if ok {
		<-r.inflight
	}
}

// abandon gives the call id up: its request is cancelled in the kernel,
// and its answer is dropped when it comes (its place is given back then).
func (r *RPC) abandon(id string) {
	r.mu.Lock()
	_, ok := r.pending[id]
	if ok {
		r.pending[id] = nil // the reader drops its answer
	}
	r.mu.Unlock()
	if ok {
		// A failed write means the connection is ending: the kernel
		// cancels every request of it then.
		r.write(abi.EncodeCancel(id))
	}
}

// end ends the connection for why, once: every call waiting fails.
func (r *RPC) end(why error) {
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		return
	}
	r.err = why
	close(r.ended)
	for id, got := range r.pending {
		delete(r.pending, id)
		if got != nil {
			got <- nil
		}
	}
	streams := r.streams
	r.streams = nil
	r.mu.Unlock()
	r.nc.Close()
	for s := range streams {
		s.Close()
	}
}

// reader reads the answers until the connection ends, and delivers each
// to its call.
func (r *RPC) reader() {
	defer r.wg.Done()
	buf := make([]byte, r.iounit)
	var cur []byte
	for {
		n, err := r.fid.Read(buf)
		if err != nil {
			r.end(fmt.Errorf("reading %s: %v", RPCPath, err))
			return
		}
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				cur = append(cur, data...)
				break
			}
			cur = append(cur, data[:i]...)
			data = data[i+1:]
			if len(cur) > abi.MaxAnswer {
				r.end(fmt.Errorf("an answer over %d bytes", abi.MaxAnswer))
				return
			}
			if !r.deliver(cur) {
				return
			}
			cur = nil
		}
		if len(cur) > abi.MaxAnswer {
			r.end(fmt.Errorf("an answer over %d bytes", abi.MaxAnswer))
			return
		}
	}
}

// deliver hands an answer to the call its id names; an answer that is
// not a frame ends the connection, one whose call gave up is dropped.
func (r *RPC) deliver(answer []byte) bool {
	_, id, err := abi.FrameTag(answer)
	if err != nil {
		r.end(fmt.Errorf("an answer that is not a frame: %v", err))
		return false
	}
	r.mu.Lock()
	got, ok := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if !ok {
		return true // not ours (a request the kernel could not read)
	}
	<-r.inflight
	if got != nil {
		got <- answer
	}
	return true
}

// Events implements Watcher: /proc/<pid>/events opened on a connection
// of its own, attached as the RPC's identity (so its open is the
// kernel's check of the caller, as any open of the file); closing the
// stream closes that connection, which ends a read waiting on it at
// once.
func (r *RPC) Events(ctx context.Context, pid string) (io.ReadCloser, error) {
	if r.redial == nil {
		return nil, errors.New("this connection cannot follow a process's events")
	}
	if pid == "" || strings.ContainsAny(pid, "/\x00") || pid == "." || pid == ".." {
		return nil, &CallError{Code: int(abi.Invalid), Message: fmt.Sprintf("proc.events: %q is not a pid", pid)}
	}
	fsys, nc, err := r.redial()
	if err != nil {
		return nil, err
	}
	fid, err := fsys.Open("/proc/"+pid+"/events", plan9.OREAD)
	fsys.Close()
	if err != nil {
		nc.Close()
		return nil, &CallError{Code: int(abi.NotExist), Message: fmt.Sprintf("proc.events: %s: %v", pid, err)}
	}
	s := &eventStream{fid: fid, nc: nc, r: r}
	r.mu.Lock()
	if r.err != nil {
		r.mu.Unlock()
		nc.Close()
		return nil, r.gone()
	}
	if r.streams == nil {
		r.streams = map[*eventStream]bool{}
	}
	r.streams[s] = true
	r.mu.Unlock()
	return s, nil
}

// eventStream is a process's events file on a connection of its own.
type eventStream struct {
	fid  *client.Fid
	nc   net.Conn
	r    *RPC
	once sync.Once
}

func (s *eventStream) Read(b []byte) (int, error) { return s.fid.Read(b) }

func (s *eventStream) Close() error {
	s.once.Do(func() {
		s.nc.Close()
		s.r.mu.Lock()
		delete(s.r.streams, s)
		s.r.mu.Unlock()
	})
	return nil
}
