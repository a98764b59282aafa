package pkgs

import (
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// Options configure the package room.
type Options struct {
	Logger *slog.Logger
	// Now is the room's clock; nil means time.Now.
	Now func() time.Time
	// HTTP fetches remote catalogs; nil means a client with a 30 s
	// timeout.
	HTTP *http.Client
	// ServerName is this server's name in its catalog (default "gsv").
	ServerName string
	// Builtin are the builtin packages (a directory per package, each
	// with its gsv-package.json), which Start and pkg.sync put into the
	// builtin source; nil: none.
	Builtin fs.FS
}

// Room is the package room (ns.Room): the pkg.* syscalls and /pkg.
type Room struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	now   func() time.Time
	http  *http.Client
	name  string

	builtin fs.FS

	// mu serialises the changes of packages (add, checkout, install,
	// approve, remove, sync): each reads a record, changes other rooms
	// and writes the record back, and two at once could install a
	// package's parts twice or undo each other.
	mu sync.Mutex

	changes *ns.Changes

	// pendingMu guards pending: the owners whose package commands an
	// install under way has written, before its record says so (a stdio
	// MCP server of the package starts in a session that needs them).
	pendingMu sync.Mutex
	pending   map[uint32]int

	stop      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // the sync that waits for sys.setup
	synced    chan struct{}  // closed once Start's sync of the builtin packages has ended
}

var (
	_ ns.Room    = (*Room)(nil)
	_ ns.Starter = (*Room)(nil)
)

// Open migrates the room's tables and prepares a Room over space.
func Open(space *ns.Space, opts Options) (*Room, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.ServerName == "" {
		opts.ServerName = "gsv"
	}
	if err := k.Store.Migrate("pkgs", migrations()); err != nil {
		return nil, err
	}
	return &Room{k: k, space: space, st: k.Store, log: opts.Logger, now: opts.Now, http: opts.HTTP, name: opts.ServerName,
		builtin: opts.Builtin, changes: ns.NewChanges(), stop: make(chan struct{}), synced: make(chan struct{}),
		pending: map[uint32]int{}}, nil
}

// Close stops the goroutine that waits for sys.setup to sync the
// builtin packages, if any, and waits for it. It is safe to call more
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
		kernel.Handle(abi.PkgList, r.list),
		kernel.Handle(abi.PkgAdd, r.add),
		kernel.Handle(abi.PkgShow, r.show),
		kernel.Handle(abi.PkgSync, r.sync),
		kernel.Handle(abi.PkgCheckout, r.checkout),
		kernel.Handle(abi.PkgInstall, r.install),
		kernel.Handle(abi.PkgReviewApprove, r.approve),
		kernel.Handle(abi.PkgRemove, r.remove),
		kernel.Handle(abi.PkgRemoteList, r.remoteList),
		kernel.Handle(abi.PkgRemoteAdd, r.remoteAdd),
		kernel.Handle(abi.PkgRemoteRemove, r.remoteRemove),
		kernel.Handle(abi.PkgPublicList, r.publicList),
		kernel.Handle(abi.PkgPublicSet, r.publicSet),
		kernel.Handle(abi.PkgProfileGet, r.profile),
		kernel.Handle(abi.PkgProfiles, r.profiles),
		kernel.Handle(abi.PkgFile, r.file),
		kernel.Handle(abi.PkgSkills, r.skills),
		kernel.Handle(abi.PkgSession, r.session),
		kernel.Handle(abi.PkgEvent, r.event),
	}
}

// Mounts are the room's files: /pkg.
func (r *Room) Mounts() []ns.Mount {
	return []ns.Mount{{Path: dirPath, Node: r.topDir()}}
}

// signal publishes pkg.changed for rec to its owner (every user for a
// global package) and touches its directory.
func (r *Room) signal(rec *record, change string) {
	r.changes.Touch(rec.id)
	a := kernel.Audience{Uids: []uint32{rec.uid}}
	if rec.scope == globalScope {
		a = kernel.Audience{All: true}
	}
	kernel.Publish(r.k, abi.SigPkgChanged, abi.PkgChanged{PackageID: rec.id, Change: change}, a)
}
