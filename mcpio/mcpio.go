// Package mcpio is a newline-delimited JSON-RPC transport for the MCP
// SDK (github.com/modelcontextprotocol/go-sdk): what the SDK's
// IOTransport and StdioTransport carry (one message a line, over a
// reader and a writer), for less. The SDK's own reads a message with a
// streaming JSON decoder and then tries it as a batch (an array) before
// it decodes it as one message; here a message is a line, cut at its
// newline, decoded once (a batch, a line that begins with '[', is still
// taken). gsvfs's stdio MCP connections use it: the MCP room's client of
// a stdio server, and `gsvfs mcp serve`.
package mcpio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxLine is the longest line (one message) read by default: the
// SDK's own limit.
const DefaultMaxLine = mcp.DefaultMaxLineLength

// Transport is an mcp.Transport over Reader and Writer, each message one
// line. Its connection's Close closes both.
type Transport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxLine bounds a line read (0: DefaultMaxLine): a longer one ends
	// the connection with an error.
	MaxLine int
}

var _ mcp.Transport = (*Transport)(nil)

// Connect implements mcp.Transport.
func (t *Transport) Connect(context.Context) (mcp.Connection, error) {
	max := t.MaxLine
	if max <= 0 {
		max = DefaultMaxLine
	}
	c := &conn{r: t.Reader, w: t.Writer, incoming: make(chan line), closed: make(chan struct{})}
	go c.reader(bufio.NewReaderSize(t.Reader, 64<<10), max)
	return c, nil
}

// line is one line read, or the read's end.
type line struct {
	b   []byte
	err error
}

// conn is a connection of a Transport.
type conn struct {
	r io.ReadCloser
	w io.WriteCloser

	incoming chan line     // the reader's lines
	closed   chan struct{} // closed by Close
	queue    []jsonrpc.Message

	wmu  sync.Mutex // serialises writes
	once sync.Once
	cerr error
}

// errLineTooLong ends a connection whose peer sent a line over its limit.
var errLineTooLong = errors.New("an incoming JSON-RPC message is over the line limit")

// reader reads lines until the reader fails or the connection closes.
// It is the connection's, and ends with it (Close closes the reader,
// which ends a read waiting on a pipe).
func (c *conn) reader(br *bufio.Reader, max int) {
	for {
		b, err := readLine(br, max)
		if err == nil && len(bytes.TrimSpace(b)) == 0 {
			continue // a blank line is no message
		}
		select {
		case c.incoming <- line{b: b, err: err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line, without its newline, of at most max bytes.
// A last line without a newline is a line; then io.EOF.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(out)+len(frag) > max+1 {
			return nil, errLineTooLong
		}
		if err == nil {
			if out == nil {
				out = make([]byte, len(frag)-1)
				copy(out, frag)
				return out, nil
			}
			return append(out, frag[:len(frag)-1]...), nil
		}
		out = append(out, frag...)
		if err != bufio.ErrBufferFull {
			if len(bytes.TrimSpace(out)) > 0 && err == io.EOF {
				return out, nil
			}
			return nil, err
		}
	}
}

// Read implements mcp.Connection: the next message.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		return m, nil
	}
	var l line
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case l = <-c.incoming:
	}
	if l.err != nil {
		return nil, l.err
	}
	b := bytes.TrimSpace(l.b)
	if b[0] != '[' {
		m, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return nil, badMessage(b, err)
		}
		return m, nil
	}
	// A batch: its messages one after another.
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("empty batch")
	}
	for _, raw := range raws {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil, badMessage(raw, err)
		}
		c.queue = append(c.queue, m)
	}
	m := c.queue[0]
	c.queue = c.queue[1:]
	return m, nil
}

// badMessage is the error of a line that did not decode: encoding/json's
// own (as the SDK's transport reports it: "invalid character ..."), for
// a line that is not JSON; else err, the message's.
func badMessage(b []byte, err error) error {
	var v any
	if jerr := json.Unmarshal(b, &v); jerr != nil {
		return jerr
	}
	return err
}

// Write implements mcp.Connection: msg as one line.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(b)
	return err
}

// Close implements mcp.Connection: the reader and the writer are closed
// (once).
func (c *conn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		rerr := c.r.Close()
		werr := c.w.Close()
		c.cerr = errors.Join(rerr, werr)
	})
	return c.cerr
}

// SessionID implements mcp.Connection: a stream has none.
func (c *conn) SessionID() string { return "" }
