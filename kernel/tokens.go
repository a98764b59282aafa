package kernel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// Token is a token's metadata (abi.Token); the raw value is shown only
// by sys.token.create.
type Token = abi.Token

// defaultRole is the role each token kind carries.
var defaultRole = map[string]string{"node": "driver", "service": "service", "user": "user"}

func hashToken(raw string) string {
	h := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(h[:])
}

func randomText(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(b), "="))
}

// scopeUID returns the uid a call concerns: the caller's own unless root
// passed another.
func scopeUID(c *Caller, uid *uint32) (uint32, error) {
	if uid == nil || *uid == c.Uid {
		return c.Uid, nil
	}
	if !c.IsRoot() {
		return 0, abi.E(abi.Permission, "permission denied: only root may act for another uid")
	}
	return *uid, nil
}

// userOnly refuses a caller that is not acting as a user: a service or a
// driver (a device) acts for its owner in its own role, and must not mint
// or revoke the owner's tokens (a service token would otherwise make
// itself a user token).
func userOnly(c *Caller) error {
	if c.isKernel() || c.Role == "user" {
		return nil
	}
	return abi.E(abi.Permission, fmt.Sprintf("permission denied: only a user manages tokens, not a %s", c.Role))
}

// tokenSyscalls is the table of the token syscalls. Only a user (or the
// kernel) creates and revokes tokens: a service or a driver does not.
func (k *Kernel) tokenSyscalls() []Syscall {
	return []Syscall{
		Handle(abi.SysTokenCreate, k.tokenCreate).Admit(userOnly),
		Handle(abi.SysTokenList, k.tokenList),
		Handle(abi.SysTokenRevoke, k.tokenRevoke).Admit(userOnly),
	}
}

// tokenCreate serves sys.token.create: a new token of a.Kind for the
// caller (root: for a.Uid), whose raw value the result shows once. A node
// token binds to one device (allowedDeviceId, a valid device id); no
// other kind binds to any.
func (k *Kernel) tokenCreate(ctx context.Context, c *Caller, a *abi.TokenCreateArgs) (*abi.TokenCreateResult, error) {
	uid, err := scopeUID(c, a.Uid)
	if err != nil {
		return nil, err
	}
	role, ok := defaultRole[a.Kind]
	if !ok {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("token kind %q: want node, service or user", a.Kind))
	}
	if a.AllowedRole != nil && *a.AllowedRole != role {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("a %s token carries role %s, not %s", a.Kind, role, *a.AllowedRole))
	}
	if a.AllowedDeviceID != nil && a.Kind != "node" {
		return nil, abi.E(abi.Invalid, "only node tokens may bind to a device")
	}
	if a.AllowedAdapter != nil {
		if a.Kind != "service" {
			return nil, abi.E(abi.Invalid, "only service tokens may bind to an adapter")
		}
		if err := abi.CheckAdapterKind(*a.AllowedAdapter); err != nil {
			return nil, err
		}
	}
	if a.Kind == "node" {
		if a.AllowedDeviceID == nil {
			return nil, abi.E(abi.Invalid, "a node token binds to a device: give allowedDeviceId")
		}
		if err := abi.CheckDeviceID(*a.AllowedDeviceID); err != nil {
			return nil, err
		}
	}
	if a.ExpiresAt != nil && *a.ExpiresAt <= now() {
		return nil, abi.E(abi.Invalid, "expiresAt is in the past")
	}
	if _, err := k.userByUID(ctx, uid); err != nil {
		return nil, err
	}
	var procCap *string
	if a.Process != nil {
		if err := a.Process.Check(); err != nil {
			return nil, err
		}
		b, err := json.Marshal(a.Process)
		if err != nil {
			return nil, abi.E(err)
		}
		s := string(b)
		procCap = &s
	}
	raw := "gsv_" + a.Kind + "_" + randomText(20)
	t := &Token{TokenID: "tok_" + randomText(8), Token: raw, TokenPrefix: raw[:len("gsv_"+a.Kind+"_")+4],
		Uid: uid, Kind: a.Kind, Label: a.Label, AllowedRole: &role, AllowedDeviceID: a.AllowedDeviceID,
		AllowedAdapter: a.AllowedAdapter, CreatedAt: now(), ExpiresAt: a.ExpiresAt, Process: a.Process}
	_, err = k.Store.Exec(ctx, `INSERT INTO tokens(token_id,hash,prefix,uid,kind,label,allowed_role,allowed_device_id,created_at,expires_at,process_cap,allowed_adapter)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`, t.TokenID, hashToken(raw), t.TokenPrefix, t.Uid, t.Kind, t.Label, t.AllowedRole, t.AllowedDeviceID, t.CreatedAt, t.ExpiresAt, procCap, t.AllowedAdapter)
	if err != nil {
		return nil, abi.E(err)
	}
	publish(k, abi.SigTokenCreated, abi.TokenCreated{TokenID: t.TokenID, Uid: uid, Kind: t.Kind}, audience{uids: []uint32{uid}})
	return &abi.TokenCreateResult{Token: t}, nil
}

// tokenList serves sys.token.list: the caller's tokens (root: everyone's,
// or a.Uid's), oldest first, without their raw values.
func (k *Kernel) tokenList(ctx context.Context, c *Caller, a *abi.TokenListArgs) (*abi.TokenListResult, error) {
	where, args := "WHERE uid=?", []any{c.Uid}
	if c.IsRoot() {
		where, args = "", nil
		if a.Uid != nil {
			where, args = "WHERE uid=?", []any{*a.Uid}
		}
	} else if a.Uid != nil && *a.Uid != c.Uid {
		return nil, abi.E(abi.Permission, "permission denied: only root may list another uid's tokens")
	}
	out := []Token{}
	err := k.Store.eachRow(ctx, func(rows *sql.Rows) error {
		var t Token
		var procCap sql.NullString
		if err := rows.Scan(&t.TokenID, &t.TokenPrefix, &t.Uid, &t.Kind, &t.Label, &t.AllowedRole, &t.AllowedDeviceID,
			&t.CreatedAt, &t.LastUsedAt, &t.ExpiresAt, &t.RevokedAt, &t.RevokedReason, &procCap, &t.AllowedAdapter); err != nil {
			return err
		}
		pc, err := decodeProcessCap(procCap)
		if err != nil {
			return abi.E(abi.Path(t.TokenID), err)
		}
		t.Process = pc
		out = append(out, t)
		return nil
	}, `SELECT token_id,prefix,uid,kind,label,allowed_role,allowed_device_id,created_at,last_used_at,expires_at,revoked_at,revoked_reason,process_cap,allowed_adapter
		FROM tokens `+where+` ORDER BY created_at, token_id`, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	return &abi.TokenListResult{Tokens: out}, nil
}

// tokenRevoke serves sys.token.revoke: it revokes one of the caller's
// active tokens (root: anyone's), ends every connection attached with
// it and signals sys.token.revoked.
func (k *Kernel) tokenRevoke(ctx context.Context, c *Caller, a *abi.TokenRevokeArgs) (*abi.TokenRevokeResult, error) {
	q, args := `UPDATE tokens SET revoked_at=?, revoked_reason=? WHERE token_id=? AND revoked_at IS NULL`, []any{now(), a.Reason, a.TokenID}
	if !c.IsRoot() {
		q += ` AND uid=?`
		args = append(args, c.Uid)
	}
	res, err := k.Store.Exec(ctx, q, args...)
	if err != nil {
		return nil, abi.E(abi.Path(a.TokenID), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, abi.E(abi.Path(a.TokenID), err)
	}
	if n > 0 {
		k.leases.end(a.TokenID)
		publish(k, abi.SigTokenRevoked, abi.TokenRevoked{TokenID: a.TokenID}, audience{uids: []uint32{c.Uid}})
	}
	return &abi.TokenRevokeResult{Revoked: n > 0}, nil
}

// identityForToken checks a raw token (and, if given, that it belongs to
// user) and returns the identity it attaches as, which carries the token's
// lease (see Identity.Done):
//
//   - a user token: its owner, as a user;
//   - a service token: its owner in role "service" (root's is not root, and
//     no service manages tokens); one bound to an adapter may make only
//     the syscalls granted to abi.Adapters;
//   - a node token: refused. A node token attaches only as a device (role
//     "driver", bound to its allowedDeviceId): see AuthenticateNode.
func (k *Kernel) identityForToken(ctx context.Context, raw, user string) (*Identity, error) {
	deny := abi.E(abi.Op("attach"), abi.Path(user), abi.Permission, "authentication failed")
	var tokenID, hash, kind string
	var uid uint32
	var expires, revoked sql.NullInt64
	var procCap, adapter sql.NullString
	err := k.Store.QueryRowContext(ctx, `SELECT token_id,uid,hash,kind,expires_at,revoked_at,process_cap,allowed_adapter FROM tokens WHERE hash=?`, hashToken(raw)).
		Scan(&tokenID, &uid, &hash, &kind, &expires, &revoked, &procCap, &adapter)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, deny
	}
	if err != nil {
		return nil, abi.E(abi.Op("attach"), err)
	}
	if subtle.ConstantTimeCompare([]byte(hash), []byte(hashToken(raw))) != 1 || revoked.Valid || (expires.Valid && expires.Int64 <= now()) {
		return nil, deny
	}
	id, err := k.identity(ctx, uid)
	if err != nil {
		return nil, deny
	}
	if user != "" && user != id.Username {
		return nil, deny
	}
	if id.Process, err = decodeProcessCap(procCap); err != nil {
		return nil, abi.E(abi.Op("attach"), abi.Path(tokenID), err)
	}
	switch kind {
	case "user":
	case "service":
		id.Role = "service"
		if adapter.Valid {
			// Bound to an adapter: the bridge's syscalls only, whoever
			// owns the token (root's included).
			id.Adapter = adapter.String
			id.Capabilities, id.grants, id.class = nil, k, abi.Adapters
		}
	case "node":
		return nil, abi.E(abi.Op("attach"), abi.Path(user), abi.Permission, "a node token attaches only as a device: gsvfs device --kernel ADDR --id ID --token T")
	default:
		return nil, deny
	}
	l := k.leases.get(tokenID, expires)
	select {
	case <-l.done:
		return nil, deny // revoked or expired since the query
	default:
	}
	id.lease = l
	if _, err := k.Store.Exec(ctx, `UPDATE tokens SET last_used_at=? WHERE hash=?`, now(), hash); err != nil {
		return nil, abi.E(abi.Op("attach"), abi.Path(user), err)
	}
	return id, nil
}

// decodeProcessCap decodes a token's stored process capability; NULL is
// nil (the token narrows nothing).
func decodeProcessCap(s sql.NullString) (*abi.ProcessCap, error) {
	if !s.Valid {
		return nil, nil
	}
	var pc abi.ProcessCap
	if err := json.Unmarshal([]byte(s.String), &pc); err != nil {
		return nil, fmt.Errorf("the token's process capability does not parse: %w", err)
	}
	return &pc, nil
}

// A lease is the life of one token in use: done is closed when the token
// is revoked or expires, which ends every connection attached with it.
type lease struct {
	tokenID string
	done    chan struct{}
	timer   *time.Timer // closes done at the token's expiry; nil if none
}

// leases are the leases of the tokens attached with since the kernel
// started, by token id.
type leases struct {
	mu      sync.Mutex
	m       map[string]*lease
	stopped bool
}

// get returns the lease of tokenID, starting it (and its expiry timer) if
// need be. The lease of a token revoked since the kernel started is
// already done.
func (ls *leases) get(tokenID string, expires sql.NullInt64) *lease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, made := ls.leaseLocked(tokenID)
	if made && expires.Valid && !ls.stopped {
		l.timer = time.AfterFunc(time.Until(time.UnixMilli(expires.Int64)), func() { ls.end(tokenID) })
	}
	return l
}

// end ends the lease of tokenID. A token not in use gets a lease that is
// already done, so that an attach racing the revocation fails.
func (ls *leases) end(tokenID string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, _ := ls.leaseLocked(tokenID)
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	if l.timer != nil {
		l.timer.Stop()
	}
}

// leaseLocked returns the lease of tokenID, and whether it made it now.
func (ls *leases) leaseLocked(tokenID string) (l *lease, made bool) {
	if l := ls.m[tokenID]; l != nil {
		return l, false
	}
	if ls.m == nil {
		ls.m = map[string]*lease{}
	}
	l = &lease{tokenID: tokenID, done: make(chan struct{})}
	ls.m[tokenID] = l
	return l, true
}

// stop stops every expiry timer (the kernel is closing).
func (ls *leases) stop() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.stopped = true
	for _, l := range ls.m {
		if l.timer != nil {
			l.timer.Stop()
		}
	}
}
