package houserules

import (
	"go/ast"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The storage rules (docs/architecture.md, *Portable SQL*): the kernel's
// Store stands over a Dialect, and only the SQLite dialect
// (kernel/sqlite.go) says anything SQLite's own; SQL lives in the
// packages that own tables, and names only their own; no write's error is
// dropped. Read with go/parser from every non-test file (parseTree).

// sqliteDialect is the one file that may say what only SQLite says.
const sqliteDialect = "kernel/sqlite.go"

// sqliteOnly are what SQLite says and portable SQL (kernel.Dialect's
// doc) does not: conflict clauses, its time and string functions, its
// pragmas and row numbers, its AUTOINCREMENT, OFFSET without a limit.
var sqliteOnly = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bINSERT\s+OR\s+(IGNORE|REPLACE|ABORT|FAIL|ROLLBACK)\b`),
	regexp.MustCompile(`(?i)\bREPLACE\s+INTO\b`),
	regexp.MustCompile(`(?i)\b(strftime|datetime|julianday|unixepoch|instr|ifnull|iif|glob|group_concat|last_insert_rowid|randomblob|typeof|json_extract|json_each)\s*\(`),
	regexp.MustCompile(`(?i)\bdate\s*\(\s*'now'|\btime\s*\(\s*'now'`),
	regexp.MustCompile(`(?i)\bPRAGMA\b`),
	regexp.MustCompile(`(?i)\bAUTOINCREMENT\b`),
	regexp.MustCompile(`(?i)\b_?rowid_?\b|\boid\b`),
	regexp.MustCompile(`(?i)\bWITHOUT\s+ROWID\b`),
	regexp.MustCompile(`(?i)\bsqlite_(master|schema|sequence|temp_master)\b`),
	regexp.MustCompile(`(?i)\bLIMIT\s+-\s*1\b`),
	// A negative start counts from the end on SQLite only.
	regexp.MustCompile(`(?i)\bsubstr\s*\([^()]*,\s*-`),
}

// postgresDialect is the one file that may say what only Postgres says.
const postgresDialect = "kernel/postgres.go"

// postgresOnly are what Postgres says and SQLite does not read (or reads
// otherwise), in an SQL literal: casts with ::, ILIKE, its time and
// aggregate functions, row locks, SERIAL, DISTINCT ON, and the scalar
// max/min of several arguments (SQLite's; Postgres's are aggregates).
var postgresOnly = []*regexp.Regexp{
	regexp.MustCompile(`::\s*[A-Za-z]`),
	regexp.MustCompile(`(?i)\bILIKE\b`),
	regexp.MustCompile(`(?i)\b(now|greatest|least|string_agg|array_agg|to_timestamp|date_trunc|pg_[a-z_]+)\s*\(`),
	regexp.MustCompile(`(?i)\bFOR\s+(UPDATE|SHARE|NO\s+KEY\s+UPDATE|KEY\s+SHARE)\b|\bSKIP\s+LOCKED\b`),
	regexp.MustCompile(`(?i)\b(BIG)?SERIAL\b|\bDISTINCT\s+ON\b`),
	regexp.MustCompile(`(?i)\b(max|min)\s*\([^()]*,`),
}

// postgresOnlyUses returns, as "file:line: what", every SQL literal
// outside the Postgres dialect that says what only Postgres says.
func postgresOnlyUses(files []*srcFile) []string {
	var bad []string
	for _, f := range files {
		if f.rel == postgresDialect {
			continue
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			if s, ok := stringLit(n); ok && sqlStatement.MatchString(s) {
				for _, re := range postgresOnly {
					if m := re.FindString(s); m != "" {
						bad = append(bad, f.pos(n)+": "+strconv.Quote(m))
					}
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad
}

// poolMethods are *sql.DB's methods that run SQL.
var poolMethods = map[string]bool{"Query": true, "QueryContext": true, "QueryRow": true, "QueryRowContext": true,
	"Exec": true, "ExecContext": true, "Begin": true, "BeginTx": true, "Prepare": true, "PrepareContext": true}

// sqliteOnlyUses returns, as "file:line: what", every place outside the
// SQLite dialect that says what only SQLite says (in any string literal:
// a message that tells an operator to run a PRAGMA asks Dialect.Check),
// asks a result for LastInsertId (Postgres's driver has none: RETURNING
// is portable), runs SQL on the Store's pool R (it is not rebound for the
// engine), or imports the SQLite driver.
func sqliteOnlyUses(files []*srcFile) []string {
	var bad []string
	for _, f := range files {
		if f.rel == sqliteDialect {
			continue
		}
		for _, im := range f.file.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "modernc.org/sqlite" || strings.HasPrefix(p, "modernc.org/sqlite/") {
				bad = append(bad, f.pos(im)+": imports "+p)
			}
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			if s, ok := stringLit(n); ok {
				for _, re := range sqliteOnly {
					if m := re.FindString(s); m != "" {
						bad = append(bad, f.pos(n)+": "+strconv.Quote(m))
					}
				}
			}
			se, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if se.Sel.Name == "LastInsertId" {
				bad = append(bad, f.pos(se)+": LastInsertId (use RETURNING)")
			}
			if pool, ok := se.X.(*ast.SelectorExpr); ok && pool.Sel.Name == "R" && poolMethods[se.Sel.Name] && f.rel != "kernel/store.go" {
				bad = append(bad, f.pos(se)+": .R."+se.Sel.Name+" (use the Store's QueryContext, QueryRowContext, BeginRead)")
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad
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
		case "groups", "group_caps", "group_members", "users", "tokens", "config", "schema_migrations",
			"audit_log", "audit_anchor", "node_leases":
			return true
		}
		return false
	},
	"proc":     func(t string) bool { return strings.HasPrefix(t, "proc_") && !ipcTable(t) },
	"ipc":      ipcTable,
	"sched":    func(t string) bool { return strings.HasPrefix(t, "sched_") },
	"notify":   func(t string) bool { return strings.HasPrefix(t, "notify_") },
	"devices":  func(t string) bool { return t == "devices" || strings.HasPrefix(t, "device_") },
	"mcp":      func(t string) bool { return strings.HasPrefix(t, "mcp_") },
	"repos":    func(t string) bool { return strings.HasPrefix(t, "repos_") },
	"adapters": func(t string) bool { return strings.HasPrefix(t, "adapter_") },
	"pkgs":     func(t string) bool { return strings.HasPrefix(t, "pkg_") },
	// The test Postgres makes and drops whole databases, no table.
	"internal/pgtest": func(string) bool { return false },
}

// ipcTable says whether t is a table of the ipc room: the calls between
// processes and the signal watches, older than the room (the process
// room's migrations made them; see history).
func ipcTable(t string) bool { return t == "proc_ipc_calls" || t == "proc_watches" }

// history are the files that name other packages' tables as a record of
// the past: proc's migration steps that made the ipc room's tables, kept
// so that every store's schema versions stay what they were.
var history = map[string]func(table string) bool{"proc/store.go": ipcTable}

// owner names the package that owns table, or "no package".
func owner(table string) string {
	for pkg, owns := range tableOwners {
		if owns(table) {
			return pkg
		}
	}
	return "no package"
}

// sqlOutsideOwners returns, as "file:line: why", every SQL literal (a
// statement or a clause of one) in a package that owns no table, and
// every table a package's SQL names that is not its own.
func sqlOutsideOwners(files []*srcFile) []string {
	var bad []string
	for _, f := range files {
		pkg := path.Dir(f.rel)
		owns := tableOwners[pkg]
		ast.Inspect(f.file, func(n ast.Node) bool {
			s, ok := stringLit(n)
			if !ok || !sqlStatement.MatchString(s) {
				return true
			}
			if owns == nil {
				bad = append(bad, f.pos(n)+": SQL in "+pkg+", which owns no table: "+strconv.Quote(s[:min(len(s), 60)]))
				return true
			}
			for _, m := range sqlTable.FindAllStringSubmatch(s, -1) {
				if table := m[1] + m[2]; !owns(table) && (history[f.rel] == nil || !history[f.rel](table)) {
					bad = append(bad, f.pos(n)+": "+pkg+" names "+owner(table)+"'s table "+table)
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad
}

// storeWrites are the Store's and a Tx's methods that write.
var storeWrites = map[string]bool{"Exec": true, "ExecContext": true, "TxExec": true, "Tx": true, "Migrate": true}

// droppedWrites returns, as "file:line: method", every call of a method
// named as the Store's and a Tx's writes are that is a statement of its
// own, or assigned only to blanks: its error is dropped.
func droppedWrites(files []*srcFile) []string {
	var bad []string
	for _, f := range files {
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
					bad = append(bad, f.pos(c)+": the error of "+se.Sel.Name+" is dropped")
				}
			}
			return true
		})
	}
	sort.Strings(bad)
	return bad
}

// TestStorageRuleCases checks each storage rule's detector on small
// sources, ones that break it and ones that do not.
func TestStorageRuleCases(t *testing.T) {
	cases := []struct {
		name, rel, src string
		check          func([]*srcFile) []string
		want           int
	}{
		{"INSERT OR IGNORE", "proc/store.go", "package proc\nvar q = `INSERT OR IGNORE INTO proc_x(a) VALUES(?)`", sqliteOnlyUses, 1},
		{"a rowid and LIMIT -1", "notify/store.go", "package notify\nvar q = `DELETE FROM notify_x WHERE rowid IN (SELECT rowid FROM notify_x LIMIT -1 OFFSET ?)`", sqliteOnlyUses, 2},
		{"substr from the end", "kernel/config.go", "package kernel\nvar q = `SELECT 1 WHERE substr(?,-1)='/'`", sqliteOnlyUses, 1},
		{"a Postgres cast and now()", "proc/store.go", "package proc\nvar q = `SELECT now(), ?::bigint FROM proc_x`", postgresOnlyUses, 2},
		{"a row lock", "sched/engine.go", "package sched\nvar q = `SELECT id FROM sched_x FOR UPDATE SKIP LOCKED`", postgresOnlyUses, 1},
		{"a scalar max", "sched/store.go", "package sched\nvar q = `SELECT max(a, b) FROM sched_x`", postgresOnlyUses, 1},
		{"portable for Postgres", "sched/store.go", "package sched\nvar q = `SELECT max(a), CAST(? AS BIGINT) FROM sched_x`\nvar r = \"::1\"", postgresOnlyUses, 0},
		{"the Postgres dialect", "kernel/postgres.go", "package kernel\nvar q = `SELECT pg_advisory_xact_lock(1)`", postgresOnlyUses, 0},
		{"a time function", "sched/store.go", "package sched\nvar q = `SELECT strftime('%s','now')`", sqliteOnlyUses, 1},
		{"AUTOINCREMENT", "sched/manager.go", "package sched\nvar q = `CREATE TABLE sched_x (id INTEGER PRIMARY KEY AUTOINCREMENT)`", sqliteOnlyUses, 1},
		{"a PRAGMA in a message", "sched/store.go", `package sched
var m = "check it with sqlite3 'PRAGMA integrity_check'"`, sqliteOnlyUses, 1},
		{"LastInsertId", "proc/run.go", "package proc\nfunc f() { id, _ := res.LastInsertId() }", sqliteOnlyUses, 1},
		{"the read pool", "proc/run.go", "package proc\nfunc f() { m.st.R.QueryRowContext(ctx, `SELECT 1`) }", sqliteOnlyUses, 1},
		{"the driver", "proc/run.go", "package proc\nimport _ \"modernc.org/sqlite\"", sqliteOnlyUses, 1},
		{"portable SQL", "proc/store.go", "package proc\nvar q = `INSERT INTO proc_x(a) VALUES(?) ON CONFLICT DO NOTHING RETURNING id`\nvar r = \"growid rowidx\"", sqliteOnlyUses, 0},
		{"the SQLite dialect", "kernel/sqlite.go", "package kernel\nimport _ \"modernc.org/sqlite\"\nvar q = `PRAGMA wal_checkpoint(PASSIVE)`", sqliteOnlyUses, 0},
		{"SQL where no table is owned", "ns/x.go", "package ns\nvar q = `SELECT uid FROM users`", sqlOutsideOwners, 1},
		{"a room reading the kernel's table", "devices/registry.go", "package devices\nvar q = `SELECT a.gid FROM device_access a LEFT JOIN groups g ON g.gid=a.gid`", sqlOutsideOwners, 1},
		{"a room writing another room's table", "sched/x.go", "package sched\nvar q = `UPDATE proc_runs SET status=?`", sqlOutsideOwners, 1},
		{"the ipc room's tables elsewhere", "proc/run.go", "package proc\nvar q = `UPDATE proc_ipc_calls SET state='pending'`\nvar w = `SELECT 1 FROM proc_watches`", sqlOutsideOwners, 2},
		{"the ipc room's own tables", "ipc/ipc.go", "package ipc\nvar q = `UPDATE proc_ipc_calls SET state='pending'`\nvar w = `CREATE INDEX IF NOT EXISTS w ON proc_watches(signal)`", sqlOutsideOwners, 0},
		{"proc's migration history", "proc/store.go", "package proc\nvar q = `CREATE TABLE proc_ipc_calls (call_id TEXT); ALTER TABLE proc_watches ADD COLUMN c TEXT; CREATE TABLE proc_runs (run_id TEXT)`", sqlOutsideOwners, 0},
		{"the ipc room naming proc's", "ipc/ipc.go", "package ipc\nvar q = `SELECT status FROM proc_runs`", sqlOutsideOwners, 1},
		{"a room's own tables", "devices/x.go", "package devices\nvar q = `INSERT INTO device_access(device_id) SELECT device_id FROM devices WHERE device_id=? ON CONFLICT(device_id) DO UPDATE SET gid=excluded.gid`", sqlOutsideOwners, 0},
		{"the kernel's tables", "kernel/users.go", "package kernel\nvar q = `CREATE INDEX u ON users(uid); SELECT 1 FROM schema_migrations`", sqlOutsideOwners, 0},
		{"a clause of the room's", "notify/x.go", "package notify\nvar q = `WHERE owner_uid=? ORDER BY seq`", sqlOutsideOwners, 0},
		{"text that is no SQL", "ns/x.go", "package ns\nvar m = \"select a file FROM the list\"", sqlOutsideOwners, 0},
		{"a dropped Exec", "proc/ipc.go", "package proc\nfunc f() { m.st.Exec(ctx, `DELETE FROM proc_x`) }", droppedWrites, 1},
		{"a write assigned to blanks", "proc/ipc.go", "package proc\nfunc f() { _, _ = m.st.Exec(ctx, `DELETE FROM proc_x`); _ = m.st.Tx(ctx, fn) }", droppedWrites, 2},
		{"a checked write", "proc/ipc.go", "package proc\nfunc f() error { _, err := m.st.Exec(ctx, `DELETE FROM proc_x`); return err }", droppedWrites, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.check(snippet(t, c.rel, c.src)); len(got) != c.want {
				t.Errorf("found %d, want %d: %q", len(got), c.want, got)
			}
		})
	}
}

// TestPortableSQL: no Go file but the SQLite dialect says what only
// SQLite says, asks for LastInsertId, runs SQL on Store.R or imports the
// SQLite driver (sqliteOnlyUses). The Store rebinds placeholders and
// Dialect.Schema makes the portable DDL the engine's, so a Postgres
// dialect can come without touching a room.
func TestPortableSQL(t *testing.T) {
	files := parseTree(t, root)
	if bad := sqliteOnlyUses(files); len(bad) > 0 {
		t.Errorf("SQLite's own syntax, LastInsertId, Store.R and the SQLite driver only in %s:\n\t%s", sqliteDialect, strings.Join(bad, "\n\t"))
	}
	if bad := postgresOnlyUses(files); len(bad) > 0 {
		t.Errorf("Postgres's own syntax only in %s:\n\t%s", postgresDialect, strings.Join(bad, "\n\t"))
	}
}

// TestSQLInTableOwners: SQL (a string literal that is a statement or a
// clause of one) is only in the packages that own tables (the kernel and
// the rooms proc, sched, notify, devices; never devices/..., ns, the
// transports, the commands), and each names only its own tables: the
// kernel's groups, users, tokens and config are the kernel's, and a room
// reaches them through the dispatcher.
func TestSQLInTableOwners(t *testing.T) {
	if bad := sqlOutsideOwners(parseTree(t, root)); len(bad) > 0 {
		t.Errorf("SQL only in the packages that own tables, naming only their own:\n\t%s", strings.Join(bad, "\n\t"))
	}
}

// TestStoreWritesChecked: no statement drops the error of a write
// (droppedWrites): a write that fails is told to whoever caused it, or
// logged where nobody waits.
func TestStoreWritesChecked(t *testing.T) {
	if bad := droppedWrites(parseTree(t, root)); len(bad) > 0 {
		t.Errorf("a write's error is dropped:\n\t%s", strings.Join(bad, "\n\t"))
	}
}
