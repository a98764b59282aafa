package ipc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// Options configure the ipc room.
type Options struct {
	Logger *slog.Logger
}

// Room is the ipc room (ns.Room, ns.Starter, ns.Grafter): the proc.ipc.*
// and signal.* syscalls, the deadlines of pending calls, the watcher
// goroutine, and what it grafts onto each /proc/<pid>: the ipc file and
// the mail, call, delegate, watch and unwatch verbs of its ctl.
//
// It keeps the tables proc_ipc_calls and proc_watches; everything it
// needs of processes and conversations it asks the process room, through
// the dispatcher (abi.ProcDeliver, abi.ProcConversationState,
// abi.ProcRunState, proc.get, proc.spawn), and the process room tells it
// when a run ends (abi.ProcIpcEnded) and a process is killed
// (abi.SignalForget).
type Room struct {
	k     *kernel.Kernel
	space *ns.Space
	st    *kernel.Store
	log   *slog.Logger

	// mu guards closed, and is held for wg.Add: no goroutine starts
	// after Close, and Close's wg.Wait sees every one (background).
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // the watcher goroutine and the background work

	ipc   ipcState   // the deadlines of pending calls (ipc.go)
	watch watchState // the watches' live part (watch.go)

	// changes are when each process's ipc file last changed (a call
	// made or ended).
	changes *ns.Changes
}

var (
	_ ns.Room    = (*Room)(nil)
	_ ns.Starter = (*Room)(nil)
	_ ns.Grafter = (*Room)(nil)
)

// Open migrates the room's schema and prepares the room of space's
// kernel. Open it after the process room: its tables are the ones the
// process room's migrations made (migrations). space.Add(ctx, r)
// registers its syscalls, keeps its grafts and starts it.
func Open(space *ns.Space, opts Options) (*Room, error) {
	k := space.Kernel()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := k.Store.Migrate("ipc", migrations); err != nil {
		return nil, err
	}
	return &Room{k: k, space: space, st: k.Store, log: opts.Logger, changes: ns.NewChanges()}, nil
}

// Syscalls is the room's syscall table (ns.Room): the public proc.ipc.*
// and signal.* calls, the kernel-only delivery of an envelope, and the
// two the process room makes to tell it of a run's end and a kill.
func (m *Room) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.ProcIpcSend, m.sysIpcSend),
		kernel.Handle(abi.ProcIpcCall, m.sysIpcCall),
		kernel.Handle(abi.ProcIpcDelegate, m.sysIpcDelegate),
		kernel.Handle(abi.ProcIpcList, m.sysIpcList),
		kernel.Handle(abi.ProcIpcDeliver, m.sysIpcDeliver),
		kernel.Handle(abi.ProcIpcEnded, m.sysIpcEnded),
		kernel.Handle(abi.SignalWatch, m.sysWatch),
		kernel.Handle(abi.SignalUnwatch, m.sysUnwatch),
		kernel.Handle(abi.SignalList, m.sysWatchList),
		kernel.Handle(abi.SignalForget, m.sysForget),
	}
}

// Mounts binds nothing (ns.Room): the room's files are grafted onto the
// process room's directories (Grafts).
func (m *Room) Mounts() []ns.Mount { return nil }

// Grafts add to every /proc/<pid> (ns.Grafter) the ipc file, the
// process's calls, and the IPC verbs of its ctl file, each made with
// the process as the source (ctl.go).
func (m *Room) Grafts() []ns.Graft {
	return []ns.Graft{{
		At: "/proc/*",
		Files: func(d ns.GraftDir) []vfs.DirEntry {
			pid := d.Names[0]
			meta := d.Owner.At(d.Path+"/ipc", 0o400).WithChanged(ns.Later(d.Changed,
				func(context.Context, vfs.Cred) time.Time { return m.changes.At(time.Time{}, pid+"/ipc") }))
			return []vfs.DirEntry{{Name: "ipc", Node: m.ipcView(meta, pid)}}
		},
		Verbs: func(d ns.GraftDir) map[string]ns.CtlVerb { return ipcVerbs(d.Names[0]) },
	}}
}

// Start is what follows registration (ns.Starter): the watched names are
// loaded and the bus observed, and the calls a stop left are reconciled
// and armed again (resumeCalls). Add the room after the process room:
// Start asks it how the calls' runs stand.
func (m *Room) Start(ctx context.Context) error {
	if err := m.startWatches(ctx); err != nil {
		return err
	}
	return m.resumeCalls(ctx)
}

// Close stops the room for a shutdown (ns.Room): the deadline timers and
// the watcher goroutine stop, and Close waits for the work under way
// (an answer being delivered). Pending calls stay pending in the store,
// and Start arms them again. Close it before the process room.
func (m *Room) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.stopCalls()
	m.stopWatches()
	m.wg.Wait()
	return nil
}

// sysIpcEnded serves proc.ipc.ended (kernel-only): the process room tells
// that a run ended; the call that waited for it, if any, is answered.
func (m *Room) sysIpcEnded(ctx context.Context, c *kernel.Caller, a *abi.IpcEndedArgs) (*abi.IpcEndedResult, error) {
	return &abi.IpcEndedResult{Waited: m.runEnded(a.RunID, a.Status, a.Error)}, nil
}

// sysForget serves signal.forget (kernel-only): the process room kills a
// process, and its watches go first, so that none fires to start it again.
func (m *Room) sysForget(ctx context.Context, c *kernel.Caller, a *abi.SignalForgetArgs) (*abi.UnwatchResult, error) {
	if a.Pid == "" {
		return nil, abi.E(abi.Invalid, "pid is required")
	}
	n, err := m.removeWatches(ctx, `watcher_pid=?`, a.Pid)
	if err != nil {
		return nil, abi.E(abi.Path(a.Pid), err)
	}
	return &abi.UnwatchResult{Removed: n}, nil
}

// The process room, asked through the dispatcher.

// get returns the record of pid (proc.get as the kernel, who sees every
// process): a process that is not stored does not exist.
func (m *Room) get(ctx context.Context, pid string) (*abi.Process, error) {
	p, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.ProcGet, &abi.PidArgs{Pid: pid})
	return p, ownError(err)
}

// lookup returns pid's record if c may touch it (proc.get as c: its owner
// or root; another user's process does not exist). An empty pid is c's
// init process.
func (m *Room) lookup(ctx context.Context, c *kernel.Caller, pid string) (*abi.Process, error) {
	p, err := kernel.Do(ctx, m.k, &kernel.Caller{Identity: c.Identity}, abi.ProcGet, &abi.PidArgs{Pid: pid})
	return p, ownError(err)
}

// otherProcess is the error for c naming pid, another owner's process,
// where a rule (why) wants the caller's own: for root, who sees every
// process, the rule's 403; for anyone else the 404 of a pid that does not
// exist (as proc.get says it), so that a refusal never tells that another
// user's process is there.
func (m *Room) otherProcess(c *kernel.Caller, pid, why string) error {
	if c.IsRoot() {
		return abi.E(abi.Path(pid), abi.Permission, why)
	}
	return noProcess(pid)
}

// noProcess is the error of a pid that names no process the caller may
// see, as the process room says it: one that does not exist and another
// user's are told apart by nobody but root.
func noProcess(pid string) error {
	return abi.E(abi.Path(pid), abi.NotExist, "no such process")
}

// event is what the room delivers into a conversation (proc.deliver):
// its kind (abi.Event*), the principal it came from, its trace and text;
// a Runtime event is a visible system message. RunID, if set, is the id
// of the run it starts; Cap the narrowing it carries; within runs in the
// transaction that enters it.
type event struct {
	Kind    string
	Source  abi.EventSource
	TraceID string
	Text    string
	Runtime bool
	RunID   string
	Cap     *abi.ProcessCap
	within  func(tx abi.StoreTx) error
}

// deliver delivers ev to conversation cid of p (proc.deliver): it starts
// a run of p, or queues behind its running one.
func (m *Room) deliver(ctx context.Context, p *abi.Process, cid string, ev event) (runID string, queued bool, err error) {
	res, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.ProcDeliver, &abi.DeliverArgs{Pid: p.Pid, Uid: p.Uid, ConversationID: cid,
		Kind: ev.Kind, Source: ev.Source, TraceID: ev.TraceID, Text: ev.Text, Runtime: ev.Runtime, RunID: ev.RunID, Process: ev.Cap,
		Within: ev.within})
	if err != nil {
		return "", false, ownError(err)
	}
	return res.RunID, res.Queued, nil
}

// convState is how conversation cid of pid stands (with current: the one
// its current run is in).
func (m *Room) convState(ctx context.Context, pid, cid string, current bool) (*abi.ConvState, error) {
	st, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.ProcConversationState, &abi.ConvStateArgs{Pid: pid, ConversationID: cid, Current: current})
	return st, ownError(err)
}

// runState is how run stands, with its final answer if answer.
func (m *Room) runState(ctx context.Context, run string, answer bool) (*abi.RunState, error) {
	st, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.ProcRunState, &abi.RunStateArgs{RunID: run, Answer: answer})
	return st, ownError(err)
}

// workCap is the narrowing of the work of conversation cid of pid: the
// process's and the conversation's (its live generation's). A process
// that does not exist is a 404.
func (m *Room) workCap(ctx context.Context, pid, cid string) (*abi.ProcessCap, error) {
	st, err := m.convState(ctx, pid, cid, false)
	if err != nil {
		return nil, err
	}
	return st.Cap, nil
}

// ownError is err, an error of a syscall the room made on its caller's
// behalf, as the room's own: without that syscall's name, which the
// dispatcher puts in front of the room's call's name.
func ownError(err error) error {
	var e *abi.Error
	if errors.As(err, &e) && e == err && e.Op != "" {
		c := *e
		c.Op = ""
		return &c
	}
	return err
}

func now() int64 { return time.Now().UnixMilli() }

// newID returns prefix and 16 random hex digits.
func newID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// orDefault is cid, or "default" when it is empty.
func orDefault(cid string) string {
	if cid == "" {
		return "default"
	}
	return cid
}
