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
// A connection that a Gate holds (see Gate.Listen) is bounded by the gate
// until its first successful Tattach, and its address is not held to
// MaxConns meanwhile: the gate closes the oldest unauthenticated
// connection rather than refuse the newest.
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
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

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
	// OnRequest, if set, learns of every request answered, by message
	// type ("version", "walk", "read", ...; failed: an Rerror).
	OnRequest vfs.RequestHook

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
// A connection that holds a Gate's ticket (TicketOf; see Gate.Listen)
// leaves the gate at its first successful Tattach, and its peer address
// is not held to MaxConns: the gate bounds the connections that have not
// attached.
//
// A connection over Server.MaxConns for its principal is served only to
// tell the client why: Tversion is answered, then the first other request
// gets the Rerror "too many connections for uid 1001" and the connection
// is closed; one far over the cap is closed at once. ServeConn then returns
// that error.
func (s *Server) ServeConn(ctx context.Context, c net.Conn, peer vfs.Peer) error {
	name := peerPrincipal(peer, c)
	// A connection a Gate holds is bounded by the gate until it attaches
	// (its address's connections are evicted oldest first, never refused).
	gated := peer.HostUID < 0 && TicketOf(c) != nil
	p, verdict := s.acquireConn(name, !gated)
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
			if !TransientAcceptError(err) {
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

// TransientAcceptError reports whether an error of a listener's Accept
// passes: a timeout, running out of descriptors or memory (EMFILE,
// ENFILE, ENOBUFS, ENOMEM), or a connection aborted before it was
// accepted. A listener that meets one pauses and accepts again.
func TransientAcceptError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) ||
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
