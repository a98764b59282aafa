// Package telemetry observes a kernel for operators: Prometheus metrics
// (/metrics on the daemon's HTTP listener) and OpenTelemetry traces
// (exported over OTLP HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set). It
// sees every syscall through the dispatcher's Instrument and the rooms'
// work through the signal bus; it changes nothing. docs/operations.md
// lists its metrics and span attributes.
package telemetry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Options configure New.
type Options struct {
	// Version is the daemon's build, on its spans' resource.
	Version string
	// SpanExporter, if set, receives the spans (tests: an in-memory
	// exporter); else spans go over OTLP HTTP when
	// OTEL_EXPORTER_OTLP_ENDPOINT is set, and nowhere otherwise.
	SpanExporter sdktrace.SpanExporter
	// Logger receives the exporter's failures.
	Logger *slog.Logger
}

// Telemetry is the metrics and traces of one kernel. Close stops its
// exporter.
type Telemetry struct {
	k   *kernel.Kernel
	reg *prometheus.Registry
	log *slog.Logger

	syscalls    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	commits     prometheus.Histogram
	commitErrs  prometheus.Counter
	runsStarted prometheus.Counter
	runsEnded   *prometheus.CounterVec
	runsActive  prometheus.Gauge
	modelCalls  *prometheus.CounterVec
	tokens      *prometheus.CounterVec
	cost        *prometheus.CounterVec
	unpriced    *prometheus.CounterVec
	modelTime   *prometheus.HistogramVec
	toolCalls   *prometheus.CounterVec
	approvals   prometheus.Counter
	schedRuns   *prometheus.CounterVec
	schedLate   prometheus.Histogram
	ninep, fuse *requestCounter

	tp     *sdktrace.TracerProvider // nil: tracing off
	tracer trace.Tracer

	mu   sync.Mutex             // guards runs
	runs map[string]runInFlight // by run id, for run spans

	calls sync.Map // syscall name -> *callHandles
}

// callHandles are a syscall's metric children, looked up once, and
// whether its calls get spans (every syscall but the reads and data
// transfers, abi.Audited: a span per stat would drown the traces).
type callHandles struct {
	ok      prometheus.Counter
	latency prometheus.Observer
	spans   bool
}

func (t *Telemetry) handles(name string) *callHandles {
	if h, ok := t.calls.Load(name); ok {
		return h.(*callHandles)
	}
	h := &callHandles{ok: t.syscalls.WithLabelValues(name, "200"), latency: t.latency.WithLabelValues(name)}
	if d := t.k.Desc(name); d != nil {
		h.spans = abi.Audited(d, false)
	}
	v, _ := t.calls.LoadOrStore(name, h)
	return v.(*callHandles)
}

// runInFlight is a run whose span is not ended yet.
type runInFlight struct {
	start time.Time
	pid   string
	trace string
}

// maxRunsInFlight bounds the runs remembered for their spans.
const maxRunsInFlight = 10000

// New makes the telemetry of k and starts observing it: SetInstrument
// (every syscall), Store.OnCommit (commit latency) and the signal bus
// (runs, model calls, tool calls, approvals, schedules).
func New(k *kernel.Kernel, o Options) (*Telemetry, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	t := &Telemetry{k: k, reg: prometheus.NewRegistry(), log: o.Logger, runs: map[string]runInFlight{}}
	f := func(c prometheus.Collector) { t.reg.MustRegister(c) }
	t.syscalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_syscalls_total",
		Help: "Syscalls made through the dispatcher, by name and result code."}, []string{"syscall", "code"})
	t.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gsv_syscall_duration_seconds",
		Help: "Time from a syscall's dispatch to its return.", Buckets: prometheus.ExponentialBuckets(20e-6, 4, 10)}, []string{"syscall"})
	t.commits = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gsv_store_commit_duration_seconds",
		Help: "Time a store commit (a group of transactions) took.", Buckets: prometheus.ExponentialBuckets(50e-6, 4, 9)})
	t.commitErrs = prometheus.NewCounter(prometheus.CounterOpts{Name: "gsv_store_commit_errors_total", Help: "Store commits that failed."})
	t.runsStarted = prometheus.NewCounter(prometheus.CounterOpts{Name: "gsv_runs_started_total", Help: "Agent runs started."})
	t.runsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_runs_finished_total",
		Help: "Agent runs finished, by final state."}, []string{"state"})
	t.runsActive = prometheus.NewGauge(prometheus.GaugeOpts{Name: "gsv_runs_active", Help: "Agent runs started and not finished."})
	t.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_model_calls_total",
		Help: "Model calls, by provider and model."}, []string{"provider", "model"})
	t.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_model_tokens_total",
		Help: "Model tokens, by provider, model and direction (input, output)."}, []string{"provider", "model", "direction"})
	t.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_model_cost_usd_total",
		Help: "Dollars spent on model calls whose price is known, by provider and model."}, []string{"provider", "model"})
	t.unpriced = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_model_unpriced_calls_total",
		Help: "Model calls whose price is unknown (not counted in gsv_model_cost_usd_total)."}, []string{"provider", "model"})
	t.modelTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gsv_model_call_duration_seconds",
		Help: "Time a model call took.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 10)}, []string{"provider", "model"})
	t.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_tool_calls_total",
		Help: "Agent tool calls finished, by tool and result (ok, error)."}, []string{"tool", "result"})
	t.approvals = prometheus.NewCounter(prometheus.CounterOpts{Name: "gsv_approvals_requested_total",
		Help: "Human approvals (HIL) requested by runs."})
	t.schedRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gsv_schedule_runs_total",
		Help: "Schedule runs finished, by status."}, []string{"status"})
	t.schedLate = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gsv_schedule_lateness_seconds",
		Help: "How long after its due time a schedule's run started (runs the scheduler fired).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)})
	t.ninep = newRequestCounter("gsv_9p_requests_total", "9P requests answered, by message type (op) and result (ok, error).")
	t.fuse = newRequestCounter("gsv_fuse_requests_total", "FUSE requests answered, by operation (op) and result (ok, error).")
	for _, c := range []prometheus.Collector{t.syscalls, t.latency, t.commits, t.commitErrs, t.runsStarted, t.runsEnded,
		t.runsActive, t.modelCalls, t.tokens, t.cost, t.unpriced, t.modelTime, t.toolCalls, t.approvals, t.schedRuns,
		t.schedLate, t.ninep.vec, t.fuse.vec, newStatusCollector(k),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&devicesCollector{k: k, desc: prometheus.NewDesc("gsv_devices", "Registered devices, by whether they are online.", []string{"online"}, nil)},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gsv_uptime_seconds", Help: "Seconds since the kernel opened."},
			func() float64 { return k.Uptime().Seconds() }),
	} {
		f(c)
	}
	if err := t.startTracing(o); err != nil {
		return nil, err
	}
	k.Store.OnCommit(func(d time.Duration, err error) {
		t.commits.Observe(d.Seconds())
		if err != nil {
			t.commitErrs.Inc()
		}
	})
	k.Observe(t.observe)
	k.SetInstrument(t.instrument)
	return t, nil
}

// startTracing makes the tracer provider when spans have somewhere to go.
func (t *Telemetry) startTracing(o Options) error {
	exp := o.SpanExporter
	if exp == nil {
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil
		}
		var err error
		if exp, err = otlptracehttp.New(context.Background()); err != nil {
			return err
		}
	}
	res := resource.NewSchemaless(attribute.String("service.name", "gsvfs"), attribute.String("service.version", o.Version))
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.tracer = t.tp.Tracer("gsvfs.dev/gsvfs")
	return nil
}

// Handler serves the metrics in the Prometheus text format (/metrics).
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{ErrorLog: nil})
}

// Registry returns the registry of the metrics (tests gather it).
func (t *Telemetry) Registry() *prometheus.Registry { return t.reg }

// Close stops observing and flushes and stops the span exporter.
func (t *Telemetry) Close(ctx context.Context) error {
	t.k.SetInstrument(nil)
	t.k.Store.OnCommit(nil)
	if t.tp != nil {
		return t.tp.Shutdown(ctx)
	}
	return nil
}

// Flush exports the spans ended so far (tests).
func (t *Telemetry) Flush(ctx context.Context) error {
	if t.tp != nil {
		return t.tp.ForceFlush(ctx)
	}
	return nil
}

// instrument is the kernel's Instrument: a syscall's count, latency and
// span (in the kernel trace the call carries).
func (t *Telemetry) instrument(ctx context.Context, c *kernel.Caller, name string) (context.Context, func(error)) {
	start := time.Now()
	h := t.handles(name)
	var span trace.Span
	if t.tracer != nil && h.spans {
		ctx = inKernelTrace(ctx)
		attrs := []attribute.KeyValue{attribute.String("gsv.syscall", name)}
		if c != nil && c.Identity != nil {
			attrs = append(attrs, attribute.Int64("gsv.uid", int64(c.Uid)), attribute.String("gsv.role", c.Role))
			if c.Pid != "" {
				attrs = append(attrs, attribute.String("gsv.pid", c.Pid))
			}
		}
		ctx, span = t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
	}
	return ctx, func(err error) {
		code := 200
		if err != nil {
			code = abi.Code(err)
		}
		if code == 200 {
			h.ok.Inc()
		} else {
			t.syscalls.WithLabelValues(name, strconv.Itoa(code)).Inc()
		}
		h.latency.Observe(time.Since(start).Seconds())
		if span != nil {
			span.SetAttributes(attribute.Int("gsv.code", code))
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}
	}
}

// inKernelTrace returns ctx with a span context in the kernel trace ctx
// carries, when it has no span yet: the spans of one trace share the
// kernel's trace id, so the audit records, the event lines and the spans
// name one trace.
func inKernelTrace(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	tid, ok := traceID(kernel.TraceOf(ctx))
	if !ok {
		return ctx
	}
	var sid trace.SpanID
	rand.Read(sid[:])
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
}

// traceID parses a kernel trace id (32 hex digits).
func traceID(s string) (trace.TraceID, bool) {
	var id trace.TraceID
	if len(s) != 32 {
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, false
	}
	return id, id.IsValid()
}
