package proc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// BenchmarkRuns measures deliberable runs (issue 13's targets):
//
//   - checkpoints: 10,000 steps (100 processes, one run of 100 steps
//     each, one after another; every step a model call with a tool call,
//     the model answering at once) with checkpoints at every step and no
//     directive, against the same runs with no checkpoint code at all,
//     in the same run, alternating. Target: at most 5% more time.
//   - directive: a supervised process parks at each of 200 checkpoints;
//     the time from a directive's call until the run has resumed.
//     Target: p99 <= 5 ms.
const (
	benchRunProcs   = 100
	benchRunSteps   = 100
	benchDirectives = 200
	benchRunRounds  = 2
)

// stepProvider makes a tool call (Read of a file that is not there) on every call
// until its run has made steps of them, then answers.
type stepProvider struct{ steps int }

func (stepProvider) Name() string { return "offline" }

func (p stepProvider) Complete(ctx context.Context, req model.Request, delta func(string)) (model.Response, error) {
	calls := 0
	for _, m := range req.Messages {
		calls += len(m.ToolCalls)
	}
	if calls >= p.steps {
		return model.Response{Text: "done", StopReason: "end_turn", Usage: model.Usage{InputTokens: 10, OutputTokens: 1}}, nil
	}
	return model.Response{StopReason: "tool_use", Usage: model.Usage{InputTokens: 10, OutputTokens: 5},
		ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("c%d", calls), Name: "Read", Args: []byte(`{"path":"~/none"}`)}}}, nil
}

// benchRunSteps runs benchRunProcs runs of benchRunSteps steps on fresh
// state and returns the time they took.
func benchRunStepsTime(b *testing.B, checkpoints bool) time.Duration {
	b.Helper()
	e := newBenchEnvOpts(b, Options{MaxSteps: benchRunSteps + 2, noCheckpoints: !checkpoints,
		Provider: func(context.Context, uint32) (model.Provider, string, error) {
			return stepProvider{benchRunSteps}, "m", nil
		}})
	defer e.close()
	ctx := context.Background()
	pids := make([]string, benchRunProcs)
	for i := range pids {
		pids[i] = e.spawn(b)
	}
	t0 := time.Now()
	for _, pid := range pids {
		res, err := kernel.Do(ctx, e.k, e.root, abi.ProcSend, &abi.SendArgs{Pid: pid, Message: "go"})
		if err != nil {
			b.Fatal(err)
		}
		for {
			var st string
			e.k.Store.QueryRowContext(context.Background(), `SELECT status FROM proc_runs WHERE run_id=?`, res.RunID).Scan(&st)
			if st == "done" {
				break
			}
			if st == "error" || st == "aborted" {
				b.Fatalf("run %s: %s", res.RunID, st)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	d := time.Since(t0)
	if n := e.count(b, `SELECT count(*) FROM proc_messages WHERE role='toolResult'`); n != benchRunProcs*benchRunSteps {
		b.Fatalf("%d tool results, want %d", n, benchRunProcs*benchRunSteps)
	}
	return d
}

// benchDirectiveLatency parks a supervised run at benchDirectives
// checkpoints and returns, for each, the time from the directive's call
// until the run resumed.
func benchDirectiveLatency(b *testing.B) []time.Duration {
	b.Helper()
	e := newBenchEnvOpts(b, Options{MaxSteps: benchDirectives + 5,
		Provider: func(context.Context, uint32) (model.Provider, string, error) {
			return stepProvider{benchDirectives + 1}, "m", nil
		}})
	defer e.close()
	ctx := context.Background()
	res, err := kernel.Do(ctx, e.k, e.root, abi.ProcSpawn, &abi.SpawnArgs{Profile: "task", Supervise: true, GraceMs: 60000})
	if err != nil {
		b.Fatal(err)
	}
	pid := res.Pid
	parked, resumed := make(chan int64, 4), make(chan struct{}, 4)
	e.k.Observe(func(ev *kernel.Event, _ kernel.Audience) {
		if ev.Pid != pid {
			return
		}
		switch p := ev.Payload.(type) {
		case abi.RunCheckpointed:
			parked <- p.Seq
		case abi.RunResumed:
			resumed <- struct{}{}
		}
	})
	if _, err := kernel.Do(ctx, e.k, e.root, abi.ProcSend, &abi.SendArgs{Pid: pid, Message: "go"}); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for i := 0; i < benchDirectives; i++ {
		var seq int64
		select {
		case seq = <-parked:
		case <-time.After(10 * time.Second):
			b.Fatalf("no checkpoint %d", i+1)
		}
		t0 := time.Now()
		r, err := kernel.Do(ctx, e.k, e.root, abi.ProcDirective, &abi.DirectiveArgs{Pid: pid, Checkpoint: &seq, Directive: abi.Directive{Type: "continue"}})
		if err != nil || r.Result != "delivered" {
			b.Fatalf("directive %d: %+v %v", seq, r, err)
		}
		<-resumed
		lat = append(lat, time.Since(t0))
	}
	return lat
}

func BenchmarkRuns(b *testing.B) {
	b.Run("checkpoints", func(b *testing.B) {
		var with, without []float64
		for it := 0; it < b.N*benchRunRounds; it++ {
			if it%2 == 0 {
				without = append(without, benchRunStepsTime(b, false).Seconds())
				with = append(with, benchRunStepsTime(b, true).Seconds())
			} else {
				with = append(with, benchRunStepsTime(b, true).Seconds())
				without = append(without, benchRunStepsTime(b, false).Seconds())
			}
		}
		w, wo := benchMedian(with), benchMedian(without)
		b.ReportMetric(w/wo, "with/without")
		b.Logf("SUMMARY Runs/checkpoints: %d steps (%d runs of %d): %.2f s with checkpoints, %.2f s without (same run): %.3fx (target <= 1.05) %s  [with %s, without %s; load average %s]",
			benchRunProcs*benchRunSteps, benchRunProcs, benchRunSteps, w, wo, w/wo, benchVerdict(w/wo <= 1.05), benchFloats(with, 2), benchFloats(without, 2), benchLoad())
	})
	b.Run("directive", func(b *testing.B) {
		var all []time.Duration
		for it := 0; it < b.N; it++ {
			all = append(all, benchDirectiveLatency(b)...)
		}
		p50, p99 := benchPercentile(all, 0.5), benchPercentile(all, 0.99)
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.Logf("SUMMARY Runs/directive: directive -> run resumed, %d checkpoints: p50 %v p99 %v max %v (target p99 <= 5ms) %s  [load average %s]",
			len(all), p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), benchPercentile(all, 1).Round(10*time.Microsecond), benchVerdict(p99 <= 5*time.Millisecond), benchLoad())
	})
}
