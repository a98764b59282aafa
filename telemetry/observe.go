package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// observe is the signal bus observer: runs, model calls, tool calls,
// approvals and schedule runs. It runs with the bus locked: it only
// counts and ends spans.
func (t *Telemetry) observe(ev *kernel.Event, _ kernel.Audience) {
	switch p := ev.Payload.(type) {
	case abi.RunStarted:
		t.runsStarted.Inc()
		t.runsActive.Inc()
		t.mu.Lock()
		if len(t.runs) < maxRunsInFlight {
			t.runs[p.RunID] = runInFlight{start: time.Now(), pid: p.Pid}
		}
		t.mu.Unlock()
	case abi.RunFinished:
		t.runsEnded.WithLabelValues(p.Status).Inc()
		t.runsActive.Dec()
		t.mu.Lock()
		r, ok := t.runs[p.RunID]
		delete(t.runs, p.RunID)
		t.mu.Unlock()
		if ok && t.tracer != nil {
			t.span(r.trace, "invoke_agent "+p.Pid, r.start, time.Now(), p.Error,
				attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.id", p.Pid),
				attribute.String("gsv.run_id", p.RunID), attribute.String("gsv.run.status", p.Status),
				attribute.String("gen_ai.conversation.id", p.ConversationID))
		}
	case abi.RunUsageSignal:
		t.modelCalls.WithLabelValues(p.Provider, p.Model).Inc()
		t.tokens.WithLabelValues(p.Provider, p.Model, "input").Add(float64(p.TokensIn))
		t.tokens.WithLabelValues(p.Provider, p.Model, "output").Add(float64(p.TokensOut))
		t.modelTime.WithLabelValues(p.Provider, p.Model).Observe(float64(p.DurationMs) / 1000)
		if p.Cost != nil {
			t.cost.WithLabelValues(p.Provider, p.Model).Add(*p.Cost)
		} else {
			t.unpriced.WithLabelValues(p.Provider, p.Model).Inc()
		}
		t.mu.Lock()
		if r, ok := t.runs[p.RunID]; ok && r.trace == "" {
			r.trace = p.TraceID
			t.runs[p.RunID] = r
		}
		t.mu.Unlock()
		if t.tracer != nil {
			end := time.Now()
			t.span(p.TraceID, "chat "+p.Model, end.Add(-time.Duration(p.DurationMs)*time.Millisecond), end, "",
				attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", p.Provider),
				attribute.String("gen_ai.system", p.Provider), attribute.String("gen_ai.request.model", p.Model),
				attribute.Int64("gen_ai.usage.input_tokens", p.TokensIn), attribute.Int64("gen_ai.usage.output_tokens", p.TokensOut),
				attribute.String("gen_ai.agent.id", p.Pid), attribute.String("gsv.run_id", p.RunID))
		}
	case abi.ToolFinished:
		res := "ok"
		if p.IsError {
			res = "error"
		}
		t.toolCalls.WithLabelValues(p.ToolName, res).Inc()
	case abi.HilRequested:
		t.approvals.Inc()
	case abi.SchedRunFinished:
		t.schedRuns.WithLabelValues(p.Status).Inc()
		if p.LatenessMs != nil {
			t.schedLate.Observe(float64(*p.LatenessMs) / 1000)
		}
	}
}

// span records a finished span of the kernel trace tr (a new trace if
// tr is not one) from start to end; errText, if set, is its error.
func (t *Telemetry) span(tr, name string, start, end time.Time, errText string, attrs ...attribute.KeyValue) {
	ctx := context.Background()
	if tr != "" {
		ctx = inKernelTrace(kernel.WithTrace(ctx, tr))
	}
	_, s := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindInternal))
	if errText != "" {
		s.SetStatus(codes.Error, errText)
	}
	s.End(trace.WithTimestamp(end))
}

// devicesCollector counts the registered devices by whether they are
// online, at each scrape (sys.device.list as the kernel: a read).
type devicesCollector struct {
	k    *kernel.Kernel
	desc *prometheus.Desc
}

func (d *devicesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *devicesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := kernel.Do(ctx, d.k, d.k.KernelCaller(), abi.SysDeviceList, nil)
	if err != nil {
		return // no devices room (tests), or it failed: no sample
	}
	var on, off float64
	for _, dv := range res.Devices {
		if dv.Online {
			on++
		} else {
			off++
		}
	}
	ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, on, "true")
	ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, off, "false")
}
