package kernel

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// Store is the kernel's SQLite database: one writer connection (SQLite
// serialises writers anyway; one connection makes that explicit and avoids
// SQLITE_BUSY) and a bounded pool of read-only connections. The database is
// in WAL mode so readers never block the writer.
//
// Every write goes through Tx (or Exec), which commits concurrent
// transactions together: one goroutine owns the writer connection and runs
// each waiting transaction inside its own savepoint of one SQLite
// transaction, so one commit serves many callers while each caller's
// changes still stand or fall alone (group commit).
type Store struct {
	// R is the read-only pool. A read sees only committed data: a Tx that
	// has returned nil is visible to every read that starts after it.
	R *sql.DB

	w      *sql.DB // the one writer connection, owned by the committer
	writes chan *writeReq
	quit   chan struct{} // closed by Close: no more writes
	done   chan struct{} // closed when the committer has ended
	mu     sync.RWMutex  // held (read) while sending to writes; Close takes it
	closed bool

	rstmts stmtCache // statements of the read pool
	wstmts stmtCache // statements of the writer (see TxExec)

	// ckpt is the checkpointer's connection: commits never checkpoint
	// the WAL themselves (wal_autocheckpoint 0); the checkpointer does,
	// in the background, once there are commits to fold in.
	ckpt     *sql.DB
	dirty    atomic.Bool
	ckptDone chan struct{}
	wal      string // the WAL file's path

	migMu sync.Mutex
}

// ReadPool is the number of read connections.
const ReadPool = 4

// maxBatch bounds how many transactions one commit carries.
const maxBatch = 256

// ErrStoreClosed is returned by a write to a closed store.
var ErrStoreClosed = errors.New("store closed")

// writeReq is one transaction waiting for the committer.
type writeReq struct {
	ctx  context.Context
	fn   func(tx *sql.Tx) error
	done chan error // buffered: the committer never blocks on it
}

// OpenStore opens (creating if needed) the database file path.
func OpenStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dsn := func(ro bool, busyMs int) string {
		q := url.Values{}
		for _, p := range []string{
			"journal_mode(WAL)",
			"synchronous(NORMAL)", // WAL+NORMAL: a process crash loses no commit
			fmt.Sprintf("busy_timeout(%d)", busyMs),
			"foreign_keys(ON)",
		} {
			q.Add("_pragma", p)
		}
		q.Set("_txlock", "immediate")
		if !ro {
			q.Add("_pragma", "wal_autocheckpoint(0)") // the checkpointer's work
			// A WAL that a burst grew is cut back to this when it
			// starts over (after a complete checkpoint).
			q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walKeep))
		}
		if ro {
			q.Add("_pragma", "query_only(ON)")
		}
		return "file:" + abs + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn(false, 10000))
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
	r, err := sql.Open("sqlite", dsn(true, 10000))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(ReadPool)
	r.SetMaxIdleConns(ReadPool)
	// The checkpointer waits briefly: a TRUNCATE checkpoint holds the
	// writer's lock while it waits for readers, and writes must not
	// queue behind it.
	ck, err := sql.Open("sqlite", dsn(false, 100))
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	ck.SetMaxOpenConns(1)
	s := &Store{R: r, w: w, ckpt: ck, wal: abs + "-wal", writes: make(chan *writeReq, maxBatch), quit: make(chan struct{}), done: make(chan struct{}), ckptDone: make(chan struct{})}
	s.rstmts.db, s.wstmts.db = r, w
	go s.committer()
	go s.checkpointer()
	if err := s.Migrate("kernel", kernelMigrations); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops taking writes, lets the committer finish the transactions
// already handed to it, and closes both pools.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.quit)
	}
	s.mu.Unlock()
	<-s.done
	<-s.ckptDone
	s.rstmts.close()
	s.wstmts.close()
	s.ckpt.Close()
	err1 := s.R.Close()
	err2 := s.w.Close()
	if err1 != nil {
		return err1
	}
	return err2
}

// WriterStats reports the writer connection's pool statistics (for
// benchmarks: how long writes waited for it).
func (s *Store) WriterStats() sql.DBStats { return s.w.Stats() }

// Migrate applies, in order and each in its own transaction, the steps of
// component's schema that the database has not seen yet. Step i is version
// i+1. Subsystems call it with their own component name.
func (s *Store) Migrate(component string, steps []string) error {
	s.migMu.Lock()
	defer s.migMu.Unlock()
	ctx := context.Background()
	if _, err := s.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT PRIMARY KEY, version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	for {
		applied := false
		err := s.Tx(ctx, func(tx *sql.Tx) error {
			var have int
			err := tx.QueryRow(`SELECT version FROM schema_migrations WHERE component=?`, component).Scan(&have)
			if err != nil && err != sql.ErrNoRows {
				return err
			}
			if have >= len(steps) {
				return nil
			}
			if _, err := tx.Exec(steps[have]); err != nil {
				return fmt.Errorf("to version %d: %w", have+1, err)
			}
			applied = true
			_, err = tx.Exec(`INSERT INTO schema_migrations(component, version) VALUES(?, ?)
				ON CONFLICT(component) DO UPDATE SET version=excluded.version`, component, have+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		if !applied {
			return nil
		}
	}
}

// Tx runs fn in a write transaction and returns when fn's changes are
// committed (nil) or discarded (fn's error, or the commit's). fn may run
// in the same SQLite transaction as other callers' fns, each inside its own
// savepoint: fn sees their earlier changes, as a serial execution would,
// and an error from fn rolls back fn's changes only. fn runs on the
// committer's goroutine: it must not call Tx or Exec itself, and it should
// use tx's context-free methods (Exec, QueryRow), because a cancelled
// statement inside a transaction can make SQLite roll the whole
// transaction back. If ctx ends before fn starts, fn does not run and Tx
// returns ctx's error; once fn has started, Tx waits for the commit.
func (s *Store) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrStoreClosed
	}
	select {
	case s.writes <- req:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	return diskFull(<-req.done)
}

// diskFull returns err, made an ENOSPC too when it is SQLite's "database
// or disk is full" (SQLITE_FULL): a write it fails then answers ENOSPC
// over FUSE, not EIO, and keeps SQLite's message.
func diskFull(err error) error {
	var se interface{ Code() int }
	if errors.As(err, &se) && se.Code()&0xff == sqliteFull {
		return fullError{err}
	}
	return err
}

// sqliteFull is SQLITE_FULL, the primary result code of a full disk.
const sqliteFull = 13

// fullError is a store error that is also syscall.ENOSPC.
type fullError struct{ error }

func (e fullError) Unwrap() []error { return []error{e.error, syscall.ENOSPC} }

// Exec runs one statement in a write transaction (see Tx).
func (s *Store) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := s.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = tx.Exec(query, args...)
		return err
	})
	return res, err
}

// committer owns the writer connection: it takes the transactions waiting
// in s.writes, as many as are there (up to maxBatch), and commits them
// together. It ends when the store is closed, after finishing the
// transactions already taken and answering those still queued.
func (s *Store) committer() {
	defer close(s.done)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		var req *writeReq
		select {
		case req = <-s.writes:
		case <-s.quit:
			// Every Tx that got in before Close is answered.
			for {
				select {
				case r := <-s.writes:
					batch = append(batch[:0], r)
					for len(batch) > 0 {
						batch = s.commit(batch)
					}
				default:
					return
				}
			}
		}
		batch = append(batch[:0], req)
	fill:
		for len(batch) < maxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		for len(batch) > 0 {
			batch = s.commit(batch)
		}
		s.dirty.Store(true)
		// The writer connection is free: prepare the statements that
		// TxExec met for the first time.
		s.wstmts.prepareWanted()
	}
}

// checkpointEvery is how often the checkpointer folds the WAL into the
// database when there were commits.
const checkpointEvery = 200 * time.Millisecond

// walKeep is the size the WAL may keep between bursts: when it is larger
// and no commit came for a checkpointEvery, the checkpointer truncates it
// (and the writer cuts it back to this when it starts over:
// journal_size_limit). A passive checkpoint folds the WAL in but never
// shrinks the file: a burst of writes (a storm of runs) would otherwise
// leave its size on disk for good.
const walKeep = 4 << 20

// checkpointer folds the WAL into the database (PRAGMA
// wal_checkpoint(PASSIVE): it waits for no reader nor the writer) every
// checkpointEvery when there were commits, so that no commit pays a
// checkpoint's writes and fsync. When a tick finds no commit and a WAL
// over walKeep (a burst has passed), it truncates the WAL (PRAGMA
// wal_checkpoint(TRUNCATE), which waits at most 100 ms for readers and
// is tried again at an idle tick a second later if they held it). At Close, once
// the committer has ended, it checkpoints what is left.
func (s *Store) checkpointer() {
	defer close(s.ckptDone)
	tick := time.NewTicker(checkpointEvery)
	defer tick.Stop()
	var tried time.Time // the last truncation that readers held off
	run := func() {
		if s.dirty.Swap(false) {
			if _, err := s.ckpt.Exec(`PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
				s.dirty.Store(true)
			}
			return
		}
		if fi, err := os.Stat(s.wal); err == nil && fi.Size() > walKeep && time.Since(tried) > time.Second {
			if !s.truncateWAL(fi.Size()) {
				tried = time.Now() // a long reader: try again in a second, not every tick
			}
		}
	}
	for {
		select {
		case <-tick.C:
			run()
		case <-s.done:
			run()
			return
		}
	}
}

// truncateWAL checkpoints the whole WAL and truncates it to nothing,
// unless a reader or the writer holds it: then it reports false, and an
// idle tick a second later tries again. size is the WAL's size before.
func (s *Store) truncateWAL(size int64) bool {
	var busy, frames, done int
	if err := s.ckpt.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &frames, &done); err != nil {
		slog.Debug("store: truncating the WAL", "err", err)
		return false
	}
	if busy != 0 {
		return false
	}
	slog.Debug("store: the WAL is truncated after a burst", "was", size)
	return true
}

// commit runs batch in one transaction and answers each request. If the
// transaction is lost part way (SQLite rolled it back by itself), the
// requests already run are answered with the error and the rest are
// returned, to run in a new transaction.
func (s *Store) commit(batch []*writeReq) (rest []*writeReq) {
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		for _, r := range batch {
			r.done <- err
		}
		return nil
	}
	errs := make([]error, len(batch))
	single := len(batch) == 1
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if single {
			errs[i] = runFn(r.fn, tx)
			break
		}
		if _, err := tx.Exec(`SAVEPOINT w`); err != nil {
			return s.abandon(tx, batch, errs, i, err)
		}
		if errs[i] = runFn(r.fn, tx); errs[i] != nil {
			if _, err := tx.Exec(`ROLLBACK TO w`); err != nil {
				return s.abandon(tx, batch, errs, i+1, err)
			}
		}
		if _, err := tx.Exec(`RELEASE w`); err != nil {
			return s.abandon(tx, batch, errs, i+1, err)
		}
	}
	if single && errs[0] != nil {
		tx.Rollback()
		batch[0].done <- errs[0]
		return nil
	}
	cerr := tx.Commit()
	for i, r := range batch {
		if errs[i] == nil {
			errs[i] = cerr
		}
		r.done <- errs[i]
	}
	return nil
}

// abandon ends a transaction that SQLite no longer holds (or that cannot
// go on): the first n requests of batch are answered, with their own error
// or the transaction's, and the rest are returned to be run again.
func (s *Store) abandon(tx *sql.Tx, batch []*writeReq, errs []error, n int, cause error) []*writeReq {
	tx.Rollback()
	slog.Warn("store: transaction lost, retrying the rest of the batch", "err", cause, "answered", n, "retried", len(batch)-n)
	for i := 0; i < n; i++ {
		if errs[i] == nil { // its changes went with the transaction
			errs[i] = fmt.Errorf("store: transaction rolled back: %w", cause)
		}
		batch[i].done <- errs[i]
	}
	return batch[n:]
}

// runFn runs fn, turning a panic into an error so that the committer, and
// the other callers in its batch, survive it.
func runFn(fn func(*sql.Tx) error, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.Error("store: transaction panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("store: transaction panicked: %v", p)
		}
	}()
	return fn(tx)
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
	// A token may narrow its holder's process capability (abi.ProcessCap
	// as JSON; NULL narrows nothing).
	`ALTER TABLE tokens ADD COLUMN process_cap TEXT`,
	// Three steps kept so later numbers stay: the kernel derives every
	// grant from the syscalls' descriptors, and group_caps is no longer
	// read.
	`SELECT 1`,
	`SELECT 1`,
	`SELECT 1`,
}

// maxCachedStmts bounds each statement cache; queries beyond it run
// unprepared (queries are the program's constants, so it is not reached).
const maxCachedStmts = 512

// stmtCache keeps one prepared statement per query text. SQLite spends
// more on parsing a short statement than on running it; database/sql
// prepares a pool statement again on each connection it meets, once.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	wanted map[string]bool // writer: to prepare when the connection is free
}

// get returns query's statement, preparing it on c.db if it is new (nil if
// the cache is full or the query does not prepare: the caller runs it
// unprepared and meets the error there).
func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	st, full := c.m[query], len(c.m) >= maxCachedStmts
	c.mu.Unlock()
	if st != nil {
		return st
	}
	if full {
		return nil
	}
	st, err := c.db.Prepare(query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	if old := c.m[query]; old != nil {
		st.Close()
		return old
	}
	c.m[query] = st
	return st
}

// lookup returns query's statement if it is prepared, else notes it for
// prepareWanted and returns nil.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.m[query]; st != nil {
		return st
	}
	if len(c.m)+len(c.wanted) < maxCachedStmts {
		if c.wanted == nil {
			c.wanted = map[string]bool{}
		}
		c.wanted[query] = true
	}
	return nil
}

// prepareWanted prepares the statements lookup missed. The writer's one
// connection must be free (it is, between the committer's batches).
func (c *stmtCache) prepareWanted() {
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = nil
	c.mu.Unlock()
	for q := range wanted {
		c.get(q)
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// QueryRowContext runs a query on the read pool with a cached prepared statement.
func (s *Store) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := s.rstmts.get(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.R.QueryRowContext(ctx, query, args...)
}

// QueryContext runs a query on the read pool with a cached prepared statement.
func (s *Store) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := s.rstmts.get(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.R.QueryContext(ctx, query, args...)
}

// TxExec runs a statement in tx, a transaction of Tx, with a cached
// prepared statement (prepared after its first use, when the writer is
// free).
func (s *Store) TxExec(tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.wstmts.lookup(query); st != nil {
		return tx.Stmt(st).Exec(args...)
	}
	return tx.Exec(query, args...)
}

// TxQueryRow runs a query in tx, a transaction of Tx, with a cached
// prepared statement.
func (s *Store) TxQueryRow(tx *sql.Tx, query string, args ...any) *sql.Row {
	if st := s.wstmts.lookup(query); st != nil {
		return tx.Stmt(st).QueryRow(args...)
	}
	return tx.QueryRow(query, args...)
}

// eachRow runs a query on the read pool and calls fn for each row; the
// first error of the query, of fn or of the iteration is returned.
func (s *Store) eachRow(ctx context.Context, fn func(rows *sql.Rows) error, query string, args ...any) error {
	rows, err := s.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
