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
// writes it, and the call channel beside it (channel.go).
//
//   - A reader goroutine reads the connection all the time, one whole
//     message at a time: a message that claims more than maxFrame bytes
//     (or fewer than a header) fails the connection at its header, before
//     anything is allocated for it. A reply to one of the 9P client's
//     requests waits for the client's next Read (the client reads in one
//     goroutine at a time); a reply to one of the call channel's own
//     messages (its tags, chanTagFirst and up) is handed to the channel
//     there and then, in the reader goroutine; a reply that answers no
//     request sent fails the connection.
//   - Writes never interleave: the client's messages (each in one Write)
//     and the channel's (writeRaw) are written whole, one at a time.
//   - The first failure of a read or a write is reported to lost, once.
//   - When the connection fails, every request the client sent and has
//     no reply to is answered with an Rerror (lostText), and so is every
//     request sent after: the client wakes only the one caller reading
//     the connection when it fails, and the others, each waiting for its
//     reply, would otherwise wait for ever. Only when none is left
//     unanswered does a Read return the failure, and writes fail from
//     then on (nobody reads any more). A message is read whole before
//     any of it is returned: a failure never cuts one in two. The
//     channel is told the failure (rawPeer.lost).
type deviceConn struct {
	net.Conn
	lost func(error) // told the first failure; may be nil

	lostOnce sync.Once
	wmu      sync.Mutex    // serialises writes
	done     chan struct{} // closed when the reader goroutine ends

	// The client's side of the reading: one goroutine at a time.
	msg  []byte  // the message being returned
	off  int     // bytes of msg returned
	pool *[]byte // msg's buffer, if it is one of msgBufs

	// The reader goroutine's.
	hdr [7]byte
	buf []byte        // maxFrame bytes, for the channel's replies
	br  *bufio.Reader // the connection's reads (several messages a syscall)

	mu        sync.Mutex
	waiting   map[uint16]bool // the client's tags sent and not answered
	inbox     []inMsg         // replies the client has not read yet
	more      chan struct{}   // (buffered) the inbox grew, or the connection failed
	peer      rawPeer         // the call channel, once it is set
	opened    uint32          // the fid of the last Topen the client wrote
	msize     uint32          // the msize of the client's Rversion
	versioned bool            // the reply with no tag (the Rversion) was read
	failed    error           // why the connection failed; then replies are made up
	ended     bool            // the failure was returned: writes fail
}

// inMsg is a reply read for the client: a message, in one of msgBufs if
// pool is not nil.
type inMsg struct {
	b    []byte
	pool *[]byte
}

// msgBufs are the buffers of the large replies read for the client
// (a file's data), given back once it has read them.
var msgBufs = sync.Pool{New: func() any { b := make([]byte, maxFrame); return &b }}

// pooledAfter is the size past which a reply is read into one of msgBufs.
const pooledAfter = 4 << 10

// rawPeer is the call channel as its connection's reader sees it.
type rawPeer interface {
	// reply takes a reply to one of the channel's messages, valid only
	// during the call (read by the reader goroutine); an error fails
	// the connection.
	reply(msg []byte) error
	// lost is told the connection's failure, once.
	lost(err error)
}

// The tags of the call channel's own messages (channel.go): the kernel's
// 9P client never uses them (deviceConn fails a connection whose client
// would: it would need 65,520 requests in flight at once).
const (
	chanTagFirst uint16 = 0xfff0
	chanTagWrite uint16 = 0xfffd // its Twrite in flight
	chanTagRead  uint16 = 0xfffe // its Tread in flight
)

// newDeviceConn wraps c (see deviceConn) and starts its reader.
func newDeviceConn(c net.Conn, lost func(error)) *deviceConn {
	dc := &deviceConn{Conn: c, lost: lost, waiting: map[uint16]bool{}, br: bufio.NewReaderSize(c, 64<<10),
		more: make(chan struct{}, 1), done: make(chan struct{})}
	go dc.reader()
	return dc
}

// wait waits for the reader to end: it ends when the connection does
// (close it first).
func (c *deviceConn) wait() { <-c.done }

// fail records the connection's failure, once, and tells lost.
func (c *deviceConn) fail(err error) {
	c.mu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	c.mu.Unlock()
	c.signal()
	c.lostOnce.Do(func() {
		if c.lost != nil {
			c.lost(err)
		}
	})
}

// signal wakes the client's Read.
func (c *deviceConn) signal() {
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// setPeer makes p the call channel of the connection: it is told every
// reply to its tags, and the connection's failure (at once if it has
// failed already).
func (c *deviceConn) setPeer(p rawPeer) {
	c.mu.Lock()
	c.peer = p
	failed := c.failed
	c.mu.Unlock()
	if failed != nil {
		p.lost(failed)
	}
}

// lastOpened is the fid of the last Topen the client wrote.
func (c *deviceConn) lastOpened() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened
}

// iounit is the most data a Twrite or a Tread of the session carries.
func (c *deviceConn) iounit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.msize <= plan9.IOHDRSZ {
		return 0
	}
	return int(c.msize - plan9.IOHDRSZ)
}

// Write sends one of the client's messages (it writes each in one call).
// Its tag is recorded before it is sent, so that a made-up reply can
// answer it. After a failure nothing is sent: the write succeeds while
// replies are being made up (its own is made up too), and fails once the
// failure has been read.
func (c *deviceConn) Write(p []byte) (int, error) {
	tag, tagged := msgTag(p)
	if tagged && tag >= chanTagFirst {
		err := fmt.Errorf("the 9P client used tag %d, which the call channel keeps", tag)
		c.fail(err)
		c.Conn.Close()
		return 0, err
	}
	c.mu.Lock()
	if c.ended {
		err := c.failed
		c.mu.Unlock()
		return 0, err
	}
	if tagged {
		c.waiting[tag] = true
	}
	if len(p) >= 11 && p[4] == plan9.Topen {
		c.opened = binary.LittleEndian.Uint32(p[7:11])
	}
	failed := c.failed != nil
	c.mu.Unlock()
	if failed {
		return len(p), nil
	}
	c.wmu.Lock()
	_, err := c.Conn.Write(p)
	c.wmu.Unlock()
	if err != nil {
		// The reader sees the failure (the connection is closed) and
		// answers this request with the others.
		c.fail(fmt.Errorf("write: %w", err))
		c.Conn.Close()
	}
	return len(p), nil
}

// writeRaw writes the call channel's messages b, whole, or fails (the
// connection then fails).
func (c *deviceConn) writeRaw(b []byte) error {
	c.mu.Lock()
	failed := c.failed
	c.mu.Unlock()
	if failed != nil {
		return failed
	}
	c.wmu.Lock()
	_, err := c.Conn.Write(b)
	c.wmu.Unlock()
	if err != nil {
		err = fmt.Errorf("write: %w", err)
		c.fail(err)
		c.Conn.Close()
	}
	return err
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

// Read returns the next reply to the client, read whole, or a made-up
// one.
func (c *deviceConn) Read(p []byte) (int, error) {
	if c.off < len(c.msg) {
		n := copy(p, c.msg[c.off:])
		c.off += n
		c.consumed()
		return n, nil
	}
	for {
		c.mu.Lock()
		if len(c.inbox) > 0 {
			m := c.inbox[0]
			c.inbox[0] = inMsg{}
			c.inbox = c.inbox[1:]
			c.mu.Unlock()
			c.msg, c.pool = m.b, m.pool
			n := copy(p, c.msg)
			c.off = n
			c.consumed()
			return n, nil
		}
		if c.failed != nil {
			defer c.mu.Unlock()
			for tag := range c.waiting {
				delete(c.waiting, tag)
				c.msg, c.off, c.pool = lostReply(tag), 0, nil
				n := copy(p, c.msg)
				c.off = n
				return n, nil
			}
			c.ended = true
			return 0, c.failed
		}
		c.mu.Unlock()
		<-c.more
	}
}

// consumed gives back the buffer of the message being returned once it
// has been returned whole.
func (c *deviceConn) consumed() {
	if c.off == len(c.msg) && c.pool != nil {
		msgBufs.Put(c.pool)
		c.msg, c.off, c.pool = nil, 0, nil
	}
}

// reader reads the connection until it fails (see deviceConn).
func (c *deviceConn) reader() {
	defer close(c.done)
	for {
		err := c.readMsg()
		if err == nil {
			continue
		}
		c.fail(err)
		c.mu.Lock()
		p := c.peer
		c.mu.Unlock()
		if p != nil {
			p.lost(err)
		}
		return
	}
}

// readMsg reads the next message whole and hands it on: to the channel,
// or to the client's inbox (forgetting its tag).
func (c *deviceConn) readMsg() error {
	if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(c.hdr[:])
	if n < 7 || n > maxFrame {
		return fmt.Errorf("the device sent a 9P message of %d bytes (at most %d)", n, maxFrame)
	}
	tag, tagged := msgTag(c.hdr[:])
	if tagged && tag >= chanTagFirst {
		if c.buf == nil {
			c.buf = make([]byte, maxFrame)
		}
		msg := c.buf[:n]
		copy(msg, c.hdr[:])
		if _, err := io.ReadFull(c.br, msg[len(c.hdr):]); err != nil {
			return err
		}
		c.mu.Lock()
		p := c.peer
		c.mu.Unlock()
		if p == nil {
			return fmt.Errorf("the device answered tag %d, which no request has", tag)
		}
		return p.reply(msg)
	}
	c.mu.Lock()
	known := c.waiting[tag] || !tagged && !c.versioned // the Rversion, once
	c.mu.Unlock()
	if !known {
		return fmt.Errorf("the device answered tag %d, which no request has", tag)
	}
	m := inMsg{}
	if n > pooledAfter {
		m.pool = msgBufs.Get().(*[]byte)
		m.b = (*m.pool)[:n]
	} else {
		m.b = make([]byte, n)
	}
	msg := m.b
	copy(msg, c.hdr[:])
	if _, err := io.ReadFull(c.br, msg[len(c.hdr):]); err != nil {
		return err
	}
	c.mu.Lock()
	if tagged {
		delete(c.waiting, tag)
	} else {
		c.versioned = true
		if msg[4] == plan9.Rversion && n >= 11 {
			c.msize = binary.LittleEndian.Uint32(msg[7:11])
		}
	}
	c.inbox = append(c.inbox, m)
	c.mu.Unlock()
	c.signal()
	return nil
}

// lostReply is the Rerror of tag that says the connection was lost.
func lostReply(tag uint16) []byte {
	b, _ := (&plan9.Fcall{Type: plan9.Rerror, Tag: tag, Ename: lostText}).Bytes()
	return b
}

// hangup returns a channel closed when the peer of c hangs up (or the
// connection fails), seen without reading c: a second watch beside the
// connection's reader (deviceConn), so that a device that dies between
// calls is never left unnoticed until the next call or ping. It stops watching
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
