// Package ninep exports a vfs tree over 9P2000 and dials 9P servers.
//
// The server is modelled on rsc's 9fans.net/go/plan9/srv9p but serves the
// transport-free node tree of package vfs: every fid names a node, remembers
// the directory it was reached from and the name it has there (for Tremove
// and Twstat renames), and carries the vfs.Cred that Server.Auth returned for
// the Tattach it descends from.
//
// # Authentication
//
// With Server.Auth set, Tauth makes an auth fid (qid type QTAUTH) that the
// client writes a secret to (a token; at most 8 KiB; reads return nothing)
// without opening it. A Tattach naming that afid, with the same uname and
// aname, calls Auth.Authenticate with the connection's vfs.Peer plus User =
// uname and Secret = the bytes written. A Tattach with afid NOFID calls it
// with no secret: whether that suffices (say, for a unix socket peer whose
// host uid came from SO_PEERCRED) is the Authenticator's decision. An
// Authenticate error is the Rerror; on a connection with no attached
// session the connection is then closed, so that a peer that cannot
// authenticate holds nothing. The Cred returned belongs to the new
// fid and to every fid walked from it. A Cred that is a vfs.Lease naming a
// grant ties the connection to the grant: when its Done channel closes, the
// connection is closed (every session on it ends, blocked reads included).
//
// # Limits
//
// A connection must attach within Server.AuthTimeout of its start (or of a
// Tversion that reset its session), or it is closed. Connections and fids
// are counted per principal: a peer with a host uid is "uid N" for the
// connection's life; a peer without one is "host ADDR" until it attaches
// with a grant; and a connection attaching with a grant also counts once
// against "token …" (vfs.Lease.Grant). A principal holds at most
// Server.MaxConns connections and Server.MaxFids fids (every fid counts
// against the principal of the Tattach it descends from; auth fids against
// the connection's peer). A principal also has at most
// Server.MaxPrincipalInflight requests in flight across its connections:
// a request counts against the principal of the fid it names (Tauth,
// Tattach and a request naming an unknown fid against the connection's
// peer) from when the connection loop reads it until its reply is about to
// be written, and one more is answered at once with the Rerror "too many
// requests in flight for uid 1001" (it is neither queued nor does it stop
// the connection being read). Tversion, Tflush, Tclunk and Tremove are
// never counted nor refused: a client can always flush its blocked
// requests, and a fid it clunks is always gone. Limits are per principal,
// so one at its caps takes nothing from another.
//
// # Framing
//
// Messages are decoded with github.com/knusbaum/go9p/proto, whose parser is
// not safe on hostile input, so the connection loop frames messages itself:
// it reads size[4], rejects a size below 7 or above the negotiated msize,
// reads exactly the body, checks a Twrite's count against the body, parses
// the frame inside recover, and (for every message but Twrite) requires the
// parsed message to Compose back to exactly the bytes received. A frame that
// fails any of these checks, or that is not a T-message, closes that
// connection and only that connection. Because go9p refuses frames above
// proto.MaxMsgLen, the largest msize the server negotiates is MaxMsize
// (65535).
//
// # Concurrency, back-pressure and flush
//
// Each request other than Tversion and Tflush runs in its own goroutine with
// its own context (and counts against its principal's budget, see Limits). Requests therefore run concurrently and in no particular
// order: as with srv9p, a client must not send a request that depends on the
// effect of another (a Topen of the newfid of a Twalk, a Tread racing a
// Tclunk of its fid) before that other one is answered. At most
// Server.MaxInflight requests of one connection run at once; when the budget
// is spent the connection loop stops reading the socket (TCP back-pressure:
// nothing is dropped, nothing panics) until a request finishes. While paused
// it still notices the peer hanging up (which cancels everything in flight)
// provided the peer has no unread bytes queued; a peer that hangs up with
// more requests queued behind the spent budget is noticed when a request
// finishes or ctx ends. Since a paused connection reads nothing, a client
// that keeps MaxInflight requests blocked cannot flush them; such a client
// must close the connection (or keep fewer requests outstanding).
//
// Tflush and Tversion are handled by the connection loop itself. Tflush
// cancels the old request's context; its Rflush is written after the old
// request's reply, or in its place: a flushed request that fails (typically
// with the context's error) sends no reply, while one that succeeded anyway
// still sends its reply (flush(5): a completed request may signify a state
// change the client must honour, e.g. a new fid), followed by the Rflush. An
// unknown or finished oldtag gets its Rflush at once. Tclunk and Tremove
// always reply, flushed or not, because they always clunk. Replies are
// written under one write mutex, so they are never interleaved.
//
// Tversion aborts the session: every request in flight is cancelled and
// answered by nothing, the loop waits for their handlers to return, every fid
// is clunked (handles closed), and only then is the Rversion sent.
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
	"unicode/utf8"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// Protocol limits.
const (
	// MaxMsize is the largest msize the server negotiates. It is go9p's
	// proto.MaxMsgLen: go9p refuses to parse larger frames.
	MaxMsize = proto.MaxMsgLen
	// MinMsize is the smallest msize a client may propose in Tversion;
	// a smaller one gets Rerror and the session stays unnegotiated.
	MinMsize = 256
	// DefaultMaxInflight is the per-connection request budget used when
	// Server.MaxInflight is zero.
	DefaultMaxInflight = 4096
	// Version is the only protocol version the server speaks.
	Version = "9P2000"

	// NOTAG and NOFID are the 9P "no tag" and "no fid" values.
	NOTAG = 0xFFFF
	NOFID = 0xFFFFFFFF

	ioHdrSize  = 24   // IOHDRSZ: Twrite/Rread header bound, msize - iounit
	maxWelem   = 16   // MAXWELEM: most names in one Twalk
	maxSecret  = 8192 // most bytes a client may write to an auth fid
	minFrame   = 7    // size[4] type[1] tag[2]
	twriteHdr  = 23   // size[4] type[1] tag[2] fid[4] offset[8] count[4]
	qtDir      = 0x80
	qtAppend   = 0x40
	qtExcl     = 0x20
	qtAuth     = 0x08
	qtTmp      = 0x04
	dmAuth     = 0x08000000
	oExec      = 3
	oTrunc     = 0x10
	oRclose    = 0x40
	statFixed  = 2 + 2 + 4 + 13 + 4 + 4 + 4 + 8 + 4*2 // a stat without its strings
	rstatHdr   = 4 + 1 + 2 + 2                        // Rstat header before the stat
	rerrorHdr  = 4 + 1 + 2 + 2                        // Rerror header before the text
	authPathHi = 1 << 62                              // auth qid paths: never a PathIno (bit 63)
)

// Server serves one vfs tree over 9P2000 connections. The zero value is not
// useful: Root must be set. A Server may serve many connections at once and
// must not be modified while it does.
type Server struct {
	// Root is the directory a Tattach reaches.
	Root vfs.Dir
	// Auth turns the peer of a Tattach into the vfs.Cred passed to every
	// node operation made through fids descending from it. If Auth is nil,
	// Tauth fails with "authentication not required" and every Tattach
	// succeeds with a nil Cred.
	Auth vfs.Authenticator
	// Logger receives debug-level logs of every message and error-level
	// logs of handler panics. Nil means discard.
	Logger *slog.Logger
	// MaxInflight is the number of requests of one connection that may run
	// at once; zero means DefaultMaxInflight. When it is reached the
	// connection is not read until a request finishes.
	MaxInflight int
	// Msize is the largest msize to negotiate; zero or anything above
	// MaxMsize means MaxMsize, anything below MinMsize means MinMsize.
	Msize uint32
	// AuthTimeout is how long a connection may go without a successful
	// Tattach, from its start or from a Tversion that resets its session,
	// before it is closed. Zero means DefaultAuthTimeout; a negative value
	// means no deadline.
	AuthTimeout time.Duration
	// MaxConns is how many connections one principal may hold at once
	// (see the package comment); zero means DefaultMaxConns, a negative
	// value no limit.
	MaxConns int
	// MaxFids is how many fids one principal may hold at once across all
	// its connections; zero means DefaultMaxFids, a negative value no
	// limit.
	MaxFids int
	// MaxPrincipalInflight is how many requests one principal may have in
	// flight at once across all its connections; zero means
	// DefaultMaxPrincipalInflight, a negative value no limit. A request
	// over it is answered at once with the Rerror "too many requests in
	// flight for uid 1001" (see the package comment).
	MaxPrincipalInflight int

	pmu        sync.Mutex
	principals map[string]*principal // guarded by pmu
}

// Errors sent as Rerror text for protocol misuse. The tree's own errors are
// sent as their err.Error().
var (
	errUnknownFid     = errors.New("unknown fid")
	errFidInUse       = errors.New("fid in use")
	errDuplicateTag   = errors.New("duplicate tag")
	errNoVersion      = errors.New("9P version not negotiated")
	errMsizeTooSmall  = errors.New("msize too small")
	errNoAuth         = errors.New("authentication not required")
	errNotAuthFid     = errors.New("afid is not an auth fid")
	errAuthFid        = errors.New("not allowed on an auth fid")
	errAttachMismatch = errors.New("attach does not match auth fid")
	errSecretTooLong  = errors.New("auth secret too long")
	errNoRoot         = errors.New("no file tree to attach to")
	errWalkOpen       = errors.New("cannot walk an open fid")
	errWalkNonDir     = errors.New("walk in non-directory")
	errTooManyNames   = errors.New("too many names in walk")
	errBadName        = errors.New("invalid file name")
	errAlreadyOpen    = errors.New("fid already open")
	errNotOpen        = errors.New("fid not open")
	errNotOpenRead    = errors.New("fid not open for reading")
	errNotOpenWrite   = errors.New("fid not open for writing")
	errRclose         = errors.New("ORCLOSE not supported")
	errCreateNonDir   = errors.New("create in non-directory")
	errBadOffset      = errors.New("bad offset")
	errDirOffset      = errors.New("bad offset in directory read")
	errDirCount       = errors.New("read count too small for directory entry")
	errRemoveRoot     = errors.New("cannot remove the root")
	errRenameRoot     = errors.New("cannot rename the root")
	errWstatType      = errors.New("wstat cannot change type")
	errWstatDev       = errors.New("wstat cannot change dev")
	errWstatQid       = errors.New("wstat cannot change qid")
	errWstatMuid      = errors.New("wstat cannot change muid")
	errWstatUid       = errors.New("wstat cannot change uid")
	errWstatGid       = errors.New("wstat cannot change gid")
	errWstatDMDIR     = errors.New("wstat cannot change DMDIR bit")
	errWstatDirLength = errors.New("wstat cannot change length of a directory")
	errStatTooLarge   = errors.New("stat too large")
	errBadCount       = errors.New("bad count from file")
	errInternal       = errors.New("internal server error")
	errReplyTooLarge  = errors.New("reply too large for msize")
	errNotFile        = errors.New("not a file")
)

// ServeConn serves 9P on c until the peer hangs up, ctx ends, a malformed
// message arrives or a reply cannot be written. peer is what the transport
// knows about the other end; each Tattach passes it to s.Auth with User set
// to the attach uname and Secret to what was written to the auth fid.
//
// ServeConn closes c. Before returning it cancels every request still in
// flight, waits for their handlers to return (so nodes must honour their
// contexts) and closes the handles of fids never clunked. It returns nil
// when the peer hung up, ctx.Err() when ctx ended, and otherwise the error
// that ended the connection.
//
// A connection over Server.MaxConns for its principal is served only to
// tell the client why: Tversion is answered, then the first other request
// gets the Rerror "too many connections for uid 1001" and the connection
// is closed; one far over the cap is closed at once. ServeConn then returns
// that error.
func (s *Server) ServeConn(ctx context.Context, c net.Conn, peer vfs.Peer) error {
	name := peerPrincipal(peer, c)
	p, verdict := s.acquireConn(name)
	if verdict == connDrop {
		c.Close()
		s.logger().Debug("9p connection dropped", "principal", name, "err", "over the connection cap")
		return tooManyConns(name)
	}
	cn := s.newConn(c, peer)
	cn.peerP = p
	if verdict == connRefuse {
		cn.refuse = tooManyConns(name)
		cn.log.Debug("9p connection refused", "principal", name, "err", cn.refuse)
	} else {
		cn.peerHeld = true
	}
	err := cn.serve(ctx)
	cn.mu.Lock()
	held := cn.peerHeld
	cn.peerHeld = false
	cn.mu.Unlock()
	switch {
	case verdict == connRefuse:
		s.releaseConn(p, true)
		if err == nil || errors.Is(err, net.ErrClosed) {
			err = cn.refuse
		}
	case held:
		s.releaseConn(p, false)
	}
	return err
}

// Serve accepts connections on l and serves each with ServeConn in its own
// goroutine, with the peer peerOf returns (ConnPeer if peerOf is nil). It
// closes l when ctx ends. It returns ctx.Err() if ctx ended, else the error
// from Accept, and in either case only after ending every connection it
// started and waiting for their ServeConn to return.
// Transient accept errors (timeouts, EMFILE, ENFILE, ECONNABORTED) are
// retried with a growing pause.
func (s *Server) Serve(ctx context.Context, l net.Listener, peerOf func(net.Conn) vfs.Peer) error {
	if peerOf == nil {
		peerOf = ConnPeer
	}
	log := s.logger()
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer func() {
		stop()
		cancel()
		wg.Wait()
	}()
	var pause time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !transientAcceptError(err) {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			log.Debug("9p accept", "err", err, "retry", pause)
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		pause = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.ServeConn(ctx, nc, peerOf(nc))
			log.Debug("9p connection ended", "remote", nc.RemoteAddr().String(), "err", err)
		}()
	}
}

func transientAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED)
}

// ConnPeer is the default peer function of Serve. A *net.UnixConn is
// transport "9p-unix" with the host uid and gid of its peer process
// (SO_PEERCRED; -1 if they cannot be read); any other connection is
// "9p-tcp" with HostUID and HostGID -1, i.e. a peer that must authenticate.
func ConnPeer(c net.Conn) vfs.Peer {
	if uc, ok := c.(*net.UnixConn); ok {
		uid, gid, err := PeerCred(uc)
		if err != nil {
			uid, gid = -1, -1
		}
		return vfs.Peer{Transport: "9p-unix", HostUID: uid, HostGID: gid}
	}
	return vfs.Peer{Transport: "9p-tcp", HostUID: -1, HostGID: -1}
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

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
		<-c.sem
		return
	case *proto.TFlush:
		c.flush(m)
		<-c.sem
		return
	}
	if c.msize.Load() == 0 {
		c.send(errorFcall(tag, errNoVersion, c.maxMsize))
		<-c.sem
		return
	}
	if c.refuse != nil {
		c.send(errorFcall(tag, c.refuse, c.msize.Load()))
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
		<-c.sem
		return
	}
	if err := c.chargeRequestLocked(r); err != nil {
		c.mu.Unlock()
		r.cancel()
		c.log.Debug("9p request refused", "tag", tag, "err", err)
		c.send(errorFcall(tag, err, c.msize.Load()))
		<-c.sem
		return
	}
	c.reqs[tag] = r
	c.mu.Unlock()
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
	if r.hangup {
		c.cancel()
	}
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

// errorFcall returns an Rerror carrying err's text, cut to fit msize.
func errorFcall(tag uint16, err error, msize uint32) *proto.RError {
	text := err.Error()
	if text == "" {
		text = "unknown error"
	}
	if msize == 0 {
		msize = MinMsize
	}
	if limit := int(msize) - rerrorHdr; len(text) > limit {
		text = text[:limit]
		for len(text) > 0 && !utf8.ValidString(text) {
			text = text[:len(text)-1]
		}
	}
	return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: tag}, Ename: text}
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
