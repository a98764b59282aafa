// Command benchsum prints the summary of a `make bench` run: each row of
// issue 30's table (docs/speed.md) with the figure measured in the run,
// its goal, and MET or MISSED.
//
// Usage: go test -bench ... | tee out; go run ./internal/benchsum out
//
// It reads the standard output of `go test -bench` (the benchmark result
// lines, "BenchmarkX/sub-2  N  v1 unit1  v2 unit2 ...", also when the
// benchmark printed lines between its name and its figures) and takes
// each row's figure from the metric a benchmark reports with
// b.ReportMetric: no benchmark needs to know of this summary. A row no
// result line feeds (the benchmark was skipped or failed) reads "not
// measured" and counts as MISSED. The command exits 0 whatever the
// verdicts: the figures are for people, the run's exit status is go
// test's.
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// source is one benchmark metric feeding a row: the package (its import
// path's last elements, e.g. "cmd/gsvfs"), the benchmark's full name
// without the -GOMAXPROCS suffix, and the unit of b.ReportMetric.
type source struct {
	pkg, bench, unit string
}

// row is one line of the table. Its figure is the worst value of
// its sources (the largest if the goal is an upper bound): a goal that
// holds "in both" holds for each source.
type row struct {
	figure  string   // what is measured, as the issue says it
	sources []source // where the figure comes from
	atMost  bool     // the goal is an upper bound (else a lower bound)
	goal    float64  // the goal, in the sources' unit
	format  string   // how the value prints, e.g. "%.0f ms"
}

// rows is issue 30's table, in its order.
var rows = []row{
	{"10,000 cron schedules at one minute boundary: last target call entered",
		[]source{{"sched", "BenchmarkLateness10k/cron-minute", "tgt-max-ms"}}, true, 300, "%.0f ms"},
	{"10,000 `at` schedules due at one instant: last target call returned",
		[]source{{"sched", "BenchmarkLateness10k/instant", "end-max-ms"}}, true, 300, "%.0f ms"},
	{"durable proc.send, 100 processes, runs on the offline model",
		[]source{{"proc", "BenchmarkSend/offline", "sends/s"}}, false, 5000, "%.0f/s"},
	{"durable proc.send, runs parked (the send path alone)",
		[]source{{"proc", "BenchmarkSend/parked", "sends/s"}}, false, 20000, "%.0f/s"},
	{"proc.ipc.send vs proc.send in one load",
		[]source{{"proc", "BenchmarkIPC/send", "ipc/send"}}, false, 1.0, "%.2fx"},
	{"read 100 MB through /dev/<id>/fs vs sshfs",
		[]source{{"cmd/gsvfs", "BenchmarkDevice/read100MB", "ours/sshfs"}}, false, 1.2, "%.2fx"},
	{"exec session open + exec true + close vs bwrap ... true",
		[]source{{"devices", "BenchmarkSessionOpenExecClose", "ratio_vs_bwrap"}}, true, 1.3, "%.2fx"},
	{"1,000 fs.read from a CodeMode block vs the dispatcher in process",
		[]source{{"proc", "BenchmarkCodeMode/fsread", "script/direct"}}, true, 2.0, "%.2fx"},
	{"  the same 1,000 fs.read made together (Promise.all), not in the issue",
		[]source{{"proc", "BenchmarkCodeMode/fsread", "all/direct"}}, true, 2.0, "%.2fx"},
	{"FUSE ctl write round trip vs go-fuse loopback (in process, daemons)",
		[]source{{"cmd/gsvfs", "BenchmarkFUSECtlRoundTrip/set", "ours/loop"}, {"cmd/gsvfs", "BenchmarkFUSECtlRoundTrip/daemon-set", "ours/loop"}}, true, 1.3, "%.2fx"},
	{"9P small read vs go9p's server (go9p time / ours)",
		[]source{{"cmd/gsvfs", "BenchmarkNinePSmallRead", "go9p/ours"}}, false, 1.2, "%.2fx"},
	{"HistoryCat/inproc (loopback time / ours)",
		[]source{{"cmd/gsvfs", "BenchmarkHistoryCat/inproc", "loop/ours"}}, false, 0.5, "%.3f"},
}

// results maps "pkg bench unit" to the value of the last result line of
// that benchmark (go test prints one per benchmark, at its final b.N).
type results map[string]float64

func key(pkg, bench, unit string) string { return pkg + " " + bench + " " + unit }

var (
	procsSuffix = regexp.MustCompile(`-\d+$`)
	resultLine  = regexp.MustCompile(`^\s*\d+\t`)
)

// parse reads go test -bench output. A benchmark that prints to stdout
// splits its result line: the name, then its own lines, then the figures
// on a line of their own; parse joins them.
func parse(r io.Reader) (results, error) {
	res := results{}
	pkg, pending := "", ""
	record := func(name, figures string) {
		name = procsSuffix.ReplaceAllString(name, "")
		f := strings.Fields(figures)
		for i := 1; i+1 < len(f); i += 2 { // f[0] is the iteration count
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				res[key(pkg, name, f[i+1])] = v
			}
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = shortPkg(strings.TrimSpace(strings.TrimPrefix(line, "pkg: ")))
			pending = ""
		case strings.HasPrefix(line, "Benchmark"):
			name, rest, _ := strings.Cut(line, "\t")
			name = strings.TrimSpace(name)
			if resultLine.MatchString(rest) && strings.Contains(rest, "ns/op") {
				record(name, rest)
				pending = ""
			} else {
				pending = name
			}
		case pending != "" && resultLine.MatchString(line) && strings.Contains(line, "ns/op"):
			record(pending, line)
			pending = ""
		}
	}
	return res, sc.Err()
}

// shortPkg is an import path relative to the module ("gsvfs.dev/gsvfs/cmd/gsvfs" is "cmd/gsvfs").
func shortPkg(p string) string {
	if _, r, ok := strings.Cut(p, "gsvfs.dev/gsvfs/"); ok {
		return r
	}
	return p
}

// verdictOf returns a row's figure (the worst of its sources), whether
// any source was measured, and whether the goal is met.
func verdictOf(r row, res results) (v float64, measured, met bool) {
	for _, s := range r.sources {
		x, ok := res[key(s.pkg, s.bench, s.unit)]
		if !ok || math.IsNaN(x) {
			continue
		}
		if !measured || (r.atMost && x > v) || (!r.atMost && x < v) {
			v = x
		}
		measured = true
	}
	if !measured {
		return 0, false, false
	}
	if r.atMost {
		return v, true, v <= r.goal
	}
	return v, true, v >= r.goal
}

// printTable writes the summary table.
func printTable(w io.Writer, res results, load string) {
	fmt.Fprintf(w, "\n=== make bench summary: issue 30's table (figures from this run; load average %s) ===\n", load)
	fmt.Fprintf(w, "%-72s %12s %12s  %s\n", "figure", "measured", "goal", "verdict")
	met := 0
	for _, r := range rows {
		v, measured, ok := verdictOf(r, res)
		got := "not measured"
		if measured {
			got = fmt.Sprintf(r.format, v)
		}
		op := ">="
		if r.atMost {
			op = "<="
		}
		verdict := "MISSED"
		if ok {
			verdict = "MET"
			met++
		}
		fmt.Fprintf(w, "%-72s %12s %12s  %s\n", r.figure, got, op+" "+fmt.Sprintf(r.format, r.goal), verdict)
	}
	fmt.Fprintf(w, "%d of %d goals met. Sources: docs/speed.md.\n\n", met, len(rows))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchsum:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	res, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchsum:", err)
		os.Exit(2)
	}
	printTable(os.Stdout, res, loadAvg())
}
