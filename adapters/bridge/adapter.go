package bridge

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"gsvfs.dev/gsvfs/abi"
)

// Adapter is one chat platform's connection for one account. A kind
// (telegram.go, irc.go, ...) provides it; the bridge runs it, hands what
// it receives to the kernel and asks it to post what the kernel sends.
// The platform's own well-kept client library does the talking.
type Adapter interface {
	// Kind is the platform's name, lowercase ("telegram", "irc").
	Kind() string
	// Run connects and hands each message the account receives to
	// sink.Deliver, until ctx ends (it returns nil) or the connection
	// fails (it returns why). The bridge calls Run again after a
	// failure, with backoff. Run reports the account's state through
	// sink.State as it changes (connected, authenticated, errors).
	Run(ctx context.Context, sink Sink) error
	// Send posts out and returns the platform's id of the message it
	// posted (or edited). An error after which the message may or may
	// not have been posted (a timeout, an HTTP 408 or 5xx, a connection
	// lost mid-request) is wrapped by Ambiguous; the bridge reports it
	// and never retries it.
	Send(ctx context.Context, out Outbound) (Sent, error)
	// Limits is what the platform allows a message.
	Limits() Limits
}

// Sink is where an Adapter's Run hands what it receives.
type Sink interface {
	// Deliver hands in to the kernel (adapter.inbound) and returns once
	// the kernel has durably claimed its receipt, or refused it. An
	// adapter acknowledges a message to its platform (an offset, an
	// IMAP flag) only after Deliver returns nil, so a message is never
	// lost between the platform and the kernel, and a replay of it is a
	// no-op in the kernel. A message the kernel refuses for good (it is
	// malformed, too long: a 400) is logged and Deliver returns nil, so
	// it is acknowledged and not handed out again forever.
	Deliver(ctx context.Context, in abi.AdapterMessage) error
	// State reports the account's state (adapter.state.update). It does
	// not block on the kernel.
	State(st abi.AdapterAccountStatus)
}

// Outbound is one message for the platform: Text (and Media) to the
// chat Surface, as a reply to ReplyToID if set. Edit, if set, is the
// platform's id of a message this account posted, to be replaced by
// Text (a streamed reply's next state); a kind whose Limits has no
// CanEdit never gets one.
type Outbound struct {
	Surface   abi.AdapterSurface
	Text      string
	Media     []abi.MediaInput
	ReplyToID string
	Edit      string
}

// Sent is what Send posted: the platform's message id ("" when the
// platform gives none).
type Sent struct {
	MessageID string
}

// Limits is what a platform allows a message: MaxText is the longest
// text in one message (in bytes of UTF-8; the bridge splits longer text
// at a line or word boundary), CanEdit whether a posted message can be
// edited (a streamed reply is then posted once and edited), MaxMedia the
// largest attachment in bytes (0: none can be sent).
type Limits struct {
	MaxText  int
	CanEdit  bool
	MaxMedia int64
}

// Config is what a kind is made from: Account is the account's id as
// the kernel knows it (adapter.inbound's accountId); Secret is the
// platform credential read from --bot-token-file (or a password);
// BaseURL, if set, replaces the platform's API address (a self-hosted
// server, or a test's local server speaking the platform's wire format);
// Options are the kind's own settings (--opt key=value), documented in
// docs/adapters.md per kind.
type Config struct {
	Account string
	Secret  string
	BaseURL string
	Options map[string]string
}

// A Maker makes a kind's Adapter from its Config, or says what is wrong
// with the Config.
type Maker func(Config) (Adapter, error)

var (
	kindsMu sync.Mutex // guards kinds
	kinds   = map[string]Maker{}
)

// Register makes kind available to New. Each kind's file registers
// itself in its init; a duplicate kind panics.
func Register(kind string, mk Maker) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[kind]; dup {
		panic("bridge: kind registered twice: " + kind)
	}
	kinds[kind] = mk
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// New makes an Adapter of kind from cfg.
func New(kind string, cfg Config) (Adapter, error) {
	kindsMu.Lock()
	mk := kinds[kind]
	kindsMu.Unlock()
	if mk == nil {
		return nil, fmt.Errorf("no adapter kind %q (kinds: %v)", kind, Kinds())
	}
	return mk(cfg)
}

// AmbiguousError is a Send failure after which the message may or may
// not have been posted.
type AmbiguousError struct{ Err error }

func (e *AmbiguousError) Error() string { return "ambiguous: " + e.Err.Error() }
func (e *AmbiguousError) Unwrap() error { return e.Err }

// Ambiguous wraps err as an AmbiguousError (nil stays nil).
func Ambiguous(err error) error {
	if err == nil {
		return nil
	}
	return &AmbiguousError{Err: err}
}

// IsAmbiguous reports whether err is, or wraps, an AmbiguousError.
func IsAmbiguous(err error) bool {
	var a *AmbiguousError
	return errors.As(err, &a)
}
