package houserules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// handSchema matches a JSON Schema written in a Go string: an object
// type or a properties member.
var handSchema = regexp.MustCompile(`"type"\s*:\s*"object"|"properties"\s*:\s*\{`)

// TestSchemasFromTypes: a JSON Schema is inferred from a Go type
// (abi/schema), never written by hand in a Go string, so that a type and
// what a model or a client is told of it cannot drift (the agent's tools
// were 14 hand-written schemas; issue 22). Tests are exempt (they spell
// out what the schemas must be), and so is the generator.
func TestSchemasFromTypes(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if p == filepath.Join(root, "abi", "schema") {
				return filepath.SkipDir // the generator
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && handSchema.MatchString(s) {
				rel, _ := filepath.Rel(root, p)
				bad = append(bad, filepath.ToSlash(rel)+":"+strconv.Itoa(fset.Position(lit.Pos()).Line))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: a JSON Schema written by hand; infer it from a type with abi/schema", b)
	}
}
