package devices

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/ns"
)

// The router's copy of the device registry and its access table, in
// memory: every routed call, every walk, Attr and Access of /dev/<id> and
// every sys.device.list and get read it, and never the store. Each change
// is written to the store first (registry.go, as before), then the
// device's record is read back from the store into the copy, under one
// lock that orders the changes (devTable.write): the copy is what the
// store holds, as of the last change. The copy is loaded when the router
// starts, once every device is marked offline.

// devTable is the registry in memory. The records it holds are never
// changed: a change puts a new one in place.
type devTable struct {
	write sync.Mutex // held across a change: the store's write and the copy's update

	mu   sync.RWMutex
	devs map[string]*stored // by device id
}

// get returns the record of device id, or nil.
func (t *devTable) get(id string) *stored {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.devs[id]
}

// list returns the records, by id: only the online ones if online.
func (t *devTable) list(online bool) []*stored {
	t.mu.RLock()
	out := make([]*stored, 0, len(t.devs))
	for _, s := range t.devs {
		if !online || s.dev.Online {
			out = append(out, s)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b *stored) int { return strings.Compare(a.dev.DeviceID, b.dev.DeviceID) })
	return out
}

// set makes s the record of id (nil: there is none).
func (t *devTable) set(id string, s *stored) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.devs == nil {
		t.devs = map[string]*stored{}
	}
	if s == nil {
		delete(t.devs, id)
		return
	}
	t.devs[id] = s
}

// loadRegistry reads the whole registry from the store into the copy.
func (r *Router) loadRegistry(ctx context.Context) error {
	all, err := r.query(ctx, ``)
	if err != nil {
		return err
	}
	devs := make(map[string]*stored, len(all))
	for _, s := range all {
		devs[s.dev.DeviceID] = s
	}
	r.reg.mu.Lock()
	r.reg.devs = devs
	r.reg.mu.Unlock()
	return nil
}

// wrote follows a change of device id in the store, whose outcome err is:
// if it succeeded, the device's record is read back into the copy (with
// ctx's values, not its end: the store has changed). The caller holds
// reg.write.
func (r *Router) wrote(ctx context.Context, id string, err error) error {
	if err != nil {
		return err
	}
	all, err := r.query(context.WithoutCancel(ctx), `WHERE device_id=?`, id)
	if err != nil {
		return err
	}
	var s *stored
	if len(all) > 0 {
		s = all[0]
	}
	r.reg.set(id, s)
	return nil
}

// ownerTTL is how long the router shows a device owner's names and ids
// as it last read them.
const ownerTTL = time.Minute

// ownerEntry is an owner's Meta as read at a time.
type ownerEntry struct {
	meta ns.Meta
	at   time.Time
}

// ownerMeta is ns.UserMeta of uid, read from the store at most once per
// ownerTTL: the owner /dev/<id> shows at each Attr.
func (r *Router) ownerMeta(ctx context.Context, uid uint32) ns.Meta {
	r.ownersMu.Lock()
	e, ok := r.owners[uid]
	r.ownersMu.Unlock()
	if ok && time.Since(e.at) < ownerTTL {
		return e.meta
	}
	m := ns.UserMeta(ctx, r.k, uid, fmt.Sprint(uid))
	r.ownersMu.Lock()
	if r.owners == nil {
		r.owners = map[uint32]ownerEntry{}
	}
	if len(r.owners) > 4096 {
		clear(r.owners)
	}
	r.owners[uid] = ownerEntry{meta: m, at: time.Now()}
	r.ownersMu.Unlock()
	return m
}
