package proc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"time"

	"gsvfs.dev/gsvfs/abi"
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

// Manager is the proc room of the namespace (ns.Room, ns.Starter): the
// process table (processes and their conversations, stored), the proc.*
// syscalls and the /proc tree. It delegates the runs of its processes to
// the run engine (engine.go), which asks it for records through a small
// interface (processStore).
type Manager struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger
	opts  Options

	// run is the run engine: the processes' runs, their loop, approvals,
	// checkpoints, CodeMode blocks and history lifecycle.
	run *engine

	cache  *renderCache // history and transcript files (cache.go)
	owners ownerCache   // the owners of processes' files, looked up (tree.go)

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
	m := &Manager{k: k, space: space, st: k.Store, log: opts.Logger, opts: opts, changes: ns.NewChanges()}
	m.run = newEngine(m, k, opts)
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
		kernel.Handle(abi.ProcSend, m.run.sysSend),
		kernel.Handle(abi.ProcRunGet, m.run.sysRunGet),
		kernel.Handle(abi.ProcCost, m.run.sysCost),
		kernel.Handle(abi.ProcRunList, m.run.sysRunList),
		kernel.Handle(abi.ProcRunControl, m.run.sysRunControl),
		kernel.Handle(abi.ProcDirective, m.run.sysDirective),
		kernel.Handle(abi.ProcAbort, m.run.sysAbort),
		kernel.Handle(abi.ProcHil, m.run.sysHil),
		kernel.Handle(abi.ProcKill, m.sysKill),
		kernel.Handle(abi.ProcReset, m.sysReset),
		kernel.Handle(abi.ProcCheckpoint, m.run.sysCheckpoint),
		kernel.Handle(abi.ProcSetidentity, m.sysSetIdentity),
		kernel.Handle(abi.ProcHistory, m.sysHistory),
		kernel.Handle(abi.ProcHistoryOpen, m.sysHistoryOpen),
		kernel.Handle(abi.ProcMediaList, m.sysMediaList),
		kernel.Handle(abi.ProcMediaOpen, m.sysMediaOpen),
		kernel.Handle(abi.ProcConversationOpen, m.sysConvOpen),
		kernel.Handle(abi.ProcConversationList, m.sysConvList),
		kernel.Handle(abi.ProcConversationGet, m.sysConvGet),
		kernel.Handle(abi.ProcConversationLookup, m.sysConvLookup),
		kernel.Handle(abi.ProcConversationClose, m.sysConvClose),
		kernel.Handle(abi.ProcConversationReset, m.run.sysConvReset),
		kernel.Handle(abi.ProcConversationPolicyGet, m.run.sysPolicyGet),
		kernel.Handle(abi.ProcConversationPolicySet, m.run.sysPolicySet),
		kernel.Handle(abi.ProcConversationCompact, m.run.sysCompact),
		kernel.Handle(abi.ProcConversationFork, m.run.sysFork),
		kernel.Handle(abi.ProcConversationSegments, m.run.sysSegments),
		kernel.Handle(abi.ProcConversationSegmentRead, m.run.sysSegmentRead),
		kernel.Handle(abi.CodemodeRun, m.run.sysCodeModeRun),
		kernel.Handle(abi.CodemodeExec, m.run.sysCodeModeExec),
		kernel.Handle(abi.ProcDeliver, m.run.sysDeliver),
		kernel.Handle(abi.ProcConversationState, m.run.sysConvState),
		kernel.Handle(abi.ProcRunState, m.run.sysRunState),
	}
}

// Mounts binds /proc (ns.Room): tree.go.
func (m *Manager) Mounts() []ns.Mount {
	return []ns.Mount{{Path: "/proc", Node: m.tree()}, {Path: mediaDir, Node: m.mediaTree()}}
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
	if err := m.run.resume(ctx); err != nil {
		return err
	}
	return m.run.armHilExpiries(ctx)
}

// Close stops the manager for a shutdown (ns.Room): it cancels every
// executing run and waits until their goroutines have ended, leaving their
// stored state (run "running", queue, pending HIL) as it is, so that Start
// on the same store resumes them. Close it before closing the kernel. No
// run starts after Close.
func (m *Manager) Close() error { return m.run.close() }

// signaller is a part of proc that publishes its processes' signals: the
// Manager, and its run engine (through the table's noteChange).
type signaller interface {
	// noteChange notes which files of /proc the signal name (payload
	// pl) of a process of uid changes (changes.go).
	noteChange(uid uint32, name string, pl abi.Scoped)
	// kern is the kernel whose bus carries the signals.
	kern() *kernel.Kernel
}

// signal publishes a process signal of m to the owner uid (and root).
// It notes which files of /proc the signal changes (noteChange).
func signal[P abi.Scoped](m signaller, uid uint32, sig abi.Signal[P], p P) {
	m.noteChange(uid, sig.Name, p)
	kernel.Publish(m.kern(), sig, p, kernel.Audience{Uids: []uint32{uid}})
}

// kern is the kernel of m (signaller).
func (m *Manager) kern() *kernel.Kernel { return m.k }

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
