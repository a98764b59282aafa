package proc

import (
	"encoding/json"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// TestProcCost: a process's usage per model, priced by the provider's
// report or config/ai/prices; a call with no known price makes the cost
// null and costIncomplete, never zero; a malformed table is refused.
func TestProcCost(t *testing.T) {
	h := newCfgHarness(t)
	h.setCfg(h.root, "config/ai/provider", "scripted", "config/ai/script", "~/turns.jsonl")
	h.must(h.alice, "fs.write", map[string]any{"path": "~/turns.jsonl", "content": `{"text":"one","usage":{"in":1000,"out":500,"usd":0.25}}` + "\n" +
		`{"text":"two","usage":{"in":100,"out":50}}` + "\n"}, nil)
	cost := func() abi.CostResult {
		var c abi.CostResult
		h.must(h.alice, "proc.cost", map[string]any{}, &c)
		return c
	}
	h.waitRun(h.send(h.alice, "", "", "go").RunID)
	if c := cost(); c.Cost == nil || *c.Cost != 0.25 || c.CostIncomplete || len(c.Models) != 1 || c.TokensIn != 1000 {
		b, _ := json.Marshal(c)
		t.Fatalf("after a reported call: %s", b)
	}
	h.waitRun(h.send(h.alice, "", "", "go").RunID)
	if c := cost(); c.Cost != nil || !c.CostIncomplete || c.Models[0].Cost != nil || c.TokensOut != 550 {
		b, _ := json.Marshal(c)
		t.Fatalf("after an unpriced call: %s", b)
	}
	if err := h.call(h.root, "sys.config.set", map[string]any{"key": "config/ai/prices", "value": "scripted/* 1"}, nil); abi.Code(err) != 400 {
		t.Fatalf("a malformed prices table: %v", err)
	}
	h.setCfg(h.root, "config/ai/prices", "# per million tokens\nscripted/* 100 200\n")
	if c := cost(); c.Cost == nil || *c.Cost != (1100*100.0+550*200.0)/1e6 || c.CostIncomplete {
		b, _ := json.Marshal(c)
		t.Fatalf("priced by the table: %s", b)
	}
}
