package devices

// BenchmarkSandboxCPUShare: how much of a core the daemon keeps when a
// sandbox spins on it.
//
//	go test -run '^$' -bench SandboxCPUShare -benchtime 3x ./devices/
//
// A thread of the benchmark (the daemon's side: same process, session
// and cgroup as a daemon) spins on CPU 0 for a window alone, then for a
// window while a sandbox (Box.Start, as every exec and shell.exec starts
// one) spins on CPU 0 too, alternately, b.N windows of each. It reports
// the share of the window's wall time the daemon's thread ran in each
// (daemon-alone-%, daemon-vs-sandbox-%) and their ratio (kept): 1 if the
// sandbox takes nothing from the daemon, 0.5 if they weigh the same,
// and the sandbox's CPU over the daemon's thread's in the shared windows
// (sandbox/daemon): the weight the scheduler gives it, whatever else
// runs on CPU 0. It also reports how late the daemon's thread wakes from
// 1 ms sleeps on CPU 0, alone and against the spinning sandbox (late-*):
// a waking thread's latency, which other load on the machine dominates.
// Other load on CPU 0 lowers both windows alike.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

const shareWindow = time.Second

// shareUID is the sandbox's host uid: no other test's, so that its CPU is
// the sandbox's alone.
const shareUID = local.SandboxUIDBase + 31337

func BenchmarkSandboxCPUShare(b *testing.B) {
	needSandbox(b)
	rt, err := sandbox.NewRuntime(kerneltest.Quiet())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	box, err := rt.Open(sandbox.Spec{ID: "share", HostUID: shareUID, Uid: 31337, Gid: 31337,
		ScratchRoot: filepath.Join(b.TempDir(), "scratch"), Home: "/home/alice"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { box.Close() })
	var alone, shared, sandboxCPU float64
	b.ResetTimer()
	var lateAlone, lateShared []time.Duration
	for i := 0; i < b.N; i++ {
		alone += spinShare(b)
		lateAlone = append(lateAlone, wakeups(b)...)
		p, err := box.Start(sandbox.Cmd{Argv: []string{"taskset", "-c", "0", "sh", "-c", "while :; do :; done"},
			Cwd: "/", Env: []string{"PATH=/usr/bin:/bin"}})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the loop runs
		s0 := uidCPU(shareUID)
		t0 := time.Now()
		shared += spinShare(b)
		sandboxCPU += (uidCPU(shareUID) - s0).Seconds() / time.Since(t0).Seconds()
		lateShared = append(lateShared, wakeups(b)...)
		p.Kill()
		<-p.Done()
	}
	b.StopTimer()
	alone, shared, sandboxCPU = alone/float64(b.N), shared/float64(b.N), sandboxCPU/float64(b.N)
	b.ReportMetric(100*alone, "daemon-alone-%")
	b.ReportMetric(100*shared, "daemon-vs-sandbox-%")
	b.ReportMetric(100*sandboxCPU, "sandbox-%")
	b.ReportMetric(shared/alone, "kept")
	b.ReportMetric(sandboxCPU/shared, "sandbox/daemon")
	a50, a99 := pct(lateAlone, 50), pct(lateAlone, 99)
	s50, s99 := pct(lateShared, 50), pct(lateShared, 99)
	b.ReportMetric(float64(a99.Microseconds()), "late-alone-p99-µs")
	b.ReportMetric(float64(s99.Microseconds()), "late-vs-sandbox-p99-µs")
	b.Logf("a 1 ms sleep of the daemon's thread on CPU 0 wakes late by p50 %v p99 %v alone, p50 %v p99 %v against a spinning sandbox", a50, a99, s50, s99)
	b.Logf("the daemon's thread on CPU 0: %.0f%% alone, %.0f%% against a spinning sandbox (which ran %.0f%%): it keeps %.2f of its CPU, the sandbox gets %.2f of what it gets",
		100*alone, 100*shared, 100*sandboxCPU, shared/alone, sandboxCPU/shared)
}

// uidCPU is the CPU time used so far by the processes whose real uid is
// uid.
func uidCPU(uid uint32) time.Duration {
	var ticks int64
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) != nil || st.Uid != uid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		_, rest, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100
}

// wakeups sleeps 1 ms again and again for shareWindow on a thread bound
// to CPU 0 and returns how late each wake-up was.
func wakeups(b *testing.B) []time.Duration {
	res := make(chan []time.Duration, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: its affinity dies with it
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			res <- nil
			return
		}
		var late []time.Duration
		for end := time.Now().Add(shareWindow); time.Now().Before(end); {
			t0 := time.Now()
			unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
			late = append(late, time.Since(t0)-time.Millisecond)
		}
		res <- late
	}()
	late := <-res
	if late == nil {
		b.Fatal("affinity")
	}
	return late
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// spinShare spins a thread bound to CPU 0 for shareWindow and returns the
// share of it the thread ran.
func spinShare(b *testing.B) float64 {
	res := make(chan float64, 1)
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: its affinity dies with it
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errs <- fmt.Errorf("affinity: %w", err)
			return
		}
		var c0, c1 unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c0)
		t0 := time.Now()
		for time.Since(t0) < shareWindow {
		}
		wall := time.Since(t0)
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c1)
		res <- float64(c1.Nano()-c0.Nano()) / float64(wall)
	}()
	select {
	case r := <-res:
		return r
	case err := <-errs:
		b.Fatal(err)
		return 0
	}
}
