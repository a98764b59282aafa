package devices

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"

	"9fans.net/go/plan9"
	"golang.org/x/sys/unix"
)

// The kernel's side of a device's connection, under its 9P client
// (9fans.net/go/plan9/client): what bounds the messages a device sends,
// and what makes the end of the connection end every call waiting on it.

// maxFrame is the largest 9P message the kernel reads from a device: the
// msize its client proposes (9fans.net/go/plan9/client); the client
// itself would allocate whatever size a message claims.
const maxFrame = 128 << 10

// lostText is the Rerror the kernel's client reads for each of its
// requests a lost connection left unanswered (an errno's text at its end
// makes it EIO to a vfs caller: ninep.RemoteErrno).
const lostText = "the device's connection was lost: input/output error"

// deviceConn is a device's connection as the kernel's 9P client reads and
// writes it.
//
//   - A message that claims more than maxFrame bytes (or fewer than a
//     header) fails the connection at its header, before anything is
//     allocated for it.
//   - The first failure of a read or a write is reported to lost, once.
//   - When the connection fails, every request the client sent and has
//     no reply to is answered with an Rerror (lostText), and so is every
//     request sent after: the client wakes only the one caller reading
//     the connection when it fails, and the others, each waiting for its
//     reply, would otherwise wait for ever. Only when none is left
//     unanswered does a read return the failure, and writes fail from
//     then on (nobody reads any more). The client reads one message at a
//     time, so each message is read whole before any of it is returned:
//     a failure never cuts one in two.
type deviceConn struct {
	net.Conn
	lost func(error) // told the first failure; may be nil

	lostOnce sync.Once

	// The reading side: the client reads in one goroutine at a time.
	msg []byte // the message being returned
	off int    // bytes of msg returned
	hdr [4]byte
	buf []byte        // maxFrame bytes, for the messages read
	br  *bufio.Reader // the connection's reads (several messages a syscall)

	mu      sync.Mutex
	waiting map[uint16]bool // tags sent and not answered
	failed  error           // why the connection failed; then replies are made up
	ended   bool            // the failure was returned: writes fail
}

// newDeviceConn wraps c (see deviceConn).
func newDeviceConn(c net.Conn, lost func(error)) *deviceConn {
	return &deviceConn{Conn: c, lost: lost, waiting: map[uint16]bool{}, br: bufio.NewReaderSize(c, 64<<10)}
}

// fail records the connection's failure, once, and tells lost.
func (c *deviceConn) fail(err error) {
	c.mu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	c.mu.Unlock()
	c.lostOnce.Do(func() {
		if c.lost != nil {
			c.lost(err)
		}
	})
}

// Write sends one message (the client writes each in one call). Its tag
// is recorded before it is sent, so that a made-up reply can answer it.
// After a failure nothing is sent: the write succeeds while replies are
// being made up (its own is made up too), and fails once the failure has
// been read.
func (c *deviceConn) Write(p []byte) (int, error) {
	tag, tagged := msgTag(p)
	c.mu.Lock()
	if c.ended {
		err := c.failed
		c.mu.Unlock()
		return 0, err
	}
	if tagged {
		c.waiting[tag] = true
	}
	failed := c.failed != nil
	c.mu.Unlock()
	if failed {
		return len(p), nil
	}
	if _, err := c.Conn.Write(p); err != nil {
		// The reader sees the failure (the connection is closed) and
		// answers this request with the others.
		c.fail(fmt.Errorf("write: %w", err))
		c.Conn.Close()
	}
	return len(p), nil
}

// msgTag is the tag of the 9P message p, if it has one (a Tversion's is
// NOTAG).
func msgTag(p []byte) (uint16, bool) {
	if len(p) < 7 {
		return 0, false
	}
	tag := binary.LittleEndian.Uint16(p[5:7])
	return tag, tag != plan9.NOTAG
}

// Read returns the next message, read whole, or a made-up reply.
func (c *deviceConn) Read(p []byte) (int, error) {
	if c.off < len(c.msg) {
		n := copy(p, c.msg[c.off:])
		c.off += n
		return n, nil
	}
	c.mu.Lock()
	failed := c.failed
	c.mu.Unlock()
	if failed == nil {
		if err := c.readMsg(); err != nil {
			c.fail(err)
		} else {
			n := copy(p, c.msg)
			c.off = n
			return n, nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for tag := range c.waiting {
		delete(c.waiting, tag)
		c.msg, c.off = lostReply(tag), 0
		n := copy(p, c.msg)
		c.off = n
		return n, nil
	}
	c.ended = true
	return 0, c.failed
}

// readMsg reads the next message whole into c.msg and forgets its tag.
func (c *deviceConn) readMsg() error {
	if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(c.hdr[:])
	if n < 7 || n > maxFrame {
		return fmt.Errorf("the device sent a 9P message of %d bytes (at most %d)", n, maxFrame)
	}
	if c.buf == nil {
		c.buf = make([]byte, maxFrame)
	}
	c.msg = c.buf[:n]
	copy(c.msg, c.hdr[:])
	if _, err := io.ReadFull(c.br, c.msg[4:]); err != nil {
		return err
	}
	if tag, ok := msgTag(c.msg); ok {
		c.mu.Lock()
		delete(c.waiting, tag)
		c.mu.Unlock()
	}
	c.off = 0
	return nil
}

// lostReply is the Rerror of tag that says the connection was lost.
func lostReply(tag uint16) []byte {
	b, _ := (&plan9.Fcall{Type: plan9.Rerror, Tag: tag, Ename: lostText}).Bytes()
	return b
}

// hangup returns a channel closed when the peer of c hangs up (or the
// connection fails), seen without reading c: the 9P client reads it only
// while it waits for a reply, so a device that dies between calls would
// otherwise go unnoticed until the next call or ping. It stops watching
// when done closes. A conn that is not a socket is never seen to hang up.
func hangup(c net.Conn, done <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	// The socket under the buffering, the gate's connection and TLS.
	for range 8 {
		if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
			c = nc.NetConn()
			continue
		}
		break
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return out
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return out
	}
	fd := -1
	rc.Control(func(f uintptr) { fd, _ = unix.Dup(int(f)) })
	if fd < 0 {
		return out
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		for {
			select {
			case <-done:
				return
			default:
			}
			n, err := unix.Poll(fds, 500)
			if err == unix.EINTR || n == 0 {
				continue
			}
			if err != nil || fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				close(out)
				return
			}
		}
	}()
	return out
}
