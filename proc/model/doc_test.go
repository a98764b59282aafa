package model

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// The script format is documented where users look for it
// (docs/processes.md, "The scripted provider's script"): the example there
// parses, and every field a script may use is named.
func TestScriptFormatDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/processes.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "### The scripted provider's script")
	if start < 0 {
		t.Fatal(`docs/processes.md has no section "The scripted provider's script"`)
	}
	section := doc[start:]
	if end := strings.Index(section[4:], "\n## "); end >= 0 {
		section = section[:end+4]
	}
	_, example, ok := strings.Cut(section, "<!-- script-example -->")
	example, _, ok2 := strings.Cut(example, "<!-- /script-example -->")
	if !ok || !ok2 {
		t.Fatal("the section has no <!-- script-example --> ... <!-- /script-example --> block")
	}
	example = strings.ReplaceAll(example, "```", "")
	s, err := ParseScript([]byte(example))
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	if s.Remaining() < 2 {
		t.Fatalf("the documented example has %d turns", s.Remaining())
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[ScriptTurn](), reflect.TypeFor[ScriptTool](), reflect.TypeFor[ScriptUsage]()} {
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !strings.Contains(section, "`"+name+"`") && !strings.Contains(section, name+",") && !strings.Contains(section, name+"}") {
				t.Errorf("%s.%s (%q) is not documented in the script section", typ.Name(), f.Name, name)
			}
		}
	}
	if !strings.Contains(section, ScriptExhausted) {
		t.Errorf("the section does not say what an exhausted script answers (%s)", ScriptExhausted)
	}
}
