package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// Conn is one connection to the kernel, attached as the bridge's service
// token: Call makes a syscall (a request frame on /sys/rpc), Done is
// closed when the connection ends, Close ends it. An error the kernel
// answered is a *KernelError; any other is the connection's.
type Conn interface {
	Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
	Done() <-chan struct{}
	Close() error
}

// KernelError is a syscall's failure as the kernel answered it: Code is
// the contract's code (400, 403, 404, ...).
type KernelError struct {
	Code    int
	Message string
}

func (e *KernelError) Error() string { return e.Message }

// refusedForGood reports whether the kernel's refusal of a message is
// about the message itself (400: malformed, too long, bad media; 413),
// so no delivery of it will ever be taken. Anything else (401 and 403: a
// token revoked or unbound; 404: an account unknown; 409, 5xx: busy,
// failing) is about the bridge or the moment, and the message is
// delivered again.
func refusedForGood(e *KernelError) bool { return e.Code == 400 || e.Code == 413 }

// Options configure a Bridge.
type Options struct {
	// Adapter is the platform's connection; Account its id in the
	// kernel.
	Adapter Adapter
	Account string
	// Dial connects to the kernel.
	Dial   func(ctx context.Context) (Conn, error)
	Logger *slog.Logger
	// FirstBackoff and MaxBackoff bound the waits between reconnects,
	// to the kernel and to the platform (3 s and 5 min by default).
	FirstBackoff, MaxBackoff time.Duration
	// EditEvery is the least time between two edits of a streamed reply
	// (1 s by default).
	EditEvery time.Duration
	// DeliverFor is how long Deliver tries to hand a message to a
	// kernel that is away (2 min by default).
	DeliverFor time.Duration
}

// Bridge runs one Adapter's account against a kernel: it keeps a
// connection to the kernel (dialing again with backoff), runs the
// platform's loop (again with backoff when it fails or the kernel asks
// it to reconnect), hands what it receives to adapter.inbound, reports
// its state with adapter.state.update, and posts what the kernel's
// outbound ledger holds for it (adapter.outbox.next), reporting each
// (adapter.outbox.done). It is the Adapter's Sink.
type Bridge struct {
	o       Options
	kind    string
	session string // this process's session of the account's outbox
	log     *slog.Logger

	mu      sync.Mutex
	conn    Conn          // the live connection, nil while there is none
	up      chan struct{} // closed when a connection is made
	state   abi.AdapterAccountStatus
	dirty   chan struct{} // a state to report
	reports []abi.AdapterOutboxDoneArgs
	// posted is the platform id of each streamed reply's message, and
	// when it was last edited, by stream key.
	posted map[string]*streamed
	want   chan string // the kernel's wish for the platform connection
}

// streamed is a streamed reply posted to the platform.
type streamed struct {
	id     string
	text   string
	edited time.Time
}

var _ Sink = (*Bridge)(nil)

// newBridge makes a Bridge of o, its defaults filled.
func newBridge(o Options) *Bridge {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FirstBackoff <= 0 {
		o.FirstBackoff = 3 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.EditEvery <= 0 {
		o.EditEvery = time.Second
	}
	if o.DeliverFor <= 0 {
		o.DeliverFor = 2 * time.Minute
	}
	var b [8]byte
	rand.Read(b[:])
	return &Bridge{o: o, kind: o.Adapter.Kind(), session: hex.EncodeToString(b[:]), log: o.Logger,
		up: make(chan struct{}), dirty: make(chan struct{}, 1), posted: map[string]*streamed{},
		want: make(chan string, 1), state: abi.AdapterAccountStatus{AccountID: o.Account}}
}

// Run runs the bridge of o until ctx ends (nil).
func Run(ctx context.Context, o Options) error {
	if o.Adapter == nil || o.Account == "" || o.Dial == nil {
		return errors.New("bridge: an Adapter, an Account and a Dial are needed")
	}
	b := newBridge(o)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); b.kernelLoop(ctx) }()
	go func() { defer wg.Done(); b.platformLoop(ctx) }()
	go func() { defer wg.Done(); b.outboxLoop(ctx) }()
	wg.Wait()
	return nil
}

// backoff waits d or until ctx ends (false).
func backoff(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// kernelLoop keeps a connection to the kernel until ctx ends: it dials,
// reports the account's state, and waits for the connection's end, then
// dials again, FirstBackoff later at first and twice as long each time up
// to MaxBackoff (from FirstBackoff again after a connection that lasted
// a minute). While connected it reports each change of state.
func (b *Bridge) kernelLoop(ctx context.Context) {
	wait := b.o.FirstBackoff
	for ctx.Err() == nil {
		start := time.Now()
		c, err := b.o.Dial(ctx)
		if err == nil {
			// The first report makes the account known: the connection
			// is handed out once it is made.
			if err = b.report(ctx, c); err == nil {
				b.setConn(c)
				b.log.Info("bridge: connected to the kernel", "adapter", b.kind, "account", b.o.Account)
				err = b.serveState(ctx, c)
				b.setConn(nil)
			}
			c.Close()
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			wait = b.o.FirstBackoff
		}
		b.log.Warn("bridge: the connection to the kernel ended", "adapter", b.kind, "err", err, "retry", wait)
		if !backoff(ctx, wait) {
			return
		}
		wait = min(2*wait, b.o.MaxBackoff)
	}
}

// setConn makes c the live connection (nil: none).
func (b *Bridge) setConn(c Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conn = c
	if c != nil {
		close(b.up)
	} else {
		b.up = make(chan struct{})
	}
}

// live is the live connection, or nil and a channel closed when there
// is one.
func (b *Bridge) live() (Conn, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conn, b.up
}

// serveState reports the account's state on c at each change, until c
// ends (its error) or ctx does.
func (b *Bridge) serveState(ctx context.Context, c Conn) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.Done():
			return errors.New("the connection ended")
		case <-b.dirty:
		}
		if err := b.report(ctx, c); err != nil {
			return err
		}
	}
}

// report reports the account's state on c. A refusal is logged (it is
// the operator's to see) and ends nothing; a failure of the connection
// is returned.
func (b *Bridge) report(ctx context.Context, c Conn) error {
	b.mu.Lock()
	st := b.state
	b.mu.Unlock()
	_, err := call(ctx, c, abi.AdapterStateUpdate, &abi.AdapterStateArgs{Adapter: b.kind, AccountID: b.o.Account, Status: st})
	var ke *KernelError
	if errors.As(err, &ke) {
		b.log.Error("bridge: the kernel refused the account's state", "err", err)
		return nil
	}
	return err
}

// call makes the syscall d on c with args and decodes its result.
func call[A, R any](ctx context.Context, c Conn, d abi.Call[A, R], args *A) (R, error) {
	var zero R
	raw, err := json.Marshal(args)
	if err != nil {
		return zero, err
	}
	out, err := c.Call(ctx, d.Name, raw)
	if err != nil {
		return zero, err
	}
	var res R
	if err := json.Unmarshal(out, &res); err != nil {
		return zero, fmt.Errorf("%s: a result that does not decode: %w", d.Name, err)
	}
	return res, nil
}

// State implements Sink: it keeps st and has it reported at once (or
// when the kernel is next connected).
func (b *Bridge) State(st abi.AdapterAccountStatus) {
	st.AccountID = b.o.Account
	b.mu.Lock()
	b.state = st
	b.mu.Unlock()
	select {
	case b.dirty <- struct{}{}:
	default:
	}
}

// Deliver implements Sink: adapter.inbound, tried again while the kernel
// is away (for DeliverFor; a replay is a no-op in the kernel), then the
// kernel's answer to the chat, if it has one (a link code, a command's).
func (b *Bridge) Deliver(ctx context.Context, in abi.AdapterMessage) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.DeliverFor)
	defer cancel()
	for {
		c, up := b.live()
		if c == nil {
			select {
			case <-up:
				continue
			case <-ctx.Done():
				return fmt.Errorf("the kernel is away: %w", ctx.Err())
			}
		}
		res, err := call(ctx, c, abi.AdapterInbound, &abi.AdapterInboundArgs{Adapter: b.kind, AccountID: b.o.Account, Message: in})
		var ke *KernelError
		if errors.As(err, &ke) {
			if refusedForGood(ke) {
				// The message itself is bad: acknowledged to the
				// platform, so it is not handed out again forever.
				b.log.Warn("bridge: the kernel refused a message for good", "message", in.MessageID, "code", ke.Code, "err", ke.Message)
				return nil
			}
			return err
		}
		if err != nil {
			select { // the connection failed: wait for the next
			case <-c.Done():
			case <-ctx.Done():
				return err
			}
			continue
		}
		b.log.Debug("bridge: inbound", "message", in.MessageID, "status", res.Status, "dropped", res.DroppedReason)
		if res.Reply != nil && res.Reply.Text != "" {
			out := Outbound{Surface: in.Surface, Text: res.Reply.Text, ReplyToID: res.Reply.ReplyToID}
			if _, err := b.post(ctx, out); err != nil {
				b.log.Warn("bridge: posting the kernel's answer", "err", err)
			}
		}
		return nil
	}
}

// post sends out, split at the platform's MaxText, and returns the ids
// of what it posted; an error after a first piece was posted is
// ambiguous for the whole.
func (b *Bridge) post(ctx context.Context, out Outbound) ([]string, error) {
	pieces := Split(out.Text, b.o.Adapter.Limits().MaxText)
	if len(pieces) == 0 {
		pieces = []string{""}
	}
	var ids []string
	for i, p := range pieces {
		o := out
		o.Text = p
		if i > 0 {
			o.Media, o.Edit = nil, ""
		}
		sent, err := b.o.Adapter.Send(ctx, o)
		if err != nil {
			if i > 0 && !IsAmbiguous(err) {
				err = Ambiguous(fmt.Errorf("after %d of %d pieces: %w", i, len(pieces), err))
			}
			return ids, err
		}
		if sent.MessageID != "" {
			ids = append(ids, sent.MessageID)
		}
	}
	return ids, nil
}

// platformLoop runs the adapter until ctx ends: again after a failure,
// with backoff, and not while the kernel wants it disconnected.
func (b *Bridge) platformLoop(ctx context.Context) {
	wait := b.o.FirstBackoff
	want := "connect"
	for ctx.Err() == nil {
		if want == "disconnect" {
			b.State(abi.AdapterAccountStatus{Mode: "disconnected"})
			select {
			case want = <-b.want:
			case <-ctx.Done():
				return
			}
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- b.o.Adapter.Run(rctx, b) }()
		var err error
		stopped := false
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case w := <-b.want:
				if w == "disconnect" {
					want, stopped = w, true
					cancel()
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if stopped {
			continue
		}
		if time.Since(start) > time.Minute {
			wait = b.o.FirstBackoff
		}
		b.State(abi.AdapterAccountStatus{Error: fmt.Sprint(err)})
		b.log.Warn("bridge: the platform connection ended", "adapter", b.kind, "err", err, "retry", wait)
		if !backoff(ctx, wait) {
			return
		}
		wait = min(2*wait, b.o.MaxBackoff)
	}
}

// setWant passes the kernel's wish to the platform loop.
func (b *Bridge) setWant(w string) {
	select {
	case <-b.want:
	default:
	}
	b.want <- w
}

// outboxLoop takes the account's deliveries while the kernel is
// connected, posts each and reports it, until ctx ends.
func (b *Bridge) outboxLoop(ctx context.Context) {
	lastWant := "connect"
	for ctx.Err() == nil {
		c, up := b.live()
		if c == nil {
			select {
			case <-up:
			case <-ctx.Done():
			}
			continue
		}
		if err := b.flushReports(ctx, c); err != nil {
			b.waitEnd(ctx, c)
			continue
		}
		res, err := call(ctx, c, abi.AdapterOutboxNext, &abi.AdapterOutboxNextArgs{Adapter: b.kind, AccountID: b.o.Account,
			Session: b.session, WaitMs: 25000})
		if err != nil {
			var ke *KernelError
			if errors.As(err, &ke) {
				b.log.Warn("bridge: the kernel refused adapter.outbox.next", "err", err)
				if !backoff(ctx, b.o.FirstBackoff) {
					return
				}
				continue
			}
			b.waitEnd(ctx, c)
			continue
		}
		if res.Want != "" && res.Want != lastWant {
			lastWant = res.Want
			b.setWant(res.Want)
		}
		for _, s := range res.Streams {
			b.stream(ctx, s)
		}
		for _, d := range res.Deliveries {
			b.deliver(ctx, d)
		}
	}
}

// waitEnd waits for c to end (or ctx), so that a failed connection is
// not asked again before the next.
func (b *Bridge) waitEnd(ctx context.Context, c Conn) {
	select {
	case <-c.Done():
	case <-ctx.Done():
	}
}

// flushReports sends the reports the kernel has not taken yet.
func (b *Bridge) flushReports(ctx context.Context, c Conn) error {
	for {
		b.mu.Lock()
		if len(b.reports) == 0 {
			b.mu.Unlock()
			return nil
		}
		r := b.reports[0]
		b.mu.Unlock()
		_, err := call(ctx, c, abi.AdapterOutboxDone, &r)
		var ke *KernelError
		if err != nil && !errors.As(err, &ke) {
			return err
		}
		if err != nil {
			b.log.Warn("bridge: the kernel refused a report", "delivery", r.DeliveryID, "err", err)
		}
		b.mu.Lock()
		b.reports = b.reports[1:]
		b.mu.Unlock()
	}
}

// deliver posts a delivery and queues its report: sent, failed, or
// ambiguous (never posted again). A final reply whose stream was posted
// replaces it when it fits in one message.
func (b *Bridge) deliver(ctx context.Context, d abi.AdapterDelivery) {
	out := Outbound{Surface: d.Surface, Text: d.Text, Media: d.Media, ReplyToID: d.ReplyToID}
	b.mu.Lock()
	s := b.posted[d.StreamKey]
	delete(b.posted, d.StreamKey)
	b.mu.Unlock()
	lim := b.o.Adapter.Limits()
	if s != nil && lim.CanEdit && len(d.Text) <= lim.MaxText && len(d.Media) == 0 {
		out.Edit = s.id
	}
	ids, err := b.post(ctx, out)
	r := abi.AdapterOutboxDoneArgs{Adapter: b.kind, AccountID: b.o.Account, DeliveryID: d.DeliveryID, MessageIDs: ids}
	if err != nil {
		r.Error, r.Ambiguous = err.Error(), IsAmbiguous(err)
		b.log.Warn("bridge: a delivery failed", "delivery", d.DeliveryID, "ambiguous", r.Ambiguous, "err", err)
	}
	b.mu.Lock()
	b.reports = append(b.reports, r)
	b.mu.Unlock()
}

// stream posts or edits a reply being written, where the platform edits
// messages, at most once per EditEvery per reply.
func (b *Bridge) stream(ctx context.Context, s abi.AdapterStream) {
	lim := b.o.Adapter.Limits()
	if !lim.CanEdit || s.Text == "" || len(s.Text) > lim.MaxText {
		return
	}
	b.mu.Lock()
	p := b.posted[s.StreamKey]
	b.mu.Unlock()
	if p != nil && (time.Since(p.edited) < b.o.EditEvery || p.text == s.Text) {
		return
	}
	out := Outbound{Surface: s.Surface, Text: s.Text, ReplyToID: s.ReplyToID}
	if p != nil {
		out.Edit = p.id
	}
	sent, err := b.o.Adapter.Send(ctx, out)
	if err != nil || sent.MessageID == "" {
		return // a stream is a preview: the final reply still goes
	}
	b.mu.Lock()
	if len(b.posted) < 256 {
		b.posted[s.StreamKey] = &streamed{id: sent.MessageID, text: s.Text, edited: time.Now()}
	}
	b.mu.Unlock()
}
