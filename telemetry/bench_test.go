package telemetry

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// BenchmarkSyscallP50: the p50 latency of a syscall request frame
// (sys.whoami through kernel.Serve, as /sys/call serves it) with metrics
// and tracing configured (spans to an exporter that keeps them) vs
// without, interleaved in rounds in the same run. Target: with/without
// <= 1.05 (printed, never asserted).
func BenchmarkSyscallP50(b *testing.B) {
	e := kerneltest.Open(b)
	c := kerneltest.Caller(e.Root)
	frame := []byte(`{"id":"1","call":"sys.whoami","args":{}}`)
	ctx := context.Background()
	var tel *Telemetry
	on := func() {
		var err error
		if tel, err = New(e.K, Options{SpanExporter: tracetest.NewNoopExporter()}); err != nil {
			b.Fatal(err)
		}
	}
	off := func() {
		if tel != nil {
			tel.Close(ctx)
			tel = nil
		}
	}
	defer off()
	var with, without []time.Duration
	const round = 200
	b.ResetTimer()
	for done := 0; done < b.N; {
		for side := 0; side < 2; side++ {
			if side == 0 {
				off()
			} else {
				on()
			}
			for i := 0; i < round; i++ {
				t0 := time.Now()
				e.K.Serve(ctx, c, frame)
				d := time.Since(t0)
				if side == 0 {
					without = append(without, d)
				} else {
					with = append(with, d)
				}
			}
		}
		done += 2 * round
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	w, wo := p50(with), p50(without)
	b.ReportMetric(float64(w.Nanoseconds()), "p50-with-ns")
	b.ReportMetric(float64(wo.Nanoseconds()), "p50-without-ns")
	b.ReportMetric(float64(w)/float64(wo), "with/without")
	b.Logf("syscall p50: with metrics+tracing %v, without %v: %.3fx (target <= 1.05)", w, wo, float64(w)/float64(wo))
	_ = kernel.TraceOf
}
