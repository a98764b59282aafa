package proc

import (
	"encoding/json"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/proc/model"
)

// The content proc stores for an assistant message and a tool result is
// the JSON of abi's records (what gsv decodes to show a history): each
// stored form reads back into the abi record and writes the same bytes.
func TestContentIsABIs(t *testing.T) {
	same := func(name string, stored any, rec any) {
		t.Helper()
		b, err := json.Marshal(stored)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, rec); err != nil {
			t.Fatalf("%s: %s does not decode into %T: %v", name, b, rec, err)
		}
		b2, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(b2) {
			t.Errorf("%s: stored %s, abi writes %s", name, b, b2)
		}
	}
	same("text only", assistantContent{Text: "done"}, &abi.AssistantContent{})
	same("tool calls", assistantContent{Text: "looking", ToolCalls: []model.ToolCall{
		{ID: "call_1", Name: "Read", Args: json.RawMessage(`{"path":"~/a.txt"}`)},
		{ID: "call_2", Name: "Processes", Args: json.RawMessage(`{}`)},
	}}, &abi.AssistantContent{})
	same("result", toolResultContent{ToolCallID: "call_1", ToolName: "Read", Output: "     1\thi\n"}, &abi.ToolResultContent{})
	same("error", toolResultContent{ToolCallID: "call_2", ToolName: "Shell", Output: "Tool execution denied by user", IsError: true}, &abi.ToolResultContent{})
}
