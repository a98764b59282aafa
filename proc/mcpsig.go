package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// The bounds of the MCP signatures in the CodeMode tool's description.
const (
	// maxSignatures is how many tools' signatures are listed; the rest
	// are counted.
	maxSignatures = 40
	// maxSignature is the longest one signature (its argument type is
	// cut to fit).
	maxSignature = 240
)

// jsIdent matches a name that is a JavaScript identifier as it stands.
var jsIdent = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// jsMember is ".name", or `["name"]` for a name that is not an
// identifier.
func jsMember(name string) string {
	if jsIdent.MatchString(name) {
		return "." + name
	}
	b, _ := json.Marshal(name)
	return "[" + string(b) + "]"
}

// tsType is a TypeScript-style type of a JSON Schema: its properties'
// names and types at the top level, a nested object's as "object".
func tsType(schema json.RawMessage, depth int) string {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Items      json.RawMessage            `json:"items"`
		Enum       []any                      `json:"enum"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return "any"
	}
	if len(s.Enum) > 0 && len(s.Enum) <= 6 {
		var parts []string
		for _, e := range s.Enum {
			b, _ := json.Marshal(e)
			parts = append(parts, string(b))
		}
		return strings.Join(parts, " | ")
	}
	typ, _ := s.Type.(string)
	if list, ok := s.Type.([]any); ok {
		var parts []string
		for _, t := range list {
			if ts, ok := t.(string); ok {
				parts = append(parts, tsType(json.RawMessage(`{"type":"`+ts+`"}`), depth))
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, " | ")
		}
	}
	switch typ {
	case "string":
		return "string"
	case "number", "integer":
		return "number"
	case "boolean":
		return "boolean"
	case "null":
		return "null"
	case "array":
		if t := tsType(s.Items, depth+1); t != "any" && !strings.Contains(t, " | ") {
			return t + "[]"
		}
		return "any[]"
	case "object", "":
		if s.Properties == nil {
			if typ == "object" {
				return "object"
			}
			return "any"
		}
		if depth > 0 {
			return "object"
		}
		names := make([]string, 0, len(s.Properties))
		for n := range s.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			key := n
			if !jsIdent.MatchString(n) {
				b, _ := json.Marshal(n)
				key = string(b)
			}
			if !slices.Contains(s.Required, n) {
				key += "?"
			}
			parts = append(parts, key+": "+tsType(s.Properties[n], depth+1))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "any"
}

// mcpSignature is one tool's TypeScript-style signature, at most
// maxSignature bytes.
func mcpSignature(server string, t abi.McpToolSummary) string {
	head := "mcp" + jsMember(server) + jsMember(t.Name) + "(args: "
	tail := "): Promise<any>"
	arg := tsType(t.InputSchema, 0)
	if len(head)+len(arg)+len(tail) > maxSignature {
		arg = "object"
	}
	return head + arg + tail
}

// mcpSignatures lists the signatures of servers' tools, at most
// maxSignatures, and says how many more there are; "" for no tool.
func mcpSignatures(servers []abi.McpServerSummary) string {
	var b strings.Builder
	n, total := 0, 0
	for _, s := range servers {
		for _, t := range s.Tools {
			total++
			if n < maxSignatures {
				b.WriteString("\n")
				b.WriteString(mcpSignature(s.Name, t))
				n++
			}
		}
	}
	if total == 0 {
		return ""
	}
	out := "\nYour owner's MCP tools in a block:" + b.String()
	if total > n {
		out += fmt.Sprintf("\n... and %d more (find them with the Mcp tool).", total-n)
	}
	return out
}

// toolDefsFor are the tool definitions of a model request of caller's:
// toolDefs, with the signatures of the owner's MCP tools in the
// CodeMode tool's description (read from what the servers' last
// discovery kept; no server is asked).
func (m *engine) toolDefsFor(ctx context.Context, caller *kernel.Caller) []model.ToolDef {
	res, err := kernel.Do(ctx, m.k, caller, abi.SysMcpList, &abi.McpListArgs{})
	if err != nil || len(res.Servers) == 0 {
		return toolDefs
	}
	sigs := mcpSignatures(res.Servers)
	if sigs == "" {
		return toolDefs
	}
	defs := slices.Clone(toolDefs)
	for i := range defs {
		if defs[i].Name == "CodeMode" {
			defs[i].Description += sigs
		}
	}
	return defs
}
