package ipc

// migrations is the ipc room's schema (see kernel.Store.Migrate). Its two
// tables are older than the room: the process room's migrations made
// them, when IPC and watches were part of it (its step 4 made
// proc_ipc_calls and proc_watches, its step 8 added proc_watches'
// process_cap), and they keep their names and data. Those steps stay in
// the process room's list as a record of what was done; the ipc room
// owns the tables from there on, and its list starts from the state they
// leave. Step 1 writes that state down as the room's own: on every store
// the process room has migrated it changes nothing (IF NOT EXISTS), so
// open the ipc room after the process room.
var migrations = []string{
	// 1: the IPC calls between processes, and the signal watches of
	// processes, as the process room's steps 4 and 8 left them.
	`CREATE TABLE IF NOT EXISTS proc_ipc_calls (
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
	CREATE INDEX IF NOT EXISTS proc_ipc_calls_source ON proc_ipc_calls(source_pid, created_at);
	CREATE INDEX IF NOT EXISTS proc_ipc_calls_target ON proc_ipc_calls(target_pid, created_at);
	CREATE INDEX IF NOT EXISTS proc_ipc_calls_run ON proc_ipc_calls(target_run) WHERE state='pending';
	CREATE TABLE IF NOT EXISTS proc_watches (
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
		error TEXT,
		process_cap TEXT);
	CREATE UNIQUE INDEX IF NOT EXISTS proc_watches_key ON proc_watches(watcher_pid, key) WHERE key IS NOT NULL;
	CREATE INDEX IF NOT EXISTS proc_watches_signal ON proc_watches(signal);`,
}
