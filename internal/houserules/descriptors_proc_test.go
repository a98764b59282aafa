package houserules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcSpeaksDescriptors: the proc and ipc rooms and CodeMode
// register, make and bind syscalls and publish signals only through abi's
// descriptors (kernel.Handle, kernel.Do, kernel.Bind, kernel.Publish): no
// kernel.Fn, kernel.Invoke or kernel.BindName, and no Signal or Call
// given a name as a string literal.
func TestProcSpeaksDescriptors(t *testing.T) {
	for _, dir := range []string{"proc", "ipc", "codemode"} {
		files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, f := range files {
			name := dir + "/" + filepath.Base(f)
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, v := range stringCalls(t, f) {
				t.Errorf("%s:%s: a syscall or signal named by string", name, v)
			}
		}
	}
}

// stringCalls lists the calls in the Go file f that name a syscall or a
// signal by string: kernel.Fn, kernel.Invoke, kernel.BindName, and any
// Signal or Call method given a string literal.
func stringCalls(t *testing.T, f string) []string {
	t.Helper()
	src, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, f, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fun := call.Fun
		switch x := fun.(type) {
		case *ast.IndexExpr:
			fun = x.X
		case *ast.IndexListExpr:
			fun = x.X
		}
		sel, ok := fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pos := fset.Position(call.Pos())
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == "kernel" {
			switch sel.Sel.Name {
			case "Fn", "Invoke", "BindName":
				out = append(out, fmt.Sprintf("%d: kernel.%s", pos.Line, sel.Sel.Name))
				return true
			}
		}
		if sel.Sel.Name == "Signal" || sel.Sel.Name == "Call" {
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out = append(out, fmt.Sprintf("%d: %s(%s)", pos.Line, sel.Sel.Name, lit.Value))
				}
			}
		}
		return true
	})
	return out
}
