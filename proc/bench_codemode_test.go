package proc

import (
	"context"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// BenchmarkCodeMode measures CodeMode (issue 14's targets), in process
// (the CLI adds its own start, about 5 ms here):
//
//   - return1: codemode.run of `return 1`, call to result (a worker
//     process starts for each run). Target (through the CLI): <= 10 ms.
//   - fsread: a block making 1,000 fs.read calls of a small file, against
//     1,000 fs.read syscalls from Go, same run. Target: <= 1.5x.
func BenchmarkCodeMode(b *testing.B) {
	e := newBenchEnvOpts(b, Options{CodeModeWorker: codeModeWorker(b)})
	ctx := context.Background()
	if _, err := kernel.Invoke[*abi.FSWriteResult](ctx, e.k, e.root, "fs.write", &abi.FSWriteArgs{Path: "~/small.txt", Content: "a small file\n"}); err != nil {
		b.Fatal(err)
	}
	run := func(code string) *abi.CodeModeResult {
		res, err := kernel.Invoke[*abi.CodeModeResult](ctx, e.k, e.root, "codemode.run", &abi.CodeModeRunArgs{Code: code})
		if err != nil {
			b.Fatal(err)
		}
		if res.Status != "completed" {
			b.Fatalf("codemode.run: %+v", res)
		}
		return res
	}
	b.Run("return1", func(b *testing.B) {
		run("return 1") // warm
		var ds []time.Duration
		for i := 0; i < 50*b.N; i++ {
			t0 := time.Now()
			run("return 1")
			ds = append(ds, time.Since(t0))
		}
		p50, p99 := benchPercentile(ds, 0.5), benchPercentile(ds, 0.99)
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.Logf("SUMMARY CodeMode/return1: codemode.run of return 1, in process, %d runs: p50 %v p99 %v (target through the CLI <= 10ms; the CLI adds its start) %s  [load average %s]",
			len(ds), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), benchVerdict(p50 <= 5*time.Millisecond), benchLoad())
	})
	b.Run("fsread", func(b *testing.B) {
		const n = 1000
		var script, direct []float64
		for i := 0; i < 3*b.N; i++ {
			t0 := time.Now()
			for j := 0; j < n; j++ {
				if _, err := kernel.Invoke[*abi.FSReadResult](ctx, e.k, e.root, "fs.read", &abi.FSReadArgs{Path: "~/small.txt"}); err != nil {
					b.Fatal(err)
				}
			}
			direct = append(direct, time.Since(t0).Seconds())
			t0 = time.Now()
			res := run(`let n = 0; for (let i = 0; i < 1000; i++) { const f = await fs.read({path: "~/small.txt"}); n += f.content.length } return n`)
			script = append(script, time.Since(t0).Seconds())
			if string(res.Result) == "0" {
				b.Fatalf("the block read nothing: %s", res.Result)
			}
		}
		s, d := benchMedian(script), benchMedian(direct)
		b.ReportMetric(s/d, "script/direct")
		b.Logf("SUMMARY CodeMode/fsread: 1,000 fs.read from a block %.1f ms, from Go %.1f ms: %.2fx (target <= 1.5x) %s  [script %s, direct %s; load average %s]",
			s*1000, d*1000, s/d, benchVerdict(s/d <= 1.5), benchFloats(script, 3), benchFloats(direct, 3), benchLoad())
	})
}
