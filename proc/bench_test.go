package proc

// Benchmarks of the process runtime, each printing its figures against
// its target with MET or MISSED. Run:
//
//	go test -run XXX -bench . ./proc/
//
// Each iteration of b.N is one whole scenario on fresh kernel state (in
// b.TempDir()); setup is not timed. Profile one with e.g.
// -bench Compact -cpuprofile cpu.out -memprofile mem.out, then
// go tool pprof -top proc.test cpu.out.
//
//   - BenchmarkSend: 10,000 proc.send syscalls (through kernel.Call, as
//     root) across 100 task processes, one client goroutine per process
//     sending its 100 messages in turn. sends/s counts until every send
//     call has returned (a send commits before it returns: every message
//     is then durable). drain-s is the time from the first send until
//     every run has finished (10,000 assistant replies stored; no target);
//     ns/op is the same whole scenario. The outcome is then checked in
//     SQLite: 10,000 user and 10,000 assistant messages, 10,000 runs done,
//     an empty queue, and in every process each reply echoing the message
//     before it, in the order sent (FIFO). Diagnostics in the log: send
//     latency percentiles; how busy the store's one writer connection was
//     (sampled every 200 µs) and how often it was waited for; the CPU the
//     process used (cores), and the load average, since other work on
//     the machine changes every wall time here. Sub-benchmarks:
//     offline: the target (>= 2000 sends/s): the offline model provider
//     (the default when no provider is configured), so runs execute while
//     the sends go on.
//     parked: a diagnostic: the same, but every model call waits until all
//     the sends have returned, so the sends compete with no run.
//   - BenchmarkCompact: proc.conversation.compact keepLast=100 with a given
//     summary on a conversation of 100,000 messages (~200-byte contents,
//     inserted directly in one transaction). Target < 2 s, and peak memory
//     growth < 64 MB: the Go heap (HeapInuse, sampled with
//     runtime.ReadMemStats every 5 ms in a goroutine) and the process's
//     VmHWM (reset through /proc/self/clear_refs before the compaction,
//     so it is the peak during it) less VmRSS before. SQLite's own
//     memory (modernc's libc allocator) is outside the Go heap: VmHWM
//     sees it, HeapInuse does not.

import (
	"bufio"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// Targets.
const (
	benchTargetSendsPerSec = 2000.0 // at least
	benchTargetCompactSec  = 2.0    // below
	benchTargetMemMB       = 64.0   // peak growth, below
)

const (
	benchSendProcs    = 100
	benchSendsPerProc = 100
	benchCompactMsgs  = 100_000
	benchCompactKeep  = 100
)

// benchLoad returns the 1-minute load average: the benchmarks' wall times
// depend on what else the machine runs.
func benchLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func benchVerdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

// benchEnv is a kernel on fresh state with the process manager registered.
type benchEnv struct {
	k      *kernel.Kernel
	m      *Manager
	root   *kernel.Caller
	state  string
	closed bool
}

func newBenchEnv(b *testing.B) *benchEnv { return newBenchEnvOpts(b, Options{}) }

func newBenchEnvOpts(b *testing.B, opts Options) *benchEnv {
	b.Helper()
	state := filepath.Join(b.TempDir(), "state")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	k, err := kernel.Open(kernel.Config{StateDir: state, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := k.EnsureSetup(ctx, "root", 0); err != nil {
		k.Close()
		b.Fatal(err)
	}
	opts.Logger = log
	m, err := register(k, opts)
	if err != nil {
		k.Close()
		b.Fatal(err)
	}
	id, err := k.IdentityOf(ctx, 0)
	if err != nil {
		k.Close()
		b.Fatal(err)
	}
	e := &benchEnv{k: k, m: m, root: &kernel.Caller{Identity: id}, state: state}
	b.Cleanup(e.close)
	return e
}

func (e *benchEnv) close() {
	if !e.closed {
		e.closed = true
		e.m.space.Close() // the rooms: their goroutines, sandboxes and mounts
		e.k.Close()
	}
}

// spawn makes a task process and returns its pid.
func (e *benchEnv) spawn(b *testing.B) string {
	b.Helper()
	res, err := kernel.Do(context.Background(), e.k, e.root, abi.ProcSpawn, &abi.SpawnArgs{Profile: "task"})
	if err != nil {
		b.Fatal(err)
	}
	return res.Pid
}

// waitIdle waits until no process of e has an active run (a run's
// goroutine clears it under the process's lock after finishing and
// promoting), so that the kernel can be closed.
func (e *benchEnv) waitIdle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		e.m.run.mu.Lock()
		ps := make([]*process, 0, len(e.m.run.procs))
		for _, p := range e.m.run.procs {
			ps = append(ps, p)
		}
		e.m.run.mu.Unlock()
		busy := 0
		for _, p := range ps {
			p.mu.Lock()
			if p.run != nil {
				busy++
			}
			p.mu.Unlock()
		}
		if busy == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still running after %v", busy, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *benchEnv) count(b *testing.B, q string, args ...any) int {
	b.Helper()
	var n int
	if err := e.k.Store.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		b.Fatalf("%s: %v", q, err)
	}
	return n
}

// benchWords make realistic-looking message text.
var benchWords = strings.Fields(`the a process kernel file read write message conversation history
	summary tool call result user assistant error path directory config build test run deploy fix
	bug review change commit branch merge function return value string list map index query table
	row column page cache memory disk network socket token request response stream event signal`)

// benchText returns about n bytes of words.
func benchText(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(benchWords[rng.Intn(len(benchWords))])
	}
	return sb.String()
}

// benchMessage returns the role and JSON content of message i of a
// synthetic conversation: user, assistant, user, assistant with a tool
// call, its tool result; contents about 200 bytes.
func benchMessage(rng *rand.Rand, i int) (role, content string) {
	switch i % 5 {
	case 0, 2:
		b, _ := json.Marshal(benchText(rng, 200))
		return "user", string(b)
	case 1:
		b, _ := json.Marshal(assistantContent{Text: benchText(rng, 200)})
		return "assistant", string(b)
	case 3:
		args, _ := json.Marshal(map[string]string{"path": "/home/root/" + benchWords[rng.Intn(len(benchWords))] + ".txt"})
		b, _ := json.Marshal(assistantContent{Text: benchText(rng, 120), ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("call_%08d", i), Name: "Read", Args: args}}})
		return "assistant", string(b)
	default:
		b, _ := json.Marshal(toolResultContent{ToolCallID: fmt.Sprintf("call_%08d", i-1), ToolName: "Read", Output: benchText(rng, 140)})
		return "toolResult", string(b)
	}
}

// fillConversation inserts n messages into pid's default conversation in
// one transaction, straight into the store. It returns the content bytes.
func (e *benchEnv) fillConversation(b *testing.B, pid string, n int) int64 {
	b.Helper()
	rng := rand.New(rand.NewSource(1))
	var total int64
	t0 := time.Now().UnixMilli() - int64(n)*1000
	err := e.k.Store.Tx(context.Background(), func(tx *kernel.Tx) error {
		st, err := tx.Prepare(`INSERT INTO proc_messages(pid,cid,generation,role,content,created_at) VALUES(?,?,1,?,?,?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i := 0; i < n; i++ {
			role, content := benchMessage(rng, i)
			total += int64(len(content))
			if _, err := st.Exec(pid, "default", role, content, t0+int64(i)*1000); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// benchSelfKB returns a "Vm...: N kB" field of /proc/self/status.
func benchSelfKB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				v, _ := strconv.ParseFloat(f[0], 64)
				return v
			}
		}
	}
	return 0
}

// benchResetHWM resets VmHWM to the current RSS (Linux >= 4.0); it reports
// whether it could.
func benchResetHWM() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// benchMemSampler samples the Go heap and VmRSS in a goroutine.
type benchMemSampler struct {
	stop, done                   chan struct{}
	base                         runtime.MemStats
	baseRSSKB                    float64
	peakHeapInuse, peakSys       uint64
	peakRSSKB                    float64
	samples                      int
	end                          runtime.MemStats
	hwmReset                     bool
	hwmKB                        float64
	heapGrowMB, sysGrowMB, rssMB float64 // peak growths
	allocMB                      float64 // bytes allocated meanwhile
}

func startBenchMemSampler(every time.Duration) *benchMemSampler {
	s := &benchMemSampler{stop: make(chan struct{}), done: make(chan struct{})}
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&s.base)
	s.baseRSSKB = benchSelfKB("VmRSS")
	s.hwmReset = benchResetHWM()
	s.peakHeapInuse, s.peakSys, s.peakRSSKB = s.base.HeapInuse, s.base.Sys, s.baseRSSKB
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *benchMemSampler) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.peakHeapInuse = max(s.peakHeapInuse, ms.HeapInuse)
	s.peakSys = max(s.peakSys, ms.Sys)
	s.peakRSSKB = max(s.peakRSSKB, benchSelfKB("VmRSS"))
	s.samples++
}

func (s *benchMemSampler) finish() {
	close(s.stop)
	<-s.done
	s.sample()
	runtime.ReadMemStats(&s.end)
	s.hwmKB = benchSelfKB("VmHWM")
	const mb = 1 << 20
	s.heapGrowMB = float64(s.peakHeapInuse-s.base.HeapInuse) / mb
	s.sysGrowMB = float64(s.peakSys-s.base.Sys) / mb
	s.rssMB = (max(s.peakRSSKB, s.hwmKB) - s.baseRSSKB) / 1024
	if !s.hwmReset {
		s.rssMB = (s.peakRSSKB - s.baseRSSKB) / 1024 // VmHWM is the peak since start
	}
	s.allocMB = float64(s.end.TotalAlloc-s.base.TotalAlloc) / mb
}

func benchMedian(xs []float64) float64 {
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

func benchPercentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// benchGateProvider is the offline model behind a gate: every model call
// waits until the gate opens (BenchmarkSend/parked).
type benchGateProvider struct{ open chan struct{} }

func (g benchGateProvider) Name() string { return "offline" }

func (g benchGateProvider) Complete(ctx context.Context, req model.Request, delta func(string)) (model.Response, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
	return model.Offline{}.Complete(ctx, req, delta)
}

// benchSendResult is one run of the send scenario.
type benchSendResult struct {
	send, drain time.Duration
	lat         []time.Duration
	queued      int64
	// wBusySend, wBusyDrain: the fraction of samples (every 200µs) in
	// which the store's one writer connection was in use, during the
	// sends and from their end until every run finished; wWaits: how
	// many times a goroutine waited for it, and for how long in all.
	wBusySend, wBusyDrain float64
	wWaits                int64
	wWait                 time.Duration
	// cpuSend, cpuDrain: the process's CPU time (user+system) during
	// the sends and after them until every run finished.
	cpuSend, cpuDrain time.Duration
}

// benchCPU returns the process's CPU time so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchConnSampler samples whether db's connections are in use.
type benchConnSampler struct {
	stop, done chan struct{}
	mu         sync.Mutex
	busy, n    int
}

func startBenchConnSampler(stats func() sql.DBStats) *benchConnSampler {
	s := &benchConnSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			st := stats()
			s.mu.Lock()
			s.n++
			if st.InUse > 0 {
				s.busy++
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// take returns the busy fraction since the last take.
func (s *benchConnSampler) take() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := 0.0
	if s.n > 0 {
		f = float64(s.busy) / float64(s.n)
	}
	s.busy, s.n = 0, 0
	return f
}

func (s *benchConnSampler) finish() {
	close(s.stop)
	<-s.done
}

// benchSendScenario makes benchSendProcs task processes and sends each
// benchSendsPerProc messages with proc.send, one client goroutine per
// process, timing until every send has returned (send) and until every
// run has finished (drain); it then checks the outcome in SQLite. With
// parked, every model call waits until all the sends have returned, so
// the sends compete with no run.
func benchSendScenario(b *testing.B, parked bool) benchSendResult {
	b.Helper()
	total := benchSendProcs * benchSendsPerProc
	b.StopTimer()
	var opts Options
	gate := benchGateProvider{open: make(chan struct{})}
	if parked {
		opts.Provider = func(context.Context, uint32) (model.Provider, string, error) { return gate, "", nil }
	}
	e := newBenchEnvOpts(b, opts)
	defer e.close()
	ctx := context.Background()
	pids := make([]string, benchSendProcs)
	for i := range pids {
		pids[i] = e.spawn(b)
	}
	// The messages, made untimed: ~150 bytes, unique.
	rng := rand.New(rand.NewSource(2))
	msgs := make([][]string, benchSendProcs)
	for i := range msgs {
		msgs[i] = make([]string, benchSendsPerProc)
		for j := range msgs[i] {
			msgs[i][j] = fmt.Sprintf("message %d of %s: %s", j, pids[i], benchText(rng, 130))
		}
	}
	runtime.GC()
	var failed atomic.Value
	var queued atomic.Int64
	lat := make([][]time.Duration, benchSendProcs)
	var wg sync.WaitGroup
	w0 := e.k.Store.WriterStats()
	cs := startBenchConnSampler(e.k.Store.WriterStats)
	defer cs.finish()
	b.StartTimer()
	t0, c0 := time.Now(), benchCPU()
	for i := range pids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lat[i] = make([]time.Duration, 0, benchSendsPerProc)
			for _, msg := range msgs[i] {
				s0 := time.Now()
				res, err := kernel.Do(ctx, e.k, e.root, abi.ProcSend, &abi.SendArgs{Pid: pids[i], Message: msg})
				lat[i] = append(lat[i], time.Since(s0))
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("proc.send to %s: %w", pids[i], err))
					return
				}
				if res.Queued {
					queued.Add(1)
				}
			}
		}(i)
	}
	wg.Wait()
	sendDur := time.Since(t0)
	busySend := cs.take()
	c1 := benchCPU()
	close(gate.open)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	// Until every run has finished: poll the runs table.
	finished := 0
	for {
		e.k.Store.QueryRowContext(context.Background(), `SELECT count(*) FROM proc_runs WHERE status<>'running'`).Scan(&finished)
		if finished >= total {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			b.Fatalf("only %d of %d runs finished after 10 minutes", finished, total)
		}
		time.Sleep(2 * time.Millisecond)
	}
	drainDur := time.Since(t0)
	b.StopTimer()
	busyDrain := cs.take()
	c2 := benchCPU()
	w1 := e.k.Store.WriterStats()

	// Verify, from SQLite.
	if err := e.waitIdle(30 * time.Second); err != nil {
		b.Fatal(err)
	}
	checks := []struct {
		q    string
		want int
	}{
		{`SELECT count(*) FROM proc_messages WHERE role='user'`, total},
		{`SELECT count(*) FROM proc_messages WHERE role='assistant'`, total},
		{`SELECT count(*) FROM proc_messages`, 2 * total},
		{`SELECT count(*) FROM proc_runs`, total},
		{`SELECT count(*) FROM proc_runs WHERE status='done'`, total},
		{`SELECT count(*) FROM proc_queue`, 0},
		{`SELECT count(*) FROM proc_processes WHERE state<>'idle' AND profile='task'`, 0},
	}
	for _, c := range checks {
		if got := e.count(b, c.q); got != c.want {
			b.Fatalf("%s = %d, want %d", c.q, got, c.want)
		}
	}
	for i, pid := range pids {
		rows, err := e.k.Store.QueryContext(context.Background(), `SELECT role,content FROM proc_messages WHERE pid=? AND cid='default' ORDER BY id`, pid)
		if err != nil {
			b.Fatal(err)
		}
		j := 0
		for rows.Next() {
			var role, content string
			rows.Scan(&role, &content)
			want := msgs[i][j/2]
			switch {
			case j%2 == 0 && (role != "user" || content != string(jsonString(want))):
				b.Fatalf("%s message %d: %s %s, want the user message %q", pid, j, role, content, want)
			case j%2 == 1:
				var ac assistantContent
				json.Unmarshal([]byte(content), &ac)
				if role != "assistant" || ac.Text != model.OfflineNotice+" You said: "+want {
					b.Fatalf("%s message %d: %s %s, want the offline reply to %q", pid, j, role, content, want)
				}
			}
			j++
		}
		rows.Close()
		if j != 2*benchSendsPerProc {
			b.Fatalf("%s has %d messages, want %d", pid, j, 2*benchSendsPerProc)
		}
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return benchSendResult{send: sendDur, drain: drainDur, lat: all, queued: queued.Load(),
		wBusySend: busySend, wBusyDrain: busyDrain, wWaits: w1.WaitCount - w0.WaitCount, wWait: w1.WaitDuration - w0.WaitDuration,
		cpuSend: c1 - c0, cpuDrain: c2 - c1}
}

// BenchmarkSend: see the top of the file. Sub-benchmarks: offline, the
// target (runs execute while the sends go on); parked, a diagnostic: the
// same sends while every run waits in its model call, so the sends compete
// with no run (the runs then all finish after the gate opens).
func BenchmarkSend(b *testing.B) {
	for _, v := range []struct {
		name   string
		parked bool
	}{{"offline", false}, {"parked", true}} {
		b.Run(v.name, func(b *testing.B) {
			total := benchSendProcs * benchSendsPerProc
			var sendRates, drainSecs []float64
			var last string
			for it := 0; it < b.N; it++ {
				r := benchSendScenario(b, v.parked)
				sendRates = append(sendRates, float64(total)/r.send.Seconds())
				drainSecs = append(drainSecs, r.drain.Seconds())
				last = fmt.Sprintf("send latency p50 %v p99 %v max %v; %d of %d sends queued behind a run; writer connection busy %.0f%% during the sends, %.0f%% after, waited for %d times, %v in all; CPU %.2f cores during the sends, %.2f after (GOMAXPROCS %d)",
					benchPercentile(r.lat, 0.5).Round(time.Microsecond), benchPercentile(r.lat, 0.99).Round(time.Microsecond),
					benchPercentile(r.lat, 1).Round(time.Microsecond), r.queued, total, 100*r.wBusySend, 100*r.wBusyDrain, r.wWaits, r.wWait.Round(time.Millisecond),
					r.cpuSend.Seconds()/r.send.Seconds(), r.cpuDrain.Seconds()/(r.drain-r.send).Seconds(), runtime.GOMAXPROCS(0))
			}
			rate, drain := benchMedian(sendRates), benchMedian(drainSecs)
			b.ReportMetric(rate, "sends/s")
			b.ReportMetric(drain, "drain-s")
			b.ReportMetric(float64(total)/drain, "runs/s")
			b.Logf("N=%d: %d sends over %d processes (%d clients): sends/s %s, all runs finished after s %s; last: %s",
				b.N, total, benchSendProcs, benchSendProcs, benchFloats(sendRates, 0), benchFloats(drainSecs, 2), last)
			if v.parked {
				b.Logf("SUMMARY Send/parked (diagnostic: every run waits in its model call until the sends are done): %.0f sends/s (vs target %.0f) | every run finished %.2f s after the first send | %s | load average %s",
					rate, benchTargetSendsPerSec, drain, last, benchLoad())
				return
			}
			b.Logf("SUMMARY Send/offline: %.0f sends/s until every send returned (durable)  target >= %.0f: %s | every run finished %.2f s after the first send (%.0f runs/s; no target) | %s | load average %s",
				rate, benchTargetSendsPerSec, benchVerdict(rate >= benchTargetSendsPerSec), drain, float64(total)/drain, last, benchLoad())
		})
	}
}

func benchFloats(xs []float64, prec int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', prec, 64)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func BenchmarkCompact(b *testing.B) {
	var secs, heap, rss, sys, alloc []float64
	var contentMB float64
	var archiveMB float64
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		e := newBenchEnv(b)
		ctx := context.Background()
		pid := e.spawn(b)
		contentMB = float64(e.fillConversation(b, pid, benchCompactMsgs)) / (1 << 20)
		summary := "The user and the assistant worked through the build; decisions: keep the store; open tasks: none."
		keep := benchCompactKeep
		ms := startBenchMemSampler(5 * time.Millisecond)
		b.StartTimer()
		t0 := time.Now()
		res, err := kernel.Do(ctx, e.k, e.root, abi.ProcConversationCompact,
			&abi.CompactArgs{Pid: pid, ConversationID: "default", Summary: &summary, KeepLast: &keep})
		d := time.Since(t0)
		b.StopTimer()
		ms.finish()
		if err != nil {
			b.Fatal(err)
		}
		// Verify: the prefix went to the archive, the rest stayed.
		n := res.ArchivedMessages
		left := e.count(b, `SELECT count(*) FROM proc_messages WHERE pid=? AND cid='default'`, pid)
		if n < benchCompactMsgs-benchCompactKeep-5 || int(n)+left != benchCompactMsgs+1 {
			b.Fatalf("archived %d messages, %d left (with the summary), want about %d and %d", n, left, benchCompactMsgs-benchCompactKeep, benchCompactKeep+1)
		}
		apath := filepath.Join(e.state, "fs", res.ArchivedTo)
		st, err := os.Stat(apath)
		if err != nil {
			b.Fatal(err)
		}
		archiveMB = float64(st.Size()) / (1 << 20)
		if lines, err := benchGzLines(apath); err != nil || lines != n {
			b.Fatalf("archive %s: %d lines (%v), want %d", apath, lines, err, n)
		}
		e.close()
		secs = append(secs, d.Seconds())
		heap = append(heap, ms.heapGrowMB)
		rss = append(rss, ms.rssMB)
		sys = append(sys, ms.sysGrowMB)
		alloc = append(alloc, ms.allocMB)
		if !ms.hwmReset {
			b.Logf("could not reset VmHWM (/proc/self/clear_refs): the RSS figure is the sampled peak only")
		}
	}
	s, h, r, y, a := benchMedian(secs), benchMedian(heap), benchMedian(rss), benchMedian(sys), benchMedian(alloc)
	b.ReportMetric(s, "compact-s")
	b.ReportMetric(h, "heap-grow-MB")
	b.ReportMetric(r, "rss-grow-MB")
	b.ReportMetric(y, "sys-grow-MB")
	b.ReportMetric(a, "alloc-MB")
	b.Logf("N=%d: %d messages (%.1f MB of content), keep %d: compact s %s; peak growth: HeapInuse MB %s, Go Sys MB %s, RSS (VmHWM) MB %s; allocated MB %s; archive %.1f MB gzipped",
		b.N, benchCompactMsgs, contentMB, benchCompactKeep, benchFloats(secs, 3), benchFloats(heap, 1), benchFloats(sys, 1), benchFloats(rss, 1), benchFloats(alloc, 0), archiveMB)
	mem := max(h, r)
	b.Logf("SUMMARY Compact: %.3f s for %d messages  target < %.0f s: %s | peak growth HeapInuse %.1f MB, RSS %.1f MB (Go Sys %.1f MB; %.0f MB allocated)  target < %.0f MB: %s | load average %s",
		s, benchCompactMsgs, benchTargetCompactSec, benchVerdict(s < benchTargetCompactSec), h, r, y, a, benchTargetMemMB, benchVerdict(mem < benchTargetMemMB), benchLoad())
}

// benchGzLines counts the lines of a gzipped file.
func benchGzLines(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return 0, err
	}
	var n int64
	buf := make([]byte, 64<<10)
	for {
		m, err := zr.Read(buf)
		n += int64(strings.Count(string(buf[:m]), "\n"))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
