package kernel

// Ownership leases with epoch fencing: the foundation of several nodes on
// one database (docs/scaling.md). A resource (a process, a device) is
// leased to one node at a time; each new holder gets the next epoch, and
// every write that mutates the resource checks, in its own transaction,
// that the lease is still the writer's (node = me AND epoch = e): a node
// that paused past its lease, or was cut off while another took over,
// cannot write when it wakes.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// An Ownership is a node's lease of a resource: its fencing token is
// (Node, Epoch).
type Ownership struct {
	Resource string
	Node     string
	Epoch    int64
	// Expires is when the lease ends unless renewed (Unix ms).
	Expires int64
}

// ErrFenced is the error of a write, or a renewal, by a node that no
// longer holds the resource's lease: another node holds it, with a later
// epoch.
var ErrFenced = errors.New("fenced: the lease is another node's")

// ErrLeased is the error of Acquire when another node holds a live lease
// of the resource.
var ErrLeased = errors.New("the resource is leased to another node")

// Acquire leases resource to node for ttl from at: a new lease (epoch 1),
// or the lease of another node that has expired (its epoch + 1). A live
// lease of another node is ErrLeased, naming the holder. A node that
// holds the lease already renews it (Renew).
func (s *Store) Acquire(ctx context.Context, resource, node string, at time.Time, ttl time.Duration) (Ownership, error) {
	now, until := at.UnixMilli(), at.Add(ttl).UnixMilli()
	o := Ownership{Resource: resource}
	var holder Ownership
	err := s.Tx(ctx, func(tx *Tx) error {
		err := tx.QueryRow(`INSERT INTO node_leases(resource,node,epoch,expires_at) VALUES(?,?,1,?)
			ON CONFLICT(resource) DO UPDATE SET node=excluded.node, epoch=node_leases.epoch+1, expires_at=excluded.expires_at
			WHERE node_leases.expires_at<=? AND node_leases.node<>excluded.node
			RETURNING node,epoch,expires_at`, resource, node, until, now).Scan(&o.Node, &o.Epoch, &o.Expires)
		if err != sql.ErrNoRows {
			return err
		}
		// Held: by node itself (renewed below), or by a live other.
		return tx.QueryRow(`SELECT node,epoch,expires_at FROM node_leases WHERE resource=?`, resource).
			Scan(&holder.Node, &holder.Epoch, &holder.Expires)
	})
	switch {
	case err != nil:
		return Ownership{}, fmt.Errorf("lease %s: %w", resource, err)
	case o.Node != "":
		return o, nil
	case holder.Node == node:
		holder.Resource = resource
		return s.Renew(ctx, holder, at, ttl)
	}
	return Ownership{}, fmt.Errorf("lease %s: %w: %s (epoch %d) until %s", resource, ErrLeased, holder.Node, holder.Epoch,
		time.UnixMilli(holder.Expires).UTC().Format(time.RFC3339Nano))
}

// Renew extends o to ttl from at, if o is still the lease (its node and
// epoch): else ErrFenced.
func (s *Store) Renew(ctx context.Context, o Ownership, at time.Time, ttl time.Duration) (Ownership, error) {
	until := at.Add(ttl).UnixMilli()
	err := s.Tx(ctx, func(tx *Tx) error {
		return tx.QueryRow(`UPDATE node_leases SET expires_at=? WHERE resource=? AND node=? AND epoch=? RETURNING expires_at`,
			until, o.Resource, o.Node, o.Epoch).Scan(&o.Expires)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Ownership{}, fmt.Errorf("renew %s (epoch %d): %w", o.Resource, o.Epoch, ErrFenced)
	}
	return o, err
}

// Release ends o now, if it is still the lease (else nothing changes).
func (s *Store) Release(ctx context.Context, o Ownership) error {
	_, err := s.Exec(ctx, `UPDATE node_leases SET expires_at=0 WHERE resource=? AND node=? AND epoch=?`, o.Resource, o.Node, o.Epoch)
	return err
}

// Fence checks, in tx, that o is still the lease of its resource, and
// holds it until tx ends: a write made in tx after Fence returned nil
// commits only while o is the lease. It is ErrFenced otherwise (the
// caller returns it, and tx's changes are discarded). The check is an
// UPDATE of the lease's row, not a read: on Postgres it locks the row,
// so a takeover waits for tx, and a takeover that committed first makes
// the check fail (READ COMMITTED re-reads the row); SQLite has one
// writer at a time.
func (t *Tx) Fence(o Ownership) error {
	var epoch int64
	err := t.QueryRow(`UPDATE node_leases SET epoch=epoch WHERE resource=? AND node=? AND epoch=? RETURNING epoch`,
		o.Resource, o.Node, o.Epoch).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s (epoch %d of node %s): %w", o.Resource, o.Epoch, o.Node, ErrFenced)
	}
	return err
}

// Leases lists the leases, live and expired, of the resources whose
// names start with prefix.
func (s *Store) Leases(ctx context.Context, prefix string) ([]Ownership, error) {
	var out []Ownership
	err := s.eachRow(ctx, func(rows *sql.Rows) error {
		var o Ownership
		if err := rows.Scan(&o.Resource, &o.Node, &o.Epoch, &o.Expires); err != nil {
			return err
		}
		out = append(out, o)
		return nil
	}, `SELECT resource,node,epoch,expires_at FROM node_leases WHERE substr(resource,1,?)=? ORDER BY resource`, len(prefix), prefix)
	return out, err
}
