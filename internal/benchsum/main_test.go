package main

import (
	"strings"
	"testing"
)

// sample is go test -bench output as make bench prints it: several
// packages, a benchmark that prints between its name and its figures,
// sub-benchmarks, -GOMAXPROCS suffixes.
const sample = `goos: linux
goarch: amd64
pkg: gsvfs.dev/gsvfs/cmd/gsvfs
cpu: AMD EPYC
BenchmarkFUSECtlRoundTrip/set-2         	    2000	     95000 ns/op	         1.25 ours/loop	  95000 ours-ns/op
BenchmarkFUSECtlRoundTrip/daemon-set-2  	    2000	     99000 ns/op	         1.41 ours/loop
BenchmarkNinePSmallRead-2   	lateness run: 10000 at schedules
       1000	 50000 ns/op	  1.30 go9p/ours	 120 B/op	 3 allocs/op
--- BENCH: BenchmarkNinePSmallRead-2
    bench_test.go:1: N=1000
pkg: gsvfs.dev/gsvfs/sched
BenchmarkLateness10k/instant-2  	lateness run: 10000 at
lateness as recorded: p50 1ms
       1	 2000000000 ns/op	  250.0 end-max-ms	  12.0 tgt-max-ms
BenchmarkLateness10k/cron-minute-2  	panic: something
FAIL	gsvfs.dev/gsvfs/sched	1.0s
pkg: gsvfs.dev/gsvfs/proc
BenchmarkCodeMode/fsread-2	       1	 1 ns/op	  2.5 script/direct
`

func TestParseAndVerdicts(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		figure   string
		v        float64
		measured bool
		met      bool
	}{
		// the worst of in process (1.25) and daemons (1.41)
		{"FUSE ctl write round trip vs go-fuse loopback (in process, daemons)", 1.41, true, false},
		{"9P small read vs go9p's server (go9p time / ours)", 1.30, true, true},
		{"10,000 `at` schedules due at one instant: last target call returned", 250, true, true},
		{"10,000 cron schedules at one minute boundary: last target call entered", 0, false, false},
		{"1,000 fs.read from a CodeMode block vs the dispatcher in process", 2.5, true, false},
		{"durable proc.send, 100 processes, runs on the offline model", 0, false, false},
	} {
		var r *row
		for i := range rows {
			if rows[i].figure == c.figure {
				r = &rows[i]
			}
		}
		if r == nil {
			t.Fatalf("no row %q", c.figure)
		}
		v, measured, met := verdictOf(*r, res)
		if v != c.v || measured != c.measured || met != c.met {
			t.Errorf("%s: %v %v %v, want %v %v %v", c.figure, v, measured, met, c.v, c.measured, c.met)
		}
	}
	var out strings.Builder
	printTable(&out, res, "1.0")
	if got := out.String(); !strings.Contains(got, "not measured") || !strings.Contains(got, "2 of 12 goals met") {
		t.Errorf("summary:\n%s", got)
	}
}
