package proc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/telemetry"
)

// TestOneTrace: a user's message starts a trace; the run it starts makes
// an IPC call to a second process (the agent's Call tool), whose run
// answers. One trace id is in the message's event line, in the audit
// records of the send, the tool call and the delivery, and in the
// exported spans of both processes' runs and model calls.
func TestOneTrace(t *testing.T) {
	h := newPTHarness(t)
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(h.k, telemetry.Options{SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close(context.Background())
	a, b := h.spawn(h.alice, "manager"), h.spawn(h.alice, "worker")
	h.scriptOf(1000, `{"tools":[{"name":"Call","args":{"pid":"`+b+`","message":"summarize the notes","timeoutMs":30000}}],"expectUser":"go"}
{"text":"ok"}
{"text":"ok"}
{"text":"done"}`)
	tr := kernel.NewTraceID()
	ctx := kernel.WithTrace(context.Background(), tr)
	if _, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.alice}, abi.ProcSend, &abi.SendArgs{Pid: a, Message: "go"}); err != nil {
		t.Fatal(err)
	}
	var callID string
	eventually(t, func() bool {
		h.k.Store.QueryRowContext(context.Background(), `SELECT call_id FROM proc_ipc_calls WHERE source_pid=?`, a).Scan(&callID)
		return callID != "" && h.callState(callID) != "pending"
	}, func() string { return "the call did not end" })
	h.waitIdle(a)
	h.waitIdle(b)

	if m := h.findEvent(a, abi.EventUserMessage); m == nil || m.TraceID != tr {
		t.Fatalf("the user's message in %s: %+v, want trace %s", a, m, tr)
	}
	// A call's record is appended with its change, or within 100 ms of
	// its return (docs/operations.md): wait for the three.
	wants := []string{abi.ProcSend.Name + "@" + a, abi.ProcIpcCall.Name + "@" + a, abi.ProcIpcDeliver.Name + "@" + b}
	var calls []string
	eventually(t, func() bool {
		var recs abi.AuditQueryResult
		h.must(h.root, "sys.audit.query", map[string]any{"trace": tr}, &recs)
		calls = calls[:0]
		for _, r := range recs.Records {
			// A call that changed the store and succeeded has its
			// change record only; any other has its call record.
			calls = append(calls, r.Syscall+"@"+r.Pid)
		}
		for _, w := range wants {
			if !slices.Contains(calls, w) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("audit records of trace %s: %v, want %v", tr, calls, wants) })
	for _, want := range wants {
		if !slices.Contains(calls, want) {
			t.Errorf("audit records of trace %s: %v, want %s", tr, calls, want)
		}
	}
	tel.Flush(context.Background())
	var names []string
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() == tr {
			names = append(names, s.Name)
		}
	}
	all := strings.Join(names, " ")
	for _, want := range []string{"proc.send", "proc.ipc.call", "invoke_agent " + a, "invoke_agent " + b, "chat "} {
		if !strings.Contains(all, want) {
			t.Errorf("spans of trace %s: %v, want %s", tr, names, want)
		}
	}
}
