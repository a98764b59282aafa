package proc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Human-in-the-loop approvals: the requests a run waits on, and their
// answers (proc.hil). A request is bound to the digest of the args it
// shows and expires; an answer approves the args shown or edited args,
// denies, or substitutes a result for the call.

// hilMigrations is the approvals' part of the schema, a component of its
// own ("proc.hil") migrated after proc's: proc_hil gains the digest of
// the args shown (args_digest), the expiry (expires_at, Unix ms; 0 for
// never, as for the requests stored before), and the answer's edited
// args and their digest (edited_args, edited_digest) or substituted
// result (result).
var hilMigrations = []string{
	`ALTER TABLE proc_hil ADD COLUMN args_digest TEXT NOT NULL DEFAULT '';
	ALTER TABLE proc_hil ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE proc_hil ADD COLUMN edited_args TEXT;
	ALTER TABLE proc_hil ADD COLUMN edited_digest TEXT;
	ALTER TABLE proc_hil ADD COLUMN result TEXT;`,
}

// migrateHil migrates the approvals' part of the schema.
func migrateHil(st *kernel.Store) error { return st.Migrate("proc.hil", hilMigrations) }

// DefaultHilExpiry is how long a request waits for an answer unless the
// owner's config/ai/hil_expiry (or users/<uid>/ai/hil_expiry) says
// otherwise.
const DefaultHilExpiry = time.Hour

// MaxSubstitute is the longest result (bytes) a substitute answer gives.
const MaxSubstitute = 1 << 20

// Tool results of calls that ran nothing: a denied call and an
// interrupted one (an abort) read as upstream's (the seed's runtime), so
// that prompts and agents written for GSV read them.
const (
	resultDenied      = "Tool execution denied by user"
	resultInterrupted = "User interrupted tool execution"
	resultExpired     = "approval expired: not run (an expired request counts as denied)"
)

// hilExpiry is how long uid's requests wait: hil_expiry of the owner's AI
// configuration, a Go duration ("30m") or whole seconds; anything else
// (absent, unparsable, not positive) is DefaultHilExpiry.
func (m *engine) hilExpiry(ctx context.Context, uid uint32) time.Duration {
	cfg, _ := m.aiConfig(ctx, uid)
	v := cfg["hil_expiry"]
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 && s < 1<<33 {
		return time.Duration(s) * time.Second
	}
	return DefaultHilExpiry
}

// argsDigest is the digest a request is bound to: "sha256:" and the hex
// SHA-256 of args in canonical JSON (canonicalJSON).
func argsDigest(args json.RawMessage) string {
	c, err := canonicalJSON(args)
	if err != nil {
		c = args
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalJSON is v compact with its objects' keys sorted, its numbers
// as written, and <, > and & as themselves (not escaped).
func canonicalJSON(v json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// editedArgs checks edited args of a call of the tool named toolName as
// the tool's own args are checked, strictly: the tool's conversion
// (Shell's command is the syscall's input), then the syscall's args with
// no unknown field and the field the call needs. It returns them in
// canonical JSON.
func editedArgs(toolName string, raw json.RawMessage) (json.RawMessage, error) {
	t := toolByName(toolName)
	if t == nil {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("the args of tool %q cannot be edited", toolName))
	}
	args, err := t.args(raw)
	if err != nil {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("edited args: %v", err))
	}
	var need, field string
	switch t.syscall {
	case abi.FsWrite.Name:
		var a abi.FSWriteArgs
		err, need, field = abi.DecodeArgs(args, &a), a.Path, "path"
	case abi.FsEdit.Name:
		var a abi.FSEditArgs
		err, need, field = abi.DecodeArgs(args, &a), a.Path, "path"
	case abi.FsDelete.Name:
		var a abi.FSDeleteArgs
		err, need, field = abi.DecodeArgs(args, &a), a.Path, "path"
	case abi.ShellExec.Name:
		var a abi.ShellExecArgs
		err, need, field = abi.DecodeArgs(args, &a), a.Input, "command"
	default:
		return nil, abi.E(abi.Invalid, fmt.Sprintf("the args of %s cannot be edited", t.syscall))
	}
	if err != nil {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("edited args of %s: %v", toolName, err))
	}
	if need == "" {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("edited args of %s: %s is required", toolName, field))
	}
	return canonicalJSON(args)
}

// allowed says whether pid remembered an approval for syscall.
func (m *engine) allowed(ctx context.Context, pid, syscall string) (bool, error) {
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

// hilDecision is an answer as stored: the request's new status
// (approved, denied, substituted, expired) and what goes with it.
type hilDecision struct {
	status   string
	remember bool
	edited   json.RawMessage // approved edited args, nil for the args shown
	result   string          // substituted
}

// Hil answers a pending request. approve runs the call (with a.Args, the
// edited args, if set), deny gives the model resultDenied, substitute
// gives the model a.Result without running the call; remember (with
// approve) allows the request's syscall for the rest of the process's
// life. A request that is not pending (answered, or made stale by an
// abort or reset) is a 404; an expired one, or one past its expiry, is a
// 409, and the run gets "approval expired".
//
// narrow is the answerer's narrowing (kernel.Identity.Process): an
// answer it gives narrows the run's conversation first, so that the call
// it approves (with its edits) and whatever the model does with its text
// act within it.
func (m *engine) Hil(ctx context.Context, p *abi.Process, a *abi.HilArgs, narrow *abi.ProcessCap) (*abi.HilResult, error) {
	edits := len(a.Args) > 0 && string(a.Args) != "null"
	switch {
	case a.Decision != "approve" && a.Decision != "deny" && a.Decision != "substitute":
		return nil, abi.E(abi.Invalid, fmt.Sprintf("decision must be approve, deny or substitute, not %q", a.Decision))
	case a.Remember && a.Decision != "approve":
		return nil, abi.E(abi.Invalid, "remember goes with approve")
	case edits && a.Decision != "approve":
		return nil, abi.E(abi.Invalid, "args (edited args) go with approve")
	case a.Result != "" && a.Decision != "substitute":
		return nil, abi.E(abi.Invalid, "result goes with substitute")
	case a.Decision == "substitute" && a.Result == "":
		return nil, abi.E(abi.Invalid, "substitute needs a result: the text the model gets")
	case len(a.Result) > MaxSubstitute:
		return nil, abi.E(abi.Invalid, fmt.Sprintf("result is %d bytes, more than %d", len(a.Result), MaxSubstitute))
	}
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var runID, toolName, syscall, digest, status, cid string
	var expiresAt, gen int64
	err := m.st.QueryRowContext(ctx, `SELECT run_id,tool_name,syscall,args_digest,expires_at,status,cid,generation FROM proc_hil WHERE pid=? AND request_id=?`, p.Pid, a.RequestID).
		Scan(&runID, &toolName, &syscall, &digest, &expiresAt, &status, &cid, &gen)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(a.RequestID), abi.NotExist, fmt.Sprintf("no pending HIL request %s (answered, stale, or never asked)", a.RequestID))
	}
	if err != nil {
		return nil, abi.E(abi.Path(a.RequestID), err)
	}
	expired := abi.E(abi.Path(a.RequestID), abi.Busy, fmt.Sprintf("HIL request %s expired at %s: it can no longer be answered (its run got %q)",
		a.RequestID, time.UnixMilli(expiresAt).UTC().Format(time.RFC3339), resultExpired))
	switch {
	case status == "expired":
		return nil, expired
	case status != "pending":
		return nil, abi.E(abi.Path(a.RequestID), abi.NotExist, fmt.Sprintf("no pending HIL request %s (it is %s)", a.RequestID, status))
	case expiresAt > 0 && now() >= expiresAt:
		// Its timer has not fired yet: it expires now.
		if _, err := m.decideLocked(ctx, pr, p.Pid, p.Uid, a.RequestID, runID, syscall, hilDecision{status: "expired"}); err != nil {
			return nil, abi.E(abi.Path(a.RequestID), err)
		}
		return nil, expired
	case a.ArgsDigest != "" && a.ArgsDigest != digest:
		return nil, abi.E(abi.Path(a.RequestID), abi.Busy, fmt.Sprintf("HIL request %s shows args with digest %s, not %s: answer the request as it is now shown", a.RequestID, digest, a.ArgsDigest))
	}
	d := hilDecision{status: map[string]string{"approve": "approved", "deny": "denied", "substitute": "substituted"}[a.Decision],
		remember: a.Remember, result: a.Result}
	res := &abi.HilResult{OK: true, Pid: p.Pid, RequestID: a.RequestID, Decision: a.Decision, Remembered: a.Remember}
	if a.Decision == "approve" {
		res.ArgsDigest = digest
	}
	if edits {
		if d.edited, err = editedArgs(toolName, a.Args); err != nil {
			return nil, abi.E(abi.Path(a.RequestID), err)
		}
		res.ArgsDigest, res.Edited = argsDigest(d.edited), true
	}
	if err := m.narrowConv(ctx, p.Pid, cid, gen, narrow); err != nil {
		return nil, abi.E(abi.Path(a.RequestID), err)
	}
	if res.Resumed, err = m.decideLocked(ctx, pr, p.Pid, p.Uid, a.RequestID, runID, syscall, d); err != nil {
		return nil, abi.E(abi.Path(a.RequestID), err)
	}
	return res, nil
}

// decideLocked stores decision d on the pending request requestID of pid
// (asked by run runID for syscall) and makes the run runnable again; it
// resumes the run if it waits (pr.mu held). A run still running (its
// goroutine has not yet taken pr.mu to wait) resumes itself: it finds no
// request pending. An aborted run is not resumed: its aborter records its
// end. A request no longer pending is left as it is.
func (m *engine) decideLocked(ctx context.Context, pr *process, pid string, uid uint32, requestID, runID, syscall string, d hilDecision) (resumed bool, err error) {
	decided := false
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		var edited, editedDigest, result any
		if d.edited != nil {
			edited, editedDigest = string(d.edited), argsDigest(d.edited)
		}
		if d.status == "substituted" {
			result = d.result
		}
		res, err := m.st.TxExec(tx, `UPDATE proc_hil SET status=?, edited_args=?, edited_digest=?, result=? WHERE request_id=? AND status='pending'`,
			d.status, edited, editedDigest, result, requestID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		decided = true
		if d.remember && d.status == "approved" {
			list, err := hilAllow(m.st.TxQueryRow(tx, `SELECT hil_allow FROM proc_processes WHERE pid=?`, pid))
			if err != nil {
				return err
			}
			list = append(list, syscall)
			slices.Sort(list)
			b, err := json.Marshal(slices.Compact(list))
			if err != nil {
				return err
			}
			if _, err := m.st.TxExec(tx, `UPDATE proc_processes SET hil_allow=? WHERE pid=?`, string(b), pid); err != nil {
				return err
			}
		}
		_, err = m.st.TxExec(tx, `UPDATE proc_runs SET status='running' WHERE run_id=? AND status='waiting_hil'`, runID)
		return err
	})
	if err != nil || !decided {
		return false, err
	}
	if ch, ok := m.hilWaiters.LoadAndDelete(requestID); ok {
		// A block's nested call waits for this answer inside the run.
		close(ch.(chan struct{}))
	}
	if r := pr.run; r != nil && r.id == runID && pr.state == waiting && r.stop != stopAbort {
		m.startLocked(pr, r)
		resumed = true
	}
	decision := map[string]string{"approved": "approve", "denied": "deny", "substituted": "substitute", "expired": "expire"}[d.status]
	m.changed(uid, abi.ProcChanged{Pid: pid, Change: "hil", RequestID: requestID, Decision: decision})
	return resumed, nil
}

// expireLater expires request requestID of pid at at (Unix ms; 0: never)
// if it is still pending then. The timer is not stopped by Close: when it
// fires after Close it does nothing, and Start arms the pending requests'
// timers again (armHilExpiries).
func (m *engine) expireLater(pid string, uid uint32, requestID string, at int64) {
	if at <= 0 {
		return
	}
	time.AfterFunc(time.Until(time.UnixMilli(at)), func() {
		m.background(func() { m.expireHil(pid, uid, requestID) })
	})
}

// expireHil expires request requestID of pid if it is still pending: its
// run resumes and gets "approval expired".
func (m *engine) expireHil(pid string, uid uint32, requestID string) {
	ctx := context.Background()
	var runID, syscall string
	err := m.st.QueryRowContext(ctx, `SELECT run_id,syscall FROM proc_hil WHERE request_id=? AND status='pending'`, requestID).Scan(&runID, &syscall)
	if errors.Is(err, sql.ErrNoRows) {
		return // answered or stale
	}
	if err == nil {
		pr := m.proc(pid, uid)
		pr.mu.Lock()
		_, err = m.decideLocked(ctx, pr, pid, uid, requestID, runID, syscall, hilDecision{status: "expired"})
		pr.mu.Unlock()
	}
	if err != nil {
		m.log.Error("proc: expire a HIL request", "pid", pid, "request", requestID, "err", err)
	}
}

// armHilExpiries arms the expiry of every pending request (Start).
func (m *engine) armHilExpiries(ctx context.Context) error {
	rows, err := m.st.QueryContext(ctx, `SELECT h.pid,p.uid,h.request_id,h.expires_at FROM proc_hil h JOIN proc_processes p ON p.pid=h.pid
		WHERE h.status='pending' AND h.expires_at>0`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pid, requestID string
		var uid uint32
		var at int64
		if err := rows.Scan(&pid, &uid, &requestID, &at); err != nil {
			return err
		}
		m.expireLater(pid, uid, requestID, at)
	}
	return rows.Err()
}

// hilRequest is a new request of run r of pr about call callID of the
// tool toolName, whose syscall with args needs the approval of need.
func (m *engine) hilRequest(ctx context.Context, pr *process, r *activeRun, callID, toolName, need string, args json.RawMessage) abi.HilRequest {
	t0 := now()
	return abi.HilRequest{RequestID: newID("hil_"), RunID: r.id, ConversationID: r.cid, CallID: callID, ToolName: toolName, Syscall: need, Args: args,
		ArgsDigest: argsDigest(args), Target: argsTarget(args), CreatedAt: t0, ExpiresAt: t0 + m.hilExpiry(ctx, pr.uid).Milliseconds()}
}

// askHil stores request h with run r of pr waiting on it, in one write
// (whoever sees the request sees the run waiting on it), arms its expiry
// and publishes it (proc.run.hil.requested).
func (m *engine) askHil(ctx context.Context, pr *process, r *activeRun, h abi.HilRequest) error {
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := m.st.TxExec(tx, `INSERT INTO proc_hil(request_id,pid,run_id,cid,generation,call_id,tool_name,syscall,args,args_digest,created_at,expires_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`,
			h.RequestID, pr.pid, r.id, r.cid, r.gen, h.CallID, h.ToolName, h.Syscall, string(h.Args), h.ArgsDigest, h.CreatedAt, h.ExpiresAt); err != nil {
			return err
		}
		_, err := m.st.TxExec(tx, `UPDATE proc_runs SET status='waiting_hil' WHERE run_id=? AND status='running'`, r.id)
		return err
	})
	if err != nil {
		return err
	}
	m.expireLater(pr.pid, pr.uid, h.RequestID, h.ExpiresAt)
	signal(m, pr.uid, abi.SigProcRunHilRequested, abi.HilRequested{Pid: pr.pid, Request: &h})
	return nil
}

// hilAnswer is the answer a run finds to its tool call's request.
type hilAnswer struct {
	status       string          // "" when never asked
	edited       json.RawMessage // approved edited args, or nil
	editedDigest string
	result       string // substituted
}

// answerOf reads the latest request of run runID of pid about call callID
// and its answer.
func (m *engine) answerOf(ctx context.Context, pid, runID, callID string) (hilAnswer, error) {
	var a hilAnswer
	var edited, editedDigest, result sql.NullString
	err := m.st.QueryRowContext(ctx, `SELECT status,edited_args,edited_digest,result FROM proc_hil WHERE pid=? AND run_id=? AND call_id=? ORDER BY created_at DESC LIMIT 1`, pid, runID, callID).
		Scan(&a.status, &edited, &editedDigest, &result)
	if errors.Is(err, sql.ErrNoRows) {
		return hilAnswer{}, nil
	}
	if edited.Valid {
		a.edited = json.RawMessage(edited.String)
	}
	a.editedDigest, a.result = editedDigest.String, result.String
	return a, err
}

// hilResultContent is a tool result's stored content with what a human's
// answer changed: the edited args the call ran with (Edited, Args and
// their digest) or a result given without running the call
// (Substituted). The model is given Output only.
type hilResultContent struct {
	toolResultContent
	Args        json.RawMessage `json:"args,omitempty"`
	ArgsDigest  string          `json:"argsDigest,omitempty"`
	Edited      bool            `json:"edited,omitempty"`
	Substituted bool            `json:"substituted,omitempty"`
}

// editedNote starts the output of a call run with edited args, so that
// the model knows what ran.
func editedNote(args json.RawMessage) string {
	return fmt.Sprintf("[the user approved this call with edited arguments: %s]\n", args)
}

// pendingHil returns pid's pending HIL request, or nil.
func (m *engine) pendingHil(ctx context.Context, pid string) (*abi.HilRequest, error) {
	var h abi.HilRequest
	var args string
	err := m.st.QueryRowContext(ctx, `SELECT request_id,run_id,cid,call_id,tool_name,syscall,args,args_digest,created_at,expires_at FROM proc_hil WHERE pid=? AND status='pending' ORDER BY created_at LIMIT 1`, pid).
		Scan(&h.RequestID, &h.RunID, &h.ConversationID, &h.CallID, &h.ToolName, &h.Syscall, &args, &h.ArgsDigest, &h.CreatedAt, &h.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h.Args = json.RawMessage(args)
	if h.ArgsDigest == "" {
		h.ArgsDigest = argsDigest(h.Args)
	}
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
