package kernel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// The audit log (docs/operations.md, "The audit log").
//
// The dispatcher makes an audit scope for every audited syscall (see
// abi.Audited) and puts it in the call's context. Store.Tx finds it there:
// each transaction the call commits gets a "change" record, appended by
// the commit hook (one INSERT for the batch's records) just before the
// commit, so the change and its record commit or roll back together (a
// failed append fails the batch). When the call returns, its "call"
// record (result code, duration) is queued and appended with the others
// pending by the flusher's commit within auditFlushDelay (or by the next
// commit once auditMaxPending wait): a crash in that window can lose the
// call records of the calls that just returned, never a change's record.
//
// Records are hash-chained: each holds the hash of the one before it,
// and its own hash is the SHA-256 of its fields (auditHash). Every
// append runs on the store's committer, one at a time, and reads the
// chain's head in its transaction, so the chain follows the
// commit order.

// auditKey is the context key of a call's audit scope.
type auditKey struct{}

// auditFlushDelay bounds how long a call record waits for a transaction
// to ride in.
const auditFlushDelay = 100 * time.Millisecond

// auditMaxPending bounds the call records waiting in memory; past it the
// flusher commits at once.
const auditMaxPending = 4096

// defaultAuditRetention is how long records are kept when
// config/audit/retention is not set.
const defaultAuditRetention = 90 * 24 * time.Hour

// auditLog is the kernel's audit log: the pending call records, the
// settings, and the goroutine that flushes and prunes (stopped by stop).
type auditLog struct {
	k *Kernel

	reads     atomic.Bool  // config/audit/reads: audit reads too
	off       atomic.Bool  // config/audit/enabled=false: audit nothing
	retention atomic.Int64 // nanoseconds

	mu       sync.Mutex // guards pending
	pending  []abi.AuditRecord
	npending atomic.Int64 // len(pending), read without mu
	flushing atomic.Int32 // flushes under way: commits take the pending records

	kick    chan struct{} // a record is pending
	reload  chan struct{} // a config/audit/ key changed
	quit    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// auditScope is one audited call in flight: its record's fields, and
// whether it has returned (a transaction committed later by work the
// call started is not the call's).
type auditScope struct {
	log   *auditLog
	start time.Time
	rec   abi.AuditRecord
	done  atomic.Bool
	// changed: a change record of the call has committed; a call that
	// then succeeds has no call record (its change record says it all).
	changed atomic.Bool
}

func newAuditLog(k *Kernel) *auditLog {
	a := &auditLog{k: k, kick: make(chan struct{}, 1), reload: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	a.retention.Store(int64(defaultAuditRetention))
	a.loadSettings()
	k.Store.setCommitHook(commitHook{ready: a.ready, run: a.flushInto})
	k.Observe(func(ev *Event, _ Audience) {
		if ev.Signal != abi.SigConfigChange.Name {
			return
		}
		if cc, ok := ev.Payload.(abi.ConfigChanged); ok && len(cc.Key) > len("config/audit/") && cc.Key[:len("config/audit/")] == "config/audit/" {
			select {
			case a.reload <- struct{}{}:
			default:
			}
		}
	})
	go a.loop()
	return a
}

// wants reports whether calls of def are audited now.
func (a *auditLog) wants(def *syscallDef) bool {
	if a == nil || def == nil || def.desc == nil || a.off.Load() {
		return false
	}
	return abi.Audited(def.desc, a.reads.Load())
}

// begin makes the scope of a call of def by c with args.
func (a *auditLog) begin(ctx context.Context, c *Caller, def *syscallDef, args any, trace string, start time.Time) *auditScope {
	sc := &auditScope{log: a, start: start}
	r := &sc.rec
	r.CallID = newCallID()
	r.Syscall = def.name
	r.Trace = trace
	if c != nil && c.Identity != nil {
		r.Uid, r.Username, r.Role, r.Pid = c.Uid, c.Username, c.Role, c.Pid
		if c.lease != nil {
			r.TokenID = c.lease.tokenID
		}
	}
	d := digestArgs(args)
	r.Args = d.text
	if r.Pid == "" {
		r.Pid = d.pid
	}
	r.Conv, r.Target = d.conv, d.target
	return sc
}

// end queues the call record of sc's call, which returned err after dur,
// unless the call succeeded and a change record of it has committed.
func (sc *auditScope) end(err error, dur time.Duration) {
	sc.done.Store(true)
	if err == nil && sc.changed.Load() {
		return
	}
	r := sc.rec
	r.Kind = "call"
	r.Time = time.Now().UnixMilli()
	r.Code = 200
	if err != nil {
		r.Code = abi.Code(err)
	}
	r.DurUs = dur.Microseconds()
	sc.log.queue(r)
}

// denied queues the call record of a call the dispatcher refused.
func (a *auditLog) denied(ctx context.Context, c *Caller, def *syscallDef, args any, trace string, err error) {
	if _, raw := args.(json.RawMessage); raw {
		args = nil // refused before its args were decoded
	}
	sc := a.begin(ctx, c, def, args, trace, time.Now())
	sc.end(err, 0)
}

func (a *auditLog) queue(r abi.AuditRecord) {
	a.mu.Lock()
	a.pending = append(a.pending, r)
	n := len(a.pending)
	a.npending.Store(int64(n))
	a.mu.Unlock()
	if n == 1 || n >= auditMaxPending {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// wrap returns fn followed, in the same transaction, by the change
// record of sc's call (while the call has not returned).
func (sc *auditScope) wrap(fn func(*Tx) error) func(*Tx) error {
	return func(tx *Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if sc.done.Load() {
			return nil
		}
		now := time.Now()
		tx.audit = append(tx.audit, sc.rec)
		r := &tx.audit[len(tx.audit)-1]
		r.Kind = "change"
		r.Time = now.UnixMilli()
		// Its change has committed (the commit hook appended it with
		// the batch's other records, in this transaction: if it cannot,
		// nothing of the batch commits) by the time Store.Tx returns.
		r.Code = 200
		r.DurUs = now.Sub(sc.start).Microseconds()
		tx.scopes = append(tx.scopes, sc)
		return nil
	}
}

// auditFrom returns the audit scope ctx carries, or nil.
func auditFrom(ctx context.Context) *auditScope {
	if ctx == nil {
		return nil
	}
	sc, _ := ctx.Value(auditKey{}).(*auditScope)
	return sc
}

// flushInto is the store's commit hook: it appends the change records of
// tx's batch and the pending call records to tx, the transaction about to
// commit, and returns what to do once the commit is known (on failure,
// the call records wait again; the change records went with their
// changes).
func (a *auditLog) flushInto(tx *Tx) (func(committed bool), error) {
	var pending []abi.AuditRecord
	if a.ready() {
		a.mu.Lock()
		pending = a.pending
		a.pending = nil
		a.npending.Store(0)
		a.mu.Unlock()
	}
	recs := tx.audit
	if len(pending) > 0 {
		recs = append(recs, pending...)
	}
	tx.audit = nil
	if len(recs) == 0 {
		return nil, nil
	}
	if err := appendAudit(tx, recs); err != nil {
		a.requeue(pending)
		slog.Warn("audit: appending records", "err", err)
		return nil, err
	}
	if len(pending) == 0 {
		return nil, nil
	}
	return func(committed bool) {
		if !committed {
			a.requeue(pending)
		}
	}, nil
}

// ready reports whether the pending call records go in the commit under
// way: when the flusher asks (its own commit, or any that comes first),
// or when auditMaxPending of them wait. Other commits carry only their
// own change records, so a caller's commit does not pay for the call
// records of the calls before it: those are appended together.
func (a *auditLog) ready() bool {
	n := a.npending.Load()
	return n >= auditMaxPending || (n > 0 && a.flushing.Load() > 0)
}

func (a *auditLog) requeue(recs []abi.AuditRecord) {
	if len(recs) == 0 {
		return
	}
	for i := range recs {
		recs[i].Seq, recs[i].Prev, recs[i].Hash = 0, "", ""
	}
	a.mu.Lock()
	a.pending = append(recs, a.pending...)
	a.npending.Store(int64(len(a.pending)))
	a.mu.Unlock()
}

// loop flushes pending call records within auditFlushDelay, reloads the
// settings when they change and prunes old records hourly, until stop.
func (a *auditLog) loop() {
	defer close(a.done)
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	a.prune()
	for {
		select {
		case <-a.quit:
			return
		case <-a.reload:
			a.loadSettings()
		case <-prune.C:
			a.prune()
		case <-a.kick:
			t := time.NewTimer(auditFlushDelay)
			select {
			case <-a.quit:
				t.Stop()
				return
			case <-t.C:
			}
			a.flush()
		}
	}
}

// flush commits the pending call records in a transaction of their own
// (the commit hook appends them).
func (a *auditLog) flush() {
	if a.npending.Load() == 0 {
		return
	}
	a.flushing.Add(1)
	defer a.flushing.Add(-1)
	if err := a.k.Store.Tx(context.Background(), func(*Tx) error { return nil }); err != nil && !errors.Is(err, ErrStoreClosed) {
		slog.Warn("audit: flushing call records", "err", err)
	}
}

// stop ends the loop and commits what is pending: the kernel calls it
// before it closes the store.
func (a *auditLog) stop() {
	a.stopped.Do(func() {
		close(a.quit)
		<-a.done
		a.flush()
	})
}

// loadSettings reads config/audit/{enabled,reads,retention}.
func (a *auditLog) loadSettings() {
	get := func(key string) string {
		var v string
		if err := a.k.Store.QueryRowContext(context.Background(), `SELECT value FROM config WHERE key=?`, key).Scan(&v); err != nil {
			return ""
		}
		return v
	}
	a.off.Store(isFalse(get("config/audit/enabled")))
	a.reads.Store(isTrue(get("config/audit/reads")))
	if d, err := ParseSince(get("config/audit/retention")); err == nil && d > 0 {
		a.retention.Store(int64(d))
	} else {
		a.retention.Store(int64(defaultAuditRetention))
	}
}

func isTrue(v string) bool  { return v == "true" || v == "on" || v == "yes" || v == "1" }
func isFalse(v string) bool { return v == "false" || v == "off" || v == "no" || v == "0" }

// appendAudit appends recs to the chain in tx, in order: their seq and
// prev follow the chain's head (the last record, or the anchor pruning
// left), their hashes are their own.
func appendAudit(tx *Tx, recs []abi.AuditRecord) error {
	s := tx.s
	// The head of the chain is cached while no batch has been lost since
	// it was read (Store.lost); appends run on the committer alone.
	if h := s.auditHead; h.valid && h.lost == s.lost.Load() {
		return insertAudit(tx, recs, h.seq, h.hash)
	}
	var seq int64
	var prev string
	err := s.TxQueryRow(tx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
	if errors.Is(err, sql.ErrNoRows) {
		err = s.TxQueryRow(tx, `SELECT seq, hash FROM audit_anchor WHERE id=1`).Scan(&seq, &prev)
		if errors.Is(err, sql.ErrNoRows) {
			seq, prev, err = 0, "", nil
		}
	}
	if err != nil {
		return err
	}
	return insertAudit(tx, recs, seq, prev)
}

// auditChunk is the most records one INSERT carries (18 values each).
const auditChunk = 32

// auditInserts[n] is the INSERT of n records.
var auditInserts = func() (q [auditChunk + 1]string) {
	const head = `INSERT INTO audit_log(seq,at,kind,call_id,uid,username,role,token_id,pid,conv,syscall,target,code,dur_us,trace,args,prev,hash) VALUES`
	const row = `(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`
	for n := 1; n <= auditChunk; n++ {
		q[n] = head + row + strings.Repeat(","+row, n-1)
	}
	return q
}()

// insertAudit appends recs after the record seq whose hash is prev, a
// chunk of them per statement, and caches the last as the chain's head.
func insertAudit(tx *Tx, recs []abi.AuditRecord, seq int64, prev string) error {
	s := tx.s
	lost := s.lost.Load()
	for i := range recs {
		r := &recs[i]
		seq++
		r.Seq, r.Prev, r.Hash = seq, prev, ""
		r.Hash = auditHash(r)
		prev = r.Hash
	}
	args := make([]any, 0, 18*min(len(recs), auditChunk))
	for len(recs) > 0 {
		n := min(len(recs), auditChunk)
		args = args[:0]
		for i := range recs[:n] {
			r := &recs[i]
			args = append(args, r.Seq, r.Time, r.Kind, r.CallID, r.Uid, r.Username, r.Role, r.TokenID, r.Pid, r.Conv,
				r.Syscall, r.Target, r.Code, r.DurUs, r.Trace, r.Args, r.Prev, r.Hash)
		}
		if _, err := s.TxExec(tx, auditInserts[n], args...); err != nil {
			s.auditHead.valid = false
			return err
		}
		recs = recs[n:]
	}
	s.auditHead = chainHead{valid: true, seq: seq, hash: prev, lost: lost}
	return nil
}

// chainHead is the audit chain's last record as the committer last
// appended it, valid while Store.lost is still lost.
type chainHead struct {
	valid bool
	seq   int64
	hash  string
	lost  uint64
}

// auditHash is the hash of r: SHA-256 of its fields but Hash, in the
// order of abi.AuditRecord, each as its length (uvarint) then its bytes
// (numbers as varints), so no two records share an encoding.
func auditHash(r *abi.AuditRecord) string {
	var buf [512]byte
	b := buf[:0]
	b = binary.AppendVarint(b, r.Seq)
	b = binary.AppendVarint(b, r.Time)
	b = appendField(b, r.Kind)
	b = appendField(b, r.CallID)
	b = binary.AppendUvarint(b, uint64(r.Uid))
	b = appendField(b, r.Username)
	b = appendField(b, r.Role)
	b = appendField(b, r.TokenID)
	b = appendField(b, r.Pid)
	b = appendField(b, r.Conv)
	b = appendField(b, r.Syscall)
	b = appendField(b, r.Target)
	b = binary.AppendVarint(b, int64(r.Code))
	b = binary.AppendVarint(b, r.DurUs)
	b = appendField(b, r.Trace)
	b = appendField(b, r.Args)
	b = appendField(b, r.Prev)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// callIDs numbers the calls from a random start: call ids are unique in
// the process and, with 64 random bits at each start, across restarts.
var callIDs = func() (n atomic.Uint64) {
	var b [8]byte
	rand.Read(b[:])
	n.Store(binary.LittleEndian.Uint64(b[:]))
	return
}()

func newCallID() string {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], callIDs.Add(1))
	var b [18]byte
	b[0], b[1] = 'c', '_'
	hex.Encode(b[2:], n[:])
	return string(b[:])
}

// AuditOn reports whether the audit log records syscalls now: false once
// config/audit/enabled=false has been loaded (a read; benchmarks wait on
// it after setting the key).
func (k *Kernel) AuditOn() bool { return k.audit != nil && !k.audit.off.Load() }
