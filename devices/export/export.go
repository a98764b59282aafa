// Package export is the device side of a remote device: the 9P tree a
// device daemon (`gsvfs device`) serves to the kernel on its connection,
// and the routed syscalls it answers. The tree's root holds
//
//	fs/    the exported directory (Options.Root), a passthrough of its
//	       real files: read, write, create, mkdir, remove, rename,
//	       truncate, chmod, readdir, stat; no symbolic link is followed
//	       out of Root (every operation goes through an os.Root)
//	call   a vfs.Call file: abi request frames for fs.read, fs.write,
//	       fs.edit, fs.delete, fs.search, shell.exec and the process.*
//	       syscalls of exec sessions, answered with abi response frames,
//	       one request at a time per open handle
//	rpc    a vfs.Mux file: the same requests, many at once on one open
//	       handle, each answer carrying its request's id; a cancel frame
//	       (abi.EncodeCancel) cancels the request it names. The kernel
//	       keeps one handle of it open for the connection's life
//	pipe   process.exec.pipe: one open handle is one piped exec of a
//	       session, its stdin written and its stdout read there (pipe.go);
//	       with exec sessions only
//
// Every caller on the device is the device's own user: the kernel has
// decided who may use the device before its request reaches the tree, so
// the tree allows every operation that the daemon's own host user may
// make. Paths of the calls are the device's: "~" is the daemon user's
// $HOME, a relative path is relative to Root, and a path must lie in Root.
// shell.exec is the local device's (devices/local's Shell: the same
// sessions, wait budget, polls, stdin, expiry, output tail, timeouts),
// run on the host as the daemon's user. Exec sessions are the local
// device's too (local.Sessions), in rootless bubblewrap sandboxes run as
// the daemon's user, over directories of the export.
//
// The package imports no kernel and no SQLite (internal/houserules holds
// it): a device daemon links it.
package export

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/vfs"
)

// Options configure an Export.
type Options struct {
	// Root is the exported directory (required).
	Root string
	// ReadOnly refuses writes: fs.write, fs.edit, fs.delete and every
	// write under fs/ (403; EROFS over 9P). shell.exec is not restricted
	// by it (NoShell is).
	ReadOnly bool
	// NoShell serves no shell.exec and no exec sessions (they are then
	// not in Implements).
	NoShell bool
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
	// ShellWait is shell.exec's wait budget; zero means 10 s.
	ShellWait time.Duration
}

// Export is one exported directory: its tree and its syscalls.
type Export struct {
	opts     Options
	log      *slog.Logger
	root     string   // Root, absolute and clean
	realRoot string   // Root with its symbolic links resolved
	dir      *os.Root // Root, for every file operation
	rootFD   *os.File // Root opened O_PATH, for the mounts of sessions
	stateDir string   // the sessions' blobs and scratch, removed at Close
	home     string   // the daemon user's $HOME, for "~"
	who      local.Who
	shell    *local.Shell    // nil with NoShell
	sessions *deviceSessions // nil with NoShell or without bubblewrap
	tree     *vfs.StaticDir
	calls    map[string]handler
}

// New opens the export of opts.Root, which must be a directory.
func New(opts Options) (*Export, error) {
	if opts.Root == "" {
		return nil, errors.New("export: no root directory")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	dir, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	fi, err := dir.Stat(".")
	if err != nil || !fi.IsDir() {
		dir.Close()
		return nil, fmt.Errorf("export: %s is not a directory", root)
	}
	home, _ := os.UserHomeDir()
	if home != "" {
		home = filepath.Clean(home)
	}
	uid := os.Getuid()
	name := strconv.Itoa(uid)
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	e := &Export{
		opts: opts, log: opts.Logger, root: root, realRoot: realRoot, dir: dir, home: home,
		who: local.Who{Identity: deviceUser{}, Uid: uint32(uid), Username: name, Home: home, Cwd: root},
	}
	if !opts.NoShell {
		e.shell = local.NewShell(local.ShellOptions{
			Logger: opts.Logger,
			Wait:   opts.ShellWait,
			Dir:    e.shellDir,
			Env:    e.shellEnv,
			Runner: func(local.Who) local.ShellRunner { return local.HostRunner(opts.Logger) },
		})
	}
	if !opts.NoShell && sandboxAvailable() {
		if e.rootFD, err = os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			dir.Close()
			return nil, fmt.Errorf("export: %w", err)
		}
		e.sessions = &deviceSessions{new: func() (*local.Sessions, error) {
			if e.stateDir == "" {
				d, err := os.MkdirTemp("", "gsvfs-device-")
				if err != nil {
					return nil, err
				}
				e.stateDir = d
			}
			return local.NewSessions(local.SessionsOptions{
				Logger: opts.Logger, StateDir: e.stateDir, Mount: e.sessionMount, Rootless: os.Geteuid() != 0,
			})
		}}
	}
	e.calls = e.syscalls()
	e.tree = vfs.NewDir(allow{path: "/", dir: true},
		vfs.DirEntry{Name: "fs", Node: &dirNode{node{e: e, rel: "."}}},
		vfs.DirEntry{Name: "call", Node: &vfs.Call{Meta: allow{path: "/call", mode: 0o666}, Do: e.serve}},
		vfs.DirEntry{Name: "rpc", Node: &vfs.Mux{Meta: allow{path: "/rpc", mode: 0o666}, Tag: frameTag, Do: e.serve}},
	)
	if e.sessions != nil {
		e.tree.Add("pipe", &pipeFile{allow: allow{path: "/pipe", mode: 0o666}, e: e})
	}
	return e, nil
}

// Tree is the root of the device's tree: "fs", "call", "rpc" and, with
// exec sessions, "pipe".
func (e *Export) Tree() vfs.Dir { return e.tree }

// Implements lists the syscalls the call file answers.
func (e *Export) Implements() []string {
	out := []string{abi.FsRead.Name, abi.FsWrite.Name, abi.FsEdit.Name, abi.FsDelete.Name, abi.FsSearch.Name}
	if e.shell != nil {
		out = append(out, abi.ShellExec.Name)
	}
	if e.sessions != nil {
		out = append(out, abi.SessionCalls...)
	}
	return out
}

// Close ends every shell.exec command (its process group killed, its
// shell reaped) and the shell's janitor, refuses commands from then on,
// and closes the exported directory.
func (e *Export) Close() error {
	if e.shell != nil {
		e.shell.Close()
	}
	e.EndSessions()
	if e.rootFD != nil {
		e.rootFD.Close()
	}
	if e.stateDir != "" {
		os.RemoveAll(e.stateDir)
	}
	return e.dir.Close()
}

// deviceUser is the identity of every caller on the device: its own user,
// whom the host's permissions govern. It is allowed everything the device
// asks about.
type deviceUser struct{}

func (deviceUser) IsRoot() bool                                          { return false }
func (deviceUser) Allowed(uid, gid uint32, m fs.FileMode, w uint32) bool { return true }

// resolve turns p, a device path ("~", "~/x", "/abs", or relative to
// Root), into its absolute clean path and its path relative to Root
// ("." for Root). NUL bytes, invalid UTF-8 and ".." are a 400; a path
// outside Root is a 403.
func (e *Export) resolve(p string) (abs, rel string, err error) {
	switch {
	case p == "":
		return "", "", abi.E(abi.Invalid, "empty path")
	case !utf8.ValidString(p):
		return "", "", abi.E(abi.Invalid, "path is not valid UTF-8")
	case strings.ContainsRune(p, 0):
		return "", "", abi.E(abi.Invalid, "path contains a NUL byte")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", "", abi.E(abi.Invalid, abi.Path(p), "paths may not contain '..'")
		}
	}
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		if e.home == "" {
			return "", "", abi.E(abi.Invalid, abi.Path(p), "the device user has no $HOME")
		}
		abs = e.home + p[1:]
	case !strings.HasPrefix(p, "/"):
		abs = e.root + "/" + p
	default:
		abs = p
	}
	abs = filepath.Clean(abs)
	for _, r := range []string{e.root, e.realRoot} {
		if rel, ok := within(r, abs); ok {
			return abs, rel, nil
		}
	}
	return "", "", abi.E(abi.Permission, abi.Path(abs), "outside the device's export "+e.root)
}

// within returns abs relative to root if it lies in root.
func within(root, abs string) (string, bool) {
	if abs == root {
		return ".", true
	}
	if root == "/" {
		return strings.TrimPrefix(abs, "/"), true
	}
	if rel, ok := strings.CutPrefix(abs, root+"/"); ok {
		return rel, true
	}
	return "", false
}

// writable is nil unless the export is read-only.
func (e *Export) writable() error {
	if e.opts.ReadOnly {
		return abi.E(abi.Permission, "the device's export is read-only")
	}
	return nil
}

// shellDir is the Shell's cwd resolver: cwd (Root if empty) as a device
// path, which must be a directory in Root; the command sees its real path.
func (e *Export) shellDir(ctx context.Context, who local.Who, cwd string) (string, string, error) {
	if cwd == "" {
		cwd = e.root
	}
	abs, rel, err := e.resolve(cwd)
	if err != nil {
		return "", "", abi.E(abi.Op("cwd"), err)
	}
	fi, err := e.dir.Stat(rel)
	if err != nil {
		return "", "", abi.E(abi.Op("cwd"), abi.Path(abs), err)
	}
	if !fi.IsDir() {
		return "", "", abi.E(abi.Op("cwd"), abi.Path(abs), abi.Invalid, "not a directory")
	}
	return abs, abs, nil
}

// shellEnv is local.DefaultShellEnv with the daemon's own PATH, if it has
// one: the device's commands are its user's, who expects their tools.
func (e *Export) shellEnv(who local.Who, dir string) []string {
	env := local.DefaultShellEnv(who, dir)
	if p := os.Getenv("PATH"); p != "" {
		for i, kv := range env {
			if strings.HasPrefix(kv, "PATH=") {
				env[i] = "PATH=" + p
			}
		}
	}
	return env
}
