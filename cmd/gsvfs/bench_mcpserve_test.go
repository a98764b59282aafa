// The benchmark of gsvfs as an MCP server (issue 23, "Speed"): a
// tools/call of fs.read through `gsvfs mcp serve` against the same
// syscall over 9P, measured in the same run.
//
// Run:
//
//	go test -run '^$' -bench MCPServe -timeout 20m ./cmd/gsvfs/
//
// BenchmarkMCPServe starts a kernel (`gsvfs serve`), writes a small file
// in the test user's home, and times, alternately, b.N of each:
//
//   - ours: the MCP Go SDK's client calling the tool fs.read {"path":
//     FILE} of `gsvfs mcp serve`, a subprocess on stdio attached to the
//     kernel's unix socket (its one 9P connection, /sys/rpc);
//   - the baseline: the same fs.read as a request frame written to an
//     open fid of /sys/call on a 9P connection of the test's own, and its
//     answer read.
//
// It reports both in µs and their ratio; the target is ours/9P <= 1.5.
package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// targetMCPServeRatio is the target: a tools/call of fs.read
// through gsvfs mcp serve over the same syscall over 9P, at most.
const targetMCPServeRatio = 1.5

func BenchmarkMCPServe(b *testing.B) {
	port := freePort(b)
	k := startDaemon(b, newBase(b), daemonOpts{logLevel: "warn", args: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	fsys := k.dial(b)
	var tok struct {
		Token struct {
			Token string `json:"token"`
		} `json:"token"`
	}
	mustOK(b, call9p(b, fsys, "sys.token.create", map[string]any{"kind": "user"}), &tok)
	const file = "mcpbench.txt"
	const want = "a line of the small file"
	mustOK(b, call9p(b, fsys, "fs.write", map[string]any{"path": file, "content": strings.Repeat(want+"\n", 8)}), nil)
	ctx := context.Background()
	session := func(version string) *mcp.ClientSession {
		cmd := exec.Command(gsvfsBin, "mcp", "serve", "--kernel", "unix!"+k.sock, "--log-level", "warn")
		cmd.Env = append(os.Environ(), raceEnv)
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			b.Fatalf("connect to gsvfs mcp serve: %v\n%s", err, stderr.String())
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	latest, handshake := session(""), session("2025-11-25")
	overHTTP, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), HTTPClient: &http.Client{Transport: bearer{tok.Token.Token}}}, nil)
	if err != nil {
		b.Fatalf("connect to /mcp: %v", err)
	}
	b.Cleanup(func() { overHTTP.Close() })
	read := &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": file}}
	callRead := func(cs *mcp.ClientSession) error {
		r, err := cs.CallTool(ctx, read)
		if err != nil {
			return err
		}
		if r.IsError || len(r.Content) != 1 {
			return fmt.Errorf("fs.read: %+v", r)
		}
		if tc, ok := r.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, want) {
			return fmt.Errorf("fs.read answered %+v", r.Content[0])
		}
		return nil
	}
	// The SDK's floor: a tools/call the server refuses itself (no such
	// tool), which makes no syscall.
	none := &mcp.CallToolParams{Name: "no.such.tool", Arguments: map[string]any{}}
	req, _ := json.Marshal(map[string]any{"call": "fs.read", "args": map[string]any{"path": file}})
	req = append(req, '\n')
	held := openHeld(b, fsys)
	var ot, ht, ft, nt, wt []time.Duration
	ours := &devSide{name: "tools/call fs.read through gsvfs mcp serve", op: timed(&ot, func() error { return callRead(latest) })}
	old := &devSide{name: "the same, the 2025-11-25 handshake protocol", op: timed(&ht, func() error { return callRead(handshake) })}
	floor := &devSide{name: "a tools/call with no syscall", op: timed(&ft, func() error {
		if _, err := latest.CallTool(ctx, none); err == nil {
			return fmt.Errorf("no.such.tool passed")
		}
		return nil
	})}
	ninep := &devSide{name: "fs.read over 9P", op: timed(&nt, func() error { return held.do(req, want) })}
	web := &devSide{name: "tools/call fs.read over /mcp", op: timed(&wt, func() error { return callRead(overHTTP) })}
	devInterleave(b, nil, ours, old, floor, ninep, web)
	ratio := ours.ms() / ninep.ms()
	om, hm, fm, nm, wm := median(ot), median(ht), median(ft), median(nt), median(wt)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	b.ReportMetric(ours.ms()*1000, "mcp-us")
	b.ReportMetric(ninep.ms()*1000, "9p-us")
	b.ReportMetric(ratio, "mcp/9p")
	b.ReportMetric(float64(om)/float64(nm), "median-ratio")
	fmt.Printf("\n=== gsvfs mcp serve: a tools/call of fs.read vs the same syscall over 9P (same run, n=%d) ===\n"+
		"fs.read of a small file, tools/call through gsvfs mcp serve (stdio, the SDK's client): %.0f µs, over 9P (a held /sys/call fid): %.0f µs: mcp/9p %.2f (target <= %.1f) %s; medians %.0f and %.0f µs: %.2f\n"+
		"  the same tools/call, the 2025-11-25 handshake protocol: %.0f µs (median %.0f): %.2f of 9P\n"+
		"  the SDK's floor, a tools/call that makes no syscall (no such tool): %.0f µs (median %.0f): %.2f of 9P\n"+
		"  the same tools/call over /mcp (streamable HTTP, the SDK's client, a bearer token; for information): %.0f µs (median %.0f): %.2f of 9P\n\n",
		b.N, ours.ms()*1000, ninep.ms()*1000, ratio, targetMCPServeRatio, devVerdict(ratio <= targetMCPServeRatio),
		us(om), us(nm), float64(om)/float64(nm),
		old.ms()*1000, us(hm), old.ms()/ninep.ms(),
		floor.ms()*1000, us(fm), floor.ms()/ninep.ms(),
		web.ms()*1000, us(wm), web.ms()/ninep.ms())
}
