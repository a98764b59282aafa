package kernel

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"

	"gsvfs.dev/gsvfs/abi"
)

// AuthenticateNode checks a device's node token: raw must be a live node
// token bound (allowedDeviceId) to deviceID. It returns the identity the
// device's work is done with: the token's owner, in role "driver", with
// the token's lease, which ends when the token is revoked or expires.
// Every failure is the same 403 "authentication failed", but for a token
// bound to another device, which says so.
func (k *Kernel) AuthenticateNode(ctx context.Context, raw, deviceID string) (*Identity, error) {
	deny := abi.E(abi.Op("device.hello"), abi.Path(deviceID), abi.Permission, "authentication failed")
	var tokenID, hash, kind string
	var uid uint32
	var bound sql.NullString
	var expires, revoked sql.NullInt64
	err := k.Store.QueryRowContext(ctx, `SELECT token_id,uid,hash,kind,allowed_device_id,expires_at,revoked_at FROM tokens WHERE hash=?`,
		hashToken(raw)).Scan(&tokenID, &uid, &hash, &kind, &bound, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, deny
	}
	if err != nil {
		return nil, abi.E(abi.Op("device.hello"), err)
	}
	if subtle.ConstantTimeCompare([]byte(hash), []byte(hashToken(raw))) != 1 || kind != "node" || revoked.Valid ||
		(expires.Valid && expires.Int64 <= now()) {
		return nil, deny
	}
	if !bound.Valid || bound.String != deviceID {
		return nil, abi.E(abi.Op("device.hello"), abi.Path(deviceID), abi.Permission,
			fmt.Sprintf("the token is bound to device %q, not %q", bound.String, deviceID))
	}
	id, err := k.identity(ctx, uid)
	if err != nil {
		return nil, deny
	}
	id.Role = "driver"
	l := k.leases.get(tokenID, expires)
	select {
	case <-l.done:
		return nil, deny
	default:
	}
	id.lease = l
	if _, err := k.Store.Exec(ctx, `UPDATE tokens SET last_used_at=? WHERE hash=?`, now(), hash); err != nil {
		return nil, abi.E(abi.Op("device.hello"), abi.Path(deviceID), err)
	}
	return id, nil
}
