package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"gsvfs.dev/gsvfs/abi"
)

// Human-in-the-loop approvals: the requests a run waits on, and their
// answers (proc.hil).

// allowed says whether pid remembered an approval for syscall.
func (m *Manager) allowed(ctx context.Context, pid, syscall string) (bool, error) {
	list, err := hilAllow(m.st.QueryRowContext(ctx, `SELECT hil_allow FROM proc_processes WHERE pid=?`, pid))
	return slices.Contains(list, syscall), err
}

// hilAllow reads a process's remembered approvals (hil_allow, a JSON list
// of syscalls) from row.
func hilAllow(row *sql.Row) ([]string, error) {
	var s string
	if err := row.Scan(&s); err != nil {
		return nil, err
	}
	var list []string
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return nil, fmt.Errorf("hil_allow: %w", err)
	}
	return list, nil
}

// Hil answers a pending request: approve runs the call, deny gives the
// model "denied by user"; remember (with approve) allows the syscall for
// the rest of the process's life. A request that is not pending (answered,
// or made stale by an abort or reset) is an error.
func (m *Manager) Hil(ctx context.Context, p *abi.Process, requestID, decision string, remember bool) (*abi.HilResult, error) {
	if decision != "approve" && decision != "deny" {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("decision must be approve or deny, not %q", decision))
	}
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var runID, syscall string
	err := m.st.QueryRowContext(ctx, `SELECT run_id,syscall FROM proc_hil WHERE pid=? AND request_id=? AND status='pending'`, p.Pid, requestID).Scan(&runID, &syscall)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(requestID), abi.NotExist, fmt.Sprintf("no pending HIL request %s (answered, stale, or never asked)", requestID))
	}
	if err != nil {
		return nil, abi.E(abi.Path(requestID), err)
	}
	status := "approved"
	if decision == "deny" {
		status = "denied"
	}
	err = m.st.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := m.st.TxExec(tx, `UPDATE proc_hil SET status=? WHERE request_id=?`, status, requestID); err != nil {
			return err
		}
		if remember && decision == "approve" {
			list, err := hilAllow(m.st.TxQueryRow(tx, `SELECT hil_allow FROM proc_processes WHERE pid=?`, p.Pid))
			if err != nil {
				return err
			}
			list = append(list, syscall)
			slices.Sort(list)
			b, err := json.Marshal(slices.Compact(list))
			if err != nil {
				return err
			}
			if _, err := m.st.TxExec(tx, `UPDATE proc_processes SET hil_allow=? WHERE pid=?`, string(b), p.Pid); err != nil {
				return err
			}
		}
		_, err := m.st.TxExec(tx, `UPDATE proc_runs SET status='running' WHERE run_id=? AND status='waiting_hil'`, runID)
		return err
	})
	if err != nil {
		return nil, abi.E(abi.Path(requestID), err)
	}
	// A run still running (its goroutine has not yet taken pr.mu to wait)
	// resumes itself: it finds no request pending. An aborted run is not
	// resumed: its aborter records its end.
	resumed := false
	if r := pr.run; r != nil && r.id == runID && pr.state == waiting && r.stop != stopAbort {
		m.startLocked(pr, r)
		resumed = true
	}
	m.changed(p.Uid, p.Pid, "hil", map[string]any{"requestId": requestID, "decision": decision})
	return &abi.HilResult{OK: true, Pid: p.Pid, RequestID: requestID, Decision: decision, Resumed: resumed,
		Remembered: remember && decision == "approve"}, nil
}

// pendingHil returns pid's pending HIL request, or nil.
func (m *Manager) pendingHil(ctx context.Context, pid string) (*abi.HilRequest, error) {
	var h abi.HilRequest
	var args string
	err := m.st.QueryRowContext(ctx, `SELECT request_id,run_id,cid,call_id,tool_name,syscall,args,created_at FROM proc_hil WHERE pid=? AND status='pending' ORDER BY created_at LIMIT 1`, pid).
		Scan(&h.RequestID, &h.RunID, &h.ConversationID, &h.CallID, &h.ToolName, &h.Syscall, &args, &h.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.Args = json.RawMessage(args)
	h.Target = argsTarget(h.Args)
	return &h, nil
}

// argsTarget is the target device a tool call's args name, "" for none.
func argsTarget(args json.RawMessage) string {
	var a struct {
		Target string `json:"target"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	return a.Target
}
