package mcp_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// A stdio server runs as its owner inside an exec session of theirs:
// the SDK-written test server reports alice's uid (inside her sandbox's
// user namespace, her GSV uid; never root's) and the network its session
// was opened with (none: loopback only; full: the host's). Its tools,
// resources and prompts are discovered at add and listed from the store.
func TestStdioServerRunsAsItsOwner(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	for _, network := range []string{abi.NetworkNone, abi.NetworkFull} {
		t.Run(network, func(t *testing.T) {
			res := must(s, s.alice, abi.SysMcpAdd, stdioArgs("probe-"+network, network))
			sv := res.Server
			if sv == nil || sv.State != abi.McpReady || sv.Error != nil {
				t.Fatalf("add: %+v (error %v)", sv, deref(sv.Error))
			}
			var names []string
			for _, tl := range sv.Tools {
				names = append(names, tl.Name)
			}
			if !slices.Equal(names, []string{"big", "die", "echo", "grow", "sleep", "whoami"}) || sv.ResourceCount != 1 || sv.PromptCount != 1 ||
				sv.Uid != 1000 || sv.Transport != abi.McpTransportStdio || sv.NetworkMode != network || deref(sv.Instructions) != "a server for tests" {
				t.Fatalf("discovered: tools %v, %+v", names, sv)
			}
			r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: sv.Name, Name: "whoami"})
			var who struct {
				Uid        int      `json:"uid"`
				Interfaces []string `json:"interfaces"`
				Home       string   `json:"home"`
			}
			if err := json.Unmarshal(r.StructuredContent, &who); err != nil {
				t.Fatalf("whoami: %s: %v", r.StructuredContent, err)
			}
			if who.Uid != 1000 || who.Home != "/home/alice" {
				t.Fatalf("the server runs as uid %d home %q, want alice's sandbox (1000, /home/alice)", who.Uid, who.Home)
			}
			onlyLoopback := slices.Equal(who.Interfaces, []string{"lo"})
			if onlyLoopback != (network == abi.NetworkNone) {
				t.Fatalf("network %s: the server sees interfaces %v", network, who.Interfaces)
			}
		})
	}
	// Echo, by the server's id as well as its name.
	list := must(s, s.alice, abi.SysMcpList, &abi.McpListArgs{})
	if len(list.Servers) != 2 {
		t.Fatalf("list: %+v", list)
	}
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: list.Servers[0].ServerID, Name: "echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if got := text(t, r); got != "echo: hi" || r.IsError {
		t.Fatalf("echo: %q %+v", got, r)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var _ = strings.Contains
