package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// homeCpRounds is how many rounds of each side one iteration runs.
const homeCpRounds = 9

// homeCpFiles is the size of the tree copied: 1,000 files of 1 KiB in 20
// directories.
const homeCpFiles = 1000

// BenchmarkHomeKeeperCp: the home keeper's cost to a writer (issue 26's
// target: < 5%). A real daemon (FUSE mount), alice's host uid copies a
// 1,000-file tree into her home with cp -r through the mount, with the
// keeper on (config/repos/home on: it walks and commits the home every
// 3 s, once the writes pause) and off, the sides interleaved (the order
// reversed every round) in the same run; after the timed copy (on) the
// keeper commits it, then it is removed and (on) committed away, so
// every round starts from the same home. It reports the median of on/off
// over the rounds, and the daemon's CPU time per round (the keeper's
// whole bill).
func BenchmarkHomeKeeperCp(b *testing.B) {
	requireRoot(b)
	d := startDaemon(b, newBase(b), daemonOpts{mount: true, logLevel: "warn"})
	addUser(b, d.dial(b), "alice", aliceHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	src := filepath.Join(d.base, "cpsrc")
	for i := 0; i < homeCpFiles; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("line %06d\n", i), 128)[:1024]), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	home := d.mnt + "/home/alice"
	set := func(v string) {
		d.mustSh(b, `echo "set config/repos/home $2" > "$1/sys/config/ctl"`, d.mnt, v)
	}
	// settle waits (untimed), when the keeper is on, until the home's
	// history has the copy (copied) or has it no more.
	settle := func(on, copied bool) {
		if !on {
			return
		}
		deadline := time.Now().Add(2 * time.Minute)
		var r shResult
		for time.Now().Before(deadline) {
			r = gsvAs(aliceHost, env, "call", "repo.read", `{"repo":"alice/home","path":"cp/d19"}`)
			if copied && r.code == 0 && strings.Contains(r.stdout, "f0999.txt") || !copied && r.code != 0 && strings.Contains(r.stderr, "404") {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		b.Fatalf("the home never settled: %v", r)
	}
	pid := d.cmd.Process.Pid
	// round times one cp -r with the keeper on or off, then (on) waits
	// until the keeper committed it, removes it, and (on) waits until the
	// keeper committed that; cpu is the daemon's CPU time over the whole
	// round (on, the keeper's whole bill for the copy and its removal).
	round := func(on bool) (wall, cpu time.Duration) {
		v := "off"
		if on {
			v = "on"
		}
		set(v)
		c0 := cpuTime(pid)
		t0 := time.Now()
		r := d.shAs(aliceHost, `cp -r "$1" "$2/cp"`, src, home)
		wall = time.Since(t0)
		if r.code != 0 {
			b.Fatalf("cp -r: %v", r)
		}
		settle(on, true)
		if r := d.shAs(aliceHost, `rm -rf "$1/cp"`, home); r.code != 0 {
			b.Fatalf("rm -rf: %v", r)
		}
		settle(on, false)
		return wall, cpuTime(pid) - c0
	}
	if r := d.shAs(aliceHost, `echo keep > "$1/keep.txt"`, home); r.code != 0 {
		b.Fatalf("keep.txt: %v", r)
	}
	round(true) // warm up: the home's repository made, the caches filled
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ratios, ons, offs, onCPU, offCPU []float64
		for j := 0; j < homeCpRounds; j++ {
			var on, off, onC, offC time.Duration
			if j%2 == 0 {
				on, onC = round(true)
				off, offC = round(false)
			} else {
				off, offC = round(false)
				on, onC = round(true)
			}
			ons, offs = append(ons, on.Seconds()*1000), append(offs, off.Seconds()*1000)
			onCPU, offCPU = append(onCPU, onC.Seconds()*1000), append(offCPU, offC.Seconds()*1000)
			ratios = append(ratios, on.Seconds()/off.Seconds())
		}
		ratio := medianOf(ratios)
		b.ReportMetric(ratio, "on/off")
		b.ReportMetric(medianOf(ons), "on-ms")
		b.ReportMetric(medianOf(offs), "off-ms")
		msg := fmt.Sprintf("cp -r of %d files into home: keeper on %.0f ms, off %.0f ms (medians of %d), ratio %.3f %s (target < 1.05; ratios %s); "+
			"daemon CPU per copy and removal: on %.0f ms, off %.0f ms; load %s",
			homeCpFiles, medianOf(ons), medianOf(offs), homeCpRounds, ratio, devVerdict(ratio < 1.05), fmtRatios(ratios),
			medianOf(onCPU), medianOf(offCPU), fairLoad())
		b.Logf("SUMMARY HomeKeeperCp: %s", msg)
	}
}

// fmtRatios formats ratios to three places.
func fmtRatios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// medianOf is the median of xs (0 for none).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
