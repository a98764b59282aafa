package mcp_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// everythingPkg is the reference server the tests install from npm,
// pinned.
const everythingPkg = "@modelcontextprotocol/server-everything@2026.8.31"

var (
	npmOnce sync.Once
	npmDir  string // holds node_modules/@modelcontextprotocol/server-everything
	npmErr  error
)

// everything installs the reference server from npm into a cache
// directory under the system's temporary directory, once for every test
// binary (a lock file keeps two from installing at once; a finished
// install is reused), and returns the directory holding its
// node_modules. It skips the test only if npm or node is absent.
func everything(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the reference MCP servers need %s (Debian's nodejs and npm; make deps)", tool)
		}
	}
	npmOnce.Do(func() {
		root := filepath.Join(os.TempDir(), "gsvfs-npm-cache")
		if npmErr = os.MkdirAll(root, 0o755); npmErr != nil {
			return
		}
		lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			npmErr = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			npmErr = err
			return
		}
		dir := filepath.Join(root, strings.NewReplacer("@", "", "/", "-").Replace(everythingPkg))
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			npmDir = dir
			return
		}
		tmp, err := os.MkdirTemp(root, ".install-")
		if err != nil {
			npmErr = err
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", tmp, everythingPkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm install %s: %v\n%s", everythingPkg, err, out)
			return
		}
		os.WriteFile(filepath.Join(tmp, ".done"), nil, 0o644)
		os.RemoveAll(dir)
		if npmErr = os.Rename(tmp, dir); npmErr == nil {
			npmDir = dir
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return npmDir
}

// everythingMain is the server's entry point under dir.
func everythingMain(dir string) string {
	return filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

// The reference server, @modelcontextprotocol/server-everything from
// npm, over stdio as alice in her sandbox (no network: it is installed
// in her home) and over streamable HTTP on loopback: its tools are
// discovered and echo answers.
func TestEverythingServer(t *testing.T) {
	needSandbox(t)
	dir := everything(t)
	s := newSys(t)
	home := filepath.Join(s.data, "home/alice/everything")
	if out, err := exec.Command("cp", "-a", dir, home).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", diskBase+1000, diskBase+100), home).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	sv := must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "everything", Stdio: &abi.McpStdio{
		Command:     []string{"node", "/opt/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"},
		NetworkMode: abi.NetworkNone,
		Mounts:      []abi.ProcessMount{{HostPath: "~/everything", GuestPath: "/opt/everything", Mode: "ro"}},
	}}).Server
	checkEverything(t, s, sv)

	// Streamable HTTP: the server runs on the host, on a loopback port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", everythingMain(dir), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(liveness)
	for {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server-everything did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sv = must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "everything-http", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}).Server
	checkEverything(t, s, sv)
}

// checkEverything checks a server-everything: ready, with echo among its
// tools, resources and prompts, and echo answering.
func checkEverything(t *testing.T, s *sys, sv *abi.McpServerSummary) {
	t.Helper()
	if sv.State != abi.McpReady {
		t.Fatalf("%s: %+v %s", sv.Name, sv, deref(sv.Error))
	}
	var names []string
	for _, tl := range sv.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(" "+strings.Join(names, " ")+" ", " echo ") || sv.ResourceCount == 0 || sv.PromptCount == 0 {
		t.Fatalf("%s: tools %v, %d resources, %d prompts", sv.Name, names, sv.ResourceCount, sv.PromptCount)
	}
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: sv.Name, Name: "echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if got := text(t, r); got != "Echo: hi" {
		t.Fatalf("%s: echo: %q", sv.Name, got)
	}
	found := must(s, s.alice, abi.SysMcpTools, &abi.McpToolsArgs{ServerID: sv.Name, Query: "echo"})
	if len(found.Tools) == 0 || found.Tools[0].Name != "echo" {
		t.Fatalf("%s: a search for echo: %+v", sv.Name, found.Tools)
	}
	// Its first resource reads (resources/read), and a prompt with no
	// required argument gets its messages (prompts/get).
	d := must(s, s.alice, abi.SysMcpGet, &abi.McpGetArgs{Uid: 1000, ServerID: sv.Name})
	res := d.Resources[0]
	rr := must(s, s.alice, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: sv.Name, URI: res.URI})
	var contents []struct{ URI, Text, Blob string }
	if err := json.Unmarshal(rr.Contents, &contents); err != nil || len(contents) == 0 || contents[0].URI != res.URI || contents[0].Text+contents[0].Blob == "" {
		t.Fatalf("%s: read %s: %s %v", sv.Name, res.URI, rr.Contents, err)
	}
	got := false
	for _, p := range d.Prompts {
		if slices.ContainsFunc(p.Arguments, func(a abi.McpPromptArgument) bool { return a.Required }) {
			continue
		}
		pg := must(s, s.alice, abi.SysMcpPromptGet, &abi.McpPromptGetArgs{ServerID: sv.Name, Name: p.Name})
		var msgs []struct{ Role string }
		if err := json.Unmarshal(pg.Messages, &msgs); err != nil || len(msgs) == 0 || msgs[0].Role == "" {
			t.Fatalf("%s: prompt %s: %s %v", sv.Name, p.Name, pg.Messages, err)
		}
		got = true
		break
	}
	if !got {
		t.Fatalf("%s: no prompt without a required argument: %+v", sv.Name, d.Prompts)
	}
}
