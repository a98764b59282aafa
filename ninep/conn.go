package ninep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// conn is one 9P connection.
type conn struct {
	srv      *Server
	nc       net.Conn
	peer     vfs.Peer
	log      *slog.Logger
	maxMsize uint32

	ctx    context.Context // ends when the connection ends
	cancel context.CancelFunc

	msize    atomic.Uint32 // negotiated msize; 0 while unnegotiated
	ended    atomic.Bool   // the connection loop has returned: write nothing more
	sem      chan struct{} // the in-flight budget: one token per request
	work     chan *request // idle workers wait here for a request
	wg       sync.WaitGroup
	authPath atomic.Uint64

	wmu  sync.Mutex // serialises writes; held across a request's reply and its Rflushes
	werr error      // first write error; guarded by wmu

	peerP     *principal  // what the connection counts against from its start
	refuse    error       // non-nil: over the connection cap; refuse every request
	authTimer *time.Timer // ends a connection that does not attach in time
	authed    atomic.Bool // the session has a successful Tattach
	timedOut  atomic.Bool // authTimer ended the connection
	bg        sync.WaitGroup

	mu       sync.Mutex
	fids     map[uint32]*fid
	reqs     map[uint16]*request
	peerHeld bool                 // the connection is counted against peerP
	grants   map[string]*grantRef // the grants the session attached with
}

// request is one T-message being handled in its own goroutine.
type request struct {
	tag    uint16
	fc     proto.FCall
	ctx    context.Context
	cancel context.CancelFunc

	// guarded by conn.mu
	flushed bool     // a Tflush named this request
	aborted bool     // a Tversion abandoned this request: send nothing
	hangup  bool     // close the connection after the reply; set by the handler
	flushes []uint16 // tags of Tflushes to answer after this request

	charged *principal // what r counts against as a request in flight; owned by r's goroutine

	// For Tclunk and Tremove: the fid, already out of the table (with a
	// reference for r), or why it could not be taken. The connection
	// loop takes it in arrival order, so that a request that comes after
	// the Tclunk may reuse the number at once: a client may free a fid's
	// number as it sends the Tclunk (9fans.net/go/plan9/client does).
	unlinked    *fid
	unlinkedErr error
}

func (s *Server) newConn(nc net.Conn, peer vfs.Peer) *conn {
	max := s.Msize
	if max == 0 || max > MaxMsize {
		max = MaxMsize
	}
	if max < MinMsize {
		max = MinMsize
	}
	inflight := s.MaxInflight
	if inflight <= 0 {
		inflight = DefaultMaxInflight
	}
	remote := ""
	if a := nc.RemoteAddr(); a != nil {
		remote = a.String()
	}
	return &conn{
		srv:      s,
		nc:       nc,
		peer:     peer,
		log:      s.logger().With("transport", peer.Transport, "remote", remote),
		maxMsize: max,
		sem:      make(chan struct{}, inflight),
		work:     make(chan *request),
		fids:     map[uint32]*fid{},
		reqs:     map[uint16]*request{},
	}
}

// serve is the connection loop: it frames, checks and dispatches messages.
func (c *conn) serve(parent context.Context) (err error) {
	c.ctx, c.cancel = context.WithCancel(parent)
	context.AfterFunc(c.ctx, func() { c.nc.Close() })
	if t := c.srv.authTimeout(); t > 0 {
		c.authTimer = time.AfterFunc(t, c.authExpired)
	}
	defer func() {
		c.ended.Store(true)
		c.cancel()
		c.nc.Close()
		if c.authTimer != nil {
			c.authTimer.Stop()
		}
		c.wg.Wait()
		c.clunkAll()
		c.dropGrants()
		c.bg.Wait()
		c.wmu.Lock()
		werr := c.werr
		c.wmu.Unlock()
		if werr != nil {
			err = werr // the connection loop failed because we closed c
		}
		switch {
		case parent.Err() != nil:
			err = parent.Err()
		case c.timedOut.Load():
			err = errAuthTimeout
		case hangup(err):
			err = nil
		}
		c.log.Debug("9p serve ended", "err", err)
	}()

	br := bufio.NewReaderSize(c.nc, 16<<10)
	buf := make([]byte, c.maxMsize)
	for {
		if err := c.acquire(br); err != nil {
			return err
		}
		frame, err := c.readFrame(br, buf)
		if err != nil {
			<-c.sem
			if !errors.Is(err, io.EOF) {
				c.log.Debug("9p bad frame", "err", err)
			}
			return err
		}
		fc, err := parseFrame(frame)
		if err != nil {
			<-c.sem
			c.log.Debug("9p malformed message", "err", err)
			return err
		}
		c.dispatch(fc)
	}
}

// acquire takes a token from the in-flight budget. When the budget is
// spent it waits for a request to finish, reading nothing, but watches the
// socket so that a peer that hangs up meanwhile ends the connection.
func (c *conn) acquire(br *bufio.Reader) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	default:
	}
	c.log.Debug("9p in-flight budget spent; pausing reads", "budget", cap(c.sem))
	peekc := make(chan error, 1)
	go func() {
		_, err := br.Peek(1)
		peekc <- err
	}()
	got, peeked := false, false
	for !got || !peeked {
		var semc chan struct{}
		if !got {
			semc = c.sem
		}
		var pc chan error
		if !peeked {
			pc = peekc
		}
		select {
		case semc <- struct{}{}:
			got = true
		case err := <-pc:
			peeked = true
			if err != nil {
				if got {
					<-c.sem
				}
				return err
			}
		}
	}
	return nil
}

// readFrame reads one whole message into buf.
func (c *conn) readFrame(br *bufio.Reader, buf []byte) ([]byte, error) {
	if _, err := io.ReadFull(br, buf[:4]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(buf)
	limit := c.msize.Load()
	if limit == 0 {
		limit = c.maxMsize
	}
	if size < minFrame || size > limit {
		return nil, fmt.Errorf("ninep: bad message size %d (msize %d)", size, limit)
	}
	if _, err := io.ReadFull(br, buf[4:size]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf[:size], nil
}

// parseFrame decodes one whole frame, or fails if it is not a well-formed
// T-message.
func parseFrame(frame []byte) (fc proto.FCall, err error) {
	typ := frame[4]
	switch typ {
	case proto.Tversion, proto.Tauth, proto.Tattach, proto.Tflush, proto.Twalk,
		proto.Topen, proto.Tcreate, proto.Tread, proto.Twrite, proto.Tclunk,
		proto.Tremove, proto.Tstat, proto.Twstat:
	default:
		return nil, fmt.Errorf("ninep: unexpected message type %d", typ)
	}
	if typ == proto.Twrite {
		if len(frame) < twriteHdr {
			return nil, errors.New("ninep: short Twrite")
		}
		if n := binary.LittleEndian.Uint32(frame[19:23]); uint64(n) != uint64(len(frame)-twriteHdr) {
			return nil, fmt.Errorf("ninep: Twrite count %d does not match its %d data bytes", n, len(frame)-twriteHdr)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			fc, err = nil, fmt.Errorf("ninep: malformed message type %d: %v", typ, p)
		}
	}()
	fc, err = proto.ParseCall(bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("ninep: malformed message type %d: %w", typ, err)
	}
	if typ != proto.Twrite && !bytes.Equal(fc.Compose(), frame) {
		return nil, fmt.Errorf("ninep: malformed message type %d: fields do not fill the frame", typ)
	}
	return fc, nil
}

// dispatch handles Tversion and Tflush at once and starts a goroutine for
// anything else. It owns the budget token taken for fc.
func (c *conn) dispatch(fc proto.FCall) {
	tag := fc.GetTag()
	if c.log.Enabled(c.ctx, slog.LevelDebug) {
		c.log.Debug("9p <-", "msg", fc.String())
	}
	switch m := fc.(type) {
	case *proto.TRVersion:
		c.version(m)
		c.observe(fc, nil)
		<-c.sem
		return
	case *proto.TFlush:
		c.flush(m)
		c.observe(fc, nil)
		<-c.sem
		return
	}
	if c.msize.Load() == 0 {
		c.send(errorFcall(tag, errNoVersion, c.maxMsize))
		c.observe(fc, errNoVersion)
		<-c.sem
		return
	}
	if c.refuse != nil {
		c.send(errorFcall(tag, c.refuse, c.msize.Load()))
		c.observe(fc, c.refuse)
		<-c.sem
		c.cancel()
		return
	}
	r := &request{tag: tag, fc: fc}
	r.ctx, r.cancel = context.WithCancel(c.ctx)
	c.mu.Lock()
	if _, dup := c.reqs[tag]; dup {
		c.mu.Unlock()
		r.cancel()
		c.send(errorFcall(tag, errDuplicateTag, c.msize.Load()))
		c.observe(fc, errDuplicateTag)
		<-c.sem
		return
	}
	if err := c.chargeRequestLocked(r); err != nil {
		c.mu.Unlock()
		r.cancel()
		c.log.Debug("9p request refused", "tag", tag, "err", err)
		c.send(errorFcall(tag, err, c.msize.Load()))
		c.observe(fc, err)
		<-c.sem
		return
	}
	c.reqs[tag] = r
	c.mu.Unlock()
	switch m := fc.(type) {
	case *proto.TClunk:
		r.unlinked, r.unlinkedErr = c.takeFid(m.Fid)
	case *proto.TRemove:
		r.unlinked, r.unlinkedErr = c.takeFid(m.Fid)
	}
	c.wg.Add(1)
	select {
	case c.work <- r: // an idle worker takes it
	default:
		go c.worker(r)
	}
}

// workerIdle is how long a handler goroutine waits for another request
// before it exits. Reusing goroutines keeps their grown stacks: a fresh
// goroutine per request spends much of its time growing its stack.
const workerIdle = 2 * time.Second

// worker runs r, then further requests handed to it by dispatch, until it
// has been idle for workerIdle or the connection ends.
func (c *conn) worker(r *request) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		c.run(r)
		idle.Reset(workerIdle)
		select {
		case r = <-c.work:
		case <-idle.C:
			return
		case <-c.ctx.Done():
			return
		}
	}
}

// run handles one request and sends its reply.
func (c *conn) run(r *request) {
	defer c.wg.Done()
	defer func() { <-c.sem }()
	defer c.unchargeRequest(r)
	defer r.cancel()
	reply, err := c.handle(r)
	c.respond(r, reply, err)
	c.observe(r.fc, err)
	if r.hangup {
		c.cancel()
	}
}

// observe tells Server.OnRequest of the request fc, answered with err.
func (c *conn) observe(fc proto.FCall, err error) {
	if h := c.srv.OnRequest; h != nil {
		h(opName(fc), err != nil)
	}
}

// opName is the operation of a 9P message: its type without the T.
func opName(fc proto.FCall) string {
	switch fc.(type) {
	case *proto.TRVersion:
		return "version"
	case *proto.TAuth:
		return "auth"
	case *proto.TAttach:
		return "attach"
	case *proto.TFlush:
		return "flush"
	case *proto.TWalk:
		return "walk"
	case *proto.TOpen:
		return "open"
	case *proto.TCreate:
		return "create"
	case *proto.TRead:
		return "read"
	case *proto.TWrite:
		return "write"
	case *proto.TClunk:
		return "clunk"
	case *proto.TRemove:
		return "remove"
	case *proto.TStat:
		return "stat"
	case *proto.TWstat:
		return "wstat"
	}
	return "other"
}

// handle runs the handler for r, turning a panic into an error reply.
func (c *conn) handle(r *request) (reply proto.FCall, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("9p handler panic", "msg", r.fc.String(), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			reply, err = nil, errInternal
		}
	}()
	switch m := r.fc.(type) {
	case *proto.TAuth:
		return c.auth(r, m)
	case *proto.TAttach:
		return c.attach(r, m)
	case *proto.TWalk:
		return c.walk(r, m)
	case *proto.TOpen:
		return c.open(r, m)
	case *proto.TCreate:
		return c.create(r, m)
	case *proto.TRead:
		return c.read(r, m)
	case *proto.TWrite:
		return c.write(r, m)
	case *proto.TClunk:
		return c.clunk(r, m)
	case *proto.TRemove:
		return c.remove(r, m)
	case *proto.TStat:
		return c.stat(r, m)
	case *proto.TWstat:
		return c.wstat(r, m)
	}
	return nil, fmt.Errorf("ninep: unhandled message %T", r.fc)
}

// respond sends r's reply (or suppresses it, see the package comment) and
// then the Rflushes waiting for it, all under the write mutex so that a
// Tflush that no longer finds r cannot overtake r's reply.
func (c *conn) respond(r *request, reply proto.FCall, err error) {
	msize := c.msize.Load()
	if err == nil {
		if n := composedLen(reply); msize != 0 && n > int(msize) {
			err = errReplyTooLarge
		}
	}
	if err != nil {
		reply = errorFcall(r.tag, err, msize)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// r stops counting against its principal before its reply can reach
	// the client, so a client that has its reply may send another request;
	// while replies wait for the write mutex they still count.
	c.unchargeRequest(r)
	c.mu.Lock()
	if c.reqs[r.tag] == r {
		delete(c.reqs, r.tag)
	}
	aborted := r.aborted
	suppress := aborted || (r.flushed && err != nil && !alwaysAnswered(r.fc))
	flushes := r.flushes
	c.mu.Unlock()
	if aborted {
		return
	}
	if !suppress {
		c.writeLocked(reply)
	} else if c.log.Enabled(c.ctx, slog.LevelDebug) {
		c.log.Debug("9p flushed; reply suppressed", "tag", r.tag, "err", err)
	}
	for _, tag := range flushes {
		c.writeLocked(&proto.RFlush{Header: proto.Header{Type: proto.Rflush, Tag: tag}})
	}
}

// alwaysAnswered reports whether fc is answered even when flushed: Tclunk
// and Tremove clunk their fid whatever happens.
func alwaysAnswered(fc proto.FCall) bool {
	switch fc.(type) {
	case *proto.TClunk, *proto.TRemove:
		return true
	}
	return false
}

func composedLen(fc proto.FCall) int {
	switch m := fc.(type) {
	case *proto.RRead:
		return 11 + len(m.Data)
	case *proto.RStat:
		return rstatHdr + int(m.Stat.ComposeLength())
	}
	return 0 // every other reply is small
}

// send writes one reply.
func (c *conn) send(fc proto.FCall) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.writeLocked(fc)
}

// writeLocked writes one reply; c.wmu is held. A write error ends the
// connection.
func (c *conn) writeLocked(fc proto.FCall) {
	if c.werr != nil || c.ended.Load() {
		return
	}
	if c.log.Enabled(c.ctx, slog.LevelDebug) {
		c.log.Debug("9p ->", "msg", fc.String())
	}
	if _, err := c.nc.Write(fc.Compose()); err != nil && !c.ended.Load() {
		c.werr = err
		c.cancel()
	}
}

// hangup reports whether err means the peer went away.
func hangup(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// errorFcall returns an Rerror carrying err's text (errorText: with the
// errno the client reads back), cut to fit msize.
func errorFcall(tag uint16, err error, msize uint32) *proto.RError {
	if msize == 0 {
		msize = MinMsize
	}
	return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: tag}, Ename: errorText(err, int(msize)-rerrorHdr)}
}

// version handles Tversion: abort the session, then negotiate a new one.
func (c *conn) version(m *proto.TRVersion) {
	c.abortSession()
	if m.Msize < MinMsize {
		c.send(errorFcall(m.Tag, errMsizeTooSmall, c.maxMsize))
		return
	}
	msize := min(m.Msize, c.maxMsize)
	reply := &proto.TRVersion{Header: proto.Header{Type: proto.Rversion, Tag: m.Tag}, Msize: msize, Version: "unknown"}
	if m.Version == Version {
		reply.Version = Version
		c.msize.Store(msize)
	}
	c.send(reply)
}

// abortSession cancels and forgets every request in flight, waits for their
// handlers and clunks every fid. It runs on the connection loop, so no new
// request can start meanwhile.
func (c *conn) abortSession() {
	c.msize.Store(0)
	c.mu.Lock()
	for tag, r := range c.reqs {
		r.aborted = true
		r.cancel()
		delete(c.reqs, tag)
	}
	c.mu.Unlock()
	c.wg.Wait()
	c.clunkAll()
	c.dropGrants()
	c.authed.Store(false)
	if c.authTimer != nil {
		c.authTimer.Reset(c.srv.authTimeout())
	}
}

// authExpired ends the connection if its session has not attached.
func (c *conn) authExpired() {
	if c.authed.Load() {
		return
	}
	c.log.Debug("9p no attach within the authentication deadline: closing the connection", "timeout", c.srv.authTimeout())
	c.timedOut.Store(true)
	c.cancel()
}

// flush handles Tflush: see the package comment.
func (c *conn) flush(m *proto.TFlush) {
	c.mu.Lock()
	old := c.reqs[m.Oldtag]
	if old != nil {
		old.flushed = true
		old.flushes = append(old.flushes, m.Tag)
		c.mu.Unlock()
		old.cancel()
		return
	}
	c.mu.Unlock()
	c.send(&proto.RFlush{Header: proto.Header{Type: proto.Rflush, Tag: m.Tag}})
}

// iounit is the largest Tread or Twrite payload the session allows.
func (c *conn) iounit() uint32 {
	m := c.msize.Load()
	if m < ioHdrSize {
		return 0
	}
	return m - ioHdrSize
}
