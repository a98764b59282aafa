package houserules

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The storage rules (docs/architecture.md, *State*): the kernel's Store
// stands over a Dialect, and only the SQLite dialect (kernel/sqlite.go)
// says anything SQLite's own; SQL lives in the packages that own tables,
// and names only their own; no write's error is dropped.

// sqliteDialect is the one file that may say what only SQLite says.
const sqliteDialect = "kernel/sqlite.go"

// sqliteOnly are what SQLite says and portable SQL (kernel.Dialect's
// doc) does not: conflict clauses, its time and string functions, its
// pragmas and row numbers, its AUTOINCREMENT, OFFSET without a limit.
var sqliteOnly = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bINSERT\s+OR\s+(IGNORE|REPLACE|ABORT|FAIL|ROLLBACK)\b`),
	regexp.MustCompile(`(?i)\bREPLACE\s+INTO\b`),
	regexp.MustCompile(`(?i)\b(strftime|datetime|julianday|unixepoch|instr|ifnull|iif|glob|group_concat|last_insert_rowid|randomblob|typeof|json_extract|json_each)\s*\(`),
	regexp.MustCompile(`(?i)\bPRAGMA\b`),
	regexp.MustCompile(`(?i)\bAUTOINCREMENT\b`),
	regexp.MustCompile(`(?i)\b_?rowid_?\b|\boid\b`),
	regexp.MustCompile(`(?i)\bWITHOUT\s+ROWID\b`),
	regexp.MustCompile(`(?i)\bsqlite_(master|schema|sequence|temp_master)\b`),
	regexp.MustCompile(`(?i)\bLIMIT\s+-\s*1\b`),
	regexp.MustCompile(`(?i)\bdate\s*\(\s*'now'|\btime\s*\(\s*'now'`),
}

// goFile is one non-test Go file of the module, parsed.
type goFile struct {
	path string // module-relative, slash-separated
	fset *token.FileSet
	file *ast.File
}

// sourceFiles parses every Go file of the module but tests (and
// testdata, which is not the module's code).
func sourceFiles(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out []goFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		out = append(out, goFile{path: filepath.ToSlash(r), fset: fset, file: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Go files found")
	}
	return out
}

// eachString calls fn with each string literal of f, unquoted.
func (f goFile) eachString(fn func(pos token.Position, s string)) {
	ast.Inspect(f.file, func(n ast.Node) bool {
		if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			if s, err := strconv.Unquote(bl.Value); err == nil {
				fn(f.fset.Position(bl.Pos()), s)
			}
		}
		return true
	})
}

// report fails t with rule and the places that break it, sorted.
func report(t *testing.T, rule string, bad []string) {
	t.Helper()
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%s; broken by:\n\t%s", rule, strings.Join(bad, "\n\t"))
	}
}

// poolMethods are *sql.DB's methods that run SQL.
var poolMethods = map[string]bool{"Query": true, "QueryContext": true, "QueryRow": true, "QueryRowContext": true,
	"Exec": true, "ExecContext": true, "Begin": true, "BeginTx": true, "Prepare": true, "PrepareContext": true}

// TestPortableSQL: no Go file but the SQLite dialect says anything only
// SQLite says (sqliteOnly, in any string literal: a message that tells
// an operator to run a PRAGMA is the dialect's too, Dialect.Check), asks
// a result for LastInsertId (Postgres has none: RETURNING is portable),
// runs SQL on the Store's pool R around the Store (it would not be
// rebound), or links the SQLite driver. The kernel's Store rebinds placeholders and
// Dialect.Schema makes the portable DDL the engine's, so a Postgres
// dialect can come without touching a room.
func TestPortableSQL(t *testing.T) {
	var bad []string
	for _, f := range sourceFiles(t) {
		if f.path == sqliteDialect {
			continue
		}
		f.eachString(func(pos token.Position, s string) {
			for _, re := range sqliteOnly {
				if m := re.FindString(s); m != "" {
					bad = append(bad, fmt.Sprintf("%s:%d: %q", f.path, pos.Line, m))
				}
			}
		})
		ast.Inspect(f.file, func(n ast.Node) bool {
			se, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if se.Sel.Name == "LastInsertId" {
				bad = append(bad, fmt.Sprintf("%s:%d: LastInsertId (use RETURNING)", f.path, f.fset.Position(se.Pos()).Line))
			}
			// Store.R is the read pool under the Store: a query there
			// is not rebound for the engine.
			if pool, ok := se.X.(*ast.SelectorExpr); ok && pool.Sel.Name == "R" && poolMethods[se.Sel.Name] && f.path != "kernel/store.go" {
				bad = append(bad, fmt.Sprintf("%s:%d: .R.%s (use the Store's QueryContext, QueryRowContext, BeginRead)", f.path, f.fset.Position(se.Pos()).Line, se.Sel.Name))
			}
			return true
		})
		for _, im := range f.file.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "modernc.org/sqlite" || strings.HasPrefix(p, "modernc.org/sqlite/") {
				bad = append(bad, fmt.Sprintf("%s: imports %s", f.path, p))
			}
		}
	}
	report(t, "SQLite's own syntax, LastInsertId and the SQLite driver only in "+sqliteDialect, bad)
}

// sqlStatement is a literal that is SQL: a statement, or the clause of
// one a helper completes (WHERE ..., ORDER BY ...).
var sqlStatement = regexp.MustCompile(`^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|PRAGMA|SAVEPOINT|RELEASE|ROLLBACK TO|WHERE|ORDER BY)\s`)

// sqlTable finds the tables a statement names (ours are lower case; SQL's
// words are upper case).
var sqlTable = regexp.MustCompile(`\b(?:FROM|JOIN|INTO|UPDATE|REFERENCES|TABLE(?: IF NOT EXISTS)?)\s+([a-z_][a-z0-9_]*)|\bON\s+([a-z_][a-z0-9_]*)\s*\(`)

// tableOwners are the packages that own tables, each with the test of
// its tables' names. SQL is theirs alone.
var tableOwners = map[string]func(table string) bool{
	"kernel": func(t string) bool {
		switch t {
		case "groups", "group_caps", "group_members", "users", "tokens", "config", "schema_migrations":
			return true
		}
		return false
	},
	"proc":    func(t string) bool { return strings.HasPrefix(t, "proc_") },
	"sched":   func(t string) bool { return strings.HasPrefix(t, "sched_") },
	"notify":  func(t string) bool { return strings.HasPrefix(t, "notify_") },
	"devices": func(t string) bool { return t == "devices" || strings.HasPrefix(t, "device_") },
}

// TestSQLInTableOwners: SQL (a string literal that is a statement or a
// clause of one) is only in the packages that own tables (the kernel and
// the rooms proc, sched, notify, devices; never devices/..., ns, the
// transports, the commands), and each names only its own tables: the
// kernel's groups, users, tokens and config are the kernel's, and a room
// reaches them through the dispatcher.
func TestSQLInTableOwners(t *testing.T) {
	var bad []string
	for _, f := range sourceFiles(t) {
		pkg := filepath.ToSlash(filepath.Dir(f.path))
		owns := tableOwners[pkg]
		f.eachString(func(pos token.Position, s string) {
			if !sqlStatement.MatchString(s) {
				return
			}
			if owns == nil {
				bad = append(bad, fmt.Sprintf("%s:%d: SQL in %s, which owns no table: %.60q", f.path, pos.Line, pkg, s))
				return
			}
			for _, m := range sqlTable.FindAllStringSubmatch(s, -1) {
				if table := m[1] + m[2]; !owns(table) {
					bad = append(bad, fmt.Sprintf("%s:%d: %s names %s's table %s", f.path, pos.Line, pkg, owner(table), table))
				}
			}
		})
	}
	report(t, "SQL only in the packages that own tables, naming only their own", bad)
}

// owner names the package that owns table, or "no package".
func owner(table string) string {
	for pkg, owns := range tableOwners {
		if owns(table) {
			return pkg
		}
	}
	return "no package"
}

// storeWrites are the Store's and a Tx's methods that write.
var storeWrites = map[string]bool{"Exec": true, "ExecContext": true, "TxExec": true, "Tx": true, "Migrate": true}

// TestStoreWritesChecked: no statement drops the error of a write (a
// call of a method named as the Store's and a Tx's writes are, alone as
// a statement or assigned only to blanks): a write that fails is told
// to whoever caused it, or logged where nobody waits.
func TestStoreWritesChecked(t *testing.T) {
	var bad []string
	for _, f := range sourceFiles(t) {
		ast.Inspect(f.file, func(n ast.Node) bool {
			var call ast.Expr
			switch s := n.(type) {
			case *ast.ExprStmt:
				call = s.X
			case *ast.AssignStmt:
				blank := true
				for _, l := range s.Lhs {
					if id, ok := l.(*ast.Ident); !ok || id.Name != "_" {
						blank = false
					}
				}
				if blank && len(s.Rhs) == 1 {
					call = s.Rhs[0]
				}
			}
			if c, ok := call.(*ast.CallExpr); ok {
				if se, ok := c.Fun.(*ast.SelectorExpr); ok && storeWrites[se.Sel.Name] {
					bad = append(bad, fmt.Sprintf("%s:%d: the error of %s is dropped", f.path, f.fset.Position(c.Pos()).Line, se.Sel.Name))
				}
			}
			return true
		})
	}
	report(t, "no write's error is dropped", bad)
}
