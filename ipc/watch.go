package ipc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Signal watches (seed 003, signal.watch / signal.unwatch): a process
// asks to be told when a signal of another process of its owner is
// published. A watch is durable (proc_watches); its TTL is 24 h by
// default, clamped to 1 s..30 d; once (the default) deletes it after its
// first delivery. The kernel's bus shows every signal to the room
// (kernel.Observe); a signal whose name some watch has goes to the
// watcher goroutine, which delivers it to each matching watcher as a
// "signal" event ("[Process Event]: signal ..."), if the watcher's owner
// is in the signal's audience. A delivery that fails marks the watch
// failed; it fires no more. Deliveries are rate-limited per owner
// (watchRate, watchBurst): past the bucket a delivery waits, and the
// signals for its watch join it. proc.kill removes the process's
// watches.

const (
	defaultWatchTTL = 24 * time.Hour
	minWatchTTL     = time.Second
	maxWatchTTL     = 30 * 24 * time.Hour
	// watchQueue is how many signals wait for the watcher goroutine; past
	// it a signal is dropped (and logged), never the bus blocked.
	watchQueue = 1024
	// maxWatchesPerProcess bounds the watches of one process.
	maxWatchesPerProcess = 256
	// watchRate and watchBurst rate-limit the deliveries of one owner's
	// watches: a bucket of watchBurst deliveries, refilled watchRate a
	// second. A delivery past it waits for the bucket, and the signals
	// that come for the same watch meanwhile join it (one delivery, "and
	// n more").
	watchRate  = 10
	watchBurst = 20
	// maxDeferredPerOwner bounds the deliveries of one owner waiting for
	// the bucket (one per watch); past it a signal is dropped and logged.
	maxDeferredPerOwner = 256
)

// watchSignal is a published signal a watch may want: its name, payload
// and audience, and the process (and conversation) its envelope names.
type watchSignal struct {
	name      string
	payload   any
	audience  kernel.Audience
	pid, conv string
}

// watchState is the room's live part of the watches: the names watched
// (so that the bus observer drops the rest at once) and the queue of the
// watcher goroutine.
type watchState struct {
	mu    sync.Mutex     // guards names
	names map[string]int // signal name -> active watches
	q     chan watchSignal
	stop  chan struct{}

	// rate is the owners' buckets of deliveries (watchRate, watchBurst),
	// with the deliveries that wait for them.
	rate struct {
		sync.Mutex // guards owners and its buckets, perSec, burst and now
		owners     map[uint32]*watchBucket
		// per second and burst: watchRate and watchBurst (tests change
		// them); now is the clock.
		perSec, burst float64
		now           func() time.Time
	}
}

// watchBucket is one owner's deliveries: the tokens left at a time, and
// the deliveries waiting for one, in order, one per watch.
type watchBucket struct {
	tokens   float64
	at       time.Time
	waiting  []string
	byWatch  map[string]*watchDelivery
	flushing bool // a flush of waiting is scheduled
	dropped  int  // signals dropped since the last warning
}

// watchHit is a watch a signal matched.
type watchHit struct {
	id, watcher, key, state string
	uid                     uint32
	once                    bool
	cap                     sql.NullString // the narrowing its arming caller had
}

// watchDelivery is a delivery of a signal to a watch; more counts the
// signals for the same watch that joined it while it waited.
type watchDelivery struct {
	hit  watchHit
	sig  watchSignal
	pid  string
	more int
}

// startWatches loads the watched names, observes the bus and starts the
// watcher goroutine (Close stops it).
func (m *Room) startWatches(ctx context.Context) error {
	m.watch.q = make(chan watchSignal, watchQueue)
	m.watch.stop = make(chan struct{})
	m.watch.rate.Lock()
	m.watch.rate.owners = map[uint32]*watchBucket{}
	m.watch.rate.perSec, m.watch.rate.burst, m.watch.rate.now = watchRate, watchBurst, time.Now
	m.watch.rate.Unlock()
	if err := m.loadWatchNames(ctx); err != nil {
		return err
	}
	m.k.Observe(func(ev *kernel.Event, a kernel.Audience) {
		name, payload := ev.Signal, ev.Payload
		m.watch.mu.Lock()
		watched := m.watch.names[name] > 0
		m.watch.mu.Unlock()
		if !watched {
			return
		}
		select {
		case m.watch.q <- watchSignal{name, payload, a, ev.Pid, ev.Conv}:
		default:
			m.log.Warn("ipc: a watched signal dropped: the watcher is behind", "signal", name)
		}
	})
	m.mu.Lock()
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		for {
			select {
			case <-m.watch.stop:
				return
			case s := <-m.watch.q:
				m.fireWatches(s)
			}
		}
	}()
	return nil
}

// loadWatchNames counts the active watches by signal name.
func (m *Room) loadWatchNames(ctx context.Context) error {
	rows, err := m.st.QueryContext(ctx, `SELECT signal,count(*) FROM proc_watches WHERE status='active' GROUP BY signal`)
	if err != nil {
		return err
	}
	defer rows.Close()
	names := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return err
		}
		names[name] = n
	}
	m.watch.mu.Lock()
	m.watch.names = names
	m.watch.mu.Unlock()
	return rows.Err()
}

// stopWatches stops the watcher goroutine (Close).
func (m *Room) stopWatches() {
	if m.watch.stop != nil {
		close(m.watch.stop)
	}
}

// sysWatch serves signal.watch: it creates the watch, or with a key the
// process has used, replaces that watch (created false).
func (m *Room) sysWatch(ctx context.Context, c *kernel.Caller, a *abi.WatchArgs) (*abi.WatchResult, error) {
	w, err := m.actingProcess(ctx, c, a.WatcherPid, "watcherPid")
	if err != nil {
		return nil, err
	}
	if err := kernel.CheckText("signal", a.Signal, 128); err != nil || a.Signal == "" {
		return nil, abi.E(abi.Invalid, "signal: a name such as proc.run.finished")
	}
	if a.ProcessID == "" {
		return nil, abi.E(abi.Invalid, "processId: a process names the process it watches")
	}
	if a.ProcessID == w.Pid {
		return nil, abi.E(abi.Invalid, "a process cannot watch itself")
	}
	target, err := m.get(ctx, a.ProcessID)
	if err != nil {
		return nil, err
	}
	if target.Uid != w.Uid {
		return nil, m.otherProcess(c, a.ProcessID, "a process watches only processes of its owner")
	}
	if len(a.Key) > 128 {
		return nil, abi.E(abi.Invalid, "key is over 128 bytes")
	}
	if len(a.State) > 16<<10 || (len(a.State) > 0 && !json.Valid(a.State)) {
		return nil, abi.E(abi.Invalid, "state: JSON of at most 16 KiB")
	}
	ttl := defaultWatchTTL
	if a.TTLMs != nil {
		ttl = min(max(time.Duration(*a.TTLMs)*time.Millisecond, minWatchTTL), maxWatchTTL)
	}
	once := a.Once == nil || *a.Once
	t := now()
	expires := t + ttl.Milliseconds()
	key := sql.NullString{String: a.Key, Valid: a.Key != ""}
	state := sql.NullString{String: string(a.State), Valid: len(a.State) > 0}
	res := &abi.WatchResult{CreatedAt: t, ExpiresAt: &expires}
	var oldSignal string
	err = m.st.Tx(ctx, func(tx *kernel.Tx) error {
		oldSignal = ""
		if key.Valid {
			var id, sig, status string
			err := m.st.TxQueryRow(tx, `SELECT watch_id,signal,status FROM proc_watches WHERE watcher_pid=? AND key=?`, w.Pid, a.Key).Scan(&id, &sig, &status)
			switch {
			case err == nil:
				if status == "active" {
					oldSignal = sig
				}
				res.WatchID, res.Created = id, false
				_, err = m.st.TxExec(tx, `UPDATE proc_watches SET signal=?,process_id=?,state=?,once=?,status='active',created_at=?,expires_at=?,fired=0,error=NULL,process_cap=? WHERE watch_id=?`,
					a.Signal, a.ProcessID, state, once, t, expires, abi.CapValue(c.Identity.Process), id)
				return err
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		var n int
		if err := m.st.TxQueryRow(tx, `SELECT count(*) FROM proc_watches WHERE watcher_pid=? AND status='active'`, w.Pid).Scan(&n); err != nil {
			return err
		}
		if n >= maxWatchesPerProcess {
			return abi.E(abi.Path(w.Pid), abi.Busy, fmt.Sprintf("the process has %d watches, the most it may", n))
		}
		res.WatchID, res.Created = newID("watch_"), true
		_, err := m.st.TxExec(tx, `INSERT INTO proc_watches(watch_id,uid,watcher_pid,signal,process_id,key,state,once,created_at,expires_at,process_cap) VALUES(?,?,?,?,?,?,?,?,?,?,?)`,
			res.WatchID, w.Uid, w.Pid, a.Signal, a.ProcessID, key, state, once, t, expires, abi.CapValue(c.Identity.Process))
		return err
	})
	if err != nil {
		return nil, abi.E(abi.Path(w.Pid), err)
	}
	m.watch.mu.Lock()
	if oldSignal != "" {
		m.watch.names[oldSignal]--
	}
	m.watch.names[a.Signal]++
	m.watch.mu.Unlock()
	return res, nil
}

// sysUnwatch serves signal.unwatch: the process's watch by id, or by key.
func (m *Room) sysUnwatch(ctx context.Context, c *kernel.Caller, a *abi.UnwatchArgs) (*abi.UnwatchResult, error) {
	w, err := m.actingProcess(ctx, c, a.WatcherPid, "watcherPid")
	if err != nil {
		return nil, err
	}
	if (a.WatchID == "") == (a.Key == "") {
		return nil, abi.E(abi.Invalid, "give one of watchId and key")
	}
	n, err := m.removeWatches(ctx, `watcher_pid=? AND (watch_id=? OR key=?)`, w.Pid, a.WatchID, sql.NullString{String: a.Key, Valid: a.Key != ""})
	if err != nil {
		return nil, abi.E(abi.Path(w.Pid), err)
	}
	return &abi.UnwatchResult{Removed: n}, nil
}

// removeWatches deletes the watches where says, and forgets their names.
func (m *Room) removeWatches(ctx context.Context, where string, args ...any) (int, error) {
	var names []string
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		names = names[:0]
		rows, err := tx.Query(`DELETE FROM proc_watches WHERE `+where+` RETURNING signal,status`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name, status string
			if err := rows.Scan(&name, &status); err != nil {
				return err
			}
			if status == "active" {
				names = append(names, name)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return 0, err
	}
	m.watch.mu.Lock()
	for _, n := range names {
		m.watch.names[n]--
	}
	m.watch.mu.Unlock()
	return len(names), nil
}

// sysWatchList serves signal.list (ours): a process's watches.
func (m *Room) sysWatchList(ctx context.Context, c *kernel.Caller, a *abi.WatchListArgs) (*abi.WatchListResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	rows, err := m.st.QueryContext(ctx, `SELECT watch_id,watcher_pid,signal,coalesce(process_id,''),coalesce(key,''),coalesce(state,''),once,status,fired,coalesce(error,''),created_at,expires_at
		FROM proc_watches WHERE watcher_pid=? AND expires_at>? ORDER BY created_at,watch_id`, p.Pid, now())
	if err != nil {
		return nil, abi.E(abi.Path(p.Pid), err)
	}
	defer rows.Close()
	out := &abi.WatchListResult{Watches: []abi.Watch{}}
	for rows.Next() {
		var w abi.Watch
		var state string
		if err := rows.Scan(&w.WatchID, &w.WatcherPid, &w.Signal, &w.ProcessID, &w.Key, &state, &w.Once, &w.Status, &w.Fired, &w.Error, &w.CreatedAt, &w.ExpiresAt); err != nil {
			return nil, abi.E(abi.Path(p.Pid), err)
		}
		if state != "" {
			w.State = json.RawMessage(state)
		}
		out.Watches = append(out.Watches, w)
	}
	return out, rows.Err()
}

// fireWatches delivers s to the watches that match it: its name, the
// process its payload names, not expired, whose owner the audience
// includes.
func (m *Room) fireWatches(s watchSignal) {
	ctx := context.Background()
	pid := s.pid
	if pid == "" {
		return
	}
	t := now()
	rows, err := m.st.QueryContext(ctx, `SELECT watch_id,uid,watcher_pid,coalesce(key,''),coalesce(state,''),once,process_cap FROM proc_watches
		WHERE signal=? AND process_id=? AND status='active' AND expires_at>?`, s.name, pid, t)
	if err != nil {
		m.log.Error("ipc: signal watches", "signal", s.name, "err", err)
		return
	}
	var hits []watchHit
	for rows.Next() {
		var h watchHit
		if err := rows.Scan(&h.id, &h.uid, &h.watcher, &h.key, &h.state, &h.once, &h.cap); err != nil {
			m.log.Error("ipc: signal watches", "signal", s.name, "err", err)
			break
		}
		if s.audience.All || h.uid == 0 || slices.Contains(s.audience.Uids, h.uid) {
			hits = append(hits, h)
		}
	}
	rows.Close()
	for _, h := range hits {
		d := &watchDelivery{hit: h, sig: s, pid: pid}
		if m.takeWatchToken(h.uid) {
			m.deliverWatch(ctx, d, false)
		} else {
			m.deferWatch(d)
		}
	}
}

// takeWatchToken takes one of uid's delivery tokens, if it has one.
func (m *Room) takeWatchToken(uid uint32) bool {
	r := &m.watch.rate
	r.Lock()
	defer r.Unlock()
	b := m.bucketLocked(uid)
	if b.tokens >= 1 && len(b.waiting) == 0 {
		b.tokens--
		return true
	}
	return false
}

// bucketLocked is uid's bucket, refilled up to now (watch.rate held).
func (m *Room) bucketLocked(uid uint32) *watchBucket {
	r := &m.watch.rate
	now := r.now()
	b := r.owners[uid]
	if b == nil {
		b = &watchBucket{tokens: r.burst, at: now, byWatch: map[string]*watchDelivery{}}
		r.owners[uid] = b
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.perSec)
	b.at = now
	return b
}

// deferWatch makes d wait for its owner's bucket: it joins the delivery
// of its watch that waits already, if any (more), else waits after the
// others (at most maxDeferredPerOwner; past it, d is dropped). A flush is
// scheduled for when a token is there.
func (m *Room) deferWatch(d *watchDelivery) {
	r := &m.watch.rate
	r.Lock()
	defer r.Unlock()
	b := m.bucketLocked(d.hit.uid)
	switch w := b.byWatch[d.hit.id]; {
	case w != nil:
		w.sig, w.pid, w.more = d.sig, d.pid, w.more+1+d.more
	case len(b.waiting) >= maxDeferredPerOwner:
		if b.dropped++; b.dropped == 1 || b.dropped%1000 == 0 {
			m.log.Warn("ipc: watch deliveries over the rate are dropped", "uid", d.hit.uid, "dropped", b.dropped)
		}
		return
	default:
		b.byWatch[d.hit.id] = d
		b.waiting = append(b.waiting, d.hit.id)
	}
	m.scheduleFlushLocked(d.hit.uid, b)
}

// scheduleFlushLocked arranges for uid's waiting deliveries to go once a
// token is there (watch.rate held).
func (m *Room) scheduleFlushLocked(uid uint32, b *watchBucket) {
	r := &m.watch.rate
	if b.flushing || len(b.waiting) == 0 || r.perSec <= 0 {
		return
	}
	b.flushing = true
	wait := time.Duration((1 - b.tokens) / r.perSec * float64(time.Second))
	time.AfterFunc(max(wait, time.Millisecond), func() { m.background(func() { m.flushWatches(uid) }) })
}

// flushWatches delivers uid's waiting deliveries, as many as its bucket
// allows, and schedules the next flush for the rest.
func (m *Room) flushWatches(uid uint32) {
	ctx := context.Background()
	r := &m.watch.rate
	for {
		r.Lock()
		b := m.bucketLocked(uid)
		b.flushing = false
		if len(b.waiting) == 0 || b.tokens < 1 {
			m.scheduleFlushLocked(uid, b)
			r.Unlock()
			return
		}
		b.tokens--
		d := b.byWatch[b.waiting[0]]
		delete(b.byWatch, b.waiting[0])
		b.waiting = b.waiting[1:]
		r.Unlock()
		m.deliverWatch(ctx, d, true)
	}
}

// deliverWatch delivers d to its watcher, and ends a once-watch, or marks
// a watch failed whose delivery fails. A delivery that waited for the
// rate goes only if its watch is still active and not expired.
func (m *Room) deliverWatch(ctx context.Context, d *watchDelivery, waited bool) {
	h, s := d.hit, d.sig
	if waited {
		var n int
		if err := m.st.QueryRowContext(ctx, `SELECT count(*) FROM proc_watches WHERE watch_id=? AND status='active' AND expires_at>?`, h.id, now()).Scan(&n); err != nil || n == 0 {
			return
		}
	}
	payload, _ := json.Marshal(s.payload)
	text := fmt.Sprintf("signal %s from process %s (watch %s): %s", s.name, d.pid, h.id, payload)
	if d.more > 0 {
		text += fmt.Sprintf("\n(and %d earlier signals of this watch, held back by the rate of deliveries)", d.more)
	}
	if h.key != "" {
		text += "\nkey: " + h.key
	}
	if h.state != "" {
		text += "\nstate: " + h.state
	}
	// The delivery carries the narrowing of whoever armed the watch (its
	// key and state are theirs) and of the work the signal tells of.
	narrow, err := m.workCap(ctx, d.pid, s.conv)
	if err != nil && abi.KindOf(err) != abi.NotExist {
		m.log.Error("ipc: deliver a watch", "watch", h.id, "err", err)
		return
	}
	err = m.deliverSignal(ctx, h.watcher, event{Kind: abi.EventSignal, Text: text, Runtime: true, TraceID: h.id,
		Source: abi.EventSource{Kind: "process", Uid: h.uid, Pid: d.pid}, Cap: abi.NarrowCap(abi.CapFromValue(h.cap), narrow)})
	switch {
	case err != nil:
		if _, serr := m.st.Exec(ctx, `UPDATE proc_watches SET status='failed', error=? WHERE watch_id=?`, err.Error(), h.id); serr != nil {
			m.log.Error("ipc: recording a failed watch", "watch", h.id, "delivery", err, "err", serr)
		}
		m.watch.mu.Lock()
		m.watch.names[s.name]--
		m.watch.mu.Unlock()
	case h.once:
		if _, err := m.removeWatches(ctx, `watch_id=?`, h.id); err != nil {
			m.log.Error("ipc: ending a once-watch", "watch", h.id, "err", err)
		}
	default:
		if _, err := m.st.Exec(ctx, `UPDATE proc_watches SET fired=fired+1 WHERE watch_id=?`, h.id); err != nil {
			m.log.Error("ipc: counting a watch's delivery", "watch", h.id, "err", err)
		}
	}
}

// deliverSignal sends ev to the watcher's default conversation.
func (m *Room) deliverSignal(ctx context.Context, watcher string, ev event) error {
	p, err := m.get(ctx, watcher)
	if err != nil {
		return err
	}
	_, _, err = m.deliver(ctx, p, "default", ev)
	return err
}
