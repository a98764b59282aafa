package proc

import (
	"encoding/json"
	"strings"
	"testing"
)

// Skills: the index (names and descriptions) is in the system prompt,
// the Skill tool returns a body, bad front matter is left out with a
// note, and the working directory's skill shadows the home's.
func TestSkills(t *testing.T) {
	h := newPTHarness(t)
	write := func(p, content string) {
		h.must(h.alice, "fs.write", map[string]any{"path": p, "content": content}, nil)
	}
	write("~/skills.d/release/SKILL.md", "---\nname: release\ndescription: the home's release steps\n---\nHOME BODY\n")
	// The process's working directory is alice's home: its .gsv/skills.d
	// is the workspace's, and its release wins.
	write("~/.gsv/skills.d/release/SKILL.md", "---\nname: release\ndescription: >\n  Tag and push\n  a release.\nlicense: MIT\n---\n# Release\nRun make tag, then git push --tags.\n")
	write("~/skills.d/broken/SKILL.md", "---\nname: [broken\n---\nbody\n")
	write("~/skills.d/nofront/SKILL.md", "just a body\n")
	write("~/skills.d/misnamed/SKILL.md", "---\nname: other\ndescription: d\n---\n")
	write("~/skills.d/notaskill/README.md", "no SKILL.md here\n")

	s := h.setScript(1000, "skill.jsonl")
	pid := h.spawn(h.alice, "skills")
	r := h.send(h.alice, pid, "", "cut the release")
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	sys := reqs[0].System
	for _, want := range []string{
		"- release: Tag and push a release.",
		"skills.d/broken/SKILL.md: front matter:",
		"skills.d/nofront/SKILL.md: no front matter",
		`skills.d/misnamed/SKILL.md: name "other" differs from its directory "misnamed"`,
	} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	for _, not := range []string{"the home's release steps", "notaskill", "HOME BODY", "make tag"} {
		if strings.Contains(sys, not) {
			t.Errorf("system prompt has %q:\n%s", not, sys)
		}
	}
	ms := h.history(h.alice, pid, "default").Messages
	if got := ptRoles(ms); got != "user,assistant,toolResult,toolResult,assistant" {
		t.Fatalf("roles %s: %s", got, ptDump(ms))
	}
	res := ptTool(t, ms[2])
	if res.ToolName != "Skill" || res.IsError {
		t.Fatalf("tool result %+v", res)
	}
	// A skill not listed (misnamed's front matter is bad) is a clear error.
	if res := ptTool(t, ms[3]); !res.IsError || !strings.Contains(res.Output, `no skill "misnamed"`) {
		t.Fatalf("unknown skill's result %+v", res)
	}
	var out skillResult
	if err := json.Unmarshal([]byte(res.Output), &out); err != nil {
		t.Fatalf("Skill output %q: %v", res.Output, err)
	}
	if out.Name != "release" || out.Body != "# Release\nRun make tag, then git push --tags.\n" || !strings.HasSuffix(out.Dir, ".gsv/skills.d/release") {
		t.Fatalf("Skill result %+v", out)
	}
}

func TestParseSkill(t *testing.T) {
	tests := []struct {
		in, name, desc, body, err string
	}{
		{in: "---\nname: a\ndescription: b\n---\nbody\n", name: "a", desc: "b", body: "body\n"},
		{in: "\ufeff---\r\nname: 'a-b.c_d'\r\ndescription: \"x\"\r\n---\r\n", name: "a-b.c_d", desc: "x", body: ""},
		{in: "---\nname: a\ndescription: |\n  one\n  two\nextra: [1, 2]\n---", name: "a", desc: "one two"},
		{in: "body", err: "no front matter"},
		{in: "---\nname: a\ndescription: b\n", err: "no closing line"},
		{in: "---\nname: a\n---\n", err: "no description"},
		{in: "---\ndescription: b\n---\n", err: "no name"},
		{in: "---\nname: a/b\ndescription: b\n---\n", err: "has a character"},
		{in: "---\nname: .x\ndescription: b\n---\n", err: "starts with a dot"},
		{in: "---\nname: [a\ndescription: b\n---\n", err: "front matter:"},
		{in: "---\nname: {a: 1}\ndescription: b\n---\n", err: "front matter:"},
		{in: "---\nname: a\ndescription: b\n---\n\xff", err: "not UTF-8"},
		{in: "---\nname: " + strings.Repeat("a", 65) + "\ndescription: b\n---\n", err: "name over"},
		{in: "---\nname: a\ndescription: " + strings.Repeat("b", 1025) + "\n---\n", err: "description over"},
		{in: "---\n" + strings.Repeat("# pad\n", 2000) + "---\n", err: "front matter over"},
	}
	for _, tt := range tests {
		name, desc, body, err := parseSkill([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseSkill(%.40q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || name != tt.name || desc != tt.desc || string(body) != tt.body {
			t.Errorf("parseSkill(%.40q) = %q, %q, %q, %v", tt.in, name, desc, body, err)
		}
	}
}

// FuzzParseSkill: any input parses or fails without panicking, and a
// parse gives a valid name and a bounded one-line description.
func FuzzParseSkill(f *testing.F) {
	for _, s := range []string{
		"---\nname: a\ndescription: b\n---\nbody\n",
		"---\nname: a\ndescription: >\n  x\n  y\n---\n",
		"---\nname: &a x\ndescription: *a\n---\n",
		"---\n---\n", "", "---", "---\nname: [\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		name, desc, _, err := parseSkill(in)
		if err != nil {
			return
		}
		if checkSkillName(name) != nil || desc == "" || len(desc) > skillDescMax || strings.ContainsAny(desc, "\n\r") {
			t.Fatalf("parseSkill(%q) = %q, %q", in, name, desc)
		}
	})
}
