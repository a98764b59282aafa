package pkgs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The manifest's bounds.
const (
	maxManifest   = 256 << 10 // bytes of gsv-package.json
	maxItems      = 32        // entries of each list
	maxName       = 64
	maxDesc       = 1024
	maxPrompt     = 64 << 10
	maxPath       = 1024
	maxLine       = 4096
	maxCommandArg = 1024
)

// builtinProfiles are proc's own profiles: a package's profile of one of
// these names is a clash.
var builtinProfiles = []string{"init", "task", "review", "cron"}

// ParseManifest decodes and checks a gsv-package.json. Every failure is a
// 400 whose message starts with the field it is about (name,
// commands[1].path, ...): an unknown key, a wrong type, a name that is
// not allowed, a path that escapes the package, a duplicate.
func ParseManifest(raw []byte) (*abi.PkgManifest, error) {
	if len(raw) > maxManifest {
		return nil, bad("", fmt.Sprintf("%s is %d bytes; the limit is %d", abi.PkgManifestFile, len(raw), maxManifest))
	}
	if !utf8.Valid(raw) {
		return nil, bad("", abi.PkgManifestFile+" is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var m abi.PkgManifest
	if err := dec.Decode(&m); err != nil {
		return nil, decodeErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("", abi.PkgManifestFile+": text after the JSON object")
	}
	if err := CheckManifest(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

// decodeErr names the field of a JSON decode error.
func decodeErr(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(the manifest)"
		}
		return bad(field, fmt.Sprintf("wrong type: %s where %s is wanted", te.Value, jsonType(te.Type.Kind().String())))
	case errors.As(err, &se):
		return bad("", fmt.Sprintf("%s is not JSON: %v (at byte %d)", abi.PkgManifestFile, se, se.Offset))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return bad(f, "unknown key (see docs/packages.md, The manifest)")
	}
	return bad("", fmt.Sprintf("%s is not JSON: %v", abi.PkgManifestFile, err))
}

// jsonType is the JSON name of a Go kind.
func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "ptr":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a number"
}

// bad is a 400 about field.
func bad(field, msg string) error {
	if field == "" {
		return abi.E(abi.Invalid, msg)
	}
	return abi.E(abi.Invalid, field+": "+msg)
}

// CheckManifest checks a decoded manifest (ParseManifest's rules past
// the decoding).
func CheckManifest(m *abi.PkgManifest) error {
	if err := checkPkgName("name", m.Name); err != nil {
		return err
	}
	if err := kernel.CheckText("version", m.Version, maxName); err != nil {
		return err
	}
	if err := checkFree("description", m.Description, maxDesc); err != nil {
		return err
	}
	for _, l := range []struct {
		field string
		n     int
	}{{"profiles", len(m.Profiles)}, {"skills", len(m.Skills)}, {"context", len(m.Context)}, {"modules", len(m.Modules)},
		{"commands", len(m.Commands)}, {"schedules", len(m.Schedules)}, {"mcpServers", len(m.McpServers)}} {
		if l.n > maxItems {
			return bad(l.field, fmt.Sprintf("%d entries; the limit is %d", l.n, maxItems))
		}
	}
	seen := map[string]bool{}
	dup := func(kind, field, name string) error {
		if seen[kind+"\x00"+name] {
			return bad(field, fmt.Sprintf("%q is named twice", name))
		}
		seen[kind+"\x00"+name] = true
		return nil
	}
	for i, p := range m.Profiles {
		f := fmt.Sprintf("profiles[%d]", i)
		if err := checkPkgName(f+".id", p.ID); err != nil {
			return err
		}
		for _, b := range builtinProfiles {
			if p.ID == b {
				return bad(f+".id", fmt.Sprintf("%q is a builtin profile's name", p.ID))
			}
		}
		if err := dup("profile", f+".id", p.ID); err != nil {
			return err
		}
		if err := kernel.CheckText(f+".displayName", p.DisplayName, maxName*2); err != nil {
			return err
		}
		if err := checkFree(f+".description", p.Description, maxDesc); err != nil {
			return err
		}
		if err := checkFree(f+".prompt", p.Prompt, maxPrompt); err != nil {
			return err
		}
		if p.Prompt != "" && p.PromptFile != "" {
			return bad(f+".promptFile", "give prompt or promptFile, not both")
		}
		if p.PromptFile != "" {
			if err := checkPath(f+".promptFile", p.PromptFile); err != nil {
				return err
			}
		}
		for j, t := range p.Tools {
			if err := checkName(fmt.Sprintf("%s.tools[%d]", f, j), t); err != nil {
				return err
			}
		}
		if err := kernel.CheckText(f+".model", p.Model, kernel.MaxLabel); err != nil {
			return err
		}
		if b := p.Budget; b != nil && (b.USD < 0 || b.Tokens < 0 || b.Turns < 0 || b.TimeMs < 0) {
			return bad(f+".budget", "a limit is negative")
		}
	}
	for i, s := range m.Skills {
		f := fmt.Sprintf("skills[%d]", i)
		if err := checkName(f, s); err != nil {
			return err
		}
		if err := dup("skill", f, s); err != nil {
			return err
		}
	}
	for i, c := range m.Context {
		if err := checkPath(fmt.Sprintf("context[%d]", i), c); err != nil {
			return err
		}
	}
	for i, mod := range m.Modules {
		f := fmt.Sprintf("modules[%d]", i)
		if err := checkName(f+".name", mod.Name); err != nil {
			return err
		}
		if err := dup("module", f+".name", mod.Name); err != nil {
			return err
		}
		if err := checkPath(f+".path", mod.Path); err != nil {
			return err
		}
	}
	for i, c := range m.Commands {
		f := fmt.Sprintf("commands[%d]", i)
		if err := checkName(f+".name", c.Name); err != nil {
			return err
		}
		if err := dup("command", f+".name", c.Name); err != nil {
			return err
		}
		if err := checkPath(f+".path", c.Path); err != nil {
			return err
		}
	}
	for i, s := range m.Schedules {
		f := fmt.Sprintf("schedules[%d]", i)
		if err := checkName(f+".name", s.Name); err != nil {
			return err
		}
		if err := dup("schedule", f+".name", s.Name); err != nil {
			return err
		}
		if strings.TrimSpace(s.Line) == "" {
			return bad(f+".line", "empty")
		}
		if err := kernel.CheckText(f+".line", s.Line, maxLine); err != nil {
			return err
		}
		if strings.HasPrefix(strings.TrimSpace(s.Line), "#") || strings.HasPrefix(s.Line, "CRON_TZ=") {
			return bad(f+".line", "not a schedule line (a comment or CRON_TZ=)")
		}
		if strings.Contains(strings.ReplaceAll(s.Line, `\#`, ""), "#") {
			return bad(f+".line", `has a # (the installed line's name is the package's; write \# for a # in text)`)
		}
	}
	for i, s := range m.McpServers {
		f := fmt.Sprintf("mcpServers[%d]", i)
		if err := checkPkgName(f+".name", s.Name); err != nil {
			return err
		}
		if err := dup("mcp", f+".name", s.Name); err != nil {
			return err
		}
		switch {
		case (s.URL == "") == (len(s.Command) == 0):
			return bad(f, "give url or command, exactly one")
		case s.URL != "":
			if err := CheckHTTPURL(f+".url", s.URL); err != nil {
				return err
			}
		default:
			for j, a := range s.Command {
				if err := kernel.CheckText(fmt.Sprintf("%s.command[%d]", f, j), a, maxCommandArg); err != nil {
					return err
				}
			}
			if s.Command[0] == "" {
				return bad(f+".command[0]", "empty")
			}
			if strings.Contains(s.Command[0], "/") {
				if err := checkPath(f+".command[0]", s.Command[0]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkPkgName checks a package's (or a profile's, a server's) name:
// 1-64 of [a-z0-9-], starting with a letter or digit.
func checkPkgName(field, s string) error {
	if s == "" {
		return bad(field, "empty")
	}
	if len(s) > maxName {
		return bad(field, fmt.Sprintf("over %d bytes", maxName))
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' && i > 0) {
			return bad(field, fmt.Sprintf("%q: want lower-case letters, digits and dashes, not starting with a dash", clip(s)))
		}
	}
	return nil
}

// checkName checks a skill's, command's, module's, schedule's or tool's
// name: 1-64 of [A-Za-z0-9_.-], not starting with a dot or a dash.
func checkName(field, s string) error {
	if s == "" {
		return bad(field, "empty")
	}
	if len(s) > maxName {
		return bad(field, fmt.Sprintf("over %d bytes", maxName))
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || (r == '.' || r == '-') && i > 0
		if !ok {
			return bad(field, fmt.Sprintf("%q: want letters, digits, _ . -, not starting with . or -", clip(s)))
		}
	}
	return nil
}

// checkPath checks a path of a file of the package: relative, clean, no
// empty, . or .. component, no .git component, no control character.
// Anything else escapes the package (or is not one of its files).
func checkPath(field, p string) error {
	if p == "" {
		return bad(field, "empty")
	}
	if len(p) > maxPath {
		return bad(field, fmt.Sprintf("over %d bytes", maxPath))
	}
	if err := kernel.CheckText(field, p, maxPath); err != nil {
		return err
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, `\`) {
		return bad(field, fmt.Sprintf("%q escapes the package (a path inside it is relative)", clip(p)))
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case part == "..":
			return bad(field, fmt.Sprintf("%q escapes the package (..)", clip(p)))
		case part == "" || part == ".":
			return bad(field, fmt.Sprintf("%q is not a clean path (an empty or . component)", clip(p)))
		case strings.EqualFold(part, ".git"):
			return bad(field, fmt.Sprintf("%q names .git", clip(p)))
		}
	}
	return nil
}

// checkSubdir checks a package's subdir: "." or a clean relative path.
func checkSubdir(s string) (string, error) {
	if s == "" || s == "." {
		return ".", nil
	}
	s = strings.TrimSuffix(s, "/")
	if err := checkPath("subdir", s); err != nil {
		return "", err
	}
	return s, nil
}

// inPkg is the repository path of file p of a package at subdir.
func inPkg(subdir, p string) string {
	if subdir == "." {
		return p
	}
	return subdir + "/" + p
}

// checkFree checks free text: UTF-8, at most max bytes, newlines and tabs
// but no other control character.
func checkFree(field, s string, max int) error {
	return kernel.CheckText(field, strings.NewReplacer("\n", " ", "\t", " ").Replace(s), max)
}

// CheckHTTPURL checks an http or https URL with a host and answers 400
// naming field otherwise.
func CheckHTTPURL(field, s string) error {
	_, err := normalURL(field, s)
	return err
}

// normalURL is s, an http(s) URL, normalized: lower-case scheme and host,
// no trailing slash, no query, fragment or user info.
func normalURL(field, s string) (string, error) {
	if err := kernel.CheckText(field, s, maxPath); err != nil {
		return "", err
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", bad(field, fmt.Sprintf("not a URL: %v", err))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", bad(field, fmt.Sprintf("%q: want an http or https URL", clip(s)))
	}
	if u.Host == "" {
		return "", bad(field, fmt.Sprintf("%q has no host", clip(s)))
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", bad(field, fmt.Sprintf("%q: no user info, query or fragment", clip(s)))
	}
	u.Host = strings.ToLower(u.Host)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
