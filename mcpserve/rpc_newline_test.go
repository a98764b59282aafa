package mcpserve

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestRPCArgsNewlines checks that args with newlines between their
// tokens (pretty-printed JSON) make one request line, answered.
func TestRPCArgsNewlines(t *testing.T) {
	k := startRPCKernel(t)
	r := dialRPC(t, k)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range []string{"{\n  \"i\": 1\n}", "{\"s\":\"a\\nb\"}\n", "\n{}"} {
		got, err := r.Call(ctx, "echo", json.RawMessage(args))
		if err != nil {
			t.Fatalf("echo %q: %v", args, err)
		}
		t.Logf("echo %q: %s", args, got)
	}
}
