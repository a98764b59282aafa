package main_test

// The gsv CLI against a real daemon, as testscript scripts in
// testdata/script: each starts `gsvfs serve` in the background on its own
// $WORK/state and drives it with gsv.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestE2ECLI(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			// The built gsvfs and gsv come first on PATH.
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("GSV_ADDR", "unix!"+filepath.Join(env.WorkDir, "state", "9p.sock"))
			env.Setenv("LC_ALL", "C")
			env.Setenv("GORACE", strings.TrimPrefix(raceEnv, "GORACE="))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitsock":  cmdWaitSock,
			"mcpserver": cmdMCPServer,
		},
	})
}

// cmdWaitSock waits until the unix socket accepts a connection:
//
//	waitsock path [timeout]
func cmdWaitSock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitsock path [timeout]")
	}
	timeout := liveness
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		timeout = d
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: no server within %v: %v", path, timeout, strings.TrimSpace(err.Error()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	mcpServerOnce sync.Once
	mcpServerErr  error
)

// cmdMCPServer puts the mcp room's test server (an MCP server written
// with the SDK, static: it runs in sandboxes) in DIR, building it once:
//
//	mcpserver DIR
func cmdMCPServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mcpserver DIR")
	}
	bin, err := mcpTestServer()
	ts.Check(err)
	ts.Check(copyMCPServer(bin, ts.MkAbs(args[0])))
}

// mcpTestServer builds the mcp room's test server into binDir once and
// returns its path.
func mcpTestServer() (string, error) {
	bin := filepath.Join(binDir, "gsv-mcp-testserver")
	mcpServerOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", bin, "gsvfs.dev/gsvfs/mcp/testdata/testserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			mcpServerErr = fmt.Errorf("go build the MCP test server: %v\n%s", err, out)
		}
	})
	return bin, mcpServerErr
}

// copyMCPServer copies the test server bin into dir.
func copyMCPServer(bin, dir string) error {
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "gsv-mcp-testserver"), b, 0o755)
}
