package houserules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// repo is the repository's root, from this package's directory.
const repo = "../.."

// sources parses the non-test Go files of the module-relative package
// directories dirs (and the directories under them; one that does not
// exist has none), with comments.
func sources(t *testing.T, dirs ...string) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(repo, d)); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(filepath.Join(repo, d), func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == "testdata" {
				return filepath.SkipDir
			}
			if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repo, p)
			files[filepath.ToSlash(rel)] = f
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) == 0 {
		t.Fatalf("no Go files under %v", dirs)
	}
	return fset, files
}

// sorted returns the keys of m, sorted.
func sorted[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestProcManagerIsSmall: the process room's Manager keeps the process
// table and delegates (the runs to its run engine, IPC and watches to the
// ipc room): at most 60 methods are declared on it.
func TestProcManagerIsSmall(t *testing.T) {
	const most = 60
	_, files := sources(t, "proc")
	n := 0
	for _, name := range sorted(files) {
		for _, d := range files[name].Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 || filepath.Dir(name) != "proc" {
				continue
			}
			typ := fd.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.Name == "Manager" {
				n++
			}
		}
	}
	if n > most {
		t.Errorf("proc.Manager has %d methods, more than %d: its parts belong to the run engine (proc/engine.go) or a room of their own", n, most)
	}
}

// TestLocksSayWhatTheyGuard: every mutex of the process and ipc rooms (a
// sync.Mutex or sync.RWMutex field, named or embedded) says in its
// comment what it guards.
func TestLocksSayWhatTheyGuard(t *testing.T) {
	fset, files := sources(t, "proc", "ipc")
	for _, name := range sorted(files) {
		ast.Inspect(files[name], func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, f := range st.Fields.List {
				sel, ok := f.Type.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Mutex" && sel.Sel.Name != "RWMutex" {
					continue
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "sync" {
					continue
				}
				text := f.Doc.Text() + f.Comment.Text()
				if !strings.Contains(text, "guards") {
					t.Errorf("%s: a sync.%s that does not say what it guards", fset.Position(f.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
