package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// bob can neither list, read, call, refresh nor remove alice's servers,
// by syscall or through the mount; root can, naming her uid. What bob
// asks of a server that is not his is answered as for one that is not
// there (removed:false, server:null, 404), so it tells him nothing.
func TestOwnersServersOnly(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	added := must(s, s.alice, abi.SysMcpAdd, stdioArgs("mine", abi.NetworkNone)).Server
	alice := uint32(1000)

	// Syscalls.
	if _, err := do(s, s.bob, abi.SysMcpList, &abi.McpListArgs{Uid: &alice}); abi.KindOf(err) != abi.Permission {
		t.Errorf("bob lists alice's servers: %v", err)
	}
	if l := must(s, s.bob, abi.SysMcpList, &abi.McpListArgs{}); len(l.Servers) != 0 {
		t.Errorf("bob's own list: %+v", l)
	}
	for _, key := range []string{added.ServerID, added.Name} {
		if _, err := do(s, s.bob, abi.SysMcpCall, &abi.McpCallArgs{ServerID: key, Name: "whoami"}); abi.KindOf(err) != abi.NotExist {
			t.Errorf("bob calls alice's %s: %v", key, err)
		}
		if _, err := do(s, s.bob, abi.SysMcpCall, &abi.McpCallArgs{Uid: &alice, ServerID: key, Name: "whoami"}); abi.KindOf(err) != abi.NotExist {
			t.Errorf("bob calls alice's %s naming her uid: %v", key, err)
		}
		if r := must(s, s.bob, abi.SysMcpRemove, &abi.McpServerArgs{ServerID: key}); r.Removed {
			t.Errorf("bob removed alice's %s", key)
		}
		if r := must(s, s.bob, abi.SysMcpRemove, &abi.McpServerArgs{Uid: &alice, ServerID: key}); r.Removed {
			t.Errorf("bob removed alice's %s naming her uid", key)
		}
		if r := must(s, s.bob, abi.SysMcpRefresh, &abi.McpServerArgs{Uid: &alice, ServerID: key}); r.Server != nil {
			t.Errorf("bob refreshed alice's %s: %+v", key, r.Server)
		}
		if _, err := do(s, s.bob, abi.SysMcpGet, &abi.McpGetArgs{Uid: alice, ServerID: key}); abi.KindOf(err) != abi.NotExist {
			t.Errorf("bob reads alice's %s: %v", key, err)
		}
	}
	if _, err := do(s, s.bob, abi.SysMcpTools, &abi.McpToolsArgs{Uid: &alice}); abi.KindOf(err) != abi.Permission {
		t.Errorf("bob searches alice's tools: %v", err)
	}
	if _, err := do(s, s.bob, abi.SysMcpAdd, &abi.McpAddArgs{Uid: &alice, Name: "planted", URL: "https://example.com/mcp"}); abi.KindOf(err) != abi.Permission {
		t.Errorf("bob adds a server for alice: %v", err)
	}
	// Root may, naming her uid.
	if l := must(s, s.root, abi.SysMcpList, &abi.McpListArgs{Uid: &alice}); len(l.Servers) != 1 {
		t.Errorf("root lists alice's servers: %+v", l)
	}
	r := must(s, s.root, abi.SysMcpCall, &abi.McpCallArgs{Uid: &alice, ServerID: "mine", Name: "echo", Arguments: json.RawMessage(`{"message":"root"}`)})
	if got := text(t, r); got != "echo: root" {
		t.Errorf("root calls alice's server: %q", got)
	}

	// Through the mount: alice lists and reads, and calls through clone;
	// bob sees her directory and nothing in it.
	sh := s.mount()
	out, err := sh(1001, `ls "$M/mcp/alice" "$M/mcp/alice/mine" "$M/mcp/alice/mine/tools" && cat "$M/mcp/alice/mine/status" "$M/mcp/alice/mine/tools/echo/schema" "$M/mcp/alice/mine/tools/echo/doc" && ls "$M/mcp/alice/mine/resources" "$M/mcp/alice/mine/prompts"`)
	for _, want := range []string{"mine\n", "ctl\nerr\nprompts\nresources\nresults\nstatus\ntools\n", "big\ndie\necho\ngrow\nsleep\nwhoami\n",
		"state: ready\n", "tools: 6\n", "templates: 1\n", `"message": {`, "echoes a message back\n", "readme\n", "greet\n"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("alice reads her servers' files (%v), want %q in:\n%s", err, want, out)
		}
	}
	out, err = sh(1001, `exec 3<>"$M/mcp/alice/mine/tools/echo/clone"; echo '{"message":"by file"}' >&3; head -n1 <&3`)
	if err != nil || !strings.Contains(out, `"text":"echo: by file"`) {
		t.Fatalf("alice calls through clone: %v\n%s", err, out)
	}
	out, err = sh(1001, `exec 3<>"$M/mcp/alice/mine/tools/echo/clone"; echo '[1]' >&3; head -n1 <&3`)
	if err != nil || !strings.Contains(out, `"code":400`) || !strings.Contains(out, "want a JSON object") {
		t.Fatalf("a bad call through clone: %v\n%s", err, out)
	}
	for _, script := range []string{
		`ls "$M/mcp/alice"`,
		`ls "$M/mcp/alice/mine"`,
		`cat "$M/mcp/alice/mine/status"`,
		`cat "$M/mcp/alice/mine/tools/echo/schema"`,
		`exec 3<>"$M/mcp/alice/mine/tools/echo/clone"`,
		`echo refresh > "$M/mcp/alice/mine/ctl"`,
	} {
		// Denied, or (past alice's directory) not there: bob learns
		// nothing of her servers' names.
		if out, err := sh(1002, script); err == nil || !strings.Contains(out, "ermission denied") && !strings.Contains(out, "No such file") && !strings.Contains(out, "nonexistent") {
			t.Errorf("bob: %s: %v\n%s", script, err, out)
		}
	}
	if out, err := sh(1002, `ls "$M/mcp"`); err != nil || !strings.Contains(out, "alice\nbob\nctl\nerr\nroot\n") {
		t.Errorf("bob lists /mcp: %v\n%s", err, out)
	}
	// Reads are free: none of the above asked the server, which still
	// answers its first connection (never refreshed).
	if sv := server(t, s, "mine"); sv.State != abi.McpReady {
		t.Errorf("after the reads: %+v", sv)
	}
}
