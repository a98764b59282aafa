package fusefs

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"gsvfs.dev/gsvfs/vfs"
)

// countingAuth counts calls and refuses uid 7.
type countingAuth struct{ calls atomic.Int32 }

func (a *countingAuth) Authenticate(ctx context.Context, p vfs.Peer) (vfs.Cred, error) {
	a.calls.Add(1)
	if p.HostUID == 7 {
		return nil, errors.New("no")
	}
	return p, nil
}

func callerCtx(uid, gid uint32) context.Context {
	return fuse.NewContext(context.Background(), &fuse.Caller{Owner: fuse.Owner{Uid: uid, Gid: gid}, Pid: 1})
}

func TestCredCache(t *testing.T) {
	auth := &countingAuth{}
	s := &Server{auth: auth, log: slog.New(slog.DiscardHandler)}

	c, e := s.cred(callerCtx(5, 6))
	if p, ok := c.(vfs.Peer); e != 0 || !ok || p.Transport != "fuse" || p.HostUID != 5 || p.HostGID != 6 {
		t.Fatalf("cred = %v, %v", c, e)
	}
	s.cred(callerCtx(5, 6))
	if n := auth.calls.Load(); n != 1 {
		t.Errorf("%d Authenticate calls for one uid within the TTL, want 1", n)
	}
	s.cred(callerCtx(8, 6))
	if n := auth.calls.Load(); n != 2 {
		t.Errorf("%d Authenticate calls for two uids, want 2", n)
	}

	// An expired entry is asked for again.
	s.creds.Store(credKey{5, 6}, &credEntry{cred: "old", expires: time.Now().Add(-time.Millisecond)})
	if c, _ := s.cred(callerCtx(5, 6)); c == "old" {
		t.Errorf("expired cred reused")
	}
	if n := auth.calls.Load(); n != 3 {
		t.Errorf("%d Authenticate calls after expiry, want 3", n)
	}

	// Refusals are EACCES and are not cached.
	for range 2 {
		if _, e := s.cred(callerCtx(7, 7)); e != syscall.EACCES {
			t.Errorf("refused cred: errno %v, want EACCES", e)
		}
	}
	if n := auth.calls.Load(); n != 5 {
		t.Errorf("%d Authenticate calls, want 5 (refusals not cached)", n)
	}

	// No caller in the context.
	if _, e := s.cred(context.Background()); e != syscall.EACCES {
		t.Errorf("no caller: errno %v, want EACCES", e)
	}
}
