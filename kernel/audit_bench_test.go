package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// BenchmarkAuditDurableWrite: a durable store change made through the
// dispatcher (sys.config.set: one committed transaction per call, as a
// durable proc.send's is), one caller at a time, with the audit log on
// (a change record in the transaction, a call record appended with
// others by the flusher) vs off, interleaved in rounds in the same run.
// Each write sets a new value: SQLite skips writing a row whose bytes did
// not change, so a constant value times empty commits. Target: on/off
// throughput >= 0.95 (the median of the rounds' ratios, and the ratio of
// the totals, printed, never asserted).
func BenchmarkAuditDurableWrite(b *testing.B) {
	k, root, _, _ := newKernel(b)
	c := &Caller{Identity: root}
	ctx := context.Background()
	var dur, cpu [2]time.Duration
	var n [2]int
	var ratios []float64
	const round = 50
	b.ResetTimer()
	for i := 0; i < b.N; {
		var round2 [2]time.Duration
		for side := 0; side < 2; side++ {
			k.audit.off.Store(side == 0)
			t0, c0 := time.Now(), cpuTime()
			for j := 0; j < round; j++ {
				if _, err := Do(ctx, k, c, abi.SysConfigSet, &abi.ConfigSetArgs{Key: fmt.Sprintf("config/bench/k%d", j), Value: json.RawMessage(strconv.Itoa(i + j))}); err != nil {
					b.Fatal(err)
				}
			}
			round2[side] = time.Since(t0)
			dur[side] += round2[side]
			cpu[side] += cpuTime() - c0
			n[side] += round
		}
		ratios = append(ratios, round2[0].Seconds()/round2[1].Seconds())
		i += 2 * round
	}
	b.StopTimer()
	off := float64(n[0]) / dur[0].Seconds()
	on := float64(n[1]) / dur[1].Seconds()
	slices.Sort(ratios)
	med := ratios[len(ratios)/2]
	b.ReportMetric(med, "on/off")
	b.Logf("durable writes: audit on %.0f/s, off %.0f/s: %.3fx, median of %d rounds %.3fx (target >= 0.95); process CPU a write: on %.1f µs, off %.1f µs",
		on, off, on/off, len(ratios), med, us(cpu[1], n[1]), us(cpu[0], n[0]))
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func us(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(max(n, 1)) }
