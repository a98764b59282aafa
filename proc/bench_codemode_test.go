package proc

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
)

// BenchmarkCodeMode measures CodeMode (issue 14's targets), in process
// (BenchmarkCodeModeCLI in cmd/gsvfs measures return 1 through the CLI):
//
//   - return1: codemode.run of `return 1`, call to result, runs 30 ms
//     apart (a person's pace: the runner has its warm workers ready);
//     back to back as a diagnostic (each run waits for a worker the last
//     one's replacement is still starting).
//   - fsread: a block making 1,000 fs.read calls of a small file, against
//     1,000 fs.read syscalls from Go, same run. Target: <= 1.5x. As a
//     diagnostic, the same block against nested calls that do nothing
//     (codemode.Runner with a no-op CallFunc): the engine and the
//     worker's round trips alone.
func BenchmarkCodeMode(b *testing.B) {
	e := newBenchEnvOpts(b, Options{CodeModeWorker: codeModeWorker(b)})
	ctx := context.Background()
	if _, err := kernel.Do(ctx, e.k, e.root, abi.FsWrite, &abi.FSWriteArgs{Path: "~/small.txt", Content: "a small file\n"}); err != nil {
		b.Fatal(err)
	}
	run := func(code string) *abi.CodeModeResult {
		res, err := kernel.Do(ctx, e.k, e.root, abi.CodemodeRun, &abi.CodeModeRunArgs{Code: code})
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
		var spaced, burst []time.Duration
		for i := 0; i < 40*b.N; i++ {
			time.Sleep(30 * time.Millisecond)
			t0 := time.Now()
			run("return 1")
			spaced = append(spaced, time.Since(t0))
		}
		for i := 0; i < 40*b.N; i++ {
			t0 := time.Now()
			run("return 1")
			burst = append(burst, time.Since(t0))
		}
		p50, p99 := benchPercentile(spaced, 0.5), benchPercentile(spaced, 0.99)
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.Logf("SUMMARY CodeMode/return1: codemode.run of return 1, in process, %d runs 30ms apart: p50 %v p99 %v (target through the CLI <= 10ms: see CodeModeCLI) %s  [back to back: p50 %v p99 %v; load average %s]",
			len(spaced), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), benchVerdict(p50 <= 3*time.Millisecond),
			benchPercentile(burst, 0.5).Round(10*time.Microsecond), benchPercentile(burst, 0.99).Round(10*time.Microsecond), benchLoad())
	})
	b.Run("fsread", func(b *testing.B) {
		const n = 1000
		const block = `let n = 0; for (let i = 0; i < 1000; i++) { const f = await fs.read({path: "~/small.txt"}); n += f.content.length } return n`
		floorRunner := codemode.NewRunner(codeModeWorker(b), nil)
		defer floorRunner.Close()
		small := json.RawMessage(`{"ok":true,"path":"/home/root/small.txt","content":"     1\ta small file\n","lines":1}`)
		noop := func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return small, nil }
		// The same reads made together (Promise.all): the worker sends
		// them at once and the calls are answered as they end.
		const blockAll = `const ps = []; for (let i = 0; i < 1000; i++) ps.push(fs.read({path: "~/small.txt"})); let n = 0; for (const f of await Promise.all(ps)) n += f.content.length; return n`
		var script, direct, floor, all []float64
		for i := 0; i < 3*b.N; i++ {
			t0 := time.Now()
			for j := 0; j < n; j++ {
				if _, err := kernel.Do(ctx, e.k, e.root, abi.FsRead, &abi.FSReadArgs{Path: "~/small.txt"}); err != nil {
					b.Fatal(err)
				}
			}
			direct = append(direct, time.Since(t0).Seconds())
			time.Sleep(30 * time.Millisecond)
			t0 = time.Now()
			res := run(block)
			script = append(script, time.Since(t0).Seconds())
			if string(res.Result) == "0" {
				b.Fatalf("the block read nothing: %s", res.Result)
			}
			time.Sleep(30 * time.Millisecond)
			t0 = time.Now()
			if fr, err := floorRunner.Run(ctx, codemode.Request{Code: block}, noop); err != nil || fr.Status != codemode.StatusCompleted {
				b.Fatalf("the block with no-op calls: %+v %v", fr, err)
			}
			floor = append(floor, time.Since(t0).Seconds())
			time.Sleep(30 * time.Millisecond)
			t0 = time.Now()
			res = run(blockAll)
			all = append(all, time.Since(t0).Seconds())
			if string(res.Result) != string(run(block).Result) {
				b.Fatalf("the Promise.all block read %s", res.Result)
			}
		}
		s, d, f, a := benchMedian(script), benchMedian(direct), benchMedian(floor), benchMedian(all)
		b.ReportMetric(s/d, "script/direct")
		b.ReportMetric(a/d, "all/direct")
		b.Logf("SUMMARY CodeMode/fsread-all: 1,000 fs.read made together (Promise.all) from a block %.1f ms, from Go one by one %.1f ms: %.2fx [%s]", a*1000, d*1000, a/d, benchFloats(all, 3))
		b.Logf("SUMMARY CodeMode/fsread: 1,000 fs.read from a block %.1f ms, from Go %.1f ms: %.2fx (target <= 1.5x) %s  [the block with no-op calls (engine and round trips alone) %.1f ms = %.2fx of from Go; script %s, direct %s; load average %s]",
			s*1000, d*1000, s/d, benchVerdict(s/d <= 1.5), f*1000, f/d, benchFloats(script, 3), benchFloats(direct, 3), benchLoad())
	})
}
