package devices

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
)

// Exec sessions on devices. process.session.open with target.device goes
// to that device by route's checks (403, 503, 400), with the definition
// as the device's own local target; the device runs the session in its
// own sandbox. The router records where each session runs, in memory
// (procRoutes, with the live connection) and in the store
// (device_process_sessions), and every later call naming the session
// (process.exec, .signal, .get, .wait, the output files) goes there with
// no target. A caller sees only their own device sessions (root: all).
// When the device's connection ends its sessions are failed: get answers
// state "failed", error "Device disconnected", from the record; exec and
// wait answer 503 "Device disconnected"; signal "already_exited". The
// records go at the sessions' expiry.

// deviceSessionTTL bounds how long a device session's record is kept
// when its open gave no expiry.
const deviceSessionTTL = 24 * time.Hour

// errSessionGone is a call's answer for a session whose device is gone.
func errSessionGone(sid string) error {
	return abi.E(abi.Path(sid), abi.Offline, "Device disconnected: the session ended with its device's connection")
}

// sessionOpenOn is process.session.open of target.device: the local
// device's own id runs it here; another goes to that device, after the
// network mode is checked against the caller's process capability.
func (r *Router) sessionOpenOn(ctx context.Context, c *kernel.Caller, pc *abi.ProcessCap, a *abi.SessionOpenArgs) (*abi.SessionOpenResult, error) {
	t := a.Target.Device
	if t.ID == "" {
		return nil, abi.E(abi.Invalid, "target.device.id: which device?")
	}
	loc := t.ProcessLocalTarget
	b := *a
	b.Target = abi.ProcessTarget{Local: &loc}
	if t.ID == abi.LocalTarget {
		who := whoOf(c)
		who.Process = pc
		return r.local.SessionOpen(ctx, who, &b)
	}
	if !networkAllowed(*pc, loc.NetworkMode) {
		return nil, abi.E(abi.Permission, fmt.Sprintf("network_mode %q is not allowed by your process capability", loc.NetworkMode))
	}
	d, err := r.route(ctx, c, abi.ProcessSessionOpen.Name, t.ID)
	if err != nil {
		return nil, err
	}
	rd := d.(*remoteDevice)
	res, err := routed[abi.SessionOpenResult](ctx, rd, abi.ProcessSessionOpen.Name, &b, rd.timeout)
	if err != nil {
		return nil, err
	}
	res.Device = rd.id
	if res.Status != abi.SessionReady {
		return res, nil // the device's receipt of a failed open: no session to route
	}
	if err := r.freshSession(ctx, "device_process_sessions", r.procRoutes, res.SessionID, rd, c.Uid); err != nil {
		return nil, err
	}
	expires := time.Now().Add(deviceSessionTTL).UnixNano()
	if res.ExpiresAtNs != nil {
		expires = *res.ExpiresAtNs
	}
	r.mu.Lock()
	r.procRoutes[res.SessionID] = shellRoute{dev: rd, uid: c.Uid, network: loc.NetworkMode}
	r.mu.Unlock()
	if _, err := r.k.Store.Exec(ctx, `INSERT INTO device_process_sessions(session_id,device_id,connection_id,uid,failed,expires_at,seq)
		VALUES(?,?,?,?,0,?,(SELECT coalesce(max(seq), 0)+1 FROM device_process_sessions)) ON CONFLICT(session_id) DO UPDATE SET device_id=excluded.device_id,connection_id=excluded.connection_id,
		uid=excluded.uid,failed=0,expires_at=excluded.expires_at`, res.SessionID, rd.id, rd.connID, c.Uid, expires/1e6); err != nil {
		return nil, abi.E(abi.Path(res.SessionID), err)
	}
	return res, nil
}

// sessionRoute is where session sid of c runs when it is a device's:
// on (with ok) if it is c's (or c is root); failed says its device is
// gone, and dev is then the device's id. ok is false for a session of
// the local device, or one c may not see.
type sessionRoute struct {
	rd      *remoteDevice
	dev     string
	uid     uint32
	failed  bool
	network string // the network mode it was opened with
}

// deviceSession finds session sid for c.
func (r *Router) deviceSession(ctx context.Context, c *kernel.Caller, sid string) (sessionRoute, bool, error) {
	r.mu.Lock()
	sr, ok := r.procRoutes[sid]
	r.mu.Unlock()
	if ok {
		if sr.uid != c.Uid && !c.IsRoot() {
			return sessionRoute{}, false, nil
		}
		return sessionRoute{rd: sr.dev, dev: sr.dev.id, uid: sr.uid, failed: sr.failed, network: sr.network}, true, nil
	}
	var out sessionRoute
	err := r.k.Store.QueryRowContext(ctx, `SELECT device_id,uid FROM device_process_sessions WHERE session_id=?`, sid).Scan(&out.dev, &out.uid)
	if errors.Is(err, sql.ErrNoRows) {
		return sessionRoute{}, false, nil
	}
	if err != nil {
		return sessionRoute{}, false, abi.E(abi.Path(sid), err)
	}
	if out.uid != c.Uid && !c.IsRoot() {
		return sessionRoute{}, false, nil
	}
	out.failed = true // not in memory: its connection did not outlive the router
	return out, true, nil
}

// onSession serves the process.* syscall call of a session: on its device
// if it runs on one (within timeout), else on the local device. gone
// answers for a session whose device is gone.
func onSession[A, V any](r *Router, call abi.Call[A, *V], sid func(*A) string, timeout func(*A, time.Duration) time.Duration,
	here func(context.Context, local.Who, *A) (*V, error), gone func(*A, sessionRoute) (*V, error)) kernel.Syscall {
	// An exec runs a command: it obeys the caller's process capability,
	// which must allow all the session was opened with.
	runs := call.Name == abi.ProcessExec.Name || call.Name == abi.ProcessExecStart.Name
	return kernel.Handle(call, func(ctx context.Context, c *kernel.Caller, a *A) (*V, error) {
		id := sid(a)
		sr, ok, err := r.deviceSession(ctx, c, id)
		if err != nil {
			return nil, err
		}
		var pc *abi.ProcessCap
		if runs && (!ok || !sr.failed) {
			if pc, err = r.processCap(ctx, c); err != nil {
				return nil, err
			}
		}
		if !ok {
			who := whoOf(c)
			who.Process = pc
			return here(ctx, who, a)
		}
		if sr.failed {
			if gone != nil {
				return gone(a, sr)
			}
			return nil, errSessionGone(id)
		}
		if pc != nil && !networkAllowed(*pc, sr.network) {
			return nil, abi.E(abi.Path(id), abi.Permission,
				fmt.Sprintf("this session's network_mode %q is not allowed by your process capability", sr.network))
		}
		res, err := routed[V](ctx, sr.rd, call.Name, a, timeout(a, sr.rd.timeout))
		if err != nil {
			return nil, err
		}
		switch v := any(res).(type) {
		case *abi.SessionInfo:
			r.ownSession(ctx, v, sr.dev, sr.uid)
		case *abi.ExecResult:
			markBlobs(v, sr.dev)
		}
		return res, nil
	})
}

// ownSession makes info, a session of device as the device shows it,
// the kernel's: its owner the GSV user uid who opened it (the device
// knows only its own user), its device and its blobs' device named.
func (r *Router) ownSession(ctx context.Context, info *abi.SessionInfo, device string, uid uint32) {
	info.Device = device
	info.Uid, info.User = uid, fmt.Sprint(uid)
	if u, err := r.k.UserOf(ctx, uid); err == nil {
		info.User = u.Username
	}
	markBlobs(info.LastExec, device)
}

// markBlobs names device as the keeper of r's blobs.
func markBlobs(r *abi.ExecResult, device string) {
	if r == nil {
		return
	}
	for _, o := range []*abi.ExecOutput{r.Stdout, r.Stderr} {
		if o != nil && o.Blob != nil {
			o.Blob.Device = device
		}
	}
}

// execDeadline is how long a routed process.exec may take: its timeout
// (10 min by default, at most 1 h) and 10 s.
func execDeadline(a *abi.ExecArgs, _ time.Duration) time.Duration {
	t := 10 * time.Minute
	if a.TimeoutNs != nil && *a.TimeoutNs > 0 {
		t = min(time.Hour, time.Duration(*a.TimeoutNs))
	}
	return t + 10*time.Second
}

// routeDeadline is the route's own deadline.
func routeDeadline[A any](_ *A, route time.Duration) time.Duration { return route }

// waitDeadline is how long a routed wait may take: the longest exec.
func waitDeadline[A any](_ *A, _ time.Duration) time.Duration { return time.Hour + 10*time.Second }

// signalDeadline is a signal's grace (1 s by default) and 10 s.
func signalDeadline(a *abi.SessionSignalArgs, _ time.Duration) time.Duration {
	g := time.Second
	if a.GraceTimeoutNs != nil && *a.GraceTimeoutNs > 0 {
		g = time.Duration(*a.GraceTimeoutNs)
	}
	return g + 10*time.Second
}

// goneInfo is process.session.get of a session whose device is gone.
func goneInfo(a *abi.SessionGetArgs, sr sessionRoute) (*abi.SessionInfo, error) {
	return &abi.SessionInfo{SessionID: a.SessionID, Device: sr.dev, Uid: sr.uid, State: "failed", Error: "Device disconnected"}, nil
}

// goneSignal is process.session.signal of a session whose device is
// gone: it has ended.
func goneSignal(*abi.SessionSignalArgs, sessionRoute) (*abi.SessionSignalResult, error) {
	return &abi.SessionSignalResult{Status: abi.SignalAlreadyExited}, nil
}

// sessionListOn is process.session.list: the local device's sessions,
// or with a target the caller's sessions on that device (root: all of
// them); the device's sessions whose device is gone show as failed.
func (r *Router) sessionListOn(ctx context.Context, c *kernel.Caller, a *abi.SessionListArgs) (*abi.SessionListResult, error) {
	if a.Target == "" || a.Target == abi.LocalTarget {
		return r.local.SessionList(ctx, whoOf(c), a)
	}
	out := &abi.SessionListResult{Sessions: []abi.SessionInfo{}}
	d, err := r.route(ctx, c, abi.ProcessSessionList.Name, a.Target)
	if err == nil {
		rd := d.(*remoteDevice)
		res, err := routed[abi.SessionListResult](ctx, rd, abi.ProcessSessionList.Name, &abi.SessionListArgs{}, rd.timeout)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		for _, s := range res.Sessions {
			sr, ok := r.procRoutes[s.SessionID]
			if c.IsRoot() || (ok && sr.dev == rd && sr.uid == c.Uid) {
				uid := c.Uid
				if ok {
					uid = sr.uid
				}
				r.ownSession(ctx, &s, rd.id, uid)
				out.Sessions = append(out.Sessions, s)
			}
		}
		r.mu.Unlock()
	} else if abi.KindOf(err) != abi.Offline {
		return nil, err
	}
	// The caller's sessions the device took with a connection that ended.
	rows, err := r.k.Store.QueryContext(ctx, `SELECT session_id,uid FROM device_process_sessions
		WHERE device_id=? AND (uid=? OR ?) ORDER BY seq`, a.Target, c.Uid, c.IsRoot())
	if err != nil {
		return nil, abi.E(abi.Path(a.Target), err)
	}
	defer rows.Close()
	for rows.Next() {
		var sid string
		var uid uint32
		if err := rows.Scan(&sid, &uid); err != nil {
			return nil, abi.E(abi.Path(a.Target), err)
		}
		// A record the router does not hold in memory, or holds failed,
		// is a session whose device's connection ended.
		r.mu.Lock()
		sr, live := r.procRoutes[sid]
		r.mu.Unlock()
		if !live || sr.failed {
			out.Sessions = append(out.Sessions, abi.SessionInfo{SessionID: sid, Device: a.Target, Uid: uid, State: "failed", Error: "Device disconnected"})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(abi.Path(a.Target), err)
	}
	return out, nil
}

// blobReadOn is process.blob.read: a local blob, or with a target a blob
// of that device (of a receipt of a session there).
func (r *Router) blobReadOn(ctx context.Context, c *kernel.Caller, a *abi.BlobReadArgs) (*abi.BlobReadResult, error) {
	if a.Target == "" || a.Target == abi.LocalTarget {
		return r.local.BlobRead(ctx, whoOf(c), a)
	}
	d, err := r.route(ctx, c, abi.ProcessBlobRead.Name, a.Target)
	if err != nil {
		return nil, err
	}
	rd := d.(*remoteDevice)
	b := *a
	b.Target = ""
	return routed[abi.BlobReadResult](ctx, rd, abi.ProcessBlobRead.Name, &b, rd.timeout)
}

// failProcessSessions records the sessions of d's connection as failed.
func (r *Router) failProcessSessions(d *remoteDevice) {
	if _, err := r.k.Store.Exec(context.Background(), `UPDATE device_process_sessions SET failed=1 WHERE connection_id=?`, d.connID); err != nil {
		r.log.Warn("device disconnected: failing its exec sessions", "device", d.id, "err", err)
	}
}

// openProcessSessions readies the records at the router's start: every
// session's device is gone; the records past their expiry go.
func openProcessSessions(ctx context.Context, st *kernel.Store) error {
	if _, err := st.Exec(ctx, `DELETE FROM device_process_sessions WHERE expires_at<?`, time.Now().UnixMilli()); err != nil {
		return err
	}
	_, err := st.Exec(ctx, `UPDATE device_process_sessions SET failed=1 WHERE failed=0`)
	return err
}

// networkAllowed says whether pc allows a session of network mode mode on
// a device (a mode the kernel does not know is the device's to refuse).
func networkAllowed(pc abi.ProcessCap, mode string) bool {
	return slices.Contains(pc.Networks, mode) || (mode != abi.NetworkNone && mode != abi.NetworkFull)
}
