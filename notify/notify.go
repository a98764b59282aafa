package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// Options configure the notification room.
type Options struct {
	Logger *slog.Logger
	// Now is the room's clock; nil means time.Now.
	Now func() time.Time
	// PruneEvery is how often the janitor deletes expired notifications
	// (default one hour; negative: never, the writes still prune).
	PruneEvery time.Duration
}

// Room is the notification room (ns.Room): the notification.* syscalls,
// /var/notify, and the janitor that deletes expired notifications.
type Room struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	now   func() time.Time
	every time.Duration

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the janitor

	// changes are when each user's directory last changed (a
	// notification made, read or dismissed: signal touches it).
	changes *ns.Changes
}

var (
	_ ns.Room    = (*Room)(nil)
	_ ns.Starter = (*Room)(nil)
)

// Open migrates the room's schema and prepares a Room over space. The
// janitor starts with Start (ns.Space.Add calls it).
func Open(space *ns.Space, opts Options) (*Room, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PruneEvery == 0 {
		opts.PruneEvery = time.Hour
	}
	if err := k.Store.Migrate("notify", migrations(k.Store.Dialect())); err != nil {
		return nil, err
	}
	return &Room{k: k, space: space, st: k.Store, log: opts.Logger, now: opts.Now, every: opts.PruneEvery,
		stop: make(chan struct{}), changes: ns.NewChanges()}, nil
}

// Start starts the janitor, which deletes expired notifications every
// PruneEvery until Close.
func (r *Room) Start(ctx context.Context) error {
	if r.every < 0 {
		return nil
	}
	r.wg.Add(1)
	go r.janitor()
	return nil
}

// Close stops the janitor and waits for it. It is safe to call more than
// once.
func (r *Room) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.wg.Wait()
	})
	return nil
}

// janitor deletes expired notifications every r.every until Close.
func (r *Room) janitor() {
	defer r.wg.Done()
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		n, err := r.pruneAll(context.Background())
		if err != nil {
			r.log.Warn("notify: pruning expired notifications", "err", err)
		} else if n > 0 {
			r.log.Debug("notify: pruned expired notifications", "count", n)
		}
	}
}

// Syscalls is the room's syscall table: the public notification.* calls
// (seed 003) and the Internal ones its files make.
func (r *Room) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.NotificationCreate, r.create),
		kernel.Handle(abi.NotificationList, r.list),
		kernel.Handle(abi.NotificationMarkRead, r.markRead),
		kernel.Handle(abi.NotificationDismiss, r.dismiss),
		kernel.Handle(abi.NotificationFiles, r.files),
		kernel.Handle(abi.NotificationFile, r.file),
	}
}

// Mounts are the room's files: /var/notify.
func (r *Room) Mounts() []ns.Mount {
	return []ns.Mount{{Path: dirPath, Node: r.topDir()}}
}

// migrations are the room's schema steps: the notifications (a step that
// once wrote a grant is kept as a no-op so later numbers stay), and the
// order they were made in (seq: newest first among those of one
// millisecond).
func migrations(d kernel.Dialect) []string {
	return []string{
		`CREATE TABLE notify_notifications (
		id TEXT PRIMARY KEY,
		owner_uid INTEGER NOT NULL,
		title TEXT NOT NULL,
		body TEXT NOT NULL DEFAULT '',
		level TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		read_at INTEGER,
		dismissed_at INTEGER,
		expires_at INTEGER NOT NULL,
		actions TEXT NOT NULL DEFAULT '[]',
		source_pid TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX notify_owner ON notify_notifications(owner_uid, created_at);
	CREATE INDEX notify_expiry ON notify_notifications(expires_at);`,
		// A step kept so later numbers stay: grants come from descriptors.
		`SELECT 1`,
		`ALTER TABLE notify_notifications ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX notify_seq ON notify_notifications(seq);`,
		d.NumberRows("notify_notifications", "seq"),
	}
}
