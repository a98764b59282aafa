// Package local is the local device: the daemon's own machine as a GSV
// device. It serves the data tree (/home, /workspaces, /var/sessions: real
// files under <state>/fs, owned by the tree's users), the seed's fs.*
// file tools over the whole namespace as the caller, and shell.exec on the
// host. The device router (package devices) routes the target "gsv" (or
// none) here; the transports reach the data tree through the nodes of
// Node and the internal POSIX syscalls of Syscalls.
package local

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
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
}

// Device is the local device over one kernel. Its data tree lives in
// <state>/fs; its shell commands run on the host.
type Device struct {
	k        Host
	log      *slog.Logger
	stateDir string

	data     *os.Root // the data tree: home/, workspaces/, var/
	dataFD   *os.File // the data root opened O_PATH, for openat2; nil if unavailable
	dataPath string
	owners   ownerCache

	shells shellJobs                 // the running shell.exec commands
	root   atomic.Pointer[nsRootRef] // the namespace, for fs.* paths outside the data tree
}

// Host is what the local device needs of the kernel that serves it: the
// dispatcher, through which the data tree's nodes make their syscalls as
// the caller; the users (owners of the tree, and their homes); and the
// state directory. *kernel.Kernel is one.
type Host interface {
	Call(ctx context.Context, c *kernel.Caller, name string, args any) (any, error)
	UserByName(ctx context.Context, name string) (*kernel.User, error)
	Users(ctx context.Context) ([]kernel.User, error)
	OnUserCreated(h kernel.UserHook)
	StateDir() string
}

var _ Host = (*kernel.Kernel)(nil)

// invoke is h.Call with a typed result.
func invoke[R any](ctx context.Context, h Host, c *kernel.Caller, name string, args any) (R, error) {
	var zero R
	res, err := h.Call(ctx, c, name, args)
	if err != nil {
		return zero, err
	}
	r, ok := res.(R)
	if !ok {
		return zero, abi.E(abi.Op(name), abi.Other, fmt.Sprintf("result of type %T", res))
	}
	return r, nil
}

// nsRootRef holds the namespace root (an interface value) for atomic use.
type nsRootRef struct{ dir vfs.Dir }

// New opens the local device of the kernel k: it makes the data tree under
// <state>/fs if needed (mode 0700: host users reach it only through the
// namespace), empties the temporary files a crash left, makes the home of
// every user who has none, and makes each new user's home from then on,
// inside the transaction that creates the user (kernel.OnUserCreated).
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
	users, err := k.Users(context.Background())
	if err != nil {
		d.closeData()
		return nil, err
	}
	for _, u := range users {
		if err := d.makeHome(u.Username); err != nil {
			d.closeData()
			return nil, err
		}
	}
	k.OnUserCreated(func(tx *sql.Tx, u *kernel.User) error { return d.makeHome(u.Username) })
	return d, nil
}

// makeHome creates the real directory of user name's home.
func (d *Device) makeHome(name string) error {
	err := d.data.Mkdir(path.Join("home", name), 0o755)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("home of %s: %w", name, err)
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

// Syscalls are the device's internal syscalls: the POSIX side of the data
// tree (fs.stat, fs.open, ...), the file syscalls of subsystems
// (fs.openread, fs.readraw, fs.create) and fs.statfs. The routable ones
// (fs.read, ..., shell.exec) are the router's.
func (d *Device) Syscalls() []kernel.Syscall {
	calls := append(d.posixSyscalls(), d.fileIOSyscalls()...)
	return append(calls, kernel.Fn("fs.statfs", kernel.Internal, d.statfs))
}

// EndCommands kills every running shell.exec command's process group,
// reaps its shell and refuses new commands from then on. A daemon calls it
// as it begins to shut down, before it waits for its servers' requests, so
// that no request waits on a command; Close calls it too.
func (d *Device) EndCommands() { d.shells.close() }

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
