package devices

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Shell jobs on devices: a shell.exec on a device that answers "running"
// has a job there (the seed's shell session), and later calls with its
// sessionId and no target go to that device. The router keeps where each
// runs in memory (shellRoutes, with the live connection) and in the store
// (device_shell_sessions, a table named with the seed's word), so that
// once the device is gone — its connection ended, or the kernel restarted
// — a poll answers failed "Device disconnected" from the record without
// the device, once; the record then goes. Records expire with the jobs,
// 24 h after their last update.

// shellJobTTL is how long a device shell job's record is kept after its
// last update.
const shellJobTTL = 24 * time.Hour

// shellRoute is where a routed shell job (in shellRoutes) or exec
// session (in procRoutes) runs.
type shellRoute struct {
	dev    *remoteDevice
	uid    uint32
	failed bool // its device disconnected
	// network is an exec session's network mode, as it was opened: an
	// exec in it needs a capability that allows it.
	network string
}

// errDisconnected is a job's result once its device is gone.
func errDisconnected(sid string) *abi.ShellExecResult {
	return &abi.ShellExecResult{Status: "failed", Error: "Device disconnected", SessionID: sid}
}

// continueRouted finds the device job sid of c: ok is false if it is
// not one (the local device's, or unknown). Otherwise res is its answer
// when its device is gone (the record is then removed), or d its live
// device.
func (r *Router) continueRouted(ctx context.Context, c *kernel.Caller, sid string) (res *abi.ShellExecResult, d *remoteDevice, ok bool, err error) {
	r.mu.Lock()
	sr, ok := r.shellRoutes[sid]
	if ok && !sr.failed {
		r.mu.Unlock()
		if sr.uid != c.Uid && !c.IsRoot() {
			return nil, nil, false, nil // to c, as unknown as it is to the device
		}
		return nil, sr.dev, true, nil
	}
	if ok {
		delete(r.shellRoutes, sid) // failed: the store's record answers
	}
	r.mu.Unlock()
	var uid uint32
	var failed bool
	err = r.k.Store.QueryRowContext(ctx, `SELECT uid,failed FROM device_shell_sessions WHERE session_id=?`, sid).Scan(&uid, &failed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, abi.E(abi.Path(sid), err)
	}
	if uid != c.Uid && !c.IsRoot() {
		return nil, nil, false, nil // to c, as unknown as it is to the device
	}
	if _, err := r.k.Store.Exec(ctx, `DELETE FROM device_shell_sessions WHERE session_id=?`, sid); err != nil {
		return nil, nil, false, abi.E(abi.Path(sid), err)
	}
	return errDisconnected(sid), nil, true, nil
}

// execOn is shell.exec on the remote device d, keeping the record of the
// job it runs.
func (r *Router) execOn(ctx context.Context, c *kernel.Caller, d *remoteDevice, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	res, err := d.Exec(ctx, whoOf(c), a)
	if err != nil {
		return nil, err
	}
	sid := res.SessionID
	if a.SessionID != "" && sid != "" && sid != a.SessionID {
		return nil, abi.E(abi.Path(d.id), abi.Other, fmt.Sprintf("device %q answered a poll of session %s for session %s: refused", d.id, a.SessionID, sid))
	}
	if sid == "" {
		sid = a.SessionID
	}
	if sid == "" {
		return res, nil
	}
	if a.SessionID == "" {
		if err := r.freshSession(ctx, "device_shell_sessions", r.shellRoutes, sid, d, c.Uid); err != nil {
			return nil, err
		}
	}
	if res.Status == "running" {
		r.mu.Lock()
		r.shellRoutes[sid] = shellRoute{dev: d, uid: c.Uid}
		r.mu.Unlock()
		_, err = r.k.Store.Exec(ctx, `INSERT INTO device_shell_sessions(session_id,device_id,connection_id,uid,failed,updated_at)
			VALUES(?,?,?,?,0,?) ON CONFLICT(session_id) DO UPDATE SET updated_at=excluded.updated_at`,
			sid, d.id, d.connID, c.Uid, time.Now().UnixMilli())
	} else {
		r.mu.Lock()
		delete(r.shellRoutes, sid)
		r.mu.Unlock()
		_, err = r.k.Store.Exec(ctx, `DELETE FROM device_shell_sessions WHERE session_id=?`, sid)
	}
	if err != nil {
		return nil, abi.E(abi.Path(sid), err)
	}
	return res, nil
}

// freshSession checks that sid, the id device d answered for a new exec
// session or shell job of uid, is not another's: one that routes (in
// memory, or in the store's table) to another device or user. A device
// cannot so take over the session or job of someone else.
func (r *Router) freshSession(ctx context.Context, table string, routes map[string]shellRoute, sid string, d *remoteDevice, uid uint32) error {
	r.mu.Lock()
	sr, ok := routes[sid]
	r.mu.Unlock()
	taken := ok && (sr.dev.id != d.id || sr.uid != uid)
	if !taken {
		var dev string
		var owner uint32
		err := r.k.Store.QueryRowContext(ctx, `SELECT device_id,uid FROM `+table+` WHERE session_id=?`, sid).Scan(&dev, &owner)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return abi.E(abi.Path(sid), err)
		default:
			taken = dev != d.id || owner != uid
		}
	}
	if taken {
		return abi.E(abi.Path(d.id), abi.Other, fmt.Sprintf("device %q answered session id %s, another session's: refused", d.id, sid))
	}
	return nil
}

// failShellJobs records the jobs of d's connection as failed.
func (r *Router) failShellJobs(d *remoteDevice) {
	if _, err := r.k.Store.Exec(context.Background(), `UPDATE device_shell_sessions SET failed=1 WHERE connection_id=?`, d.connID); err != nil {
		r.log.Warn("device disconnected: failing its shell jobs", "device", d.id, "err", err)
	}
}

// openShellJobs readies the records at the router's start: no connection
// survives a restart, so every job's device is gone; the records past
// their TTL go.
func openShellJobs(ctx context.Context, st *kernel.Store) error {
	if _, err := st.Exec(ctx, `DELETE FROM device_shell_sessions WHERE updated_at<?`, time.Now().Add(-shellJobTTL).UnixMilli()); err != nil {
		return err
	}
	_, err := st.Exec(ctx, `UPDATE device_shell_sessions SET failed=1 WHERE failed=0`)
	return err
}
