package kernel

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/internal/pgtest"
)

func openTestStore(t *testing.T) (*Store, string) {
	t.Helper()
	return openTestStoreOn(t, backends[0])
}

// A backend is a database engine the store's tests run on.
type backend struct {
	name string
	// source makes a new empty database for t: a SQLite file's path,
	// a Postgres URL.
	source func(t testing.TB) string
	// dialect is the Dialect of the database source names.
	dialect func(source string) Dialect
	// driver is the database/sql driver that opens source directly.
	driver, dsn func(source string) string
}

// backends are SQLite and Postgres (a real server: internal/pgtest; a
// test skips its Postgres half only where Debian's postgresql is not
// installed).
var backends = []backend{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "state.db") }, SQLite,
		func(string) string { return "sqlite" }, func(src string) string { return "file:" + src }},
	{"postgres", func(t testing.TB) string { return pgtest.New(t) }, Postgres,
		func(string) string { return "pgx" }, func(src string) string { return src }},
}

// eachBackend runs fn as a subtest on each backend.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// openTestStoreOn opens a store on a new database of b, with a table t,
// closed when the test ends; it returns the database's source.
func openTestStoreOn(t *testing.T, b backend) (*Store, string) {
	t.Helper()
	src := b.source(t)
	s, err := NewStore(b.dialect(src))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Exec(context.Background(), `CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s, src
}

// TestGroupCommit: many concurrent transactions, some failing, some
// panicking, some cancelled before they run. Each stands or falls alone:
// exactly the ones that returned nil are in the database, read back from
// a fresh connection after Close.
func TestGroupCommit(t *testing.T) { eachBackend(t, testGroupCommit) }

func testGroupCommit(t *testing.T, b backend) {
	s, src := openTestStoreOn(t, b)
	const n = 2000
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	errBad := errors.New("bad")
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%17 == 0 {
				ctx = cancelled
			}
			results[i] = s.Tx(ctx, func(tx *Tx) error {
				if _, err := tx.Exec(`INSERT INTO t(k,v) VALUES(?,?)`, i, fmt.Sprint("v", i)); err != nil {
					return err
				}
				// A second statement: a failure after it must undo both.
				if _, err := tx.Exec(`UPDATE t SET v=v||'!' WHERE k=?`, i); err != nil {
					return err
				}
				switch {
				case i%7 == 0:
					return errBad
				case i%11 == 0:
					panic("boom")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	want := map[int]bool{}
	for i, err := range results {
		switch {
		case i%17 == 0:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("tx %d (cancelled): %v", i, err)
			}
		case i%7 == 0:
			if !errors.Is(err, errBad) {
				t.Errorf("tx %d (failing): %v", i, err)
			}
		case i%11 == 0:
			if err == nil {
				t.Errorf("tx %d (panicking): no error", i)
			}
		default:
			if err != nil {
				t.Errorf("tx %d: %v", i, err)
			}
			want[i] = true
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Tx(context.Background(), func(*Tx) error { return nil }); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("Tx after Close: %v", err)
	}
	db, err := sql.Open(b.driver(src), b.dsn(src))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT k, v FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var k int
		var v string
		rows.Scan(&k, &v)
		if !want[k] || v != fmt.Sprint("v", k, "!") {
			t.Errorf("row %d %q should not be there", k, v)
		}
		got++
	}
	if got != len(want) {
		t.Errorf("%d rows, want %d", got, len(want))
	}
}

// TestGroupCommitSerial: a transaction sees the changes of those committed
// with it earlier in its batch, as a serial execution would (a counter
// incremented by many concurrent transactions ends exact).
func TestGroupCommitSerial(t *testing.T) { eachBackend(t, testGroupCommitSerial) }

func testGroupCommitSerial(t *testing.T, b backend) {
	s, _ := openTestStoreOn(t, b)
	ctx := context.Background()
	if _, err := s.Exec(ctx, `INSERT INTO t(k,v) VALUES(0,'0')`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Tx(ctx, func(tx *Tx) error {
				var v int
				if err := tx.QueryRow(`SELECT v FROM t WHERE k=0`).Scan(&v); err != nil {
					return err
				}
				_, err := tx.Exec(`UPDATE t SET v=? WHERE k=0`, fmt.Sprint(v+1))
				return err
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var v int
	if err := s.QueryRowContext(ctx, `SELECT v FROM t WHERE k=0`).Scan(&v); err != nil || v != 500 {
		t.Fatalf("counter = %d (%v), want 500", v, err)
	}
}

// TestGroupCommitLostTransaction: a statement that makes SQLite roll the
// whole transaction back (ROLLBACK inside fn) costs only the transactions
// already run in that batch; the rest are run again and commit.
func TestGroupCommitLostTransaction(t *testing.T) {
	eachBackend(t, testGroupCommitLostTransaction)
}

func testGroupCommitLostTransaction(t *testing.T, b backend) {
	s, _ := openTestStoreOn(t, b)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 300)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Tx(ctx, func(tx *Tx) error {
				if i == 150 {
					tx.Exec(`ROLLBACK`)
					return errors.New("lost it")
				}
				_, err := tx.Exec(`INSERT INTO t(k,v) VALUES(?,'x')`, i)
				return err
			})
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		var n int
		s.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE k=?`, i).Scan(&n)
		if (err == nil) != (n == 1) {
			t.Errorf("tx %d: err %v but %d rows", i, err, n)
		}
		if err == nil {
			ok++
		}
	}
	if errs[150] == nil || ok < 1 {
		t.Fatalf("tx 150: %v; %d committed", errs[150], ok)
	}
}

// TestWALTruncatedAfterBurst: a burst of writes grows the WAL (passive
// checkpoints fold it in but never shrink the file); once the writes
// stop, the checkpointer truncates it, so the burst does not keep its
// size on disk.
func TestWALTruncatedAfterBurst(t *testing.T) {
	s, path := openTestStore(t)
	row := strings.Repeat("x", 1024)
	err := s.Tx(context.Background(), func(tx *Tx) error {
		for i := range 20_000 {
			if _, err := tx.Exec(`INSERT INTO t(k,v) VALUES(?,?)`, i, row); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	if n := walSize(); n <= walKeep {
		t.Fatalf("the burst left a WAL of %d bytes: not a burst", n)
	}
	deadline := time.Now().Add(time.Minute)
	for walSize() > walKeep {
		if time.Now().After(deadline) {
			t.Fatalf("the WAL is still %d bytes after the burst", walSize())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var n int
	if err := s.R.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 20_000 {
		t.Fatalf("after the truncation: %d rows, %v", n, err)
	}
}
