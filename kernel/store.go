package kernel

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// Store is the kernel's database, over a Dialect: one writer connection
// (SQLite serialises writers anyway; one connection makes that explicit
// and avoids SQLITE_BUSY) and a bounded pool of read connections.
//
// Every write goes through Tx (or Exec), which commits concurrent
// transactions together: one goroutine owns the writer connection and runs
// each waiting transaction inside its own savepoint of one database
// transaction, so one commit serves many callers while each caller's
// changes still stand or fall alone (group commit).
//
// Every statement is written with ? placeholders in the portable SQL the
// Dialect describes; the Store rebinds it for the engine. Rooms reach the
// database only through the Store's methods and a Tx.
type Store struct {
	// R is the read pool, for tests that look at the tables directly:
	// the system reads through QueryContext, QueryRowContext and
	// BeginRead, which rebind for the engine and keep statements
	// prepared. A read sees only committed data: a Tx that has returned
	// nil is visible to every read that starts after it.
	R *sql.DB

	d      Dialect
	w      *sql.DB // the one writer connection, owned by the committer
	writes chan *writeReq
	quit   chan struct{} // closed by Close: no more writes
	done   chan struct{} // closed when the committer has ended
	mu     sync.RWMutex  // held (read) while sending to writes; Close takes it
	closed bool

	rstmts stmtCache // statements of the read pool
	wstmts stmtCache // statements of the writer (see TxExec)

	migMu sync.Mutex // serialises Migrate

	// queries counts the queries and transactions run through the
	// store's methods (Queries).
	queries atomic.Uint64

	// hook, if set, appends to every batch's transaction before it
	// commits (the audit log's pending call records; setCommitHook).
	hook atomic.Pointer[commitHook]
	// onCommit, if set, is told how long each commit took (metrics).
	onCommit atomic.Pointer[func(time.Duration, error)]
	// lost counts the batches whose transaction did not commit (a
	// failed commit, an abandoned or rolled-back batch): the audit log's
	// cached chain head is stale after one.
	lost atomic.Uint64
	// auditHead caches the audit chain's head (audit.go); only the
	// committer touches it.
	auditHead chainHead
}

// commitHook appends to tx, a batch's transaction about to commit, and
// returns what to run once the commit's outcome is known.
// Ready reports, cheaply, whether it has anything to append besides the
// change records the batch's fns left in tx (Tx.audit).
type commitHook struct {
	ready func() bool
	run   func(tx *Tx) (after func(committed bool), err error)
}

// setCommitHook makes h run in every batch's transaction before it
// commits. Its error fails the whole batch (its change records are
// the batch's: no change commits without its record).
func (s *Store) setCommitHook(h commitHook) { s.hook.Store(&h) }

// OnCommit makes fn learn the duration and outcome of every commit of
// the store from now on (metrics; nil: none). fn runs on the committer:
// it must return at once.
func (s *Store) OnCommit(fn func(time.Duration, error)) {
	if fn == nil {
		s.onCommit.Store(nil)
		return
	}
	s.onCommit.Store(&fn)
}

// maxBatch bounds how many transactions one commit carries.
const maxBatch = 256

// ErrStoreClosed is returned by a write to a closed store.
var ErrStoreClosed = errors.New("store closed")

// writeReq is one transaction waiting for the committer.
type writeReq struct {
	ctx  context.Context
	fn   func(tx *Tx) error
	done chan error // buffered: the committer never blocks on it
}

// Tx is a write transaction of the Store, as a fn of Store.Tx sees it:
// its statements run inside the committer's transaction (see Store.Tx).
// Statements that write take no context: a write interrupted inside a
// transaction can make SQLite roll the whole transaction back.
type Tx struct {
	tx *sql.Tx
	s  *Store
	// audit holds the change records of the batch's audited fns that
	// succeeded, appended to the chain by the commit hook.
	audit []abi.AuditRecord
	// scopes are the calls of those records: each learns, once the
	// batch has committed, that its change record is in the log.
	scopes []*auditScope
}

// Exec runs a statement in the transaction.
func (t *Tx) Exec(query string, args ...any) (sql.Result, error) {
	return t.tx.Exec(t.s.d.Rebind(query), args...)
}

// QueryRow runs a query that returns at most one row (a SELECT, or a
// statement with RETURNING) in the transaction.
func (t *Tx) QueryRow(query string, args ...any) *sql.Row {
	return t.tx.QueryRow(t.s.d.Rebind(query), args...)
}

// Query runs a query (a SELECT, or a statement with RETURNING) in the
// transaction.
func (t *Tx) Query(query string, args ...any) (*sql.Rows, error) {
	return t.tx.Query(t.s.d.Rebind(query), args...)
}

// QueryContext runs a SELECT in the transaction. A read may take a
// context (a cancelled read changes nothing); a statement that writes
// (RETURNING) goes through Query.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.s.d.Rebind(query), args...)
}

// QueryRowContext runs a SELECT that returns at most one row in the
// transaction (see QueryContext).
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.s.d.Rebind(query), args...)
}

// Prepare prepares a statement for this transaction only (a bulk insert);
// the statement ends with it.
func (t *Tx) Prepare(query string) (*sql.Stmt, error) {
	return t.tx.Prepare(t.s.d.Rebind(query))
}

// OpenStore opens (creating if needed) the SQLite database file path:
// NewStore(SQLite(path)).
func OpenStore(path string) (*Store, error) { return NewStore(SQLite(path)) }

// NewStore opens the database d reaches and starts the committer. The
// store holds no table yet: each component migrates its own (Migrate).
func NewStore(d Dialect) (*Store, error) {
	w, r, err := d.Open()
	if err != nil {
		return nil, err
	}
	s := &Store{R: r, d: d, w: w, writes: make(chan *writeReq, maxBatch), quit: make(chan struct{}), done: make(chan struct{})}
	s.rstmts.db, s.wstmts.db, s.rstmts.d, s.wstmts.d = r, w, d, d
	go s.committer()
	return s, nil
}

// Dialect returns the engine under the store.
func (s *Store) Dialect() Dialect { return s.d }

// Close stops taking writes, lets the committer finish the transactions
// already handed to it, stops the engine's upkeep and closes both pools.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.quit)
	}
	s.mu.Unlock()
	<-s.done
	err0 := s.d.Close()
	s.rstmts.close()
	s.wstmts.close()
	err1 := s.R.Close()
	err2 := s.w.Close()
	return errors.Join(err0, err1, err2)
}

// Queries returns how many queries (QueryContext, QueryRowContext, and
// those of a ReadTx) and write transactions (Tx, Exec) have been run
// through the store's methods since it opened: tests count them to hold a
// path to no SQL per call.
func (s *Store) Queries() uint64 { return s.queries.Load() }

// WriterStats reports the writer connection's pool statistics (for
// benchmarks: how long writes waited for it).
func (s *Store) WriterStats() sql.DBStats { return s.w.Stats() }

// Migrate applies, in order and each in its own transaction, the steps of
// component's schema that the database has not seen yet. Step i is version
// i+1; the table schema_migrations keeps each component's version. Each
// component (the kernel's "kernel", each room's) migrates its own tables
// when it opens. Steps are only ever appended: a step once released keeps
// its meaning. A step is portable DDL (see Dialect), made the engine's by
// Dialect.Schema; a step that is empty for the engine only counts.
func (s *Store) Migrate(component string, steps []string) error {
	s.migMu.Lock()
	defer s.migMu.Unlock()
	ctx := context.Background()
	// Nodes sharing a database (Postgres) migrate one at a time: each
	// step's transaction first takes the engine's migration lock.
	lock := func(tx *Tx) error {
		if l, ok := s.d.(interface{ migrationLock() string }); ok {
			_, err := tx.tx.Exec(l.migrationLock())
			return err
		}
		return nil
	}
	err := s.Tx(ctx, func(tx *Tx) error {
		if err := lock(tx); err != nil {
			return err
		}
		_, err := tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT PRIMARY KEY, version INTEGER NOT NULL)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	for {
		applied := false
		err := s.Tx(ctx, func(tx *Tx) error {
			if err := lock(tx); err != nil {
				return err
			}
			var have int
			err := tx.QueryRow(`SELECT version FROM schema_migrations WHERE component=?`, component).Scan(&have)
			if err != nil && err != sql.ErrNoRows {
				return err
			}
			if have >= len(steps) {
				return nil
			}
			if step := s.d.Schema(steps[have]); step != "" {
				// DDL has no placeholders: it runs as written.
				if _, err := tx.tx.Exec(step); err != nil {
					return fmt.Errorf("to version %d: %w", have+1, err)
				}
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

// Version returns the version of component's schema that the database
// holds: 0 if it has none.
func (s *Store) Version(ctx context.Context, component string) (int, error) {
	var v int
	err := s.QueryRowContext(ctx, `SELECT version FROM schema_migrations WHERE component=?`, component).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// Tx runs fn in a write transaction and returns when fn's changes are
// committed (nil) or discarded (fn's error, or the commit's). fn may run
// in the same database transaction as other callers' fns, each inside its
// own savepoint: fn sees their earlier changes, as a serial execution
// would, and an error from fn rolls back fn's changes only. fn runs on the
// committer's goroutine: it must not call Tx or Exec itself. If ctx ends
// before fn starts, fn does not run and Tx returns ctx's error; once fn
// has started, Tx waits for the commit. A full disk is also
// syscall.ENOSPC (Dialect.Err).
func (s *Store) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	s.queries.Add(1)
	if sc := auditFrom(ctx); sc != nil {
		// The audited call's change record commits with its change.
		fn = sc.wrap(fn)
	}
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
	return s.d.Err(<-req.done)
}

// Exec runs one statement in a write transaction (see Tx).
func (s *Store) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := s.Tx(ctx, func(tx *Tx) error {
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
		s.d.Committed()
		// The writer connection is free: prepare the statements that
		// TxExec met for the first time.
		s.wstmts.prepareWanted()
	}
}

// commit runs batch in one transaction and answers each request. If the
// transaction is lost part way (the database rolled it back by itself),
// the requests already run are answered with the error and the rest are
// returned, to run in a new transaction.
func (s *Store) commit(batch []*writeReq) (rest []*writeReq) {
	stx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		for _, r := range batch {
			r.done <- err
		}
		return nil
	}
	tx := &Tx{tx: stx, s: s}
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
		if _, err := stx.Exec(`SAVEPOINT w`); err != nil {
			return s.abandon(stx, batch, errs, i, err)
		}
		if errs[i] = runFn(r.fn, tx); errs[i] != nil {
			if _, err := stx.Exec(`ROLLBACK TO w`); err != nil {
				return s.abandon(stx, batch, errs, i+1, err)
			}
		}
		if _, err := stx.Exec(`RELEASE w`); err != nil {
			return s.abandon(stx, batch, errs, i+1, err)
		}
	}
	if single && errs[0] != nil {
		stx.Rollback()
		s.lost.Add(1)
		batch[0].done <- errs[0]
		return nil
	}
	after, herr := s.runHook(tx)
	if herr != nil {
		// The batch's change records could not be appended: nothing of
		// the batch commits.
		stx.Rollback()
		s.lost.Add(1)
		for i, r := range batch {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("store: appending the audit records: %w", herr)
			}
			r.done <- errs[i]
		}
		return nil
	}
	t0 := time.Now()
	cerr := stx.Commit()
	if cerr != nil {
		s.lost.Add(1)
	} else {
		for _, sc := range tx.scopes {
			sc.changed.Store(true)
		}
	}
	if fn := s.onCommit.Load(); fn != nil {
		(*fn)(time.Since(t0), cerr)
	}
	if after != nil {
		after(cerr == nil)
	}
	for i, r := range batch {
		if errs[i] == nil {
			errs[i] = cerr
		}
		r.done <- errs[i]
	}
	return nil
}

// runHook runs the commit hook in tx and returns what to run after the
// commit (nil: nothing), or the hook's error.
func (s *Store) runHook(tx *Tx) (func(bool), error) {
	h := s.hook.Load()
	if h == nil || (len(tx.audit) == 0 && !h.ready()) {
		return nil, nil
	}
	return h.run(tx)
}

// abandon ends a transaction that the database no longer holds (or that
// cannot go on): the first n requests of batch are answered, with their
// own error or the transaction's, and the rest are returned to be run
// again.
func (s *Store) abandon(tx *sql.Tx, batch []*writeReq, errs []error, n int, cause error) []*writeReq {
	tx.Rollback()
	s.lost.Add(1)
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
func runFn(fn func(*Tx) error, tx *Tx) (err error) {
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
	// A service token may be bound to a chat adapter kind
	// (abi.Token.AllowedAdapter; NULL: none).
	`ALTER TABLE tokens ADD COLUMN allowed_adapter TEXT`,
	// The audit log (audit.go): hash-chained records, seq explicit (the
	// hash covers it); audit_anchor keeps the last pruned record's seq
	// and hash, which the first kept record's prev names. No secondary
	// index: each would add a page to every audited commit (queries scan
	// by seq, newest or oldest first).
	`CREATE TABLE audit_log (
		seq INTEGER PRIMARY KEY,
		at INTEGER NOT NULL,
		kind TEXT NOT NULL,
		call_id TEXT NOT NULL,
		uid INTEGER NOT NULL,
		username TEXT NOT NULL,
		role TEXT NOT NULL,
		token_id TEXT NOT NULL,
		pid TEXT NOT NULL,
		conv TEXT NOT NULL,
		syscall TEXT NOT NULL,
		target TEXT NOT NULL,
		code INTEGER NOT NULL,
		dur_us INTEGER NOT NULL,
		trace TEXT NOT NULL,
		args TEXT NOT NULL,
		prev TEXT NOT NULL,
		hash TEXT NOT NULL
	);
	CREATE TABLE audit_anchor (
		id INTEGER PRIMARY KEY,
		seq INTEGER NOT NULL,
		hash TEXT NOT NULL
	);`,
	// Ownership leases of nodes sharing the database (ownership.go):
	// resource, its holder and epoch (the fencing token), and when the
	// lease ends (Unix ms).
	`CREATE TABLE node_leases (
		resource TEXT PRIMARY KEY,
		node TEXT NOT NULL,
		epoch INTEGER NOT NULL,
		expires_at INTEGER NOT NULL
	)`,
}

// maxCachedStmts bounds each statement cache; queries beyond it run
// unprepared (queries are the program's constants, so it is not reached).
const maxCachedStmts = 512

// stmtCache keeps one prepared statement per query text. SQLite spends
// more on parsing a short statement than on running it; database/sql
// prepares a pool statement again on each connection it meets, once.
// Queries are kept by their portable text and prepared rebound.
type stmtCache struct {
	db     *sql.DB
	d      Dialect
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
	st, err := c.db.Prepare(c.d.Rebind(query))
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
	s.queries.Add(1)
	if st := s.rstmts.get(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.R.QueryRowContext(ctx, s.d.Rebind(query), args...)
}

// QueryContext runs a query on the read pool with a cached prepared statement.
func (s *Store) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s.queries.Add(1)
	if st := s.rstmts.get(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.R.QueryContext(ctx, s.d.Rebind(query), args...)
}

// ReadTx is a read-only transaction on the read pool: its queries see one
// snapshot of the database. Rollback ends it.
type ReadTx struct {
	tx *sql.Tx
	s  *Store
}

// BeginRead starts a read-only transaction (see ReadTx).
func (s *Store) BeginRead(ctx context.Context) (*ReadTx, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if ro, ok := s.d.(interface{ readTxOptions() *sql.TxOptions }); ok {
		opts = ro.readTxOptions()
	}
	tx, err := s.R.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &ReadTx{tx: tx, s: s}, nil
}

// QueryRowContext runs a query that returns at most one row in the snapshot.
func (r *ReadTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	r.s.queries.Add(1)
	return r.tx.QueryRowContext(ctx, r.s.d.Rebind(query), args...)
}

// QueryContext runs a query in the snapshot.
func (r *ReadTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	r.s.queries.Add(1)
	return r.tx.QueryContext(ctx, r.s.d.Rebind(query), args...)
}

// Rollback ends the read transaction.
func (r *ReadTx) Rollback() error { return r.tx.Rollback() }

// TxExec runs a statement in tx, a transaction of Tx, with a cached
// prepared statement (prepared after its first use, when the writer is
// free).
func (s *Store) TxExec(tx *Tx, query string, args ...any) (sql.Result, error) {
	if st := s.wstmts.lookup(query); st != nil {
		return tx.tx.Stmt(st).Exec(args...)
	}
	return tx.Exec(query, args...)
}

// TxQueryRow runs a query in tx, a transaction of Tx, with a cached
// prepared statement.
func (s *Store) TxQueryRow(tx *Tx, query string, args ...any) *sql.Row {
	if st := s.wstmts.lookup(query); st != nil {
		return tx.tx.Stmt(st).QueryRow(args...)
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
