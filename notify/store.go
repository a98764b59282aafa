package notify

import (
	"context"
	"database/sql"
	"encoding/json"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// columns are the columns scan reads, in its order.
const columns = `id, title, body, level, created_at, read_at, dismissed_at, expires_at, actions, source_pid`

// pruneBatch is the most expired notifications one write deletes.
const pruneBatch = 256

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// scan reads one notification of columns.
func scan(row rowScanner) (*abi.Notification, error) {
	var n abi.Notification
	var readAt, dismissedAt sql.NullInt64
	var expiresAt int64
	var actions, pid string
	if err := row.Scan(&n.NotificationID, &n.Title, &n.Body, &n.Level, &n.CreatedAt, &readAt, &dismissedAt, &expiresAt, &actions, &pid); err != nil {
		return nil, err
	}
	if readAt.Valid {
		n.ReadAt = &readAt.Int64
	}
	if dismissedAt.Valid {
		n.DismissedAt = &dismissedAt.Int64
	}
	n.ExpiresAt = &expiresAt
	if err := json.Unmarshal([]byte(actions), &n.Actions); err != nil || n.Actions == nil {
		n.Actions = []abi.NotificationAction{}
	}
	n.Source = abi.NotificationSource{Kind: "user"}
	if pid != "" {
		n.Source = abi.NotificationSource{Kind: "process", ProcessID: pid}
	}
	return &n, nil
}

// query reads the notifications of a WHERE (and ORDER, LIMIT) clause from
// the read pool; it never writes.
func (r *Room) query(ctx context.Context, where string, args ...any) ([]abi.Notification, error) {
	rows, err := r.st.QueryContext(ctx, `SELECT `+columns+` FROM notify_notifications `+where, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	out := []abi.Notification{}
	for rows.Next() {
		n, err := scan(rows)
		if err != nil {
			return nil, abi.E(err)
		}
		out = append(out, *n)
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(err)
	}
	return out, nil
}

// pruneTx deletes up to pruneBatch notifications expired at now, inside a
// write's transaction, and returns how many.
func (r *Room) pruneTx(tx *kernel.Tx, now int64) (int64, error) {
	res, err := r.st.TxExec(tx, `DELETE FROM notify_notifications WHERE id IN (
		SELECT id FROM notify_notifications WHERE expires_at<=? LIMIT ?)`, now, pruneBatch)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// pruneAll deletes every notification expired now, pruneBatch at a time,
// and returns how many; it stops early when the room closes.
func (r *Room) pruneAll(ctx context.Context) (int64, error) {
	var total int64
	for {
		select {
		case <-r.stop:
			return total, nil
		default:
		}
		var n int64
		err := r.st.Tx(ctx, func(tx *kernel.Tx) error {
			var err error
			n, err = r.pruneTx(tx, r.now().UnixMilli())
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}
