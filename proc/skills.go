package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Skills are directories `<name>/SKILL.md` under the owner's
// ~/skills.d, the working directory's .gsv/skills.d and the owner's
// active packages' /pkg/skills (docs/processes.md,
// *Skills*). Each SKILL.md opens with YAML front matter naming the skill
// and describing it; the index of names and descriptions goes into the
// system prompt, and the Skill tool loads a body when the model asks.

const (
	skillsMax       = 64        // skills listed in an index, per directory
	skillFileMax    = 256 << 10 // bytes of a SKILL.md
	skillNameMax    = 64
	skillDescMax    = 1024
	skillFrontMax   = 8 << 10 // bytes of front matter
	skillToolName   = "Skill"
	skillHomeDir    = "~/skills.d"
	skillPkgDir     = "/pkg/skills" // the skills of the owner's active packages (docs/packages.md)
	skillWorkDirRel = ".gsv/skills.d"
)

// skillToolDoc is the Skill tool's description.
const skillToolDoc = "Load a skill's instructions (the body of its SKILL.md) by the name your instructions list; " +
	"the result names the skill's directory, whose other files you may Read."

// skillFront is the front matter's two keys; others are ignored.
type skillFront struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// parseSkill splits a SKILL.md into its front matter's name and
// description and its body. The file starts with a line "---" and the
// front matter ends at the next line "---"; name is one line of at most
// 64 bytes of [a-z0-9_.-] (not starting with a dot), description is
// non-empty and at most 1024 bytes (newlines folded to spaces). Anything
// else is an error that says what is wrong.
func parseSkill(raw []byte) (name, desc string, body []byte, err error) {
	if !utf8.Valid(raw) {
		return "", "", nil, errors.New("not UTF-8")
	}
	raw = bytes.TrimPrefix(raw, []byte("\ufeff"))
	first, rest, ok := cutLine(raw)
	if !ok || strings.TrimRight(string(first), " \t\r") != "---" {
		return "", "", nil, errors.New("no front matter (the file must start with a line ---)")
	}
	var front []byte
	for {
		line, after, more := cutLine(rest)
		if strings.TrimRight(string(line), " \t\r") == "---" {
			front, body = raw[len(first)+1:len(raw)-len(rest)], after
			break
		}
		if !more {
			return "", "", nil, errors.New("front matter has no closing line ---")
		}
		rest = after
		if len(raw)-len(rest) > skillFrontMax {
			return "", "", nil, fmt.Errorf("front matter over %d bytes", skillFrontMax)
		}
	}
	var f skillFront
	if err := yaml.Unmarshal(front, &f); err != nil {
		return "", "", nil, fmt.Errorf("front matter: %v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	name = strings.TrimSpace(f.Name)
	if err := checkSkillName(name); err != nil {
		return "", "", nil, err
	}
	desc = strings.Join(strings.Fields(f.Description), " ")
	switch {
	case desc == "":
		return "", "", nil, errors.New("front matter has no description")
	case len(desc) > skillDescMax:
		return "", "", nil, fmt.Errorf("description over %d bytes", skillDescMax)
	}
	return name, desc, body, nil
}

// cutLine is raw's first line (without its newline), the rest after it,
// and whether a newline ended the line.
func cutLine(raw []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(raw, '\n')
	if i < 0 {
		return raw, nil, false
	}
	return raw[:i], raw[i+1:], true
}

// checkSkillName says what is wrong with a skill's name, if anything.
func checkSkillName(name string) error {
	if name == "" {
		return errors.New("front matter has no name")
	}
	if len(name) > skillNameMax {
		return fmt.Errorf("name over %d bytes", skillNameMax)
	}
	if name[0] == '.' {
		return fmt.Errorf("name %q starts with a dot", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("name %q has a character other than letters, digits, - _ .", name)
		}
	}
	return nil
}

// skill is one listed skill: its name, description and directory.
type skill struct {
	name, desc, dir string
}

// skillIndex reads the skills the caller's process sees, as the caller
// (reads only, through the dispatcher): the working directory's
// .gsv/skills.d first, then ~/skills.d, then the active packages'
// /pkg/skills; a name found in more than one is the first's. bad are
// notes on the SKILL.md files left out.
func (m *engine) skillIndex(ctx context.Context, caller *kernel.Caller, cwd string) (skills []skill, bad []string) {
	seen := map[string]bool{}
	dirs := []string{skillHomeDir, skillPkgDir}
	if cwd != "" {
		dirs = []string{path.Join(cwd, skillWorkDirRel), skillHomeDir, skillPkgDir}
	}
	for _, d := range dirs {
		res, err := kernel.Do(ctx, m.k, caller, abi.FsRead, &abi.FSReadArgs{Path: d})
		if err != nil || !res.OK || !res.Dir {
			continue
		}
		subs := res.Directories
		sort.Strings(subs)
		n := 0
		for _, sub := range subs {
			sub = strings.TrimSuffix(sub, "/")
			if n == skillsMax {
				bad = append(bad, fmt.Sprintf("%s: more than %d skills; the rest are left out", d, skillsMax))
				break
			}
			file := d + "/" + sub + "/SKILL.md"
			name, desc, _, err := m.readSkill(ctx, caller, file)
			switch {
			case errors.Is(err, errNoSkillFile):
				continue
			case err != nil:
				bad = append(bad, fmt.Sprintf("%s: %v", file, err))
				continue
			case name != sub:
				bad = append(bad, fmt.Sprintf("%s: name %q differs from its directory %q", file, name, sub))
				continue
			}
			n++
			if seen[name] {
				continue // the working directory's skill of that name is listed
			}
			seen[name] = true
			skills = append(skills, skill{name: name, desc: desc, dir: d + "/" + sub})
		}
	}
	sort.Slice(skills, func(i, j int) bool { return skills[i].name < skills[j].name })
	return skills, bad
}

// errNoSkillFile is a skill directory without a SKILL.md.
var errNoSkillFile = errors.New("no SKILL.md")

// readSkill reads and parses one SKILL.md as the caller.
func (m *engine) readSkill(ctx context.Context, caller *kernel.Caller, file string) (name, desc string, body []byte, err error) {
	var raw []byte
	if strings.HasPrefix(file, skillPkgDir+"/") {
		// A package's skill is a file of the namespace, not of the data
		// tree: fs.read reads it (raw, whole).
		var res *abi.FSReadResult
		if res, err = kernel.Do(ctx, m.k, caller, abi.FsRead, &abi.FSReadArgs{Path: file, Raw: true}); err == nil && !res.OK {
			err = abi.E(abi.NotExist, res.Error)
		}
		if err == nil {
			if len(res.Content) > skillFileMax {
				return "", "", nil, fmt.Errorf("over %d bytes", skillFileMax)
			}
			raw = []byte(res.Content)
		}
	} else {
		raw, err = kernel.Do(ctx, m.k, caller, abi.FsReadraw, &abi.FileArgs{Path: file, Max: skillFileMax})
	}
	if err != nil {
		if abi.KindOf(err) == abi.NotExist {
			return "", "", nil, errNoSkillFile
		}
		return "", "", nil, err
	}
	return parseSkill(raw)
}

// skillsPrompt lists the skills' names and descriptions for the Skill
// tool, and the SKILL.md files left out with why. A prompt is free: a
// directory that cannot be read is left out.
func (m *engine) skillsPrompt(ctx context.Context, b *strings.Builder, caller *kernel.Caller, cwd string) {
	skills, bad := m.skillIndex(ctx, caller, cwd)
	if len(skills) > 0 {
		b.WriteString("Skills you may load with the Skill tool (load one when its description fits the task):\n")
		for _, s := range skills {
			fmt.Fprintf(b, "- %s: %s\n", s.name, s.desc)
		}
	}
	if len(bad) > 0 {
		b.WriteString("Skills left out (tell your owner if they ask about skills):\n")
		for _, n := range bad {
			fmt.Fprintf(b, "- %s\n", n)
			m.log.Debug("proc: skill left out", slog.String("note", n))
		}
	}
}

// skillResult is the Skill tool's result.
type skillResult struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	Body string `json:"body"`
}

// skillTool runs the Skill tool as the caller: the named skill's body,
// from the same directories and in the same order as the index.
func (m *engine) skillTool(ctx context.Context, caller *kernel.Caller, cwd string, raw json.RawMessage) (string, bool) {
	var a abi.SkillTool
	if err := abi.DecodeArgs(raw, &a); err != nil {
		return fmt.Sprintf("Skill: %v", err), true
	}
	if err := checkSkillName(a.Name); err != nil {
		return fmt.Sprintf("Skill: %v", err), true
	}
	skills, _ := m.skillIndex(ctx, caller, cwd)
	for _, s := range skills {
		if s.name != a.Name {
			continue
		}
		_, _, body, err := m.readSkill(ctx, caller, s.dir+"/SKILL.md")
		if err != nil {
			return fmt.Sprintf("Skill %s: %v", a.Name, err), true
		}
		out, err := json.Marshal(skillResult{Name: s.name, Dir: s.dir, Body: string(body)})
		if err != nil {
			return err.Error(), true
		}
		return string(out), false
	}
	return fmt.Sprintf("Skill: no skill %q (the skills are listed in your instructions)", a.Name), true
}
