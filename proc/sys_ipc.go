package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The process room's side of IPC (docs/ipc.md). The ipc room keeps the
// calls between processes and the signal watches; what it needs of
// processes and conversations it asks here, through the dispatcher
// (proc.deliver, proc.conversation.state, proc.run.state, and proc.get
// and proc.spawn), and proc tells it when a run ends (proc.ipc.ended) and
// before a process is killed (signal.forget).

// sysDeliver serves proc.deliver (kernel-only): an event of another room
// into conversation ConversationID of a process (SendEvent). The caller
// checked the process and its owner.
func (m *engine) sysDeliver(ctx context.Context, c *kernel.Caller, a *abi.DeliverArgs) (*abi.DeliverResult, error) {
	cid := orDefault(a.ConversationID)
	runID, queued, err := m.SendEvent(ctx, &abi.Process{Pid: a.Pid, Uid: a.Uid}, cid, Event{Kind: a.Kind, Source: a.Source,
		TraceID: a.TraceID, Text: a.Text, Runtime: a.Runtime, RunID: a.RunID, Cap: a.Process, within: a.Within})
	if err != nil {
		return nil, err
	}
	return &abi.DeliverResult{ConversationID: cid, RunID: runID, Queued: queued}, nil
}

// sysConvState serves proc.conversation.state (kernel-only): how a
// conversation of a process stands, or (Current) the one its current run
// is in, else its default.
func (m *engine) sysConvState(ctx context.Context, c *kernel.Caller, a *abi.ConvStateArgs) (*abi.ConvState, error) {
	out := &abi.ConvState{ConversationID: orDefault(a.ConversationID)}
	if a.Current {
		m.mu.Lock()
		pr := m.procs[a.Pid]
		m.mu.Unlock()
		if pr != nil {
			pr.mu.Lock()
			if pr.run != nil {
				out.ConversationID, out.RunID = pr.run.cid, pr.run.id
			}
			pr.mu.Unlock()
		}
	}
	var pcap, ccap, status sql.NullString
	var gen sql.NullInt64
	err := m.st.QueryRowContext(ctx, `SELECT p.process_cap, c.generation, c.status, c.process_cap FROM proc_processes p
		LEFT JOIN proc_conversations c ON c.pid=p.pid AND c.cid=? WHERE p.pid=?`, out.ConversationID, a.Pid).Scan(&pcap, &gen, &status, &ccap)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, noProcess(a.Pid)
	}
	if err != nil {
		return nil, abi.E(abi.Path(a.Pid), err)
	}
	out.Generation, out.Status, out.Cap = gen.Int64, status.String, abi.NarrowCap(abi.CapFromValue(pcap), abi.CapFromValue(ccap))
	return out, nil
}

// sysRunState serves proc.run.state (kernel-only): where a run stands,
// the narrowing it acts within and, asked, its final answer.
func (m *engine) sysRunState(ctx context.Context, c *kernel.Caller, a *abi.RunStateArgs) (*abi.RunState, error) {
	out := &abi.RunState{}
	if a.RunID == "" {
		return out, nil
	}
	var errText sql.NullString
	err := m.st.QueryRowContext(ctx, `SELECT pid,status,error FROM proc_runs WHERE run_id=?`, a.RunID).Scan(&out.Pid, &out.Status, &errText)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil // not recorded (yet: its message may wait in the queue)
	}
	if err != nil {
		return nil, abi.E(abi.Path(a.RunID), err)
	}
	out.Error = errText.String
	if out.Cap, err = m.runCap(ctx, a.RunID); err != nil {
		return nil, abi.E(abi.Path(a.RunID), err)
	}
	if a.Answer {
		if out.Answer, err = m.runAnswer(ctx, out.Pid, a.RunID); err != nil {
			return nil, abi.E(abi.Path(a.RunID), err)
		}
	}
	return out, nil
}

// runAnswer is the text of the last answer of the model in run (after
// the run's first message), as the model gave it; "" if it gave none.
func (m *engine) runAnswer(ctx context.Context, pid, run string) (string, error) {
	var content string
	err := m.st.QueryRowContext(ctx, `SELECT m.content FROM proc_messages m JOIN proc_runs r ON r.run_id=?
		WHERE m.pid=? AND m.cid=r.cid AND m.generation=r.generation AND m.id>r.first_message AND m.role='assistant'
		ORDER BY m.id DESC LIMIT 1`, run, pid).Scan(&content)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var ac assistantContent
	if json.Unmarshal([]byte(content), &ac) != nil {
		return "", nil
	}
	return ac.Text, nil
}

// runEnded tells the ipc room that run ended (proc.ipc.ended): the call
// that waited for it is answered.
func (m *engine) runEnded(run, status, errText string) {
	if err := tell(context.Background(), m.k, abi.ProcIpcEnded, &abi.IpcEndedArgs{RunID: run, Status: status, Error: errText}); err != nil {
		m.log.Error("proc: tell the end of a run", "run", run, "err", err)
	}
}

// forgetWatches tells the ipc room that pid is being killed
// (signal.forget): its watches go first, so that none fires to start it
// again once its runs are aborted.
func (m *Manager) forgetWatches(ctx context.Context, pid string) error {
	return tell(ctx, m.k, abi.SignalForget, &abi.SignalForgetArgs{Pid: pid})
}

// tell makes d, a kernel-only syscall of a room that proc informs of its
// work, as the kernel. A system without that room (a test of proc's
// parts that need none) has nobody to tell, which is no error.
func tell[A, R any](ctx context.Context, k *kernel.Kernel, d abi.Call[A, R], args *A) error {
	kc := k.KernelCaller()
	if err := k.Permit(kc, d.Name); err != nil && abi.KindOf(err) == abi.Invalid {
		return nil // nobody serves it
	}
	_, err := kernel.Do(ctx, k, kc, d, args)
	return err
}
