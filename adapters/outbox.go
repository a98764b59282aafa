package adapters

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The outbound ledger (adapter_outbox): every message for a platform is a
// row keyed by its delivery id, with its content's fingerprint. A bridge
// takes pending rows (adapter.outbox.next: claimed, by its session) and
// reports each (adapter.outbox.done: sent, failed or ambiguous). A row is
// handed out once: a claimed row never goes back to pending, so a
// message is posted at most once; one a bridge took and never reported
// (the bridge died with it) is ambiguous when another session of the
// account's bridge asks, and is reported, not retried.

// Ledger states.
const (
	statePending   = "pending"
	stateClaimed   = "claimed"
	stateSent      = "sent"
	stateFailed    = "failed"
	stateAmbiguous = "ambiguous"
)

// Bounds of the outbox.
const (
	// maxOutText is the longest text one delivery carries (the bridge
	// splits it at its platform's limit).
	maxOutText = 64 << 10
	// maxTake is the most deliveries one adapter.outbox.next hands out.
	maxTake = 16
	// maxWait is the longest an adapter.outbox.next waits.
	maxWait = time.Minute
	// keepDone is how long a finished delivery is kept in the ledger.
	keepDone = 7 * 24 * time.Hour
	// sendWait is how long adapter.send waits for the bridge's report.
	sendWait = 30 * time.Second
)

// delivery is a row of the ledger to write.
type delivery struct {
	ID        string
	Adapter   string
	Account   string
	Surface   abi.AdapterSurface
	Text      string
	Media     []abi.MediaInput
	ReplyToID string
	StreamKey string
}

// fingerprint is the SHA-256 of d's content.
func (d *delivery) fingerprint() string {
	b, _ := json.Marshal(struct {
		A, C, T, R string
		S          abi.AdapterSurface
		M          []abi.MediaInput
	}{d.Adapter, d.Account, d.Text, d.ReplyToID, d.Surface, d.Media})
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// enqueue writes d to the ledger, pending, and wakes the account's
// bridge. A delivery id already there with the same content is left as
// it is (false); with other content it is a 409.
func (r *Room) enqueue(ctx context.Context, d delivery) (bool, error) {
	if len(d.Text) > maxOutText {
		return false, abi.E(abi.Invalid, fmt.Sprintf("text: %d bytes, at most %d", len(d.Text), maxOutText))
	}
	surface, err := json.Marshal(d.Surface)
	if err != nil {
		return false, abi.E(err)
	}
	media, err := json.Marshal(d.Media)
	if err != nil {
		return false, abi.E(err)
	}
	if d.Media == nil {
		media = []byte("[]")
	}
	fp := d.fingerprint()
	now := r.now()
	var inserted bool
	var conflict error
	err = r.st.Tx(ctx, func(tx *kernel.Tx) error {
		inserted, conflict = false, nil
		if _, err := r.st.TxExec(tx, `DELETE FROM adapter_outbox WHERE delivery_id IN (SELECT delivery_id FROM adapter_outbox
			WHERE created_at<? AND state<>'pending' AND state<>'claimed' LIMIT 256)`, now.Add(-keepDone).UnixMilli()); err != nil {
			return err
		}
		res, err := r.st.TxExec(tx, `INSERT INTO adapter_outbox(delivery_id, fingerprint, adapter, account_id, surface, text, media,
			reply_to_id, stream_key, state, created_at, seq)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, (SELECT coalesce(max(seq), 0)+1 FROM adapter_outbox))
			ON CONFLICT DO NOTHING`, d.ID, fp, d.Adapter, d.Account, string(surface), d.Text, string(media), d.ReplyToID, d.StreamKey, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			inserted = true
			return nil
		}
		var have string
		if err := r.st.TxQueryRow(tx, `SELECT fingerprint FROM adapter_outbox WHERE delivery_id=?`, d.ID).Scan(&have); err != nil {
			return err
		}
		if have != fp {
			conflict = abi.E(abi.Busy, abi.Path(d.ID), "the delivery id was used for other content")
		}
		return nil
	})
	if err != nil {
		return false, abi.E(err)
	}
	if conflict != nil {
		return false, conflict
	}
	if inserted {
		r.kick(accountKey(d.Adapter, d.Account))
	}
	return inserted, nil
}

// kick wakes the bridge of the account key waiting in outbox.next.
func (r *Room) kick(key string) {
	r.mu.Lock()
	if ch := r.waiters[key]; ch != nil {
		close(ch)
		delete(r.waiters, key)
	}
	r.mu.Unlock()
}

// waiter is the channel closed when the account key next has work.
func (r *Room) waiter(key string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.waiters[key]
	if ch == nil {
		ch = make(chan struct{})
		r.waiters[key] = ch
	}
	return ch
}

// outboxNext serves adapter.outbox.next: the bridge takes its account's
// pending deliveries (claimed by its session) and stream updates,
// waiting up to a.WaitMs (at most a minute) for some.
func (r *Room) outboxNext(ctx context.Context, c *kernel.Caller, a *abi.AdapterOutboxNextArgs) (*abi.AdapterOutboxNextResult, error) {
	kind, err := bridgeOf(c, a.Adapter, a.AccountID)
	if err != nil {
		return nil, err
	}
	if a.Session == "" || len(a.Session) > 64 {
		return nil, abi.E(abi.Invalid, "session: want 1 to 64 bytes")
	}
	if err := r.ownAccount(ctx, c, kind, a.AccountID); err != nil {
		return nil, err
	}
	// What another session took and never reported may or may not have
	// been posted: ambiguous, never handed out again.
	if _, err := r.st.Exec(ctx, `UPDATE adapter_outbox SET state='ambiguous', error='taken by a bridge that ended before reporting it', done_at=?
		WHERE adapter=? AND account_id=? AND state='claimed' AND session<>?`, r.now().UnixMilli(), kind, a.AccountID, a.Session); err != nil {
		return nil, abi.E(err)
	}
	wait := min(max(time.Duration(a.WaitMs)*time.Millisecond, 0), maxWait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	key := accountKey(kind, a.AccountID)
	for {
		ch := r.waiter(key)
		res, err := r.take(ctx, kind, a.AccountID, a.Session)
		if err != nil {
			return nil, err
		}
		if len(res.Deliveries) > 0 || len(res.Streams) > 0 || res.Want == "disconnect" {
			return res, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return res, nil
		case <-ctx.Done():
			return nil, abi.E(abi.Other, ctx.Err())
		case <-r.stop:
			return res, nil
		}
	}
}

// take claims the account's pending deliveries for session and takes
// its stream updates.
func (r *Room) take(ctx context.Context, kind, account, session string) (*abi.AdapterOutboxNextResult, error) {
	res := &abi.AdapterOutboxNextResult{Deliveries: []abi.AdapterDelivery{}, Want: "connect"}
	if err := r.st.QueryRowContext(ctx, `SELECT want FROM adapter_accounts WHERE adapter=? AND account_id=?`, kind, account).Scan(&res.Want); err != nil {
		return nil, abi.E(err)
	}
	err := r.st.Tx(ctx, func(tx *kernel.Tx) error {
		res.Deliveries = res.Deliveries[:0]
		rows, err := tx.Query(`UPDATE adapter_outbox SET state='claimed', session=?, claimed_at=?
			WHERE delivery_id IN (SELECT delivery_id FROM adapter_outbox WHERE adapter=? AND account_id=? AND state='pending' ORDER BY seq LIMIT ?)
			RETURNING delivery_id, fingerprint, surface, text, media, reply_to_id, stream_key, seq`,
			session, r.now().UnixMilli(), kind, account, maxTake)
		if err != nil {
			return err
		}
		defer rows.Close()
		var seqs []int64
		for rows.Next() {
			var d abi.AdapterDelivery
			var surface, media string
			var seq int64
			if err := rows.Scan(&d.DeliveryID, &d.Fingerprint, &surface, &d.Text, &media, &d.ReplyToID, &d.StreamKey, &seq); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(surface), &d.Surface); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(media), &d.Media); err != nil {
				return err
			}
			res.Deliveries = append(res.Deliveries, d)
			seqs = append(seqs, seq)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		sortBySeq(res.Deliveries, seqs)
		return nil
	})
	if err != nil {
		return nil, abi.E(err)
	}
	r.mu.Lock()
	for _, s := range r.streams[accountKey(kind, account)] {
		res.Streams = append(res.Streams, *s)
	}
	delete(r.streams, accountKey(kind, account))
	r.mu.Unlock()
	return res, nil
}

// sortBySeq orders ds by their seqs (RETURNING gives no order).
func sortBySeq(ds []abi.AdapterDelivery, seqs []int64) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && seqs[j] < seqs[j-1]; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
			seqs[j], seqs[j-1] = seqs[j-1], seqs[j]
		}
	}
}

// outboxDone serves adapter.outbox.done: the bridge's report of a
// delivery it took. Only a claimed delivery of the bridge's account
// changes; a report of one already reported does nothing.
func (r *Room) outboxDone(ctx context.Context, c *kernel.Caller, a *abi.AdapterOutboxDoneArgs) (*abi.OKResult, error) {
	kind, err := bridgeOf(c, a.Adapter, a.AccountID)
	if err != nil {
		return nil, err
	}
	if err := r.ownAccount(ctx, c, kind, a.AccountID); err != nil {
		return nil, err
	}
	if len(a.MessageIDs) > 256 || len(a.Error) > 4096 {
		return nil, abi.E(abi.Invalid, "at most 256 messageIds and 4096 bytes of error")
	}
	state := stateSent
	switch {
	case a.Ambiguous:
		state = stateAmbiguous
	case a.Error != "":
		state = stateFailed
	}
	ids, err := json.Marshal(a.MessageIDs)
	if err != nil {
		return nil, abi.E(err)
	}
	if a.MessageIDs == nil {
		ids = []byte("[]")
	}
	now := r.now().UnixMilli()
	res, err := r.st.Exec(ctx, `UPDATE adapter_outbox SET state=?, message_ids=?, error=?, done_at=?
		WHERE delivery_id=? AND adapter=? AND account_id=? AND state='claimed'`, state, string(ids), a.Error, now, a.DeliveryID, kind, a.AccountID)
	if err != nil {
		return nil, abi.E(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &abi.OKResult{OK: true}, nil
	}
	if state != stateSent {
		r.log.Warn("adapters: a delivery was not posted", "adapter", kind, "account", a.AccountID, "delivery", a.DeliveryID, "state", state, "err", a.Error)
		if _, err := r.st.Exec(ctx, `UPDATE adapter_accounts SET error=? WHERE adapter=? AND account_id=?`,
			fmt.Sprintf("delivery %s %s: %s", a.DeliveryID, state, a.Error), kind, a.AccountID); err != nil {
			r.log.Warn("adapters: noting a delivery's failure", "err", err)
		}
	}
	r.mu.Lock()
	if ch := r.sent[a.DeliveryID]; ch != nil {
		close(ch)
		delete(r.sent, a.DeliveryID)
	}
	r.mu.Unlock()
	return &abi.OKResult{OK: true}, nil
}

// send serves adapter.send: text for a chat, through the account's
// bridge, at most once (the ledger's delivery id). Root and the
// account's owner may send. It waits up to sendWait for the bridge's
// report; a delivery no bridge took by then stays pending.
func (r *Room) send(ctx context.Context, c *kernel.Caller, a *abi.AdapterSendArgs) (*abi.AdapterSendResult, error) {
	kind, err := checkNames(a.Adapter, a.AccountID, "", false)
	if err != nil {
		return nil, err
	}
	if err := checkSurface(a.Surface); err != nil {
		return nil, err
	}
	if a.Text == "" && len(a.Media) == 0 {
		return nil, abi.E(abi.Invalid, "nothing to send: give text or media")
	}
	owner, ok, err := r.accountOwner(ctx, kind, a.AccountID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, abi.E(abi.NotExist, abi.Path(kind+"/"+a.AccountID), "no such adapter account")
	}
	if !c.IsRoot() && owner != c.Uid {
		return nil, abi.E(abi.Permission, abi.Path(kind+"/"+a.AccountID), "permission denied: only the account's owner or root sends through it")
	}
	id := a.DeliveryID
	if id == "" {
		id = "send:" + randomID()
	}
	if len(id) > 128 {
		return nil, abi.E(abi.Invalid, "deliveryId: at most 128 bytes")
	}
	done := make(chan struct{})
	r.mu.Lock()
	if ch := r.sent[id]; ch != nil {
		done = ch
	} else {
		r.sent[id] = done
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.sent[id] == done {
			delete(r.sent, id)
		}
		r.mu.Unlock()
	}()
	if _, err := r.enqueue(ctx, delivery{ID: id, Adapter: kind, Account: a.AccountID, Surface: a.Surface, Text: a.Text,
		Media: a.Media, ReplyToID: a.ReplyToID}); err != nil {
		return nil, err
	}
	t := time.NewTimer(sendWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	case <-r.stop:
	}
	res := &abi.AdapterSendResult{OK: true, Adapter: kind, AccountID: a.AccountID, SurfaceID: a.Surface.ID, DeliveryID: id}
	var ids string
	if err := r.st.QueryRowContext(context.WithoutCancel(ctx), `SELECT state, message_ids, error FROM adapter_outbox WHERE delivery_id=?`, id).
		Scan(&res.State, &ids, &res.Error); err != nil {
		return nil, abi.E(err)
	}
	var list []string
	if json.Unmarshal([]byte(ids), &list) == nil && len(list) > 0 {
		res.MessageID = list[0]
	}
	res.OK = res.State == stateSent || res.State == statePending || res.State == stateClaimed
	return res, nil
}

// randomID is 16 hex digits of randomness.
func randomID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
