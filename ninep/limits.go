package ninep

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// Default limits of a Server (see Server.AuthTimeout, MaxConns, MaxFids,
// MaxPrincipalInflight).
const (
	// DefaultAuthTimeout is how long a connection may go without a
	// successful Tattach.
	DefaultAuthTimeout = 10 * time.Second
	// DefaultMaxConns is how many connections one principal may hold.
	DefaultMaxConns = 64
	// DefaultMaxFids is how many fids one principal may hold across its
	// connections.
	DefaultMaxFids = 2048
	// DefaultMaxPrincipalInflight is how many requests one principal may
	// have in flight at once across its connections.
	DefaultMaxPrincipalInflight = 1024
	// refuseSlack is how many connections over MaxConns one principal may
	// have at once being told why they are refused (their Tattach gets the
	// Rerror); any beyond that are closed as soon as they are accepted.
	refuseSlack = 8
)

// errAuthTimeout ends a connection that did not attach in time.
var errAuthTimeout = errors.New("ninep: no attach within the authentication deadline")

// A principal is whoever the server's limits count connections and fids
// against: a host uid ("uid 1001"), a grant named by a vfs.Lease Cred
// ("token tok_…"), or, for a peer with no host uid that has not attached
// with a grant yet, its network address ("host 127.0.0.1").
type principal struct {
	name    string
	conns   int // connections counted against it
	refused int // connections over MaxConns being refused
	fids    int // fids counted against it
	reqs    int // requests in flight counted against it
}

// orDefault returns v, or def when v is the zero value (an option not set).
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func (s *Server) authTimeout() time.Duration { return orDefault(s.AuthTimeout, DefaultAuthTimeout) }
func (s *Server) maxConns() int              { return orDefault(s.MaxConns, DefaultMaxConns) }
func (s *Server) maxFids() int               { return orDefault(s.MaxFids, DefaultMaxFids) }
func (s *Server) maxPrincipalInflight() int {
	return orDefault(s.MaxPrincipalInflight, DefaultMaxPrincipalInflight)
}

// peerPrincipal names the principal a new connection counts against
// before it attaches.
func peerPrincipal(peer vfs.Peer, nc net.Conn) string {
	if peer.HostUID >= 0 {
		return "uid " + strconv.Itoa(peer.HostUID)
	}
	addr := ""
	if a := nc.RemoteAddr(); a != nil {
		addr = a.String()
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	if addr == "" {
		addr = "unknown"
	}
	return "host " + addr
}

// connVerdict is what acquireConn decided about a new connection.
type connVerdict uint8

const (
	connOK     connVerdict = iota // counted; serve it
	connRefuse                    // over the cap: tell the client, then close
	connDrop                      // far over the cap: close at once
)

// principalLocked returns the principal called name, making it if need be.
// s.pmu is held.
func (s *Server) principalLocked(name string) *principal {
	if s.principals == nil {
		s.principals = map[string]*principal{}
	}
	p := s.principals[name]
	if p == nil {
		p = &principal{name: name}
		s.principals[name] = p
	}
	return p
}

// forgetLocked drops p from the table once nothing counts against it.
// s.pmu is held.
func (s *Server) forgetLocked(p *principal) {
	if p.conns == 0 && p.refused == 0 && p.fids == 0 && p.reqs == 0 && s.principals[p.name] == p {
		delete(s.principals, p.name)
	}
}

// acquireConn counts a new connection against the principal called name,
// held to MaxConns if capped. With connRefuse the connection is counted
// as refused (release it with releaseConn(p, true)); with connDrop it is
// not counted at all.
func (s *Server) acquireConn(name string, capped bool) (*principal, connVerdict) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	p := s.principalLocked(name)
	max := s.maxConns()
	switch {
	case !capped || max < 0 || p.conns < max:
		p.conns++
		return p, connOK
	case p.refused < refuseSlack:
		p.refused++
		return p, connRefuse
	}
	s.forgetLocked(p)
	return p, connDrop
}

// tryConn counts one more connection against the principal called name,
// or fails with the Rerror that says it has too many.
func (s *Server) tryConn(name string) (*principal, error) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	p := s.principalLocked(name)
	if max := s.maxConns(); max >= 0 && p.conns >= max {
		s.forgetLocked(p)
		return nil, tooManyConns(name)
	}
	p.conns++
	return p, nil
}

// releaseConn uncounts a connection acquireConn or tryConn counted.
func (s *Server) releaseConn(p *principal, refused bool) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if refused {
		p.refused--
	} else {
		p.conns--
	}
	s.forgetLocked(p)
}

// acquireFid counts one more fid against p, or fails with the Rerror that
// says p has too many.
func (s *Server) acquireFid(p *principal) error {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if max := s.maxFids(); max >= 0 && p.fids >= max {
		return fmt.Errorf("too many fids for %s", p.name)
	}
	p.fids++
	return nil
}

// releaseFid uncounts a fid acquireFid counted.
func (s *Server) releaseFid(p *principal) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	p.fids--
	s.forgetLocked(p)
}

// acquireRequest counts one more request in flight against p, or fails
// with the Rerror that says p has too many. It returns the principal it
// counted against: p, or the principal now in the table under p's name if
// p had been forgotten meanwhile (a TCP peer's address after the
// connection attached with a grant). Release it with releaseRequest.
func (s *Server) acquireRequest(p *principal) (*principal, error) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if q := s.principals[p.name]; q != nil {
		p = q
	} else {
		if s.principals == nil {
			s.principals = map[string]*principal{}
		}
		s.principals[p.name] = p
	}
	if max := s.maxPrincipalInflight(); max >= 0 && p.reqs >= max {
		s.forgetLocked(p)
		return nil, fmt.Errorf("too many requests in flight for %s", p.name)
	}
	p.reqs++
	return p, nil
}

// releaseRequest uncounts a request acquireRequest counted.
func (s *Server) releaseRequest(p *principal) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	p.reqs--
	s.forgetLocked(p)
}

// requestOwnerLocked returns the principal a request counts against: that
// of the fid it names, or the connection's own (a Tauth, a Tattach, an
// unknown fid). c.mu is held.
func (c *conn) requestOwnerLocked(fc proto.FCall) *principal {
	num := uint32(NOFID)
	switch m := fc.(type) {
	case *proto.TWalk:
		num = m.Fid
	case *proto.TOpen:
		num = m.Fid
	case *proto.TCreate:
		num = m.Fid
	case *proto.TRead:
		num = m.Fid
	case *proto.TWrite:
		num = m.Fid
	case *proto.TStat:
		num = m.Fid
	case *proto.TWstat:
		num = m.Fid
	}
	if f := c.fids[num]; f != nil && f.p != nil {
		return f.p
	}
	return c.peerP
}

// exemptRequest reports whether fc runs whatever the principal's request
// budget: Tclunk and Tremove always clunk their fid, so refusing one would
// leave a fid the client believes gone, and each frees a fid that
// Server.MaxFids already bounds.
func exemptRequest(fc proto.FCall) bool {
	return alwaysAnswered(fc)
}

// chargeRequestLocked counts r against the principal it belongs to, or fails
// with the Rerror that says that principal has too many requests in
// flight. c.mu is held.
func (c *conn) chargeRequestLocked(r *request) error {
	if exemptRequest(r.fc) {
		return nil
	}
	p, err := c.srv.acquireRequest(c.requestOwnerLocked(r.fc))
	if err != nil {
		return err
	}
	r.charged = p
	return nil
}

// unchargeRequest uncounts r if it is counted. Only the goroutine that
// owns r calls it.
func (c *conn) unchargeRequest(r *request) {
	if r.charged != nil {
		c.srv.releaseRequest(r.charged)
		r.charged = nil
	}
}

func tooManyConns(name string) error {
	return fmt.Errorf("too many connections for %s", name)
}

// grantOf returns the grant a Cred names (see vfs.Lease), or "".
func grantOf(cred vfs.Cred) (string, <-chan struct{}) {
	l, ok := cred.(vfs.Lease)
	if !ok {
		return "", nil
	}
	name := l.Grant()
	if name == "" {
		return "", nil
	}
	return name, l.Done()
}

// grantRef is a grant a connection has attached with: the connection is
// counted against it once, and watches it end.
type grantRef struct {
	p    *principal
	stop chan struct{} // closed to stop watching
}

// useGrant counts the connection against the grant a Tattach's Cred
// names, the first time it attaches with it, and ends the connection when
// the grant ends. It returns the principal the attach's fids count
// against: the grant's, or the connection's own if the Cred names none.
func (c *conn) useGrant(cred vfs.Cred) (*principal, error) {
	name, done := grantOf(cred)
	if name == "" {
		return c.peerP, nil
	}
	select {
	case <-done: // a nil done never ends
		return nil, fmt.Errorf("%s has ended", name)
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.grants[name]; g != nil {
		return g.p, nil
	}
	p, err := c.srv.tryConn(name)
	if err != nil {
		return nil, err
	}
	g := &grantRef{p: p, stop: make(chan struct{})}
	if c.grants == nil {
		c.grants = map[string]*grantRef{}
	}
	c.grants[name] = g
	if done != nil {
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			select {
			case <-done:
				c.log.Info("9p grant ended: closing the connection", "grant", name)
				c.cancel()
			case <-g.stop:
			case <-c.ctx.Done():
			}
		}()
	}
	// A peer known only by its address counts against its grant from now
	// on, not against its address.
	if c.peerHeld && c.peer.HostUID < 0 {
		c.peerHeld = false
		c.srv.releaseConn(c.peerP, false)
	}
	return p, nil
}

// dropGrants uncounts the connection from every grant it attached with
// and stops watching them. It runs when the session or connection ends,
// after every fid is gone.
func (c *conn) dropGrants() {
	c.mu.Lock()
	grants := c.grants
	c.grants = nil
	c.mu.Unlock()
	for _, g := range grants {
		close(g.stop)
		c.srv.releaseConn(g.p, false)
	}
}
