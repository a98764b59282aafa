package houserules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The rules of the source itself, read with go/parser from every non-test
// .go file of the module (testdata left out): where syscall and signal
// names are written, where the kernel's tables are written, and how much
// untyped JSON is left.

// root is the module's root, from this package's directory.
const root = "../.."

// srcFile is one parsed non-test file: its module-relative path
// ("sched/files.go") and its syntax.
type srcFile struct {
	rel  string
	fset *token.FileSet
	file *ast.File
}

// pos is where n is, as "sched/files.go:12".
func (f *srcFile) pos(n ast.Node) string {
	return f.rel + ":" + strconv.Itoa(f.fset.Position(n.Pos()).Line)
}

// parseTree parses every non-test .go file under dir (the module's root
// in the tests, a source snippet's directory in their cases).
func parseTree(t *testing.T, dir string) []*srcFile {
	t.Helper()
	var out []*srcFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (d.Name() == "testdata" || d.Name() == "vendor" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, &srcFile{rel: filepath.ToSlash(rel), fset: fset, file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no Go files under %s", dir)
	}
	return out
}

// stringLit returns the value of a string literal, and whether n is one.
func stringLit(n ast.Node) (string, bool) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// inDir reports whether the module-relative path rel is in one of dirs
// (a directory and everything under it) or is one of them (a file).
func inDir(rel string, dirs ...string) bool {
	for _, d := range dirs {
		if rel == d || strings.HasPrefix(rel, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// registeredNames are the names of the syscalls and signals: every
// Call[A, R]{Name: ...} and Signal[P]{Name: ...} of abi, and any name
// still registered or published by string (kernel.Fn's first argument,
// k.Signal's), which the rule then finds.
func registeredNames(files []*srcFile) map[string]string {
	names := map[string]string{} // name -> where it is declared
	for _, f := range files {
		ast.Inspect(f.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if !inDir(f.rel, "abi") || !isDescriptorType(n.Type) {
					return true
				}
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if id, isID := kv.Key.(*ast.Ident); ok && isID && id.Name == "Name" {
						if s, ok := stringLit(kv.Value); ok {
							names[s] = f.pos(kv)
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) == 0 {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); (ok && x.Name == "kernel" && sel.Sel.Name == "Fn") || sel.Sel.Name == "Signal" {
					if s, ok := stringLit(n.Args[0]); ok {
						names[s] = f.pos(n)
					}
				}
			}
			return true
		})
	}
	return names
}

// isDescriptorType reports whether t is Call[A, R] or Signal[P] (abi's
// descriptor types, as abi writes them).
func isDescriptorType(t ast.Expr) bool {
	var x ast.Expr
	switch t := t.(type) {
	case *ast.IndexExpr:
		x = t.X
	case *ast.IndexListExpr:
		x = t.X
	default:
		return false
	}
	id, ok := x.(*ast.Ident)
	return ok && (id.Name == "Call" || id.Name == "Signal")
}

// decoders are the functions that look a syscall up by the string a
// client sent (file, function): the frame decoder.
var decoders = [][2]string{{"kernel/dispatch.go", "Serve"}}

// nameLiterals returns, as "file:line: name", every string literal of
// files that is a syscall's or a signal's name, outside abi, the
// decoders and the files in allow.
func nameLiterals(files []*srcFile, names map[string]string, allow []string) []string {
	var bad []string
	for _, f := range files {
		if inDir(f.rel, "abi") || inDir(f.rel, allow...) {
			continue
		}
		component := map[ast.Node]bool{} // a store component's name (Migrate's first argument), not a call's
		ast.Inspect(f.file, func(n ast.Node) bool {
			if fn, ok := n.(*ast.FuncDecl); ok {
				for _, d := range decoders {
					if f.rel == d[0] && fn.Name.Name == d[1] {
						return false
					}
				}
			}
			if c, ok := n.(*ast.CallExpr); ok && len(c.Args) > 0 {
				if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Migrate" {
					component[c.Args[0]] = true
				}
			}
			if component[n] {
				return false
			}
			if s, ok := stringLit(n); ok {
				if _, named := names[s]; named {
					bad = append(bad, f.pos(n)+": "+strconv.Quote(s))
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad
}

// kernelTables are the kernel's own tables: only the kernel writes them.
var kernelTables = []string{"users", "groups", "group_members", "group_caps", "tokens", "config"}

// kernelWrite is an SQL statement that writes one of kernelTables.
var kernelWrite = regexp.MustCompile(`(?is)\b(?:insert(?:\s+or\s+\w+)?\s+into|replace\s+into|update(?:\s+or\s+\w+)?|delete\s+from)\s+[\x60"\[]?(?:main\.)?(` +
	strings.Join(kernelTables, "|") + `)\b[\x60"\]]?`)

// kernelTableWrites returns, as "file:line: table", every string literal
// of files outside kernel/ that is (or holds) SQL writing a kernel table.
func kernelTableWrites(files []*srcFile) []string {
	var bad []string
	for _, f := range files {
		if inDir(f.rel, "kernel") {
			continue
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			if s, ok := stringLit(n); ok {
				for _, m := range kernelWrite.FindAllStringSubmatch(s, -1) {
					bad = append(bad, f.pos(n)+": "+m[1])
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad
}

// untypedMaps returns, by file, how many map[string]any (or
// map[string]interface{}) types files write.
func untypedMaps(files []*srcFile) map[string]int {
	out := map[string]int{}
	for _, f := range files {
		ast.Inspect(f.file, func(n ast.Node) bool {
			m, ok := n.(*ast.MapType)
			if !ok {
				return true
			}
			if k, ok := m.Key.(*ast.Ident); !ok || k.Name != "string" {
				return true
			}
			switch v := m.Value.(type) {
			case *ast.Ident:
				if v.Name != "any" {
					return true
				}
			case *ast.InterfaceType:
				if len(v.Methods.List) != 0 {
					return true
				}
			default:
				return true
			}
			out[f.rel]++
			return true
		})
	}
	return out
}

// snippet parses src as the file rel of a module of its own.
func snippet(t *testing.T, rel, src string) []*srcFile {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return parseTree(t, dir)
}

// TestSourceRuleCases checks each source rule's detector on small
// sources, one that breaks it and ones that do not.
func TestSourceRuleCases(t *testing.T) {
	abiSrc := `package abi
var X = Call[A, *R]{Name: "room.verb", Grant: Users}
var S = Signal[P]{Name: "room.changed"}
`
	names := registeredNames(snippet(t, "abi/calls_room.go", abiSrc))
	legacy := registeredNames(snippet(t, "room/room.go", `package room
func f() { _ = kernel.Fn("room.legacy", 0, nil); k.Signal("room.legacy.sig", nil, a) }`))
	for n := range legacy {
		names[n] = "legacy"
	}
	cases := []struct {
		name, rel, src string
		check          func([]*srcFile) []string
		want           int
	}{
		{"a syscall name by string", "room/x.go", `package room
func f() { k.Call(ctx, c, "room.verb", nil) }`, func(fs []*srcFile) []string { return nameLiterals(fs, names, nil) }, 1},
		{"a signal name by string", "room/x.go", `package room
var s = "room.changed"`, func(fs []*srcFile) []string { return nameLiterals(fs, names, nil) }, 1},
		{"a name still registered by string", "room/x.go", `package room
var s = []string{"room.legacy", "room.legacy.sig"}`, func(fs []*srcFile) []string { return nameLiterals(fs, names, nil) }, 2},
		{"a descriptor", "room/x.go", `package room
func f() { kernel.Do(ctx, k, c, abi.RoomVerb, nil) }`, func(fs []*srcFile) []string { return nameLiterals(fs, names, nil) }, 0},
		{"text that holds a name", "room/x.go", `package room
var s = "run room.verb first"`, func(fs []*srcFile) []string { return nameLiterals(fs, names, nil) }, 0},
		{"abi itself", "abi/x.go", `package abi
var s = "room.verb"`, func(fs []*srcFile) []string { return nameLiterals(fs, names, nil) }, 0},
		{"the frame decoder", "kernel/dispatch.go", `package kernel
func (k *Kernel) Serve() { _ = "room.verb" }`, func(fs []*srcFile) []string { return nameLiterals(fs, names, nil) }, 0},
		{"a room being converted", "room/x.go", `package room
var s = "room.verb"`, func(fs []*srcFile) []string { return nameLiterals(fs, names, []string{"room"}) }, 0},
		{"a grant written into group_caps", "room/store.go", "package room\nvar q = `INSERT OR IGNORE INTO group_caps(gid,cap) VALUES(?,?)`", kernelTableWrites, 1},
		{"an update of users", "room/store.go", `package room
var q = "UPDATE users SET x=1"`, kernelTableWrites, 1},
		{"a delete from tokens", "room/store.go", `package room
var q = "delete from \"tokens\" where id=?"`, kernelTableWrites, 1},
		{"a room's own table", "room/store.go", `package room
var q = "INSERT INTO device_tokens(id) VALUES(?); UPDATE users_cache SET a=1; DELETE FROM sched_config"`, kernelTableWrites, 0},
		{"a read of a kernel table", "room/store.go", `package room
var q = "SELECT uid FROM users WHERE name=?"`, kernelTableWrites, 0},
		{"the kernel's own writes", "kernel/users.go", `package kernel
var q = "INSERT INTO users(uid) VALUES(?)"`, kernelTableWrites, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.check(snippet(t, c.rel, c.src)); len(got) != c.want {
				t.Errorf("found %d, want %d: %q", len(got), c.want, got)
			}
		})
	}
	maps := []struct {
		src  string
		want int
	}{
		{"package p\nvar m map[string]any\nvar n = map[string]interface{}{}", 2},
		{"package p\nvar m map[string]string\nvar n map[int]any\nvar o map[string]interface{ M() }", 0},
	}
	for _, c := range maps {
		got := 0
		for _, n := range untypedMaps(snippet(t, "p/p.go", c.src)) {
			got += n
		}
		if got != c.want {
			t.Errorf("untypedMaps(%q) = %d, want %d", c.src, got, c.want)
		}
	}
}

// TestNoSyscallNamesOutsideABI checks that no string literal outside abi
// and the frame decoder is a syscall's or a signal's name: a syscall is
// made by its descriptor (kernel.Do, kernel.Bind), a signal published by
// its (kernel.Publish), so that a name is written once.
func TestNoSyscallNamesOutsideABI(t *testing.T) {
	files := parseTree(t, root)
	names := registeredNames(files)
	if len(names) < 100 {
		t.Fatalf("found %d syscall and signal names, want the whole table (100+)", len(names))
	}
	bad := nameLiterals(files, names, nil)
	if len(bad) > 0 {
		t.Errorf("%d syscall or signal names written as strings outside abi (use the descriptor):\n\t%s", len(bad), strings.Join(bad, "\n\t"))
	}
	t.Logf("%d syscall and signal names", len(names))
}

// TestNoKernelTableWritesOutsideKernel checks that no SQL outside kernel/
// inserts, updates or deletes rows of the kernel's tables (users, groups,
// group_members, group_caps, tokens, config): a room asks the kernel (a
// syscall, or the grants of its descriptors), never writes its tables.
func TestNoKernelTableWritesOutsideKernel(t *testing.T) {
	if bad := kernelTableWrites(parseTree(t, root)); len(bad) > 0 {
		t.Errorf("SQL outside kernel/ writes the kernel's tables:\n\t%s", strings.Join(bad, "\n\t"))
	}
}

// maxUntypedMaps is the most map[string]any the non-test code may write:
// today's count. It only goes down, to the dynamic ones (tool arguments,
// model schemas, a schedule's options): issue 22's target is 16.
const maxUntypedMaps = 16

// TestUntypedMaps counts map[string]any (and map[string]interface{})
// outside tests and fails above maxUntypedMaps: data with a shape is a
// type of abi. Run with -v to see the count.
func TestUntypedMaps(t *testing.T) {
	byFile := untypedMaps(parseTree(t, root))
	total := 0
	var lines []string
	for f, n := range byFile {
		total += n
		lines = append(lines, strconv.Itoa(n)+" "+f)
	}
	sort.Strings(lines)
	t.Logf("map[string]any outside tests: %d (bound %d, target 16)", total, maxUntypedMaps)
	if total > maxUntypedMaps {
		t.Errorf("%d map[string]any outside tests, more than %d; by file:\n\t%s", total, maxUntypedMaps, strings.Join(lines, "\n\t"))
	}
}
