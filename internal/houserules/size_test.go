package houserules

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxLines is the most lines a non-test Go file of the module has: a
// file past it holds more than one thing, and is split by what each part
// provides.
const maxLines = 800

// beingSplit are the files over maxLines that are being split now
// (issue 22), each a module-relative path. The list only shrinks: a file
// of it that is no longer over maxLines fails the test until it leaves
// the list, and a file may not join it.
var beingSplit = map[string]bool{}

// TestFileSize checks that no non-test Go file of the module is over
// maxLines lines, but those of beingSplit, and that each of those still
// is.
func TestFileSize(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root: %v", err)
	}
	lines := map[string]int{} // module-relative path -> lines
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// As the go tool: testdata, and names starting with . or _,
			// hold no package.
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		lines[filepath.ToSlash(rel)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 {
		t.Fatal("found no Go files")
	}
	var over []string
	for p, n := range lines {
		if n > maxLines && !beingSplit[p] {
			over = append(over, p)
		}
	}
	sort.Strings(over)
	for _, p := range over {
		t.Errorf("%s has %d lines, more than %d: split it by what its parts provide", p, lines[p], maxLines)
	}
	for p := range beingSplit {
		if lines[p] <= maxLines {
			t.Errorf("%s is in beingSplit but has %d lines (0: gone), at most %d: remove it from the list", p, lines[p], maxLines)
		}
	}
}
