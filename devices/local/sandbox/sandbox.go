// Package sandbox runs commands inside bubblewrap sandboxes.
//
// A Box is the boundary of one exec session: a set of directories
// (opened by the caller, who checked the rights to them) mounted at guest
// paths, read-only or read-write, plus a scratch tmp and home of its own,
// over a read-only base system (/usr, /etc). Each command of a Box runs
// in a fresh bubblewrap sandbox (Box.Start): a new mount namespace holding
// only those, new pid, ipc, uts and cgroup namespaces, a user namespace in
// which it has no capability on the host and cannot make another, and, for
// a box without network, a network namespace with only loopback. The
// command's processes run as the box's host uid and gids, unprivileged ids
// no host user has: the host kernel checks every file access against the
// files' own owners and modes on disk, which the data tree keeps equal to
// the namespace's (see docs/sessions.md). A box's mounts are plain bind
// mounts (nosuid, nodev); a Mount marked IDMap (root's raw host paths) is
// idmapped so that the host's root-owned files show as the box's own.
//
// The Runtime stages each box's mounts under /run/gsvfs/<instance>/<box>/
// in the host's mount namespace (a directory only the box's host uid may
// enter): bubblewrap resolves a mount's source as a path, as the box's
// uid, and the state directory is closed to it. Each bwrap is given the
// staged directories as descriptors (--bind-fd), so no host path is on
// its command line. Close unmounts them; RemoveStale removes what the
// runtime of a process that is gone left there, and a daemon calls it as
// it starts.
//
// Every sandbox runs below the daemon's CPU priority: Nice steps nicer,
// in a cpu cgroup of its host uid under GroupName (CPUShares), from its
// first instruction on; each host uid's commands are started by a
// thread of their own (see launcher), which is also what their
// parent-death signal follows.
package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// RunDir is where runtimes stage their boxes' mounts.
const RunDir = "/run/gsvfs"

// MaxProcesses is how many processes (threads included) the sandboxes of
// one host uid may run at once: the RLIMIT_NPROC every sandbox inherits.
// A Cmd may ask for fewer (Cmd.MaxProcesses).
const MaxProcesses = 1024

// Runtime runs boxes with one bubblewrap binary. Its zero value is not
// usable: see NewRuntime.
type Runtime struct {
	bwrap    string // the bwrap binary
	Version  string // bwrap's version line, e.g. "bubblewrap 0.8.0"
	dir      string // this runtime's staging directory ("" when rootless)
	lock     *os.File
	log      *slog.Logger
	rootless bool // see NewRootlessRuntime
	launch   *launchers

	mu      sync.Mutex
	userns  map[[2]uint32]*os.File // idmap user namespaces, by host uid and gid
	boxes   map[*Box]bool
	probed  map[probeKey]error // the result of a first sandbox per host uid and network
	scratch map[uint32]string  // the staged scratch root of each host uid
	closed  bool
}

type probeKey struct {
	uid     uint32
	network bool
}

// lockName is the file of a staging directory its runtime holds an
// exclusive flock on for as long as it lives: a directory whose lock can
// be taken is stale.
const lockName = ".lock"

// NewRuntime finds bubblewrap (bwrap on the PATH, or /usr/bin/bwrap) and
// makes the runtime's staging directory, removing what a runtime of a
// process that is gone left there. It needs root: it mounts. It sets the
// process's RLIMIT_NPROC (soft and hard) to MaxProcesses, which root
// ignores and every sandbox inherits.
func NewRuntime(log *slog.Logger) (*Runtime, error) {
	if log == nil {
		log = slog.Default()
	}
	bwrap, version, err := findBwrap()
	if err != nil {
		return nil, err
	}
	inheritNothing()
	if os.Geteuid() != 0 {
		return nil, errors.New("exec sessions need the daemon to run as root (it runs each user's sandboxes as a host uid of their own)")
	}
	// Every sandbox inherits the daemon's RLIMIT_NPROC, counted per host
	// uid: a sandbox uid's processes in all its sandboxes together. The
	// daemon and its other children are root, whom the kernel exempts.
	// Inheriting it costs no exec inside the sandbox, as a wrapper would.
	lim := unix.Rlimit{Cur: MaxProcesses, Max: MaxProcesses}
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
		return nil, fmt.Errorf("sandbox process ceiling: %w", err)
	}
	// A sandbox cannot make itself less nice than it starts (Nice).
	if err := unix.Setrlimit(unix.RLIMIT_NICE, &unix.Rlimit{}); err != nil {
		return nil, fmt.Errorf("sandbox priority ceiling: %w", err)
	}
	RemoveStale(log)
	if err := os.MkdirAll(RunDir, 0o711); err != nil {
		return nil, fmt.Errorf("sandbox staging: %w", err)
	}
	os.Chmod(RunDir, 0o711)
	dir, err := os.MkdirTemp(RunDir, strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("sandbox staging: %w", err)
	}
	lock, err := lockDir(dir)
	if err == nil {
		err = os.Chmod(dir, 0o711)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox staging: %w", err)
	}
	return &Runtime{
		bwrap: bwrap, Version: version, dir: dir, lock: lock, log: log, launch: newLaunchers(log),
		userns: map[[2]uint32]*os.File{}, boxes: map[*Box]bool{}, probed: map[probeKey]error{}, scratch: map[uint32]string{},
	}, nil
}

// lockDir makes dir's lock file and returns it locked: it is locked
// under a temporary name, then renamed, so that RemoveStale never sees it
// unlocked.
func lockDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, lockName+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, lockName)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// NewRootlessRuntime is a runtime for a daemon that is not root, such as
// a device daemon run by its user: its sandboxes run as the daemon's own
// user, in a user namespace of their own (bubblewrap needs unprivileged
// user namespaces for it), and bind their directories as they are: their
// files are that user's own. Spec's host ids are ignored, and no process
// ceiling is set (RLIMIT_NPROC would count every process of the user,
// inside sandboxes and out).
func NewRootlessRuntime(log *slog.Logger) (*Runtime, error) {
	if log == nil {
		log = slog.Default()
	}
	bwrap, version, err := findBwrap()
	if err != nil {
		return nil, err
	}
	inheritNothing()
	return &Runtime{
		bwrap: bwrap, Version: version, log: log, rootless: true, launch: newLaunchers(log),
		userns: map[[2]uint32]*os.File{}, boxes: map[*Box]bool{}, probed: map[probeKey]error{}, scratch: map[uint32]string{},
	}, nil
}

// Rootless says whether r is a NewRootlessRuntime.
func (r *Runtime) Rootless() bool { return r.rootless }

// inheritNothing marks every descriptor of the process from 3 up
// close-on-exec: one it inherited from whoever started it would otherwise
// pass through bubblewrap into every sandbox. What a sandbox is given
// (Cmd's files, a box's directories) is passed explicitly.
func inheritNothing() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// findBwrap returns the bubblewrap binary (bwrap on the PATH, or
// /usr/bin/bwrap) and its version line.
func findBwrap() (string, string, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		bwrap = "/usr/bin/bwrap"
		if _, serr := os.Stat(bwrap); serr != nil {
			return "", "", errors.New("bubblewrap (bwrap) is not installed: exec sessions need it (Debian: apt-get install bubblewrap)")
		}
	}
	out, err := exec.Command(bwrap, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("bubblewrap: %s --version: %v", bwrap, err)
	}
	return bwrap, strings.TrimSpace(string(out)), nil
}

// Close closes every box and removes the staging directory.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	boxes := make([]*Box, 0, len(r.boxes))
	for b := range r.boxes {
		boxes = append(boxes, b)
	}
	r.mu.Unlock()
	for _, b := range boxes {
		b.Close()
	}
	r.launch.close()
	r.mu.Lock()
	for _, f := range r.userns {
		f.Close()
	}
	r.userns = map[[2]uint32]*os.File{}
	r.scratch = map[uint32]string{}
	r.mu.Unlock()
	if r.rootless {
		return nil
	}
	UnmountUnder(r.dir)
	err := os.RemoveAll(r.dir)
	r.lock.Close()
	return err
}

// idmap returns a user namespace that maps id 0 to hostUID (uids) and
// hostGID (gids): the idmapping of a box's IDMap mounts. It is made once
// per pair, by a child that lives only until its namespace is open.
func (r *Runtime) idmap(hostUID, hostGID uint32) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := [2]uint32{hostUID, hostGID}
	if f := r.userns[key]; f != nil {
		return f, nil
	}
	cmd := exec.Command("/bin/sh", "-c", "read _")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostUID), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(hostGID), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("idmap namespace: %w", err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	in.Close()
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("idmap namespace: %w", err)
	}
	r.userns[key] = f
	return f, nil
}
