package repocheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// documents returns README.md and docs/*.md, relative to root.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("docs/*.md: %v, %d files", err, len(docs))
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, rel)
	}
	return out
}

var (
	// mdLink is a Markdown link or image: [text](target) or
	// [text](target "title"); the target is group 1.
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// docPath is a mention of a document by its path, linked or not
	// (`docs/runs.md`, ../shared/namespace.md): group 1.
	docPath = regexp.MustCompile("(?:^|[\\s(`'\"])((?:\\.{1,2}/)+[\\w./-]*\\.md|docs/[\\w./-]*\\.md)")
	// fence is a line that opens or closes a code block.
	fence = regexp.MustCompile("^\\s*(```|~~~)")
)

// prose returns the lines of a Markdown text outside code blocks, with
// their numbers.
func prose(text string) map[int]string {
	out := map[int]string{}
	in := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			out[i+1] = line
		}
	}
	return out
}

// anchors returns the anchors of a Markdown file's headings, as GitHub
// makes them: lower case, punctuation dropped, blanks as dashes.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, line := range prose(text) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimLeft(h, "#")
			h = strings.ToLower(strings.TrimSpace(h))
			h = drop.ReplaceAllString(h, "")
			out[strings.ReplaceAll(h, " ", "-")] = true
		}
	}
	return out
}

// inRepo resolves target (relative to the directory dir, both relative to
// root) and reports whether it names a file of the repository.
func inRepo(dir, target string) (string, bool) {
	p := filepath.Clean(filepath.Join(dir, target))
	if p == ".." || strings.HasPrefix(p, "../") || filepath.IsAbs(p) {
		return p, false
	}
	_, err := os.Stat(filepath.Join(root, p))
	return p, err == nil
}

// Every relative link of README.md and docs/*.md leads to a file of the
// repository (and to a heading of it, when it names one), and so does
// every document named by its path: a reader of a clone follows them all.
func TestDocLinks(t *testing.T) {
	for _, doc := range documents(t) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(doc)
		for n, line := range prose(string(b)) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				p := doc
				if file != "" {
					var ok bool
					if p, ok = inRepo(dir, file); !ok {
						t.Errorf("%s:%d: link %s: no such file in the repository (%s)", doc, n, target, p)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(p, ".md") {
					tb, err := os.ReadFile(filepath.Join(root, p))
					if err != nil {
						t.Errorf("%s:%d: link %s: %v", doc, n, target, err)
						continue
					}
					if !anchors(string(tb))[anchor] {
						t.Errorf("%s:%d: link %s: %s has no heading #%s", doc, n, target, p, anchor)
					}
				}
			}
			for _, m := range docPath.FindAllStringSubmatch(line, -1) {
				ref := m[1]
				base := dir
				if strings.HasPrefix(ref, "docs/") {
					base = "." // docs/x.md names a file from the root
				}
				if p, ok := inRepo(base, ref); !ok {
					t.Errorf("%s:%d: %s: no such file in the repository (%s)", doc, n, ref, p)
				}
			}
		}
	}
}

// The README's list of documents links every docs/*.md.
func TestREADMEListsEveryDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var linked []string
	for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		linked = append(linked, filepath.Clean(file))
	}
	for _, doc := range documents(t)[1:] {
		if !slices.Contains(linked, doc) {
			t.Errorf("README.md does not link %s", doc)
		}
	}
}

// make run passes ARGS to gsvfs mount, as the README says, after the web
// console's flags (docs/web.md).
func TestMakeRunPassesArgs(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	const args = `--listen 'tcp!127.0.0.1!5640' --log-level debug`
	cmd := exec.Command("make", "-n", "run", "MOUNT=/nonexistent/gsv", "ARGS="+args)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "gsvfs mount") {
			if want := "./bin/gsvfs mount /nonexistent/gsv --http 127.0.0.1:0 --login-link " + args; strings.TrimSpace(line) != want {
				t.Fatalf("make run runs %q, want %q", line, want)
			}
			return
		}
	}
	t.Fatalf("make -n run runs no gsvfs mount:\n%s", out)
}

// No tracked text file keeps a merge's conflict markers: a line that
// begins "<<<<<<< " or ">>>>>>> ".
func TestNoConflictMarkers(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	for _, f := range strings.Fields(string(out)) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil || slices.Contains(b, 0) {
			continue // gone from the work tree, or binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") {
				t.Errorf("%s:%d: a merge conflict marker: %q", f, i+1, line)
			}
		}
	}
}
