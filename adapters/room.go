package adapters

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// Options configure the adapters room.
type Options struct {
	Logger *slog.Logger
	// Now is the room's clock; nil means time.Now.
	Now func() time.Time
}

// Room is the adapters room (ns.Room): accounts, identity links, link
// challenges, surface and run routes, inbound receipts and the outbound
// ledger, the adapter.* and sys.link* syscalls, /sys/adapters and
// /sys/links.
type Room struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	now   func() time.Time

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the worker

	// mu guards routes, recent, jobs, waiters and streams.
	mu sync.Mutex
	// routes are the open run routes by run id (a copy of adapter_runs'
	// open rows): the signals of these runs go to their chats.
	routes map[string]*runRoute
	// recent are the last signals of runs no route names yet (a run may
	// finish before adapter.inbound has written its route).
	recent []recentSignal
	// jobs are the work the worker has to do, in order.
	jobs []job
	wake chan struct{}
	// waiters are the bridges waiting in adapter.outbox.next, by
	// account key: a channel closed when a delivery is queued.
	waiters map[string]chan struct{}
	// streams are the replies being written, by account key and run.
	streams map[string]map[string]*abi.AdapterStream
	// streamed is the text so far of each routed run's answer.
	streamed map[string]string
	// sent are closed when a delivery is reported done, by delivery id
	// (adapter.send waits on them).
	sent map[string]chan struct{}
}

var (
	_ ns.Room    = (*Room)(nil)
	_ ns.Starter = (*Room)(nil)
)

// Open migrates the room's schema and prepares a Room over space. Its
// worker starts with Start.
func Open(space *ns.Space, opts Options) (*Room, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := k.Store.Migrate("adapters", migrations); err != nil {
		return nil, err
	}
	r := &Room{k: k, space: space, st: k.Store, log: opts.Logger, now: opts.Now,
		stop: make(chan struct{}), routes: map[string]*runRoute{}, wake: make(chan struct{}, 1),
		waiters: map[string]chan struct{}{}, streams: map[string]map[string]*abi.AdapterStream{}, streamed: map[string]string{},
		sent: map[string]chan struct{}{}}
	k.Observe(r.observe)
	return r, nil
}

// Start loads the open run routes, queues the replies and approval
// prompts a restart left owed, and starts the worker.
func (r *Room) Start(ctx context.Context) error {
	if err := r.loadRoutes(ctx); err != nil {
		return err
	}
	r.wg.Add(1)
	go r.worker()
	return nil
}

// Close stops the worker and waits for it; bridges waiting in
// adapter.outbox.next are answered at once. It is safe to call more
// than once.
func (r *Room) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.wg.Wait()
	})
	return nil
}

// Syscalls is the room's syscall table.
func (r *Room) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.AdapterInbound, r.inbound),
		kernel.Handle(abi.AdapterStateUpdate, r.stateUpdate),
		kernel.Handle(abi.AdapterOutboxNext, r.outboxNext),
		kernel.Handle(abi.AdapterOutboxDone, r.outboxDone),
		kernel.Handle(abi.AdapterStatus, r.status),
		kernel.Handle(abi.AdapterSend, r.send),
		kernel.Handle(abi.AdapterConnect, r.connect),
		kernel.Handle(abi.AdapterDisconnect, r.disconnect),
		kernel.Handle(abi.SysLink, r.link).Admit(userOnly),
		kernel.Handle(abi.SysUnlink, r.unlink).Admit(userOnly),
		kernel.Handle(abi.SysLinkList, r.linkList).Admit(userOnly),
		kernel.Handle(abi.SysLinkConsume, r.linkConsume).Admit(userOnly),
	}
}

// Mounts are the room's files: /sys/adapters and /sys/links.
func (r *Room) Mounts() []ns.Mount {
	return []ns.Mount{{Path: adaptersPath, Node: r.adaptersDir()}, {Path: linksPath, Node: r.linksFile()}}
}

// userOnly refuses a caller not acting as a user (a service, a driver):
// identity links are a person's to make (seed: "User-role only").
func userOnly(c *kernel.Caller) error {
	if c.Role == "user" || c.Role == "kernel" {
		return nil
	}
	return abi.E(abi.Permission, "permission denied: only a user manages identity links, not a "+c.Role)
}

// migrations are the room's schema steps.
var migrations = []string{
	`CREATE TABLE adapter_accounts (
		adapter TEXT NOT NULL,
		account_id TEXT NOT NULL,
		owner_uid INTEGER NOT NULL,
		connected INTEGER NOT NULL DEFAULT 0,
		authenticated INTEGER NOT NULL DEFAULT 0,
		mode TEXT NOT NULL DEFAULT '',
		last_activity INTEGER NOT NULL DEFAULT 0,
		last_message INTEGER NOT NULL DEFAULT 0,
		error TEXT NOT NULL DEFAULT '',
		extra TEXT NOT NULL DEFAULT '{}',
		want TEXT NOT NULL DEFAULT 'connect',
		updated_at INTEGER NOT NULL,
		PRIMARY KEY (adapter, account_id)
	);
	CREATE TABLE adapter_links (
		adapter TEXT NOT NULL,
		account_id TEXT NOT NULL,
		actor_id TEXT NOT NULL,
		uid INTEGER NOT NULL,
		created_at INTEGER NOT NULL,
		linked_by_uid INTEGER NOT NULL,
		PRIMARY KEY (adapter, account_id, actor_id)
	);
	CREATE INDEX adapter_links_uid ON adapter_links(uid, created_at);
	CREATE TABLE adapter_challenges (
		code TEXT PRIMARY KEY,
		adapter TEXT NOT NULL,
		account_id TEXT NOT NULL,
		actor_id TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL
	);
	CREATE INDEX adapter_challenges_actor ON adapter_challenges(adapter, account_id, actor_id);
	CREATE INDEX adapter_challenges_expiry ON adapter_challenges(expires_at);
	CREATE TABLE adapter_link_failures (
		uid INTEGER PRIMARY KEY,
		failures INTEGER NOT NULL,
		window_start INTEGER NOT NULL
	);
	CREATE TABLE adapter_receipts (
		adapter TEXT NOT NULL,
		account_id TEXT NOT NULL,
		message_id TEXT NOT NULL,
		uid INTEGER NOT NULL,
		pid TEXT NOT NULL DEFAULT '',
		run_id TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		PRIMARY KEY (adapter, account_id, message_id)
	);
	CREATE INDEX adapter_receipts_age ON adapter_receipts(created_at);
	CREATE TABLE adapter_surface_routes (
		uid INTEGER NOT NULL,
		adapter TEXT NOT NULL,
		account_id TEXT NOT NULL,
		surface_kind TEXT NOT NULL,
		surface_id TEXT NOT NULL,
		pid TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (uid, adapter, account_id, surface_kind, surface_id)
	);
	CREATE TABLE adapter_run_routes (
		run_id TEXT PRIMARY KEY,
		uid INTEGER NOT NULL,
		pid TEXT NOT NULL,
		trace_id TEXT NOT NULL,
		adapter TEXT NOT NULL,
		account_id TEXT NOT NULL,
		surface TEXT NOT NULL,
		reply_to_id TEXT NOT NULL DEFAULT '',
		hil_request_id TEXT NOT NULL DEFAULT '',
		state TEXT NOT NULL,
		created_at INTEGER NOT NULL
	);
	CREATE INDEX adapter_run_routes_state ON adapter_run_routes(state, created_at);
	CREATE TABLE adapter_outbox (
		delivery_id TEXT PRIMARY KEY,
		fingerprint TEXT NOT NULL,
		adapter TEXT NOT NULL,
		account_id TEXT NOT NULL,
		surface TEXT NOT NULL,
		text TEXT NOT NULL,
		media TEXT NOT NULL DEFAULT '[]',
		reply_to_id TEXT NOT NULL DEFAULT '',
		stream_key TEXT NOT NULL DEFAULT '',
		state TEXT NOT NULL,
		session TEXT NOT NULL DEFAULT '',
		message_ids TEXT NOT NULL DEFAULT '[]',
		error TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		claimed_at INTEGER NOT NULL DEFAULT 0,
		done_at INTEGER NOT NULL DEFAULT 0,
		seq INTEGER NOT NULL
	);
	CREATE INDEX adapter_outbox_state ON adapter_outbox(adapter, account_id, state, seq);
	CREATE INDEX adapter_outbox_age ON adapter_outbox(created_at);`,
}
