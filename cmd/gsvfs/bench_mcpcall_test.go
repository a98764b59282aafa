// The benchmark of gsvfs as an MCP client (issue 23, "Speed"): `gsv mcp
// call` of a stdio server's echo tool against the SDK's client calling
// the same server directly, measured in the same run.
//
// Run:
//
//	go test -run '^$' -bench MCPCall -timeout 20m ./cmd/gsvfs/
//
// BenchmarkMCPCall starts a kernel (`gsvfs serve`), adds the mcp room's
// test server (written with the SDK) as a stdio server of root's (its
// command in an exec session: bubblewrap, no network), and times,
// alternately, b.N of each:
//
//   - ours: sys.mcp.call of its echo tool, the request frame `gsv mcp
//     call` writes, on a held /sys/call fid of a 9P connection (the
//     CLI's own start is measured apart, for information);
//   - the baseline: the SDK's client calling echo of the same binary,
//     started directly by the test (CommandTransport: no sandbox, no
//     kernel);
//   - for information: the SDK's client calling the same binary run at
//     the sandboxes' priority (sandbox.Nice, a cpu cgroup of the
//     sandboxes' weight), which the room's server runs at; the `gsv mcp
//     call` command itself (a process per
//     call), and a sys.mcp.tools search (the room's path without the
//     server).
//
// It reports both in µs and their ratio; the target is ours/SDK <= 1.3.
package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/devices/local/sandbox"
)

// targetMCPCallRatio is the target: gsv mcp call of a stdio
// server's echo over the SDK's client calling it directly, at most.
const targetMCPCallRatio = 1.3

func BenchmarkMCPCall(b *testing.B) {
	requireRoot(b)
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("stdio MCP servers need bubblewrap (bwrap)")
	}
	k := startDaemon(b, newBase(b), daemonOpts{logLevel: "warn"})
	fsys := k.dial(b)
	bin, err := mcpTestServer()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(k.base, "mcpbin")
	if err := copyMCPServer(bin, dir); err != nil {
		b.Fatal(err)
	}
	mustOK(b, call9p(b, fsys, "sys.mcp.add", map[string]any{"name": "t", "stdio": map[string]any{
		"command": []string{"/opt/mcp/gsv-mcp-testserver"}, "network_mode": "none",
		"mounts": []map[string]string{{"host_path": dir, "guest_path": "/opt/mcp", "mode": "ro"}}}}), nil)
	const msg = "hi from the bench"
	const want = "echo: " + msg
	req, _ := json.Marshal(map[string]any{"call": "sys.mcp.call", "args": map[string]any{
		"serverId": "t", "name": "echo", "arguments": map[string]any{"message": msg}}})
	req = append(req, '\n')
	search, _ := json.Marshal(map[string]any{"call": "sys.mcp.tools", "args": map[string]any{"serverId": "t", "query": "echo"}})
	search = append(search, '\n')
	held := openHeld(b, fsys)

	ctx := context.Background()
	cmd := exec.Command(bin)
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatalf("connect to the test server directly: %v", err)
	}
	b.Cleanup(func() { direct.Close() })
	// The same binary at the sandboxes' priority (sandbox.Nice, and a cpu
	// cgroup beside the users' groups in theirs), where the machine has
	// that cgroup: what the server's own priority costs, apart from the
	// path.
	var atPrio *mcp.ClientSession
	if group, err := sandbox.Group("bench-mcpcall"); err == nil {
		b.Cleanup(func() { os.Remove(group) })
		cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec nice -n "$2" "$3"`, "sh", group, fmt.Sprint(sandbox.Nice), bin)
		if atPrio, err = mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil); err != nil {
			b.Fatalf("connect to the test server at the sandboxes' priority: %v", err)
		}
		b.Cleanup(func() { atPrio.Close() })
	}
	echo := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}}
	env := append(os.Environ(), "GSV_ADDR=unix!"+k.sock, raceEnv)
	cli := func() error {
		c := exec.Command(gsvBin, "mcp", "call", "t", "echo", `{"message":"`+msg+`"}`)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			return fmt.Errorf("gsv mcp call: %v: %s", err, out)
		}
		return nil
	}
	// A CLI floor: a gsv command that makes one cheap syscall.
	whoami := func() error {
		c := exec.Command(gsvBin, "whoami")
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("gsv whoami: %v: %s", err, out)
		}
		return nil
	}
	var ot, st, ct, wt, qt []time.Duration
	ours := &devSide{name: "sys.mcp.call echo over 9P", op: timed(&ot, func() error { return held.do(req, want) })}
	callEcho := func(cs *mcp.ClientSession) error {
		r, err := cs.CallTool(ctx, echo)
		if err != nil {
			return err
		}
		if tc, ok := r.Content[0].(*mcp.TextContent); !ok || tc.Text != want {
			return fmt.Errorf("echo answered %+v", r.Content[0])
		}
		return nil
	}
	sdkSide := &devSide{name: "the SDK's client calling echo directly", op: timed(&st, func() error { return callEcho(direct) })}
	var pt []time.Duration
	prioSide := &devSide{name: "the same, the server at the sandboxes' priority", op: timed(&pt, func() error {
		if atPrio == nil {
			return nil
		}
		return callEcho(atPrio)
	})}
	cmdSide := &devSide{name: "gsv mcp call (a process)", op: timed(&ct, cli)}
	whoSide := &devSide{name: "gsv whoami (a process)", op: timed(&wt, whoami)}
	searchSide := &devSide{name: "sys.mcp.tools over 9P", op: timed(&qt, func() error { return held.do(search, `"echo"`) })}
	devInterleave(b, nil, ours, sdkSide, prioSide, cmdSide, whoSide, searchSide)
	ratio := ours.ms() / sdkSide.ms()
	om, sm, cm, wm, qm, pm := median(ot), median(st), median(ct), median(wt), median(qt), median(pt)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	b.ReportMetric(ours.ms()*1000, "gsv-us")
	b.ReportMetric(sdkSide.ms()*1000, "sdk-us")
	b.ReportMetric(ratio, "gsv/sdk")
	b.ReportMetric(float64(om)/float64(sm), "median-ratio")
	fmt.Printf("\n=== gsv mcp call: a stdio server's echo through the kernel vs the SDK's client calling it directly (same run, n=%d) ===\n"+
		"echo, sys.mcp.call over 9P (what gsv mcp call writes; the server in its owner's sandbox): %.0f µs, the SDK's client directly: %.0f µs: gsv/sdk %.2f (target <= %.1f) %s; medians %.0f and %.0f µs: %.2f\n"+
		"  the SDK's client directly, the server at the sandboxes' priority (nice %d, their cpu cgroup; 0 if none): %.0f µs (median %.0f): ours is %.2f of it (medians %.2f)\n"+
		"  the gsv mcp call command, a process per call (for information): %.0f µs (median %.0f); gsv whoami, the same start with a cheap call: %.0f µs (median %.0f); the command less that floor: %.2f of the SDK\n"+
		"  sys.mcp.tools over 9P, the room's path without the server (for information): %.0f µs (median %.0f): %.2f of the SDK\n\n",
		b.N, ours.ms()*1000, sdkSide.ms()*1000, ratio, targetMCPCallRatio, devVerdict(ratio <= targetMCPCallRatio),
		us(om), us(sm), float64(om)/float64(sm),
		sandbox.Nice, prioSide.ms()*1000, us(pm), ours.ms()/prioSide.ms(), float64(om)/float64(pm),
		cmdSide.ms()*1000, us(cm), whoSide.ms()*1000, us(wm), (cmdSide.ms()-whoSide.ms())/sdkSide.ms(),
		searchSide.ms()*1000, us(qm), searchSide.ms()/sdkSide.ms())
}
