package proc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc/model"
)

// Options configure the process manager.
type Options struct {
	// Provider, if set, returns the model provider for a process owned by
	// uid (tests inject a scripted provider). By default the provider comes
	// from the kernel's config: config/ai/* overridden by users/<uid>/ai/*.
	Provider func(ctx context.Context, uid uint32) (model.Provider, string, error)
	Logger   *slog.Logger
	// MaxSteps bounds the model calls of one run (default 40).
	MaxSteps int
	// CodeModeWorker is the argv of the CodeMode worker process (the
	// daemon's own binary with its hidden codemode-worker command, a
	// test binary that is its own worker); without it codemode.run and
	// the CodeMode tool fail (503).
	CodeModeWorker []string
	// CodeModeBlocks bounds the CodeMode blocks one user runs at once
	// (each is a worker process); 0 is DefaultCodeModeBlocks.
	CodeModeBlocks int
	// CodeModeGroup, if not "", is the cpu cgroup (v1) directory every
	// CodeMode worker is born in (codemode.RunnerOptions.CPUGroup): the
	// daemon gives it the sandboxes' small weight, so that the blocks
	// running at once come after its service of every user.
	CodeModeGroup string
	// noCheckpoints runs without checkpoints: the baseline of the
	// checkpoints' cost in BenchmarkRuns.
	noCheckpoints bool
}

// Manager runs the processes of one kernel. It is the proc room of the
// namespace (ns.Room, ns.Starter).
type Manager struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	opts  Options

	mu    sync.Mutex
	procs map[string]*process
	// closed is set by Close: no run goroutine starts after it (guarded
	// by mu, like wg.Add, so that Close's wg.Wait sees every goroutine).
	closed bool
	wg     sync.WaitGroup // the run goroutines

	provMu    sync.Mutex
	provCache map[string]model.Provider // see provider

	cache  *renderCache     // history and transcript files (cache.go)
	ipc    ipcState         // the deadlines of pending IPC calls (ipc.go)
	watch  watchState       // the signal watches' live part (watch.go)
	routes runRoutes        // the connections runs' chat notifications go to (routes.go)
	owners ownerCache       // the owners of processes' files, looked up (tree.go)
	blocks *codemode.Runner // CodeMode's workers, kept warm (nil: no worker command)
	// hilWaiters are the blocks' nested calls waiting for a human's
	// answer: request id → a channel decideLocked closes.
	hilWaiters sync.Map
	blockMu    sync.Mutex
	blockRuns  map[uint32]int // the CodeMode blocks running, per user

	// changes are when the parts of /proc last changed (changes.go).
	changes *ns.Changes
}

// Open migrates the proc schema and prepares the manager of space's
// kernel (its render cache under STATE/cache/proc). It registers nothing:
// space.Add(ctx, m) registers its syscalls, binds /proc and starts it.
func Open(space *ns.Space, opts Options) (*Manager, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxSteps == 0 {
		opts.MaxSteps = 40
	}
	if opts.CodeModeBlocks <= 0 {
		opts.CodeModeBlocks = DefaultCodeModeBlocks
	}
	if err := k.Store.Migrate("proc", migrations); err != nil {
		return nil, err
	}
	if err := migrateHil(k.Store); err != nil {
		return nil, err
	}
	m := &Manager{k: k, space: space, st: k.Store, log: opts.Logger, opts: opts, procs: map[string]*process{}, blockRuns: map[uint32]int{},
		changes: ns.NewChanges()}
	if len(opts.CodeModeWorker) > 0 {
		m.blocks = codemode.NewRunnerWith(opts.CodeModeWorker, codemode.RunnerOptions{Log: opts.Logger, CPUGroup: opts.CodeModeGroup})
	}
	if err := m.openRenderCache(); err != nil {
		return nil, err
	}
	return m, nil
}

// Syscalls is the proc room's syscall table (ns.Room). The public calls
// take and return the abi package's proc types; the Internal ones serve
// the /proc tree; proc.setidentity is the kernel's.
func (m *Manager) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.ProcList, m.sysList),
		kernel.Handle(abi.ProcGet, m.sysGet),
		kernel.Handle(abi.ProcStatus, m.sysStatus),
		kernel.Handle(abi.ProcEvents, m.sysEvents),
		kernel.Handle(abi.ProcProfileList, m.sysProfiles),
		kernel.Handle(abi.ProcSpawn, m.sysSpawn),
		kernel.Handle(abi.ProcSend, m.sysSend),
		kernel.Handle(abi.ProcRunGet, m.sysRunGet),
		kernel.Handle(abi.ProcRunList, m.sysRunList),
		kernel.Handle(abi.ProcRunControl, m.sysRunControl),
		kernel.Handle(abi.ProcDirective, m.sysDirective),
		kernel.Fn("proc.ipc.send", 0, m.sysIpcSend),
		kernel.Fn("proc.ipc.call", 0, m.sysIpcCall),
		kernel.Fn("proc.ipc.delegate", 0, m.sysIpcDelegate),
		kernel.Fn("proc.ipc.list", 0, m.sysIpcList),
		kernel.Fn("proc.ipc.deliver", kernel.KernelOnly, m.sysIpcDeliver),
		kernel.Fn("signal.watch", 0, m.sysWatch),
		kernel.Fn("signal.unwatch", 0, m.sysUnwatch),
		kernel.Fn("signal.list", 0, m.sysWatchList),
		kernel.Handle(abi.ProcAbort, m.sysAbort),
		kernel.Handle(abi.ProcHil, m.sysHil),
		kernel.Handle(abi.ProcKill, m.sysKill),
		kernel.Handle(abi.ProcReset, m.sysReset),
		kernel.Handle(abi.ProcCheckpoint, m.sysCheckpoint),
		kernel.Handle(abi.ProcSetidentity, m.sysSetIdentity),
		kernel.Handle(abi.ProcHistory, m.sysHistory),
		kernel.Handle(abi.ProcHistoryOpen, m.sysHistoryOpen),
		kernel.Handle(abi.ProcConversationOpen, m.sysConvOpen),
		kernel.Handle(abi.ProcConversationList, m.sysConvList),
		kernel.Handle(abi.ProcConversationGet, m.sysConvGet),
		kernel.Handle(abi.ProcConversationLookup, m.sysConvLookup),
		kernel.Handle(abi.ProcConversationClose, m.sysConvClose),
		kernel.Handle(abi.ProcConversationReset, m.sysConvReset),
		kernel.Handle(abi.ProcConversationPolicyGet, m.sysPolicyGet),
		kernel.Handle(abi.ProcConversationPolicySet, m.sysPolicySet),
		kernel.Handle(abi.ProcConversationCompact, m.sysCompact),
		kernel.Handle(abi.ProcConversationFork, m.sysFork),
		kernel.Handle(abi.ProcConversationSegments, m.sysSegments),
		kernel.Handle(abi.ProcConversationSegmentRead, m.sysSegmentRead),
		kernel.Handle(abi.CodemodeRun, m.sysCodeModeRun),
		kernel.Handle(abi.CodemodeExec, m.sysCodeModeExec),
	}
}

// Mounts binds /proc (ns.Room): tree.go.
func (m *Manager) Mounts() []ns.Mount {
	return []ns.Mount{{Path: "/proc", Node: m.tree()}}
}

// Start is what follows registration (ns.Starter): every user has an init
// process from the moment they exist (users made from now on get it in
// the transaction that makes them, kernel.OnUserCreated; users made
// before, root and the users of an older state, get it here), and the
// runs that were under way when the daemon stopped resume.
func (m *Manager) Start(ctx context.Context) error {
	m.k.OnUserCreated(m.makeInitTx)
	if err := m.backfillInits(ctx); err != nil {
		return err
	}
	if err := m.resume(ctx); err != nil {
		return err
	}
	if err := m.startWatches(ctx); err != nil {
		return err
	}
	if err := m.armHilExpiries(ctx); err != nil {
		return err
	}
	return m.resumeCalls(ctx)
}

// Close stops the manager for a shutdown (ns.Room): it cancels every
// executing run and waits until their goroutines have ended, leaving their
// stored state (run "running", queue, pending HIL) as it is, so that Start
// on the same store resumes them. Close it before closing the kernel. No
// run starts after Close.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	procs := make([]*process, 0, len(m.procs))
	for _, pr := range m.procs {
		procs = append(procs, pr)
	}
	m.mu.Unlock()
	m.stopCalls()
	m.stopWatches()
	for _, pr := range procs {
		pr.mu.Lock()
		if r := pr.run; r != nil && pr.state == running {
			r.stop = stopShutdown
			r.cancel()
		}
		pr.mu.Unlock()
	}
	m.wg.Wait()
	if m.blocks != nil {
		m.blocks.Close()
	}
	return nil
}

// proc returns the runtime of pid (the process must exist).
func (m *Manager) proc(pid string, uid uint32) *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.procs[pid]
	if p == nil {
		p = &process{pid: pid, uid: uid}
		m.procs[pid] = p
	}
	return p
}

// signal publishes a process signal of m to the owner uid (and root).
// It notes which files of /proc the signal changes (noteChange).
func signal[P abi.Scoped](m *Manager, uid uint32, sig abi.Signal[P], p P) {
	m.noteChange(uid, sig.Name, p)
	kernel.Publish(m.k, sig, p, kernel.Audience{Uids: []uint32{uid}})
}

// changed announces a durable state change of a process (proc.changed).
func (m *Manager) changed(uid uint32, c abi.ProcChanged) {
	signal(m, uid, abi.SigProcChanged, c)
}

func now() int64 { return time.Now().UnixMilli() }

// newID returns prefix and 16 random hex digits.
func newID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// jsonString is s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// nullIf is s, or SQL NULL when s is empty.
func nullIf(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// orDefault is cid, or "default" when it is empty.
func orDefault(cid string) string {
	if cid == "" {
		return "default"
	}
	return cid
}
