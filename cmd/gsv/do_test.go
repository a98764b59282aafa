package main

import (
	"encoding/json"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// decodeAs decodes a result into the descriptor's result type: a record
// through its pointer, and refuses a null or a result of another shape.
func TestDecodeAs(t *testing.T) {
	w, err := decodeAs[*abi.WhoamiResult](json.RawMessage(`{"role":"user","capabilities":["*"],"process":{"uid":1000,"username":"alice"}}`))
	if err != nil || w.Role != "user" || w.Process.Username != "alice" {
		t.Fatalf("a record: %+v %v", w, err)
	}
	for _, bad := range []string{`null`, `[]`, `"x"`} {
		if r, err := decodeAs[*abi.WhoamiResult](json.RawMessage(bad)); err == nil {
			t.Errorf("%s decoded: %+v", bad, r)
		}
	}
	if s, err := decodeAs[string](json.RawMessage(`"hi"`)); err != nil || s != "hi" {
		t.Errorf("a string: %q %v", s, err)
	}
}
