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
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// RemoveStale unmounts and removes the staging directories under RunDir
// of runtimes whose process is gone: those whose lock can be taken (and,
// for a directory of an older daemon without one, those whose pid is not
// alive). A daemon calls it as it starts, so that what a daemon killed
// outright left mounted goes before any session opens. It needs root;
// without it, it does nothing.
func RemoveStale(log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	if os.Geteuid() != 0 {
		return
	}
	ents, err := os.ReadDir(RunDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		dir := filepath.Join(RunDir, e.Name())
		if !e.IsDir() || !stale(dir, e.Name()) {
			continue
		}
		UnmountUnder(dir)
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("sandbox: removing a stale staging directory", "dir", dir, "err", err)
		} else {
			log.Info("sandbox: removed the staging directory of a runtime that is gone", "dir", dir)
		}
	}
}

// stale says whether the staging directory dir (named name) belongs to
// no live runtime.
func stale(dir, name string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == nil {
		defer f.Close()
		// Taken, it is released as f closes; the directory is gone by then.
		return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return false
	}
	// A directory being made has no lock yet; an older daemon's never
	// has one: its pid tells.
	pidText, _, ok := strings.Cut(name, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid == os.Getpid() {
		return false
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// UnmountUnder detaches every mount at or below dir, deepest first.
func UnmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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

// Mount is a directory of a box: Dir (opened by the caller, O_PATH or
// not, after checking the rights to it) at the absolute guest path
// Guest, writable if RW. With IDMap (a root runtime only), the host's
// root-owned files show as the box's host uid and gid, and what the box
// makes there is root's on disk: root's raw host paths. Without it the
// files show as they are on disk.
type Mount struct {
	Dir   *os.File
	Guest string
	RW    bool
	IDMap bool
}

// Spec defines a box.
type Spec struct {
	// ID names the box (letters, digits, '_' and '-').
	ID string
	// HostUID and HostGID are the host uid and primary gid its processes
	// run as, HostGroups their supplementary host gids (the host kernel
	// checks group permissions with them); a HostGID of 0 is HostUID.
	// Uid and Gid are the ids they have inside (HostUID and HostGID
	// mapped); every other id shows as the overflow id (nobody).
	HostUID    uint32
	HostGID    uint32
	HostGroups []uint32
	Uid, Gid   uint32
	// Mounts are its directories, in order (a later one may lie under an
	// earlier one).
	Mounts []Mount
	// ScratchRoot is the host directory of HostUID's scratch, the same
	// for all its boxes (the runtime stages it once per host uid): a box's
	// own tmp and home are made beneath it as <ID>/tmp and <ID>/home,
	// owned by HostUID and HostGID, and removed when it closes. Home is
	// the guest path of its home.
	ScratchRoot string
	Home        string
	// Network gives the box the host's network; without it, loopback
	// only.
	Network bool
}

// hostGID is s's host gid: HostGID, or HostUID if that is 0 (a box never
// runs in the host's root group).
func (s Spec) hostGID() uint32 {
	if s.HostGID == 0 {
		return s.HostUID
	}
	return s.HostGID
}

// Box is a staged session boundary. Its methods are safe to call at
// once.
type Box struct {
	r       *Runtime
	spec    Spec
	dir     string     // its staging directory, made only for its mounts
	scratch string     // its tmp and home, beneath the scratch root
	args    []string   // bwrap's arguments up to the command
	staged  []string   // the mount points it staged, in order
	fds     []*os.File // its tmp, home and mounts as bwrap binds them: fds 4, 5, ...
	closeMu sync.Mutex
	closed  bool
}

// firstFD is the descriptor number of a box's first directory in bwrap:
// 0-2 are the standard streams, 3 its info fd.
const firstFD = 4

// Open stages spec's mounts and returns its box. It fails, and nothing is
// left staged, if a mount cannot be made or a first sandbox with spec's
// host uid and network cannot run (the kernel or bubblewrap cannot give
// the isolation asked for).
func (r *Runtime) Open(spec Spec) (*Box, error) {
	if strings.ContainsAny(spec.ID, "/.") || spec.ID == "" {
		return nil, fmt.Errorf("box id %q", spec.ID)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("the sandbox runtime is closed")
	}
	r.mu.Unlock()
	// seen is where the daemon reaches the scratch root on a path the
	// box's uid may walk: staged for a root runtime, the root itself for
	// a rootless one.
	seen := spec.ScratchRoot
	if r.rootless {
		if err := os.MkdirAll(spec.ScratchRoot, 0o700); err != nil {
			return nil, fmt.Errorf("scratch: %w", err)
		}
	} else {
		var err error
		if seen, err = r.stageScratch(spec); err != nil {
			return nil, err
		}
	}
	b := &Box{r: r, spec: spec, scratch: filepath.Join(spec.ScratchRoot, spec.ID)}
	if !r.rootless {
		b.dir = filepath.Join(r.dir, spec.ID)
	}
	for _, d := range []string{"", "tmp", "home"} {
		p := filepath.Join(b.scratch, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			b.Close()
			return nil, fmt.Errorf("scratch: %w", err)
		}
		if !r.rootless {
			if err := os.Lchown(p, int(spec.HostUID), int(spec.hostGID())); err != nil {
				b.Close()
				return nil, fmt.Errorf("scratch: %w", err)
			}
		}
	}
	for _, d := range []string{"tmp", "home"} {
		f, err := openDir(filepath.Join(seen, spec.ID, d))
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("scratch: %w", err)
		}
		b.fds = append(b.fds, f)
	}
	if len(spec.Mounts) > 0 && !r.rootless {
		if err := os.Mkdir(b.dir, 0o700); err != nil {
			b.Close()
			return nil, fmt.Errorf("staging: %w", err)
		}
		if err := os.Chown(b.dir, int(spec.HostUID), int(spec.hostGID())); err != nil {
			b.Close()
			return nil, fmt.Errorf("staging: %w", err)
		}
	}
	args := []string{
		"--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--disable-userns",
		"--uid", strconv.FormatUint(uint64(spec.Uid), 10), "--gid", strconv.FormatUint(uint64(spec.Gid), 10),
		"--hostname", "gsv",
		"--ro-bind", "/usr", "/usr",
	}
	if spec.Network {
		args = append(args, "--share-net")
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64", "lib32", "libx32"} {
		if t, err := os.Readlink("/" + l); err == nil && strings.HasPrefix(t, "usr/") {
			args = append(args, "--symlink", t, "/"+l)
		} else if fi, err := os.Lstat("/" + l); err == nil && fi.IsDir() {
			args = append(args, "--ro-bind", "/"+l, "/"+l)
		}
	}
	args = append(args,
		"--ro-bind", "/etc", "/etc")
	// The sandbox's uid is no host user's, so the host's password files
	// (root:shadow, 0640) are closed to it by their modes; one that others
	// may read is hidden.
	for _, secret := range []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"} {
		if fi, err := os.Stat(secret); err == nil && fi.Mode().Perm()&0o004 != 0 {
			args = append(args, "--ro-bind", "/dev/null", secret)
		}
	}
	// Every directory is bound from a descriptor (bwrap's fd firstFD+i):
	// the command line names no host path.
	args = append(args,
		"--proc", "/proc", "--dev", "/dev",
		"--bind-fd", strconv.Itoa(firstFD), "/tmp",
		"--dir", "/var", "--symlink", "../tmp", "/var/tmp",
		"--bind-fd", strconv.Itoa(firstFD+1), spec.Home,
	)
	for i, m := range spec.Mounts {
		var f *os.File
		if r.rootless {
			// The box keeps its own copy of each directory.
			fd, err := unix.FcntlInt(m.Dir.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				b.Close()
				return nil, fmt.Errorf("mount %s: %w", m.Guest, err)
			}
			f = os.NewFile(uintptr(fd), m.Dir.Name())
		} else {
			p, err := b.stage(m, "m"+strconv.Itoa(i))
			if err == nil {
				f, err = openDir(p)
			}
			if err != nil {
				b.Close()
				return nil, fmt.Errorf("mount %s: %w", m.Guest, err)
			}
		}
		b.fds = append(b.fds, f)
		op := "--ro-bind-fd"
		if m.RW {
			op = "--bind-fd"
		}
		args = append(args, op, strconv.Itoa(firstFD+len(b.fds)-1), m.Guest)
	}
	b.args = args
	r.mu.Lock()
	r.boxes[b] = true
	r.mu.Unlock()
	if err := r.probe(b); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// openDir opens the directory p O_PATH, following no final link.
func openDir(p string) (*os.File, error) {
	return os.OpenFile(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// stageScratch returns where spec's host uid's scratch root is staged,
// staging it (read-write, owned by the box's host ids) on first use.
func (r *Runtime) stageScratch(spec Spec) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hostUID, hostGID := spec.HostUID, spec.hostGID()
	if p := r.scratch[hostUID]; p != "" {
		return p, nil
	}
	root := spec.ScratchRoot
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("scratch: %w", err)
	}
	if err := os.Lchown(root, int(hostUID), int(hostGID)); err != nil {
		return "", fmt.Errorf("scratch: %w", err)
	}
	dir := filepath.Join(r.dir, "u"+strconv.FormatUint(uint64(hostUID), 10))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("staging: %w", err)
	}
	if err := os.Chown(dir, int(hostUID), int(hostGID)); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("staging: %w", err)
	}
	f, err := openDir(root)
	if err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("scratch: %w", err)
	}
	defer f.Close()
	p := filepath.Join(dir, "scratch")
	if err := stageAt(nil, f, p, true); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	r.scratch[hostUID] = p
	return p, nil
}

// stage mounts m's directory (idmapped if m.IDMap) at name in the box's
// staging directory and returns where.
func (b *Box) stage(m Mount, name string) (string, error) {
	var ns *os.File
	if m.IDMap {
		var err error
		if ns, err = b.r.idmap(b.spec.HostUID, b.spec.hostGID()); err != nil {
			return "", err
		}
	}
	p := filepath.Join(b.dir, name)
	if err := stageAt(ns, m.Dir, p, m.RW); err != nil {
		return "", err
	}
	b.staged = append(b.staged, p)
	return p, nil
}

// stageAt bind-mounts dir (read-only unless rw; nosuid, nodev; idmapped
// by ns unless it is nil) on a new directory p.
func stageAt(ns, dir *os.File, p string, rw bool) error {
	if err := os.Mkdir(p, 0o700); err != nil {
		return fmt.Errorf("staging: %w", err)
	}
	fd, err := unix.OpenTree(int(dir.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if ns != nil {
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(ns.Fd())
	}
	if !rw {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("setting the mount's flags: %w", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// probe runs `true` in a first sandbox of b's host uid and network, once
// per runtime: a box whose isolation cannot be had fails at its open.
func (r *Runtime) probe(b *Box) error {
	key := probeKey{b.spec.HostUID, b.spec.Network}
	r.mu.Lock()
	err, done := r.probed[key]
	r.mu.Unlock()
	if done {
		return err
	}
	var out strings.Builder
	p, err := b.Start(Cmd{Argv: []string{"/bin/true"}, Cwd: "/", Stdout: &out, Stderr: &out})
	if err == nil {
		<-p.Done()
		if ex := p.Exit(); ex.Err != nil || ex.Code != 0 {
			err = fmt.Errorf("a first sandbox failed (exit %d): %s", ex.Code, strings.TrimSpace(out.String()))
		}
	}
	if err != nil {
		err = fmt.Errorf("the sandbox cannot be set up here: %w", err)
	}
	r.mu.Lock()
	r.probed[key] = err
	r.mu.Unlock()
	return err
}

// Close unmounts the box's directories and removes its staging
// directory. Commands still running keep their own mounts until they end.
func (b *Box) Close() error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.r.mu.Lock()
	delete(b.r.boxes, b)
	b.r.mu.Unlock()
	for _, f := range b.fds {
		f.Close()
	}
	for i := len(b.staged) - 1; i >= 0; i-- {
		if err := unix.Unmount(b.staged[i], unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			b.r.log.Warn("sandbox: unmounting a staged mount", "path", b.staged[i], "err", err)
		}
	}
	os.RemoveAll(b.scratch)
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}

// Cmd is one command of a box.
type Cmd struct {
	Argv []string
	Cwd  string   // a guest path
	Env  []string // the whole environment
	// Stdin is the command's stdin; nil is empty.
	Stdin io.Reader
	// Stdout and Stderr receive its output until Done.
	Stdout, Stderr io.Writer
	// MaxProcesses, if not 0 and under the runtime's MaxProcesses, is how
	// many processes it may run at once (a prlimit wrapper sets it, at the
	// cost of one more exec).
	MaxProcesses int
}

// Exit is how a command ended: its exit code (128+signal if a signal
// killed it, as a shell reports it), the signal if one did, or why it
// could not be waited for.
type Exit struct {
	Code   int
	Signal syscall.Signal
	Err    error
}

// Proc is a running command.
type Proc struct {
	cmd    *exec.Cmd
	waited <-chan error // cmd.Wait's result, from its launcher
	init   int          // the sandbox's pid 1, in the host's pid namespace
	nsID   string
	done   chan struct{}
	exit   Exit
	errMu  sync.Mutex
}

// Start starts c in a fresh sandbox of b and returns once it runs.
func (b *Box) Start(c Cmd) (*Proc, error) {
	// Close waits for a Start under way: the box's directories stay open
	// until bwrap has them.
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed {
		return nil, errors.New("the session is closed")
	}
	if len(c.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer infoR.Close()
	args := append([]string(nil), b.args...)
	args = append(args, "--chdir", c.Cwd, "--info-fd", "3", "--")
	if c.MaxProcesses > 0 && c.MaxProcesses < MaxProcesses {
		args = append(args, "/usr/bin/prlimit", "--nproc="+strconv.Itoa(c.MaxProcesses), "--")
	}
	args = append(args, c.Argv...)
	cmd := exec.Command(b.r.bwrap, args...)
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = "/"
	cmd.Stdin = c.Stdin
	cmd.Stdout = c.Stdout
	cmd.Stderr = c.Stderr
	cmd.ExtraFiles = append([]*os.File{infoW}, b.fds...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if !b.r.rootless {
		groups := b.spec.HostGroups
		if groups == nil {
			groups = []uint32{} // setgroups(0): none of the daemon's
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: b.spec.HostUID, Gid: b.spec.hostGID(), Groups: groups}
	}
	// bwrap starts at the sandboxes' priority, from a thread that lives
	// as long as it (Pdeathsig): see launcher.
	l, err := b.r.launch.get(b.spec.HostUID)
	var waited <-chan error
	if err == nil {
		waited, err = l.start(cmd)
	}
	infoW.Close()
	if err != nil {
		return nil, fmt.Errorf("starting bwrap: %w", err)
	}
	p := &Proc{cmd: cmd, waited: waited, done: make(chan struct{})}
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&info); err == nil && info.ChildPid > 0 {
		p.init = info.ChildPid
		p.nsID, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.init))
	}
	go p.wait()
	return p, nil
}

// wait waits for bwrap and records how the command ended.
func (p *Proc) wait() {
	defer close(p.done)
	err := <-p.waited
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			p.exit.Signal = ws.Signal()
			p.exit.Code = 128 + int(ws.Signal())
		default:
			p.exit.Code = ws.ExitStatus()
			if p.exit.Code > 128 && p.exit.Code < 128+65 {
				p.exit.Signal = syscall.Signal(p.exit.Code - 128)
			}
		}
	default:
		p.exit.Err = err
		p.exit.Code = -1
	}
}

// Done is closed once the command and every process of its sandbox are
// gone and its output is written.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exit is how the command ended; valid once Done is closed.
func (p *Proc) Exit() Exit { return p.exit }

// Started says whether the sandbox came up (its pid 1 ran).
func (p *Proc) Started() bool { return p.init > 0 }

// Signal sends sig to every process of the command's sandbox.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.init <= 0 {
		p.cmd.Process.Signal(sig)
		return
	}
	if sig == syscall.SIGKILL {
		p.Kill()
		return
	}
	for _, pid := range p.members() {
		syscall.Kill(pid, sig)
	}
}

// Kill ends the sandbox at once: its pid 1 gets SIGKILL, which the kernel
// turns into SIGKILL for every process of its pid namespace.
func (p *Proc) Kill() {
	if p.init > 0 {
		if id, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.init)); id == p.nsID {
			syscall.Kill(p.init, syscall.SIGKILL)
		}
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
}

// members lists the host pids of the processes in the sandbox's pid
// namespace, its pid 1 last.
func (p *Proc) members() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == p.init {
			continue
		}
		if id, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && id == p.nsID {
			pids = append(pids, pid)
		}
	}
	return append(pids, p.init)
}
