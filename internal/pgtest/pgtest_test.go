package pgtest

import (
	"database/sql"
	"testing"
)

// TestNew: each test's database is its own (a table made in one is not
// in the other), both on the one server, reached over its unix socket;
// the server does not run as root.
func TestNew(t *testing.T) {
	var dbs [2]*sql.DB
	for i := range dbs {
		db, err := sql.Open("pgx", New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	if _, err := dbs[0].Exec(`CREATE TABLE only_here (k BIGINT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := dbs[1].QueryRow(`SELECT count(*) FROM pg_tables WHERE tablename='only_here'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the second database sees the first's table: %d, %v", n, err)
	}
}
