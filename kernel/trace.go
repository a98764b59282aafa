package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// traceKey is the context key of the trace id.
type traceKey struct{}

// WithTrace returns ctx carrying the trace id: the syscalls made with it,
// the work they start and the records they write belong to that trace.
// An empty id returns ctx unchanged.
func WithTrace(ctx context.Context, id string) context.Context {
	if id == "" || TraceOf(ctx) == id {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, id)
}

// TraceOf returns the trace id ctx carries, or "".
func TraceOf(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}

// NewTraceID returns a fresh trace id: 32 lower-case hex digits, the
// W3C trace context's (and OpenTelemetry's) trace id form.
func NewTraceID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// EnsureTrace returns ctx with a trace id: the one it carries, or a new
// one, which starts a trace (a user's request, a schedule's tick).
func EnsureTrace(ctx context.Context) (context.Context, string) {
	if id := TraceOf(ctx); id != "" {
		return ctx, id
	}
	id := NewTraceID()
	return context.WithValue(ctx, traceKey{}, id), id
}

// Instrument observes the syscalls the dispatcher runs (metrics, spans):
// it is called before each runs, with the call's context (which carries
// its trace), and returns the context the call runs with and a func the
// dispatcher calls when the call returns, with its error (nil: success).
// It must not block.
type Instrument func(ctx context.Context, c *Caller, name string) (context.Context, func(err error))

// SetInstrument makes in observe every syscall from now on (nil: none).
func (k *Kernel) SetInstrument(in Instrument) {
	if in == nil {
		k.instr.Store(nil)
		return
	}
	k.instr.Store(&in)
}

// Uptime is how long the kernel has been open.
func (k *Kernel) Uptime() time.Duration { return time.Since(k.started) }

// TraceHandler wraps h so that every record logged with a context that
// carries a trace (slog's *Context methods) has a trace_id attribute:
// the lines of one request share it.
func TraceHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ slog.Handler }

func (t traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := TraceOf(ctx); id != "" {
		r.AddAttrs(slog.String("trace_id", id))
	}
	return t.Handler.Handle(ctx, r)
}

func (t traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{t.Handler.WithAttrs(as)}
}

func (t traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{t.Handler.WithGroup(name)}
}

// Desc returns the descriptor of the registered syscall name, or nil.
func (k *Kernel) Desc(name string) abi.Desc {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if d := k.calls[name]; d != nil {
		return d.desc
	}
	return nil
}
