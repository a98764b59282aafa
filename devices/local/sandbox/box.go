package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

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
