package proc

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// Profile is the seed's process profile record.
type Profile struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
	Interactive bool   `json:"interactive"`
	Startable   bool   `json:"startable"`
	Background  bool   `json:"background"`
	SpawnMode   string `json:"spawnMode"`
}

var profiles = []Profile{
	{"init", "system", "Init", "The user's long-lived home process.", true, false, false, "singleton"},
	{"task", "system", "Task", "A process for one piece of work.", true, true, true, "new"},
	{"review", "system", "Review", "Reviews work and reports findings.", true, true, true, "new"},
	{"cron", "system", "Cron", "Runs scheduled work.", false, true, true, "new"},
}

type (
	pidArgs struct {
		Pid string `json:"pid"`
	}
	listArgs struct {
		Uid *uint32 `json:"uid"`
	}
	spawnArgs struct {
		Profile   string `json:"profile"`
		Label     string `json:"label"`
		Prompt    string `json:"prompt"`
		ParentPid string `json:"parentPid"`
		Workspace any    `json:"workspace"`
	}
	sendArgs struct {
		Pid            string `json:"pid"`
		ConversationID string `json:"conversationId"`
		Message        string `json:"message"`
		// Event (ours) delivers the message as a "[Process Event]:"
		// system message, as scheduled events arrive.
		Event bool `json:"event"`
	}
	hilArgs struct {
		Pid       string `json:"pid"`
		RequestID string `json:"requestId"`
		Decision  string `json:"decision"`
		Remember  bool   `json:"remember"`
	}
	killArgs struct {
		Pid     string `json:"pid"`
		Archive *bool  `json:"archive"`
	}
	historyArgs struct {
		Pid            string `json:"pid"`
		ConversationID string `json:"conversationId"`
		Limit          int    `json:"limit"`
		Offset         int    `json:"offset"`
		// AfterID pages by message id (ours): messages with a larger id.
		AfterID *int64 `json:"afterId"`
		// Generation reads a given generation (ours); a past one is gone.
		Generation *int64 `json:"generation"`
	}
	convArgs struct {
		Pid            string  `json:"pid"`
		ConversationID string  `json:"conversationId"`
		Title          *string `json:"title"`
		IncludeClosed  bool    `json:"includeClosed"`
		Archive        *bool   `json:"archive"`
	}
	policyArgs struct {
		Pid               string   `json:"pid"`
		ConversationID    string   `json:"conversationId"`
		Overflow          *string  `json:"overflow"`
		CompactAtPressure *float64 `json:"compactAtPressure"`
		KeepLast          *int     `json:"keepLast"`
	}
	segReadArgs struct {
		Pid            string `json:"pid"`
		ConversationID string `json:"conversationId"`
		SegmentID      string `json:"segmentId"`
		Limit          int    `json:"limit"`
		Offset         int    `json:"offset"`
	}
	setIdentityArgs struct {
		Pid      string           `json:"pid"`
		Identity *kernel.Identity `json:"identity"`
		Profile  string           `json:"profile"`
	}
)

func orDefault(cid string) string {
	if cid == "" {
		return "default"
	}
	return cid
}

func (m *Manager) registerSyscalls() {
	k := m.k
	kernel.Handle(k, "proc.list", 0, func(ctx context.Context, c *kernel.Caller, a *listArgs) (map[string]any, error) {
		where, args := "WHERE uid=?", []any{c.Uid}
		if c.IsRoot() {
			where, args = "", nil
			if a.Uid != nil {
				where, args = "WHERE uid=?", []any{*a.Uid}
			}
		} else if a.Uid != nil && *a.Uid != c.Uid {
			return nil, abi.E(abi.Permission, "only root may list another user's processes")
		}
		ps, err := m.list(ctx, where, args...)
		if err != nil {
			return nil, err
		}
		return map[string]any{"processes": ps}, nil
	})
	// proc.get (Internal) is the namespace's lookup of a process record.
	kernel.Handle(k, "proc.get", kernel.Internal, func(ctx context.Context, c *kernel.Caller, a *pidArgs) (*Process, error) {
		return m.lookup(ctx, c, a.Pid)
	})
	// proc.status (ours) is what /proc/<pid>/status shows.
	kernel.Handle(k, "proc.status", 0, func(ctx context.Context, c *kernel.Caller, a *pidArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return map[string]any{"ok": true, "pid": p.Pid, "status": m.status(ctx, p)}, nil
	})
	// proc.events (Internal) opens a process's signal stream, from now: its
	// result is a live subscription, which only the namespace can serve.
	kernel.Handle(k, "proc.events", kernel.Internal, func(ctx context.Context, c *kernel.Caller, a *pidArgs) (vfs.Subscription, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		pid := p.Pid
		return m.k.Subscribe(c.Identity, func(signal string, payload any) bool {
			pl, ok := payload.(map[string]any)
			return ok && pl["pid"] == pid
		}), nil
	})
	kernel.Handle(k, "proc.profile.list", 0, func(ctx context.Context, c *kernel.Caller, _ *struct{}) (map[string]any, error) {
		return map[string]any{"profiles": profiles}, nil
	})
	kernel.Handle(k, "proc.spawn", 0, func(ctx context.Context, c *kernel.Caller, a *spawnArgs) (map[string]any, error) {
		return m.spawn(ctx, c, a)
	})
	kernel.Handle(k, "proc.send", 0, func(ctx context.Context, c *kernel.Caller, a *sendArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		runID, queued, err := m.Send(ctx, p, orDefault(a.ConversationID), a.Message, a.Event)
		if err != nil {
			return nil, err
		}
		res := map[string]any{"ok": true, "status": "started", "runId": runID}
		if queued {
			res["queued"] = true
		}
		return res, nil
	})
	kernel.Handle(k, "proc.abort", 0, func(ctx context.Context, c *kernel.Caller, a *pidArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return m.Abort(ctx, p)
	})
	kernel.Handle(k, "proc.hil", 0, func(ctx context.Context, c *kernel.Caller, a *hilArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return m.Hil(ctx, p, a.RequestID, a.Decision, a.Remember)
	})
	kernel.Handle(k, "proc.kill", 0, func(ctx context.Context, c *kernel.Caller, a *killArgs) (map[string]any, error) {
		if a.Pid == "" {
			return nil, abi.E(abi.Invalid, "pid is required")
		}
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return m.resetProcess(ctx, p, a.Archive == nil || *a.Archive, "killed")
	})
	kernel.Handle(k, "proc.reset", 0, func(ctx context.Context, c *kernel.Caller, a *pidArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return m.resetProcess(ctx, p, true, "reset")
	})
	kernel.Handle(k, "proc.history", 0, func(ctx context.Context, c *kernel.Caller, a *historyArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return m.history(ctx, p, orDefault(a.ConversationID), a)
	})
	kernel.Handle(k, "proc.conversation.open", 0, func(ctx context.Context, c *kernel.Caller, a *convArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		cid := a.ConversationID
		if cid == "" {
			cid = "c-" + newID("")[:8]
		}
		if err := validCid(cid); err != nil {
			return nil, err
		}
		title, err := checkTitle(a.Title)
		if err != nil {
			return nil, err
		}
		created := false
		t := now()
		err = m.st.Tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.Exec(`INSERT OR IGNORE INTO proc_conversations(pid,cid,title,created_at,updated_at) VALUES(?,?,?,?,?)`, p.Pid, cid, title, t, t)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			created = n > 0
			if !created {
				_, err = tx.Exec(`UPDATE proc_conversations SET status='open', title=coalesce(?,title), updated_at=? WHERE pid=? AND cid=?`, title, t, p.Pid, cid)
			}
			return err
		})
		if err != nil {
			return nil, abi.E(err)
		}
		conv, err := m.conv(ctx, p.Pid, cid)
		if err != nil {
			return nil, err
		}
		m.changed(p.Uid, p.Pid, "conversation.open", map[string]any{"conversationId": cid})
		return map[string]any{"ok": true, "pid": p.Pid, "conversation": conv, "created": created}, nil
	})
	kernel.Handle(k, "proc.conversation.list", 0, func(ctx context.Context, c *kernel.Caller, a *convArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		cs, err := m.convs(ctx, p.Pid, a.IncludeClosed)
		if err != nil {
			return nil, err
		}
		return map[string]any{"ok": true, "pid": p.Pid, "conversations": cs}, nil
	})
	kernel.Handle(k, "proc.conversation.get", 0, func(ctx context.Context, c *kernel.Caller, a *convArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		conv, err := m.conv(ctx, p.Pid, orDefault(a.ConversationID))
		if err != nil {
			conv = nil
		}
		return map[string]any{"ok": true, "pid": p.Pid, "conversation": conv}, nil
	})
	kernel.Handle(k, "proc.conversation.close", 0, func(ctx context.Context, c *kernel.Caller, a *convArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		if a.ConversationID == "" {
			return nil, abi.E(abi.Invalid, "conversationId is required")
		}
		res, err := m.st.Exec(ctx, `UPDATE proc_conversations SET status='closed', updated_at=? WHERE pid=? AND cid=?`, now(), p.Pid, a.ConversationID)
		if err != nil {
			return nil, abi.E(err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, abi.E(abi.Path(p.Pid+"/"+a.ConversationID), abi.NotExist, "no such conversation")
		}
		m.changed(p.Uid, p.Pid, "conversation.close", map[string]any{"conversationId": a.ConversationID})
		return map[string]any{"ok": true, "pid": p.Pid, "conversationId": a.ConversationID, "closed": true}, nil
	})
	kernel.Handle(k, "proc.conversation.reset", 0, func(ctx context.Context, c *kernel.Caller, a *convArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		cid := orDefault(a.ConversationID)
		entries, dir, err := m.resetConvs(ctx, p, []string{cid}, a.Archive == nil || *a.Archive)
		if err != nil {
			return nil, err
		}
		conv, _ := m.conv(ctx, p.Pid, cid)
		res := map[string]any{"ok": true, "pid": p.Pid, "conversationId": cid, "generation": conv.Generation, "archivedMessages": 0}
		if len(entries) > 0 {
			res["archivedMessages"] = entries[0].Messages
			res["archivedTo"] = dir
		}
		m.signal(p.Uid, "process.lifecycle", map[string]any{"pid": p.Pid, "event": "conversation.reset", "conversationId": cid})
		return res, nil
	})
	kernel.Handle(k, "proc.conversation.policy.get", 0, func(ctx context.Context, c *kernel.Caller, a *policyArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		pol, err := m.policy(ctx, p.Pid, orDefault(a.ConversationID))
		if err != nil {
			return nil, err
		}
		return map[string]any{"ok": true, "pid": p.Pid, "policy": pol}, nil
	})
	kernel.Handle(k, "proc.conversation.policy.set", 0, func(ctx context.Context, c *kernel.Caller, a *policyArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		cid := orDefault(a.ConversationID)
		pol, err := m.policy(ctx, p.Pid, cid)
		if err != nil {
			return nil, err
		}
		if a.Overflow != nil {
			switch *a.Overflow {
			case "manual", "auto-compact", "fail":
				pol.Overflow = *a.Overflow
			default:
				return nil, abi.E(abi.Invalid, "overflow must be manual, auto-compact or fail")
			}
		}
		if a.CompactAtPressure != nil {
			if *a.CompactAtPressure <= 0 || *a.CompactAtPressure > 1 {
				return nil, abi.E(abi.Invalid, "compactAtPressure must be in (0, 1]")
			}
			pol.CompactAtPressure = *a.CompactAtPressure
		}
		if a.KeepLast != nil {
			if *a.KeepLast < 0 {
				return nil, abi.E(abi.Invalid, "keepLast must be 0 or more")
			}
			pol.KeepLast = *a.KeepLast
		}
		if _, err := m.st.Exec(ctx, `UPDATE proc_conversations SET overflow=?, compact_at=?, keep_last=? WHERE pid=? AND cid=?`,
			pol.Overflow, pol.CompactAtPressure, pol.KeepLast, p.Pid, cid); err != nil {
			return nil, abi.E(err)
		}
		m.changed(p.Uid, p.Pid, "policy", map[string]any{"conversationId": cid})
		return map[string]any{"ok": true, "pid": p.Pid, "policy": pol}, nil
	})
	kernel.Handle(k, "proc.conversation.compact", 0, func(ctx context.Context, c *kernel.Caller, a *compactArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return m.compact(ctx, p, orDefault(a.ConversationID), *a, false)
	})
	kernel.Handle(k, "proc.conversation.fork", 0, func(ctx context.Context, c *kernel.Caller, a *forkArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		return m.fork(ctx, c, p, orDefault(a.ConversationID), *a)
	})
	kernel.Handle(k, "proc.conversation.segments", 0, func(ctx context.Context, c *kernel.Caller, a *convArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		cid := orDefault(a.ConversationID)
		if _, err := m.conv(ctx, p.Pid, cid); err != nil {
			return nil, err
		}
		segs, err := m.segments(ctx, p.Pid, cid, "")
		if err != nil {
			return nil, abi.E(err)
		}
		return map[string]any{"ok": true, "pid": p.Pid, "conversationId": cid, "segments": segs}, nil
	})
	kernel.Handle(k, "proc.conversation.segment.read", 0, func(ctx context.Context, c *kernel.Caller, a *segReadArgs) (map[string]any, error) {
		p, err := m.lookup(ctx, c, a.Pid)
		if err != nil {
			return nil, err
		}
		cid := orDefault(a.ConversationID)
		segs, err := m.segments(ctx, p.Pid, cid, a.SegmentID)
		if err != nil || len(segs) == 0 || segs[0].ConversationID != cid {
			return nil, abi.E(abi.Path(a.SegmentID), abi.NotExist, "no such segment")
		}
		limit := a.Limit
		if limit <= 0 || limit > 1000 {
			limit = 1000
		}
		var msgs []Message
		i := 0
		truncated := false
		err = m.readArchive(ctx, ns.CallerOf(c.Identity, ""), segs[0].ArchivePath, func(msg Message) bool {
			if i >= a.Offset {
				if len(msgs) == limit {
					truncated = true
					return false
				}
				msgs = append(msgs, msg)
			}
			i++
			return true
		})
		if err != nil {
			return nil, err
		}
		if msgs == nil {
			msgs = []Message{}
		}
		return map[string]any{"ok": true, "pid": p.Pid, "conversationId": cid, "segment": segs[0], "messages": msgs,
			"messageCount": segs[0].Messages, "truncated": truncated}, nil
	})
	kernel.Handle(k, "proc.setidentity", kernel.KernelOnly, func(ctx context.Context, c *kernel.Caller, a *setIdentityArgs) (map[string]any, error) {
		if a.Identity == nil {
			return nil, abi.E(abi.Invalid, "identity is required")
		}
		res, err := m.st.Exec(ctx, `UPDATE proc_processes SET cwd=?, workspace_id=?, profile=coalesce(nullif(?,''),profile) WHERE pid=?`,
			a.Identity.Cwd, a.Identity.WorkspaceID, a.Profile, a.Pid)
		if err != nil {
			return nil, abi.E(err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, abi.E(abi.Path(a.Pid), abi.NotExist, "no such process")
		}
		return map[string]any{"ok": true}, nil
	})
}

func (m *Manager) list(ctx context.Context, where string, args ...any) ([]Process, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT pid,uid,profile,parent_pid,state,label,created_at,workspace_id,cwd FROM proc_processes `+where+` ORDER BY created_at, pid`, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	out := []Process{}
	for rows.Next() {
		var p Process
		if err := rows.Scan(&p.Pid, &p.Uid, &p.Profile, &p.ParentPid, &p.State, &p.Label, &p.CreatedAt, &p.WorkspaceID, &p.Cwd); err != nil {
			return nil, abi.E(err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (m *Manager) convs(ctx context.Context, pid string, includeClosed bool) ([]Conversation, error) {
	q := `SELECT cid FROM proc_conversations WHERE pid=?`
	if !includeClosed {
		q += ` AND status='open'`
	}
	rows, err := m.st.QueryContext(ctx, q+` ORDER BY created_at, cid`, pid)
	if err != nil {
		return nil, abi.E(err)
	}
	var ids []string
	for rows.Next() {
		var c string
		rows.Scan(&c)
		ids = append(ids, c)
	}
	rows.Close()
	out := []Conversation{}
	for _, id := range ids {
		c, err := m.conv(ctx, pid, id)
		if err == nil {
			out = append(out, *c)
		}
	}
	return out, nil
}

func (m *Manager) spawn(ctx context.Context, c *kernel.Caller, a *spawnArgs) (map[string]any, error) {
	var prof *Profile
	for i := range profiles {
		if profiles[i].ID == a.Profile {
			prof = &profiles[i]
		}
	}
	if prof == nil {
		return nil, abi.E(abi.Path(a.Profile), abi.Invalid, "unknown profile (see proc.profile.list)")
	}
	if err := kernel.CheckText("label", a.Label, kernel.MaxLabel); err != nil {
		return nil, err
	}
	if w, ok := a.Workspace.(string); ok && w != "" && w != "none" {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("workspace %q: only workspace=none is supported yet", w))
	}
	var parent *string
	if a.ParentPid != "" {
		pp, err := m.lookup(ctx, c, a.ParentPid)
		if err != nil {
			return nil, err
		}
		parent = &pp.Pid
	}
	pid := newID("")[:8] + "-" + newID("")[:4]
	if prof.SpawnMode == "singleton" {
		pid = initPid(c.Uid)
	}
	var label *string
	if a.Label != "" {
		label = &a.Label
	}
	if err := m.create(ctx, pid, c.Uid, prof.ID, label, parent, c.Home); err != nil {
		return nil, abi.E(err)
	}
	p, err := m.get(ctx, pid)
	if err != nil {
		return nil, err
	}
	m.changed(c.Uid, pid, "spawn", map[string]any{"profile": prof.ID})
	if a.Prompt != "" {
		if _, _, err := m.Send(ctx, p, "default", a.Prompt, false); err != nil {
			return nil, err
		}
	}
	res := map[string]any{"ok": true, "pid": pid, "profile": prof.ID, "workspaceId": nil, "cwd": p.Cwd}
	if label != nil {
		res["label"] = *label
	}
	return res, nil
}

// history pages the active messages of a conversation.
//
// Paging by id (afterId, as the history files do) looks up only the
// conversation's generation: counting every message of a long
// conversation for each page made reading it quadratic. messageCount and
// truncated are reported when paging by offset.
func (m *Manager) history(ctx context.Context, p *Process, cid string, a *historyArgs) (map[string]any, error) {
	lookup := m.conv
	if a.AfterID != nil {
		lookup = m.convRecord
	}
	conv, err := lookup(ctx, p.Pid, cid)
	if err != nil {
		return nil, err
	}
	limit, offset := a.Limit, a.Offset
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	gen := conv.Generation
	if a.Generation != nil {
		gen = *a.Generation
	}
	after := int64(-1)
	if a.AfterID != nil {
		after, offset = *a.AfterID, 0
	}
	msgs, err := m.readMessages(ctx, `SELECT id,role,content,created_at FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id>? ORDER BY id LIMIT ? OFFSET ?`,
		p.Pid, cid, gen, after, limit, max(offset, 0))
	if err != nil {
		return nil, abi.E(err)
	}
	res := map[string]any{"ok": true, "pid": p.Pid, "conversationId": cid, "messages": msgs}
	if a.AfterID == nil {
		hil, _ := m.pendingHil(ctx, p.Pid)
		res["messageCount"], res["truncated"], res["pendingHil"] = conv.MessageCount, int64(offset+len(msgs)) < conv.MessageCount, hil
	}
	return res, nil
}

// resetProcess archives every non-empty conversation of p under one
// archive directory and clears them (proc.reset, proc.kill).
func (m *Manager) resetProcess(ctx context.Context, p *Process, archive bool, event string) (map[string]any, error) {
	cids, err := m.allConvs(ctx, p.Pid)
	if err != nil {
		return nil, abi.E(err)
	}
	entries, dir, err := m.resetConvs(ctx, p, cids, archive)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range entries {
		total += e.Messages
	}
	m.signal(p.Uid, "process.lifecycle", map[string]any{"pid": p.Pid, "event": "process." + event})
	res := map[string]any{"ok": true, "pid": p.Pid, "archivedMessages": total, "archives": entries}
	if dir != "" {
		res["archivedTo"] = dir
	}
	return res, nil
}

// checkTitle returns a conversation title as it is stored: trimmed, and
// a one-line name (kernel.CheckText).
func checkTitle(title *string) (*string, error) {
	if title == nil {
		return nil, nil
	}
	t := strings.TrimSpace(*title)
	if err := kernel.CheckText("title", t, kernel.MaxLabel); err != nil {
		return nil, err
	}
	return &t, nil
}
