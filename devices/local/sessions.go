package local

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
)

// Sessions is a table of exec sessions and the blob store of their
// receipts: process.session.open, .list, .get, .signal, .wait,
// process.exec and process.blob.read. The local device has one over its
// data tree (a root daemon: idmapped sandboxes); a device daemon has one
// over its export (rootless sandboxes as its own user). Where a session's
// directories come from is the owner's (SessionsOptions.Mount); the rest
// is the same code.
type Sessions struct {
	log      *slog.Logger
	stateDir string
	mount    MountFunc
	rootless bool

	sessions  sessions  // the exec sessions
	blobs     blobStore // their large outputs
	afterExec AfterExecFunc
	quota     QuotaFunc // nil: DefaultQuota
	tmpfs     scratchMounts
	// execEnded, if set, is told of each exec's end, with its session's
	// owner (the local device counts the owner's home again).
	execEnded func(uid uint32, user string)
}

// AfterExecFunc returns what to run after each exec of a session who
// opens with mounts (as applied), before its receipt is given; nil for
// nothing.
type AfterExecFunc func(who Who, mounts []abi.ProcessMount) func()

// MountFunc resolves mount m of a session who opens under process
// capability pc: the directory, opened O_PATH after who's rights to it
// were checked, the mode it gets (at most m.Mode) and its path as the
// receipt shows it. An error is the open's answer.
type MountFunc func(ctx context.Context, who Who, pc abi.ProcessCap, m abi.ProcessMount) (dir *os.File, mode, shown string, err error)

// SessionsOptions configure a Sessions.
type SessionsOptions struct {
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// StateDir holds the blobs (<StateDir>/blobs) and the sessions'
	// scratch homes and tmp (<StateDir>/sessions/<uid>); NewSessions
	// empties both, as no session outlives its daemon.
	StateDir string
	// Mount resolves the mounts sessions ask for (required).
	Mount MountFunc
	// Rootless runs the sandboxes as the daemon's own user (see
	// sandbox.NewRootlessRuntime); otherwise the daemon is root and each
	// user's sandboxes run as an unprivileged host uid of their own.
	Rootless bool
	// AfterExec, if set, gives what to run after each exec of a session.
	AfterExec AfterExecFunc
	// Quota gives each user's quota (kept output, sandbox scratch); nil
	// means DefaultQuota for everyone.
	Quota QuotaFunc
}

// NewSessions makes an empty table. Its sandbox runtime starts with the
// first session opened; Close ends it.
func NewSessions(opts SessionsOptions) (*Sessions, error) {
	if opts.Mount == nil || opts.StateDir == "" {
		return nil, errors.New("sessions: no state directory or mount resolver")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	x := &Sessions{log: opts.Logger, stateDir: opts.StateDir, mount: opts.Mount, rootless: opts.Rootless, afterExec: opts.AfterExec, quota: opts.Quota}
	if err := x.blobs.open(opts.StateDir); err != nil {
		return nil, err
	}
	// The scratch of sessions a restart ended, and its tmpfs mounts.
	scratch := filepath.Join(opts.StateDir, "sessions")
	if !opts.Rootless && os.Geteuid() == 0 {
		sandbox.UnmountUnder(scratch)
	}
	os.RemoveAll(scratch)
	if !opts.Rootless {
		// What a daemon killed outright left staged goes now, not at the
		// first session.
		sandbox.RemoveStale(opts.Logger)
	}
	return x, nil
}

// Close ends every session (its running exec killed) and waits for
// them, then unmounts the users' scratch; opens from then on fail.
func (x *Sessions) Close() {
	x.sessions.close(x)
	x.unmountScratch()
}
