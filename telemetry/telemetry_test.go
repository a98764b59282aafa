package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// TestMetricsAndSpans: syscalls are counted by name and code, their
// spans carry the kernel trace id the audit records carry, a signal's
// model usage is counted by provider and model, a scheduled run's
// lateness and the 9P and FUSE requests the transports' hooks report are
// counted, and the scraped text
// passes promtool check metrics (Debian's prometheus package).
func TestMetricsAndSpans(t *testing.T) {
	e := kerneltest.Open(t)
	exp := tracetest.NewInMemoryExporter()
	tel, err := New(e.K, Options{Version: "test", SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close(context.Background())
	trace := kernel.NewTraceID()
	ctx := kernel.WithTrace(context.Background(), trace)
	if _, err := kernel.Do(ctx, e.K, kerneltest.Caller(e.Root), abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/x", Value: json.RawMessage(`"1"`)}); err != nil {
		t.Fatal(err)
	}
	kernel.Do(ctx, e.K, kerneltest.Caller(e.Alice), abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/x", Value: json.RawMessage(`"1"`)})
	cost := 0.5
	kernel.Publish(e.K, abi.SigProcRunUsage, abi.RunUsageSignal{Pid: "p_1", RunID: "r_1", Provider: "scripted", Model: "m",
		TokensIn: 10, TokensOut: 4, Cost: &cost, TraceID: trace}, kernel.Audience{Uids: []uint32{0}})
	late := int64(1500)
	kernel.Publish(e.K, abi.SigSchedRunFinished, abi.SchedRunFinished{ScheduleID: "s_1", Status: "ok", LatenessMs: &late}, kernel.Audience{Uids: []uint32{0}})
	kernel.Publish(e.K, abi.SigSchedRunFinished, abi.SchedRunFinished{ScheduleID: "s_1", Status: "ok"}, kernel.Audience{Uids: []uint32{0}}) // by hand: no lateness
	tel.NinePRequests("walk", false)
	tel.NinePRequests("walk", true)
	tel.FUSERequests("lookup", false)
	tel.Flush(context.Background())

	srv := httptest.NewServer(tel.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`gsv_syscalls_total{code="200",syscall="sys.config.set"} 1`,
		`gsv_syscalls_total{code="403",syscall="sys.config.set"} 1`,
		`gsv_syscall_duration_seconds_bucket{syscall="sys.config.set"`,
		`gsv_model_tokens_total{direction="input",model="m",provider="scripted"} 10`,
		`gsv_model_cost_usd_total{model="m",provider="scripted"} 0.5`,
		`gsv_store_commit_duration_seconds_count`,
		`go_goroutines`,
		`gsv_schedule_runs_total{status="ok"} 2`,
		`gsv_schedule_lateness_seconds_count 1`,
		`gsv_schedule_lateness_seconds_sum 1.5`,
		`gsv_9p_requests_total{op="walk",result="ok"} 1`,
		`gsv_9p_requests_total{op="walk",result="error"} 1`,
		`gsv_fuse_requests_total{op="lookup",result="ok"} 1`,
		`gsv_adapter_accounts{online="false"} 0`,
		`gsv_schedule_queued 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	spans := exp.GetSpans()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
		if s.SpanContext.TraceID().String() != trace {
			t.Errorf("span %s in trace %s, want %s", s.Name, s.SpanContext.TraceID(), trace)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "sys.config.set") || !strings.Contains(strings.Join(names, " "), "chat m") {
		t.Errorf("spans %v", names)
	}
	for _, s := range spans {
		if s.Name == "chat m" {
			found := false
			for _, a := range s.Attributes {
				if a.Key == "gen_ai.usage.input_tokens" && a.Value.AsInt64() == 10 {
					found = true
				}
			}
			if !found {
				t.Errorf("chat span attributes %v", s.Attributes)
			}
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (make deps installs Debian's prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	cmd.Stderr = os.Stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
