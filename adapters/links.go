package adapters

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Identity links (adapter, account, actor -> uid) and the link
// challenges an unlinked DM gets (seed 003 sys.link*, seed 004).

// The rules of link codes.
const (
	// ChallengeTTL is how long a link code may be consumed.
	ChallengeTTL = 10 * time.Minute
	// MaxLinkTries is how many wrong codes a user may give within
	// LockWindow; past it every code, right or wrong, is refused until
	// the window ends.
	MaxLinkTries = 5
	// LockWindow is the window wrong codes are counted in.
	LockWindow = 10 * time.Minute
	// MaxLiveChallenges is the most live codes one account holds: an
	// unlinked DM past it is dropped ("challenge_limit"), so that any
	// number of strangers keeps the table bounded.
	MaxLiveChallenges = 64
	// codeAlphabet has no 0/O, 1/I: a code is read off a phone.
	codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
)

// Bounds of the names the room keeps, in bytes.
const (
	maxAccountID = 128
	maxActorID   = 256
	maxSurfaceID = 256
	maxMessageID = 256
)

// newCode is a fresh link code: eight characters of codeAlphabet (40
// bits), as XXXX-XXXX.
func newCode() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail
	}
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, codeAlphabet[int(c)%len(codeAlphabet)])
	}
	return string(out)
}

// normalizeCode reads a code as a person types it: any case, with or
// without its dash or blanks. It returns "" for what cannot be a code.
func normalizeCode(s string) string {
	var b strings.Builder
	for _, c := range strings.ToUpper(s) {
		switch {
		case c == '-' || c == ' ' || c == '\t':
		case strings.ContainsRune(codeAlphabet, c):
			b.WriteRune(c)
		default:
			return ""
		}
	}
	k := b.String()
	if len(k) != 8 {
		return ""
	}
	return k[:4] + "-" + k[4:]
}

// checkNames checks an adapter kind, account and actor (actor "" skips
// it) and returns the kind lowercased.
func checkNames(adapter, account, actor string, withActor bool) (string, error) {
	kind := strings.ToLower(adapter)
	if err := abi.CheckAdapterKind(kind); err != nil {
		return "", err
	}
	if account == "" || len(account) > maxAccountID {
		return "", abi.E(abi.Invalid, fmt.Sprintf("accountId: want 1 to %d bytes", maxAccountID))
	}
	if withActor && (actor == "" || len(actor) > maxActorID) {
		return "", abi.E(abi.Invalid, fmt.Sprintf("actorId: want 1 to %d bytes", maxActorID))
	}
	return kind, nil
}

// link serves sys.link: the actor is linked to the caller (root: to
// a.Uid), replacing any link it had.
func (r *Room) link(ctx context.Context, c *kernel.Caller, a *abi.LinkArgs) (*abi.LinkResult, error) {
	kind, err := checkNames(a.Adapter, a.AccountID, a.ActorID, true)
	if err != nil {
		return nil, err
	}
	uid := c.Uid
	if a.Uid != nil && *a.Uid != c.Uid {
		if !c.IsRoot() {
			return nil, abi.E(abi.Permission, "permission denied: only root links an actor to another user")
		}
		if _, err := r.k.UserOf(ctx, *a.Uid); err != nil {
			return nil, err
		}
		uid = *a.Uid
	}
	l := abi.Link{Adapter: kind, AccountID: a.AccountID, ActorID: a.ActorID, Uid: uid, CreatedAt: r.now().UnixMilli(), LinkedByUid: c.Uid}
	err = r.st.Tx(ctx, func(tx *kernel.Tx) error { return r.putLink(tx, l) })
	if err != nil {
		return nil, abi.E(err)
	}
	return &abi.LinkResult{Linked: true, Link: &l}, nil
}

// putLink writes l, replacing the actor's link, in tx.
func (r *Room) putLink(tx *kernel.Tx, l abi.Link) error {
	_, err := r.st.TxExec(tx, `INSERT INTO adapter_links(adapter, account_id, actor_id, uid, created_at, linked_by_uid)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(adapter, account_id, actor_id)
		DO UPDATE SET uid=excluded.uid, created_at=excluded.created_at, linked_by_uid=excluded.linked_by_uid`,
		l.Adapter, l.AccountID, l.ActorID, l.Uid, l.CreatedAt, l.LinkedByUid)
	return err
}

// unlink serves sys.unlink: the caller's link of the actor goes (root:
// anyone's).
func (r *Room) unlink(ctx context.Context, c *kernel.Caller, a *abi.UnlinkArgs) (*abi.UnlinkResult, error) {
	kind, err := checkNames(a.Adapter, a.AccountID, a.ActorID, true)
	if err != nil {
		return nil, err
	}
	q, args := `DELETE FROM adapter_links WHERE adapter=? AND account_id=? AND actor_id=?`, []any{kind, a.AccountID, a.ActorID}
	if !c.IsRoot() {
		q += ` AND uid=?`
		args = append(args, c.Uid)
	}
	res, err := r.st.Exec(ctx, q, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, abi.E(err)
	}
	return &abi.UnlinkResult{Removed: n > 0}, nil
}

// linkList serves sys.link.list: the caller's links (root: everyone's,
// or a.Uid's), newest first.
func (r *Room) linkList(ctx context.Context, c *kernel.Caller, a *abi.LinkListArgs) (*abi.LinkListResult, error) {
	where, args := `WHERE uid=?`, []any{c.Uid}
	switch {
	case c.IsRoot() && a.Uid == nil:
		where, args = ``, nil
	case c.IsRoot():
		args = []any{*a.Uid}
	case a.Uid != nil && *a.Uid != c.Uid:
		return nil, abi.E(abi.Permission, "permission denied: only root lists another user's links")
	}
	rows, err := r.st.QueryContext(ctx, `SELECT adapter, account_id, actor_id, uid, created_at, linked_by_uid
		FROM adapter_links `+where+` ORDER BY created_at DESC, adapter, account_id, actor_id`, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	out := []abi.Link{}
	for rows.Next() {
		var l abi.Link
		if err := rows.Scan(&l.Adapter, &l.AccountID, &l.ActorID, &l.Uid, &l.CreatedAt, &l.LinkedByUid); err != nil {
			return nil, abi.E(err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(err)
	}
	return &abi.LinkListResult{Links: out}, nil
}

// linkConsume serves sys.link.consume: a live code links its actor to
// the caller and is gone. A wrong code counts against the caller: past
// MaxLinkTries within LockWindow every code is refused until the window
// ends.
func (r *Room) linkConsume(ctx context.Context, c *kernel.Caller, a *abi.LinkConsumeArgs) (*abi.LinkResult, error) {
	code := normalizeCode(a.Code)
	now := r.now()
	var res *abi.LinkResult
	var refused error
	err := r.st.Tx(ctx, func(tx *kernel.Tx) error {
		res, refused = nil, nil
		var failures, start int64
		err := r.st.TxQueryRow(tx, `SELECT failures, window_start FROM adapter_link_failures WHERE uid=?`, c.Uid).Scan(&failures, &start)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if start+LockWindow.Milliseconds() <= now.UnixMilli() {
			failures, start = 0, now.UnixMilli()
		}
		if failures >= MaxLinkTries {
			refused = abi.E(abi.Permission, fmt.Sprintf("locked: %d wrong link codes; try again after %s",
				failures, time.UnixMilli(start+LockWindow.Milliseconds()).UTC().Format("15:04:05 UTC")))
			return nil
		}
		var l abi.Link
		if code != "" {
			err = r.st.TxQueryRow(tx, `DELETE FROM adapter_challenges WHERE code=? AND expires_at>?
				RETURNING adapter, account_id, actor_id`, code, now.UnixMilli()).Scan(&l.Adapter, &l.AccountID, &l.ActorID)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if code == "" || err != nil {
			failures++
			refused = abi.E(abi.Invalid, fmt.Sprintf("no such link code (or it expired, or was used): %d of %d tries left",
				MaxLinkTries-failures, MaxLinkTries))
			_, err := r.st.TxExec(tx, `INSERT INTO adapter_link_failures(uid, failures, window_start) VALUES (?, ?, ?)
				ON CONFLICT(uid) DO UPDATE SET failures=excluded.failures, window_start=excluded.window_start`, c.Uid, failures, start)
			return err
		}
		l.Uid, l.LinkedByUid, l.CreatedAt = c.Uid, c.Uid, now.UnixMilli()
		if err := r.putLink(tx, l); err != nil {
			return err
		}
		res = &abi.LinkResult{Linked: true, Link: &l}
		return nil
	})
	if err != nil {
		return nil, abi.E(err)
	}
	if refused != nil {
		return nil, refused
	}
	return res, nil
}

// challenge gives the unlinked actor of a DM a link code: its live one
// if it has one, else a new one, unless the account already holds
// MaxLiveChallenges live codes (nil: the DM is dropped). Expired codes
// are deleted as it goes.
func (r *Room) challenge(ctx context.Context, kind, account, actor string) (*abi.LinkChallenge, error) {
	now := r.now().UnixMilli()
	var ch *abi.LinkChallenge
	err := r.st.Tx(ctx, func(tx *kernel.Tx) error {
		ch = nil
		if _, err := r.st.TxExec(tx, `DELETE FROM adapter_challenges WHERE code IN (
			SELECT code FROM adapter_challenges WHERE expires_at<=? LIMIT 256)`, now); err != nil {
			return err
		}
		var code string
		var exp int64
		err := r.st.TxQueryRow(tx, `SELECT code, expires_at FROM adapter_challenges
			WHERE adapter=? AND account_id=? AND actor_id=? AND expires_at>?`, kind, account, actor, now).Scan(&code, &exp)
		if err == nil {
			ch = &abi.LinkChallenge{Code: code, ExpiresAt: exp}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var live int
		if err := r.st.TxQueryRow(tx, `SELECT count(*) FROM adapter_challenges WHERE adapter=? AND account_id=? AND expires_at>?`,
			kind, account, now).Scan(&live); err != nil {
			return err
		}
		if live >= MaxLiveChallenges {
			return nil
		}
		code, exp = newCode(), now+ChallengeTTL.Milliseconds()
		if _, err := r.st.TxExec(tx, `INSERT INTO adapter_challenges(code, adapter, account_id, actor_id, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)`, code, kind, account, actor, now, exp); err != nil {
			return err
		}
		ch = &abi.LinkChallenge{Code: code, ExpiresAt: exp}
		return nil
	})
	if err != nil || ch == nil {
		return nil, err
	}
	ch.Prompt = fmt.Sprintf("This chat is not linked to a GSV user. To link it to you, run: gsv link %s (within %d minutes).",
		ch.Code, int(ChallengeTTL.Minutes()))
	return ch, nil
}

// linkedUid is the user the actor is linked to (false: none).
func (r *Room) linkedUid(ctx context.Context, kind, account, actor string) (uint32, bool, error) {
	var uid uint32
	err := r.st.QueryRowContext(ctx, `SELECT uid FROM adapter_links WHERE adapter=? AND account_id=? AND actor_id=?`,
		kind, account, actor).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, abi.E(err)
	}
	return uid, true, nil
}
