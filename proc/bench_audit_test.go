package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// BenchmarkAuditSend: issue 28's speed target, "durable proc.send with the
// audit on >= 0.95x with it off" in the same run. One client at a time
// sends ~150-byte messages to a few processes (each send returns once its
// message is committed; the runs it starts answer offline in the
// background), in rounds that alternate config/audit/enabled off and on.
// The ratio and the process CPU a send are printed, never asserted.
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
	msg := "a message of about one hundred and fifty bytes, which is what a user types to an agent: " +
		"please look at the build and tell me what broke."
	b.ResetTimer()
	for i := 0; i < b.N; {
		for side := 0; side < 2; side++ { // 0: off, 1: on
			b.StopTimer()
			setAudit(side == 1)
			b.StartTimer()
			t0, c0 := time.Now(), benchCPU()
			for j := 0; j < round; j++ {
				pid := pids[j%len(pids)]
				if _, err := kernel.Do(ctx, e.k, e.root, abi.ProcSend, &abi.SendArgs{Pid: pid, Message: fmt.Sprintf("%d %s", i+j, msg)}); err != nil {
					b.Fatal(err)
				}
			}
			dur[side] += time.Since(t0)
			cpu[side] += benchCPU() - c0
			n[side] += round
		}
		i += 2 * round
	}
	b.StopTimer()
	off := float64(n[0]) / dur[0].Seconds()
	on := float64(n[1]) / dur[1].Seconds()
	b.ReportMetric(on/off, "on/off")
	b.Logf("SUMMARY AuditSend: durable proc.send, audit on %.0f/s, off %.0f/s: %.3fx (target >= 0.95); process CPU a send: on %.0f µs, off %.0f µs | load average %s",
		on, off, on/off, float64(cpu[1].Microseconds())/float64(n[1]), float64(cpu[0].Microseconds())/float64(n[0]), benchLoad())
}
