package mcp_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// A server that says its tool list changed (notifications/tools/
// list_changed: the test server's grow adds a tool) is discovered again
// by itself: the new tool is listed, searchable and callable, with no
// refresh.
func TestListChangedRediscovers(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	must(s, s.alice, abi.SysMcpAdd, stdioArgs("t", abi.NetworkNone))
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "t", Name: "grow", Arguments: json.RawMessage(`{"name":"fresh"}`)})
	if got := text(t, r); got != "added fresh" {
		t.Fatalf("grow: %q", got)
	}
	var names []string
	for deadline := time.Now().Add(liveness); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		list := must(s, s.alice, abi.SysMcpList, &abi.McpListArgs{}).Servers
		names = names[:0]
		for _, tl := range list[0].Tools {
			names = append(names, tl.Name)
		}
		if slices.Contains(names, "fresh") {
			break
		}
	}
	if !slices.Contains(names, "fresh") {
		t.Fatalf("the tool grow added was never discovered: %v", names)
	}
	if found := must(s, s.alice, abi.SysMcpTools, &abi.McpToolsArgs{Query: "grow added"}).Tools; len(found) != 1 || found[0].Name != "fresh" {
		t.Fatalf("a search for the new tool: %+v", found)
	}
	r = must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "t", Name: "fresh", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if got := text(t, r); got != "grown: hi" {
		t.Fatalf("fresh: %q", got)
	}
}
