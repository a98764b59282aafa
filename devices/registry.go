package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The device registry: every device that has ever registered, in the
// kernel store (table devices), and the groups granted its use (table
// device_access). A device is registered by its connection (Register,
// Seen, Disconnected); a user reads and manages the registry with
// sys.device.list, get, update and grant.
//
// Access is Linux-like, as the seed has it: root may use every device,
// the owner uid may use its devices, and so may every member of a group
// granted the device. Only the owner and root change a device's
// description or its groups.

// maxDescription is the longest device description, in bytes.
const maxDescription = 1024

// maxImplements is the most syscalls a device may announce.
const maxImplements = 256

// DefaultMaxDevices is how many devices one user may own when the config
// key config/devices/max_per_user (devices.max_per_user) is not set.
const DefaultMaxDevices = 16

// maxDevicesKey is the config key of the devices one user may own.
const maxDevicesKey = "config/devices/max_per_user"

// maxDevicesRule is the rule of config/devices/max_per_user: a whole
// number from 0 (no new device) to a million.
var maxDevicesRule = kernel.ConfigRule{Pattern: maxDevicesKey, Check: func(v string) error {
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 || n > 1_000_000 {
		return fmt.Errorf("devices.max_per_user is a whole number from 0 to 1000000, not %q", v)
	}
	return nil
}}

// maxDevices is how many devices one user may own: config/devices/
// max_per_user if it is a whole number (0: no new device), else
// DefaultMaxDevices.
func (r *Router) maxDevices(ctx context.Context) int {
	res, err := kernel.Do(ctx, r.k, r.k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: maxDevicesKey})
	if err != nil {
		return DefaultMaxDevices
	}
	for _, e := range res.Entries {
		if e.Key == maxDevicesKey {
			if n, err := strconv.Atoi(strings.TrimSpace(e.Value)); err == nil {
				return n
			}
			r.log.Warn("config: not a whole number: using the default", "key", maxDevicesKey, "value", e.Value, "default", DefaultMaxDevices)
		}
	}
	return DefaultMaxDevices
}

// validCall is the form of a syscall name a device announces.
var validCall = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*(\.\*)?$`)

// deviceCols are the columns scanDevice reads, in its order.
const deviceCols = `device_id,owner_uid,description,platform,version,implements,online,first_seen_at,connected_at,disconnected_at,last_seen_at`

// stored is a device's record as the registry holds it: the abi record
// and the gids of the groups granted its use.
type stored struct {
	dev    *abi.Device
	gids   []uint32
	connID string // the connection that registered it last ("" after a restart)
}

// nowMs is the time now in Unix milliseconds, the registry's unit.
func nowMs() int64 { return time.Now().UnixMilli() }

// checkHello reports whether h announces a device the registry may
// record: a valid id, a platform and a version that are one-line names,
// and at most maxImplements syscall names. The error is Invalid.
func checkHello(h abi.DeviceHello) error {
	if err := abi.CheckDeviceID(h.ID); err != nil {
		return err
	}
	if err := kernel.CheckText("platform", h.Platform, kernel.MaxLabel); err != nil {
		return abi.E(abi.Path(h.ID), err)
	}
	if err := kernel.CheckText("version", h.Version, kernel.MaxLabel); err != nil {
		return abi.E(abi.Path(h.ID), err)
	}
	if len(h.Implements) > maxImplements {
		return abi.E(abi.Path(h.ID), abi.Invalid, fmt.Sprintf("implements has %d syscalls; the limit is %d", len(h.Implements), maxImplements))
	}
	for _, call := range h.Implements {
		if len(call) > kernel.MaxLabel || !validCall.MatchString(call) {
			return abi.E(abi.Path(h.ID), abi.Invalid, fmt.Sprintf("implements: %q is not a syscall name", call))
		}
	}
	return nil
}

// Register records the device h announces on connection connID, owned
// by owner (the uid of the node token it authenticated with): a new id is
// created owned by owner; an id that another uid owns is refused (403); a
// new id of a user other than root who owns maxDevices devices already is
// refused (409, naming the limit and how to remove one).
// The device is online from now on, with h's platform, version and
// implements, connected and last seen now, and connID its connection
// (a later Register with another connID supersedes this one: see
// Disconnected). The id must be valid (abi.CheckDeviceID; 400), as must
// the rest of h (one-line platform and version, syscall names).
func (r *Router) Register(ctx context.Context, owner uint32, h abi.DeviceHello, connID string) error {
	if err := checkHello(h); err != nil {
		return err
	}
	impl := h.Implements
	if impl == nil {
		impl = []string{}
	}
	b, err := json.Marshal(impl)
	if err != nil {
		return abi.E(abi.Path(h.ID), err)
	}
	t := nowMs()
	limit := r.maxDevices(ctx)
	r.reg.write.Lock()
	defer r.reg.write.Unlock()
	return r.wrote(ctx, h.ID, r.k.Store.Tx(ctx, func(tx *kernel.Tx) error {
		var have uint32
		err := tx.QueryRow(`SELECT owner_uid FROM devices WHERE device_id=?`, h.ID).Scan(&have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if owner == kernel.RootUID {
				break
			}
			var n int
			if err := tx.QueryRow(`SELECT count(*) FROM devices WHERE owner_uid=?`, owner).Scan(&n); err != nil {
				return abi.E(abi.Path(h.ID), err)
			}
			if n >= limit {
				return abi.E(abi.Path(h.ID), abi.Busy, fmt.Sprintf(
					"you own %d devices, the most a user may (config %s): remove one with gsv device remove ID", n, strings.ReplaceAll(strings.TrimPrefix(maxDevicesKey, "config/"), "/", ".")))
			}
		case err != nil:
			return abi.E(abi.Path(h.ID), err)
		case have != owner:
			return abi.E(abi.Path(h.ID), abi.Permission, fmt.Sprintf("device %s belongs to another user", h.ID))
		}
		_, err = tx.Exec(`INSERT INTO devices(device_id,owner_uid,platform,version,implements,online,first_seen_at,connected_at,last_seen_at,connection_id)
			VALUES(?,?,?,?,?,1,?,?,?,?)
			ON CONFLICT(device_id) DO UPDATE SET platform=excluded.platform, version=excluded.version,
				implements=excluded.implements, online=1, connected_at=excluded.connected_at,
				last_seen_at=excluded.last_seen_at, connection_id=excluded.connection_id`,
			h.ID, owner, h.Platform, h.Version, string(b), t, t, t, connID)
		if err != nil {
			return abi.E(abi.Path(h.ID), err)
		}
		return nil
	}))
}

// Disconnected records that connection connID of device id has ended:
// the device is offline, disconnected and last seen now. Only the
// device's current connection counts: if another connection has
// registered the id since (it superseded connID), nothing changes and
// the device stays online on the new one.
func (r *Router) Disconnected(ctx context.Context, id, connID string) error {
	t := nowMs()
	r.reg.write.Lock()
	defer r.reg.write.Unlock()
	if s := r.reg.get(id); s == nil || s.connID != connID {
		return nil // not its connection: the UPDATE below would change nothing
	}
	_, err := r.k.Store.Exec(ctx, `UPDATE devices SET online=0, disconnected_at=?, last_seen_at=?
		WHERE device_id=? AND connection_id=?`, t, t, id, connID)
	if err != nil {
		return abi.E(abi.Path(id), err)
	}
	return r.wrote(ctx, id, nil)
}

// Seen records that device id was heard from now (its last_seen_at). A
// device the registry does not have is NotExist.
func (r *Router) Seen(ctx context.Context, id string) error {
	r.reg.write.Lock()
	defer r.reg.write.Unlock()
	res, err := r.k.Store.Exec(ctx, `UPDATE devices SET last_seen_at=? WHERE device_id=?`, nowMs(), id)
	if err != nil {
		return abi.E(abi.Path(id), err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return abi.E(abi.Path(id), err)
	} else if n == 0 {
		return abi.E(abi.Path(id), abi.NotExist, fmt.Sprintf("no device %s", id))
	}
	return r.wrote(ctx, id, nil)
}

// offlineAll marks every device offline: at the router's start no
// connection of a device survives. A device that was online is taken to
// have disconnected when it was last seen.
func offlineAll(ctx context.Context, st *kernel.Store) error {
	_, err := st.Exec(ctx, `UPDATE devices SET online=0, disconnected_at=last_seen_at, connection_id=NULL WHERE online=1`)
	if err != nil {
		return fmt.Errorf("devices: mark offline: %w", err)
	}
	return nil
}

// deviceRecord returns the record of device id, with the names of the
// groups granted it; NotExist if the registry has none.
func (r *Router) deviceRecord(ctx context.Context, id string) (*abi.Device, error) {
	s, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.dev, nil
}

// lookup returns device id as the registry holds it (the router's copy
// in memory: no SQL); NotExist if there is none.
func (r *Router) lookup(ctx context.Context, id string) (*stored, error) {
	s := r.reg.get(id)
	if s == nil {
		return nil, abi.E(abi.Path(id), abi.NotExist, fmt.Sprintf("no device %s", id))
	}
	return s, nil
}

// query returns the devices the clause where selects (with args), by
// id, each with its granted groups.
func (r *Router) query(ctx context.Context, where string, args ...any) ([]*stored, error) {
	rows, err := r.k.Store.QueryContext(ctx, `SELECT `+deviceCols+`,coalesce(connection_id,'') FROM devices `+where+` ORDER BY device_id`, args...)
	if err != nil {
		return nil, abi.E(fmt.Errorf("devices: %w", err))
	}
	defer rows.Close()
	var out []*stored
	byID := map[string]*stored{}
	for rows.Next() {
		var connID string
		d, err := scanDevice(rows, &connID)
		if err != nil {
			return nil, abi.E(fmt.Errorf("devices: %w", err))
		}
		s := &stored{dev: d, connID: connID}
		out = append(out, s)
		byID[d.DeviceID] = s
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(fmt.Errorf("devices: %w", err))
	}
	if len(out) == 0 {
		return nil, nil
	}
	grants, err := r.k.Store.QueryContext(ctx, `SELECT device_id, gid FROM device_access
		WHERE device_id IN (SELECT device_id FROM devices `+where+`)
		ORDER BY device_id, gid`, args...)
	if err != nil {
		return nil, abi.E(fmt.Errorf("device access: %w", err))
	}
	defer grants.Close()
	granted := false
	for grants.Next() {
		var id string
		var gid uint32
		if err := grants.Scan(&id, &gid); err != nil {
			return nil, abi.E(fmt.Errorf("device access: %w", err))
		}
		s := byID[id]
		if s == nil {
			continue
		}
		s.gids = append(s.gids, gid)
		granted = true
	}
	if err := grants.Err(); err != nil {
		return nil, abi.E(fmt.Errorf("device access: %w", err))
	}
	if !granted {
		return out, nil
	}
	// The groups are the kernel's: their names come from it.
	groups, err := kernel.Do(ctx, r.k, r.k.KernelCaller(), abi.SysGroupList, &abi.GroupListArgs{})
	if err != nil {
		return nil, abi.E(fmt.Errorf("device access: %w", err))
	}
	names := make(map[uint32]string, len(groups.Groups))
	for _, g := range groups.Groups {
		names[g.Gid] = g.Name
	}
	for _, s := range out {
		for _, gid := range s.gids {
			name := names[gid]
			if name == "" {
				name = fmt.Sprint(gid)
			}
			s.dev.Groups = append(s.dev.Groups, name)
		}
	}
	return out, nil
}

// scanDevice reads one row of deviceCols, and the columns after them
// into more.
func scanDevice(rows *sql.Rows, more ...any) (*abi.Device, error) {
	d := &abi.Device{Groups: []string{}}
	var impl string
	var online int
	var connected, disconnected sql.NullInt64
	if err := rows.Scan(append([]any{&d.DeviceID, &d.OwnerUid, &d.Description, &d.Platform, &d.Version, &impl, &online,
		&d.FirstSeenAt, &connected, &disconnected, &d.LastSeenAt}, more...)...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(impl), &d.Implements); err != nil {
		return nil, fmt.Errorf("device %s: implements: %w", d.DeviceID, err)
	}
	if d.Implements == nil {
		d.Implements = []string{}
	}
	d.Online = online != 0
	if connected.Valid {
		d.ConnectedAt = &connected.Int64
	}
	if disconnected.Valid {
		d.DisconnectedAt = &disconnected.Int64
	}
	return d, nil
}

// mayUse reports whether c may use device d, whose granted groups are
// gids: root may use every device, the owner its own, and a member of a
// granted group the device.
func mayUse(c *kernel.Caller, d *abi.Device, gids []uint32) bool {
	if c == nil || c.Identity == nil || d == nil {
		return false
	}
	return c.IsRoot() || c.Uid == d.OwnerUid || slices.ContainsFunc(gids, c.InGroup)
}

// mayManage reports whether c may change device d: root, or its owner.
func mayManage(c *kernel.Caller, d *abi.Device) bool {
	return c != nil && c.Identity != nil && d != nil && (c.IsRoot() || c.Uid == d.OwnerUid)
}

// registrySyscalls are the sys.device.* syscalls.
func (r *Router) registrySyscalls() []kernel.Syscall {
	return []kernel.Syscall{
		kernel.Handle(abi.SysDeviceList, r.deviceList),
		kernel.Handle(abi.SysDeviceGet, r.deviceGet),
		kernel.Handle(abi.SysDeviceUpdate, r.deviceUpdate),
		kernel.Handle(abi.SysDeviceGrant, r.deviceGrant),
		kernel.Handle(abi.SysDeviceRemove, r.deviceRemove),
	}
}

// deviceList serves sys.device.list: the devices c may use (root: all),
// by id; online ones only unless a.IncludeOffline.
func (r *Router) deviceList(ctx context.Context, c *kernel.Caller, a *abi.DeviceListArgs) (*abi.DeviceListResult, error) {
	out := &abi.DeviceListResult{Devices: []abi.Device{}}
	for _, s := range r.reg.list(!a.IncludeOffline) {
		if mayUse(c, s.dev, s.gids) {
			out.Devices = append(out.Devices, *s.dev)
		}
	}
	return out, nil
}

// deviceGet serves sys.device.get: device a.DeviceID, or null when there
// is none c may use (never a permission error: a device c may not use is
// one it cannot tell from a missing one).
func (r *Router) deviceGet(ctx context.Context, c *kernel.Caller, a *abi.DeviceGetArgs) (*abi.DeviceGetResult, error) {
	s, err := r.lookup(ctx, a.DeviceID)
	if abi.Code(err) == int(abi.NotExist) {
		return &abi.DeviceGetResult{}, nil
	}
	if err != nil {
		return nil, err
	}
	if !mayUse(c, s.dev, s.gids) {
		return &abi.DeviceGetResult{}, nil
	}
	return &abi.DeviceGetResult{Device: s.dev}, nil
}

// deviceUpdate serves sys.device.update: the owner (or root) sets the
// description of device a.DeviceID, a one-line text of at most
// maxDescription bytes (400 otherwise). A device that is missing, or
// that c does not own (a member of a granted group uses it but does not
// edit it), is null, and nothing changes.
func (r *Router) deviceUpdate(ctx context.Context, c *kernel.Caller, a *abi.DeviceUpdateArgs) (*abi.DeviceGetResult, error) {
	if err := kernel.CheckText("description", a.Description, maxDescription); err != nil {
		return nil, abi.E(abi.Path(a.DeviceID), err)
	}
	r.reg.write.Lock()
	defer r.reg.write.Unlock()
	s, err := r.lookup(ctx, a.DeviceID)
	if abi.Code(err) == int(abi.NotExist) {
		return &abi.DeviceGetResult{}, nil
	}
	if err != nil {
		return nil, err
	}
	if !mayManage(c, s.dev) {
		return &abi.DeviceGetResult{}, nil
	}
	if _, err := r.k.Store.Exec(ctx, `UPDATE devices SET description=? WHERE device_id=?`, a.Description, a.DeviceID); err != nil {
		return nil, abi.E(abi.Path(a.DeviceID), err)
	}
	if err := r.wrote(ctx, a.DeviceID, nil); err != nil {
		return nil, err
	}
	d, err := r.deviceRecord(ctx, a.DeviceID)
	if err != nil {
		return nil, err
	}
	return &abi.DeviceGetResult{Device: d}, nil
}

// deviceGrant serves sys.device.grant (ours): the owner (or root) grants
// group a.Group the use of device a.DeviceID, or takes it back
// (a.Revoke; revoking a group not granted changes nothing). A bad id or
// an empty group is 400; a device c may not use is 404, as a missing one
// is; one c uses but does not own is 403; a group that does not exist is
// 404. The result is the device with its groups as they now are.
func (r *Router) deviceGrant(ctx context.Context, c *kernel.Caller, a *abi.DeviceGrantArgs) (*abi.DeviceGetResult, error) {
	if err := abi.CheckDeviceID(a.DeviceID); err != nil {
		return nil, err
	}
	if a.Group == "" {
		return nil, abi.E(abi.Path(a.DeviceID), abi.Invalid, "give the group to grant")
	}
	r.reg.write.Lock()
	defer r.reg.write.Unlock()
	s, err := r.lookup(ctx, a.DeviceID)
	if err != nil {
		return nil, err
	}
	if !mayUse(c, s.dev, s.gids) {
		return nil, abi.E(abi.Path(a.DeviceID), abi.NotExist, fmt.Sprintf("no device %s", a.DeviceID))
	}
	if !mayManage(c, s.dev) {
		return nil, abi.E(abi.Path(a.DeviceID), abi.Permission, fmt.Sprintf("only the owner of device %s or root may grant it", a.DeviceID))
	}
	groups, err := kernel.Do(ctx, r.k, r.k.KernelCaller(), abi.SysGroupList, &abi.GroupListArgs{})
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(groups.Groups, func(g abi.Group) bool { return g.Name == a.Group })
	if i < 0 {
		return nil, abi.E(abi.Path(a.DeviceID), abi.NotExist, fmt.Sprintf("no group %q", a.Group))
	}
	gid := groups.Groups[i].Gid
	q := `INSERT INTO device_access(device_id,gid) VALUES(?,?) ON CONFLICT DO NOTHING`
	if a.Revoke {
		q = `DELETE FROM device_access WHERE device_id=? AND gid=?`
	}
	if _, err := r.k.Store.Exec(ctx, q, a.DeviceID, gid); err != nil {
		return nil, abi.E(abi.Path(a.DeviceID), err)
	}
	if err := r.wrote(ctx, a.DeviceID, nil); err != nil {
		return nil, err
	}
	d, err := r.deviceRecord(ctx, a.DeviceID)
	if err != nil {
		return nil, err
	}
	return &abi.DeviceGetResult{Device: d}, nil
}

// deviceRemove serves sys.device.remove (ours): the owner (or root)
// removes device a.DeviceID from the registry, with its grants; its live
// connection, if any, ends (its sessions fail as on any disconnection),
// and /dev/<id> goes. A bad id is 400; a device c may not use is 404, as
// a missing one is; one c uses but does not own is 403. The result is the
// record as it was. The device's node tokens stay: a device that dials
// again with one registers anew, within its owner's limit.
func (r *Router) deviceRemove(ctx context.Context, c *kernel.Caller, a *abi.DeviceRemoveArgs) (*abi.DeviceGetResult, error) {
	if err := abi.CheckDeviceID(a.DeviceID); err != nil {
		return nil, err
	}
	r.reg.write.Lock()
	defer r.reg.write.Unlock()
	s, err := r.lookup(ctx, a.DeviceID)
	if err != nil {
		return nil, err
	}
	if !mayUse(c, s.dev, s.gids) {
		return nil, abi.E(abi.Path(a.DeviceID), abi.NotExist, fmt.Sprintf("no device %s", a.DeviceID))
	}
	if !mayManage(c, s.dev) {
		return nil, abi.E(abi.Path(a.DeviceID), abi.Permission, fmt.Sprintf("only the owner of device %s or root may remove it", a.DeviceID))
	}
	err = r.k.Store.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := tx.Exec(`DELETE FROM device_access WHERE device_id=?`, a.DeviceID); err != nil {
			return err
		}
		_, err := tx.Exec(`DELETE FROM devices WHERE device_id=?`, a.DeviceID)
		return err
	})
	if err != nil {
		return nil, abi.E(abi.Path(a.DeviceID), err)
	}
	if err := r.wrote(ctx, a.DeviceID, nil); err != nil {
		return nil, err
	}
	if d := r.remote(a.DeviceID); d != nil {
		d.close(errors.New("the device was removed"))
	}
	r.forgetDevice(a.DeviceID)
	return &abi.DeviceGetResult{Device: s.dev}, nil
}
