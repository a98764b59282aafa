package ns

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

const (
	auditPath    = "/var/log/gsv/audit"
	auditDirPath = "/var/log/gsv/audit.d"
	// auditRotate is how many records (of the whole log's numbering) an
	// audit log file holds before it rotates: it starts empty again at
	// each multiple of auditRotate, as a log logrotate truncates.
	auditRotate = 1000
)

// bindAudit binds /var/log/gsv/audit (root: every record) and
// /var/log/gsv/audit.d/<user> (each user's own records, theirs to read):
// logs that only grow between rotations, so tail -f follows them.
func (s *Space) bindAudit() {
	s.Bind(auditPath, s.auditView(RootMeta(auditPath, 0o400), nil))
	s.Bind(auditDirPath, &vfs.FuncDir{Meta: RootMeta(auditDirPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			c := CallerOf(cred, "")
			res, err := kernel.Do(ctx, s.k, c, abi.SysUserList, nil)
			if err != nil {
				return nil, err
			}
			var out []vfs.DirEntry
			for _, u := range res.Users {
				if c.IsRoot() || u.Uid == c.Uid {
					out = append(out, vfs.DirEntry{Name: u.Username, Node: s.userAuditView(ctx, u.Uid, u.Username)})
				}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			u, err := s.k.UserByName(ctx, name)
			if err != nil {
				return nil, vfs.ErrNotExist
			}
			return s.userAuditView(ctx, u.Uid, name), nil
		}})
}

func (s *Space) userAuditView(ctx context.Context, uid uint32, name string) *vfs.View {
	m := UserMeta(ctx, s.k, uid, name)
	return s.auditView(m.At(auditDirPath+"/"+name, 0o400), &uid)
}

// auditView renders the records of uid (nil: all) since the log's last
// rotation, one line each, oldest first.
func (s *Space) auditView(m *Meta, uid *uint32) *vfs.View {
	return &vfs.View{Meta: m, Grows: true,
		RenderAt: func(ctx context.Context, cred vfs.Cred) ([]byte, time.Time, error) {
			c := CallerOf(cred, "")
			last, err := kernel.Do(ctx, s.k, c, abi.SysAuditQuery, &abi.AuditQueryArgs{Uid: uid, Limit: 1, Last: true})
			if err != nil || len(last.Records) == 0 {
				return nil, time.Time{}, err
			}
			top := last.Records[0].Seq
			base := (top - 1) / auditRotate * auditRotate
			res, err := kernel.Do(ctx, s.k, c, abi.SysAuditQuery, &abi.AuditQueryArgs{Uid: uid, After: base, Limit: auditRotate})
			if err != nil {
				return nil, time.Time{}, err
			}
			var b []byte
			for _, r := range res.Records {
				b = AppendAuditLine(b, &r)
			}
			return b, time.UnixMilli(last.Records[0].Time), nil
		}}
}

// AppendAuditLine appends r to b as one line of an audit log: its time
// (UTC), seq, kind, user(uid), then key=value fields (empty ones left
// out), the code and the args digest last.
func AppendAuditLine(b []byte, r *abi.AuditRecord) []byte {
	b = time.UnixMilli(r.Time).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = fmt.Appendf(b, " seq=%d %s %s %s(%d)", r.Seq, r.Kind, r.Syscall, r.Username, r.Uid)
	kv := func(k, v string) {
		if v != "" {
			b = append(b, ' ')
			b = append(b, k...)
			b = append(b, '=')
			if strings.ContainsAny(v, " \"\n") {
				b = strconv.AppendQuote(b, v)
			} else {
				b = append(b, v...)
			}
		}
	}
	kv("role", r.Role)
	kv("token", r.TokenID)
	kv("pid", r.Pid)
	kv("conv", r.Conv)
	kv("target", r.Target)
	if r.Kind == "call" {
		b = fmt.Appendf(b, " code=%d dur=%s", r.Code, time.Duration(r.DurUs)*time.Microsecond)
	}
	kv("trace", r.Trace)
	kv("call", r.CallID)
	kv("args", r.Args)
	return append(b, '\n')
}
