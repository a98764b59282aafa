package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// auditRecords flushes the pending call records and returns the log as
// root sees it.
func auditRecords(t *testing.T, k *Kernel, a abi.AuditQueryArgs) []abi.AuditRecord {
	t.Helper()
	k.audit.flush()
	res, err := Do(context.Background(), k, k.KernelCaller(), abi.SysAuditQuery, &a)
	if err != nil {
		t.Fatal(err)
	}
	return res.Records
}

// TestAuditChangeAndCall: a config set writes a change record in its own
// transaction (code 200, its duration to the change) and, having
// succeeded, no call record; a denied call is recorded with 403; reads
// are not recorded; a secret's value never reaches the digest; users
// read only their own records.
func TestAuditChangeAndCall(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	ctx := WithTrace(context.Background(), "trace-1")
	rc, ac := &Caller{Identity: root}, &Caller{Identity: alice}
	if _, err := Do(ctx, k, rc, abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/bot/token", Value: json.RawMessage(`"hunter2-secret"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(ctx, k, ac, abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/x", Value: json.RawMessage(`"1"`)}); err == nil {
		t.Fatal("alice set a system key")
	}
	if _, err := Do(ctx, k, ac, abi.SysWhoami, nil); err != nil {
		t.Fatal(err)
	}
	recs := auditRecords(t, k, abi.AuditQueryArgs{Trace: "trace-1"})
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, r.Kind+":"+r.Syscall+":"+r.Username)
		if strings.Contains(r.Args, "hunter2") {
			t.Errorf("a secret reached the digest: %s", r.Args)
		}
		if r.Syscall == abi.SysWhoami.Name {
			t.Errorf("a read was audited: %+v", r)
		}
	}
	want := []string{"change:sys.config.set:root", "call:sys.config.set:alice"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("records %v, want %v", kinds, want)
	}
	if recs[0].Code != 200 || recs[0].DurUs <= 0 || recs[1].Code != 403 || recs[0].CallID == recs[1].CallID {
		t.Errorf("codes/durations/call ids: %+v", recs)
	}
	mine, err := Do(ctx, k, ac, abi.SysAuditQuery, &abi.AuditQueryArgs{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range mine.Records {
		if r.Uid != alice.Uid {
			t.Errorf("alice sees %+v", r)
		}
	}
	if _, err := Do(ctx, k, ac, abi.SysAuditVerify, nil); abi.Code(err) != 403 {
		t.Errorf("alice verify: %v", err)
	}
}

// TestAuditOneRecordACall: a call that succeeds after a change has only
// its change record; one that fails after a change has both (the call
// record with its code, the same call id); one that changes nothing has
// its call record.
func TestAuditOneRecordACall(t *testing.T) {
	k, root, _, _ := newKernel(t)
	type args struct {
		Fail   bool `json:"fail"`
		Change bool `json:"change"`
	}
	call := abi.Call[args, *struct{}]{Name: "test.audit.change", Doc: "a test call"}
	k.Register(Handle(call, func(ctx context.Context, _ *Caller, a *args) (*struct{}, error) {
		if a.Change {
			if _, err := k.Store.Exec(ctx, `INSERT INTO config(key,value) VALUES('config/test/n','1') ON CONFLICT(key) DO UPDATE SET value=value||'1'`); err != nil {
				return nil, err
			}
		}
		if a.Fail {
			return nil, abi.E(abi.Op(call.Name), abi.Offline, "failed after the change")
		}
		return &struct{}{}, nil
	}))
	rc := &Caller{Identity: root}
	for _, c := range []struct {
		name string
		args args
		want string
	}{
		{"changed, succeeded", args{Change: true}, "change:200"},
		{"changed, failed", args{Change: true, Fail: true}, "change:200 call:503"},
		{"changed nothing", args{}, "call:200"},
		{"changed nothing, failed", args{Fail: true}, "call:503"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTraceID()
			Do(WithTrace(context.Background(), tr), k, rc, call, &c.args)
			var got []string
			recs := auditRecords(t, k, abi.AuditQueryArgs{Trace: tr})
			for _, r := range recs {
				got = append(got, fmt.Sprintf("%s:%d", r.Kind, r.Code))
				if r.CallID != recs[0].CallID {
					t.Errorf("call ids differ: %+v", recs)
				}
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("records %v, want %s", got, c.want)
			}
		})
	}
}

// TestAuditVerifyFindsEdit: the chain verifies; a record edited in the
// store, or one deleted, breaks it at that record.
func TestAuditVerifyFindsEdit(t *testing.T) {
	k, root, _, _ := newKernel(t)
	ctx := context.Background()
	rc := &Caller{Identity: root}
	for i := 0; i < 5; i++ {
		if _, err := Do(ctx, k, rc, abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/n", Value: json.RawMessage(`"1"`)}); err != nil {
			t.Fatal(err)
		}
	}
	recs := auditRecords(t, k, abi.AuditQueryArgs{})
	v, err := Do(ctx, k, rc, abi.SysAuditVerify, nil)
	if err != nil || !v.Intact || v.Records != int64(len(recs)) {
		t.Fatalf("verify: %+v %v", v, err)
	}
	mid := recs[len(recs)/2].Seq
	if _, err := k.Store.Exec(ctx, `UPDATE audit_log SET uid=4242 WHERE seq=?`, mid); err != nil {
		t.Fatal(err)
	}
	v, _ = Do(ctx, k, rc, abi.SysAuditVerify, nil)
	if v.Intact || v.BadSeq != mid {
		t.Fatalf("edited record %d: verify says %+v", mid, v)
	}
	if _, err := k.Store.Exec(ctx, `DELETE FROM audit_log WHERE seq=?`, mid); err != nil {
		t.Fatal(err)
	}
	v, _ = Do(ctx, k, rc, abi.SysAuditVerify, nil)
	if v.Intact || v.BadSeq != mid+1 {
		t.Fatalf("deleted record %d: verify says %+v", mid, v)
	}
}

// TestAuditPruneKeepsChain: pruning by retention keeps an anchor, from
// which the chain still verifies.
func TestAuditPruneKeepsChain(t *testing.T) {
	k, root, _, _ := newKernel(t)
	ctx := context.Background()
	rc := &Caller{Identity: root}
	for i := 0; i < 3; i++ {
		Do(ctx, k, rc, abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/n", Value: json.RawMessage(`"1"`)})
	}
	before := auditRecords(t, k, abi.AuditQueryArgs{})
	k.audit.retention.Store(int64(time.Nanosecond))
	time.Sleep(2 * time.Millisecond) // records must be older than the cutoff
	k.audit.prune()
	Do(ctx, k, rc, abi.SysConfigSet, &abi.ConfigSetArgs{Key: "config/n", Value: json.RawMessage(`"2"`)})
	after := auditRecords(t, k, abi.AuditQueryArgs{})
	if len(after) == 0 || after[0].Seq <= before[len(before)-1].Seq {
		t.Fatalf("pruned: before %d records, after %+v", len(before), after)
	}
	if v, _ := Do(ctx, k, rc, abi.SysAuditVerify, nil); !v.Intact {
		t.Fatalf("after prune: %+v", v)
	}
}

// TestDigestArgs: contents and secrets keep only their size.
func TestDigestArgs(t *testing.T) {
	cases := []struct {
		args any
		want string
	}{
		{&abi.ConfigSetArgs{Key: "config/ai/api_key", Value: json.RawMessage(`"sk-123"`)}, `{"key":"config/ai/api_key","value":"<6 bytes>"}`},
		{&abi.FSWriteArgs{Path: "/home/a", Content: "secret file"}, `"content":"<11 bytes>"`},
		{&abi.TokenCreateArgs{Kind: "user"}, `"kind":"user"`},
	}
	for _, c := range cases {
		got := digestArgs(c.args).text
		if !strings.Contains(got, c.want) {
			t.Errorf("digest %T = %s, want %s in it", c.args, got, c.want)
		}
	}
}

// FuzzParseSince: any text parses to a positive duration or an error,
// never a panic.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"1h", "30m", "2d", "1w", "1h30m", "-1h", "0", "d", "99999999999d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseSince(s)
		if err == nil && d <= 0 {
			t.Fatalf("ParseSince(%q) = %v", s, d)
		}
	})
}
