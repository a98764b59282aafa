package sched

// The tests' stand-in for proc, and the names the tests give the abi
// records. sched never imports proc, not even in its tests: the unit
// boundary is the dispatcher, where a small room serves the proc.*
// syscalls sched makes, with proc's abi types, and records what it got.
// The real sched -> proc path is covered by cmd/gsvfs's TestE2ESched*.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// The abi records under the names the tests use.
type (
	Schedule   = abi.Schedule
	Expression = abi.Expression
	Target     = abi.Target
	Retry      = abi.Retry
	Run        = abi.Run
	RunResult  = abi.RunOutcome
)

// procCall is one proc.* syscall the room served: who made it, its name
// and its args (an abi type).
type procCall struct {
	Uid  uint32
	Name string
	Args any
	// Cap is the narrowing of the process capability the call was made
	// with (the caller identity's Process).
	Cap *abi.ProcessCap
}

// procRoom serves proc.spawn, proc.send, proc.status,
// proc.conversation.get, .compact, .reset and proc.checkpoint as proc's
// rule has it for the scheduler: each user u has the process init:<u>,
// proc.spawn makes p_<n> owned by its caller (a profile named nosuch...
// is unknown, 400), a process is reachable by
// its owner only (404 "no such process" for anyone else), and a process
// has the conversation "default" (and those given to addConv).
type procRoom struct {
	mu    sync.Mutex
	n     int
	owner map[string]uint32          // spawned pids
	convs map[string]map[string]bool // extra conversations by pid
	calls []procCall
	// coalesce makes proc.send answer coalesced (a tick of the schedule
	// still waits in the target's queue), as proc does.
	coalesce bool
}

var _ ns.Room = (*procRoom)(nil)

func newProcRoom() *procRoom {
	return &procRoom{owner: map[string]uint32{}, convs: map[string]map[string]bool{}}
}

// Syscalls implements ns.Room.
func (p *procRoom) Syscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.ProcSpawn, p.spawn),
		kernel.Handle(abi.ProcSend, p.send),
		kernel.Handle(abi.ProcStatus, p.status),
		kernel.Handle(abi.ProcConversationGet, p.conversationGet),
		kernel.Handle(abi.ProcConversationCompact, p.compact),
		kernel.Handle(abi.ProcConversationReset, p.reset),
		kernel.Handle(abi.ProcCheckpoint, p.checkpoint),
	}
}

// Mounts implements ns.Room: the room has no files.
func (p *procRoom) Mounts() []ns.Mount { return nil }

// Close implements ns.Room: the room has no goroutines.
func (p *procRoom) Close() error { return nil }

// record notes a call and checks that c may reach pid ("" for none).
func (p *procRoom) record(c *kernel.Caller, name, pid string, args any) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, procCall{c.Uid, name, args, c.Identity.Process})
	if pid == "" {
		return nil
	}
	uid, ok := p.owner[pid]
	if rest, init := strings.CutPrefix(pid, "init:"); init {
		n, err := strconv.ParseUint(rest, 10, 32)
		uid, ok = uint32(n), err == nil
	}
	if !ok || (uid != c.Uid && !c.IsRoot()) {
		return abi.E(abi.Path(pid), abi.NotExist, "no such process")
	}
	return nil
}

// addConv gives pid the conversation id.
func (p *procRoom) addConv(pid, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.convs[pid] == nil {
		p.convs[pid] = map[string]bool{}
	}
	p.convs[pid][id] = true
}

// callsOf returns the calls of the syscall name served so far.
func (p *procRoom) callsOf(name string) []procCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []procCall
	for _, c := range p.calls {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func (p *procRoom) spawn(ctx context.Context, c *kernel.Caller, a *abi.SpawnArgs) (*abi.SpawnResult, error) {
	if err := p.record(c, "proc.spawn", "", a); err != nil {
		return nil, err
	}
	if strings.HasPrefix(a.Profile, "nosuch") {
		return nil, abi.E(abi.Path(a.Profile), abi.Invalid, "unknown profile")
	}
	p.mu.Lock()
	p.n++
	pid := fmt.Sprintf("p_%d", p.n)
	p.owner[pid] = c.Uid
	p.mu.Unlock()
	return &abi.SpawnResult{OK: true, Pid: pid, Profile: a.Profile, Cwd: "/"}, nil
}

func (p *procRoom) send(ctx context.Context, c *kernel.Caller, a *abi.SendArgs) (*abi.SendResult, error) {
	if err := p.record(c, "proc.send", a.Pid, a); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.coalesce {
		return &abi.SendResult{OK: true, Status: "coalesced", RunID: "r_0", Queued: true, Coalesced: true}, nil
	}
	return &abi.SendResult{OK: true, Status: "started", RunID: "r_1"}, nil
}

func (p *procRoom) status(ctx context.Context, c *kernel.Caller, a *abi.PidArgs) (*abi.StatusResult, error) {
	if err := p.record(c, "proc.status", a.Pid, a); err != nil {
		return nil, err
	}
	return &abi.StatusResult{OK: true, Pid: a.Pid}, nil
}

func (p *procRoom) conversationGet(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.ConversationGetResult, error) {
	if err := p.record(c, "proc.conversation.get", a.Pid, a); err != nil {
		return nil, err
	}
	res := &abi.ConversationGetResult{OK: true, Pid: a.Pid}
	p.mu.Lock()
	if a.ConversationID == "" || a.ConversationID == "default" || p.convs[a.Pid][a.ConversationID] {
		res.Conversation = &abi.Conversation{ID: a.ConversationID, Status: "open"}
	}
	p.mu.Unlock()
	return res, nil
}

func (p *procRoom) compact(ctx context.Context, c *kernel.Caller, a *abi.CompactArgs) (*abi.CompactResult, error) {
	if err := p.record(c, "proc.conversation.compact", a.Pid, a); err != nil {
		return nil, err
	}
	return &abi.CompactResult{OK: true, Pid: a.Pid, ConversationID: a.ConversationID}, nil
}

func (p *procRoom) reset(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.ConvResetResult, error) {
	if err := p.record(c, "proc.conversation.reset", a.Pid, a); err != nil {
		return nil, err
	}
	return &abi.ConvResetResult{OK: true, Pid: a.Pid, ConversationID: a.ConversationID}, nil
}

func (p *procRoom) checkpoint(ctx context.Context, c *kernel.Caller, a *abi.CheckpointArgs) (*abi.CheckpointResult, error) {
	if err := p.record(c, "proc.checkpoint", a.Pid, a); err != nil {
		return nil, err
	}
	return &abi.CheckpointResult{OK: true, Pid: a.Pid}, nil
}
