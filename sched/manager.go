package sched

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// Options configure the scheduler.
type Options struct {
	Logger *slog.Logger
	// Clock is the engine's clock; nil means the real one.
	Clock Clock
	// RunTimeout bounds one run's target syscall (default 5 minutes).
	RunTimeout time.Duration

	// testExec, when set (tests only: it is unexported), is called by
	// execute before the target: if it reports handled, its summary and
	// error are the run's and the target syscall is not made. It is an
	// option, not a Manager field, so that it is in place before the engine
	// (and reload's catch-up runs) start.
	testExec func(ctx context.Context, s *abi.Schedule) (summary string, handled bool, err error)
	// testNoFireRate (tests only) turns the owners' fire rate off: the
	// benchmarks of the engine's own capacity fire 10,000 schedules of
	// one owner at once.
	testNoFireRate bool
}

// Manager is the kernel scheduler, a room of the namespace (ns.Room): its
// syscalls (Syscalls), its files (Mounts), its engine (Start) and Close,
// which stops the engine and waits for the runs under way.
type Manager struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	clock Clock
	opts  Options

	// mu guards the engine's state: the timer heap, the armed time of
	// each schedule and the runs under way. Functions named ...Locked
	// need it held.
	mu      sync.Mutex
	heap    timerHeap
	next    map[string]int64     // armed fire time by schedule id; the heap's current entries
	running map[string]*runState // runs under way by schedule id
	// brokenSeen are the damaged schedules logged since the start
	// (skipBroken logs each once).
	brokenSeen map[string]bool

	// fair is the owners' queues of due schedules and the engine's
	// runs under way (fair.go), under mu.
	fair fairState

	// crontabMu makes one crontab reconciliation at a time.
	crontabMu sync.Mutex

	kick      chan struct{}
	stop      chan struct{}
	stopped   chan struct{} // closed when the engine's loop returns
	started   bool          // Start ran the loop
	closeOnce sync.Once
	wg        sync.WaitGroup // dispatchers and runs

	// changes are when each user's crontab last changed (tabChanged):
	// touched where a change is announced (sched.changed, and
	// sched.run.finished, after which a one-shot shows #disabled).
	changes *ns.Changes
}

var _ ns.Room = (*Manager)(nil)
var _ ns.Starter = (*Manager)(nil)

// Open migrates the scheduler's schema and prepares a Manager over space.
// Nothing runs until Start (ns.Space.Add registers the syscalls, binds
// the files, then starts it).
func Open(space *ns.Space, opts Options) (*Manager, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.RunTimeout == 0 {
		opts.RunTimeout = 5 * time.Minute
	}
	if err := k.Store.Migrate("sched", migrations(k.Store.Dialect())); err != nil {
		return nil, err
	}
	return &Manager{k: k, space: space, st: k.Store, log: opts.Logger, clock: opts.Clock, opts: opts,
		next: map[string]int64{}, running: map[string]*runState{}, fair: newFairState(!opts.testNoFireRate),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}), changes: ns.NewChanges()}, nil
}

// Start reloads every enabled schedule (applying each one's misfire policy
// to what was missed while the daemon was down) and starts the engine.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.reload(ctx); err != nil {
		return err
	}
	m.started = true
	go m.loop()
	return nil
}

// Close stops the engine and waits for the runs under way; due schedules
// not yet dispatched stay due (the next start's misfire policy applies to
// them). It is safe to call more than once.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.fair.stopping = true // what waits in the queues stays due
		m.mu.Unlock()
		close(m.stop)
		if m.started {
			<-m.stopped
		}
		m.wg.Wait()
	})
	return nil
}

// Syscalls is the scheduler's syscall table: the public sched.* calls
// (seed 003) and the Internal ones its files make.
func (m *Manager) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.SchedList, m.list),
		kernel.Handle(abi.SchedAdd, m.add),
		kernel.Handle(abi.SchedUpdate, m.update),
		kernel.Handle(abi.SchedRemove, m.remove),
		kernel.Handle(abi.SchedRun, m.runNow),
		kernel.Handle(abi.SchedCtlRun, m.ctlRun),
		kernel.Handle(abi.SchedOwners, m.owners),
		kernel.Handle(abi.SchedCrontabGet, m.crontabGet),
		kernel.Handle(abi.SchedCrontabSet, m.crontabSet),
		kernel.Handle(abi.SchedCrontabCheck, m.crontabCheck),
		kernel.Handle(abi.SchedLog, m.logCall),
		kernel.Handle(abi.SchedStats, m.stats),
	}
}

// stats serves sched.stats: the fair queue's depth and the runs under way.
func (m *Manager) stats(context.Context, *kernel.Caller, *struct{}) (*abi.SchedStatsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &abi.SchedStatsResult{Queued: len(m.fair.queued), Running: len(m.running)}, nil
}

// Mounts are the scheduler's files: /var/spool/cron (the crontabs, ctl
// and err) and /var/log/gsv/scheduler (the run history).
func (m *Manager) Mounts() []ns.Mount {
	return []ns.Mount{
		{Path: cronDirPath, Node: m.cronDir()},
		{Path: logPath, Node: m.logView()},
	}
}

// migrations are the scheduler's schema steps: the schedules and their
// runs; the narrowing a schedule keeps; the order schedules were made in
// (seq: a crontab lists them so).
func migrations(d kernel.Dialect) []string {
	return []string{
		`CREATE TABLE sched_schedules (
		id TEXT PRIMARY KEY,
		owner_uid INTEGER NOT NULL,
		creator_uid INTEGER NOT NULL,
		run_as_uid INTEGER NOT NULL,
		name TEXT NOT NULL,
		description TEXT,
		enabled INTEGER NOT NULL DEFAULT 1,
		expression TEXT NOT NULL,
		target TEXT NOT NULL,
		overlap TEXT NOT NULL DEFAULT 'skip',
		misfire TEXT NOT NULL DEFAULT 'skip',
		retry TEXT,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		next_run_at INTEGER,
		running_at INTEGER,
		last_run_at INTEGER,
		last_status TEXT,
		last_error TEXT,
		last_duration_ms INTEGER,
		run_count INTEGER NOT NULL DEFAULT 0,
		attempt INTEGER NOT NULL DEFAULT 0,
		UNIQUE (owner_uid, name)
	);
	CREATE INDEX sched_schedules_next ON sched_schedules(enabled, next_run_at);
	CREATE TABLE sched_runs (
		id INTEGER PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
		schedule_id TEXT NOT NULL,
		name TEXT NOT NULL,
		owner_uid INTEGER NOT NULL,
		scheduled_at INTEGER NOT NULL,
		started_at INTEGER NOT NULL,
		finished_at INTEGER NOT NULL,
		status TEXT NOT NULL,
		error TEXT,
		summary TEXT,
		duration_ms INTEGER NOT NULL
	);
	CREATE INDEX sched_runs_owner ON sched_runs(owner_uid, id);`,
		// 2: a schedule added or changed by a narrowed caller (a token made
		// with --process) keeps the narrowing (JSON abi.ProcessCap; NULL:
		// none), and its runs act within it.
		`ALTER TABLE sched_schedules ADD COLUMN process_cap TEXT`,
		// 3, 4: the order schedules were made in, numbered for those made
		// before.
		`ALTER TABLE sched_schedules ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX sched_schedules_seq ON sched_schedules(seq);`,
		d.NumberRows("sched_schedules", "seq"),
		// 5: the reload's index covers its query (enabled, next_run_at,
		// id), so arming reads the index alone, in order: through the
		// old index it looked each row up in the table, a random read
		// per schedule once the table outgrew the page cache (1M
		// schedules reloaded 4-6x slower per schedule than 100k).
		`CREATE INDEX sched_schedules_arm ON sched_schedules(enabled, next_run_at, id);
	DROP INDEX sched_schedules_next;`,
		// 6: the occurrences claimed by the nodes sharing the database
		// (claims.go): each is claimed once.
		`CREATE TABLE sched_claims (
		schedule_id TEXT NOT NULL,
		due_at INTEGER NOT NULL,
		node TEXT NOT NULL,
		claimed_at INTEGER NOT NULL,
		PRIMARY KEY (schedule_id, due_at)
	)`,
	}
}
