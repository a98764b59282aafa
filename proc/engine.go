package proc

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// The run engine: what makes processes' runs go. It keeps the runtime of
// each process (its run and where the run is: run.go), and runs the agent
// loop (loop.go), human approvals (hil.go), run settings and budgets
// (control.go), checkpoints (park.go) and their directives (directive.go),
// CodeMode blocks (codemode.go) and the lifecycle
// of conversation histories (lifecycle.go). It is a type of its own over
// a small interface to the process table (processStore), so that it can
// be lifted out of proc: the Manager keeps the table and the /proc tree,
// and delegates runs to it. The engine's methods were the Manager's and
// keep their receiver's name, m: they moved unchanged.
type engine struct {
	// processStore is the process table the engine runs the processes of
	// (the Manager).
	processStore

	k    *kernel.Kernel
	st   *kernel.Store
	log  *slog.Logger
	opts Options

	// mu guards procs and closed, and is held for wg.Add, so that close's
	// wg.Wait sees every goroutine.
	mu    sync.Mutex
	procs map[string]*process
	// closed is set by close: no goroutine of the engine starts after it.
	closed bool
	wg     sync.WaitGroup // the run goroutines and the engine's background work

	provMu    sync.Mutex                // guards provCache
	provCache map[string]model.Provider // see provider

	media  *mediaStore      // the users' media (media.go)
	routes runRoutes        // the connections runs' chat notifications go to (routes.go)
	blocks *codemode.Runner // CodeMode's workers, kept warm (nil: no worker command)
	// hilWaiters are the blocks' nested calls waiting for a human's
	// answer: request id → a channel decideLocked closes.
	hilWaiters sync.Map
	blockMu    sync.Mutex     // guards blockRuns
	blockRuns  map[uint32]int // the CodeMode blocks running, per user
	blockGate  *blockGate     // the users' rates of block starts (blockrate.go)
}

// processStore is what the run engine asks of the process table: the
// records of processes and conversations it runs, and the signals that
// announce what changed (the Manager notes there which files of /proc
// they change).
type processStore interface {
	// get returns the record of pid; lookup the record of pid if the
	// caller may touch it (its owner, root), an empty pid being the
	// caller's init.
	get(ctx context.Context, pid string) (*abi.Process, error)
	lookup(ctx context.Context, c *kernel.Caller, pid string) (*abi.Process, error)
	// conv returns a conversation of pid, with its message count;
	// convRecord without; allConvs lists the ids of all of pid's.
	conv(ctx context.Context, pid, cid string) (*abi.Conversation, error)
	convRecord(ctx context.Context, pid, cid string) (*abi.Conversation, error)
	allConvs(ctx context.Context, pid string) ([]string, error)
	// running lists the processes that are not idle, of uid (nil: every
	// user's), oldest first.
	running(ctx context.Context, uid *uint32) ([]abi.Process, error)
	// noteChange notes which files of /proc a signal of a process of uid
	// changes, as it is published (signal); changed announces a durable
	// change of a process (proc.changed); touch notes a change of parts
	// of /proc that no signal tells (changes.go).
	noteChange(uid uint32, name string, pl abi.Scoped)
	changed(uid uint32, c abi.ProcChanged)
	touch(parts ...string)
}

// kern is the kernel of m (signaller: the engine publishes its
// processes' signals with signal).
func (m *engine) kern() *kernel.Kernel { return m.k }

// newEngine is the run engine of the processes of table, on k.
func newEngine(table processStore, k *kernel.Kernel, opts Options) *engine {
	e := &engine{processStore: table, k: k, st: k.Store, log: opts.Logger, opts: opts,
		procs: map[string]*process{}, blockRuns: map[uint32]int{}, blockGate: newBlockGate(),
		media: &mediaStore{dir: filepath.Join(k.StateDir(), "media")}}
	if len(opts.CodeModeWorker) > 0 {
		e.blocks = codemode.NewRunnerWith(opts.CodeModeWorker, codemode.RunnerOptions{Log: opts.Logger, CPUGroup: opts.CodeModeGroup})
	}
	return e
}

// close stops the engine for a shutdown: it cancels every executing run
// and waits until their goroutines have ended, leaving their stored state
// (run "running", queue, pending HIL) as it is, so that resume on the
// same store resumes them. No run starts after close.
func (m *engine) close() error {
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

// background runs f in a goroutine the engine owns (close waits for it);
// after close it does not run.
func (m *engine) background(f func()) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// proc returns the runtime of pid (the process must exist).
func (m *engine) proc(pid string, uid uint32) *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.procs[pid]
	if p == nil {
		p = &process{pid: pid, uid: uid}
		m.procs[pid] = p
	}
	return p
}
