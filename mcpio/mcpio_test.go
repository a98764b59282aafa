package mcpio_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/mcpio"
)

type echoArgs struct {
	Message string `json:"message"`
}

// newServer is an SDK server with an echo tool.
func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Message}}}, nil, nil
	})
	return s
}

// pipes are the two ends of a stream pair: the client's reader and
// writer, the server's reader and writer.
func pipes() (cr io.ReadCloser, cw io.WriteCloser, sr io.ReadCloser, sw io.WriteCloser) {
	sr, cw = io.Pipe()
	cr, sw = io.Pipe()
	return
}

// connect serves newServer over a stream pair and returns the client's
// session: each side's transport is ours (mcpio) or the SDK's
// (IOTransport).
func connect(t testing.TB, ours bool) *mcp.ClientSession {
	t.Helper()
	cr, cw, sr, sw := pipes()
	var st, ct mcp.Transport = &mcp.IOTransport{Reader: sr, Writer: sw}, &mcp.IOTransport{Reader: cr, Writer: cw}
	if ours {
		st, ct = &mcpio.Transport{Reader: sr, Writer: sw}, &mcpio.Transport{Reader: cr, Writer: cw}
	}
	ctx := context.Background()
	ss, err := newServer().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestTransport: the SDK's client and server speak over it (tools/list,
// tools/call); a line over the limit, a line that is no JSON-RPC and a
// batch are each read as the SDK's transport reads them.
func TestTransport(t *testing.T) {
	cs := connect(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "echo: hi" {
		t.Fatalf("echo: %+v %v", res, err)
	}

	read := func(in string, max int) (string, error) {
		r, w := io.Pipe()
		go func() { io.WriteString(w, in); w.Close() }()
		_, discard := io.Pipe()
		c, _ := (&mcpio.Transport{Reader: r, Writer: discard, MaxLine: max}).Connect(ctx)
		defer c.Close()
		var got []string
		for {
			m, err := c.Read(ctx)
			if err != nil {
				return strings.Join(got, " "), err
			}
			got = append(got, fmt.Sprintf("%T", m))
		}
	}
	for _, tc := range []struct {
		in, want, err string
		max           int
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: "*jsonrpc2.Request *jsonrpc2.Request", err: "EOF"},
		{in: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"result":{}}]` + "\n", want: "*jsonrpc2.Request *jsonrpc2.Response", err: "EOF"},
		{in: "not json\n", err: "invalid"},
		{in: "[]\n", err: "empty batch"},
		{in: strings.Repeat("x", 200) + "\n", max: 100, err: "over the line limit"},
	} {
		got, err := read(tc.in, tc.max)
		if got != tc.want || err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%.40q: %q %v, want %q and %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// BenchmarkTransport times a tools/call of echo between the SDK's client
// and server over a stream pair, both sides on mcpio or both on the
// SDK's IOTransport, interleaved in rounds in the same run; it reports
// the medians of the rounds and their ratio.
func BenchmarkTransport(b *testing.B) {
	ours, sdk := connect(b, true), connect(b, false)
	ctx := context.Background()
	call := func(cs *mcp.ClientSession) {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}}); err != nil {
			b.Fatal(err)
		}
	}
	const rounds = 10
	per := max(1, b.N/rounds)
	var o, s []float64
	for range rounds {
		for _, side := range []struct {
			cs  *mcp.ClientSession
			out *[]float64
		}{{ours, &o}, {sdk, &s}} {
			start := time.Now()
			for range per {
				call(side.cs)
			}
			*side.out = append(*side.out, float64(time.Since(start).Microseconds())/float64(per))
		}
	}
	median := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	mo, ms := median(o), median(s)
	// The bytes each allocates a call (both sides, a client and a server).
	bytesPer := func(cs *mcp.ClientSession) float64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 200 {
			call(cs)
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.TotalAlloc-m0.TotalAlloc) / 200
	}
	b.ReportMetric(bytesPer(ours), "mcpio-B/call")
	b.ReportMetric(bytesPer(sdk), "sdkio-B/call")
	b.ReportMetric(mo, "mcpio-us")
	b.ReportMetric(ms, "sdkio-us")
	b.ReportMetric(mo/ms, "mcpio/sdkio")
}
