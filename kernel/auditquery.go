package kernel

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

func (k *Kernel) auditSyscalls() []Syscall {
	return []Syscall{
		Handle(abi.SysAuditQuery, k.auditQuery),
		Handle(abi.SysAuditVerify, k.auditVerify),
		Handle(abi.SysStatus, k.status),
	}
}

// auditQueryMax bounds the records one sys.audit.query answers.
const auditQueryMax = 1000

// ParseSince reads a --since duration: a Go duration ("90s", "1h30m")
// or a whole number of days or weeks ("2d", "1w"). It refuses negative
// and empty durations.
func ParseSince(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var d time.Duration
	if unit := s[len(s)-1]; unit == 'd' || unit == 'w' {
		n, err := strconv.ParseUint(s[:len(s)-1], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("duration %q: want a number of days (2d) or weeks (1w), or a Go duration (1h30m)", s)
		}
		day := 24 * time.Hour
		if unit == 'w' {
			day *= 7
		}
		if n > uint64((1<<63-1)/int64(day)) {
			return 0, fmt.Errorf("duration %q: too long", s)
		}
		d = time.Duration(n) * day
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("duration %q: want a Go duration (1h30m) or days (2d)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q: must be positive", s)
	}
	return d, nil
}

// sinceTime reads a query's Since: a duration before now, or an RFC
// 3339 time.
func sinceTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := ParseSince(s)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-d), nil
}

const auditCols = `seq,at,kind,call_id,uid,username,role,token_id,pid,conv,syscall,target,code,dur_us,trace,args,prev,hash`

func scanAudit(rows *sql.Rows) (abi.AuditRecord, error) {
	var r abi.AuditRecord
	err := rows.Scan(&r.Seq, &r.Time, &r.Kind, &r.CallID, &r.Uid, &r.Username, &r.Role, &r.TokenID, &r.Pid, &r.Conv,
		&r.Syscall, &r.Target, &r.Code, &r.DurUs, &r.Trace, &r.Args, &r.Prev, &r.Hash)
	return r, err
}

// auditQuery serves sys.audit.query: the records matching a, oldest
// first; a user other than root sees only their own.
func (k *Kernel) auditQuery(ctx context.Context, c *Caller, a *abi.AuditQueryArgs) (*abi.AuditQueryResult, error) {
	where := []string{"seq > ?"}
	args := []any{a.After}
	switch {
	case !c.IsRoot() && !c.isKernel():
		if a.Uid != nil && *a.Uid != c.Uid {
			return nil, abi.E(abi.Permission, "a user reads only their own audit records")
		}
		where, args = append(where, "uid = ?"), append(args, c.Uid)
	case a.Uid != nil:
		where, args = append(where, "uid = ?"), append(args, *a.Uid)
	}
	if a.Pid != "" {
		where, args = append(where, "pid = ?"), append(args, a.Pid)
	}
	if a.Trace != "" {
		where, args = append(where, "trace = ?"), append(args, a.Trace)
	}
	if a.Syscall != "" {
		if strings.HasSuffix(a.Syscall, ".") {
			where, args = append(where, "substr(syscall, 1, ?) = ?"), append(args, len(a.Syscall), a.Syscall)
		} else {
			where, args = append(where, "syscall = ?"), append(args, a.Syscall)
		}
	}
	if a.Since != "" {
		t, err := sinceTime(a.Since, time.Now())
		if err != nil {
			return nil, abi.E(abi.Invalid, err)
		}
		where, args = append(where, "at >= ?"), append(args, t.UnixMilli())
	}
	limit := a.Limit
	if limit <= 0 || limit > auditQueryMax {
		limit = auditQueryMax
	}
	args = append(args, limit)
	order := "seq"
	if a.Last {
		order = "seq DESC"
	}
	out := &abi.AuditQueryResult{Records: []abi.AuditRecord{}}
	err := k.Store.eachRow(ctx, func(rows *sql.Rows) error {
		r, err := scanAudit(rows)
		out.Records = append(out.Records, r)
		return err
	}, `SELECT `+auditCols+` FROM audit_log WHERE `+strings.Join(where, " AND ")+` ORDER BY `+order+` LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	if a.Last {
		slices.Reverse(out.Records)
	}
	return out, nil
}

// auditVerify serves sys.audit.verify: it walks the chain from the first
// kept record (whose prev must be the anchor pruning left) and
// recomputes every hash.
func (k *Kernel) auditVerify(ctx context.Context, c *Caller, _ *abi.AuditVerifyArgs) (*abi.AuditVerifyResult, error) {
	rt, err := k.Store.BeginRead(ctx)
	if err != nil {
		return nil, err
	}
	defer rt.Rollback()
	var aseq int64
	var ahash string
	if err := rt.QueryRowContext(ctx, `SELECT seq, hash FROM audit_anchor WHERE id=1`).Scan(&aseq, &ahash); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	rows, err := rt.QueryContext(ctx, `SELECT `+auditCols+` FROM audit_log ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := &abi.AuditVerifyResult{Intact: true}
	prevSeq, prev := aseq, ahash
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return nil, err
		}
		if res.Records == 0 {
			res.First = r.Seq
		}
		res.Records++
		res.Last = r.Seq
		if !res.Intact {
			continue
		}
		switch {
		case r.Seq != prevSeq+1:
			res.Intact, res.BadSeq, res.Reason = false, r.Seq, fmt.Sprintf("record %d follows record %d: records are missing", r.Seq, prevSeq)
		case r.Prev != prev:
			res.Intact, res.BadSeq, res.Reason = false, r.Seq, fmt.Sprintf("record %d does not hold the hash of record %d", r.Seq, prevSeq)
		case auditHash(&r) != r.Hash:
			res.Intact, res.BadSeq, res.Reason = false, r.Seq, fmt.Sprintf("record %d was changed: its hash is not its contents'", r.Seq)
		}
		prevSeq, prev = r.Seq, r.Hash
	}
	return res, rows.Err()
}

// prune deletes the records older than the retention, keeping the last
// deleted record's seq and hash as the chain's anchor.
func (a *auditLog) prune() {
	cutoff := time.Now().Add(-time.Duration(a.retention.Load())).UnixMilli()
	err := a.k.Store.Tx(context.Background(), func(tx *Tx) error {
		var seq sql.NullInt64
		if err := tx.QueryRow(`SELECT MAX(seq) FROM audit_log WHERE at < ?`, cutoff).Scan(&seq); err != nil || !seq.Valid {
			return err
		}
		var hash string
		if err := tx.QueryRow(`SELECT hash FROM audit_log WHERE seq = ?`, seq.Int64).Scan(&hash); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO audit_anchor(id, seq, hash) VALUES(1, ?, ?)
			ON CONFLICT(id) DO UPDATE SET seq=excluded.seq, hash=excluded.hash`, seq.Int64, hash); err != nil {
			return err
		}
		_, err := tx.Exec(`DELETE FROM audit_log WHERE seq <= ?`, seq.Int64)
		return err
	})
	if err != nil && !errors.Is(err, ErrStoreClosed) {
		a.k.log.Warn("audit: pruning", "err", err)
	}
}

// argDigest is what an audit record keeps of a call's args.
type argDigest struct {
	text, pid, conv, target string
}

// digestMax bounds an args digest; digestStr bounds each string in it.
const (
	digestMax = 1024
	digestStr = 120
)

// contentWords are the arg names whose values are contents (files,
// messages, code, environment): a digest keeps their size only.
var contentWords = []string{"content", "contents", "data", "text", "message", "body", "value", "input", "stdin",
	"code", "prompt", "script", "oldstring", "newstring", "old", "new", "replacement", "payload", "env", "headers",
	"result", "messages", "bytes", "patch", "diff"}

// digestJSON summarises a call's args for its audit record: the JSON of
// the top-level fields, with every secret (SensitiveKey) and every
// content (contentWords) replaced by its size, long strings cut, nested
// objects as their keys, arrays as their length.
func digestJSON(args any) argDigest {
	var d argDigest
	if args == nil {
		return d
	}
	raw, err := json.Marshal(args)
	if err != nil {
		d.text = fmt.Sprintf(`"<%T>"`, args)
		return d
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		d.text = summarise("", raw, 0)
		return d
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, key := range keys {
		v := top[key]
		switch strings.ToLower(key) {
		case "pid":
			json.Unmarshal(v, &d.pid)
		case "conversation", "conversationid", "cid", "conv":
			json.Unmarshal(v, &d.conv)
		case "target":
			json.Unmarshal(v, &d.target)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(key)
		b.Write(kb)
		b.WriteByte(':')
		b.WriteString(summarise(key, v, 0))
		if b.Len() > digestMax {
			b.Truncate(digestMax)
			b.WriteString(`…"}`)
			d.text = b.String()
			return d
		}
	}
	b.WriteByte('}')
	d.text = b.String()
	return d
}

// summarise renders one value of an args digest (see digestArgs).
func summarise(key string, v json.RawMessage, depth int) string {
	return summariseAs(hiddenKey(key), v, depth)
}

// hiddenKey reports whether an arg named key keeps only its size: a
// secret or a content.
func hiddenKey(key string) bool {
	return SensitiveKey(key) || slices.Contains(contentWords, strings.ToLower(key))
}

// summariseAs is summarise for a key known to be hidden or not.
func summariseAs(hidden bool, v json.RawMessage, depth int) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return "null"
	}
	switch v[0] {
	case '"':
		var s string
		json.Unmarshal(v, &s)
		if hidden {
			return fmt.Sprintf(`"<%d bytes>"`, len(s))
		}
		if len(s) > digestStr {
			s = s[:digestStr] + "…"
		}
		out, _ := json.Marshal(s)
		return string(out)
	case '[':
		var items []json.RawMessage
		json.Unmarshal(v, &items)
		return fmt.Sprintf(`"<%d items>"`, len(items))
	case '{':
		var m map[string]json.RawMessage
		json.Unmarshal(v, &m)
		if hidden || depth > 0 {
			return fmt.Sprintf(`"<%d keys>"`, len(m))
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b bytes.Buffer
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			b.WriteString(summarise(k, m[k], depth+1))
		}
		b.WriteByte('}')
		return b.String()
	}
	if hidden {
		return `"<hidden>"`
	}
	return string(v) // a number or a boolean
}
