package main

// Helpers of the benchmarks in bench_test.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/fusefs"
)

const (
	tmpfsMagic = 0x01021994
	fuseMagic  = 0x65735546
)

// side is one contender of an interleaved benchmark: op is timed once per
// iteration.
type side struct {
	name  string
	op    func() error
	total time.Duration
	n     int
	took  []time.Duration // each op's time
}

// nsPerOp is the median time of one op: on a loaded machine one op
// stalled by another process (a 281 ms outlier among 4 history reads)
// moves a mean, not a median.
func (s *side) nsPerOp() float64 {
	if len(s.took) == 0 {
		return 0
	}
	xs := make([]float64, len(s.took))
	for i, d := range s.took {
		xs[i] = float64(d.Nanoseconds())
	}
	return median(xs)
}

// interleave runs every side's op once per iteration of b, reversing the
// order on every other iteration so that no side always follows another;
// drift, GC and the load of other processes then hit all sides alike. An
// op's error fails b. It returns how many opens ctlRoundTrip retried after
// EIO meanwhile.
func interleave(b *testing.B, sides ...*side) (eios int64) {
	b.Helper()
	eio0 := eioRetries.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range sides {
			s := sides[j]
			if i%2 == 1 {
				s = sides[len(sides)-1-j]
			}
			t0 := time.Now()
			err := s.op()
			d := time.Since(t0)
			s.total += d
			s.n++
			s.took = append(s.took, d)
			if err != nil {
				b.StopTimer()
				b.Fatalf("%s (iteration %d): %v", s.name, i, err)
			}
		}
	}
	b.StopTimer()
	return eioRetries.Load() - eio0
}

// summary holds one line per benchmark; the last invocation (the one with
// the largest b.N) wins. BenchmarkSummary prints it.
var summary struct {
	sync.Mutex
	lines map[string]string
}

func note(name, format string, args ...any) {
	summary.Lock()
	defer summary.Unlock()
	if summary.lines == nil {
		summary.lines = map[string]string{}
	}
	summary.lines[name] = fmt.Sprintf(format, args...)
}

func printSummary() {
	summary.Lock()
	defer summary.Unlock()
	if len(summary.lines) == 0 {
		return
	}
	names := make([]string, 0, len(summary.lines))
	for n := range summary.lines {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Println("\n=== gsvfs benchmark summary (ratios against baselines measured in the same run) ===")
	for _, n := range names {
		fmt.Printf("%-32s %s\n", n, summary.lines[n])
	}
	fmt.Println()
}

func verdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

func fmtFloats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// needFUSE skips b unless FUSE mounts can be made here.
func needFUSE(b *testing.B) {
	b.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skipf("no /dev/fuse: %v", err)
	}
	if os.Geteuid() != 0 {
		b.Skip("needs root: the mounts are made with mount(2) directly")
	}
}

// tmpfsDir returns a fresh directory on the tmpfs /dev/shm, removed at the
// end of b.
func tmpfsDir(b *testing.B) string {
	b.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != tmpfsMagic {
		b.Skipf("/dev/shm is not a tmpfs (%v)", err)
	}
	d, err := os.MkdirTemp("/dev/shm", "gsvfs-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// quietLogger logs warnings and errors only.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// openKernel opens a kernel and its namespace on fresh state in a
// temporary directory, set up as root, closed at the end of b.
func openKernel(b *testing.B) *ns.Space {
	b.Helper()
	k, err := kernel.Open(kernel.Config{StateDir: filepath.Join(b.TempDir(), "state"), Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { k.Close() })
	if err := k.EnsureSetup(context.Background(), "root", 0); err != nil {
		b.Fatal(err)
	}
	return withDevices(b, k)
}

// withDevices returns the namespace of k with the device router added,
// as the daemon has it; the router closes at the end of tb.
func withDevices(tb testing.TB, k *kernel.Kernel) *ns.Space {
	tb.Helper()
	space := ns.New(k)
	dev, err := devices.New(k, devices.Options{Local: local.Options{Logger: quietLogger()}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dev.Close() })
	if err := space.Add(context.Background(), dev); err != nil {
		tb.Fatal(err)
	}
	dev.SetRoot(space.Root())
	return space
}

// mountTree mounts root (a namespace, or a variant of it) with auth as
// the authenticator in this process on a temporary directory, unmounted at the
// end of b. GSVFS_BENCH_FUSE_DEBUG=1 logs every FUSE request.
func mountTree(b *testing.B, root vfs.Dir, auth vfs.Authenticator) string {
	b.Helper()
	dir := b.TempDir()
	logger, debug := quietLogger(), os.Getenv("GSVFS_BENCH_FUSE_DEBUG") != ""
	if debug {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := fusefs.Mount(dir, root, auth, fusefs.Options{Logger: logger, Debug: debug, FsName: "gsv"})
	if errors.Is(err, syscall.EPERM) {
		b.Skipf("cannot mount: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			b.Errorf("unmount %s: %v", dir, err)
		}
		srv.Wait()
	})
	return dir
}

// mountLoopback mounts go-fuse's loopback file system of src in this
// process on a temporary directory: with the 1 s entry and attribute
// timeouts of go-fuse's example/loopback, or with none if zeroTimeouts (as
// our mount has).
func mountLoopback(b *testing.B, src string, zeroTimeouts bool) string {
	b.Helper()
	dir := b.TempDir()
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		b.Fatal(err)
	}
	opts := &fs.Options{
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			FsName:            src,
			Name:              "loopback",
		},
	}
	if zeroTimeouts {
		zero := time.Duration(0)
		opts.EntryTimeout, opts.AttrTimeout, opts.NegativeTimeout = &zero, &zero, &zero
	} else {
		sec := time.Second
		opts.EntryTimeout, opts.AttrTimeout = &sec, &sec
	}
	srv, err := fs.Mount(dir, root, opts)
	if err != nil {
		b.Skipf("cannot mount the loopback: %v", err)
	}
	b.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		srv.Wait()
	})
	return dir
}

// eioRetries counts opens that ctlRoundTrip retried after EIO.
var eioRetries atomic.Int64

// ctlRoundTrip is open(O_WRONLY|O_TRUNC) + write(line) + close with raw
// system calls (no os.File, no poller registration). EINTR is retried. So
// is EIO from open, at most 3 times, counted in eioRetries: gsvfs answers a
// LOOKUP that the kernel interrupted (the calling thread got a signal, e.g.
// the Go runtime's preemption SIGURG) with EIO instead of EINTR, which a
// tight open loop hits every few thousand calls. The write's error is
// returned as is (the badkey variant expects EINVAL); wantWriteErr says
// whether one is expected.
func ctlRoundTrip(path string, line []byte, wantWriteErr bool) error {
	var fd int
	var err error
	for eio := 0; ; {
		fd, err = syscall.Open(path, syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0)
		if err == syscall.EIO && eio < 3 {
			eio++
			eioRetries.Add(1)
			continue
		}
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	var werr error
	for {
		_, werr = syscall.Write(fd, line)
		if werr != syscall.EINTR {
			break
		}
	}
	cerr := syscall.Close(fd)
	switch {
	case (werr != nil) != wantWriteErr:
		return fmt.Errorf("write %q to %s: %v (want an error: %v)", line, path, werr, wantWriteErr)
	case cerr != nil && cerr != syscall.EINTR:
		return fmt.Errorf("close %s: %w", path, cerr)
	}
	return nil
}

// buildTools builds cmd/gsvfs (the package under test) and go-fuse's
// example/loopback into dir.
func buildTools(dir string) (gsvfs, loopback string, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	gsvfs = filepath.Join(dir, "gsvfs")
	loopback = filepath.Join(dir, "loopback")
	for _, c := range [][]string{
		{"build", "-o", gsvfs, "."},
		{"build", "-o", loopback, "github.com/hanwen/go-fuse/v2/example/loopback"},
	} {
		if out, err := exec.Command(goBin, c...).CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go %s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return gsvfs, loopback, nil
}

// daemonProc is a FUSE daemon started as a subprocess.
type daemonProc struct {
	cmd    *exec.Cmd
	mnt    string
	out    *syncBuf
	exited chan error
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) tail(n int) string {
	t := s.String()
	if len(t) > n {
		t = t[len(t)-n:]
	}
	return t
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProc execs args (args[0] is the binary) serving a FUSE mount on mnt.
func startProc(mnt string, args ...string) (*daemonProc, error) {
	p := &daemonProc{mnt: mnt, out: &syncBuf{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	return p, nil
}

// startProcReady starts args like startProc, stops it when b ends, and
// waits up to 10 s until path exists. It only returns errors: it may run
// in a sub-benchmark's goroutine, where the parent's b may not Fatal.
func startProcReady(b *testing.B, mnt, path string, args ...string) (*daemonProc, error) {
	p, err := startProc(mnt, args...)
	if err != nil {
		return nil, err
	}
	b.Cleanup(func() {
		if err := p.stop(); err != nil {
			b.Error(err)
		}
	})
	if _, err := p.waitFor(time.Now(), 10*time.Second, func() bool { _, err := os.Stat(path); return err == nil }); err != nil {
		return nil, err
	}
	return p, nil
}

// waitFor polls until ok() (a file of the mount is there) and returns the
// time since t0; it fails if the daemon exits or after timeout.
func (p *daemonProc) waitFor(t0 time.Time, timeout time.Duration, ok func() bool) (time.Duration, error) {
	deadline := t0.Add(timeout)
	for !ok() {
		select {
		case err := <-p.exited:
			p.exited <- err
			return 0, fmt.Errorf("%s exited before it was ready (%v): %s", filepath.Base(p.cmd.Path), err, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s not ready after %v: %s", filepath.Base(p.cmd.Path), timeout, p.out.String())
		}
		time.Sleep(200 * time.Microsecond)
	}
	return time.Since(t0), nil
}

// stop sends SIGTERM, waits up to 10 s for the exit (then kills), and
// detaches the mount if the daemon left it behind.
func (p *daemonProc) stop() error {
	var err error
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		err = fmt.Errorf("%s did not exit within 10 s of SIGTERM", filepath.Base(p.cmd.Path))
	}
	var st syscall.Statfs_t
	if syscall.Statfs(p.mnt, &st) == nil && st.Type == fuseMagic {
		syscall.Unmount(p.mnt, syscall.MNT_DETACH)
	}
	return err
}

// procStatusKB returns a "Vm...: N kB" field of /proc/pid/status.
func procStatusKB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return strconv.ParseFloat(f[0], 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
