package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Nice is how many steps nicer than the daemon every sandbox's processes
// start (at most nice 19): what a user runs comes after the daemon's
// service of every user. Nobody in a sandbox can take it back (that needs
// CAP_SYS_NICE on the host, and the runtime sets RLIMIT_NICE to 0).
const Nice = 10

// CPUShares is the cpu.shares (cgroup v1) of the group every sandbox of
// the host runs in, GroupName under the daemon's own cpu cgroup: all the
// sandboxes together weigh about what one task at nice 10 weighs against
// the daemon's 1024. Within it each host uid (each user) has a group of
// its own at the default weight: users share the sandboxes' CPU equally,
// however many processes each runs.
//
// Nice alone does not hold where the scheduler's autogroups apply (a
// daemon in the root cgroup, kernel.sched_autogroup_enabled=1): each
// Unix session (setsid, which bubblewrap's --new-session and anyone in a
// sandbox may do) is then a group of its own that weighs as much as the
// daemon's, whatever its processes' nice. A cgroup holds there too.
const CPUShares = 110

// GroupName is the cpu cgroup (v1) of the host's sandboxes, under the
// daemon's own. It and its per-uid groups (u<host uid>) are made as
// needed and kept, empty, after the daemon ends, like RunDir.
const GroupName = "gsvfs-sandboxes"

// launchers are a runtime's launchers, one per host uid, each in the
// uid's cpu cgroup (u<uid>) beneath base (GroupName) when the runtime
// has one, made on first use.
type launchers struct {
	base   string // "" when the runtime has no cgroup: nice alone
	log    *slog.Logger
	mu     sync.Mutex
	closed bool
	byUID  map[uint32]*launcher
}

// newLaunchers returns a runtime's launchers, with GroupName made under
// the daemon's cpu cgroup (v1) with CPUShares if it can be (else nice
// alone: no cgroup v1 cpu controller, or no right to make a group in it,
// which it logs).
func newLaunchers(log *slog.Logger) *launchers {
	ls := &launchers{log: log, byUID: map[uint32]*launcher{}}
	base, err := makeGroup()
	switch {
	case err != nil && autogroupsApply():
		log.Warn("sandbox: no cpu cgroup for the sandboxes, and the scheduler's autogroups apply (kernel.sched_autogroup_enabled=1, the daemon in the root cgroup): a sandbox's Unix session weighs as much as the daemon, whatever its nice", "err", err)
	case err != nil:
		log.Info("sandbox: no cpu cgroup for the sandboxes; they run at nice alone", "nice", Nice, "err", err)
	}
	ls.base = base
	return ls
}

// autogroupsApply says whether the scheduler puts each Unix session of the
// daemon's children in an autogroup of its own: autogroups are enabled,
// and the daemon is in the root cgroup of the cpu controller (v1, else
// the unified hierarchy).
func autogroupsApply() bool {
	if b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err != nil || strings.TrimSpace(string(b)) != "1" {
		return false
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	unified := ""
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		switch {
		case len(f) < 3:
		case slices.Contains(strings.Split(f[1], ","), "cpu"):
			return f[2] == "/"
		case f[0] == "0" && f[1] == "":
			unified = f[2]
		}
	}
	return unified == "/"
}

// makeGroup makes GroupName under the daemon's cpu cgroup (v1) with
// CPUShares and returns its directory.
func makeGroup() (string, error) {
	own, err := ownCPUGroup()
	if err != nil {
		return "", err
	}
	base := filepath.Join(own, GroupName)
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(base, "cpu.shares"), []byte(strconv.Itoa(CPUShares)), 0); err != nil {
		return "", err
	}
	return base, nil
}

// WorkerGroup is the cpu cgroup (v1) of the daemon's CodeMode workers,
// beside the users' groups in GroupName: all the blocks that run at once,
// whoever runs them, share the weight of one user's sandboxes.
const WorkerGroup = "codemode"

// Group makes the cpu cgroup (v1) name in GroupName (made, with
// CPUShares, under the daemon's own cpu cgroup if need be), at the
// default weight beside the users' groups, and returns its directory:
// what is born in it comes after the daemon's service of every user, as
// the sandboxes do. It fails where the runtime's sandboxes run at nice
// alone (no cgroup v1 cpu controller, no right to make a group in it).
func Group(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/") || name == "." || name == ".." {
		return "", fmt.Errorf("sandbox: bad cpu cgroup name %q", name)
	}
	base, err := makeGroup()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	return dir, nil
}

// get returns host uid's launcher, starting it (and making the uid's
// group) on first use.
func (ls *launchers) get(uid uint32) (*launcher, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return nil, errors.New("the sandbox runtime is closed")
	}
	if l := ls.byUID[uid]; l != nil {
		return l, nil
	}
	tasks := ""
	if ls.base != "" {
		dir := filepath.Join(ls.base, "u"+strconv.FormatUint(uint64(uid), 10))
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			ls.log.Warn("sandbox: a host uid's sandboxes run outside the sandboxes' cpu cgroup, at nice alone", "uid", uid, "err", err)
		} else {
			tasks = filepath.Join(dir, "tasks")
		}
	}
	l, moveErr, err := newLauncher(tasks)
	if err != nil {
		return nil, err
	}
	if moveErr != nil {
		ls.log.Warn("sandbox: a host uid's sandboxes run outside the sandboxes' cpu cgroup, at nice alone", "uid", uid, "err", moveErr)
	}
	ls.byUID[uid] = l
	return l, nil
}

// close closes every launcher: see launcher.close.
func (ls *launchers) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return
	}
	ls.closed = true
	for _, l := range ls.byUID {
		l.close()
	}
}

// ownCPUGroup is the directory of the calling process's cgroup in the
// cgroup v1 hierarchy that has the cpu controller.
func ownCPUGroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	path := ""
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
			path, found = f[2], true
			break
		}
	}
	if !found {
		return "", errors.New("no cgroup v1 cpu controller")
	}
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer mi.Close()
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, s := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(s) < 3 || s[0] != "cgroup" || !slices.Contains(strings.Split(s[2], ","), "cpu") {
			continue
		}
		root, mnt := unescapeMountinfo(f[3]), unescapeMountinfo(f[4])
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(root, "/"))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			return "", fmt.Errorf("the daemon's cpu cgroup %s is outside the mounted %s", path, root)
		}
		return filepath.Join(mnt, rel), nil
	}
	return "", errors.New("the cgroup v1 cpu controller is not mounted")
}

// launcher starts a runtime's commands of one host uid from one OS
// thread, locked for its whole life, made Nice steps nicer and moved
// into the uid's cpu cgroup as it starts: each command is born at the
// sandboxes' priority (a child inherits its thread's nice and cgroup)
// and none runs an instruction at the daemon's. The thread runs nothing
// else, and no thread of the daemon's own work is ever moved. It is
// moved once: a move into a cgroup waits for an RCU grace period (a few
// ms under load) and holds up every fork of the host meanwhile, which a
// move per command would cost each exec.
//
// A command's Pdeathsig fires when the thread that started it ends, so
// the thread lives until the daemon dies, or until its runtime is closed
// and the last command it started has ended: a live daemon never loses a
// sandbox to a thread's end, and a daemon killed outright takes every
// sandbox with it.
type launcher struct {
	reqs     chan launch
	stop     chan struct{}  // closed by close: start no more
	children sync.WaitGroup // the commands started, until waited for
}

// launch is a command for a launcher to start, and where it answers.
type launch struct {
	cmd    *exec.Cmd
	waited chan error // cmd.Wait's result, once it has started
	done   chan error // cmd.Start's
}

// newLauncher starts a launcher whose thread moves itself into the cpu
// cgroup whose tasks file is tasks ("": none). It returns once the thread
// is ready, with why it is not in the cgroup if it could not move (it
// then starts commands at nice alone).
func newLauncher(tasks string) (l *launcher, moveErr, err error) {
	l = &launcher{reqs: make(chan launch), stop: make(chan struct{})}
	ready := make(chan [2]error, 1)
	GoOwnThread(func() { l.run(tasks, ready) })
	r := <-ready
	if r[1] != nil {
		return nil, nil, r[1]
	}
	return l, r[0], nil
}

// run is the launcher's goroutine, on a thread of its own: see
// launcher.
func (l *launcher) run(tasks string, ready chan<- [2]error) {
	if err := LowerThread(Nice); err != nil {
		ready <- [2]error{nil, fmt.Errorf("sandbox priority: %w", err)}
		return
	}
	var moveErr error
	if tasks != "" {
		moveErr = os.WriteFile(tasks, []byte(strconv.Itoa(unix.Gettid())), 0)
	}
	ready <- [2]error{moveErr, nil}
	for {
		select {
		case r := <-l.reqs:
			l.children.Add(1)
			err := r.cmd.Start()
			if err != nil {
				l.children.Done()
			} else {
				go func() {
					defer l.children.Done()
					r.waited <- r.cmd.Wait()
				}()
			}
			r.done <- err
		case <-l.stop:
			l.children.Wait()
			return
		}
	}
}

// start starts cmd from the launcher's thread and returns once it has
// started; waited then gets cmd.Wait's result.
func (l *launcher) start(cmd *exec.Cmd) (waited <-chan error, err error) {
	r := launch{cmd: cmd, waited: make(chan error, 1), done: make(chan error, 1)}
	select {
	case l.reqs <- r:
	case <-l.stop:
		return nil, errors.New("the sandbox runtime is closed")
	}
	return r.waited, <-r.done
}

// close makes the launcher start nothing more; its thread ends once the
// commands it started have ended.
func (l *launcher) close() { close(l.stop) }

// GoOwnThread runs f in a new goroutine locked to an OS thread that is
// not the process's main thread, and that ends when f returns: f may
// change the thread (its priority, its cgroup: LowerThread), no other
// goroutine ever runs on it, and what it starts dies with it
// (Pdeathsig). The runtime does not end the main thread (it parks it
// for good), so a goroutine that finds itself on it holds it while
// another takes over, and leaves it as it found it.
func GoOwnThread(f func()) {
	go func() {
		runtime.LockOSThread() // never unlocked but on the main thread
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		// Locked here, the main thread cannot run the next goroutine.
		moved := make(chan struct{})
		GoOwnThread(func() {
			close(moved)
			f()
		})
		<-moved
		runtime.UnlockOSThread()
	}()
}

// LowerThread makes the calling thread by steps nicer than it is (at
// most nice 19), and so every child it starts from then on. The caller
// runs on a thread of its own (GoOwnThread).
func LowerThread(by int) error {
	tid := unix.Gettid()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid) // 20 - nice
	if err != nil {
		return err
	}
	return unix.Setpriority(unix.PRIO_PROCESS, tid, min(20-prio+by, 19))
}
