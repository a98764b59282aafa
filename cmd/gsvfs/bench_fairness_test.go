package main_test

// BenchmarkFairness: issue 20's target for abuse. While one user (alice)
// runs each abuse below against a real daemon (gsvfs mount, the binaries
// TestMain built), another user's (bob's) `cat /gsv/etc/passwd` p99 stays
// at most 3x its baseline measured in the same run, and the daemon's RSS
// stays under 512 MB.
//
//	go test -run '^$' -bench Fairness ./cmd/gsvfs/
//
// GSV_FAIRNESS=busy,codemode runs only the abuses named (all by default).
//
// Bob's reads are made by a probe: a copy of the test binary run as bob's
// host uid (probeEnv) that does what cat does (open, read to the end,
// close) over the FUSE mount, 2 ms apart, for each measuring window, and
// reports the latencies. A process start per read would measure the
// machine's fork and exec, not the daemon.
//
// Each abuse is measured in rounds (GSV_FAIRNESS_ROUNDS, default 5): in
// each, bob's reads are timed for fairWindow with the daemon quiet (the
// baseline), then alice's abuse is started, given fairRamp to build up,
// bob's reads are timed for fairWindow again, and the abuse is stopped.
// A round's baseline is the window right before its abuse window (after
// the last round's abuse has had fairSettle to settle), so the machine's
// other work (other tests, builds) weighs on both alike, and the verdict
// takes the median over the rounds of each round's ratio: a
// p99 is the tenth worst of about a thousand reads, and one round's can
// move with the machine more than with the daemon. The abuses:
//
//   - busy: alice's sandboxes spin (8 sessions, each exec a busy loop).
//   - sched: 1,000 `@every 1s` schedules in alice's crontab (as many as
//     the daemon accepts).
//   - watch: five pairs of alice's processes, each always watching the
//     other's finished runs, kicked once each.
//   - codemode: 8 blocks at once, again and again, each returning 44 MB.
//   - device: a rogue device (alice's node token) answering each routed
//     call with a 1 GB frame, asked again and again.
//
// The repeated calls of codemode and device are made by one process of
// alice's over 9P connections (callsEnv): a process start per call
// would load the machine by itself, whatever the daemon does.
//   - fifo: 400 opens of a FIFO alice made in her home.
//   - hello: 5,000 TCP connections that say `GSVDEVICE 1` and stall.
//
// A SUMMARY line per abuse gives bob's p99 (the median over the rounds)
// and its ratio to the baseline's, each round's ratio, the ratio of the
// p99 of every abuse window's reads pooled to the baselines' pooled, the
// p50s, the daemon's peak RSS and its own CPU, the load average at each
// round, and the verdict.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/vfs"
)

// probeEnv makes the test binary a helper that times reads of one file:
// for each stdin line "measure <ms>" it reads the file (as cat does) every
// 2 ms for that long, then prints "<n> <errors> <latencies in µs...>".
const probeEnv = "GSV_E2E_PROBE"

const (
	fairWindow   = 3 * time.Second
	fairRamp     = time.Second
	fairSettle   = 2 * time.Second
	fairMaxRatio = 3.0
	fairMaxRSSMB = 512.0
)

// callsEnv makes the test binary a helper that makes one syscall again
// and again over n 9P connections at once, as its host uid, until its
// stdin closes: "addr<TAB>n<TAB>call<TAB>args-json". It prints "ready"
// once connected. An abuser's own CPU (a process start per call) would
// load the machine whatever the daemon does; this one costs little.
const callsEnv = "GSV_E2E_CALLS"

// callsLoop is the helper of callsEnv.
func callsLoop(spec string) int {
	f := strings.SplitN(spec, "\t", 4)
	if len(f) != 4 {
		fmt.Println("error: bad spec", spec)
		return 2
	}
	n, _ := strconv.Atoi(f[1])
	var args any
	if err := json.Unmarshal([]byte(f[3]), &args); err != nil {
		fmt.Println("error:", err)
		return 2
	}
	var stop atomic.Bool
	var made, refused atomic.Int64 // the calls answered ok, and the others
	var wg sync.WaitGroup
	for range n {
		fsys, err := ninep.Mount(f[0], "", nil)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				out, err := callRaw9p(fsys, f[2], args)
				var fr callFrame
				if err == nil && json.Unmarshal([]byte(strings.TrimSpace(out)), &fr) == nil && fr.OK {
					made.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	fmt.Println("ready")
	// How many calls it has made (answered ok, and not), every 100 ms:
	// the bench reads the last line before it stops the helper.
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Println("made", made.Load(), refused.Load())
			}
		}
	}()
	io.Copy(io.Discard, os.Stdin)
	stop.Store(true)
	close(done)
	wg.Wait()
	return 0
}

// probeLoop is the helper of probeEnv.
func probeLoop(path string) int {
	sc := bufio.NewScanner(os.Stdin)
	buf := make([]byte, 64<<10)
	for sc.Scan() {
		var ms int
		if _, err := fmt.Sscanf(sc.Text(), "measure %d", &ms); err != nil {
			fmt.Println("error: bad command", sc.Text())
			return 2
		}
		var lat []int64
		errs := 0
		end := time.Now().Add(time.Duration(ms) * time.Millisecond)
		for time.Now().Before(end) {
			t0 := time.Now()
			f, err := os.Open(path)
			if err == nil {
				for {
					n, rerr := f.Read(buf)
					if n == 0 || rerr != nil {
						if rerr != io.EOF {
							err = rerr
						}
						break
					}
				}
				f.Close()
			}
			if err != nil {
				errs++
			}
			lat = append(lat, time.Since(t0).Microseconds())
			time.Sleep(2 * time.Millisecond)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d %d", len(lat), errs)
		for _, l := range lat {
			fmt.Fprintf(&b, " %d", l)
		}
		fmt.Println(b.String())
	}
	return 0
}

// probe drives a probeEnv helper.
type probe struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// fairStats is one window of bob's reads.
type fairStats struct {
	n, errs  int
	p50, p99 time.Duration
	lat      []int // µs, sorted
}

// pct is the p-th percentile of the sorted lat (0 when empty).
func pct(lat []int, p int) int {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func startProbe(b *testing.B, uid int, path string) *probe {
	u := strconv.Itoa(uid)
	cmd := exec.Command("setpriv", "--reuid", u, "--regid", u, "--clear-groups", helperBinary(b))
	cmd.Dir = "/"
	cmd.Env = []string{probeEnv + "=" + path, raceEnv}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &probe{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 1<<20), 16<<20)
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	return p
}

func (p *probe) measure(b *testing.B, d time.Duration) fairStats {
	fmt.Fprintf(p.in, "measure %d\n", d.Milliseconds())
	if !p.out.Scan() {
		b.Fatalf("probe: %v", p.out.Err())
	}
	f := strings.Fields(p.out.Text())
	if len(f) < 2 {
		b.Fatalf("probe: %q", p.out.Text())
	}
	var s fairStats
	s.n, _ = strconv.Atoi(f[0])
	s.errs, _ = strconv.Atoi(f[1])
	var lat []int
	for _, x := range f[2:] {
		v, _ := strconv.Atoi(x)
		lat = append(lat, v)
	}
	if len(lat) == 0 {
		return s
	}
	sort.Ints(lat)
	s.lat = lat
	s.p50 = time.Duration(pct(lat, 50)) * time.Microsecond
	s.p99 = time.Duration(pct(lat, 99)) * time.Microsecond
	return s
}

// rssPeak samples a process's VmRSS every 50 ms and keeps the peak since
// the last reset.
type rssPeak struct {
	peak atomic.Int64 // kB
	stop chan struct{}
	done chan struct{}
}

func watchRSS(pid int) *rssPeak {
	r := &rssPeak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kb, err := rssKB(pid); err == nil && kb > r.peak.Load() {
				r.peak.Store(int64(kb))
			}
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// rssKB is a process's VmRSS in kB.
func rssKB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// cpuTime is the CPU time a process has used itself (utime+stime of
// /proc/<pid>/stat, in clock ticks of 10 ms), not its children's.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64) // field 14 of stat(5)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// fairLoad is the 1-minute load average: the machine's other work moves
// the ratios.
func fairLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func (r *rssPeak) reset() float64 { return float64(r.peak.Swap(0)) / 1024 }
func (r *rssPeak) close()         { close(r.stop); <-r.done }

// fairEnv is what an abuse needs.
type fairEnv struct {
	b         *testing.B
	d         *daemon
	aliceUID  uint32
	aliceEnv  []string // GSV_ADDR for alice's gsv
	tcpAddr   string   // host:port of the daemon's TCP listener
	saidNow   []string // what the abuses' stops said of this round (said)
	bgMu      sync.Mutex
	bg        []*exec.Cmd
	cancelBgs []context.CancelFunc
}

// said records what an abuse's stop says of its round (how much of it
// the daemon served), for the abuse's SUMMARY line.
func (e *fairEnv) said(s string) { e.saidNow = append(e.saidNow, s) }

// gsv runs alice's gsv and returns its stdout; a failure fails b.
func (e *fairEnv) gsv(args ...string) string {
	e.b.Helper()
	r := gsvAs(aliceHost, e.aliceEnv, args...)
	if r.err != nil || r.code != 0 {
		e.b.Fatalf("alice: gsv %q: %v", args, r)
	}
	return strings.TrimSpace(r.stdout)
}

// background starts a command as alice that runs until stopBackground.
func (e *fairEnv) background(name string, args ...string) {
	u := strconv.Itoa(aliceHost)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "setpriv", append([]string{"--reuid", u, "--regid", u, "--clear-groups", name}, args...)...)
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "HOME=/", raceEnv}, e.aliceEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		cancel()
		e.b.Fatalf("alice: %s: %v", name, err)
	}
	e.bgMu.Lock()
	e.bg = append(e.bg, cmd)
	e.cancelBgs = append(e.cancelBgs, cancel)
	e.bgMu.Unlock()
}

// calls starts a callsEnv helper as alice making call with args over n
// connections until stopBackground. It returns how many calls a second
// the helper has made since it started (as it last said: within 100 ms),
// as "answered ok/not".
func (e *fairEnv) calls(n int, call, args string) (rate func() string) {
	u := strconv.Itoa(aliceHost)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "setpriv", "--reuid", u, "--regid", u, "--clear-groups", helperBinary(e.b))
	cmd.Dir = "/"
	cmd.Env = []string{callsEnv + "=unix!" + e.d.sock + "\t" + strconv.Itoa(n) + "\t" + call + "\t" + args, raceEnv}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		e.b.Fatalf("alice: calls: %v", err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		e.b.Fatalf("alice: calls %s: %q", call, sc.Text())
	}
	var made, refused atomic.Int64
	t0 := time.Now()
	go func() {
		for sc.Scan() {
			var n, r int64
			if _, err := fmt.Sscanf(sc.Text(), "made %d %d", &n, &r); err == nil {
				made.Store(n)
				refused.Store(r)
			}
		}
	}()
	// Closing stdin ends it; stopBackground's SIGINT does too.
	go func() { <-ctx.Done(); in.Close() }()
	e.bgMu.Lock()
	e.bg = append(e.bg, cmd)
	e.cancelBgs = append(e.cancelBgs, cancel)
	e.bgMu.Unlock()
	return func() string {
		d := time.Since(t0).Seconds()
		return fmt.Sprintf("%.1f/%.1f", float64(made.Load())/d, float64(refused.Load())/d)
	}
}

// stopBackground ends every background command (SIGINT first, as Ctrl-C
// would, then SIGKILL) and waits for them.
func (e *fairEnv) stopBackground() {
	e.bgMu.Lock()
	bg, cancels := e.bg, e.cancelBgs
	e.bg, e.cancelBgs = nil, nil
	e.bgMu.Unlock()
	for _, c := range bg {
		syscall.Kill(-c.Process.Pid, syscall.SIGINT)
	}
	done := make(chan struct{})
	go func() {
		for _, c := range bg {
			c.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		for _, cancel := range cancels {
			cancel()
		}
		<-done
	}
	for _, cancel := range cancels {
		cancel()
	}
}

// abuse is one of alice's attacks: start returns what ends it, and a note
// on how much of it the daemon accepted.
type abuse struct {
	name  string
	start func(e *fairEnv) (stop func(), note string)
}

var abuses = []abuse{
	{"busy", abuseBusy},
	{"sched", abuseSched},
	{"watch", abuseWatch},
	{"codemode", abuseCodeMode},
	{"device", abuseDevice},
	{"fifo", abuseFIFO},
	{"hello", abuseHello},
}

func BenchmarkFairness(b *testing.B) {
	requireRoot(b)
	port := freePort(b)
	d := startDaemon(b, newBase(b), daemonOpts{mount: true, listen: fmt.Sprintf("tcp!127.0.0.1!%d", port)})
	fsys := d.dial(b)
	aliceUID := addUser(b, fsys, "alice", aliceHost)
	addUser(b, fsys, "bob", bobHost)
	e := &fairEnv{b: b, d: d, aliceUID: aliceUID, aliceEnv: []string{"GSV_ADDR=unix!" + d.sock},
		tcpAddr: fmt.Sprintf("127.0.0.1:%d", port)}
	b.Cleanup(e.stopBackground)
	pr := startProbe(b, bobHost, d.p("etc/passwd"))
	rss := watchRSS(d.cmd.Process.Pid)
	defer rss.close()
	rounds := fairRounds()

	pr.measure(b, 500*time.Millisecond) // warm up
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		allOK := true
		for _, a := range abuses {
			if !fairWanted(a.name) {
				continue
			}
			r := fairAbuse(e, pr, rss, a, rounds)
			ok := r.ratio() <= fairMaxRatio && r.rss < fairMaxRSSMB && r.errs == 0 && d.running()
			allOK = allOK && ok
			b.ReportMetric(r.ratio(), a.name+"-p99-ratio")
			b.ReportMetric(r.rss, a.name+"-rss-MB")
			b.ReportMetric(r.cpu(), a.name+"-daemon-cpu-%")
			note := r.note
			if len(r.said) > 0 {
				note += ": " + strings.Join(r.said, " ")
			}
			b.Logf("SUMMARY Fairness %s (%s): bob p99 %v = %.2fx baseline %v (median of %d rounds; the rounds %s; pooled %.2fx; target <= %.0fx), p50 %v / %v, %d/%d reads failed; daemon RSS peak %.0f MB (target < %.0f), CPU %.0f%% of a core (baseline %.0f%%); load average %s %s",
				a.name, note, r.p99(), r.ratio(), r.baseP99(), rounds, r.roundRatios(), r.pooled(), fairMaxRatio,
				r.p50(), r.baseP50(), r.errs, r.reads, r.rss, fairMaxRSSMB, r.cpu(), r.baseCPU(), r.loads, devVerdict(ok))
		}
		b.Logf("SUMMARY Fairness: every abuse within target: %s", devVerdict(allOK))
	}
}

// fairRounds is how many rounds each abuse is measured in
// (GSV_FAIRNESS_ROUNDS, default 5).
func fairRounds() int {
	if n, err := strconv.Atoi(os.Getenv("GSV_FAIRNESS_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 5
}

// fairRound is one round of an abuse: bob's reads of the baseline window
// and of the abuse's, one right after the other.
type fairRound struct {
	base, abuse       fairStats
	baseCPU, abuseCPU time.Duration
}

// baseP99 is the round's baseline p99: its window right before its abuse
// window. (Not the window after: what an abuse leaves behind as it ends
// would raise that one and flatter the ratio.)
func (x fairRound) baseP99() time.Duration { return x.base.p99 }

// fairResult is an abuse over its rounds.
type fairResult struct {
	note   string
	rounds []fairRound
	rss    float64 // MB, the peak over every abuse window
	errs   int     // failed reads in the abuse windows
	reads  int
	loads  string   // the load average at each round
	said   []string // what the abuse's stop said of each round
}

// fairMedian is the median of xs (the mean of the middle two of an even
// count).
func fairMedian(xs []float64) float64 {
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

func (r *fairResult) each(f func(fairRound) float64) []float64 {
	var xs []float64
	for _, x := range r.rounds {
		xs = append(xs, f(x))
	}
	return xs
}

func (r *fairResult) dur(f func(fairRound) time.Duration) time.Duration {
	return time.Duration(fairMedian(r.each(func(x fairRound) float64 { return float64(f(x)) }))).Round(10 * time.Microsecond)
}

// ratio is the median over the rounds of each round's p99 over its own
// baseline's: the verdict's figure.
func (r *fairResult) ratio() float64 {
	return fairMedian(r.each(func(x fairRound) float64 { return float64(x.abuse.p99) / float64(x.baseP99()) }))
}

func (r *fairResult) roundRatios() string {
	var s []string
	for _, x := range r.each(func(x fairRound) float64 { return float64(x.abuse.p99) / float64(x.baseP99()) }) {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, " ")
}

func (r *fairResult) p99() time.Duration {
	return r.dur(func(x fairRound) time.Duration { return x.abuse.p99 })
}
func (r *fairResult) baseP99() time.Duration {
	return r.dur(func(x fairRound) time.Duration { return x.base.p99 })
}
func (r *fairResult) p50() time.Duration {
	return r.dur(func(x fairRound) time.Duration { return x.abuse.p50 })
}
func (r *fairResult) baseP50() time.Duration {
	return r.dur(func(x fairRound) time.Duration { return x.base.p50 })
}

// cpu and baseCPU are the daemon's own CPU (the median over the rounds)
// in % of a core.
func (r *fairResult) cpu() float64 {
	return fairMedian(r.each(func(x fairRound) float64 { return 100 * x.abuseCPU.Seconds() / fairWindow.Seconds() }))
}
func (r *fairResult) baseCPU() float64 {
	return fairMedian(r.each(func(x fairRound) float64 { return 100 * x.baseCPU.Seconds() / fairWindow.Seconds() }))
}

// pooled is the p99 of every abuse window's reads over the p99 of every
// baseline window's: a second view of the same reads.
func (r *fairResult) pooled() float64 {
	var a, b []int
	for _, x := range r.rounds {
		a = append(a, x.abuse.lat...)
		b = append(b, x.base.lat...)
	}
	return float64(pct(a, 99)) / float64(max(1, pct(b, 99)))
}

// fairAbuse measures abuse a in rounds: in each, bob's reads with the
// daemon quiet (the baseline), then with alice's abuse started, given
// fairRamp to build up, measured, and stopped, and fairSettle given to
// settle. Each round's baseline is the window right before its abuse
// window, so the machine's other work weighs on both alike; the verdict
// takes the median of the rounds.
func fairAbuse(e *fairEnv, pr *probe, rss *rssPeak, a abuse, rounds int) *fairResult {
	b, d := e.b, e.d
	pid := d.cmd.Process.Pid
	res := &fairResult{}
	var loads []string
	for range rounds {
		if !d.running() {
			b.Fatalf("the daemon died before %s:\n%s", a.name, d.stderr.String())
		}
		var x fairRound
		c0 := cpuTime(pid)
		x.base = pr.measure(b, fairWindow)
		x.baseCPU = cpuTime(pid) - c0
		if x.base.errs > 0 || x.base.n == 0 {
			b.Fatalf("%s: baseline: %d of %d reads failed", a.name, x.base.errs, x.base.n)
		}
		rss.reset()
		stop, note := a.start(e)
		res.note = note
		time.Sleep(fairRamp)
		c0 = cpuTime(pid)
		x.abuse = pr.measure(b, fairWindow)
		x.abuseCPU = cpuTime(pid) - c0
		stop()
		e.stopBackground()
		res.said = append(res.said, e.saidNow...)
		e.saidNow = nil
		res.rss = max(res.rss, rss.reset())
		res.errs += x.abuse.errs
		res.reads += x.abuse.n
		res.rounds = append(res.rounds, x)
		loads = append(loads, fairLoad())
		// Let the daemon settle before the next baseline.
		time.Sleep(fairSettle)
	}
	res.loads = strings.Join(loads, " ")
	return res
}

// fairWanted says whether the abuse name is to run: GSV_FAIRNESS is
// unset, or names it in its comma-separated list.
func fairWanted(name string) bool {
	only := os.Getenv("GSV_FAIRNESS")
	return only == "" || slices.Contains(strings.Split(only, ","), name)
}

// abuseBusy: 8 sessions, each running a busy loop.
func abuseBusy(e *fairEnv) (func(), string) {
	var sids []string
	for i := 0; i < 8; i++ {
		sids = append(sids, e.gsv("session", "open", "--network", "none"))
	}
	for _, sid := range sids {
		e.background(gsvBin, "exec", sid, "--", "sh", "-c", "while :; do :; done")
	}
	return func() {
		e.stopBackground()
		for _, sid := range sids {
			gsvAs(aliceHost, e.aliceEnv, "session", "close", sid)
		}
	}, "8 sandboxes spinning"
}

// crontabFor is n `@every 1s` schedules of events to alice's init.
func crontabFor(uid uint32, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "@every 1s event init:%d tick %d # name=storm%d\n", uid, i, i)
	}
	return b.String()
}

// abuseSched: 1,000 `@every 1s` schedules, or as many as alice may have.
func abuseSched(e *fairEnv) (func(), string) {
	tab := e.d.p("var/spool/cron/alice")
	n := 1000
	for ; n > 0; n /= 2 {
		r := e.d.shAs(aliceHost, `printf '%s' "$1" > "$2"`, crontabFor(e.aliceUID, n), tab)
		if r.code == 0 {
			break
		}
	}
	return func() {
		e.d.shAs(aliceHost, `: > "$1"`, tab)
	}, fmt.Sprintf("%d of 1000 schedules accepted", n)
}

// abuseWatch: five pairs of processes, each always watching the other's
// finished runs, each kicked once.
func abuseWatch(e *fairEnv) (func(), string) {
	var pids []string
	for i := 0; i < 10; i++ {
		pids = append(pids, e.gsv("spawn", "task"))
	}
	armed := 0
	for i := 0; i < 10; i += 2 {
		a, p := pids[i], pids[i+1]
		for _, w := range [][2]string{{a, p}, {p, a}} {
			if r := gsvAs(aliceHost, e.aliceEnv, "watch", "--from", w[0], "proc.run.finished", w[1], "--always"); r.code == 0 {
				armed++
			}
		}
	}
	for i := 0; i < 10; i += 2 {
		gsvAs(aliceHost, e.aliceEnv, "send", "--pid", pids[i], "ping")
	}
	return func() {
		for _, p := range pids {
			gsvAs(aliceHost, e.aliceEnv, "kill", p)
		}
	}, fmt.Sprintf("%d of 10 always-watches armed", armed)
}

// abuseCodeMode: 8 loops of blocks returning 44 MB each.
func abuseCodeMode(e *fairEnv) (func(), string) {
	rate := e.calls(8, "codemode.run", `{"code":"return \"x\".repeat(44e6)"}`)
	return func() { e.said(rate()) }, "8 blocks at once returning 44 MB; blocks a second in each round, answered/refused"
}

// abuseFIFO: a FIFO in alice's home, opened 400 times through the mount.
func abuseFIFO(e *fairEnv) (func(), string) {
	sid := e.gsv("session", "open", "--mount", "~:/work:rw", "--network", "none")
	r := gsvAs(aliceHost, e.aliceEnv, "exec", sid, "--", "mkfifo", "/work/fifo")
	gsvAs(aliceHost, e.aliceEnv, "session", "close", sid)
	if r.code != 0 {
		return func() {}, "mkfifo refused: " + strings.TrimSpace(r.stderr)
	}
	fifo := e.d.p("home/alice/fifo")
	e.background("sh", "-c", `i=0; while [ $i -lt 400 ]; do cat "$0" >/dev/null 2>&1 & i=$((i+1)); done; wait`, fifo)
	return func() {
		e.stopBackground()
		os.Remove(filepath.Join(e.d.state, "fs", "home", "alice", "fifo"))
	}, "400 opens"
}

// abuseHello: 5,000 connections that say GSVDEVICE 1 and stall.
func abuseHello(e *fairEnv) (func(), string) {
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	if lim.Cur < 20000 {
		lim.Cur = min(20000, lim.Max)
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	var conns []net.Conn
	for i := 0; i < 5000; i++ {
		c, err := net.DialTimeout("tcp", e.tcpAddr, time.Second)
		if err != nil {
			break
		}
		c.Write([]byte("GSVDEVICE 1\n"))
		conns = append(conns, c)
	}
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}, fmt.Sprintf("%d connections", len(conns))
}

// abuseDevice: a rogue device of alice's answers every routed call with a
// 1 GB frame; alice asks it again and again.
func abuseDevice(e *fairEnv) (func(), string) {
	var tok struct {
		Token struct {
			Token string `json:"token"`
		} `json:"token"`
	}
	out := e.gsv("token", "create", "--kind", "node", "--device", "rogue", "--json")
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Token.Token == "" {
		e.b.Fatalf("node token: %q (%v)", out, err)
	}
	c, err := net.DialTimeout("tcp", e.tcpAddr, 5*time.Second)
	if err != nil {
		e.b.Fatalf("rogue device: %v", err)
	}
	hello, _ := json.Marshal(abi.DeviceHello{ID: "rogue", Token: tok.Token.Token, Platform: "linux", Version: "rogue",
		Implements: []string{"fs.read"}})
	fmt.Fprintf(c, "GSVDEVICE 1\n%s\n", hello)
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(line, `"ok":true`) {
		c.Close()
		return func() {}, fmt.Sprintf("refused: %q %v", strings.TrimSpace(line), err)
	}
	srv := &ninep.Server{Root: rogueTree()}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeConn(ctx, &bufferedConn{Conn: c, r: rd}, vfs.Peer{Transport: "tcp", HostUID: -1, HostGID: -1})
	}()
	rate := e.calls(4, "fs.read", `{"path":"/x","target":"rogue"}`)
	return func() {
		e.said(rate())
		e.stopBackground()
		cancel()
		c.Close()
		<-served
	}, "1 GB answers; calls a second in each round, answered/refused"
}

// bufferedConn is a net.Conn whose reads come through r first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// rogueTree is a device's tree whose call file answers every request with
// a response frame of 1 GB, made as it is read.
func rogueTree() vfs.Dir {
	return vfs.NewDir(rogueMeta{dir: true}, vfs.DirEntry{Name: "call", Node: rogueCall{}}, vfs.DirEntry{Name: "fs", Node: vfs.NewDir(rogueMeta{dir: true})})
}

type rogueMeta struct{ dir bool }

func (m rogueMeta) Attr(ctx context.Context, cred vfs.Cred) (vfs.Attr, error) {
	return vfs.Attr{Ino: vfs.PathIno(fmt.Sprint(m.dir)), Mode: vfs.ModeOf(m.dir, 0o777)}, nil
}
func (m rogueMeta) Access(ctx context.Context, cred vfs.Cred, want vfs.Want) error { return nil }

type rogueCall struct{ rogueMeta }

func (rogueCall) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	return &rogueHandle{}, nil
}

// rogueHandle answers the request written to it with
// {"type":"res","id":ID,"ok":true,"data":{"content":"xxx…"}} of 1 GB.
type rogueHandle struct {
	mu   sync.Mutex
	head string
	size int64
}

const (
	rogueBody = 1 << 30
	rogueTail = `"}}` + "\n"
)

func (h *rogueHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	var req struct {
		ID string `json:"id"`
	}
	json.Unmarshal(p, &req)
	idj, _ := json.Marshal(req.ID)
	h.mu.Lock()
	h.head = `{"type":"res","id":` + string(idj) + `,"ok":true,"data":{"content":"`
	h.size = int64(len(h.head)) + rogueBody + 4
	h.mu.Unlock()
	return len(p), nil
}

func (h *rogueHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	head, size := h.head, h.size
	h.mu.Unlock()
	if head == "" || off >= size {
		return 0, nil
	}
	n := 0
	for n < len(p) && off < size {
		switch {
		case off < int64(len(head)):
			p[n] = head[off]
		case off < size-4:
			p[n] = 'x'
		default:
			p[n] = rogueTail[off-(size-4)]
		}
		n++
		off++
	}
	return n, nil
}

func (h *rogueHandle) Close(ctx context.Context) error { return nil }
