package proc

import (
	"context"
	"database/sql"
	"errors"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The narrowing of the process capability travels with the work.
//
// A caller may be narrowed (kernel.Identity.Process: a token made with
// --process; a process's own calls, narrowed by what its work carries).
// Whatever such a caller starts that runs later acts within its
// narrowing, so that no way to run a command escapes it:
//
//   - a process it spawns is narrowed for its life (proc_processes);
//   - a message it sends (proc.send, ctl send, a conversation's in file,
//     IPC, a spawn's prompt, a schedule's fire) carries its narrowing
//     (proc_queue while it waits), and narrows the conversation it
//     enters, for that conversation's generation (proc_conversations):
//     the model reads the sender's words in every later run of it, so
//     every later run acts within the sender's narrowing, until a reset
//     archives them. A fork carries its source's narrowing (a segment
//     keeps its conversation's, proc_segments);
//   - its answers to a run's HIL requests, its directives and steering
//     messages, a summary it writes in a compaction, narrow the
//     conversation they enter in the same way, before they take effect;
//   - a watch it arms carries its narrowing to every delivery
//     (proc_watches), as does a reply to the run that answered it: the
//     ipc room keeps them, and proc.conversation.state and
//     proc.run.state tell it the narrowing of the work concerned.
//
// Every tool call of a run (and each nested call of its CodeMode
// blocks) acts as the process's owner with the intersection
// (abi.NarrowCap) of the process's narrowing and its conversation's, read
// when the call is made. Narrowing only ever narrows; nothing here widens.

// narrowConvTx narrows generation gen (0: the live one, whichever it
// is) of conversation cid of pid by pc, in tx (a transaction of the
// store's Tx). nil changes nothing; a generation that is gone has
// nothing to narrow.
func (m *engine) narrowConvTx(tx *kernel.Tx, pid, cid string, gen int64, pc *abi.ProcessCap) error {
	if pc == nil {
		return nil
	}
	var cur sql.NullString
	err := m.st.TxQueryRow(tx, `SELECT generation, process_cap FROM proc_conversations WHERE pid=? AND cid=? AND (generation=? OR ?=0)`,
		pid, cid, gen, gen).Scan(&gen, &cur)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = m.st.TxExec(tx, `UPDATE proc_conversations SET process_cap=? WHERE pid=? AND cid=? AND generation=?`,
		abi.CapValue(abi.NarrowCap(abi.CapFromValue(cur), pc)), pid, cid, gen)
	return err
}

// narrowConv is narrowConvTx in a transaction of its own.
func (m *engine) narrowConv(ctx context.Context, pid, cid string, gen int64, pc *abi.ProcessCap) error {
	if pc == nil {
		return nil
	}
	return m.st.Tx(ctx, func(tx *kernel.Tx) error { return m.narrowConvTx(tx, pid, cid, gen, pc) })
}

// actingCaller is base (processCaller's: the process's narrowing) acting
// for the work of generation gen of conversation cid of pid: its
// narrowing intersected with the conversation's as it is now, so that
// what entered the conversation since binds every later call. A
// generation that is gone (a reset) is errStale: the run is over.
func (m *engine) actingCaller(ctx context.Context, base *kernel.Caller, pid, cid string, gen int64) (*kernel.Caller, error) {
	var ccap sql.NullString
	err := m.st.QueryRowContext(ctx, `SELECT process_cap FROM proc_conversations WHERE pid=? AND cid=? AND generation=?`, pid, cid, gen).Scan(&ccap)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errStale
	}
	if err != nil {
		return nil, err
	}
	pc := abi.CapFromValue(ccap)
	if pc == nil {
		return base, nil
	}
	id := *base.Identity
	id.Process = abi.NarrowCap(base.Identity.Process, pc)
	return &kernel.Caller{Identity: &id, Origin: base.Origin}, nil
}

// runCap is the narrowing run runID acts within: its process's and its
// conversation generation's (a reply carries it). A run not recorded
// narrows nothing more than its process does: there is none.
func (m *engine) runCap(ctx context.Context, runID string) (*abi.ProcessCap, error) {
	var pcap, ccap sql.NullString
	err := m.st.QueryRowContext(ctx, `SELECT p.process_cap, c.process_cap FROM proc_runs r JOIN proc_processes p ON p.pid=r.pid
		LEFT JOIN proc_conversations c ON c.pid=r.pid AND c.cid=r.cid AND c.generation=r.generation WHERE r.run_id=?`, runID).Scan(&pcap, &ccap)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return abi.NarrowCap(abi.CapFromValue(pcap), abi.CapFromValue(ccap)), nil
}
