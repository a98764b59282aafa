package proc

import (
	"context"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
)

// The proc.* syscalls on conversations: history, open, list, get, close,
// reset, policy, compact, fork and segments (lifecycle.go does the work
// of compact, fork and reset).

// sysHistory serves proc.history: a page of a conversation's active
// messages.
//
// Paging by id (AfterID, as the history files do) looks up only the
// conversation's generation: counting every message of a long
// conversation for each page would make reading it quadratic.
// MessageCount, Truncated and PendingHil are reported when paging by
// offset.
func (m *Manager) sysHistory(ctx context.Context, c *kernel.Caller, a *abi.HistoryArgs) (*abi.HistoryResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	cid := orDefault(a.ConversationID)
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
	msgs, err := readMessages(ctx, m.st, `SELECT `+msgColumns+` FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id>? ORDER BY id LIMIT ? OFFSET ?`,
		p.Pid, cid, gen, after, limit, max(offset, 0))
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
	}
	res := &abi.HistoryResult{OK: true, Pid: p.Pid, ConversationID: cid, Messages: msgs}
	if a.AfterID == nil {
		hil, err := m.run.pendingHil(ctx, p.Pid)
		if err != nil {
			return nil, abi.E(abi.Path(p.Pid), err)
		}
		count, truncated := conv.MessageCount, int64(offset+len(msgs)) < conv.MessageCount
		res.MessageCount, res.Truncated, res.PendingHil = &count, &truncated, hil
	}
	return res, nil
}

// sysConvOpen serves proc.conversation.open: a new conversation (an id
// is made when none is given), or a closed one opened again (with a new
// title, if given).
func (m *Manager) sysConvOpen(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.ConvOpenResult, error) {
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
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		res, err := tx.Exec(`INSERT INTO proc_conversations(pid,cid,title,created_at,updated_at) VALUES(?,?,?,?,?) ON CONFLICT DO NOTHING`, p.Pid, cid, title, t, t)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		created = n > 0
		if !created {
			_, err = tx.Exec(`UPDATE proc_conversations SET status='open', title=coalesce(?,title), updated_at=? WHERE pid=? AND cid=?`, title, t, p.Pid, cid)
		}
		return err
	})
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
	}
	conv, err := m.conv(ctx, p.Pid, cid)
	if err != nil {
		return nil, err
	}
	m.changed(p.Uid, abi.ProcChanged{Pid: p.Pid, Change: "conversation.open", ConversationID: cid})
	return &abi.ConvOpenResult{OK: true, Pid: p.Pid, Conversation: conv, Created: created}, nil
}

// sysConvList serves proc.conversation.list: the open conversations (and
// the closed ones, with IncludeClosed).
func (m *Manager) sysConvList(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.ConvListResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	cs, err := m.convs(ctx, p.Pid, a.IncludeClosed)
	if err != nil {
		return nil, err
	}
	return &abi.ConvListResult{OK: true, Pid: p.Pid, Conversations: cs}, nil
}

// sysConvGet serves proc.conversation.get: the conversation's record, nil
// when the process has no conversation of that id.
func (m *Manager) sysConvGet(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.ConversationGetResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	conv, err := m.conv(ctx, p.Pid, orDefault(a.ConversationID))
	if abi.KindOf(err) == abi.NotExist {
		conv, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &abi.ConversationGetResult{OK: true, Pid: p.Pid, Conversation: conv}, nil
}

// sysConvLookup serves proc.conversation.lookup (Internal): the
// namespace's lookup of a conversation, its record without MessageCount
// (counting every message of a long conversation at each path walk would
// be most of the cost of opening its history).
func (m *Manager) sysConvLookup(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.Conversation, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	return m.convRecord(ctx, p.Pid, orDefault(a.ConversationID))
}

// sysConvClose serves proc.conversation.close: a closed conversation takes
// no messages until it is opened again.
func (m *Manager) sysConvClose(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.ConvCloseResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	if a.ConversationID == "" {
		return nil, abi.E(abi.Invalid, "conversationId is required")
	}
	path := abi.Path(p.Pid + "/" + a.ConversationID)
	res, err := m.st.Exec(ctx, `UPDATE proc_conversations SET status='closed', updated_at=? WHERE pid=? AND cid=?`, now(), p.Pid, a.ConversationID)
	if err != nil {
		return nil, abi.E(path, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, abi.E(path, abi.NotExist, "no such conversation")
	}
	m.changed(p.Uid, abi.ProcChanged{Pid: p.Pid, Change: "conversation.close", ConversationID: a.ConversationID})
	return &abi.ConvCloseResult{OK: true, Pid: p.Pid, ConversationID: a.ConversationID, Closed: true}, nil
}

// sysConvReset serves proc.conversation.reset: the conversation archived
// (unless Archive is false) and cleared into a new generation.
func (m *engine) sysConvReset(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.ConvResetResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	cid := orDefault(a.ConversationID)
	entries, dir, err := m.resetConvs(ctx, p, []string{cid}, a.Archive == nil || *a.Archive)
	if err != nil {
		return nil, err
	}
	conv, err := m.convRecord(ctx, p.Pid, cid)
	if err != nil {
		return nil, err
	}
	res := &abi.ConvResetResult{OK: true, Pid: p.Pid, ConversationID: cid, Generation: conv.Generation}
	if len(entries) > 0 {
		res.ArchivedMessages, res.ArchivedTo = entries[0].Messages, dir
	}
	signal(m, p.Uid, abi.SigProcessLifecycle, abi.ProcessLifecycle{Pid: p.Pid, Event: "conversation.reset", ConversationID: cid})
	return res, nil
}

// sysPolicyGet serves proc.conversation.policy.get.
func (m *engine) sysPolicyGet(ctx context.Context, c *kernel.Caller, a *abi.PolicyArgs) (*abi.PolicyResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	pol, err := m.policy(ctx, p.Pid, orDefault(a.ConversationID))
	if err != nil {
		return nil, err
	}
	return &abi.PolicyResult{OK: true, Pid: p.Pid, Policy: pol}, nil
}

// sysPolicySet serves proc.conversation.policy.set: it changes the fields
// given.
func (m *engine) sysPolicySet(ctx context.Context, c *kernel.Caller, a *abi.PolicyArgs) (*abi.PolicyResult, error) {
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
		if !(*a.CompactAtPressure > 0 && *a.CompactAtPressure <= 1) { // NaN too
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
		return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
	}
	m.changed(p.Uid, abi.ProcChanged{Pid: p.Pid, Change: "policy", ConversationID: cid})
	return &abi.PolicyResult{OK: true, Pid: p.Pid, Policy: pol}, nil
}

// sysCompact serves proc.conversation.compact (compact).
func (m *engine) sysCompact(ctx context.Context, c *kernel.Caller, a *abi.CompactArgs) (*abi.CompactResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	// A summary the caller wrote enters the conversation with its
	// narrowing; a generated one is the model's.
	var narrow *abi.ProcessCap
	if a.Summary != nil {
		narrow = c.Identity.Process
	}
	return m.compact(ctx, p, orDefault(a.ConversationID), *a, false, narrow)
}

// sysFork serves proc.conversation.fork (fork).
func (m *engine) sysFork(ctx context.Context, c *kernel.Caller, a *abi.ForkArgs) (*abi.ForkResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	return m.fork(ctx, c, p, orDefault(a.ConversationID), *a)
}

// sysSegments serves proc.conversation.segments: the conversation's
// segment records, oldest first.
func (m *engine) sysSegments(ctx context.Context, c *kernel.Caller, a *abi.ConvArgs) (*abi.SegmentsResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	cid := orDefault(a.ConversationID)
	if _, err := m.convRecord(ctx, p.Pid, cid); err != nil {
		return nil, err
	}
	segs, err := m.segments(ctx, p.Pid, cid, "")
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
	}
	return &abi.SegmentsResult{OK: true, Pid: p.Pid, ConversationID: cid, Segments: segs}, nil
}

// sysSegmentRead serves proc.conversation.segment.read: a page of a
// segment's archived messages, read from its archive as the caller.
func (m *engine) sysSegmentRead(ctx context.Context, c *kernel.Caller, a *abi.SegmentReadArgs) (*abi.SegmentReadResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	cid := orDefault(a.ConversationID)
	seg, err := m.segment(ctx, p.Pid, cid, a.SegmentID)
	if err != nil {
		return nil, err
	}
	limit := a.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	msgs := []abi.Message{}
	i := 0
	truncated := false
	err = m.readArchive(ctx, ns.CallerOf(c.Identity, ""), seg.ArchivePath, func(msg abi.Message) bool {
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
	return &abi.SegmentReadResult{OK: true, Pid: p.Pid, ConversationID: cid, Segment: *seg, Messages: msgs,
		MessageCount: seg.Messages, Truncated: truncated}, nil
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
