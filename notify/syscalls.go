package notify

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The handlers of notification.create, .list, .mark_read and .dismiss
// (seed 003), and the Internal calls of the files.

// The rules of expiry and listing.
const (
	// DefaultTTL is how long an unread notification lives when its
	// creator gives no ttlMs.
	DefaultTTL = 30 * 24 * time.Hour
	// MinTTL and MaxTTL bound a ttlMs given to notification.create: a
	// smaller or larger one is clamped to them.
	MinTTL = time.Second
	MaxTTL = 90 * 24 * time.Hour
	// ReadTTL is how long a notification lives once it is read.
	ReadTTL = 7 * 24 * time.Hour
	// DismissTTL is how long a notification lives once it is dismissed.
	DismissTTL = 3 * 24 * time.Hour
	// DefaultLimit is the most notifications a list returns when its
	// caller gives no limit; a limit is clamped to 1 through MaxLimit.
	DefaultLimit = 100
	MaxLimit     = 500
	// MaxPerUser is the most notifications a user keeps: a create beyond
	// it deletes the user's oldest.
	MaxPerUser = 1000
)

// The bounds of a notification's text, in bytes.
const (
	maxTitle       = kernel.MaxLabel // one line
	maxBody        = 16 << 10        // newlines and tabs allowed
	maxActions     = 8
	maxActionKind  = 64
	maxActionLabel = 128
	maxActionTgt   = 1024
	maxActionArgs  = 8 << 10 // as JSON
	maxID          = 64
)

// levels are the levels a notification may have.
var levels = map[string]bool{"info": true, "success": true, "warning": true, "error": true}

// expiryOf is when a notification made at now with ttlMs expires: the
// default TTL without one, else ttlMs clamped to MinTTL..MaxTTL.
func expiryOf(now time.Time, ttlMs *int64) int64 {
	ttl := DefaultTTL.Milliseconds()
	if ttlMs != nil {
		ttl = min(max(*ttlMs, MinTTL.Milliseconds()), MaxTTL.Milliseconds())
	}
	return now.UnixMilli() + ttl
}

// limitOf is the number of notifications a list returns for limit.
func limitOf(limit *int) int {
	if limit == nil {
		return DefaultLimit
	}
	return min(max(*limit, 1), MaxLimit)
}

// create serves notification.create: a notification for the caller, from
// the caller's process if it acts as one, else from the user.
func (r *Room) create(ctx context.Context, c *kernel.Caller, a *abi.NotificationCreateArgs) (*abi.NotificationCreateResult, error) {
	n, err := normalize(a)
	if err != nil {
		return nil, err
	}
	now := r.now()
	n.NotificationID = newID()
	n.CreatedAt = now.UnixMilli()
	exp := expiryOf(now, a.TtlMs)
	n.ExpiresAt = &exp
	n.Source = abi.NotificationSource{Kind: "user"}
	if c.Pid != "" {
		n.Source = abi.NotificationSource{Kind: "process", ProcessID: c.Pid}
	}
	actions, err := json.Marshal(n.Actions)
	if err != nil {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("actions: %v", err))
	}
	err = r.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := r.pruneTx(tx, now.UnixMilli()); err != nil {
			return err
		}
		if _, err := r.st.TxExec(tx, `INSERT INTO notify_notifications
			(id, owner_uid, title, body, level, created_at, expires_at, actions, source_pid, seq)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(seq), 0)+1 FROM notify_notifications))`,
			n.NotificationID, c.Uid, n.Title, n.Body, n.Level, n.CreatedAt, exp, string(actions), c.Pid); err != nil {
			return err
		}
		// The user's oldest beyond MaxPerUser go.
		_, err := r.st.TxExec(tx, `DELETE FROM notify_notifications WHERE id IN (
			SELECT id FROM notify_notifications WHERE owner_uid=?
			ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?)`, c.Uid, int64(math.MaxInt64), MaxPerUser)
		return err
	})
	if err != nil {
		return nil, abi.E(abi.Path(n.NotificationID), err)
	}
	r.signal(abi.SigNotificationCreated, c.Uid, n)
	return &abi.NotificationCreateResult{Notification: n}, nil
}

// normalize checks a create's args and returns the notification they
// make: title required (trimmed, one line), level defaulted and checked,
// body free text, actions trimmed and checked. Any fault is a 400 naming
// the field.
func normalize(a *abi.NotificationCreateArgs) (*abi.Notification, error) {
	n := &abi.Notification{Title: strings.TrimSpace(a.Title), Body: a.Body, Level: a.Level, Actions: []abi.NotificationAction{}}
	if n.Title == "" {
		return nil, abi.E(abi.Invalid, "title is required")
	}
	if err := kernel.CheckText("title", n.Title, maxTitle); err != nil {
		return nil, err
	}
	if err := checkBody(n.Body); err != nil {
		return nil, err
	}
	if n.Level == "" {
		n.Level = "info"
	}
	if !levels[n.Level] {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("level %q: want info, success, warning or error", truncate(n.Level)))
	}
	if len(a.Actions) > maxActions {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("%d actions; the limit is %d", len(a.Actions), maxActions))
	}
	for i, act := range a.Actions {
		field := func(f string) string { return fmt.Sprintf("actions[%d].%s", i, f) }
		act.Kind, act.Label, act.Target = strings.TrimSpace(act.Kind), strings.TrimSpace(act.Label), strings.TrimSpace(act.Target)
		if act.Kind == "" {
			return nil, abi.E(abi.Invalid, field("kind")+" is required")
		}
		if act.Label == "" {
			return nil, abi.E(abi.Invalid, field("label")+" is required")
		}
		for _, f := range []struct {
			name, s string
			max     int
		}{{"kind", act.Kind, maxActionKind}, {"label", act.Label, maxActionLabel}, {"target", act.Target, maxActionTgt}} {
			if err := kernel.CheckText(field(f.name), f.s, f.max); err != nil {
				return nil, err
			}
		}
		if len(act.Args) == 0 {
			act.Args = nil
		} else if b, err := json.Marshal(act.Args); err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("%s: %v", field("args"), err))
		} else if len(b) > maxActionArgs {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("%s is %d bytes of JSON; the limit is %d", field("args"), len(b), maxActionArgs))
		}
		n.Actions = append(n.Actions, act)
	}
	return n, nil
}

// checkBody checks a body: at most maxBody bytes of valid UTF-8 with no
// control character but newline and tab.
func checkBody(s string) error {
	return kernel.CheckText("body", strings.NewReplacer("\n", " ", "\t", " ").Replace(s), maxBody)
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// list serves notification.list: the caller's live notifications, newest
// first. It writes nothing: expired ones are filtered out, not deleted.
func (r *Room) list(ctx context.Context, c *kernel.Caller, a *abi.NotificationListArgs) (*abi.NotificationListResult, error) {
	where := `WHERE owner_uid=? AND expires_at>?`
	if a.IncludeRead != nil && !*a.IncludeRead {
		where += ` AND read_at IS NULL`
	}
	if a.IncludeDismissed == nil || !*a.IncludeDismissed {
		where += ` AND dismissed_at IS NULL`
	}
	list, err := r.query(ctx, where+` ORDER BY created_at DESC, seq DESC LIMIT ?`, c.Uid, r.now().UnixMilli(), limitOf(a.Limit))
	if err != nil {
		return nil, err
	}
	return &abi.NotificationListResult{Notifications: list}, nil
}

// markRead serves notification.mark_read: the caller's live notification
// is read (its first readAt stays) and expires ReadTTL from now, unless it
// is dismissed, whose expiry stays. Any other id is a null notification
// (nullOr).
func (r *Room) markRead(ctx context.Context, c *kernel.Caller, a *abi.NotificationIDArgs) (*abi.NotificationResult, error) {
	n, err := r.update(ctx, c, a.NotificationID, func(n *abi.Notification, now int64) {
		if n.ReadAt == nil {
			n.ReadAt = &now
		}
		if n.DismissedAt == nil {
			exp := now + ReadTTL.Milliseconds()
			n.ExpiresAt = &exp
		}
	})
	if err != nil || n == nil {
		return nullOr(c, a.NotificationID, err)
	}
	r.signal(abi.SigNotificationUpdated, c.Uid, n)
	return &abi.NotificationResult{Notification: n}, nil
}

// dismiss serves notification.dismiss: the caller's live notification is
// dismissed and expires DismissTTL after its first dismissal. Any other
// id is a null notification.
func (r *Room) dismiss(ctx context.Context, c *kernel.Caller, a *abi.NotificationIDArgs) (*abi.NotificationResult, error) {
	n, err := r.update(ctx, c, a.NotificationID, func(n *abi.Notification, now int64) {
		if n.DismissedAt == nil {
			n.DismissedAt = &now
			exp := now + DismissTTL.Milliseconds()
			n.ExpiresAt = &exp
		}
	})
	if err != nil || n == nil {
		return nullOr(c, a.NotificationID, err)
	}
	r.signal(abi.SigNotificationDismissed, c.Uid, n)
	return &abi.NotificationResult{Notification: n}, nil
}

// nullOr is the answer of mark_read and dismiss that found no
// notification: err if there is one; else the seed's null notification,
// or, for a line of /var/notify/ctl (its caller's Origin), a 404, so that
// the write of the line fails and err says why.
func nullOr(c *kernel.Caller, id string, err error) (*abi.NotificationResult, error) {
	if err != nil {
		return nil, err
	}
	if c.Origin == dirPath {
		return nil, abi.E(abi.Path(id), abi.NotExist, "no such notification")
	}
	return &abi.NotificationResult{}, nil
}

// checkID checks a notificationId given to a call (400).
func checkID(id string) error {
	if id == "" {
		return abi.E(abi.Invalid, "notificationId is required")
	}
	return kernel.CheckText("notificationId", id, maxID)
}

// update applies change to the caller's live notification id, at now, in
// one transaction that also prunes, and returns it; nil if there is none.
func (r *Room) update(ctx context.Context, c *kernel.Caller, id string, change func(n *abi.Notification, now int64)) (*abi.Notification, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	now := r.now().UnixMilli()
	var out *abi.Notification
	err := r.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := r.pruneTx(tx, now); err != nil {
			return err
		}
		n, err := scan(r.st.TxQueryRow(tx, `SELECT `+columns+` FROM notify_notifications
			WHERE id=? AND owner_uid=? AND expires_at>?`, id, c.Uid, now))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		change(n, now)
		if _, err := r.st.TxExec(tx, `UPDATE notify_notifications SET read_at=?, dismissed_at=?, expires_at=? WHERE id=?`,
			n.ReadAt, n.DismissedAt, *n.ExpiresAt, id); err != nil {
			return err
		}
		out = n
		return nil
	})
	if err != nil {
		return nil, abi.E(abi.Path(id), err)
	}
	return out, nil
}

// signal tells uid (and root, who sees every signal) of a change to n.
func (r *Room) signal(sig abi.Signal[abi.NotificationSignal], uid uint32, n *abi.Notification) {
	r.changes.Touch(strconv.FormatUint(uint64(uid), 10))
	kernel.Publish(r.k, sig, abi.NotificationSignal{Notification: n}, kernel.Audience{Uids: []uint32{uid}})
}

// newID returns a random (version 4) UUID.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// FilesArgs are the args of the Internal notification.files and
// notification.file (abi.NotificationFilesArgs).
type FilesArgs = abi.NotificationFilesArgs

// owns checks that c may read uid's directory: uid's own, or root.
func owns(c *kernel.Caller, uid uint32) error {
	if c.Uid == uid && c.Role != "nobody" || c.IsRoot() {
		return nil
	}
	return abi.E(abi.Permission, "permission denied")
}

// files serves notification.files (Internal): the notifications of a.Uid
// that its directory shows, every live one that is not dismissed, newest
// first. Only a.Uid and root may make it.
func (r *Room) files(ctx context.Context, c *kernel.Caller, a *FilesArgs) ([]abi.Notification, error) {
	if err := owns(c, a.Uid); err != nil {
		return nil, err
	}
	return r.query(ctx, `WHERE owner_uid=? AND expires_at>? AND dismissed_at IS NULL ORDER BY created_at DESC, seq DESC LIMIT ?`,
		a.Uid, r.now().UnixMilli(), MaxPerUser)
}

// file serves notification.file (Internal): one notification of a.Uid
// that its directory shows, or 404.
func (r *Room) file(ctx context.Context, c *kernel.Caller, a *FilesArgs) (*abi.Notification, error) {
	if err := owns(c, a.Uid); err != nil {
		return nil, err
	}
	list, err := r.query(ctx, `WHERE id=? AND owner_uid=? AND expires_at>? AND dismissed_at IS NULL`, a.ID, a.Uid, r.now().UnixMilli())
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, abi.E(abi.Path(a.ID), abi.NotExist, "no such notification")
	}
	return &list[0], nil
}
