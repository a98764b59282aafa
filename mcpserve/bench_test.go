package mcpserve

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// instantCaller answers every call at once.
type instantCaller struct{}

func (instantCaller) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"ok":true,"content":"     1\tsmall\n","lines":1,"size":6,"path":"/a"}`), nil
}

// BenchmarkToolCallInMemory is the server's and the SDK's own cost of a
// tools/call: the SDK's client over an in-memory transport, a Caller
// that answers at once.
func BenchmarkToolCallInMemory(b *testing.B) {
	for _, v := range []string{"", "2025-11-25"} {
		b.Run("version="+v, func(b *testing.B) { benchInMemory(b, v) })
	}
}

func benchInMemory(b *testing.B, version string) {
	s, err := New(instantCaller{}, Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	p := &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "/a"}}
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNew is the cost of a server for one caller: what /mcp pays
// per request.
func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		if _, err := New(instantCaller{}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
