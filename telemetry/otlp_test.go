package telemetry

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// TestOTLPExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans go to an
// OTLP HTTP receiver (one in the test, decoding the protobuf export
// requests) in the kernel's trace, with gen_ai.* attributes on model
// calls and no prompt or output text.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	spans := map[string]string{} // name -> trace id
	attrs := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", 400)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = hex.EncodeToString(s.TraceId)
					for _, a := range s.Attributes {
						attrs[a.Key] = true
					}
				}
			}
		}
		mu.Unlock()
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	e := kerneltest.Open(t)
	tel, err := New(e.K, Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	tr := kernel.NewTraceID()
	ctx := kernel.WithTrace(context.Background(), tr)
	if _, err := kernel.Do(ctx, e.K, kerneltest.Caller(e.Root), abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/x", Value: json.RawMessage(`"1"`)}); err != nil {
		t.Fatal(err)
	}
	kernel.Publish(e.K, abi.SigProcRunUsage, abi.RunUsageSignal{Pid: "p", RunID: "r", Provider: "openai", Model: "gpt-x",
		TokensIn: 7, TokensOut: 3, TraceID: tr}, kernel.Audience{})
	if err := tel.Close(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if spans["sys.config.set"] != tr || spans["chat gpt-x"] != tr {
		t.Fatalf("exported spans %v, want sys.config.set and chat gpt-x in trace %s", spans, tr)
	}
	for _, k := range []string{"gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.provider.name", "gsv.syscall"} {
		if !attrs[k] {
			t.Errorf("no attribute %s in %v", k, attrs)
		}
	}
	for k := range attrs {
		if k == "gen_ai.prompt" || k == "gen_ai.completion" || k == "gen_ai.input.messages" || k == "gen_ai.output.messages" {
			t.Errorf("span attribute %s carries text", k)
		}
	}
}
