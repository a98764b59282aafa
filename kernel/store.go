package kernel

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// Store is the kernel's SQLite database: one writer connection (SQLite
// serialises writers anyway; one connection makes that explicit and avoids
// SQLITE_BUSY) and a bounded pool of read-only connections. The database is
// in WAL mode so readers never block the writer.
type Store struct {
	W *sql.DB // the one writer
	R *sql.DB // read-only pool

	migMu sync.Mutex
}

// ReadPool is the number of read connections.
const ReadPool = 4

// OpenStore opens (creating if needed) the database file path.
func OpenStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dsn := func(ro bool) string {
		q := url.Values{}
		for _, p := range []string{
			"journal_mode(WAL)",
			"synchronous(NORMAL)", // WAL+NORMAL: a process crash loses no commit
			"busy_timeout(10000)",
			"foreign_keys(ON)",
		} {
			q.Add("_pragma", p)
		}
		q.Set("_txlock", "immediate")
		if ro {
			q.Add("_pragma", "query_only(ON)")
		}
		return "file:" + abs + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn(false))
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.Ping(); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn(true))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(ReadPool)
	r.SetMaxIdleConns(ReadPool)
	s := &Store{W: w, R: r}
	if err := s.Migrate("kernel", kernelMigrations); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes both pools.
func (s *Store) Close() error {
	err1 := s.R.Close()
	err2 := s.W.Close()
	if err1 != nil {
		return err1
	}
	return err2
}

// Migrate applies, in order and each in its own transaction, the steps of
// component's schema that the database has not seen yet. Step i is version
// i+1. Subsystems call it with their own component name.
func (s *Store) Migrate(component string, steps []string) error {
	s.migMu.Lock()
	defer s.migMu.Unlock()
	if _, err := s.W.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT PRIMARY KEY, version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	var have int
	err := s.W.QueryRow(`SELECT version FROM schema_migrations WHERE component=?`, component).Scan(&have)
	if err != nil && err != sql.ErrNoRows {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	for v := have; v < len(steps); v++ {
		tx, err := s.W.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(steps[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s to version %d: %w", component, v+1, err)
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations(component, version) VALUES(?, ?)
			ON CONFLICT(component) DO UPDATE SET version=excluded.version`, component, v+1); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Tx runs fn in a write transaction, committing if fn returns nil.
func (s *Store) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.W.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

var kernelMigrations = []string{
	`CREATE TABLE groups (
		gid INTEGER PRIMARY KEY,
		name TEXT NOT NULL UNIQUE
	);
	CREATE TABLE group_caps (
		gid INTEGER NOT NULL REFERENCES groups(gid) ON DELETE CASCADE,
		cap TEXT NOT NULL,
		PRIMARY KEY (gid, cap)
	);
	CREATE TABLE users (
		uid INTEGER PRIMARY KEY,
		username TEXT NOT NULL UNIQUE,
		gid INTEGER NOT NULL REFERENCES groups(gid),
		home TEXT NOT NULL,
		host_uid INTEGER UNIQUE,
		gecos TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL
	);
	CREATE TABLE group_members (
		gid INTEGER NOT NULL REFERENCES groups(gid) ON DELETE CASCADE,
		uid INTEGER NOT NULL REFERENCES users(uid) ON DELETE CASCADE,
		PRIMARY KEY (gid, uid)
	);
	CREATE TABLE tokens (
		token_id TEXT PRIMARY KEY,
		hash TEXT NOT NULL UNIQUE,
		prefix TEXT NOT NULL,
		uid INTEGER NOT NULL REFERENCES users(uid) ON DELETE CASCADE,
		kind TEXT NOT NULL,
		label TEXT,
		allowed_role TEXT,
		allowed_device_id TEXT,
		created_at INTEGER NOT NULL,
		last_used_at INTEGER,
		expires_at INTEGER,
		revoked_at INTEGER,
		revoked_reason TEXT
	);
	CREATE TABLE config (
		key TEXT PRIMARY KEY,
		value TEXT NOT NULL
	);`,
}
