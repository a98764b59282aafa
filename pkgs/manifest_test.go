package pkgs

import (
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

const goodManifest = `{
  "name": "release-tools",
  "version": "1.2.0",
  "description": "Tools for releases",
  "profiles": [{"id": "release-manager", "description": "Cuts releases", "promptFile": "profiles/release-manager.md", "budget": {"turns": 20}}],
  "skills": ["release-notes"],
  "context": ["CONTEXT.md"],
  "commands": [{"name": "relnotes", "path": "bin/relnotes"}],
  "schedules": [{"name": "weekly", "line": "0 9 * * 1 spawn release-manager draft the notes"}],
  "mcpServers": [{"name": "tracker", "command": ["bin/tracker", "--stdio"]}]
}`

// TestParseManifest: a good manifest decodes; each bad one is a 400
// whose message names its field.
func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "release-tools" || len(m.Commands) != 1 || m.Profiles[0].Budget.Turns != 20 {
		t.Fatalf("manifest: %+v", m)
	}
	tests := []struct {
		name, json, field string
	}{
		{"unknown key", `{"name":"a","colour":"red"}`, "colour"},
		{"unknown nested key", `{"name":"a","commands":[{"name":"x","path":"x","mode":1}]}`, "mode"},
		{"wrong type", `{"name":1}`, "name"},
		{"wrong nested type", `{"name":"a","commands":[{"name":"x","path":7}]}`, "commands.path"},
		{"list not array", `{"name":"a","skills":"x"}`, "skills"},
		{"no name", `{}`, "name"},
		{"bad name", `{"name":"Release Tools"}`, "name"},
		{"dash first", `{"name":"-x"}`, "name"},
		{"command escapes", `{"name":"a","commands":[{"name":"x","path":"../../etc/passwd"}]}`, "commands[0].path"},
		{"command absolute", `{"name":"a","commands":[{"name":"x","path":"/bin/sh"}]}`, "commands[0].path"},
		{"command .git", `{"name":"a","commands":[{"name":"x","path":".git/hooks/x"}]}`, "commands[0].path"},
		{"command name slash", `{"name":"a","commands":[{"name":"a/b","path":"x"}]}`, "commands[0].name"},
		{"command twice", `{"name":"a","commands":[{"name":"x","path":"x"},{"name":"x","path":"y"}]}`, "commands[1].name"},
		{"schedule newline", `{"name":"a","schedules":[{"name":"s","line":"@every 1h event init:0 a\nb"}]}`, "schedules[0].line"},
		{"schedule comment", `{"name":"a","schedules":[{"name":"s","line":"@every 1h event init:0 a # name=x"}]}`, "schedules[0].line"},
		{"schedule empty", `{"name":"a","schedules":[{"name":"s","line":" "}]}`, "schedules[0].line"},
		{"profile builtin", `{"name":"a","profiles":[{"id":"task","prompt":"x"}]}`, "profiles[0].id"},
		{"prompt both", `{"name":"a","profiles":[{"id":"p","prompt":"x","promptFile":"p.md"}]}`, "profiles[0].promptFile"},
		{"prompt file escapes", `{"name":"a","profiles":[{"id":"p","promptFile":"a/../../b"}]}`, "profiles[0].promptFile"},
		{"mcp neither", `{"name":"a","mcpServers":[{"name":"m"}]}`, "mcpServers[0]"},
		{"mcp url scheme", `{"name":"a","mcpServers":[{"name":"m","url":"file:///etc"}]}`, "mcpServers[0].url"},
		{"mcp command escapes", `{"name":"a","mcpServers":[{"name":"m","command":["../x"]}]}`, "mcpServers[0].command[0]"},
		{"skill bad", `{"name":"a","skills":["../x"]}`, "skills[0]"},
		{"context escapes", `{"name":"a","context":["/etc/passwd"]}`, "context[0]"},
		{"trailing", `{"name":"a"} {}`, "text after"},
		{"not json", `{"name":`, "not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tt.json))
			if err == nil {
				t.Fatal("accepted")
			}
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("kind %v: %v", abi.KindOf(err), err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name %q", err, tt.field)
			}
		})
	}
}

// TestNormalURL: remote URLs are http(s), normalized; others refused.
func TestNormalURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"HTTPS://Catalog.Example.com/", "https://catalog.example.com"},
		{"http://127.0.0.1:8080/x/", "http://127.0.0.1:8080/x"},
		{"ftp://x", ""},
		{"https://", ""},
		{"https://u:p@x", ""},
		{"git://x/y", ""},
		{"/local/path", ""},
	}
	for _, tt := range tests {
		got, err := normalURL("baseUrl", tt.in)
		if (err != nil) != (tt.want == "") || got != tt.want {
			t.Errorf("normalURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "baseUrl") {
			t.Errorf("error %q does not name baseUrl", err)
		}
	}
}

// FuzzManifest: any input is a manifest whose every path stays in the
// package, or a 400; never a panic.
func FuzzManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte(`{"name":"a","commands":[{"name":"x","path":"../x"}]}`))
	f.Add([]byte(`{"name":"a","mcpServers":[{"name":"m","url":"http://x"}]}`))
	f.Add([]byte(`{"name":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseManifest(raw)
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("kind %v: %v", abi.KindOf(err), err)
			}
			return
		}
		paths := []string{}
		for _, c := range m.Commands {
			paths = append(paths, c.Path)
		}
		for _, p := range m.Profiles {
			if p.PromptFile != "" {
				paths = append(paths, p.PromptFile)
			}
		}
		paths = append(paths, m.Context...)
		for _, p := range paths {
			if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
				t.Fatalf("path %q escapes", p)
			}
		}
	})
}

// FuzzCatalog: any catalog body is a list of valid entries or a 400;
// never a panic, and every entry kept could be added.
func FuzzCatalog(f *testing.F) {
	f.Add([]byte(`{"serverName":"team","packages":[{"name":"release-tools","repo":"alice/release-tools","ref":"v1.2"},{"name":"Bad Name","repo":"x/y"}]}`))
	f.Add([]byte(`{"packages":[{"name":"x","repo":"","remoteUrl":"file:///etc"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := ParseCatalog(raw)
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("kind %v: %v", abi.KindOf(err), err)
			}
			return
		}
		for _, e := range res.Packages {
			if checkPkgName("name", e.Name) != nil {
				t.Fatalf("kept %+v", e)
			}
			if e.RemoteURL != "" && CheckHTTPURL("remoteUrl", e.RemoteURL) != nil {
				t.Fatalf("kept %+v", e)
			}
			if _, err := checkSubdir(e.Subdir); err != nil {
				t.Fatalf("kept %+v", e)
			}
		}
	})
}

// TestParseCatalog: invalid entries are dropped, valid ones kept.
func TestParseCatalog(t *testing.T) {
	res, err := ParseCatalog([]byte(`{"serverName":"team","packages":[
		{"name":"release-tools","repo":"alice/release-tools","ref":"v1.2"},
		{"name":"Bad Name","repo":"x/y"},
		{"name":"ok-url","repo":"x","remoteUrl":"https://git.example.com/x"},
		{"name":"bad-url","repo":"x","remoteUrl":"file:///etc"},
		{"name":"bad-subdir","repo":"a/b","subdir":"../x"},
		{"name":7}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range res.Packages {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "release-tools,ok-url" || res.ServerName != "team" {
		t.Fatalf("catalog: %+v", res)
	}
	if _, err := ParseCatalog([]byte(`nope`)); abi.KindOf(err) != abi.Invalid {
		t.Fatalf("not JSON: %v", err)
	}
}
