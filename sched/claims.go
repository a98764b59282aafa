package sched

// Occurrence claims: the foundation of several nodes firing one table of
// schedules (docs/scaling.md). A due claimKey, a schedule and the time
// it was due, is claimed by one node in one transaction before its target
// is called: the claim is the insert of the claimKey's key, which the
// database's primary key lets happen once, whichever node and however many
// race for it. Not yet called by the engine: one node claims nothing.

import (
	"context"
	"slices"
	"strings"

	"gsvfs.dev/gsvfs/kernel"
)

// A claimKey is an occurrence, a schedule and its due time: the key
// a delivery after a failover dedupes on.
type claimKey struct {
	id string
	at int64 // Unix ms
}

// claimBatch is how many occurrences one statement claims: a node claims
// a dispatch chunk in a few statements of one transaction, so that 10,000
// occurrences due at once are claimed in time.
const claimBatch = 500

// claim claims for node, at now, the occurrences of occ that no node has
// claimed, in one transaction, and returns those it claimed. Keys go in
// sorted order: two nodes claiming overlapping sets wait for each other
// instead of deadlocking.
func claim(ctx context.Context, st *kernel.Store, node string, occ []claimKey, now int64) ([]claimKey, error) {
	occ = slices.Clone(occ)
	slices.SortFunc(occ, func(a, b claimKey) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return int(min(max(a.at-b.at, -1), 1))
	})
	var got []claimKey
	err := st.Tx(ctx, func(tx *kernel.Tx) error {
		got = got[:0]
		for rest := occ; len(rest) > 0; {
			n := min(len(rest), claimBatch)
			var q strings.Builder
			q.WriteString(`INSERT INTO sched_claims(schedule_id,due_at,node,claimed_at) VALUES `)
			args := make([]any, 0, 4*n)
			for i, o := range rest[:n] {
				if i > 0 {
					q.WriteByte(',')
				}
				q.WriteString("(?,?,?,?)")
				args = append(args, o.id, o.at, node, now)
			}
			q.WriteString(` ON CONFLICT DO NOTHING RETURNING schedule_id,due_at`)
			rows, err := tx.Query(q.String(), args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				var o claimKey
				if err := rows.Scan(&o.id, &o.at); err != nil {
					rows.Close()
					return err
				}
				got = append(got, o)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	return got, err
}

// pruneClaims forgets the claims of occurrences due before before: no
// node fires those again (their schedules have moved past them).
func pruneClaims(ctx context.Context, st *kernel.Store, before int64) error {
	_, err := st.Exec(ctx, `DELETE FROM sched_claims WHERE due_at<?`, before)
	return err
}
