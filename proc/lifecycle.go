package proc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// policy returns the context policy of conversation cid of pid.
func (m *engine) policy(ctx context.Context, pid, cid string) (*abi.Policy, error) {
	var p abi.Policy
	err := m.st.QueryRowContext(ctx, `SELECT overflow,compact_at,keep_last FROM proc_conversations WHERE pid=? AND cid=?`, pid, cid).
		Scan(&p.Overflow, &p.CompactAtPressure, &p.KeepLast)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.Path(pid+"/"+cid), abi.NotExist, "no such conversation")
	}
	if err != nil {
		return nil, abi.E(abi.Path(pid+"/"+cid), err)
	}
	return &p, nil
}

// segments returns the segments of conversation cid of pid, oldest
// first, or the one segment segID of pid (of any conversation).
func (m *engine) segments(ctx context.Context, pid, cid, segID string) ([]abi.Segment, error) {
	q := `SELECT id,cid,generation,kind,from_id,to_id,archive_path,summary_message_id,messages,created_at FROM proc_segments WHERE pid=? AND cid=?`
	args := []any{pid, cid}
	if segID != "" {
		q = `SELECT id,cid,generation,kind,from_id,to_id,archive_path,summary_message_id,messages,created_at FROM proc_segments WHERE pid=? AND id=?`
		args = []any{pid, segID}
	}
	rows, err := m.st.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []abi.Segment{}
	for rows.Next() {
		var s abi.Segment
		if err := rows.Scan(&s.ID, &s.ConversationID, &s.Generation, &s.Kind, &s.FromMessageID, &s.ToMessageID, &s.ArchivePath, &s.SummaryMessageID, &s.Messages, &s.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// compact archives an old prefix of cid's active messages and replaces it
// with one visible summary message at the boundary. inRun is set when the
// run's own preflight compacts (the run is the caller, not a conflict).
// narrow is the narrowing of whoever wrote the summary (nil for none):
// it narrows the conversation with the summary (cap.go). The segment
// keeps the conversation's narrowing, for a fork that restores it.
func (m *engine) compact(ctx context.Context, p *abi.Process, cid string, a abi.CompactArgs, inRun bool, narrow *abi.ProcessCap) (*abi.CompactResult, error) {
	if (a.KeepLast == nil) == (a.ThroughMessageID == nil) {
		return nil, abi.E(abi.Invalid, "give exactly one selector: keep=<n> or through=<msgId>")
	}
	if (a.Summary == nil || *a.Summary == "") == !a.GenerateSummary {
		return nil, abi.E(abi.Invalid, "give a summary or generate (exactly one)")
	}
	if a.KeepLast != nil && *a.KeepLast < 0 {
		return nil, abi.E(abi.Invalid, "keep must be 0 or more")
	}
	pr := m.proc(p.Pid, p.Uid)
	if !inRun {
		// The compaction does not hold pr.mu throughout: the model call
		// of a generated summary can take two minutes, and status reads,
		// sends, aborts and HIL answers of the whole process would block
		// meanwhile. The conversation is marked as being compacted
		// instead: no run starts in it (messages to it queue) and a
		// second compaction is refused.
		pr.mu.Lock()
		if pr.run != nil && pr.run.cid == cid {
			pr.mu.Unlock()
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), abi.Busy, "a run is active in this conversation: abort it or wait")
		}
		if pr.compacting[cid] {
			pr.mu.Unlock()
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), abi.Busy, "this conversation is being compacted")
		}
		if pr.compacting == nil {
			pr.compacting = map[string]bool{}
		}
		pr.compacting[cid] = true
		pr.mu.Unlock()
		defer func() {
			pr.mu.Lock()
			delete(pr.compacting, cid)
			if pr.state == idle {
				m.nextLocked(context.WithoutCancel(ctx), pr, nil) // what queued meanwhile
			}
			pr.mu.Unlock()
		}()
	}
	c, err := m.conv(ctx, p.Pid, cid)
	if err != nil {
		return nil, err
	}
	type idRole struct {
		id     int64
		role   string
		hasTCs bool
	}
	// An assistant message's content is read to see whether it makes
	// tool calls; the others' is not.
	rows, err := m.st.QueryContext(ctx, `SELECT id,role,CASE WHEN role='assistant' THEN content ELSE '' END
		FROM proc_messages WHERE pid=? AND cid=? AND generation=? ORDER BY id`, p.Pid, cid, c.Generation)
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
	}
	var ms []idRole
	for rows.Next() {
		var x idRole
		var content sql.RawBytes
		if err := rows.Scan(&x.id, &x.role, &content); err != nil {
			rows.Close()
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
		}
		x.hasTCs = x.role == "assistant" && bytes.Contains(content, []byte(`"toolCalls"`))
		ms = append(ms, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
	}
	b := 0
	if a.KeepLast != nil {
		b = max(len(ms)-*a.KeepLast, 0)
	} else {
		found := false
		for i, x := range ms {
			if x.id == *a.ThroughMessageID {
				b, found = i+1, true
				break
			}
		}
		if !found {
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), abi.NotExist, fmt.Sprintf("no message %d in the active conversation", *a.ThroughMessageID))
		}
		// Through an assistant message with tool calls: through their
		// results too.
		if ms[b-1].role == "assistant" && ms[b-1].hasTCs {
			for b < len(ms) && ms[b].role == "toolResult" {
				b++
			}
		}
	}
	// Never split an assistant's tool calls from their results: move the
	// boundary back before the assistant message.
	for b > 0 && (b < len(ms) && ms[b].role == "toolResult" || ms[b-1].role == "assistant" && ms[b-1].hasTCs) {
		b--
	}
	if b == 0 {
		return nil, abi.E(abi.Invalid, "nothing to compact: the prefix is empty")
	}
	from, to := ms[0].id, ms[b-1].id
	suffixTo := ms[len(ms)-1].id
	u, err := m.k.UserOf(ctx, p.Uid)
	if err != nil {
		return nil, err
	}
	segID := newID("seg_")
	archive := fmt.Sprintf("/var/sessions/%s/%s/%s/%s.jsonl.gz", u.Username, p.Pid, cid, segID)
	n, err := m.writeArchive(ctx, archive, p.Pid, cid, c.Generation, from, to)
	if err != nil {
		return nil, err
	}
	// A compaction that does not happen leaves no archive behind.
	committed := false
	defer func() {
		if !committed {
			m.removeArchive(context.WithoutCancel(ctx), archive)
		}
	}()
	summary := ""
	if a.Summary != nil {
		summary = *a.Summary
	}
	if a.GenerateSummary {
		summary, err = m.summarize(ctx, p, cid, c.Generation, from, to)
		if err != nil {
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), abi.Other, fmt.Sprintf("generating the summary: %v", err))
		}
	}
	text := fmt.Sprintf("[Process Event]: Compacted %d messages (ids %d-%d) into segment %s, archived at %s. Summary:\n%s", n, from, to, segID, archive, summary)
	t := now()
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		// The process is not locked while the archive and summary are
		// made: a reset may have moved the conversation on meanwhile.
		var gen int64
		if err := tx.QueryRow(`SELECT generation FROM proc_conversations WHERE pid=? AND cid=?`, p.Pid, cid).Scan(&gen); err != nil {
			return err
		}
		if gen != c.Generation {
			return abi.E(abi.Path(p.Pid+"/"+cid), abi.Busy, "the conversation was reset during the compaction")
		}
		// The archive must hold exactly what is deleted.
		res, err := tx.Exec(`DELETE FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id BETWEEN ? AND ?`, p.Pid, cid, c.Generation, from, to)
		if err != nil {
			return err
		}
		gone, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if gone != n {
			return abi.E(abi.Path(p.Pid+"/"+cid), abi.Busy, "the history changed during the compaction")
		}
		if err := m.narrowConvTx(tx, p.Pid, cid, c.Generation, narrow); err != nil {
			return err
		}
		// The summary takes the first archived id: it stands where the
		// archived messages began.
		if _, err := tx.Exec(`INSERT INTO proc_messages(id,pid,cid,generation,role,content,created_at) VALUES(?,?,?,?,'system',?,?)`, from, p.Pid, cid, c.Generation, string(jsonString(text)), t); err != nil {
			return err
		}
		// A new epoch: the history is no longer an extension of its
		// earlier renderings (cache.go).
		if _, err := tx.Exec(`UPDATE proc_conversations SET epoch=epoch+1, updated_at=? WHERE pid=? AND cid=?`, now(), p.Pid, cid); err != nil {
			return err
		}
		_, err = tx.Exec(`INSERT INTO proc_segments(id,pid,cid,generation,kind,from_id,to_id,suffix_to,archive_path,summary_message_id,messages,created_at,process_cap)
			VALUES(?,?,?,?,'compaction',?,?,?,?,?,?,?,(SELECT process_cap FROM proc_conversations WHERE pid=? AND cid=?))`,
			segID, p.Pid, cid, c.Generation, from, to, suffixTo, archive, from, n, t, p.Pid, cid)
		return err
	})
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
	}
	committed = true
	seg, err := m.segment(ctx, p.Pid, cid, segID)
	if err != nil {
		return nil, err
	}
	signal(m, p.Uid, abi.SigProcessLifecycle, abi.ProcessLifecycle{Pid: p.Pid, Event: "conversation.compacted", ConversationID: cid, SegmentID: segID, ArchivedMessages: n})
	return &abi.CompactResult{OK: true, Pid: p.Pid, ConversationID: cid, Segment: *seg, ArchivedMessages: n, ArchivedTo: archive, SummaryMessageID: from}, nil
}

// removeArchive deletes an archive no segment records (the compaction
// that wrote it did not happen).
func (m *engine) removeArchive(ctx context.Context, path string) {
	res, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.FsDelete, &abi.FSDeleteArgs{Path: path})
	if err == nil && !res.OK {
		err = errors.New(res.Error)
	}
	if err != nil {
		m.log.Warn("proc: removing an unused archive", "path", path, "err", err)
	}
}

// summarize asks the owner's model to summarize messages from..to (the
// last 200 of them, at most 48 KiB of text).
func (m *engine) summarize(ctx context.Context, p *abi.Process, cid string, gen, from, to int64) (string, error) {
	prov, modelName, err := m.provider(ctx, p.Uid)
	if err != nil {
		return "", err
	}
	rows, err := m.st.QueryContext(ctx, `SELECT role,content FROM (SELECT id,role,content FROM proc_messages
		WHERE pid=? AND cid=? AND generation=? AND id BETWEEN ? AND ? ORDER BY id DESC LIMIT 200) AS tail ORDER BY id`, p.Pid, cid, gen, from, to)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for rows.Next() {
		var role, content string
		if err := rows.Scan(&role, &content); err != nil {
			rows.Close()
			return "", err
		}
		fmt.Fprintf(&b, "%s: %s\n", role, content)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	excerpt := b.String()
	if len(excerpt) > 48<<10 {
		excerpt = excerpt[len(excerpt)-48<<10:]
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	resp, err := prov.Complete(ctx, model.Request{Model: modelName,
		System:   "Summarize this conversation for its own continuation: decisions, facts, open tasks. Be brief.",
		Messages: []model.Message{{Role: model.User, Content: excerpt}}}, func(string) {})
	if err != nil {
		return "", err
	}
	return resp.Text, nil
}

// writeArchive writes the messages from..to of a conversation generation
// (all of them when to is 0) as gzipped JSON lines to the namespace path,
// streaming rows from the store. It returns how many it wrote.
func (m *engine) writeArchive(ctx context.Context, path, pid, cid string, gen, from, to int64) (int64, error) {
	if to == 0 {
		to = 1<<62 - 1
	}
	f, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.FsCreate, &abi.FileArgs{Path: path, Perm: 0o600})
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	rows, err := m.st.QueryContext(ctx, `SELECT `+msgColumns+` FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id BETWEEN ? AND ? ORDER BY id`, pid, cid, gen, from, to)
	if err != nil {
		f.Close()
		return 0, err
	}
	var n int64
	enc := json.NewEncoder(zw)
	for rows.Next() {
		var msg abi.Message
		var content sql.RawBytes
		if err := scanMessage(rows, &msg, &content); err != nil {
			rows.Close()
			f.Close()
			return 0, abi.E(abi.Path(path), err)
		}
		msg.Content = json.RawMessage(content)
		if err := enc.Encode(&msg); err != nil {
			rows.Close()
			f.Close()
			return 0, err
		}
		n++
	}
	rows.Close()
	err = errors.Join(rows.Err(), zw.Close(), bw.Flush(), f.Sync(), f.Close())
	if err != nil {
		return 0, abi.E(abi.Path(path), err)
	}
	return n, nil
}

// readArchive streams the messages of an archive to fn, as the caller.
func (m *engine) readArchive(ctx context.Context, c *kernel.Caller, path string, fn func(abi.Message) bool) error {
	f, err := kernel.Do(ctx, m.k, c, abi.FsOpenread, &abi.FileArgs{Path: path})
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		return abi.E(abi.Path(path), err)
	}
	dec := json.NewDecoder(zr)
	for {
		var msg abi.Message
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return abi.E(abi.Path(path), err)
		}
		if !fn(msg) {
			return nil
		}
	}
}

// fork branches cid through a live message, or restores a segment (with
// the live suffix that followed it, unless told not to), into a new
// conversation.
func (m *engine) fork(ctx context.Context, c *kernel.Caller, p *abi.Process, cid string, a abi.ForkArgs) (*abi.ForkResult, error) {
	if (a.SegmentID == "") == (a.ThroughMessageID == nil) {
		return nil, abi.E(abi.Invalid, "give exactly one of through=<msgId> or segment=<segId>")
	}
	src, err := m.conv(ctx, p.Pid, cid)
	if err != nil {
		return nil, err
	}
	target := a.TargetConversationID
	if target == "" {
		target = "fork-" + newID("")[:8]
	}
	if err := validCid(target); err != nil {
		return nil, err
	}
	title, err := checkTitle(a.Title)
	if err != nil {
		return nil, err
	}
	var copied []abi.Message
	suffix := false
	var seg *abi.Segment
	if a.ThroughMessageID != nil {
		copied, err = readMessages(ctx, m.st, `SELECT `+msgColumns+` FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id<=? ORDER BY id`, p.Pid, cid, src.Generation, *a.ThroughMessageID)
		if err != nil {
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
		}
		if len(copied) == 0 || copied[len(copied)-1].ID != *a.ThroughMessageID {
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), abi.NotExist, fmt.Sprintf("no message %d in the active conversation", *a.ThroughMessageID))
		}
	} else {
		if seg, err = m.segment(ctx, p.Pid, cid, a.SegmentID); err != nil {
			return nil, err
		}
		if err := m.readArchive(ctx, c, seg.ArchivePath, func(msg abi.Message) bool { copied = append(copied, msg); return true }); err != nil {
			return nil, err
		}
		if a.IncludeLiveSuffix == nil || *a.IncludeLiveSuffix {
			suffix = true
			// suffixTo is the last message that followed the segment
			// when it was made: the live suffix it restores.
			var suffixTo int64
			if err := m.st.QueryRowContext(ctx, `SELECT suffix_to FROM proc_segments WHERE pid=? AND id=?`, p.Pid, seg.ID).Scan(&suffixTo); err != nil {
				return nil, abi.E(abi.Path(seg.ID), err)
			}
			live, err := readMessages(ctx, m.st, `SELECT `+msgColumns+` FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id>? AND id<=? ORDER BY id`,
				p.Pid, cid, seg.Generation, seg.ToMessageID, suffixTo)
			if err != nil {
				return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
			}
			copied = append(copied, live...)
		}
	}
	// The fork carries the narrowing of what it copies: the live
	// conversation's, a segment's as its conversation had it.
	narrow := src.Cap
	if seg != nil {
		var segCap sql.NullString
		if err := m.st.QueryRowContext(ctx, `SELECT process_cap FROM proc_segments WHERE pid=? AND id=?`, p.Pid, seg.ID).Scan(&segCap); err != nil {
			return nil, abi.E(abi.Path(seg.ID), err)
		}
		if narrow = abi.CapFromValue(segCap); suffix && seg.Generation == src.Generation {
			narrow = abi.NarrowCap(narrow, src.Cap)
		}
	}
	t := now()
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := tx.Exec(`INSERT INTO proc_conversations(pid,cid,title,created_at,updated_at,process_cap) VALUES(?,?,?,?,?,?)`, p.Pid, target, title, t, t, abi.CapValue(narrow)); err != nil {
			return abi.E(abi.Path(p.Pid+"/"+target), abi.Busy, "conversation already exists")
		}
		st, err := tx.Prepare(`INSERT INTO proc_messages(pid,cid,generation,role,content,created_at,kind,source,trace_id,media) VALUES(?,?,1,?,?,?,?,?,?,?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, msg := range copied {
			meta := eventRow{kind: sql.NullString{String: msg.Kind, Valid: msg.Kind != ""}, trace: sql.NullString{String: msg.TraceID, Valid: msg.TraceID != ""}}
			if msg.Source != nil {
				src, _ := json.Marshal(msg.Source)
				meta.source = sql.NullString{String: string(src), Valid: true}
			}
			if _, err := st.Exec(p.Pid, target, msg.Role, string(msg.Content), msg.Timestamp, meta.kind, meta.source, meta.trace, mediaColumn(msg.Media)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	tc, err := m.conv(ctx, p.Pid, target)
	if err != nil {
		return nil, err
	}
	signal(m, p.Uid, abi.SigProcessLifecycle, abi.ProcessLifecycle{Pid: p.Pid, Event: "conversation.forked", ConversationID: cid, TargetConversationID: target})
	return &abi.ForkResult{OK: true, Pid: p.Pid, SourceConversationID: cid, TargetConversation: tc, RestoredMessages: len(copied),
		IncludedLiveSuffix: suffix, Segment: seg, ThroughMessageID: a.ThroughMessageID}, nil
}

// resetConvs archives (unless archive is false) and clears conversations
// cids of p, bumps their generations and drops their queued messages; an
// active run in one of them is aborted first.
func (m *engine) resetConvs(ctx context.Context, p *abi.Process, cids []string, archive bool) ([]abi.ArchiveEntry, string, error) {
	pr := m.proc(p.Pid, p.Uid)
	pr.mu.Lock()
	// The conversations' queued messages are dropped before their run is
	// aborted: the abort starts the oldest queued message, often one of
	// these, which would reach the model (paid work for a message the
	// reset discards), leave a stray user message in the archive, and end
	// its run with no proc.run.finished.
	for _, cid := range cids {
		if _, err := m.st.Exec(ctx, `DELETE FROM proc_queue WHERE pid=? AND cid=?`, p.Pid, cid); err != nil {
			pr.mu.Unlock()
			return nil, "", abi.E(abi.Path(p.Pid+"/"+cid), err)
		}
	}
	// A run of these conversations ends before they are cleared, as an
	// abort ends it (with its finish signals); one being recorded by Send
	// is waited for first. The abort frees the process, and a message
	// queued meanwhile may start a run in them again: the loop ends it
	// too. pr.mu is held from the last check to the end, so no run starts
	// in them before their generations are bumped.
	for {
		r := pr.run
		if r == nil || !slices.Contains(cids, r.cid) {
			break
		}
		pr.mu.Unlock()
		_, err := m.abortRun(ctx, pr, r)
		pr.mu.Lock()
		if err != nil {
			pr.mu.Unlock()
			return nil, "", err
		}
		if pr.run == r {
			pr.mu.Unlock()
			return nil, "", abi.E(abi.Path(p.Pid), abi.Busy, "the conversation's run did not stop")
		}
	}
	defer pr.mu.Unlock()
	// The abort may have ended ctx (a process resetting itself: its own
	// run is the caller); the reset still completes.
	ctx = context.WithoutCancel(ctx)
	u, err := m.k.UserOf(ctx, p.Uid)
	if err != nil {
		return nil, "", err
	}
	archiveID := time.Now().UTC().Format("20060102T150405Z") + "-" + newID("")[:6]
	dir := fmt.Sprintf("/var/sessions/%s/%s/%s", u.Username, p.Pid, archiveID)
	entries := []abi.ArchiveEntry{}
	for _, cid := range cids {
		c, err := m.conv(ctx, p.Pid, cid)
		if err != nil {
			return nil, "", err
		}
		if archive && c.MessageCount > 0 {
			path := fmt.Sprintf("%s/%s.gen-%d.jsonl.gz", dir, cid, c.Generation)
			n, err := m.writeArchive(ctx, path, p.Pid, cid, c.Generation, 0, 0)
			if err != nil {
				return nil, "", err
			}
			entries = append(entries, abi.ArchiveEntry{ConversationID: cid, Generation: c.Generation, Messages: n, Path: path})
		}
		err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
			if _, err := tx.Exec(`DELETE FROM proc_messages WHERE pid=? AND cid=? AND generation=?`, p.Pid, cid, c.Generation); err != nil {
				return err
			}
			if _, err := tx.Exec(`DELETE FROM proc_queue WHERE pid=? AND cid=?`, p.Pid, cid); err != nil {
				return err
			}
			if _, err := tx.Exec(`UPDATE proc_hil SET status='stale' WHERE pid=? AND cid=? AND status='pending'`, p.Pid, cid); err != nil {
				return err
			}
			// The narrowing of the words archived goes with them.
			_, err := tx.Exec(`UPDATE proc_conversations SET generation=generation+1, status='open', updated_at=?, process_cap=NULL WHERE pid=? AND cid=?`, now(), p.Pid, cid)
			return err
		})
		if err != nil {
			return nil, "", abi.E(abi.Path(p.Pid+"/"+cid), err)
		}
	}
	if pr.state == idle {
		m.nextLocked(ctx, pr, nil)
	}
	if len(entries) == 0 {
		dir = ""
	}
	return entries, dir, nil
}

// validCid: 1-64 of [A-Za-z0-9_.-], not starting with a dot.
func validCid(cid string) error {
	if cid == "" || len(cid) > 64 || cid[0] == '.' || cid == "ctl" || cid == "err" {
		return abi.E(abi.Path(cid), abi.Invalid, "conversation ids are 1-64 of [A-Za-z0-9_.-], not ctl or err")
	}
	for _, r := range cid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return abi.E(abi.Path(cid), abi.Invalid, "conversation ids are 1-64 of [A-Za-z0-9_.-], not ctl or err")
		}
	}
	return nil
}

// segment returns segment segID of conversation cid of pid.
func (m *engine) segment(ctx context.Context, pid, cid, segID string) (*abi.Segment, error) {
	segs, err := m.segments(ctx, pid, cid, segID)
	if err != nil {
		return nil, abi.E(abi.Path(segID), err)
	}
	if len(segs) == 0 || segs[0].ConversationID != cid {
		return nil, abi.E(abi.Path(segID), abi.NotExist, "no such segment")
	}
	return &segs[0], nil
}
