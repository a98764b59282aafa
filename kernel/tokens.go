package kernel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"strings"
)

// Token is a token's metadata; the raw value is shown only by create.
type Token struct {
	TokenID         string  `json:"tokenId"`
	Token           string  `json:"token,omitempty"`
	TokenPrefix     string  `json:"tokenPrefix"`
	Uid             uint32  `json:"uid"`
	Kind            string  `json:"kind"`
	Label           *string `json:"label"`
	AllowedRole     *string `json:"allowedRole"`
	AllowedDeviceID *string `json:"allowedDeviceId"`
	CreatedAt       int64   `json:"createdAt"`
	LastUsedAt      *int64  `json:"lastUsedAt,omitempty"`
	ExpiresAt       *int64  `json:"expiresAt"`
	RevokedAt       *int64  `json:"revokedAt,omitempty"`
	RevokedReason   *string `json:"revokedReason,omitempty"`
}

type tokenCreateArgs struct {
	Uid             *uint32 `json:"uid"`
	Kind            string  `json:"kind"`
	Label           *string `json:"label"`
	AllowedRole     *string `json:"allowedRole"`
	AllowedDeviceID *string `json:"allowedDeviceId"`
	ExpiresAt       *int64  `json:"expiresAt"`
}

type tokenListArgs struct {
	Uid *uint32 `json:"uid"`
}

type tokenRevokeArgs struct {
	TokenID string  `json:"tokenId"`
	Reason  *string `json:"reason"`
	Uid     *uint32 `json:"uid"`
}

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
		return 0, E(Permission, msg("permission denied: only root may act for another uid"))
	}
	return *uid, nil
}

func (k *Kernel) registerTokens() {
	Handle(k, "sys.token.create", 0, func(ctx context.Context, c *Caller, a *tokenCreateArgs) (map[string]any, error) {
		uid, err := scopeUID(c, a.Uid)
		if err != nil {
			return nil, err
		}
		role, ok := defaultRole[a.Kind]
		if !ok {
			return nil, E(Invalid, Msgf("token kind %q: want node, service or user", a.Kind))
		}
		if a.AllowedRole != nil && *a.AllowedRole != role {
			return nil, E(Invalid, Msgf("a %s token carries role %s, not %s", a.Kind, role, *a.AllowedRole))
		}
		if a.AllowedDeviceID != nil && a.Kind != "node" {
			return nil, E(Invalid, msg("only node tokens may bind to a device"))
		}
		if a.ExpiresAt != nil && *a.ExpiresAt <= now() {
			return nil, E(Invalid, msg("expiresAt is in the past"))
		}
		if _, err := k.userByUID(ctx, uid); err != nil {
			return nil, err
		}
		raw := "gsv_" + a.Kind + "_" + randomText(20)
		t := &Token{TokenID: "tok_" + randomText(8), Token: raw, TokenPrefix: raw[:len("gsv_"+a.Kind+"_")+4],
			Uid: uid, Kind: a.Kind, Label: a.Label, AllowedRole: &role, AllowedDeviceID: a.AllowedDeviceID,
			CreatedAt: now(), ExpiresAt: a.ExpiresAt}
		_, err = k.Store.Exec(ctx, `INSERT INTO tokens(token_id,hash,prefix,uid,kind,label,allowed_role,allowed_device_id,created_at,expires_at)
			VALUES(?,?,?,?,?,?,?,?,?,?)`, t.TokenID, hashToken(raw), t.TokenPrefix, t.Uid, t.Kind, t.Label, t.AllowedRole, t.AllowedDeviceID, t.CreatedAt, t.ExpiresAt)
		if err != nil {
			return nil, E(err)
		}
		k.signal("sys.token.created", map[string]any{"tokenId": t.TokenID, "uid": uid, "kind": t.Kind}, audience{uids: []uint32{uid}})
		return map[string]any{"token": t}, nil
	})

	Handle(k, "sys.token.list", 0, func(ctx context.Context, c *Caller, a *tokenListArgs) (map[string]any, error) {
		where, args := "WHERE uid=?", []any{c.Uid}
		if c.IsRoot() {
			where, args = "", nil
			if a.Uid != nil {
				where, args = "WHERE uid=?", []any{*a.Uid}
			}
		} else if a.Uid != nil && *a.Uid != c.Uid {
			return nil, E(Permission, msg("permission denied: only root may list another uid's tokens"))
		}
		rows, err := k.Store.QueryContext(ctx, `SELECT token_id,prefix,uid,kind,label,allowed_role,allowed_device_id,created_at,last_used_at,expires_at,revoked_at,revoked_reason
			FROM tokens `+where+` ORDER BY created_at, token_id`, args...)
		if err != nil {
			return nil, E(err)
		}
		defer rows.Close()
		out := []Token{}
		for rows.Next() {
			var t Token
			if err := rows.Scan(&t.TokenID, &t.TokenPrefix, &t.Uid, &t.Kind, &t.Label, &t.AllowedRole, &t.AllowedDeviceID,
				&t.CreatedAt, &t.LastUsedAt, &t.ExpiresAt, &t.RevokedAt, &t.RevokedReason); err != nil {
				return nil, E(err)
			}
			out = append(out, t)
		}
		return map[string]any{"tokens": out}, rows.Err()
	})

	Handle(k, "sys.token.revoke", 0, func(ctx context.Context, c *Caller, a *tokenRevokeArgs) (map[string]any, error) {
		q, args := `UPDATE tokens SET revoked_at=?, revoked_reason=? WHERE token_id=? AND revoked_at IS NULL`, []any{now(), a.Reason, a.TokenID}
		if !c.IsRoot() {
			q += ` AND uid=?`
			args = append(args, c.Uid)
		}
		res, err := k.Store.Exec(ctx, q, args...)
		if err != nil {
			return nil, E(err)
		}
		n, _ := res.RowsAffected()
		if n > 0 {
			k.signal("sys.token.revoked", map[string]any{"tokenId": a.TokenID}, audience{uids: []uint32{c.Uid}})
		}
		return map[string]any{"revoked": n > 0}, nil
	})
}

// identityForToken checks a raw token (and, if given, that it belongs to
// user) and returns its owner's identity.
func (k *Kernel) identityForToken(ctx context.Context, raw, user string) (*Identity, error) {
	deny := E("attach", user, Permission, msg("authentication failed"))
	var uid uint32
	var hash string
	var expires, revoked sql.NullInt64
	err := k.Store.QueryRowContext(ctx, `SELECT uid,hash,expires_at,revoked_at FROM tokens WHERE hash=?`, hashToken(raw)).
		Scan(&uid, &hash, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, deny
	}
	if err != nil {
		return nil, E("attach", err)
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
	k.Store.Exec(ctx, `UPDATE tokens SET last_used_at=? WHERE hash=?`, now(), hash)
	return id, nil
}
