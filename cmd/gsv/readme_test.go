package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// readmeCommands returns the gsv commands the README's synopsis (the code
// block of its "## Commands" section) names: the first word of each
// alternative of the lines that start with "gsv" or "|".
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Commands\n")
	if !ok {
		t.Fatal(`README.md has no "## Commands" section`)
	}
	_, block, ok := strings.Cut(sec, "```\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the Commands section has no code block")
	}
	var out []string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line, _, _ = strings.Cut(line, "#"); !strings.HasPrefix(line, "gsv ") && !strings.HasPrefix(line, "|") {
			continue
		}
		line = " " + strings.TrimPrefix(strings.TrimPrefix(line, "gsv "), "|") + " "
		for _, alt := range strings.Split(line, " | ") {
			f := strings.Fields(alt)
			if len(f) > 0 && f[0] != "" && !strings.HasPrefix(f[0], "-") && !strings.HasPrefix(f[0], "[") &&
				strings.ToLower(f[0]) == f[0] && !slices.Contains(out, f[0]) {
				out = append(out, f[0])
			}
		}
	}
	return out
}

// The README's synopsis names every command of gsv, and only those: a
// reader of the README finds each one.
func TestREADMECommands(t *testing.T) {
	named := readmeCommands(t)
	root := rootCmd(io.Discard)
	have := []string{"completion"} // cobra adds it when it runs
	for _, cmd := range root.Commands() {
		if cmd.Hidden || cmd.Name() == "help" {
			continue
		}
		have = append(have, cmd.Name())
		if !slices.Contains(named, cmd.Name()) {
			t.Errorf("README.md's Commands do not name gsv %s", cmd.Name())
		}
	}
	for _, n := range named {
		if !slices.Contains(have, n) {
			t.Errorf("README.md's Commands name gsv %s, which does not exist (gsv has %v)", n, have)
		}
	}
}
