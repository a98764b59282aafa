package sched

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkGrowthSchedules: how the scheduler's costs grow with the
// number of enabled schedules (issue 30's growth tables, docs/speed.md):
// at 10k, 100k and 1M every-1h schedules, the reload (open of the engine
// on a restart: read, decode, arm), per schedule, and the Go heap the
// armed engine holds, per schedule; then the idle CPU of the armed engine
// over 3 s. GSV_BENCH_GROWTH_MAX (default 1000000) caps the sizes, for a
// quick run. Each size runs once, whatever b.N.
func BenchmarkGrowthSchedules(b *testing.B) {
	for _, n := range growthSizes(10_000, 1_000_000) {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				growthSchedules(b, n)
			}
		})
	}
}

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

// heapInuse is the live heap after a full collection.
func heapInuse() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse)
}

func growthSchedules(b *testing.B, n int) {
	b.StopTimer()
	dir := b.TempDir()
	k := benchKernel(b, dir, true)
	hour := time.Hour.Milliseconds()
	now := time.Now().UnixMilli()
	anchor := func(i int) int64 { return now - hour + 10*60_000 + int64(i)*7919%(50*60_000) }
	insertSchedules(b, k.Store, n,
		func(i int) Expression { a := anchor(i); return Expression{Kind: "every", EveryMs: hour, AnchorMs: &a} },
		func(i int) int64 { return anchor(i) + hour }, now-3*hour)
	k.Close()
	k = benchKernel(b, dir, false)
	defer k.Close()
	h0 := heapInuse()
	b.StartTimer()
	t0, c0 := time.Now(), cpuTime()
	m, err := openStarted(k, Options{Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	reload, reloadCPU := time.Since(t0), cpuTime()-c0
	b.StopTimer()
	defer m.Close()
	heap := heapInuse() - h0
	m.mu.Lock()
	armed := len(m.next)
	m.mu.Unlock()
	if armed != n {
		b.Fatalf("armed %d schedules, want %d", armed, n)
	}
	const idle = 3 * time.Second
	time.Sleep(time.Second) // the store checkpoints the reload's writes
	c1, w1 := cpuTime(), time.Now()
	time.Sleep(idle)
	pct := 100 * (cpuTime() - c1).Seconds() / time.Since(w1).Seconds()
	perUs := float64(reload.Microseconds()) / float64(n)
	perB := heap / float64(n)
	b.ReportMetric(float64(reload.Milliseconds()), "reload-ms")
	b.ReportMetric(perUs, "reload-µs/schedule")
	b.ReportMetric(perB, "heap-B/schedule")
	b.ReportMetric(pct, "idle-cpu-%")
	fmt.Printf("GROWTH schedules n=%d: reload %v (%.2f µs/schedule, CPU %v), heap %.1f MB (%.0f B/schedule), idle CPU %.3f%% of one core, load average %s\n",
		n, reload.Round(time.Millisecond), perUs, reloadCPU.Round(time.Millisecond), heap/(1<<20), perB, pct, loadavg())
}
