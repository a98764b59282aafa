// Package kerneltest opens real kernels for tests: a fresh state
// directory with its SQLite store, set up with root and two users, alice
// (host uid 1001) and bob (host uid 1002). Tests of the namespace, the
// devices and the rooms share it instead of building their own.
//
// With GSV_TEST_STORE=postgres in the environment, every kernel it opens
// keeps its state in a fresh Postgres database instead (internal/pgtest):
// the same tests then run on the Postgres store (make test-postgres).
package kerneltest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/internal/pgtest"
	"gsvfs.dev/gsvfs/kernel"
)

// Env is an open kernel and its users' identities.
type Env struct {
	K                *kernel.Kernel
	Root, Alice, Bob *kernel.Identity
}

// Open opens a kernel on t.TempDir(), sets it up with root as the first
// user and adds alice and bob; the kernel closes when the test ends.
func Open(t testing.TB) *Env {
	t.Helper()
	return OpenAt(t, t.TempDir())
}

// OpenAt is Open on the state directory dir. A state already set up is
// opened as it is (its users are looked up, not added again).
func OpenAt(t testing.TB, dir string) *Env {
	t.Helper()
	k, err := kernel.Open(kernel.Config{StateDir: dir, Store: Store(t, dir), Logger: Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	ctx := context.Background()
	if err := k.EnsureSetup(ctx, "root", 0); err != nil {
		t.Fatal(err)
	}
	e := &Env{K: k, Root: Host(t, k, 0)}
	for _, u := range []struct {
		name string
		host int
	}{{"alice", 1001}, {"bob", 1002}} {
		if _, err := k.Authenticate(ctx, kernel.Peer{Transport: "9p-unix", HostUID: u.host}); err == nil {
			continue
		}
		host := u.host
		if _, err := kernel.Do(ctx, k, &kernel.Caller{Identity: e.Root}, abi.SysUserAdd, &abi.UserAddArgs{Username: u.name, HostUID: &host}); err != nil {
			t.Fatal(err)
		}
	}
	e.Alice, e.Bob = Host(t, k, 1001), Host(t, k, 1002)
	return e
}

// Host returns the identity of the GSV user mapped to host uid.
func Host(t testing.TB, k *kernel.Kernel, uid int) *kernel.Identity {
	t.Helper()
	id, err := k.Authenticate(context.Background(), kernel.Peer{Transport: "9p-unix", HostUID: uid})
	if err != nil {
		t.Fatalf("host uid %d: %v", uid, err)
	}
	return id
}

// Caller returns the caller of a syscall made by id.
func Caller(id *kernel.Identity) *kernel.Caller { return &kernel.Caller{Identity: id} }

// Quiet is a logger that drops everything.
func Quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Postgres reports whether the tests run on Postgres (GSV_TEST_STORE=postgres).
func Postgres() bool { return os.Getenv("GSV_TEST_STORE") == "postgres" }

var (
	storesMu sync.Mutex
	stores   = map[string]string{} // state dir -> its Postgres database; guarded by storesMu
)

// Store returns the kernel.Config.Store of the state directory dir: ""
// (its SQLite file) unless the tests run on Postgres; then a new Postgres
// database the first time dir is opened (dropped when t ends), the same
// one when it is opened again.
func Store(t testing.TB, dir string) string {
	t.Helper()
	if !Postgres() {
		return ""
	}
	storesMu.Lock()
	defer storesMu.Unlock()
	if dsn, ok := stores[dir]; ok {
		return dsn
	}
	dsn := pgtest.New(t)
	stores[dir] = dsn
	t.Cleanup(func() {
		storesMu.Lock()
		delete(stores, dir)
		storesMu.Unlock()
	})
	return dsn
}
