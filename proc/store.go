package proc

// migrations is the proc component's schema (see kernel.Store.Migrate).
// Every message, queue entry, run and HIL record carries its conversation
// id and generation: work of an old generation never touches a new one.
var migrations = []string{
	`CREATE TABLE proc_processes (
		pid TEXT PRIMARY KEY,
		uid INTEGER NOT NULL,
		profile TEXT NOT NULL,
		label TEXT,
		parent_pid TEXT,
		state TEXT NOT NULL DEFAULT 'idle',
		cwd TEXT NOT NULL,
		workspace_id TEXT,
		created_at INTEGER NOT NULL,
		hil_allow TEXT NOT NULL DEFAULT '[]'
	);
	CREATE INDEX proc_processes_uid ON proc_processes(uid);
	CREATE TABLE proc_conversations (
		pid TEXT NOT NULL,
		cid TEXT NOT NULL,
		generation INTEGER NOT NULL DEFAULT 1,
		status TEXT NOT NULL DEFAULT 'open',
		title TEXT,
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		overflow TEXT NOT NULL DEFAULT 'manual',
		compact_at REAL NOT NULL DEFAULT 0.9,
		keep_last INTEGER NOT NULL DEFAULT 80,
		PRIMARY KEY (pid, cid)
	);
	CREATE TABLE proc_messages (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		pid TEXT NOT NULL,
		cid TEXT NOT NULL,
		generation INTEGER NOT NULL,
		role TEXT NOT NULL,
		content TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE INDEX proc_messages_conv ON proc_messages(pid, cid, generation, id);
	CREATE TABLE proc_queue (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		pid TEXT NOT NULL,
		cid TEXT NOT NULL,
		generation INTEGER NOT NULL,
		run_id TEXT NOT NULL,
		message TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE INDEX proc_queue_pid ON proc_queue(pid, id);
	CREATE TABLE proc_runs (
		run_id TEXT PRIMARY KEY,
		pid TEXT NOT NULL,
		cid TEXT NOT NULL,
		generation INTEGER NOT NULL,
		status TEXT NOT NULL,
		started_at INTEGER NOT NULL,
		finished_at INTEGER,
		error TEXT
	);
	CREATE INDEX proc_runs_pid ON proc_runs(pid, status);
	CREATE TABLE proc_hil (
		request_id TEXT PRIMARY KEY,
		pid TEXT NOT NULL,
		run_id TEXT NOT NULL,
		cid TEXT NOT NULL,
		generation INTEGER NOT NULL,
		call_id TEXT NOT NULL,
		tool_name TEXT NOT NULL,
		syscall TEXT NOT NULL,
		args TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		status TEXT NOT NULL DEFAULT 'pending'
	);
	CREATE INDEX proc_hil_pid ON proc_hil(pid, status);
	CREATE TABLE proc_segments (
		id TEXT PRIMARY KEY,
		pid TEXT NOT NULL,
		cid TEXT NOT NULL,
		generation INTEGER NOT NULL,
		kind TEXT NOT NULL,
		from_id INTEGER NOT NULL,
		to_id INTEGER NOT NULL,
		suffix_to INTEGER NOT NULL,
		archive_path TEXT NOT NULL,
		summary_message_id INTEGER,
		messages INTEGER NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE INDEX proc_segments_conv ON proc_segments(pid, cid);`,
	// 2: queued messages keep their role (user, or system for events).
	`ALTER TABLE proc_queue ADD COLUMN role TEXT NOT NULL DEFAULT 'user'`,
	// 3: a conversation's epoch counts the rewrites of its live generation
	// (compactions); the render cache starts a new file when it changes.
	`ALTER TABLE proc_conversations ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0`,
	// 4: the messages that enter a conversation (and wait in its queue)
	// keep their event: kind, source principal (JSON), trace id; a run
	// knows its first message; the IPC calls between processes; the
	// signal watches of processes.
	`ALTER TABLE proc_messages ADD COLUMN kind TEXT;
	ALTER TABLE proc_messages ADD COLUMN source TEXT;
	ALTER TABLE proc_messages ADD COLUMN trace_id TEXT;
	ALTER TABLE proc_queue ADD COLUMN kind TEXT;
	ALTER TABLE proc_queue ADD COLUMN source TEXT;
	ALTER TABLE proc_queue ADD COLUMN trace_id TEXT;
	ALTER TABLE proc_runs ADD COLUMN first_message INTEGER;
	CREATE TABLE proc_ipc_calls (
		call_id TEXT PRIMARY KEY,
		uid INTEGER NOT NULL,
		source_pid TEXT NOT NULL,
		source_cid TEXT NOT NULL,
		source_gen INTEGER NOT NULL,
		source_run TEXT,
		target_pid TEXT NOT NULL,
		target_cid TEXT NOT NULL,
		target_run TEXT,
		deadline_at INTEGER NOT NULL,
		state TEXT NOT NULL DEFAULT 'pending',
		created_at INTEGER NOT NULL,
		finished_at INTEGER);
	CREATE INDEX proc_ipc_calls_source ON proc_ipc_calls(source_pid, created_at);
	CREATE INDEX proc_ipc_calls_target ON proc_ipc_calls(target_pid, created_at);
	CREATE INDEX proc_ipc_calls_run ON proc_ipc_calls(target_run) WHERE state='pending';
	CREATE TABLE proc_watches (
		watch_id TEXT PRIMARY KEY,
		uid INTEGER NOT NULL,
		watcher_pid TEXT NOT NULL,
		signal TEXT NOT NULL,
		process_id TEXT,
		key TEXT,
		state TEXT,
		once INTEGER NOT NULL,
		status TEXT NOT NULL DEFAULT 'active',
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL,
		fired INTEGER NOT NULL DEFAULT 0,
		error TEXT);
	CREATE UNIQUE INDEX proc_watches_key ON proc_watches(watcher_pid, key) WHERE key IS NOT NULL;
	CREATE INDEX proc_watches_signal ON proc_watches(signal);`,
	// 5: kept as a step so later numbers stay: grants come from the
	// syscalls' descriptors.
	`SELECT 1`,
	// 6: deliberable runs: a process's run settings and usage; a run's
	// last checkpoint and where it is parked; the decisions of
	// checkpoints (first wins: the primary key); steering messages wait
	// in the queue (mode 'steer').
	`CREATE TABLE proc_run_control (
		pid TEXT PRIMARY KEY,
		settings TEXT NOT NULL);
	CREATE TABLE proc_directives (
		run_id TEXT NOT NULL,
		seq INTEGER NOT NULL,
		directive TEXT NOT NULL,
		how TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (run_id, seq));
	ALTER TABLE proc_runs ADD COLUMN checkpoint INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE proc_runs ADD COLUMN park TEXT;
	ALTER TABLE proc_queue ADD COLUMN mode TEXT NOT NULL DEFAULT 'queue';`,
	// 7: a process's assignment (the seed's ProcSpawnAssignment, JSON):
	// context files its instructions carry.
	`ALTER TABLE proc_processes ADD COLUMN assignment TEXT`,
	// 8: the narrowing of the process capability travels with the work
	// (cap.go): a process's for its life, a queued message's, a
	// conversation generation's (what entered it), a segment's (what its
	// conversation had when it was archived), a watch's (its arming
	// run's). JSON abi.ProcessCap; NULL narrows nothing.
	`ALTER TABLE proc_processes ADD COLUMN process_cap TEXT;
	ALTER TABLE proc_queue ADD COLUMN process_cap TEXT;
	ALTER TABLE proc_conversations ADD COLUMN process_cap TEXT;
	ALTER TABLE proc_segments ADD COLUMN process_cap TEXT;
	ALTER TABLE proc_watches ADD COLUMN process_cap TEXT;`,
}
