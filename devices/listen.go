package devices

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ninep"
)

// Devices dial the kernel on the same listeners as 9P clients. A device
// speaks first, with abi.DeviceMagic; a 9P client's first four bytes are
// its Tversion's size, which are never "GSVD" (a size of about 1.1 GB).

// helloTimeout is how long a new connection has to show what it is, and a
// device to say its hello.
const helloTimeout = 10 * time.Second

// splitListener is a net.Listener of the 9P connections of another
// listener; the device connections among them go to the router.
type splitListener struct {
	net.Listener
	sniff     time.Duration // how long a connection has to show what it is
	r         *Router
	ctx       context.Context
	conns     chan net.Conn
	done      chan struct{}
	once      sync.Once
	acceptErr error
}

// SplitListener returns the listener of l's 9P connections: each
// connection l accepts is sorted by its first bytes, and a device's is
// served by the router (ServeDevice) until ctx ends or the router closes.
// A connection that sends nothing within sniff (helloTimeout if not
// positive: give the 9P server's attach deadline, so that a silent client
// is closed when the server would close it) is closed. Closing the
// returned listener closes l.
func (r *Router) SplitListener(ctx context.Context, l net.Listener, sniff time.Duration) net.Listener {
	if sniff <= 0 {
		sniff = helloTimeout
	}
	s := &splitListener{Listener: l, sniff: sniff, r: r, ctx: ctx, conns: make(chan net.Conn), done: make(chan struct{})}
	r.wg.Add(1)
	go s.accept()
	return s
}

// accept accepts l's connections and sorts each in a goroutine of its own.
// An error that passes (ninep.TransientAcceptError: out of descriptors, a
// connection aborted) pauses the loop, 5 ms at first and twice as long
// each time up to a second, and it accepts again; any other error (the
// listener closed) ends it, and Accept returns that error.
func (s *splitListener) accept() {
	defer s.r.wg.Done()
	var pause time.Duration
	for {
		c, err := s.Listener.Accept()
		if err != nil && ninep.TransientAcceptError(err) {
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.r.log.Debug("accept", "err", err, "retry", pause)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
				continue
			case <-s.done:
			case <-s.ctx.Done():
			}
			t.Stop()
			err = net.ErrClosed
		}
		if err != nil {
			s.once.Do(func() {
				s.acceptErr = err
				close(s.done)
			})
			return
		}
		pause = 0
		s.r.wg.Add(1)
		go s.sort(c)
	}
}

// sort peeks at c's first bytes and hands c to the router or to Accept.
func (s *splitListener) sort(c net.Conn) {
	defer s.r.wg.Done()
	br := bufio.NewReaderSize(c, 4096)
	c.SetReadDeadline(time.Now().Add(s.sniff))
	head, err := br.Peek(4)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	bc := &bufferedConn{Conn: c, r: br}
	if string(head) == abi.DeviceMagic[:4] {
		s.r.ServeDevice(s.ctx, bc)
		return
	}
	select {
	case s.conns <- bc:
	case <-s.done:
		c.Close()
	case <-s.ctx.Done():
		c.Close()
	}
}

// Accept returns the next 9P connection.
func (s *splitListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done: // acceptErr is set, if ever, before done closes
		if s.acceptErr != nil {
			return nil, s.acceptErr
		}
		return nil, net.ErrClosed
	}
}

// Close closes the listener.
func (s *splitListener) Close() error {
	err := s.Listener.Close()
	s.once.Do(func() { close(s.done) })
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// bufferedConn is a net.Conn whose reads come first from what was peeked.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// NetConn returns the connection c reads (see ninep.TicketOf).
func (c *bufferedConn) NetConn() net.Conn { return c.Conn }
