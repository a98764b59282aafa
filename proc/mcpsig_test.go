package proc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// The CodeMode tool's description lists the owner's MCP tools as
// TypeScript-style signatures generated from their input schemas:
// names and types only, never whole schemas, at most 40, and how many
// more there are.
func TestMcpSignatures(t *testing.T) {
	tool := func(name, schema string) abi.McpToolSummary {
		return abi.McpToolSummary{Name: name, InputSchema: json.RawMessage(schema)}
	}
	for _, c := range []struct {
		server string
		tool   abi.McpToolSummary
		want   string
	}{
		{"everything", tool("add", `{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`),
			"mcp.everything.add(args: {a: number, b: number}): Promise<any>"},
		{"everything", tool("echo", `{"type":"object","properties":{"message":{"type":"string","description":"long words"}}}`),
			"mcp.everything.echo(args: {message?: string}): Promise<any>"},
		{"my-server", tool("get-tiny", `{"type":"object","properties":{"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},"mode":{"enum":["a","b"]},"o":{"type":"object","properties":{"x":{"type":"string"}}}},"required":["n"]}`),
			`mcp["my-server"]["get-tiny"](args: {mode?: "a" | "b", n: number, o?: object, tags?: string[]}): Promise<any>`},
		{"s", tool("none", ``), "mcp.s.none(args: any): Promise<any>"},
	} {
		if got := mcpSignature(c.server, c.tool); got != c.want {
			t.Errorf("%s: got %s, want %s", c.tool.Name, got, c.want)
		}
	}
	// A huge schema is cut to object; many tools are capped and counted.
	var props []string
	for i := range 100 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
	}
	big := tool("big", `{"type":"object","properties":{`+strings.Join(props, ",")+`}}`)
	if got := mcpSignature("s", big); got != "mcp.s.big(args: object): Promise<any>" {
		t.Errorf("big: %s", got)
	}
	var many []abi.McpToolSummary
	for i := range 50 {
		many = append(many, tool(fmt.Sprintf("t%d", i), `{"type":"object","properties":{"x":{"type":"string"}}}`))
	}
	out := mcpSignatures([]abi.McpServerSummary{{Name: "s", Tools: many}})
	if n := strings.Count(out, "Promise<any>"); n != maxSignatures || !strings.Contains(out, "... and 10 more") {
		t.Errorf("capped: %d signatures\n%s", n, out)
	}
	if mcpSignatures(nil) != "" {
		t.Error("no tools: want no section")
	}
}
