package model

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScriptedEmitMarker: a streamed piece carries its emit time in
// place of EmitMarker; the returned text keeps the marker.
func TestScriptedEmitMarker(t *testing.T) {
	s, err := ParseScript([]byte(`{"text":"at ` + EmitMarker + ` done"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMicro()
	var pieces []string
	resp, err := s.Complete(context.Background(), Request{}, func(p string) { pieces = append(pieces, p) })
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMicro()
	if len(pieces) != 3 || pieces[0] != "at " || pieces[2] != "done" {
		t.Fatalf("pieces %q", pieces)
	}
	at, err := strconv.ParseInt(strings.TrimSpace(pieces[1]), 10, 64)
	if err != nil || at < before || at > after {
		t.Fatalf("emit time %q not in [%d, %d]", pieces[1], before, after)
	}
	if !strings.Contains(resp.Text, EmitMarker) {
		t.Fatalf("reply %q lost the marker", resp.Text)
	}
}
