package pkgs_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// liveness bounds every wait of these tests for something that must
// happen; it guards against hangs only (a loaded machine is slow).
const liveness = 90 * time.Second

var (
	buildOnce sync.Once
	serverBin string
	buildErr  error
)

// mcpServer starts the mcp room's test server over streamable HTTP on a
// loopback port and returns its URL.
func mcpServer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gsv-pkg-mcp-")
		if err != nil {
			buildErr = err
			return
		}
		serverBin = filepath.Join(dir, "testserver")
		cmd := exec.Command("go", "build", "-o", serverBin, "../mcp/testdata/testserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build testserver: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(serverBin, "-http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(liveness)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the MCP test server did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + addr + "/mcp"
}

// TestPkgPartsRun: an installed package's command runs in alice's exec
// session from her PATH, its MCP server is registered and answers, its
// schedule fires; disabled, the command is not found, the server and
// the schedule are gone.
func TestPkgPartsRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("exec sessions run in sandboxes, which need root")
	}
	s := newSys(t, nil)
	url := mcpServer(t)
	files := releaseTools()
	files["gsv-package.json"] = strings.Replace(files["gsv-package.json"], `"schedules": [{"name": "weekly", "line": "0 9 * * 1 spawn task draft the release notes"}]`,
		`"schedules": [{"name": "often", "line": "@every 1s spawn task draft the release notes"}],
  "mcpServers": [{"name": "tracker", "url": "`+url+`"}]`, 1)
	s.commit(s.alice, "release-tools", "main", files)
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	show := do(s, s.alice, abi.PkgShow, &abi.PkgIDArgs{PackageID: "release-tools"})
	if n := len(show.Adds); show.Adds[n-1].Kind != "mcpServer" || !strings.Contains(show.Adds[n-1].RunsAs, "alice") {
		t.Fatalf("review: %+v", show.Adds)
	}
	sub := s.k.Subscribe(s.alice.Identity, func(ev *kernel.Event) bool { return ev.Signal == abi.SigPkgChanged.Name })
	defer sub.Close()
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})
	for _, want := range []string{`"change":"approved"`, `"change":"installed"`} {
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		rec, err := sub.Next(ctx)
		cancel()
		if err != nil || !strings.Contains(string(rec), want) || !strings.Contains(string(rec), "alice/release-tools") {
			t.Fatalf("pkg.changed: %s %v, want %s", rec, err, want)
		}
	}
	// A package.event schedule of alice's own hands an event to the
	// package's command.
	do(s, s.alice, abi.SchedAdd, &abi.SchedAddArgs{Name: "tick", Expression: abi.Expression{Kind: "every", EveryMs: 1000},
		Target: abi.Target{Kind: abi.TargetPackage, PackageID: "release-tools", Entrypoint: "relnotes", Event: "tick", Payload: []byte(`{"n":1}`)}})
	if tab := s.crontab(s.alice); !strings.Contains(tab, `package release-tools relnotes tick {"n":1}`) {
		t.Fatalf("crontab of a package.event: %q", tab)
	}

	run := func() *abi.ExecResult {
		open := do(s, s.alice, abi.ProcessSessionOpen, &abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "none"}}})
		if open.Status != abi.SessionReady {
			t.Fatalf("open: %+v", open)
		}
		defer do(s, s.alice, abi.ProcessSessionSignal, &abi.SessionSignalArgs{SessionID: open.SessionID, Signal: abi.SignalKill})
		return do(s, s.alice, abi.ProcessExec, &abi.ExecArgs{SessionID: open.SessionID, Argv: []string{"sh", "-c", "relnotes v1.2"}})
	}
	res := run()
	if res.ExitCode != 0 || res.Stdout == nil || res.Stdout.InlineText == nil || res.Stdout.InlineText.Text != "relnotes-ran v1.2\n" {
		t.Fatalf("relnotes: %+v %+v", res, res.Stderr)
	}
	list := do(s, s.alice, abi.SysMcpList, &abi.McpListArgs{})
	if len(list.Servers) != 1 || list.Servers[0].Name != "release-tools-tracker" || list.Servers[0].State != abi.McpReady {
		t.Fatalf("mcp: %+v", list)
	}
	do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "release-tools-tracker", Name: "echo", Arguments: []byte(`{"message":"hi"}`)})
	deadline := time.Now().Add(liveness)
	var fired map[string]string
	for {
		runs := do(s, s.alice, abi.SchedLog, &abi.SchedLogArgs{})
		fired = map[string]string{}
		for _, r := range runs.Runs {
			if _, seen := fired[r.Name]; seen && (r.Name != "tick" || fired[r.Name] == "relnotes tick: relnotes-ran tick") {
				continue // runs are newest first; keep a tick that ran the command
			}
			if r.Summary != nil {
				fired[r.Name] = *r.Summary
			} else {
				fired[r.Name] = "(" + r.Status + ")"
			}
		}
		if _, ok := fired["pkg.release-tools.often"]; ok && fired["tick"] == "relnotes tick: relnotes-ran tick" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedules did not fire: %q", fired)
		}
		time.Sleep(50 * time.Millisecond)
	}

	do(s, s.alice, abi.PkgRemove, &abi.PkgIDArgs{PackageID: "release-tools"})
	if res := run(); res.ExitCode == 0 {
		t.Fatalf("relnotes after remove: %+v", res)
	}
	if list := do(s, s.alice, abi.SysMcpList, &abi.McpListArgs{}); len(list.Servers) != 0 {
		t.Fatalf("mcp after remove: %+v", list)
	}
	if l := do(s, s.alice, abi.SchedList, &abi.SchedListArgs{}); len(l.Schedules) != 1 || l.Schedules[0].Name != "tick" {
		t.Fatalf("schedules after remove: %+v", l)
	}
}

// TestPkgStdioServer: a package's stdio MCP server that is one of its
// own commands (a binary) runs from the package's bin directory in its
// owner's exec session and answers; disabled, it is gone.
func TestPkgStdioServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("stdio servers run in sandboxes, which need root")
	}
	s := newSys(t, nil)
	mcpServer(t) // builds the test server
	bin, err := os.ReadFile(serverBin)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(bin)
	manifest := `{"name":"tracker","commands":[{"name":"tracker","path":"bin/tracker"}],
  "mcpServers":[{"name":"local","command":["bin/tracker"]}]}`
	do(s, s.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "tracker"})
	do(s, s.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "tracker", Message: "tracker", Ops: []abi.RepoOp{
		{Type: "put", Path: "gsv-package.json", Content: str(manifest)},
		{Type: "put", Path: "bin/tracker", ContentBase64: &b64}}})
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "tracker"})
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "tracker"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "tracker"})
	list := do(s, s.alice, abi.SysMcpList, &abi.McpListArgs{})
	if len(list.Servers) != 1 || list.Servers[0].Name != "tracker-local" || list.Servers[0].State != abi.McpReady {
		e := ""
		if len(list.Servers) == 1 && list.Servers[0].Error != nil {
			e = *list.Servers[0].Error
		}
		t.Fatalf("mcp: %+v: %s", list, e)
	}
	r := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "tracker-local", Name: "echo", Arguments: []byte(`{"message":"from a package"}`)})
	if r.IsError {
		t.Fatalf("echo: %+v", r)
	}
	do(s, s.alice, abi.PkgRemove, &abi.PkgIDArgs{PackageID: "tracker"})
	if list := do(s, s.alice, abi.SysMcpList, &abi.McpListArgs{}); len(list.Servers) != 0 {
		t.Fatalf("mcp after remove: %+v", list)
	}
}
