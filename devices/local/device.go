// Package local is the local device: the daemon's own machine as a GSV
// device. It serves the data tree (/home, /workspaces, /var/sessions: real
// files under <state>/fs, owned by the tree's users), the seed's fs.*
// file tools over the whole namespace as the caller, shell.exec, and exec
// sessions (process.*: a sandbox boundary decided at open, each command
// run inside it with the caller's rights; see package sandbox) with their
// blobs. The device router (package devices) routes the target "gsv" (or
// none) here and serves the device's methods as syscalls; the transports
// reach the data tree through the nodes of Node, whose every operation is
// one of those syscalls, made through the dispatcher (Host.As).
//
// The package is written against abi types and the small interfaces
// Host and Identity, and imports no kernel: a device daemon links it
// without the kernel's store.
package local

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// dataRoots are the top-level namespace directories backed by real files.
var dataRoots = []string{"home", "workspaces", "var/sessions"}

// tmpDir, beside the data roots and outside the namespace, holds the
// temporary files of atomic writes; the device empties it at start.
const tmpDir = ".tmp"

// Options configure the local device.
type Options struct {
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// ShellWait is how long a shell.exec start or poll waits for its
	// command to end before it answers "running"; zero means 10 s.
	ShellWait time.Duration
	// Quota gives each user's quota (home, sandbox scratch, kept
	// output); nil means DefaultQuota for everyone.
	Quota QuotaFunc
}

// Device is the local device over one host. Its data tree lives in
// <state>/fs; root's shell commands run on the host, everyone else's and
// every exec session's in sandboxes.
type Device struct {
	k        Host
	log      *slog.Logger
	stateDir string

	data     *os.Root // the data tree: home/, workspaces/, var/
	dataFD   *os.File // the data root opened O_PATH, for openat2; nil if unavailable
	dataPath string
	owners   ownerCache
	owning   bool      // files get their owners' disk ids (the daemon is root); see owners.go
	homes    homeUsage // the usage of homes with a quota

	shell     *Shell                    // shell.exec's jobs and their commands
	root      atomic.Pointer[nsRootRef] // the namespace, for fs.* paths outside the data tree
	*Sessions                           // the exec sessions, over the data tree
}

// Host is what the local device needs of the system that serves it. The
// device router gives one over the kernel.
type Host interface {
	// As returns the dispatcher for the holder of cred: the data tree's
	// nodes make every operation through it, so the dispatcher's checks
	// come first. A cred the host does not know is nobody.
	As(cred vfs.Cred) Dispatcher
	// Owner returns the user name as the owner of their part of the data
	// tree (/home/<name>, /var/sessions/<name>); an error if there is no
	// such user.
	Owner(ctx context.Context, name string) (Owner, error)
	// Users lists the users, each of whom has a home.
	Users(ctx context.Context) ([]abi.User, error)
	// StateDir is the state directory; the data tree is its fs/.
	StateDir() string
}

// Dispatcher makes syscalls as one caller, through the host's dispatcher.
type Dispatcher interface {
	Call(ctx context.Context, name string, args any) (any, error)
}

// Identity is the permission rule of a caller, as the device asks it:
// whether the caller is root, and whether it may use a file owned by uid
// and gid with mode as want says (the access(2) bits: 4 read, 2 write, 1
// search or execute). The same value is the credential (vfs.Cred) the
// device walks the namespace with for the caller. *kernel.Identity is
// one.
type Identity interface {
	IsRoot() bool
	Allowed(uid, gid uint32, mode fs.FileMode, want uint32) bool
}

// Who is the caller of an operation on the device: its permission rule
// (and namespace credential) and what names it: its uid and user name,
// its home (for "~") and its working directory (for relative paths).
type Who struct {
	Identity
	Uid uint32
	// Gid is the caller's primary gid, Gids every group it is in (its
	// sandboxes run with them: the host kernel checks group permissions).
	Gid      uint32
	Gids     []uint32
	Username string
	Home     string
	Cwd      string
	// Process is the caller's process capability; nil is
	// DefaultProcessCap's.
	Process *abi.ProcessCap
}

// Owner is who owns a part of the data tree: the user's uid and primary
// gid, the host uid files show (the uid if the user maps to none), and the
// user and group names.
type Owner struct {
	Uid, Gid uint32
	HostUID  int
	User     string
	Group    string
}

// do makes the syscall c through d with args and returns its typed
// result, as kernel.Do does (the package imports no kernel).
func do[A, R any](ctx context.Context, d Dispatcher, c abi.Call[A, R], args *A) (R, error) {
	var zero R
	res, err := d.Call(ctx, c.Name, args)
	if err != nil || res == nil {
		return zero, err
	}
	r, ok := res.(R)
	if !ok {
		return zero, abi.E(abi.Op(c.Name), abi.Other, fmt.Sprintf("result of type %T", res))
	}
	return r, nil
}

// nsRootRef holds the namespace root (an interface value) for atomic use.
type nsRootRef struct{ dir vfs.Dir }

// New opens the local device of the host k: it makes the data tree under
// <state>/fs if needed (mode 0700: host users reach it only through the
// namespace), empties the temporary files a crash left and makes the home
// of every user who has none. The host calls MakeHome for each user it
// creates from then on.
func New(k Host, opts Options) (*Device, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dataPath := filepath.Join(k.StateDir(), "fs")
	if err := os.MkdirAll(dataPath, 0o700); err != nil {
		return nil, fmt.Errorf("data tree: %w", err)
	}
	if err := os.Chmod(dataPath, 0o700); err != nil {
		return nil, fmt.Errorf("data tree: %w", err)
	}
	for _, dir := range []string{"home", "workspaces", "var", "var/sessions", tmpDir} {
		if err := os.MkdirAll(filepath.Join(dataPath, dir), 0o755); err != nil {
			return nil, fmt.Errorf("data tree: %w", err)
		}
	}
	// Temporary files of atomic writes that a crash left behind.
	if ents, err := os.ReadDir(filepath.Join(dataPath, tmpDir)); err == nil {
		for _, e := range ents {
			os.Remove(filepath.Join(dataPath, tmpDir, e.Name()))
		}
	}
	data, err := os.OpenRoot(dataPath)
	if err != nil {
		return nil, fmt.Errorf("data tree: %w", err)
	}
	dataFD, err := os.OpenFile(dataPath, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		dataFD = nil
	}
	d := &Device{k: k, log: opts.Logger, stateDir: k.StateDir(), data: data, dataFD: dataFD, dataPath: dataPath}
	d.owning = os.Geteuid() == 0 && d.canOwn()
	d.shell = NewShell(ShellOptions{Logger: opts.Logger, Wait: opts.ShellWait, Dir: d.shellDir, Env: d.shellEnv, Runner: d.runner})
	if d.Sessions, err = NewSessions(SessionsOptions{Logger: opts.Logger, StateDir: d.stateDir, Mount: d.mountDir, AfterExec: d.afterExec, Quota: opts.Quota}); err != nil {
		d.closeData()
		return nil, err
	}
	// A sandbox may have written in homes: their usage is counted again.
	d.Sessions.execEnded = func(uid uint32, user string) { d.staleHome(user, uid == 0) }
	users, err := k.Users(context.Background())
	if err != nil {
		d.closeData()
		return nil, err
	}
	for _, u := range users {
		if err := d.MakeHome(u); err != nil {
			d.closeData()
			return nil, err
		}
	}
	if err := d.sweepOwners(context.Background()); err != nil {
		d.closeData()
		return nil, err
	}
	return d, nil
}

// MakeHome makes the real directory of user u's home, owned by u's disk
// ids (see owners.go), if it is not there; the host calls it as it
// creates the user, so that a user whose home cannot be made is not
// created.
func (d *Device) MakeHome(u abi.User) error {
	rel := path.Join("home", u.Username)
	err := d.data.Mkdir(rel, 0o755)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("home of %s: %w", u.Username, err)
	}
	if err == nil && d.keepsOwners() {
		// The host is adding u: its own lookup of u may not see it yet.
		uid, gid := diskIDs(Owner{Uid: u.Uid, Gid: u.Gid})
		if err := d.data.Lchown(rel, uid, gid); err != nil {
			return fmt.Errorf("home of %s: %w", u.Username, err)
		}
	}
	return nil
}

// SetRoot gives the device the namespace root: fs.* paths outside the
// data tree (/etc, /sys, /proc, ...) are walked from it as the caller.
// Until it is set, they are a 404.
func (d *Device) SetRoot(root vfs.Dir) { d.root.Store(&nsRootRef{root}) }

// nsRoot returns the namespace root, or nil.
func (d *Device) nsRoot() vfs.Dir {
	if r := d.root.Load(); r != nil {
		return r.dir
	}
	return nil
}

// EndCommands kills every running shell.exec command's process group,
// reaps its shell and refuses new commands from then on. A daemon calls it
// as it begins to shut down, before it waits for its servers' requests, so
// that no request waits on a command; Close calls it too.
func (d *Device) EndCommands() {
	d.shell.Close()
	d.Sessions.Close()
}

// Close ends the commands (EndCommands) and closes the data tree.
func (d *Device) Close() error {
	d.EndCommands()
	d.closeData()
	return nil
}

func (d *Device) closeData() {
	d.data.Close()
	if d.dataFD != nil {
		d.dataFD.Close()
	}
}

// randomText is a random name for a temporary file.
func randomText() string {
	b := make([]byte, 10)
	rand.Read(b)
	return strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(b), "="))
}
