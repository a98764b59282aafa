package adapters

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Accounts: a bridge's account is known once its bridge reports its
// state (adapter.state.update); it then belongs to the owner of the
// bridge's token, and only that owner's bridges speak for it.

// maxExtra bounds an account's Extra facts, as JSON.
const maxExtra = 4 << 10

// bridgeOf checks that c is a bridge for adapter (a service token bound
// to that kind) and returns the kind, lowercased.
func bridgeOf(c *kernel.Caller, adapter, account string) (string, error) {
	kind, err := checkNames(adapter, account, "", false)
	if err != nil {
		return "", err
	}
	if c.Role != "service" || c.Adapter == "" {
		return "", abi.E(abi.Permission, "permission denied: only a bridge's service token (gsv token create --kind service --adapter KIND) speaks for an adapter")
	}
	if c.Adapter != kind {
		return "", abi.E(abi.Permission, fmt.Sprintf("permission denied: this token is bound to adapter %q, not %q", c.Adapter, kind))
	}
	return kind, nil
}

// accountOwner is the owner of an account (false: the account is not
// known).
func (r *Room) accountOwner(ctx context.Context, kind, account string) (uint32, bool, error) {
	var uid uint32
	err := r.st.QueryRowContext(ctx, `SELECT owner_uid FROM adapter_accounts WHERE adapter=? AND account_id=?`, kind, account).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, abi.E(err)
	}
	return uid, true, nil
}

// ownAccount checks that the bridge c speaks for a known account of its
// owner's.
func (r *Room) ownAccount(ctx context.Context, c *kernel.Caller, kind, account string) error {
	owner, ok, err := r.accountOwner(ctx, kind, account)
	if err != nil {
		return err
	}
	if !ok {
		return abi.E(abi.NotExist, abi.Path(kind+"/"+account), "no such adapter account: its bridge reports its state first (adapter.state.update)")
	}
	if owner != c.Uid {
		return abi.E(abi.Permission, abi.Path(kind+"/"+account), "permission denied: the account belongs to another user's bridge")
	}
	return nil
}

// stateUpdate serves adapter.state.update: the bridge's report of its
// account, which makes the account known (its owner: the token's).
func (r *Room) stateUpdate(ctx context.Context, c *kernel.Caller, a *abi.AdapterStateArgs) (*abi.OKResult, error) {
	kind, err := bridgeOf(c, a.Adapter, a.AccountID)
	if err != nil {
		return nil, err
	}
	extra, err := json.Marshal(a.Status.Extra)
	if err != nil || len(extra) > maxExtra {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("status.extra: at most %d bytes of JSON", maxExtra))
	}
	if len(a.Status.Error) > 4096 || len(a.Status.Mode) > 64 {
		return nil, abi.E(abi.Invalid, "status: error at most 4096 bytes, mode at most 64")
	}
	owner, known, err := r.accountOwner(ctx, kind, a.AccountID)
	if err != nil {
		return nil, err
	}
	if known && owner != c.Uid {
		return nil, abi.E(abi.Permission, abi.Path(kind+"/"+a.AccountID), "permission denied: the account belongs to another user's bridge")
	}
	now := r.now().UnixMilli()
	_, err = r.st.Exec(ctx, `INSERT INTO adapter_accounts(adapter, account_id, owner_uid, connected, authenticated, mode, last_activity, error, extra, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(adapter, account_id) DO UPDATE SET
		connected=excluded.connected, authenticated=excluded.authenticated, mode=excluded.mode,
		last_activity=excluded.last_activity, error=excluded.error, extra=excluded.extra, updated_at=excluded.updated_at`,
		kind, a.AccountID, c.Uid, boolInt(a.Status.Connected), boolInt(a.Status.Authenticated), a.Status.Mode,
		a.Status.LastActivity, a.Status.Error, string(extra), now)
	if err != nil {
		return nil, abi.E(err)
	}
	return &abi.OKResult{OK: true}, nil
}

// boolInt is b as the INTEGER column keeps it.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// status serves adapter.status: the accounts of a.Adapter ("" every
// kind) the caller may see, newest activity first: root every one, a
// bridge its own kind's of its owner, a user those it owns or has a link
// on.
func (r *Room) status(ctx context.Context, c *kernel.Caller, a *abi.AdapterStatusArgs) (*abi.AdapterStatusResult, error) {
	kind := strings.ToLower(a.Adapter)
	if kind != "" {
		if err := abi.CheckAdapterKind(kind); err != nil {
			return nil, err
		}
	}
	if c.Adapter != "" {
		if kind != "" && kind != c.Adapter {
			return nil, abi.E(abi.Permission, fmt.Sprintf("permission denied: this token is bound to adapter %q", c.Adapter))
		}
		kind = c.Adapter
	}
	where, args := []string{"1=1"}, []any{}
	if kind != "" {
		where, args = append(where, "a.adapter=?"), append(args, kind)
	}
	if a.AccountID != "" {
		where, args = append(where, "a.account_id=?"), append(args, a.AccountID)
	}
	if !c.IsRoot() {
		where = append(where, `(a.owner_uid=? OR EXISTS (SELECT 1 FROM adapter_links l
			WHERE l.adapter=a.adapter AND l.account_id=a.account_id AND l.uid=?))`)
		args = append(args, c.Uid, c.Uid)
	}
	rows, err := r.st.QueryContext(ctx, `SELECT a.adapter, a.account_id, a.owner_uid, a.connected, a.authenticated, a.mode,
		a.last_activity, a.last_message, a.error, a.extra, a.want, a.updated_at
		FROM adapter_accounts a WHERE `+strings.Join(where, " AND ")+` ORDER BY a.updated_at DESC, a.adapter, a.account_id LIMIT 1000`, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	out := []abi.AdapterAccountRecord{}
	for rows.Next() {
		var rec abi.AdapterAccountRecord
		var connected, authenticated int
		var extra string
		if err := rows.Scan(&rec.Adapter, &rec.AccountID, &rec.OwnerUid, &connected, &authenticated, &rec.Mode,
			&rec.LastActivity, &rec.LastMessage, &rec.Error, &extra, &rec.Want, &rec.UpdatedAt); err != nil {
			rows.Close()
			return nil, abi.E(err)
		}
		rec.Connected, rec.Authenticated = connected != 0, authenticated != 0
		if json.Unmarshal([]byte(extra), &rec.Extra) != nil {
			rec.Extra = nil
		}
		out = append(out, rec)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, abi.E(err)
	}
	for i := range out {
		if out[i].Ledger, err = r.ledgerCounts(ctx, out[i].Adapter, out[i].AccountID); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return max(out[i].LastActivity, out[i].UpdatedAt) > max(out[j].LastActivity, out[j].UpdatedAt)
	})
	return &abi.AdapterStatusResult{Adapter: kind, Accounts: out}, nil
}

// ledgerCounts are the account's deliveries by state.
func (r *Room) ledgerCounts(ctx context.Context, kind, account string) (map[string]int, error) {
	rows, err := r.st.QueryContext(ctx, `SELECT state, count(*) FROM adapter_outbox WHERE adapter=? AND account_id=? GROUP BY state`, kind, account)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, abi.E(err)
		}
		out[s] = n
	}
	return out, rows.Err()
}

// connect serves adapter.connect: the account's bridge is asked to
// connect (it reads the wish with its next adapter.outbox.next).
func (r *Room) connect(ctx context.Context, c *kernel.Caller, a *abi.AdapterAccountArgs) (*abi.AdapterAccountResult, error) {
	return r.want(ctx, c, a, "connect")
}

// disconnect serves adapter.disconnect: the account's bridge is asked to
// disconnect, and the account shows disconnected at once.
func (r *Room) disconnect(ctx context.Context, c *kernel.Caller, a *abi.AdapterAccountArgs) (*abi.AdapterAccountResult, error) {
	return r.want(ctx, c, a, "disconnect")
}

// want sets the account's wanted state: root's or its owner's to set.
func (r *Room) want(ctx context.Context, c *kernel.Caller, a *abi.AdapterAccountArgs, want string) (*abi.AdapterAccountResult, error) {
	kind, err := checkNames(a.Adapter, a.AccountID, "", false)
	if err != nil {
		return nil, err
	}
	owner, ok, err := r.accountOwner(ctx, kind, a.AccountID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, abi.E(abi.NotExist, abi.Path(kind+"/"+a.AccountID), "no such adapter account")
	}
	if !c.IsRoot() && owner != c.Uid {
		return nil, abi.E(abi.Permission, abi.Path(kind+"/"+a.AccountID), "permission denied: only the account's owner or root")
	}
	q := `UPDATE adapter_accounts SET want=?, updated_at=? WHERE adapter=? AND account_id=?`
	if want == "disconnect" {
		q = `UPDATE adapter_accounts SET want=?, updated_at=?, connected=0, authenticated=0 WHERE adapter=? AND account_id=?`
	}
	if _, err := r.st.Exec(ctx, q, want, r.now().UnixMilli(), kind, a.AccountID); err != nil {
		return nil, abi.E(err)
	}
	r.kick(accountKey(kind, a.AccountID))
	msg := "the bridge connects when it next asks"
	if want == "disconnect" {
		msg = "the bridge disconnects when it next asks"
	}
	return &abi.AdapterAccountResult{OK: true, Adapter: kind, AccountID: a.AccountID, Want: want, Message: msg}, nil
}

// accountKey names an account in the room's maps.
func accountKey(kind, account string) string { return kind + "\x00" + account }
