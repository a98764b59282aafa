package vfs

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
)

// Want is the access an operation needs.
type Want uint8

const (
	WantRead  Want = 4
	WantWrite Want = 2
	WantExec  Want = 1
)

// WantOf returns the access that open flags need.
func WantOf(flags int) Want {
	var w Want
	switch flags & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		w = WantRead
	case os.O_WRONLY:
		w = WantWrite
	default:
		w = WantRead | WantWrite
	}
	if flags&os.O_TRUNC != 0 {
		w |= WantWrite
	}
	return w
}

// Meta supplies a synthetic node's attributes and decides who may use it.
// The tree's owner implements it; the node kinds in this package call it on
// every Attr and Open.
type Meta interface {
	Attr(ctx context.Context, cred Cred) (Attr, error)
	// Access returns nil if cred may use the node as want says, else an
	// error (normally one whose Errno is EACCES).
	Access(ctx context.Context, cred Cred, want Want) error
}

// openRead is the check at the open of a read-only file: flags must not ask
// for writing (ErrReadOnly) and cred must be allowed to read m.
func openRead(ctx context.Context, m Meta, cred Cred, flags int) error {
	if WantOf(flags)&WantWrite != 0 {
		return ErrReadOnly
	}
	return m.Access(ctx, cred, WantRead)
}

// PathIno returns a stable inode number for a synthetic path. The top bit is
// set so that it never collides with the inode numbers of real files.
func PathIno(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64() | 1<<63
}

// MaxLine is the longest line a ctl or call file accepts.
const MaxLine = 1 << 20

// MaxCallBacklog is how many requests one call handle holds that are not
// yet answered or whose answers are not yet read.
const MaxCallBacklog = 64

// ErrCallBacklog is returned by a write to a call handle that holds
// MaxCallBacklog requests: read some answers first.
var ErrCallBacklog = Errorf(syscall.EAGAIN, "too many requests: read the answers to the earlier ones first")

// ErrLineTooLong is returned for a ctl or call line over MaxLine bytes.
var ErrLineTooLong = Errorf(syscall.EINVAL, "line too long: a ctl or call line may be at most 1 MiB")

// StaticDir is a directory whose children are added by the tree's builder.
type StaticDir struct {
	Meta
	mu       sync.RWMutex
	names    []string
	children map[string]Node
}

var (
	_ Dir = (*StaticDir)(nil)
	_ Dir = (*FuncDir)(nil)
)

// NewDir returns a StaticDir with the given children.
func NewDir(m Meta, children ...DirEntry) *StaticDir {
	d := &StaticDir{Meta: m, children: map[string]Node{}}
	for _, c := range children {
		d.Add(c.Name, c.Node)
	}
	return d
}

// Add adds or replaces the child name.
func (d *StaticDir) Add(name string, n Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.children[name]; !ok {
		d.names = append(d.names, name)
		sort.Strings(d.names)
	}
	d.children[name] = n
}

// Drop removes the child name and reports whether there was one. Walks
// that come later do not find it; handles open on it are not affected.
func (d *StaticDir) Drop(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.children[name]; !ok {
		return false
	}
	delete(d.children, name)
	i := sort.SearchStrings(d.names, name)
	d.names = append(d.names[:i], d.names[i+1:]...)
	return true
}

// Lookup implements Dir.
func (d *StaticDir) Lookup(ctx context.Context, cred Cred, name string) (Node, error) {
	d.mu.RLock()
	n, ok := d.children[name]
	d.mu.RUnlock()
	if !ok {
		return nil, ErrNotExist
	}
	return n, nil
}

// ReadDir implements Dir.
func (d *StaticDir) ReadDir(ctx context.Context, cred Cred) ([]DirEntry, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]DirEntry, len(d.names))
	for i, name := range d.names {
		out[i] = DirEntry{name, d.children[name]}
	}
	return out, nil
}

// FuncDir is a directory whose children are computed on each call.
type FuncDir struct {
	Meta
	// List returns the children.
	List func(ctx context.Context, cred Cred) ([]DirEntry, error)
	// Find returns one child; if nil, Lookup searches List.
	Find func(ctx context.Context, cred Cred, name string) (Node, error)
}

// Lookup implements Dir.
func (d *FuncDir) Lookup(ctx context.Context, cred Cred, name string) (Node, error) {
	if d.Find != nil {
		return d.Find(ctx, cred, name)
	}
	ents, err := d.List(ctx, cred)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.Name == name {
			return e.Node, nil
		}
	}
	return nil, ErrNotExist
}

// ReadDir implements Dir.
func (d *FuncDir) ReadDir(ctx context.Context, cred Cred) ([]DirEntry, error) {
	return d.List(ctx, cred)
}

// View is a read-only file rendered when opened: every read of one handle
// sees the same snapshot.
type View struct {
	Meta
	Render func(ctx context.Context, cred Cred) ([]byte, error)
}

var _ File = (*View)(nil)

// Open implements File. Opening for writing fails with EACCES.
func (v *View) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, v, cred, flags); err != nil {
		return nil, err
	}
	b, err := v.Render(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &snapshot{b: b}, nil
}

// snapshot is an open View.
type snapshot struct{ b []byte }

func (s *snapshot) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if off >= int64(len(s.b)) {
		return 0, nil
	}
	return copy(p, s.b[off:]), nil
}
func (s *snapshot) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}
func (s *snapshot) Close(ctx context.Context) error { return nil }

// lines cuts the bytes written to a ctl or call handle into lines. A line
// ends only at a newline, however many writes carry it (bash's echo writes
// a long line in 4 KiB pieces, 9P clients in iounit pieces); a final line
// without one is taken by rest, when the file is closed. A line longer than
// max is refused whole: none of it is returned, and the rest of it, up to
// its newline, is discarded as it arrives.
type lines struct {
	max      int // the longest line; 0 means MaxLine
	pending  []byte
	skipping bool // discarding the rest of a line
	refusing bool // the line being discarded was refused (not dropped)
}

// piece is one thing the bytes written said, in order: a complete line, or
// a refused one.
type piece struct {
	line    []byte
	refused bool // a line over the cap; line is nil
}

// add takes the next bytes written and returns, in order, the lines they
// complete and the lines they refuse. bad reports whether any byte of p
// belongs to a refused line: the write that carries it fails with
// ErrLineTooLong. The pieces depend only on the bytes written so far, not
// on how the writes cut them.
func (l *lines) add(p []byte) (out []piece, bad bool) {
	max := l.max
	if max <= 0 {
		max = MaxLine
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if l.skipping {
			bad = bad || l.refusing
			if i < 0 {
				return out, bad
			}
			l.skipping = false
			p = p[i+1:]
			continue
		}
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if len(l.pending)+len(seg) > max {
			bad = true
			out = append(out, piece{refused: true})
			l.pending = nil
			if i < 0 {
				l.skipping, l.refusing = true, true
				return out, bad
			}
			p = p[i+1:]
			continue
		}
		if i < 0 {
			l.pending = append(l.pending, seg...)
			return out, bad
		}
		line := append(l.pending, seg...) // a fresh array, or pending's
		l.pending = nil
		out = append(out, piece{line: line})
		p = p[i+1:]
	}
	return out, bad
}

// drop discards what is pending after a write that failed part way: the
// rest of a line the write began is not run either.
func (l *lines) drop(p []byte) {
	l.pending = nil
	if len(p) > 0 && p[len(p)-1] != '\n' {
		l.skipping, l.refusing = true, false
	}
}

// rest returns and clears a final line written without a newline. The
// rest of a refused line is nothing: its refusal was the error of the
// write that carried it.
func (l *lines) rest() []byte {
	b := l.pending
	l.pending, l.skipping, l.refusing = nil, false, false
	return b
}

// turn is a lock that a waiter gives up on when its context ends: reads
// of one handle take turns. Make it with make(turn, 1).
type turn chan struct{}

// take waits for the turn until ctx ends.
func (t turn) take(ctx context.Context) error {
	select {
	case t <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// give ends a turn that take began.
func (t turn) give() { <-t }

// opCtx returns the context a command runs with: it ends when ctx ends (a
// transport abandoning the request for good) or when the handle is closed
// (handle, the client gone), whichever comes first.
func opCtx(ctx, handle context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(handle, cancel)
	return c, func() { stop(); cancel() }
}

// Ctl is a command file: each line written is one command, executed before
// the write that completes the line returns. A handle opened for reading
// and writing reads back the result (or error text) of its last command.
//
// A line ends only at its newline; a final line without one runs when the
// file is closed (close(2), 9P clunk), and its failure is then the error of
// close(2), which shells ignore: the tree's owner records failures where
// they can be read (the err view). A write fails with its first failing
// command: the lines after it in that write, and the rest of a line the
// write began, do not run. A line over MaxLine is refused whole (EINVAL on
// every write that carries part of it, and Reject is told once); the lines
// around it run as usual.
//
// A command runs with a context that ends when the write's does (9P Tflush
// or the connection's end; FUSE never cancels a write) or when the handle
// is closed.
type Ctl struct {
	Meta
	// Exec runs one command line for cred and returns its result text.
	Exec func(ctx context.Context, cred Cred, line string) (string, error)
	// Reject, if set, is told of a line the handle refused before any
	// command ran (a line over MaxLine), so the owner can record it.
	Reject func(ctx context.Context, cred Cred, err error)
}

var _ File = (*Ctl)(nil)

// Open implements File.
func (c *Ctl) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := c.Access(ctx, cred, WantOf(flags)); err != nil {
		return nil, err
	}
	h := &ctlHandle{ctl: c, cred: cred}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

type ctlHandle struct {
	ctl    *Ctl
	cred   Cred
	ctx    context.Context // ends when the handle is closed
	cancel context.CancelFunc

	mu     sync.Mutex
	lines  lines
	result []byte
	pos    int // read cursor into result; each command resets it
}

var (
	_ Flusher   = (*ctlHandle)(nil)
	_ Truncater = (*ctlHandle)(nil)
)

// Read returns the last command's result from a cursor that each command
// resets: offsets are ignored, because a shell's `exec 3<>ctl` shares one
// file position between its writes and its reads.
func (h *ctlHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := copy(p, h.result[h.pos:])
	h.pos += n
	return n, nil
}

// Write runs every line that p completes, in order (see Ctl).
func (h *ctlHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps, bad := h.lines.add(p)
	for _, pc := range ps {
		if pc.refused {
			h.result, h.pos = []byte(ErrLineTooLong.Error()+"\n"), 0
			if h.ctl.Reject != nil {
				h.ctl.Reject(ctx, h.cred, ErrLineTooLong)
			}
			continue
		}
		if err := h.run(ctx, pc.line); err != nil {
			h.lines.drop(p)
			return 0, err
		}
	}
	if bad {
		return 0, ErrLineTooLong
	}
	return len(p), nil
}

func (h *ctlHandle) run(ctx context.Context, line []byte) error {
	ctx, cancel := opCtx(ctx, h.ctx)
	defer cancel()
	res, err := h.ctl.Exec(ctx, h.cred, string(line))
	h.pos = 0
	if err != nil {
		h.result = []byte(err.Error() + "\n")
		return err
	}
	if res != "" && res[len(res)-1] != '\n' {
		res += "\n"
	}
	h.result = []byte(res)
	return nil
}

// Flush runs a final line written without a newline.
func (h *ctlHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.lines.rest(); len(l) > 0 {
		return h.run(ctx, l)
	}
	return nil
}

// Truncate accepts O_TRUNC and ftruncate (shell redirection truncates).
func (h *ctlHandle) Truncate(ctx context.Context, size int64) error { return nil }

// Close runs a final line still pending, then ends the handle's context.
func (h *ctlHandle) Close(ctx context.Context) error {
	err := h.Flush(ctx)
	h.cancel()
	return err
}

// Call is a request/response file: each request written to a handle is
// answered by one response frame that the same handle then reads. A
// request is one line (framed as for Ctl: it ends only at its newline, or
// at close; over MaxLine it is refused with EINVAL). Offsets are ignored.
//
// A write queues its requests and returns at once; each handle answers its
// requests in order, one at a time, off the write (so no caller's slow
// request holds up a write of the same file by another). A read returns at
// most one response frame: the rest of the frame being read, else the next
// answer, waiting for it while a request is unanswered (until ctx ends;
// ErrWouldBlock at once if ctx is Nonblocking); with nothing unanswered
// and nothing unread it returns 0 (end of file). So `read` in a shell loop
// gets exactly one answer per request, and `cat` gets the answers to the
// requests written before it, then EOF.
//
// Requests run with a context that ends when the handle is closed (the
// client is gone): a request whose answer nobody can read any more is
// cancelled. Interrupting a read ends the wait, never the request.
type Call struct {
	Meta
	// Do answers one request. Failures belong in the response.
	Do func(ctx context.Context, cred Cred, req []byte) []byte
}

var _ File = (*Call)(nil)

// Open implements File.
func (c *Call) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := c.Access(ctx, cred, WantOf(flags)); err != nil {
		return nil, err
	}
	h := &callHandle{call: c, cred: cred, turn: make(turn, 1), ready: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

type callHandle struct {
	call   *Call
	cred   Cred
	ctx    context.Context // the requests' context: ends when the handle is closed
	cancel context.CancelFunc
	turn   turn // serialises reads
	worker sync.WaitGroup

	mu      sync.Mutex
	lines   lines
	queue   [][]byte      // requests not yet started
	working bool          // the worker goroutine is running
	unanswd int           // requests written and not yet answered
	answers [][]byte      // responses not yet read in full, in order
	pos     int           // read cursor into answers[0]
	ready   chan struct{} // closed (and replaced) when an answer arrives
	closed  bool
}

var (
	_ Flusher   = (*callHandle)(nil)
	_ Truncater = (*callHandle)(nil)
)

// Read returns at most one response frame (see Call).
func (h *callHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.turn.take(ctx); err != nil {
		return 0, err
	}
	defer h.turn.give()
	for {
		h.mu.Lock()
		if len(h.answers) > 0 {
			a := h.answers[0]
			n := copy(p, a[h.pos:])
			h.pos += n
			if h.pos == len(a) {
				h.answers[0] = nil
				h.answers, h.pos = h.answers[1:], 0
			}
			h.mu.Unlock()
			return n, nil
		}
		if h.unanswd == 0 {
			h.mu.Unlock()
			return 0, nil
		}
		ready := h.ready
		h.mu.Unlock()
		if Nonblocking(ctx) {
			return 0, ErrWouldBlock
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Write queues the requests p completes and returns. A handle holding
// MaxCallBacklog requests unanswered or unread refuses the write whole
// (ErrCallBacklog): a client that never reads cannot grow the daemon.
func (h *callHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unanswd+len(h.answers) >= MaxCallBacklog {
		return 0, ErrCallBacklog
	}
	ps, bad := h.lines.add(p)
	for _, pc := range ps {
		if !pc.refused {
			h.queueLocked(pc.line)
		}
	}
	if bad {
		return 0, ErrLineTooLong
	}
	return len(p), nil
}

// queueLocked queues a request and starts the handle's worker if it is not
// running. Blank lines are no requests.
func (h *callHandle) queueLocked(req []byte) {
	if len(bytes.TrimSpace(req)) == 0 || h.closed {
		return
	}
	h.queue = append(h.queue, req)
	h.unanswd++
	if !h.working {
		h.working = true
		h.worker.Add(1)
		go h.work()
	}
}

// work answers the queued requests in order, then ends; Close waits for it.
func (h *callHandle) work() {
	defer h.worker.Done()
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.working = false
			h.mu.Unlock()
			return
		}
		req := h.queue[0]
		h.queue[0] = nil
		h.queue = h.queue[1:]
		h.mu.Unlock()
		resp := h.call.Do(h.ctx, h.cred, req)
		if len(resp) == 0 || resp[len(resp)-1] != '\n' {
			resp = append(resp, '\n')
		}
		h.mu.Lock()
		h.answers = append(h.answers, resp)
		h.unanswd--
		close(h.ready)
		h.ready = make(chan struct{})
		h.mu.Unlock()
	}
}

// Flush queues a final request written without a newline.
func (h *callHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.lines.rest(); len(l) > 0 {
		h.queueLocked(l)
	}
	return nil
}

func (h *callHandle) Truncate(ctx context.Context, size int64) error { return nil }

// Close cancels the requests still running or queued and waits for the
// worker to end.
func (h *callHandle) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.worker.Wait()
	return nil
}

// Subscription is a stream of records, each one line of output.
type Subscription interface {
	// Next blocks until the next record or until ctx ends.
	Next(ctx context.Context) ([]byte, error)
	// Poll returns the next record if one is ready.
	Poll() ([]byte, bool)
	// Close ends the subscription.
	Close()
}

// Stream is a file whose reads block until the next record arrives. Each
// handle has its own subscription, starting at the time of the open.
//
// A read waits only for a reader that reads the file as a stream (cat):
// a handle opened with O_NOFOLLOW (tree walkers: cp -r, tar, rsync,
// grep -r) or whose own size was asked (tail, which seeks to the end) never
// waits: a read returns the records pending, else 0 (end of file); and a
// read on a non-blocking descriptor (O_NONBLOCK) that would wait fails
// with ErrWouldBlock (EAGAIN). A handle's size (Sizer) is the bytes of the
// records that have reached it, read or not, so tail -f sees it grow.
type Stream struct {
	Meta
	Subscribe func(ctx context.Context, cred Cred) (Subscription, error)
}

var _ File = (*Stream)(nil)

// Open implements File.
func (s *Stream) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, s, cred, flags); err != nil {
		return nil, err
	}
	sub, err := s.Subscribe(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &streamHandle{sub: sub, turn: make(turn, 1), noWait: flags&syscall.O_NOFOLLOW != 0}, nil
}

// maxBuffered bounds the records a handle takes from its subscription
// to report its size before they are read.
const maxBuffered = 1 << 20

type streamHandle struct {
	sub  Subscription
	turn turn // serialises reads

	mu      sync.Mutex
	left    []byte // records taken from sub, not yet read
	read    int64  // bytes returned by reads
	noWait  bool   // reads never wait (see Stream)
	waiting bool   // a read is waiting in sub.Next: only it takes records
}

var _ Sizer = (*streamHandle)(nil)

// Read returns pending records, waiting for the first one unless the
// handle or ctx says not to (see Stream). Concurrent reads of one handle
// take turns; each gives up when its own ctx ends. Offsets are ignored.
func (h *streamHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if err := h.turn.take(ctx); err != nil {
		return 0, err
	}
	defer h.turn.give()
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		h.pollLocked(len(p))
		if len(h.left) > 0 {
			n := copy(p, h.left)
			h.left = h.left[n:]
			if len(h.left) == 0 {
				h.left = nil
			}
			h.read += int64(n)
			return n, nil
		}
		if h.noWait {
			return 0, nil
		}
		if Nonblocking(ctx) {
			return 0, ErrWouldBlock
		}
		h.waiting = true
		h.mu.Unlock()
		rec, err := h.sub.Next(ctx)
		h.mu.Lock()
		h.waiting = false
		if err != nil {
			return 0, err
		}
		h.left = append(h.left, rec...)
	}
}

// pollLocked takes the records ready in the subscription until left holds
// want bytes. Records are taken in order: never while a read waits in Next.
func (h *streamHandle) pollLocked(want int) {
	for !h.waiting && len(h.left) < want {
		rec, ok := h.sub.Poll()
		if !ok {
			return
		}
		h.left = append(h.left, rec...)
	}
}

// Size implements Sizer: the bytes read so far and those pending. Asked
// through this very handle (own), it makes reads never wait: the reader
// follows the file's size.
func (h *streamHandle) Size(own bool) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if own {
		h.noWait = true
	}
	h.pollLocked(maxBuffered)
	return h.read + int64(len(h.left))
}

func (h *streamHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}

func (h *streamHandle) Close(ctx context.Context) error {
	h.sub.Close()
	return nil
}

// ModeOf is a convenience for building Attr modes.
func ModeOf(dir bool, perm fs.FileMode) fs.FileMode {
	if dir {
		return fs.ModeDir | perm
	}
	return perm
}

// Input is a write-only file whose handle collects everything written
// between open and close and delivers it as one unit (one user message)
// when the file is closed. Empty input delivers nothing. Deliver's error is
// the error of close(2) (FUSE flush) or of the 9P clunk.
type Input struct {
	Meta
	Deliver func(ctx context.Context, cred Cred, data []byte) error
	// Max is the most bytes one open may collect; 0 means MaxLine.
	Max int
}

var _ File = (*Input)(nil)

// Open implements File. Input files cannot be read.
func (in *Input) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if WantOf(flags)&WantRead != 0 {
		return nil, ErrWriteOnly
	}
	if err := in.Access(ctx, cred, WantWrite); err != nil {
		return nil, err
	}
	return &inputHandle{in: in, cred: cred}, nil
}

type inputHandle struct {
	in   *Input
	cred Cred
	mu   sync.Mutex
	buf  []byte
	err  error
}

var (
	_ Flusher   = (*inputHandle)(nil)
	_ Truncater = (*inputHandle)(nil)
)

func (h *inputHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrWriteOnly
}

// Write collects p. Offsets are ignored: the input is what was written, in
// order.
func (h *inputHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	max := h.in.Max
	if max == 0 {
		max = MaxLine
	}
	if len(h.buf)+len(p) > max {
		h.err = ErrLineTooLong
		return 0, h.err
	}
	h.buf = append(h.buf, p...)
	return len(p), nil
}

// Flush delivers what has been collected since the last delivery. A flush
// with nothing collected (a shell closes a duplicate descriptor before it
// writes) delivers nothing.
func (h *inputHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		err := h.err
		h.err, h.buf = nil, nil
		return err
	}
	if len(h.buf) == 0 {
		return nil
	}
	data := h.buf
	h.buf = nil
	return h.in.Deliver(context.WithoutCancel(ctx), h.cred, data)
}

func (h *inputHandle) Truncate(ctx context.Context, size int64) error { return nil }
func (h *inputHandle) Close(ctx context.Context) error                { return h.Flush(ctx) }

// Reader reads a rendering sequentially, in order, into p; it returns 0
// and nil at the end. It is how a Sequential view streams content that is
// too large to hold.
type Reader interface {
	Read(ctx context.Context, p []byte) (int, error)
	Close() error
}

// Sequential is a read-only view rendered as a stream when opened: each
// open gets a Reader (normally over one consistent snapshot of the state),
// and reads at increasing offsets are served from it without holding the
// whole rendering. A read at an earlier offset starts a fresh Reader and
// skips forward.
type Sequential struct {
	Meta
	Open_ func(ctx context.Context, cred Cred) (Reader, error)
}

var _ File = (*Sequential)(nil)

// Open implements File.
func (s *Sequential) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, s, cred, flags); err != nil {
		return nil, err
	}
	r, err := s.Open_(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &seqHandle{s: s, cred: cred, r: r}, nil
}

type seqHandle struct {
	s    *Sequential
	cred Cred
	mu   sync.Mutex
	r    Reader
	pos  int64  // offset of the first byte of left
	left []byte // read from r, not yet returned
	eof  bool
}

// Read serves off from the stream: bytes already read but not returned are
// kept, so a transport that re-reads the tail of a short read is served.
func (h *seqHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < h.pos {
		// Rewind: start over and skip to off.
		h.r.Close()
		r, err := h.s.Open_(ctx, h.cred)
		if err != nil {
			return 0, err
		}
		h.r, h.pos, h.left, h.eof = r, 0, nil, false
	}
	// Drop what lies before off.
	for h.pos+int64(len(h.left)) <= off && !h.eof {
		h.pos += int64(len(h.left))
		h.left = h.left[:0]
		if err := h.fill(ctx, len(p)); err != nil {
			return 0, err
		}
	}
	if skip := off - h.pos; skip > 0 {
		if skip >= int64(len(h.left)) {
			return 0, nil
		}
		h.left = h.left[skip:]
		h.pos = off
	}
	for len(h.left) < len(p) && !h.eof {
		if err := h.fill(ctx, len(p)-len(h.left)); err != nil {
			return 0, err
		}
	}
	n := copy(p, h.left)
	h.left = h.left[n:]
	h.pos += int64(n)
	return n, nil
}

// fill reads more bytes from the reader (want of them, or 32 KiB if more)
// straight into the free end of left.
func (h *seqHandle) fill(ctx context.Context, want int) error {
	h.left = slices.Grow(h.left, max(want, 32<<10))
	n, err := h.r.Read(ctx, h.left[len(h.left):cap(h.left)])
	if err != nil {
		return err
	}
	if n == 0 {
		h.eof = true
		return nil
	}
	h.left = h.left[:len(h.left)+n]
	return nil
}

func (h *seqHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}

func (h *seqHandle) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.r.Close()
}

// BackingFiler is a Handle whose content is exactly a real, read-only
// file, from offset 0 to its end: reading the handle at any offset reads
// the file at that offset. A transport may let the operating system read
// the file directly instead of calling Read (the FUSE binding uses FUSE
// passthrough); Read must give the same bytes. The file belongs to the
// handle: the caller must not close it, move its offset or keep it after
// the handle is closed.
//
// The file may grow while the handle is open (its owner appends whole
// records to it), so a reader may see more than there was at open, as with
// a log being written; it never shrinks below what the owner completed.
type BackingFiler interface {
	BackingFile() *os.File
}

// Backed is a read-only synthetic file whose content is a real file the
// tree's owner keeps (a rendering cached on disk): each open asks OpenFile
// for that file, opened for reading, and the handle serves it with ReadAt
// and offers it as a BackingFiler. The identity check is the open: which
// file an open gets is decided there (a later open may get another file),
// and reads are the file's. Its size is that of the file an open would
// get now (Attr asks OpenFile), so a reader that follows the size (tail -f)
// sees what the owner adds.
type Backed struct {
	Meta
	// OpenFile returns the file to serve to cred, opened read-only; the
	// handle closes it.
	OpenFile func(ctx context.Context, cred Cred) (*os.File, error)
}

var _ File = (*Backed)(nil)

// Attr implements Node: the Meta's attributes, with the size of the file
// an open by cred would get now. A cred that may not read the file, or a
// file that cannot be had, reports the Meta's size.
func (b *Backed) Attr(ctx context.Context, cred Cred) (Attr, error) {
	a, err := b.Meta.Attr(ctx, cred)
	if err != nil || b.Meta.Access(ctx, cred, WantRead) != nil {
		return a, err
	}
	f, err := b.OpenFile(ctx, cred)
	if err != nil {
		return a, nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		a.Size = fi.Size()
	}
	return a, nil
}

// Open implements File. Opening for writing fails with EACCES.
func (b *Backed) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, b, cred, flags); err != nil {
		return nil, err
	}
	f, err := b.OpenFile(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &backedHandle{f: f}, nil
}

// backedHandle is an open Backed file.
type backedHandle struct{ f *os.File }

var _ BackingFiler = (*backedHandle)(nil)

// Read reads the file at off; the end of the file is 0, nil.
func (h *backedHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, Errorf(22 /* EINVAL */, "negative offset")
	}
	n, err := h.f.ReadAt(p, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if n > 0 {
		return n, nil
	}
	return 0, err
}

func (h *backedHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}

func (h *backedHandle) Close(ctx context.Context) error { return h.f.Close() }

// BackingFile implements BackingFiler.
func (h *backedHandle) BackingFile() *os.File { return h.f }

// Document is a readable and writable text file that stands for a piece of
// state as a whole (a crontab): it is rendered when opened and, when it has
// been written, its whole new content is applied when the file is closed.
//
// A handle sees one snapshot: the rendering at open, or nothing if opened
// with O_TRUNC. Writes change the handle's copy at their offsets (with
// O_APPEND, at its end, whatever the offset: a synthetic file reports size
// 0, so the kernel's append offset is 0), ftruncate cuts or extends it, and
// reads see those changes. At close(2) (FUSE flush, 9P clunk) a handle
// whose copy was written since the last apply gives the whole copy to
// Apply, whose error is close(2)'s. A handle opened with O_TRUNC and never
// written applies its empty copy when it is released (so `: > file`
// empties the document) but not at an earlier flush: a shell closes a
// duplicate descriptor of `cat > file` before cat writes anything.
type Document struct {
	Meta
	// Render returns the current content for cred.
	Render func(ctx context.Context, cred Cred) ([]byte, error)
	// Apply replaces the state with data. A nil Apply makes the file
	// read-only.
	Apply func(ctx context.Context, cred Cred, data []byte) error
	// Max is the largest content a handle may hold; 0 means MaxLine.
	Max int
}

var _ File = (*Document)(nil)

// ErrDocumentTooLarge is returned by a write that would make a Document
// larger than its Max.
var ErrDocumentTooLarge = Errorf(27 /* EFBIG */, "document too large")

// Open implements File.
func (d *Document) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	want := WantOf(flags)
	if want&WantWrite != 0 && d.Apply == nil {
		return nil, ErrReadOnly
	}
	if err := d.Access(ctx, cred, want); err != nil {
		return nil, err
	}
	h := &docHandle{d: d, cred: cred, write: want&WantWrite != 0, appendOnly: flags&os.O_APPEND != 0}
	if flags&os.O_TRUNC != 0 {
		h.truncated = true
		return h, nil
	}
	b, err := d.Render(ctx, cred)
	if err != nil {
		return nil, err
	}
	h.buf = b
	return h, nil
}

type docHandle struct {
	d          *Document
	cred       Cred
	write      bool
	appendOnly bool

	mu        sync.Mutex
	buf       []byte
	dirty     bool  // written since the last apply
	truncated bool  // opened with O_TRUNC and not applied yet
	err       error // a write failed: the content is incomplete, never apply it
}

var (
	_ Flusher   = (*docHandle)(nil)
	_ Truncater = (*docHandle)(nil)
)

func (h *docHandle) max() int {
	if h.d.Max > 0 {
		return h.d.Max
	}
	return MaxLine
}

func (h *docHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < 0 || off >= int64(len(h.buf)) {
		return 0, nil
	}
	return copy(p, h.buf[off:]), nil
}

// Write changes the handle's copy at off (at its end with O_APPEND).
func (h *docHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if !h.write {
		return 0, ErrReadOnly
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.appendOnly {
		off = int64(len(h.buf))
	}
	if off < 0 {
		return 0, Errorf(22 /* EINVAL */, "negative offset")
	}
	end := off + int64(len(p))
	if end > int64(h.max()) {
		h.err = ErrDocumentTooLarge
		return 0, h.err
	}
	if end > int64(len(h.buf)) {
		h.buf = append(h.buf, make([]byte, int(end)-len(h.buf))...)
	}
	copy(h.buf[off:], p)
	h.dirty = true
	return len(p), nil
}

// Truncate cuts or extends the handle's copy.
func (h *docHandle) Truncate(ctx context.Context, size int64) error {
	if !h.write {
		return ErrReadOnly
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if size < 0 {
		return Errorf(22 /* EINVAL */, "negative size")
	}
	if size > int64(h.max()) {
		return ErrDocumentTooLarge
	}
	if size <= int64(len(h.buf)) {
		h.buf = h.buf[:size]
	} else {
		h.buf = append(h.buf, make([]byte, int(size)-len(h.buf))...)
	}
	h.dirty = true
	return nil
}

// apply gives the copy to Apply if it changed (or, at release, if it was
// truncated at open and never applied). A failed write is reported once
// instead, and nothing is applied.
func (h *docHandle) apply(ctx context.Context, release bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		err := h.err
		h.err, h.dirty, h.truncated = nil, false, false
		return err
	}
	if !h.dirty && !(release && h.truncated) {
		return nil
	}
	h.dirty, h.truncated = false, false
	data := append([]byte(nil), h.buf...)
	return h.d.Apply(context.WithoutCancel(ctx), h.cred, data)
}

// Flush applies what was written since the last apply.
func (h *docHandle) Flush(ctx context.Context) error { return h.apply(ctx, false) }

// Close applies what is still pending.
func (h *docHandle) Close(ctx context.Context) error { return h.apply(ctx, true) }
