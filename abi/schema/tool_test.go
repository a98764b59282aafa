package schema_test

import (
	"encoding/json"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/abi/schema"
)

// The agent's tools' schemas, inferred from abi's tool types, are the
// JSON the agent loop's hand-written schemas were, byte for byte: a model
// is shown the same tools.
func TestToolSchemas(t *testing.T) {
	const target = `"target":{"type":"string","description":"the device to run on (see the devices in your instructions); omit for this machine"}`
	for _, c := range []struct {
		name string
		got  json.RawMessage
		want string
	}{
		{"Read", schema.MustTool[abi.ReadTool](), `{"type":"object","properties":{` + target + `,"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}`},
		{"Write", schema.MustTool[abi.WriteTool](), `{"type":"object","properties":{` + target + `,"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`},
		{"Edit", schema.MustTool[abi.EditTool](), `{"type":"object","properties":{` + target + `,"path":{"type":"string"},"oldString":{"type":"string"},"newString":{"type":"string"},"replaceAll":{"type":"boolean"}},"required":["path","oldString","newString"]}`},
		{"Delete", schema.MustTool[abi.DeleteTool](), `{"type":"object","properties":{` + target + `,"path":{"type":"string"}},"required":["path"]}`},
		{"Search", schema.MustTool[abi.SearchTool](), `{"type":"object","properties":{` + target + `,"query":{"type":"string"},"path":{"type":"string"},"include":{"type":"string"}},"required":["query"]}`},
		{"Shell", schema.MustTool[abi.ShellTool](), `{"type":"object","properties":{` + target + `,"command":{"type":"string"},"cwd":{"type":"string"},"timeoutMs":{"type":"integer"}},"required":["command"]}`},
		{"Processes", schema.MustTool[abi.NoToolArgs](), `{"type":"object","properties":{}}`},
		{"Mail", schema.MustTool[abi.MailTool](), `{"type":"object","properties":{"pid":{"type":"string"},"message":{"type":"string"}},"required":["pid","message"]}`},
		{"Call", schema.MustTool[abi.CallTool](), `{"type":"object","properties":{"pid":{"type":"string"},"message":{"type":"string"},"timeoutMs":{"type":"integer"}},"required":["pid","message"]}`},
		{"Delegate", schema.MustTool[abi.DelegateTool](), `{"type":"object","properties":{"task":{"type":"string"},"label":{"type":"string"},"profile":{"type":"string"},"timeoutMs":{"type":"integer"}},"required":["task"]}`},
		{"Direct", schema.MustTool[abi.DirectTool](), `{"type":"object","properties":{"pid":{"type":"string"},"checkpoint":{"type":"integer"},"directive":{"type":"object"}},"required":["pid","directive"]}`},
		{"Watch", schema.MustTool[abi.WatchTool](), `{"type":"object","properties":{"signal":{"type":"string"},"processId":{"type":"string"},"once":{"type":"boolean"},"ttlMs":{"type":"integer"}},"required":["signal","processId"]}`},
		{"CodeMode", schema.MustTool[abi.CodeModeTool](), `{"type":"object","properties":{"code":{"type":"string","description":"the body of an async JavaScript function"},"timeoutMs":{"type":"integer"}},"required":["code"]}`},
	} {
		if string(c.got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, c.got, c.want)
		}
	}
}
