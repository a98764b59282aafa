package codemode

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"
)

// BenchmarkNestedCalls: a block making 1,000 nested calls that the parent
// answers at once (a no-op CallFunc), serially (await in a loop) and all
// at once (Promise.all), against the same block's JavaScript work with no
// call (the engine alone). Its ns/op is one serial call.
func BenchmarkNestedCalls(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	r := NewRunner([]string{exe}, nil)
	defer r.Close()
	small := json.RawMessage(`{"ok":true,"path":"/home/root/small.txt","content":"     1\ta small file\n","lines":1}`)
	noop := func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return small, nil }
	ctx := context.Background()
	blocks := []struct{ name, code string }{
		{"serial", `let n = 0; for (let i = 0; i < 1000; i++) { const f = await fs.read({path: "~/small.txt"}); n += f.content.length } return n`},
		{"all", `const fs_ = []; for (let i = 0; i < 1000; i++) fs_.push(fs.read({path: "~/small.txt"})); let n = 0; for (const f of await Promise.all(fs_)) n += f.content.length; return n`},
		{"nocall", `const s = ` + string(mustJSON(string(small))) + `; let n = 0; for (let i = 0; i < 1000; i++) { const a = JSON.stringify({path: "~/small.txt"}); const f = await (async () => JSON.parse(s))(); n += f.content.length + a.length * 0 } return n`},
	}
	for _, bl := range blocks {
		b.Run(bl.name, func(b *testing.B) {
			if res, err := r.Run(ctx, Request{Code: bl.code}, noop); err != nil || res.Status != StatusCompleted {
				b.Fatalf("%+v %v", res, err)
			}
			var total, cpu time.Duration
			for i := 0; i < b.N; i++ {
				time.Sleep(50 * time.Millisecond) // a warm worker is ready, the last one reaped
				t0, c0 := time.Now(), cpuTime()
				res, err := r.Run(ctx, Request{Code: bl.code}, noop)
				total += time.Since(t0)
				time.Sleep(50 * time.Millisecond) // the worker is reaped: its CPU counts
				cpu += cpuTime() - c0
				if err != nil || res.Status != StatusCompleted {
					b.Fatalf("%+v %v", res, err)
				}
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/1000, "ns/call")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1000, "cpu-ns/call")
		})
	}
}

// cpuTime is the CPU time of this process and of its children that
// ended (the workers).
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}
