package repos

import (
	"encoding/json"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// FuzzRepoPath: cleanPath never lets through a path that leaves the tree
// or names .git, and what it returns is clean.
func FuzzRepoPath(f *testing.F) {
	for _, s := range []string{"", "/", "a", "a/b/", "../x", "/etc", "a/.git/x", "a//b", "./a", "a/./b", "a\x00b", ".GIT", "é/ü", "a/..", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := cleanPath(p)
		if err != nil {
			return
		}
		if strings.HasPrefix(got, "/") || strings.HasSuffix(got, "/") {
			t.Fatalf("%q -> %q: not relative and clean", p, got)
		}
		if got == "" {
			return
		}
		for _, c := range strings.Split(got, "/") {
			if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") || strings.ContainsAny(c, "\x00\n") {
				t.Fatalf("%q -> %q: bad component %q", p, got, c)
			}
		}
		if again, err := cleanPath(got); err != nil || again != got {
			t.Fatalf("%q -> %q -> %q, %v", p, got, again, err)
		}
	})
}

// FuzzRepoOps: an apply's ops as JSON decode and check without panic;
// every accepted op's paths are clean and its content within bounds.
func FuzzRepoOps(f *testing.F) {
	for _, s := range []string{
		`[{"type":"put","path":"a.md","content":"x"}]`,
		`[{"op":"put","path":"a","contentBase64":"aGk="}]`,
		`[{"type":"delete","path":"d","recursive":true},{"type":"move","from":"a","to":"b"}]`,
		`[{"type":"put","path":"../a","content":"x"}]`,
		`[{"type":"move","from":"a","to":"a/b"}]`,
		`[{"type":"put","op":"delete","path":"a"}]`,
		`[{"type":"put","path":"a","content":"x","contentBase64":"eA=="}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var ops []abi.RepoOp
		if json.Unmarshal([]byte(s), &ops) != nil {
			return
		}
		out, err := parseOps(ops)
		if err != nil {
			return
		}
		for _, o := range out {
			for _, p := range []string{o.path, o.to} {
				if c, err := cleanPath(p); err != nil || c != p {
					t.Fatalf("op %+v: path %q not clean", o, p)
				}
			}
			if len(o.content) > maxBlob {
				t.Fatalf("content over the bound")
			}
			if o.kind == "move" && (o.path == "" || o.to == "" || strings.HasPrefix(o.to+"/", o.path+"/")) {
				t.Fatalf("bad move %+v", o)
			}
		}
	})
}

// FuzzRepoRefName: the ref checks never accept a name git refuses in
// the ways that matter (.., @{, control characters, .lock, a leading
// dot or dash).
func FuzzRepoRefName(f *testing.F) {
	for _, s := range []string{"main", "refs/heads/x", "a..b", "x.lock", ".x", "HEAD~3", "main^2", "a b", "@{-1}", "-x", "refs/heads/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if full, err := branchRef(s); err == nil {
			if !strings.HasPrefix(full, "refs/heads/") || strings.Contains(full, "..") || strings.Contains(full, "@{") || strings.Contains(full, "/.") || strings.HasSuffix(full, ".lock") {
				t.Fatalf("%q -> %q accepted", s, full)
			}
		}
		if validRev(s) && (strings.Contains(s, "..") || strings.HasPrefix(s, "-") || strings.ContainsAny(s, " \x00\n")) {
			t.Fatalf("rev %q accepted", s)
		}
	})
}
