package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// Growth benchmarks (issue 30, docs/speed.md): how a cost grows with the
// work, at three sizes 10x apart, each run once whatever b.N, printing
// time and memory per unit. GSV_BENCH_GROWTH_MAX caps the sizes, for a
// quick run.

// growthSizes is lo, 10·lo, … up to hi, capped by GSV_BENCH_GROWTH_MAX.
func growthSizes(lo, hi int) []int {
	if s := os.Getenv("GSV_BENCH_GROWTH_MAX"); s != "" {
		if m, err := strconv.Atoi(s); err == nil && m > 0 {
			hi = min(hi, m)
		}
	}
	var out []int
	for n := lo; n <= hi; n *= 10 {
		out = append(out, n)
	}
	return out
}

// growthHeap is the live Go heap after a full collection.
func growthHeap() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse)
}

// BenchmarkGrowthProcesses: 100, 1,000 and 10,000 idle task processes:
// the spawn of each (µs per process), the memory the live processes hold
// (Go heap and RSS growth per process), and the start-up of the room on
// their state (a daemon's restart: kernel and proc opened on it), per
// process.
func BenchmarkGrowthProcesses(b *testing.B) {
	for _, n := range growthSizes(100, 10_000) {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				growthProcesses(b, n)
			}
		})
	}
}

func growthProcesses(b *testing.B, n int) {
	ctx := context.Background()
	e := newBenchEnv(b)
	h0, r0 := growthHeap(), benchSelfKB("VmRSS")
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if _, err := kernel.Do(ctx, e.k, e.root, abi.ProcSpawn, &abi.SpawnArgs{Profile: "task"}); err != nil {
			b.Fatal(err)
		}
	}
	spawn := time.Since(t0)
	heap, rss := growthHeap()-h0, (benchSelfKB("VmRSS")-r0)*1024
	live := e.count(b, `SELECT count(*) FROM proc_processes`)
	e.close()

	// The restart: a kernel and the rooms opened on the same state.
	t0 = time.Now()
	k, err := kernel.Open(kernel.Config{StateDir: e.state, Logger: quietGrowthLog()})
	if err != nil {
		b.Fatal(err)
	}
	m, err := register(k, Options{Logger: quietGrowthLog()})
	if err != nil {
		k.Close()
		b.Fatal(err)
	}
	// The namespace answers: a listing of /proc, as the first ls would.
	if _, err := kernel.Do(ctx, k, e.root, abi.ProcList, &abi.ListArgs{}); err != nil {
		b.Fatal(err)
	}
	start := time.Since(t0)
	m.space.Close()
	k.Close()

	b.ReportMetric(float64(spawn.Microseconds())/float64(n), "spawn-µs/process")
	b.ReportMetric(heap/float64(n), "heap-B/process")
	b.ReportMetric(rss/float64(n), "rss-B/process")
	b.ReportMetric(float64(start.Microseconds())/float64(n), "startup-µs/process")
	fmt.Printf("GROWTH processes n=%d (%d in the table with init): spawn %v (%.0f µs/process), Go heap +%.1f MB (%.0f B/process), RSS +%.1f MB (%.0f B/process), start-up on their state %v (%.1f µs/process), load average %s\n",
		n, live, spawn.Round(time.Millisecond), float64(spawn.Microseconds())/float64(n), heap/(1<<20), heap/float64(n), rss/(1<<20), rss/float64(n),
		start.Round(time.Millisecond), float64(start.Microseconds())/float64(n), benchLoad())
}

// BenchmarkGrowthConversation: one conversation of 10k, 100k and 1M
// messages: reading its history file to the end through the namespace
// (what cat does, without FUSE), per message, with the heap it grows
// meanwhile; and its compaction (keep the last 100), per message.
func BenchmarkGrowthConversation(b *testing.B) {
	for _, n := range growthSizes(10_000, 1_000_000) {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				growthConversation(b, n)
			}
		})
	}
}

func growthConversation(b *testing.B, n int) {
	ctx := context.Background()
	e := newBenchEnv(b)
	pid := e.spawn(b)
	bytesIn := e.fillConversation(b, pid, n)
	cred, err := e.m.space.Authenticate(ctx, vfs.Peer{Transport: "fuse", HostUID: 0, HostGID: 0})
	if err != nil {
		b.Fatal(err)
	}
	elems := []string{"proc", pid, "conversations", "default", "history"}
	ms := startBenchMemSampler(5 * time.Millisecond)
	t0 := time.Now()
	size, err := growthRead(ctx, e.m.space.Root(), cred, elems)
	cat := time.Since(t0)
	ms.finish()
	if err != nil {
		b.Fatal(err)
	}
	if size < bytesIn {
		b.Fatalf("read %d bytes of history, the messages hold %d", size, bytesIn)
	}
	summary := "done"
	keep := 100
	t0 = time.Now()
	res, err := kernel.Do(ctx, e.k, e.root, abi.ProcConversationCompact,
		&abi.CompactArgs{Pid: pid, ConversationID: "default", Summary: &summary, KeepLast: &keep})
	compact := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	if res.ArchivedMessages < int64(n)-200 {
		b.Fatalf("archived %d of %d messages", res.ArchivedMessages, n)
	}
	perCat := float64(cat.Nanoseconds()) / float64(n)
	perCompact := float64(compact.Nanoseconds()) / float64(n)
	b.ReportMetric(perCat/1000, "cat-µs/message")
	b.ReportMetric(max(ms.heapGrowMB, ms.rssMB)*(1<<20)/float64(n), "cat-mem-B/message")
	b.ReportMetric(perCompact/1000, "compact-µs/message")
	fmt.Printf("GROWTH conversation n=%d (%.1f MB of history): cat %v (%.2f µs/message), peak growth HeapInuse %.1f MB / RSS %.1f MB (%.0f B/message); compaction %v (%.2f µs/message), load average %s\n",
		n, float64(size)/(1<<20), cat.Round(time.Millisecond), perCat/1000, ms.heapGrowMB, ms.rssMB, max(ms.heapGrowMB, ms.rssMB)*(1<<20)/float64(n),
		compact.Round(time.Millisecond), perCompact/1000, benchLoad())
}

// growthRead opens the file at elems under root and reads it to the end
// in 128 KiB reads, as cat does; it returns the bytes read.
func growthRead(ctx context.Context, root vfs.Dir, cred vfs.Cred, elems []string) (int64, error) {
	var n vfs.Node = root
	for _, name := range elems {
		d, ok := n.(vfs.Dir)
		if !ok {
			return 0, fmt.Errorf("%s: not a directory", name)
		}
		var err error
		if n, err = d.Lookup(ctx, cred, name); err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(elems...), err)
		}
	}
	f, ok := n.(vfs.File)
	if !ok {
		return 0, fmt.Errorf("%s: not a file", filepath.Join(elems...))
	}
	h, err := f.Open(ctx, cred, os.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer h.Close(ctx)
	buf := make([]byte, 128<<10)
	var off int64
	for {
		m, err := h.Read(ctx, buf, off)
		off += int64(m)
		if err != nil || m == 0 {
			if err != nil && !errors.Is(err, io.EOF) {
				return off, err
			}
			return off, nil
		}
	}
}

func quietGrowthLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
