package main_test

// MCP servers and agents against a real daemon (issue 23, part 5): an
// agent finds a tool with its one Mcp tool, calls it through an
// approval, and a CodeMode block calls it as mcp.<server>.<tool>.

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestE2EMcpAgent(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(0, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %v: %v", args, r)
		}
		return r.stdout
	}
	bin, err := mcpTestServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.base, "mcpbin")
	if err := copyMCPServer(bin, dir); err != nil {
		t.Fatal(err)
	}
	gsv("mcp", "add", "t", "--network", "none", "--mount", dir+":/opt/mcp:ro", "--", "/opt/mcp/gsv-mcp-testserver")

	pid := strings.TrimSpace(gsv("spawn", "task", "--label", "mcp"))
	P := d.mnt + "/proc/" + pid
	waitRun := func(want string) string {
		t.Helper()
		var last string
		for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			last = d.mustSh(t, `cat "$1/run"`, P)
			if strings.Contains(last, want) {
				return last
			}
		}
		t.Fatalf("/proc/%s/run never showed %q:\n%s", pid, want, last)
		return ""
	}
	// A search (no approval), then a call, which waits for a human.
	d.mustSh(t, `printf '%s\n' 'find echo and call it:' 'use Mcp {"search":"echo"}' 'use Mcp {"server":"t","tool":"echo","arguments":{"message":"from the agent"}}' > "$1/conversations/default/in"`, P)
	waitRun(`"state": "waiting-hil"`)
	var req struct {
		RequestID string          `json:"requestId"`
		Syscall   string          `json:"syscall"`
		ToolName  string          `json:"toolName"`
		Args      json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal([]byte(d.mustSh(t, `cat "$1/hil"`, P)), &req); err != nil {
		t.Fatal(err)
	}
	if req.ToolName != "Mcp" || req.Syscall != "sys.mcp.call t echo" || !strings.Contains(string(req.Args), "from the agent") {
		t.Fatalf("the approval request: %+v %s", req, req.Args)
	}
	d.mustSh(t, `echo "hil approve $2 remember" > "$1/ctl"`, P, req.RequestID)
	waitRun(`"state": "completed"`)
	tr := d.mustSh(t, `cat "$1/conversations/default/transcript"`, P)
	for _, want := range []string{`"name":"echo"`, "echoes a message back", "echo: from the agent"} {
		if !strings.Contains(tr, want) {
			t.Fatalf("the transcript lacks %q:\n%s", want, tr)
		}
	}
	// Remembered per server and tool: the next call of echo asks nobody.
	d.mustSh(t, `printf '%s\n' 'again:' 'use Mcp {"server":"t","tool":"echo","arguments":{"message":"remembered"}}' > "$1/conversations/default/in"`, P)
	waitRun(`"state": "completed"`)
	if tr := d.mustSh(t, `cat "$1/conversations/default/transcript"`, P); !strings.Contains(tr, "echo: remembered") {
		t.Fatalf("the remembered call:\n%s", tr)
	}

	// CodeMode: mcp.<server>.<tool>(args), unwrapped (text, or the
	// structured content), and a tool's error thrown.
	out := gsv("codemode", "-e", `return await mcp.t.echo({message: "from a block"})`)
	if strings.TrimSpace(out) != "echo: from a block" {
		t.Fatalf("mcp.t.echo: %q", out)
	}
	out = gsv("codemode", "-e", `const w = await mcp.t.whoami(); return w.interfaces`)
	if !strings.Contains(out, `"lo"`) {
		t.Fatalf("mcp.t.whoami: %q", out)
	}
	r := gsvAs(0, env, "codemode", "-e", `return await mcp.t.echo({message: 3})`)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "mcp.t.echo") {
		t.Fatalf("a tool's error in a block: %v", r)
	}
}

// A process spawned with mcp=t (the ctl line's form of gsv spawn --mcp)
// sees server t only: its status says so, its Mcp tool's search finds
// t's tools and none of u's, and a call of u's is refused with the
// server's name and the process's list.
func TestE2EMcpSpawnNarrows(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(args ...string) string {
		t.Helper()
		r := gsvAs(0, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %v: %v", args, r)
		}
		return r.stdout
	}
	bin, err := mcpTestServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(d.base, "mcpbin")
	if err := copyMCPServer(bin, dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t", "u"} {
		gsv("mcp", "add", name, "--network", "none", "--mount", dir+":/opt/mcp:ro", "--", "/opt/mcp/gsv-mcp-testserver")
	}
	pid := strings.TrimSpace(d.mustSh(t, `exec 3<>"$1/proc/clone"; echo 'spawn task label=narrow mcp=t' >&3; head -n1 <&3`, d.mnt))
	P := d.mnt + "/proc/" + pid
	if st := d.mustSh(t, `cat "$1/status"`, P); !strings.Contains(st, "\nmcp: t\n") {
		t.Fatalf("status:\n%s", st)
	}
	d.mustSh(t, `printf '%s\n' 'search:' 'use Mcp {"search":"echo"}' 'use Mcp {"search":"echo","server":"u"}' > "$1/conversations/default/in"`, P)
	var last string
	for deadline := time.Now().Add(liveness); ; time.Sleep(50 * time.Millisecond) {
		if last = d.mustSh(t, `cat "$1/run"`, P); strings.Contains(last, `"state": "completed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never completed:\n%s", last)
		}
	}
	tr := d.mustSh(t, `cat "$1/conversations/default/transcript"`, P)
	for _, want := range []string{`"server":"t","name":"echo"`, `MCP server u: process ` + pid + ` may use only t of its owner's MCP servers`} {
		if !strings.Contains(tr, want) {
			t.Fatalf("the transcript lacks %q:\n%s", want, tr)
		}
	}
	if strings.Contains(tr, `"server":"u","name"`) {
		t.Fatalf("the search found u's tools:\n%s", tr)
	}
	r := gsvAs(0, env, "codemode", "--pid", pid, "-e", `return await mcp.u.echo({message: "x"})`)
	if r.code == 0 || !strings.Contains(r.stderr, "MCP server u: process "+pid+" may use only t") {
		t.Fatalf("mcp.u.echo as the process: %v", r)
	}
}
