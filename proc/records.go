package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The stored records of processes and conversations, read and made.

// processColumns are the columns a process record is scanned from
// (scanProcess).
const processColumns = `pid,uid,profile,parent_pid,state,label,created_at,workspace_id,cwd,process_cap,mcp_servers`

// scanProcess scans a row of processColumns into p.
func scanProcess(row interface{ Scan(...any) error }, p *abi.Process) error {
	var pc, mcp sql.NullString
	if err := row.Scan(&p.Pid, &p.Uid, &p.Profile, &p.ParentPid, &p.State, &p.Label, &p.CreatedAt, &p.WorkspaceID, &p.Cwd, &pc, &mcp); err != nil {
		return err
	}
	p.Cap = abi.CapFromValue(pc)
	p.McpServers = mcpOf(mcp)
	return nil
}

// mcpOf decodes an mcp_servers column: NULL is every server (nil); a
// value that does not decode (a damaged store) is none, never more.
func mcpOf(v sql.NullString) *[]string {
	if !v.Valid {
		return nil
	}
	var names []string
	if err := json.Unmarshal([]byte(v.String), &names); err != nil || names == nil {
		names = []string{}
	}
	return &names
}

// saveMcp narrows the MCP servers pid sees to servers (nil: leaves it
// seeing all).
func (m *Manager) saveMcp(ctx context.Context, pid string, servers *[]string) error {
	if servers == nil {
		return nil
	}
	b, err := json.Marshal(*servers)
	if err != nil {
		return err
	}
	_, err = m.st.Exec(ctx, `UPDATE proc_processes SET mcp_servers=? WHERE pid=?`, string(b), pid)
	return err
}

// lookup returns pid's record if c may touch it: its owner or root.
// Another user's process is reported as not existing. An empty pid is
// the caller's init process.
func (m *Manager) lookup(ctx context.Context, c *kernel.Caller, pid string) (*abi.Process, error) {
	if pid == "" {
		pid = initPid(c.Uid)
	}
	p, err := m.get(ctx, pid)
	if err != nil {
		return nil, err
	}
	if p.Uid != c.Uid && !c.IsRoot() {
		return nil, noProcess(pid)
	}
	return p, nil
}

// noProcess is the error of a pid that names no process the caller may
// see: one that does not exist and another user's are told apart by
// nobody but root.
func noProcess(pid string) error {
	return abi.E(abi.Path(pid), abi.NotExist, "no such process")
}

// get returns the record of pid. It only reads: a process that is not
// stored, an init process included, does not exist.
func (m *Manager) get(ctx context.Context, pid string) (*abi.Process, error) {
	var p abi.Process
	err := scanProcess(m.st.QueryRowContext(ctx, `SELECT `+processColumns+` FROM proc_processes WHERE pid=?`, pid), &p)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, noProcess(pid)
	}
	if err != nil {
		return nil, abi.E(abi.Path(pid), err)
	}
	return &p, nil
}

// listWhere returns the processes a WHERE clause (or "") selects, oldest
// first.
func (m *Manager) listWhere(ctx context.Context, where string, args ...any) ([]abi.Process, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT `+processColumns+` FROM proc_processes `+where+` ORDER BY created_at, pid`, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	out := []abi.Process{}
	for rows.Next() {
		var p abi.Process
		if err := scanProcess(rows, &p); err != nil {
			return nil, abi.E(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(err)
	}
	return out, nil
}

// running lists the processes that are not idle, of uid (nil: every
// user's), oldest first (processStore).
func (m *Manager) running(ctx context.Context, uid *uint32) ([]abi.Process, error) {
	if uid == nil {
		return m.listWhere(ctx, `WHERE state<>'idle'`)
	}
	return m.listWhere(ctx, `WHERE state<>'idle' AND uid=?`, *uid)
}

// initPid is the pid of uid's init process.
func initPid(uid uint32) string { return fmt.Sprintf("init:%d", uid) }

// makeInitTx makes u's init process in tx, the transaction that creates u
// (a hook of kernel.OnUserCreated): every user has an init process from the
// moment they exist.
func (m *Manager) makeInitTx(tx *kernel.Tx, u *kernel.User) error {
	m.changes.Touch("/proc", "/proc@"+strconv.FormatUint(uint64(u.Uid), 10))
	return m.createTx(tx, initPid(u.Uid), u.Uid, "init", nil, nil, u.Home, now(), nil)
}

// backfillInits makes the init process of every user who has none (users
// created before proc registered its hook: root, and the users of a state
// made before every user had one), in one transaction. When every user
// has one, it writes nothing.
func (m *Manager) backfillInits(ctx context.Context) error {
	us, err := m.k.Users(ctx)
	if err != nil {
		return err
	}
	rows, err := m.st.QueryContext(ctx, `SELECT pid FROM proc_processes WHERE profile='init'`)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var pid string
		if err := rows.Scan(&pid); err != nil {
			rows.Close()
			return err
		}
		have[pid] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var missing []kernel.User
	for _, u := range us {
		if !have[initPid(u.Uid)] {
			missing = append(missing, u)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return m.st.Tx(ctx, func(tx *kernel.Tx) error {
		for i := range missing {
			if err := m.makeInitTx(tx, &missing[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// create inserts a process with its default conversation, unless pid
// exists (then it changes nothing). With a limit (not -1), uid may have
// at most limit processes besides its init: one more is a 409.
func (m *Manager) create(ctx context.Context, pid string, uid uint32, profile string, label, parent *string, cwd string, limit int, pc *abi.ProcessCap) error {
	t := now()
	return m.st.Tx(ctx, func(tx *kernel.Tx) error {
		if limit >= 0 {
			var n int
			if err := m.st.TxQueryRow(tx, `SELECT count(*) FROM proc_processes WHERE uid=? AND profile<>'init'`, uid).Scan(&n); err != nil {
				return err
			}
			if n >= limit {
				return abi.E(abi.Busy, fmt.Sprintf("uid %d has %d processes and may have %d (config/proc/max_processes): a killed process stays yours to reuse (send to it), or ask root to raise the limit", uid, n, limit))
			}
		}
		return m.createTx(tx, pid, uid, profile, label, parent, cwd, t, pc)
	})
}

// createTx is create in tx, a transaction of the store, at time t. pc
// narrows the new process's capability for its life (nil: none); a
// process that exists already (an init) is left as it is.
func (m *Manager) createTx(tx *kernel.Tx, pid string, uid uint32, profile string, label, parent *string, cwd string, t int64, pc *abi.ProcessCap) error {
	res, err := m.st.TxExec(tx, `INSERT INTO proc_processes(pid,uid,profile,label,parent_pid,cwd,created_at,process_cap) VALUES(?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
		pid, uid, profile, label, parent, cwd, t, abi.CapValue(pc))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	_, err = m.st.TxExec(tx, `INSERT INTO proc_conversations(pid,cid,created_at,updated_at) VALUES(?,?,?,?) ON CONFLICT DO NOTHING`, pid, "default", t, t)
	return err
}

// conv returns one conversation of pid.
func (m *Manager) conv(ctx context.Context, pid, cid string) (*abi.Conversation, error) {
	var c abi.Conversation
	var pc sql.NullString
	err := m.st.QueryRowContext(ctx, `SELECT cid,generation,status,title,created_at,updated_at,
		(SELECT count(*) FROM proc_messages m WHERE m.pid=c.pid AND m.cid=c.cid AND m.generation=c.generation), process_cap
		FROM proc_conversations c WHERE pid=? AND cid=?`, pid, cid).
		Scan(&c.ID, &c.Generation, &c.Status, &c.Title, &c.CreatedAt, &c.UpdatedAt, &c.MessageCount, &pc)
	c.Cap = abi.CapFromValue(pc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(pid+"/"+cid), abi.NotExist, "no such conversation")
	}
	if err != nil {
		return nil, abi.E(abi.Path(pid+"/"+cid), err)
	}
	return &c, nil
}

// convRecord returns one conversation of pid without its messageCount
// (counting the messages of a long conversation is most of the cost of a
// lookup).
func (m *Manager) convRecord(ctx context.Context, pid, cid string) (*abi.Conversation, error) {
	c := abi.Conversation{}
	err := m.st.QueryRowContext(ctx, `SELECT cid,generation,status,title,created_at,updated_at FROM proc_conversations WHERE pid=? AND cid=?`, pid, cid).
		Scan(&c.ID, &c.Generation, &c.Status, &c.Title, &c.CreatedAt, &c.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(pid+"/"+cid), abi.NotExist, "no such conversation")
	}
	if err != nil {
		return nil, abi.E(abi.Path(pid+"/"+cid), err)
	}
	return &c, nil
}

// convs returns the conversations of pid (the closed ones too with
// includeClosed), oldest first.
func (m *Manager) convs(ctx context.Context, pid string, includeClosed bool) ([]abi.Conversation, error) {
	q := `SELECT cid FROM proc_conversations WHERE pid=?`
	if !includeClosed {
		q += ` AND status='open'`
	}
	ids, err := m.strings(ctx, q+` ORDER BY created_at, cid`, pid)
	if err != nil {
		return nil, abi.E(err)
	}
	out := []abi.Conversation{}
	for _, id := range ids {
		c, err := m.conv(ctx, pid, id)
		if abi.KindOf(err) == abi.NotExist {
			continue // closed or reset meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *c)
	}
	return out, nil
}

// allConvs lists every conversation id of pid.
func (m *Manager) allConvs(ctx context.Context, pid string) ([]string, error) {
	return m.strings(ctx, `SELECT cid FROM proc_conversations WHERE pid=? ORDER BY cid`, pid)
}

// strings returns the one text column a query selects.
func (m *Manager) strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := m.st.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// msgColumns are the columns of a message as scanMessage reads them.
const msgColumns = "id,role,content,created_at,kind,source,trace_id,media"

// scanMessage scans a row of msgColumns into msg; content receives the
// stored content (msg.Content is set from it unless raw, when the caller
// copies it: sql.RawBytes is valid only until the next row).
func scanMessage(rows *sql.Rows, msg *abi.Message, content *sql.RawBytes) error {
	var kind, source, trace, media sql.NullString
	if err := rows.Scan(&msg.ID, &msg.Role, content, &msg.Timestamp, &kind, &source, &trace, &media); err != nil {
		return err
	}
	msg.Kind, msg.TraceID, msg.Source, msg.Media = kind.String, trace.String, nil, mediaOf(media.String)
	if source.Valid {
		var src abi.EventSource
		if json.Unmarshal([]byte(source.String), &src) == nil {
			msg.Source = &src
		}
	}
	return nil
}

// readMessages returns the messages a query of msgColumns selects from q.
func readMessages(ctx context.Context, q querier, query string, args ...any) ([]abi.Message, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	msgs := []abi.Message{}
	for rows.Next() {
		var msg abi.Message
		var content sql.RawBytes
		if err := scanMessage(rows, &msg, &content); err != nil {
			return nil, err
		}
		msg.Content = json.RawMessage(string(content))
		msgs = append(msgs, msg)
	}
	return msgs, rows.Err()
}

// querier reads: the store (its read pool, with cached statements), or a
// *kernel.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}
