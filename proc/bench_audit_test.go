package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// BenchmarkAuditSend: issue 28's speed target, "durable proc.send with the
// audit on >= 0.95x with it off" in the same run. One client at a time
// sends ~150-byte messages to a few processes (each send returns once its
// message is committed; the runs it starts answer offline in the
// background), in rounds that alternate config/audit/enabled off and on;
// before each round every run of the one before has ended (outside the
// timer), so a round times its own sends, not the last round's runs.
// The median of the rounds' on/off ratios, the ratio of the totals and
// the process CPU a send are printed, never asserted.
func BenchmarkAuditSend(b *testing.B) {
	e := newBenchEnv(b)
	defer e.close()
	ctx := context.Background()
	pids := make([]string, 4)
	for i := range pids {
		pids[i] = e.spawn(b)
	}
	setAudit := func(on bool) {
		v := json.RawMessage(fmt.Sprint(on))
		if _, err := kernel.Do(ctx, e.k, e.root, abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/audit/enabled", Value: v}); err != nil {
			b.Fatal(err)
		}
		for t0 := time.Now(); e.k.AuditOn() != on; time.Sleep(time.Millisecond) {
			if time.Since(t0) > time.Minute {
				b.Fatalf("the audit log is not %v after a minute", on)
			}
		}
	}
	const round = 40
	var dur, cpu [2]time.Duration
	var n [2]int
	var ratios []float64
	msg := "a message of about one hundred and fifty bytes, which is what a user types to an agent: " +
		"please look at the build and tell me what broke."
	b.ResetTimer()
	for i := 0; i < b.N; {
		var round2 [2]time.Duration
		for side := 0; side < 2; side++ { // 0: off, 1: on
			b.StopTimer()
			if err := e.waitIdle(time.Minute); err != nil {
				b.Fatal(err)
			}
			setAudit(side == 1)
			b.StartTimer()
			t0, c0 := time.Now(), benchCPU()
			for j := 0; j < round; j++ {
				pid := pids[j%len(pids)]
				if _, err := kernel.Do(ctx, e.k, e.root, abi.ProcSend, &abi.SendArgs{Pid: pid, Message: fmt.Sprintf("%d %s", i+j, msg)}); err != nil {
					b.Fatal(err)
				}
			}
			round2[side] = time.Since(t0)
			dur[side] += round2[side]
			cpu[side] += benchCPU() - c0
			n[side] += round
		}
		ratios = append(ratios, round2[0].Seconds()/round2[1].Seconds())
		i += 2 * round
	}
	b.StopTimer()
	off := float64(n[0]) / dur[0].Seconds()
	on := float64(n[1]) / dur[1].Seconds()
	med := median(ratios)
	b.ReportMetric(med, "on/off")
	b.Logf("SUMMARY AuditSend: durable proc.send, audit on %.0f/s, off %.0f/s: %.3fx, median of %d rounds %.3fx (target >= 0.95); process CPU a send: on %.0f µs, off %.0f µs | load average %s",
		on, off, on/off, len(ratios), med, float64(cpu[1].Microseconds())/float64(n[1]), float64(cpu[0].Microseconds())/float64(n[0]), benchLoad())
}

// median is the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
