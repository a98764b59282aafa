package main

// BenchmarkHistoryCat: the process runtime's history file read through the
// FUSE mount. It is declared in this file, which sorts before
// bench_test.go, so that it runs before BenchmarkSummary (benchmarks run
// in file order, then declaration order); its summary lines go through
// note. With -bench History alone, BenchmarkSummary does not run: use
// -bench 'History|Summary', or read the "SUMMARY" lines the benchmark
// logs itself.
//
//   - BenchmarkHistoryCat: `cat /proc/<pid>/conversations/default/history
//     > /dev/null` of a conversation of 100,000 messages (~200-byte
//     contents; user, assistant, assistant with a tool call, tool result),
//     inserted directly into proc_messages in one transaction for a task
//     process made with proc.spawn, vs `cat` of a tmpfs file holding the
//     same bytes through go-fuse's loopback file system (which uses FUSE
//     passthrough when run as root). Target: loop/ours >= 0.5 (ours at
//     most 2x slower), and the daemon's memory growth during the cats <
//     64 MB. The history file is proc's render cache (proc/cache.go): the
//     first open after the daemon starts renders the conversation into it
//     (cold, timed apart: the "first cat"), later opens append what is new
//     and the kernel reads the file (FUSE passthrough). Sub-benchmarks:
//     inproc: both mounts served in this process. Extra metrics: loopback
//     without passthrough (bench_proc_loop_test.go) is what FUSE costs when
//     every read reaches the server; tree is the same read on k.Root()
//     directly (Lookup down to history, Open, Read 128 KiB at a time: no
//     FUSE, no cat); sql is one SELECT of every row of the conversation,
//     scanned (what rendering from SQLite at every open would cost at
//     least).
//     Memory: the Go heap (HeapInuse, sampled every 5 ms) and this
//     process's VmHWM (reset through /proc/self/clear_refs first), which
//     includes the loopback server.
//     daemon: both file systems served by subprocesses, `gsvfs mount` on
//     the prepared state vs go-fuse's example/loopback binary; the
//     daemon's VmRSS is read before the first cat of the fresh daemon,
//     its VmHWM reset then (/proc/PID/clear_refs), its VmRSS sampled every
//     5 ms during the cats (the first, cold one included), and the growth
//     is the peak (VmHWM, or the sampled peak) less the VmRSS before. This
//     is the RSS figure of the target.
//     Profile the in-process variant with -bench HistoryCat/inproc
//     -cpuprofile cpu.out.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	gproc "gsvfs.dev/gsvfs/proc"
	"gsvfs.dev/gsvfs/vfs"
)

// Targets.
const (
	targetHistoryRatio = 0.5  // loop/ours, at least
	targetHistoryMemMB = 64.0 // memory growth during the cats, below
)

// historyMessages is the length of the conversation.
const historyMessages = 100_000

var historyWords = strings.Fields(`the a process kernel file read write message conversation history
	summary tool call result user assistant error path directory config build test run deploy fix
	bug review change commit branch merge function return value string list map index query table
	row column page cache memory disk network socket token request response stream event signal`)

func historyText(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(historyWords[rng.Intn(len(historyWords))])
	}
	return sb.String()
}

// historyMessage returns the role and JSON content of message i, as
// proc stores them: user, assistant, user, assistant with a tool call,
// its tool result; contents about 200 bytes.
func historyMessage(rng *rand.Rand, i int) (role, content string) {
	type toolCall struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	type assistant struct {
		Text      string     `json:"text"`
		ToolCalls []toolCall `json:"toolCalls,omitempty"`
	}
	type toolResult struct {
		ToolCallID string `json:"toolCallId"`
		ToolName   string `json:"toolName"`
		Output     string `json:"output"`
	}
	var v any
	switch i % 5 {
	case 0, 2:
		role, v = "user", historyText(rng, 200)
	case 1:
		role, v = "assistant", assistant{Text: historyText(rng, 200)}
	case 3:
		args, _ := json.Marshal(map[string]string{"path": "/home/root/" + historyWords[rng.Intn(len(historyWords))] + ".txt"})
		role, v = "assistant", assistant{Text: historyText(rng, 120), ToolCalls: []toolCall{{ID: fmt.Sprintf("call_%08d", i), Name: "Read", Args: args}}}
	default:
		role, v = "toolResult", toolResult{ToolCallID: fmt.Sprintf("call_%08d", i-1), ToolName: "Read", Output: historyText(rng, 140)}
	}
	b, _ := json.Marshal(v)
	return role, string(b)
}

// historyState is a kernel with the process manager and a task process
// whose default conversation holds historyMessages messages.
type historyState struct {
	k       *kernel.Kernel
	space   *ns.Space
	root    *kernel.Caller
	pid     string
	content int64 // bytes of message content
}

// historyElems is the namespace path of pid's history, element by element.
func historyElems(pid string) []string {
	return []string{"proc", pid, "conversations", "default", "history"}
}

// openHistoryState opens (creating) a kernel on stateDir set up as the
// daemon sets it up (the host user, this uid), registers proc, spawns a
// task process and fills its conversation in one transaction.
func openHistoryState(stateDir string) (*historyState, error) {
	ctx := context.Background()
	k, err := kernel.Open(kernel.Config{StateDir: stateDir, Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*historyState, error) { k.Close(); return nil, err }
	if err := k.EnsureSetup(ctx, hostUser(), os.Getuid()); err != nil {
		return fail(err)
	}
	space := ns.New(k)
	dev, err := devices.New(k, devices.Options{Local: local.Options{Logger: quietLogger()}})
	if err != nil {
		return fail(err)
	}
	if err := space.Add(ctx, dev); err != nil {
		return fail(err)
	}
	dev.SetRoot(space.Root())
	pm, err := gproc.Open(space, gproc.Options{Logger: quietLogger()})
	if err != nil {
		return fail(err)
	}
	if err := space.Add(ctx, pm); err != nil {
		return fail(err)
	}
	cred, err := space.Authenticate(ctx, vfs.Peer{Transport: "fuse", HostUID: os.Getuid(), HostGID: os.Getgid()})
	if err != nil {
		return fail(err)
	}
	root := ns.CallerOf(cred, "")
	res, err := kernel.Do(ctx, k, root, abi.ProcSpawn, &abi.SpawnArgs{Profile: "task", Label: "history bench"})
	if err != nil {
		return fail(err)
	}
	s := &historyState{k: k, space: space, root: root, pid: res.Pid}
	rng := rand.New(rand.NewSource(1))
	t0 := time.Now().UnixMilli() - historyMessages*1000
	err = k.Store.Tx(ctx, func(tx *kernel.Tx) error {
		st, err := tx.Prepare(`INSERT INTO proc_messages(pid,cid,generation,role,content,created_at) VALUES(?,?,1,?,?,?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i := 0; i < historyMessages; i++ {
			role, content := historyMessage(rng, i)
			s.content += int64(len(content))
			if _, err := st.Exec(s.pid, "default", role, content, t0+int64(i)*1000); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// treeRead reads the file at elems under root through the vfs, bufSize
// bytes at a time, into w (nil discards), and returns the size.
func treeRead(ctx context.Context, root vfs.Dir, cred vfs.Cred, elems []string, buf []byte, w *bytes.Buffer) (int64, error) {
	var n vfs.Node = root
	for _, name := range elems {
		d, ok := n.(vfs.Dir)
		if !ok {
			return 0, fmt.Errorf("%s: not a directory", name)
		}
		var err error
		if n, _, err = vfs.LookupAttr(ctx, d, cred, name); err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
	}
	f, ok := n.(vfs.File)
	if !ok {
		return 0, errors.New("not a file")
	}
	h, err := f.Open(ctx, cred, os.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer h.Close(ctx)
	var off int64
	for {
		m, err := h.Read(ctx, buf, off)
		if err != nil {
			return off, err
		}
		if m == 0 {
			return off, nil
		}
		if w != nil {
			w.Write(buf[:m])
		}
		off += int64(m)
	}
}

// checkHistory checks a rendering of the history: historyMessages JSON
// lines with increasing ids.
func checkHistory(data []byte) error {
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(lines) != historyMessages {
		return fmt.Errorf("history has %d lines, want %d", len(lines), historyMessages)
	}
	var last int64
	for _, i := range []int{0, 1, 3, 4, len(lines) / 2, len(lines) - 1} {
		var m struct {
			ID      int64           `json:"id"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(lines[i], &m); err != nil || m.ID <= last || m.Role == "" || len(m.Content) < 100 {
			return fmt.Errorf("history line %d: %.200s (%v)", i, lines[i], err)
		}
		last = m.ID
	}
	return nil
}

// loadAvg returns the 1-minute load average: wall times depend on what
// else the machine runs.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// catFile is the timed operation: cat path > /dev/null.
func catFile(path string) error {
	cmd := exec.Command("cat", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cat %s: %v: %s", path, err, stderr.String())
	}
	return nil
}

// writeLoopbackSource writes data as history in a fresh tmpfs directory.
func writeLoopbackSource(b *testing.B, data []byte) string {
	b.Helper()
	src := tmpfsDir(b)
	if err := os.WriteFile(filepath.Join(src, "history"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	return src
}

// selfMem samples this process's Go heap and VmRSS every 5 ms.
type selfMem struct {
	stop, done                chan struct{}
	base                      runtime.MemStats
	baseRSS, peakRSS          float64 // kB
	peakHeapInuse, peakSys    uint64
	hwmReset                  bool
	heapMB, sysMB, rssMB, hwm float64
}

func startSelfMem() *selfMem {
	s := &selfMem{stop: make(chan struct{}), done: make(chan struct{})}
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&s.base)
	s.baseRSS, _ = procStatusKB(os.Getpid(), "VmRSS")
	s.hwmReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	s.peakRSS, s.peakHeapInuse, s.peakSys = s.baseRSS, s.base.HeapInuse, s.base.Sys
	go func() {
		defer close(s.done)
		t := time.NewTicker(5 * time.Millisecond)
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

func (s *selfMem) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.peakHeapInuse, s.peakSys = max(s.peakHeapInuse, ms.HeapInuse), max(s.peakSys, ms.Sys)
	if r, err := procStatusKB(os.Getpid(), "VmRSS"); err == nil {
		s.peakRSS = max(s.peakRSS, r)
	}
}

func (s *selfMem) finish() {
	close(s.stop)
	<-s.done
	s.sample()
	s.hwm, _ = procStatusKB(os.Getpid(), "VmHWM")
	peak := s.peakRSS
	if s.hwmReset {
		peak = max(peak, s.hwm)
	}
	s.heapMB = float64(s.peakHeapInuse-s.base.HeapInuse) / (1 << 20)
	s.sysMB = float64(s.peakSys-s.base.Sys) / (1 << 20)
	s.rssMB = (peak - s.baseRSS) / 1024
}

// daemonMem watches a daemon's VmRSS from before its first cat.
type daemonMem struct {
	pid                 int
	baseRSS, peakRSS    float64 // kB
	hwmReset            bool
	mu                  sync.Mutex
	stop, done          chan struct{}
	lastRSS, lastHWM    float64
	growthMB, afterMB   float64
	samples             int
	sampledPeakGrowthMB float64
}

func newDaemonMem(pid int) (*daemonMem, error) {
	d := &daemonMem{pid: pid}
	var err error
	if d.baseRSS, err = procStatusKB(pid, "VmRSS"); err != nil {
		return nil, err
	}
	d.peakRSS = d.baseRSS
	d.hwmReset = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
	return d, nil
}

// watch samples VmRSS every 5 ms until end is called.
func (d *daemonMem) watch() (end func()) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if r, err := procStatusKB(d.pid, "VmRSS"); err == nil {
				d.mu.Lock()
				d.peakRSS = max(d.peakRSS, r)
				d.samples++
				d.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		d.mu.Lock()
		defer d.mu.Unlock()
		d.lastRSS, _ = procStatusKB(d.pid, "VmRSS")
		d.lastHWM, _ = procStatusKB(d.pid, "VmHWM")
		peak := d.peakRSS
		if d.hwmReset {
			peak = max(peak, d.lastHWM)
		}
		d.growthMB = (peak - d.baseRSS) / 1024
		d.sampledPeakGrowthMB = (d.peakRSS - d.baseRSS) / 1024
		d.afterMB = (d.lastRSS - d.baseRSS) / 1024
	}
}

func BenchmarkHistoryCat(b *testing.B) {
	needFUSE(b)
	if _, err := exec.LookPath("cat"); err != nil {
		b.Skip("no cat")
	}
	ctx := context.Background()

	b.Run("inproc", func(b *testing.B) {
		// Built once per call of this function; the testing package calls
		// it again with a larger b.N only if one iteration took under the
		// benchtime.
		hs, err := openHistoryState(filepath.Join(b.TempDir(), "state"))
		if err != nil {
			b.Fatal(err)
		}
		defer hs.k.Close()
		ours := mountTree(b, hs.space.Root(), hs.space)
		path := filepath.Join(append([]string{ours}, historyElems(hs.pid)...)...)
		// The first read renders the cache (untimed here: see the
		// daemon's first cat).
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := checkHistory(data); err != nil {
			b.Fatal(err)
		}
		src := writeLoopbackSource(b, data)
		loop := mountLoopback(b, src, false)
		loopPath := filepath.Join(loop, "history")
		// The second baseline (bench_proc_loop_test.go): passthrough off.
		loopNP := filepath.Join(mountLoopbackNoPassthrough(b, src), "history")
		for _, p := range []string{loopPath, loopNP} {
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
				b.Fatalf("the loopback's %s differs (%d bytes, want %d): %v", p, len(got), len(data), err)
			}
		}
		buf := make([]byte, 128<<10)
		var treeSize int64
		sOurs := &side{name: "ours", op: func() error { return catFile(path) }}
		sLoop := &side{name: "loopback", op: func() error { return catFile(loopPath) }}
		sTree := &side{name: "tree", op: func() error {
			n, err := treeRead(ctx, hs.space.Root(), hs.root.Identity, historyElems(hs.pid), buf, nil)
			treeSize = n
			return err
		}}
		sSQL := &side{name: "sql", op: func() error {
			rows, err := hs.k.Store.R.QueryContext(ctx, `SELECT id,role,content,created_at FROM proc_messages WHERE pid=? AND cid='default' AND generation=1 ORDER BY id`, hs.pid)
			if err != nil {
				return err
			}
			defer rows.Close()
			n := 0
			var id, ts int64
			var role string
			var content sql.RawBytes
			for rows.Next() {
				if err := rows.Scan(&id, &role, &content, &ts); err != nil {
					return err
				}
				n++
			}
			if n != historyMessages {
				return fmt.Errorf("%d rows, want %d", n, historyMessages)
			}
			return rows.Err()
		}}
		sLoopNP := &side{name: "loopback without passthrough", op: func() error { return catFile(loopNP) }}
		mem := startSelfMem()
		interleave(b, sOurs, sLoop, sLoopNP, sTree, sSQL)
		mem.finish()
		if treeSize != int64(len(data)) {
			b.Fatalf("tree read %d bytes, want %d", treeSize, len(data))
		}
		o, l, tr, sq := sOurs.nsPerOp(), sLoop.nsPerOp(), sTree.nsPerOp(), sSQL.nsPerOp()
		lnp := sLoopNP.nsPerOp()
		mb := float64(len(data)) / (1 << 20)
		b.ReportMetric(o, "ns/op")
		b.ReportMetric(o/1e6, "ours-ms")
		b.ReportMetric(l/1e6, "loop-ms")
		b.ReportMetric(tr/1e6, "tree-ms")
		b.ReportMetric(sq/1e6, "sql-ms")
		b.ReportMetric(l/o, "loop/ours")
		b.ReportMetric(lnp/1e6, "loopnp-ms")
		b.ReportMetric(lnp/o, "loopnp/ours")
		b.ReportMetric(mem.heapMB, "heap-grow-MB")
		b.ReportMetric(mem.rssMB, "rss-grow-MB")
		msg := fmt.Sprintf("%d messages, %.1f MB: ours %.1f ms (%.0f MB/s)  loop %.1f ms (%.0f MB/s)  loop/ours %.3f  target >= %.1f: %s | loopback without passthrough %.1f ms  loopnp/ours %.3f | tree (no FUSE, no cat) %.1f ms, one SQL SELECT of the rows %.0f ms | this process (with the loopback): HeapInuse +%.1f MB, Go Sys +%.1f MB, RSS peak +%.1f MB | load average %s",
			historyMessages, mb, o/1e6, mb/(o/1e9), l/1e6, mb/(l/1e9), l/o, targetHistoryRatio, verdict(l/o >= targetHistoryRatio),
			lnp/1e6, lnp/o, tr/1e6, sq/1e6, mem.heapMB, mem.sysMB, mem.rssMB, loadAvg())
		b.Logf("N=%d SUMMARY HistoryCat/inproc: %s", b.N, msg)
		note("HistoryCat/inproc", "%s", msg)
	})

	// The daemon and the loopback as subprocesses, started once (lazily) for
	// the daemon sub-benchmark, however many times it is called.
	var d struct {
		once                 sync.Once
		err                  error
		ours, loop           string
		daemon               *daemonProc
		size                 int
		mem                  *daemonMem
		contentMB, baseRSSMB float64
		coldMs               float64 // the first cat: the cache rendered
	}
	start := func() {
		dir := b.TempDir()
		gsvfsBin, loopBin, err := buildTools(dir)
		if err != nil {
			d.err = err
			return
		}
		// The state, prepared in this process and closed before the
		// daemon opens it; the expected bytes are read from its tree.
		state := filepath.Join(dir, "state")
		hs, err := openHistoryState(state)
		if err != nil {
			d.err = err
			return
		}
		var want bytes.Buffer
		_, err = treeRead(ctx, hs.space.Root(), hs.root.Identity, historyElems(hs.pid), make([]byte, 128<<10), &want)
		hs.k.Close()
		if err == nil {
			err = checkHistory(want.Bytes())
		}
		if err != nil {
			d.err = err
			return
		}
		d.size, d.contentMB = want.Len(), float64(hs.content)/(1<<20)
		lsrc, err := os.MkdirTemp("/dev/shm", "gsvfs-bench-")
		if err != nil {
			d.err = err
			return
		}
		b.Cleanup(func() { os.RemoveAll(lsrc) })
		if err := os.WriteFile(filepath.Join(lsrc, "history"), want.Bytes(), 0o644); err != nil {
			d.err = err
			return
		}
		mnt, lmnt := filepath.Join(dir, "mnt"), filepath.Join(dir, "loop")
		os.Mkdir(mnt, 0o755)
		os.Mkdir(lmnt, 0o755)
		level := "warn"
		if l := os.Getenv("GSVFS_BENCH_DAEMON_LOG"); l != "" {
			level = l
		}
		ours := filepath.Join(append([]string{mnt}, historyElems(hs.pid)...)...)
		p, err := startProcReady(b, mnt, ours, gsvfsBin, "mount", mnt, "--state", state, "--log-level", level)
		if err != nil {
			d.err = err
			return
		}
		loop := filepath.Join(lmnt, "history")
		if _, err := startProcReady(b, lmnt, loop, loopBin, "-q", "-directmountstrict", lmnt, lsrc); err != nil {
			d.err = err
			return
		}
		// Let the daemon settle, then take its baseline before any cat.
		time.Sleep(500 * time.Millisecond)
		if d.mem, err = newDaemonMem(p.cmd.Process.Pid); err != nil {
			d.err = err
			return
		}
		d.baseRSSMB = d.mem.baseRSS / 1024
		d.ours, d.loop, d.daemon = ours, loop, p
	}
	b.Run("daemon", func(b *testing.B) {
		d.once.Do(start)
		if d.err != nil {
			b.Fatal(d.err)
		}
		sOurs := &side{name: "ours (daemon)", op: func() error {
			err := catFile(d.ours)
			if err != nil {
				err = fmt.Errorf("%w\ndaemon log (last 4 KiB):\n%s", err, d.daemon.out.tail(4096))
			}
			return err
		}}
		sLoop := &side{name: "loopback (process)", op: func() error { return catFile(d.loop) }}
		end := d.mem.watch()
		if d.coldMs == 0 {
			// The fresh daemon's first cat renders the cache: timed
			// apart, its memory counted.
			t0 := time.Now()
			if err := sOurs.op(); err != nil {
				b.Fatal(err)
			}
			d.coldMs = float64(time.Since(t0)) / 1e6
		}
		interleave(b, sOurs, sLoop)
		end()
		// What the daemon served is what the tree renders (untimed, after
		// the memory figures).
		got, err := os.ReadFile(d.ours)
		if err != nil || len(got) != d.size || checkHistory(got) != nil {
			b.Fatalf("the daemon's history: %d bytes, want %d (%v)", len(got), d.size, err)
		}
		o, l := sOurs.nsPerOp(), sLoop.nsPerOp()
		m := d.mem
		mb := float64(d.size) / (1 << 20)
		b.ReportMetric(o, "ns/op")
		b.ReportMetric(o/1e6, "ours-ms")
		b.ReportMetric(l/1e6, "loop-ms")
		b.ReportMetric(l/o, "loop/ours")
		b.ReportMetric(d.coldMs, "first-cat-ms")
		b.ReportMetric(m.growthMB, "rss-grow-MB")
		b.ReportMetric(m.lastHWM/1024, "hwm-MB")
		hwmNote := "VmHWM reset before the first cat"
		if !m.hwmReset {
			hwmNote = "VmHWM could not be reset: growth is the sampled peak"
		}
		b.Logf("N=%d daemon pid %d: VmRSS before the first cat %.1f MB, after %.1f MB, VmHWM %.1f MB, sampled peak +%.1f MB over %d samples (%s)",
			b.N, m.pid, m.baseRSS/1024, m.lastRSS/1024, m.lastHWM/1024, m.sampledPeakGrowthMB, m.samples, hwmNote)
		msg := fmt.Sprintf("%d messages, %.1f MB: ours %.1f ms (%.0f MB/s)  loop %.1f ms (%.0f MB/s)  loop/ours %.3f  target >= %.1f: %s (both subprocesses) | the daemon's first cat (rendering the cache) %.0f ms | load average %s",
			historyMessages, mb, o/1e6, mb/(o/1e9), l/1e6, mb/(l/1e9), l/o, targetHistoryRatio, verdict(l/o >= targetHistoryRatio), d.coldMs, loadAvg())
		rss := fmt.Sprintf("daemon VmRSS %.1f MB before the first cat, %.1f MB after the last; peak (VmHWM) %.1f MB: growth %.1f MB  target < %.0f MB: %s",
			m.baseRSS/1024, m.lastRSS/1024, m.lastHWM/1024, m.growthMB, targetHistoryMemMB, verdict(m.growthMB < targetHistoryMemMB))
		b.Logf("SUMMARY HistoryCat/daemon: %s", msg)
		b.Logf("SUMMARY HistoryCat/daemon-rss: %s", rss)
		note("HistoryCat/daemon", "%s", msg)
		note("HistoryCat/daemon-rss", "%s", rss)
	})
}
