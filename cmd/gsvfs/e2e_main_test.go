// End-to-end tests of the gsvfs daemon and the gsv CLI. They build the two
// commands, start the daemon as a subprocess on a fresh state directory
// (mounting the namespace with FUSE where that is possible), and talk to it
// only through real parts: shell commands on the mount, the 9P unix socket,
// the TCP listener, and the gsv binary.
//
// The daemon binaries are built with -race when the test binary is, and a
// data race the daemon reports on its stderr fails the test that ran it.
package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/ninep"
)

var (
	binDir   string // holds the built gsvfs and gsv
	gsvfsBin string
	gsvBin   string
)

// Timeouts of the suite. Each guards liveness only, never speed: it
// holds with the race-built binaries on a 2-core machine at load 10, where
// a step that takes 100 ms idle can take 10 s (make test-loaded).
const (
	// liveness bounds every wait for something that must happen (a
	// state, a line, an exit); a helper given a shorter bound waits this
	// long.
	liveness     = 60 * time.Second
	startTimeout = liveness // until the mount and socket answer
	stopTimeout  = liveness // SIGTERM until exit
	cmdTimeout   = liveness // one shell command
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(readLoopEnv); spec != "" {
		// A helper run of the test binary (see TestE2EInterruptedReads).
		os.Exit(readLoop(spec))
	}
	if spec := os.Getenv(callsEnv); spec != "" {
		// A helper run of the test binary (see BenchmarkFairness).
		os.Exit(callsLoop(spec))
	}
	if path := os.Getenv(probeEnv); path != "" {
		// A helper run of the test binary (see BenchmarkFairness).
		os.Exit(probeLoop(path))
	}
	if spec := os.Getenv(holdEnv); spec != "" {
		// A helper run of the test binary (see TestE2EConnectionLimits).
		os.Exit(holdConns(spec))
	}
	if spec := os.Getenv(relayFloorEnv); spec != "" {
		// A helper run of the test binary (see BenchmarkDevicePath).
		os.Exit(relayFloor(spec))
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse()
	defaultInterrupt()
	dir, err := os.MkdirTemp("", "gsv-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Users other than the one running the tests (setpriv) run gsv too.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: built gsvfs and gsv (race=%v) in %v\n", raceEnabled, time.Since(start).Round(time.Millisecond))
	}
	ids, err := freeHostUIDs(3)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	aliceHost, bobHost, nobodyHost = ids[0], ids[1], ids[2]
	binDir = dir
	gsvfsBin = filepath.Join(dir, "gsvfs")
	gsvBin = filepath.Join(dir, "gsv")
	return m.Run()
}

// defaultInterrupt gives the commands the tests start SIGINT's default
// action even when this binary was started with SIGINT ignored, as a
// non-interactive shell starts a background job (`./gsvfs.test &`; go
// test catches SIGINT, so its test binaries never inherit it ignored): an
// ignored signal is inherited across exec, a caught one is reset, and
// the tests interrupt cat and the commands of timeout with SIGINT.
func defaultInterrupt() {
	if signal.Ignored(os.Interrupt) {
		signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	}
}

// raceEnv is in the environment of every binary the tests run: a
// race-built program otherwise sleeps a second before it exits.
const raceEnv = "GORACE=atexit_sleep_ms=0"

// buildBinaries builds cmd/gsvfs, cmd/gsv and cmd/gsvfs-codemode into
// dir with go build: the first two with -race when the tests are, the
// CodeMode worker without. The worker is QuickJS translated from C
// (modernc.org), and race instrumentation of every load and store of that
// C made a block about 28x slower: the memory-limit block took 7-17 s to
// reach its 64 MiB instead of 0.25 s. The codemode package's own tests
// run the worker's Go code race-built (their test binary is the worker).
func buildBinaries(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	out := dir + string(filepath.Separator)
	builds := [][]string{
		{"build", "-o", out, "gsvfs.dev/gsvfs/cmd/gsvfs", "gsvfs.dev/gsvfs/cmd/gsv"},
		{"build", "-o", out, "gsvfs.dev/gsvfs/cmd/gsvfs-codemode"},
	}
	if raceEnabled {
		builds[0] = slices.Insert(builds[0], 1, "-race")
	}
	for _, args := range builds {
		cmd := exec.Command(goBin, args...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	return nil
}

// requireFUSE skips the test when a FUSE mount cannot be made here.
func requireFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("FUSE is not available: %v", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			if _, err := exec.LookPath("fusermount"); err != nil {
				t.Skip("FUSE needs root or fusermount3")
			}
		}
	}
}

// requireRoot skips the test unless it runs as root with setpriv, which it
// needs to act as other host users.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as other host users")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
}

// newBase returns a fresh directory for one daemon's state, mount point
// and work directory. Unlike t.TempDir it is short (unix socket paths are
// limited to 108 bytes) and searchable by every host user (0755), since the
// permission tests reach the mount and the socket as other uids.
func newBase(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gsv-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Mounts are gone by now (daemon cleanups run first), but for
		// those a daemon killed outright left: its sandboxes' scratch
		// tmpfs mounts (the next daemon on the state would remove them).
		detachUnder(dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	for _, sub := range []string{"state", "mnt", "work"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// detachUnder detaches every mount below dir (lazily), deepest first.
func detachUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(unescapeMount(f[4]), dir+"/") {
			points = append(points, unescapeMount(f[4]))
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// syncBuffer is a bytes.Buffer safe for a subprocess to write while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// daemon is one gsvfs process.
type daemon struct {
	t      testing.TB
	base   string // parent of state, mnt and work
	state  string
	mnt    string // "" for gsvfs serve
	work   string // the cwd of the daemon and of the commands run on the mount
	sock   string
	listen string  // the extra --listen dial string, if any
	kernel *daemon // for a remote mount (gsvfs mount --kernel): the daemon it mounts

	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has been waited for
	err    error         // cmd.Wait's result, after done
}

type daemonOpts struct {
	mount    bool     // gsvfs mount (else gsvfs serve)
	listen   string   // --listen dial string
	logLevel string   // --log-level
	args     []string // more flags
	nofile   int      // if not 0, the daemon's RLIMIT_NOFILE (soft and hard), set with prlimit
}

// startDaemon starts gsvfs on base's state (and mount point, with
// o.mount) and waits until it serves.
func startDaemon(t testing.TB, base string, o daemonOpts) *daemon {
	t.Helper()
	if o.mount {
		requireFUSE(t)
	}
	d := &daemon{
		t:      t,
		base:   base,
		state:  filepath.Join(base, "state"),
		work:   filepath.Join(base, "work"),
		sock:   filepath.Join(base, "state", "9p.sock"),
		listen: o.listen,
		stderr: &syncBuffer{},
		done:   make(chan struct{}),
	}
	args := []string{}
	if o.mount {
		d.mnt = filepath.Join(base, "mnt")
		args = append(args, "mount", d.mnt)
	} else {
		args = append(args, "serve")
	}
	args = append(args, "--state", d.state)
	if o.listen != "" {
		args = append(args, "--listen", o.listen)
	}
	if o.logLevel != "" {
		args = append(args, "--log-level", o.logLevel)
	}
	args = append(args, o.args...)
	d.cmd = exec.Command(gsvfsBin, args...)
	if o.nofile > 0 {
		n := strconv.Itoa(o.nofile)
		d.cmd = exec.Command("prlimit", append([]string{"--nofile=" + n + ":" + n, "--", gsvfsBin}, args...)...)
	}
	// The daemon's cwd must not be inside its own mount.
	d.cmd.Dir = d.work
	d.cmd.Stdout = d.stderr
	d.cmd.Stderr = d.stderr
	d.cmd.Env = append(os.Environ(), "GSV_STATE=", "GSV_STORE=", raceEnv)
	// If the test binary dies (a -timeout panic skips every cleanup), the
	// daemon is told to stop and unmount. (Pdeathsig follows the thread
	// that started the daemon; the test binary's threads do not exit.)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start gsvfs: %v", err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(d.cleanup)
	if err := d.waitReady(startTimeout); err != nil {
		t.Fatalf("gsvfs %s: %v\nstderr:\n%s", strings.Join(args, " "), err, d.stderr.String())
	}
	return d
}

// waitReady waits until the socket accepts connections and, for a mount,
// until DIR/etc/passwd reads as GSV's passwd.
func (d *daemon) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-d.done:
			return fmt.Errorf("exited before it was ready: %v", d.err)
		default:
		}
		ready := true
		if c, err := net.DialTimeout("unix", d.sock, time.Second); err != nil {
			ready = false
		} else {
			c.Close()
		}
		if ready && d.mnt != "" {
			b, err := os.ReadFile(filepath.Join(d.mnt, "etc", "passwd"))
			ready = err == nil && bytes.Contains(b, []byte("root:x:0:0:"))
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM, requires a clean exit within stopTimeout and, for a
// mount, that the mount is gone from /proc/mounts.
func (d *daemon) stop() {
	t := d.t
	t.Helper()
	if !d.running() {
		t.Fatalf("gsvfs is not running (exit: %v)\nstderr:\n%s", d.err, d.stderr.String())
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(stopTimeout):
		d.cmd.Process.Kill()
		<-d.done
		t.Fatalf("gsvfs did not exit within %v of SIGTERM\nstderr:\n%s", stopTimeout, d.stderr.String())
	}
	if d.err != nil {
		t.Errorf("gsvfs exited with %v after SIGTERM\nstderr:\n%s", d.err, d.stderr.String())
	}
	if d.mnt != "" {
		if n := mountCount(t, d.mnt); n != 0 {
			t.Errorf("%s is still mounted %d times after SIGTERM", d.mnt, n)
		}
	}
	d.checkRaces()
	if d.kernel != nil {
		d.kernel.stop()
	}
}

// kill kills the daemon with SIGKILL and waits for it.
func (d *daemon) kill() {
	d.t.Helper()
	d.cmd.Process.Kill()
	<-d.done
	d.checkRaces()
}

// checkRaces fails the test if the (race-built) daemon reported a race.
func (d *daemon) checkRaces() {
	d.t.Helper()
	if s := d.stderr.String(); strings.Contains(s, "WARNING: DATA RACE") {
		d.t.Errorf("the daemon reported a data race:\n%s", s)
	}
}

// cleanup ends a daemon a test left running and clears its mount, so that
// the base directory can be removed.
//
// A daemon still running when its test has failed is stopped with SIGQUIT,
// so the log shows every goroutine's stack: what a hung command waited on.
func (d *daemon) cleanup() {
	if d.running() {
		sig := syscall.SIGTERM
		if d.t.Failed() {
			sig = syscall.SIGQUIT
		}
		d.cmd.Process.Signal(sig)
		select {
		case <-d.done:
		case <-time.After(stopTimeout):
			d.cmd.Process.Kill()
			<-d.done
		}
		d.checkRaces()
	}
	if d.t.Failed() {
		d.t.Logf("gsvfs stderr:\n%s", d.stderr.String())
	}
	if d.mnt == "" {
		return
	}
	for i := 0; i < 8 && mountCount(d.t, d.mnt) > 0; i++ {
		if err := syscall.Unmount(d.mnt, syscall.MNT_DETACH); err != nil {
			d.t.Logf("detach %s: %v", d.mnt, err)
			break
		}
	}
}

// mountCount returns how many entries of /proc/mounts have dir as their
// mount point.
func mountCount(t testing.TB, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && unescapeMount(fields[1]) == dir {
			n++
		}
	}
	return n
}

// unescapeMount undoes the octal escapes of /proc/mounts (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// p returns the host path of the namespace path name on the mount.
func (d *daemon) p(name string) string {
	return filepath.Join(d.mnt, filepath.FromSlash(name))
}

// dial attaches to the daemon's unix socket as the test's own host user.
func (d *daemon) dial(t testing.TB) *client.Fsys {
	t.Helper()
	fsys, err := ninep.Mount("unix!"+d.sock, "", nil)
	if err != nil {
		t.Fatalf("9P attach on %s: %v", d.sock, err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// shResult is what a shell command did.
type shResult struct {
	stdout, stderr string
	code           int // exit status; -1 if it did not exit normally
	err            error
}

func (r shResult) String() string {
	return fmt.Sprintf("exit %d (%v)\nstdout: %q\nstderr: %q", r.code, r.err, r.stdout, r.stderr)
}

// sh runs script with sh -c (args are $1...) in the work directory,
// outside the mount, with messages in English.
func (d *daemon) sh(script string, args ...string) shResult {
	return runCmd(d.work, nil, nil, "sh", append([]string{"-c", script, "sh"}, args...)...)
}

// mustSh runs script as sh does and returns its stdout; one that fails
// to run or exits non-zero fails t.
func (d *daemon) mustSh(t testing.TB, script string, args ...string) string {
	t.Helper()
	r := d.sh(script, args...)
	if r.err != nil || r.code != 0 {
		t.Fatalf("%s: %v", script, r)
	}
	return r.stdout
}

// cat reads the file p with cat(1): the reader epWaitHil and epWaitIdle
// take.
func (d *daemon) cat(p string) (string, error) {
	r := d.sh(`cat "$1"`, p)
	if r.code != 0 {
		return r.stdout, &opError{op: "cat", path: p, msg: r.stderr}
	}
	return r.stdout, nil
}

// mustGsv runs the gsv CLI as root against d and returns its stdout; a
// run that fails fails t.
func (d *daemon) mustGsv(t testing.TB, args ...string) string {
	t.Helper()
	r := gsvAs(0, []string{"GSV_ADDR=unix!" + d.sock}, args...)
	if r.err != nil || r.code != 0 {
		t.Fatalf("gsv %q: %v", args, r)
	}
	return r.stdout
}

// shAs runs script as the host uid (and gid) with setpriv.
func (d *daemon) shAs(uid int, script string, args ...string) shResult {
	u := strconv.Itoa(uid)
	return runCmd("/", nil, nil, "setpriv", append([]string{"--reuid", u, "--regid", u, "--clear-groups", "sh", "-c", script, "sh"}, args...)...)
}

// gsvAs runs the gsv CLI as the host uid (0: the test's own) with extra
// environment.
func gsvAs(uid int, env []string, args ...string) shResult {
	if uid == 0 {
		return runCmd("/", env, nil, gsvBin, args...)
	}
	u := strconv.Itoa(uid)
	return runCmd("/", env, nil, "setpriv", append([]string{"--reuid", u, "--regid", u, "--clear-groups", gsvBin}, args...)...)
}

func runCmd(dir string, env []string, stdin io.Reader, name string, args ...string) shResult {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "HOME=/", raceEnv}, env...)
	cmd.Stdin = stdin
	// At the timeout the whole process group goes (a child that keeps the
	// output pipe open, such as a runaway grep -r, would hold Run), and
	// Run stops waiting for the pipes soon after.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := shResult{stdout: stdout.String(), stderr: stderr.String(), err: err, code: -1}
	if cmd.ProcessState != nil {
		r.code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		r.err = fmt.Errorf("%s timed out after %v", name, cmdTimeout)
	}
	return r
}

// readAll9p reads the whole file p over fsys.
func readAll9p(fsys *client.Fsys, p string) (string, error) {
	fid, err := fsys.Open(p, plan9.OREAD)
	if err != nil {
		return "", err
	}
	defer fid.Close()
	b, err := io.ReadAll(fid)
	return string(b), err
}

// callFrame is a response frame of /sys/call.
type callFrame struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func parseFrame(t testing.TB, s string) callFrame {
	t.Helper()
	var f callFrame
	s = strings.TrimSpace(s)
	if strings.Count(s, "\n") != 0 {
		t.Fatalf("want one response frame, got %q", s)
	}
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		t.Fatalf("response frame %q: %v", s, err)
	}
	if f.Type != "res" {
		t.Fatalf("response frame %q: type %q, want res", s, f.Type)
	}
	return f
}

// call9p makes one syscall through /sys/call over fsys and returns the
// response frame.
func call9p(t testing.TB, fsys *client.Fsys, name string, args any) callFrame {
	t.Helper()
	s, err := callRaw9p(fsys, name, args)
	if err != nil {
		t.Fatalf("%s over 9P: %v", name, err)
	}
	return parseFrame(t, s)
}

func callRaw9p(fsys *client.Fsys, name string, args any) (string, error) {
	req, err := json.Marshal(map[string]any{"call": name, "args": args})
	if err != nil {
		return "", err
	}
	fid, err := fsys.Open("/sys/call", plan9.ORDWR)
	if err != nil {
		return "", err
	}
	defer fid.Close()
	if _, err := fid.Write(append(req, '\n')); err != nil {
		return "", err
	}
	b, err := io.ReadAll(fid)
	return string(b), err
}

// mustOK requires a successful frame whose data is not the seed's
// {ok:false} and decodes its data into v (if not nil).
func mustOK(t testing.TB, f callFrame, v any) {
	t.Helper()
	if !f.OK {
		t.Fatalf("call failed: %+v", f.Error)
	}
	var op struct {
		OK    *bool  `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal(f.Data, &op) == nil && op.OK != nil && !*op.OK {
		t.Fatalf("operation failed: %s", op.Error)
	}
	if v != nil {
		if err := json.Unmarshal(f.Data, v); err != nil {
			t.Fatalf("data %s: %v", f.Data, err)
		}
	}
}

// addUser adds a GSV user mapped to hostUID (as root, over 9P) and returns
// its GSV uid.
func addUser(t testing.TB, fsys *client.Fsys, name string, hostUID int) uint32 {
	t.Helper()
	var u struct {
		Uid      uint32 `json:"uid"`
		Username string `json:"username"`
		Home     string `json:"home"`
	}
	mustOK(t, call9p(t, fsys, "sys.user.add", map[string]any{"username": name, "hostUid": hostUID}), &u)
	if u.Username != name || u.Home != "/home/"+name {
		t.Fatalf("sys.user.add %s: got %+v", name, u)
	}
	return u.Uid
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// errnoOf finds the errno named in a command's error message (strerror
// text, any case), or 0.
func errnoOf(s string) syscall.Errno {
	ls := strings.ToLower(s)
	for _, e := range []syscall.Errno{syscall.EACCES, syscall.EINVAL, syscall.ENOENT, syscall.EPERM,
		syscall.EISDIR, syscall.ENOTDIR, syscall.EEXIST, syscall.EBUSY, syscall.EIO, syscall.ENOTEMPTY,
		syscall.EXDEV, syscall.ENOTCONN, syscall.EINTR} {
		if strings.Contains(ls, strings.ToLower(e.Error())) {
			return e
		}
	}
	return 0
}
