package mcp_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// A resource's contents and a prompt's messages are explicit calls
// (resources/read, prompts/get through the SDK's client) of the owner's
// server: a large contents is kept as a large tool result is, errors
// name the server, and another user's server is not there.
func TestResourceReadAndPromptGet(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	must(s, s.alice, abi.SysMcpAdd, stdioArgs("t", abi.NetworkNone))

	r := must(s, s.alice, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: "t", URI: "test://readme"})
	var contents []struct{ URI, Text string }
	if err := json.Unmarshal(r.Contents, &contents); err != nil || len(contents) != 1 || contents[0].Text != "hello" || r.Blob != nil {
		t.Fatalf("test://readme: %s %v %+v", r.Contents, err, r.Blob)
	}
	big := must(s, s.alice, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: "t", URI: "test://big/2097152"})
	if big.Blob == nil || big.Contents != nil || len(big.Blob.Preview) != 4096 || !strings.HasPrefix(big.Blob.Path, "/mcp/alice/t/results/") {
		t.Fatalf("a large resource: %+v", big.Blob)
	}
	f, err := do(s, s.alice, abi.SysMcpResultOpen, &abi.McpResultArgs{Uid: 1000, ServerID: "t", Digest: filepath.Base(big.Blob.Path)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(&contents); err != nil || len(contents) != 1 || len(contents[0].Text) != 2097152 {
		t.Fatalf("the kept contents: %v", err)
	}

	p := must(s, s.alice, abi.SysMcpPromptGet, &abi.McpPromptGetArgs{ServerID: "t", Name: "greet", Arguments: map[string]string{"who": "bob"}})
	if p.Description != "a greeting" || !strings.Contains(string(p.Messages), `"text":"Say hello to bob."`) || !strings.Contains(string(p.Messages), `"role":"user"`) {
		t.Fatalf("greet: %+v %s", p, p.Messages)
	}

	for _, c := range []struct {
		name string
		err  func() error
		kind abi.Kind
		want string
	}{
		{"unknown resource", func() error {
			_, err := do(s, s.alice, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: "t", URI: "test://nosuch"})
			return err
		}, abi.Invalid, "MCP server t: resource test://nosuch: "},
		{"unknown prompt", func() error {
			_, err := do(s, s.alice, abi.SysMcpPromptGet, &abi.McpPromptGetArgs{ServerID: "t", Name: "nosuch"})
			return err
		}, abi.Invalid, "MCP server t: prompt nosuch: "},
		{"a required argument missing", func() error {
			_, err := do(s, s.alice, abi.SysMcpPromptGet, &abi.McpPromptGetArgs{ServerID: "t", Name: "greet"})
			return err
		}, abi.Invalid, "MCP server t: prompt greet: argument who is required"},
		{"empty uri", func() error {
			_, err := do(s, s.alice, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: "t"})
			return err
		}, abi.Invalid, "uri: want"},
		{"bob reads alice's", func() error {
			_, err := do(s, s.bob, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: "t", URI: "test://readme"})
			return err
		}, abi.NotExist, "no such MCP server"},
		{"bob names alice's uid", func() error {
			uid := uint32(1000)
			_, err := do(s, s.bob, abi.SysMcpPromptGet, &abi.McpPromptGetArgs{Uid: &uid, ServerID: "t", Name: "greet"})
			return err
		}, abi.NotExist, "no such MCP server"},
	} {
		err := c.err()
		if abi.KindOf(err) != c.kind || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %v %q", c.name, err, c.kind, c.want)
		}
	}
}
