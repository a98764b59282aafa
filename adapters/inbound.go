package adapters

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Bounds of an inbound message.
const (
	// MaxInboundText is the longest text of a message, in bytes.
	MaxInboundText = 32 << 10
	// maxInboundMedia is the most media one message carries.
	maxInboundMedia = 8
)

// surfaceKinds are the kinds a surface may be.
var surfaceKinds = map[string]bool{"dm": true, "group": true, "channel": true, "thread": true}

// checkSurface checks a chat's surface.
func checkSurface(s abi.AdapterSurface) error {
	if !surfaceKinds[s.Kind] {
		return abi.E(abi.Invalid, fmt.Sprintf("surface.kind %s: want dm, group, channel or thread", quote(s.Kind)))
	}
	if s.ID == "" || len(s.ID) > maxSurfaceID || len(s.ThreadID) > maxSurfaceID {
		return abi.E(abi.Invalid, fmt.Sprintf("surface.id: want 1 to %d bytes", maxSurfaceID))
	}
	return nil
}

// quote quotes s, cut to 40 bytes.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// checkMessage checks an inbound message's shape and bounds.
func checkMessage(m *abi.AdapterMessage) error {
	if m.MessageID == "" || len(m.MessageID) > maxMessageID {
		return abi.E(abi.Invalid, fmt.Sprintf("message.messageId: want 1 to %d bytes", maxMessageID))
	}
	if err := checkSurface(m.Surface); err != nil {
		return err
	}
	if len(m.Text) > MaxInboundText {
		return abi.E(abi.Invalid, fmt.Sprintf("message.text: %d bytes, at most %d", len(m.Text), MaxInboundText))
	}
	if !utf8.ValidString(m.Text) {
		return abi.E(abi.Invalid, "message.text: not UTF-8")
	}
	if len(m.Media) > maxInboundMedia {
		return abi.E(abi.Invalid, fmt.Sprintf("message.media: %d items, at most %d", len(m.Media), maxInboundMedia))
	}
	if m.Actor != nil && (m.Actor.ID == "" || len(m.Actor.ID) > maxActorID) {
		return abi.E(abi.Invalid, fmt.Sprintf("message.actor.id: want 1 to %d bytes", maxActorID))
	}
	if len(m.ReplyToID) > maxMessageID || len(m.ReplyToText) > MaxInboundText {
		return abi.E(abi.Invalid, "message.replyToId or replyToText too long")
	}
	return nil
}

// inbound serves adapter.inbound (seed 003, 004): a bridge's message.
// The actor's link decides everything: an unlinked DM gets a link code,
// an unlinked message elsewhere is dropped, and a linked one is the
// linked user's, never what the platform claims. Its receipt is claimed
// before anything else is done, so a replay of its id does nothing.
func (r *Room) inbound(ctx context.Context, c *kernel.Caller, a *abi.AdapterInboundArgs) (*abi.AdapterInboundResult, error) {
	kind, err := bridgeOf(c, a.Adapter, a.AccountID)
	if err != nil {
		return nil, err
	}
	m := &a.Message
	if err := checkMessage(m); err != nil {
		return nil, err
	}
	if err := r.ownAccount(ctx, c, kind, a.AccountID); err != nil {
		return nil, err
	}
	if _, err := r.st.Exec(ctx, `UPDATE adapter_accounts SET last_message=? WHERE adapter=? AND account_id=?`,
		r.now().UnixMilli(), kind, a.AccountID); err != nil {
		return nil, abi.E(err)
	}
	if m.Actor == nil {
		return dropped("no_actor"), nil
	}
	uid, linked, err := r.linkedUid(ctx, kind, a.AccountID, m.Actor.ID)
	if err != nil {
		return nil, err
	}
	if !linked {
		if m.Surface.Kind != "dm" {
			return dropped("unlinked_actor"), nil
		}
		ch, err := r.challenge(ctx, kind, a.AccountID, m.Actor.ID)
		if err != nil {
			return nil, abi.E(err)
		}
		if ch == nil {
			return dropped("challenge_limit"), nil
		}
		return &abi.AdapterInboundResult{OK: true, Status: "challenge", Challenge: ch,
			Reply: &abi.AdapterReply{Text: ch.Prompt, ReplyToID: m.MessageID}}, nil
	}
	// The receipt, before any side effect.
	claimed, prior, err := r.claimReceipt(ctx, kind, a.AccountID, m.MessageID, uid)
	if err != nil {
		return nil, err
	}
	if !claimed && prior.RunID != "" {
		res := &abi.AdapterInboundResult{OK: true, Status: "replayed"}
		if prior.RunID != noRun {
			res.Delivered = prior
		}
		return res, nil
	}
	// Claimed now, or claimed before by a delivery that did not record
	// its outcome (the daemon died, or the send failed): done again. Its
	// proc.send carries the message's idempotency key, so it enters the
	// process at most once.
	redo := !claimed
	id, err := r.k.IdentityOf(ctx, uid)
	if err != nil {
		return nil, err
	}
	as := &kernel.Caller{Identity: id}
	reply := func(status, text string) *abi.AdapterInboundResult {
		return &abi.AdapterInboundResult{OK: true, Status: status, Reply: &abi.AdapterReply{Text: text, ReplyToID: m.MessageID}}
	}
	done := func(res *abi.AdapterInboundResult) *abi.AdapterInboundResult {
		r.noteReceipt(ctx, kind, a.AccountID, m.MessageID, "", noRun)
		return res
	}
	if cmd, ok := parseCommand(m.Text); ok {
		return done(reply("command", r.command(ctx, as, kind, a.AccountID, m.Surface, cmd))), nil
	}
	if ans := parseAnswer(m.Text); ans != "" {
		if text, ok := r.answer(ctx, as, kind, a.AccountID, m.Surface, ans); ok {
			return done(reply("approval", text)), nil
		}
	}
	if m.Surface.Kind != "dm" && !m.WasMentioned {
		return done(dropped("not_mentioned")), nil
	}
	pid, err := r.target(ctx, uid, kind, a.AccountID, m.Surface)
	if err != nil {
		return nil, err
	}
	trace := traceOf(kind, a.AccountID, m.MessageID)
	send, err := kernel.Do(ctx, r.k, as, abi.ProcSend, &abi.SendArgs{Pid: pid, Message: m.Text, Kind: "adapter.message",
		TraceID: trace, Media: m.Media, IdempotencyKey: sendKey(kind, a.AccountID, m.MessageID)})
	if err != nil {
		return nil, err
	}
	rt := &runRoute{RunID: send.RunID, Uid: uid, Pid: pid, Trace: trace, Adapter: kind, Account: a.AccountID,
		Surface: m.Surface, ReplyToID: m.MessageID}
	if err := r.addRoute(ctx, rt); err != nil {
		return nil, err
	}
	if redo {
		// The run may have ended while no route waited for it: ask proc
		// where it stands, as after a restart.
		r.mu.Lock()
		r.jobs = append(r.jobs, job{rt: rt, ev: scanRun{}})
		r.mu.Unlock()
		r.poke()
	}
	d := &abi.AdapterDelivered{Uid: uid, Pid: pid, RunID: send.RunID, Queued: send.Queued}
	r.noteReceipt(ctx, kind, a.AccountID, m.MessageID, pid, send.RunID)
	return &abi.AdapterInboundResult{OK: true, Status: "delivered", Delivered: d}, nil
}

// noRun is a receipt's run when the message started none (a chat
// command, an approval's answer, a group message not for the bot): its
// outcome is recorded, and a replay of it does nothing.
const noRun = "-"

// noteReceipt records the outcome of a message whose receipt it claimed:
// the run it started (or noRun). A receipt without one is done again on
// a replay of its message.
func (r *Room) noteReceipt(ctx context.Context, kind, account, msgID, pid, runID string) {
	if _, err := r.st.Exec(ctx, `UPDATE adapter_receipts SET pid=?, run_id=? WHERE adapter=? AND account_id=? AND message_id=?`,
		pid, runID, kind, account, msgID); err != nil {
		r.log.Warn("adapters: noting a receipt's outcome", "err", err)
	}
}

// sendKey is the idempotency key of the proc.send of a platform's
// message: the same for every delivery of it.
func sendKey(kind, account, msgID string) string {
	return "adapter:" + messageDigest(kind, account, msgID)
}

// messageDigest names a platform's message by a digest of its adapter,
// account and id (unambiguous: the parts are NUL-separated).
func messageDigest(kind, account, msgID string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + account + "\x00" + msgID))
	return hex.EncodeToString(sum[:16])
}

// dropped is the result of a message dropped for reason.
func dropped(reason string) *abi.AdapterInboundResult {
	return &abi.AdapterInboundResult{OK: true, Status: "dropped", DroppedReason: reason}
}

// claimReceipt claims the receipt of a message: false, with what the
// first delivery of it gave, when its id was claimed before.
func (r *Room) claimReceipt(ctx context.Context, kind, account, msgID string, uid uint32) (bool, *abi.AdapterDelivered, error) {
	now := r.now()
	var claimed bool
	err := r.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := r.st.TxExec(tx, `DELETE FROM adapter_receipts WHERE message_id IN (SELECT message_id FROM adapter_receipts
			WHERE created_at<? LIMIT 256)`, now.Add(-keepDone).UnixMilli()); err != nil {
			return err
		}
		res, err := r.st.TxExec(tx, `INSERT INTO adapter_receipts(adapter, account_id, message_id, uid, created_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, kind, account, msgID, uid, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		claimed = n == 1
		return err
	})
	if err != nil {
		return false, nil, abi.E(err)
	}
	if claimed {
		return true, nil, nil
	}
	d := &abi.AdapterDelivered{}
	err = r.st.QueryRowContext(ctx, `SELECT uid, pid, run_id FROM adapter_receipts WHERE adapter=? AND account_id=? AND message_id=?`,
		kind, account, msgID).Scan(&d.Uid, &d.Pid, &d.RunID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, nil, abi.E(err)
	}
	return false, d, nil
}

// target is the process a linked user's message in a chat goes to: the
// chat's surface route, else the user's init process.
func (r *Room) target(ctx context.Context, uid uint32, kind, account string, s abi.AdapterSurface) (string, error) {
	var pid string
	err := r.st.QueryRowContext(ctx, `SELECT pid FROM adapter_surface_routes WHERE uid=? AND adapter=? AND account_id=?
		AND surface_kind=? AND surface_id=?`, uid, kind, account, s.Kind, s.ID).Scan(&pid)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Sprintf("init:%d", uid), nil
	}
	if err != nil {
		return "", abi.E(err)
	}
	return pid, nil
}

// command runs a chat command as the linked user and returns its answer.
func (r *Room) command(ctx context.Context, as *kernel.Caller, kind, account string, s abi.AdapterSurface, cmd command) string {
	switch cmd.Name {
	case "where":
		pid, err := r.target(ctx, as.Uid, kind, account, s)
		if err != nil {
			return "error: " + err.Error()
		}
		return "This chat's messages go to " + pid + "."
	case "use":
		pid := cmd.Arg
		if pid == "" || strings.EqualFold(pid, "init") {
			if _, err := r.st.Exec(ctx, `DELETE FROM adapter_surface_routes WHERE uid=? AND adapter=? AND account_id=?
				AND surface_kind=? AND surface_id=?`, as.Uid, kind, account, s.Kind, s.ID); err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("This chat's messages go to init:%d.", as.Uid)
		}
		// The process must be one the user may send to: proc says.
		if _, err := kernel.Do(ctx, r.k, as, abi.ProcStatus, &abi.PidArgs{Pid: pid}); err != nil {
			return "error: " + err.Error()
		}
		if _, err := r.st.Exec(ctx, `INSERT INTO adapter_surface_routes(uid, adapter, account_id, surface_kind, surface_id, pid, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(uid, adapter, account_id, surface_kind, surface_id)
			DO UPDATE SET pid=excluded.pid, created_at=excluded.created_at`,
			as.Uid, kind, account, s.Kind, s.ID, pid, r.now().UnixMilli()); err != nil {
			return "error: " + err.Error()
		}
		return "This chat's messages now go to " + pid + "."
	}
	return "usage: /use <pid> | /use init | /where"
}

// traceOf is the trace id of an inbound message's run:
// adapter:KIND/ACCOUNT/MESSAGEID where proc.send takes it (at most 128
// bytes of letters, digits and -_.:/), else adapter:sha256:<digest of
// the three>, so any platform's id (an email's Message-ID has an @) is
// traced the same way every time.
func traceOf(kind, account, msgID string) string {
	if t := "adapter:" + kind + "/" + account + "/" + msgID; abi.CheckTraceID(t) == nil {
		return t
	}
	return "adapter:sha256:" + messageDigest(kind, account, msgID)
}
