// Package kerneltest opens real kernels for tests: a fresh state
// directory with its SQLite store, set up with root and two users, alice
// (host uid 1001) and bob (host uid 1002). Tests of the namespace, the
// devices and the rooms share it instead of building their own.
package kerneltest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"gsvfs.dev/gsvfs/abi"
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
	k, err := kernel.Open(kernel.Config{StateDir: dir, Logger: Quiet()})
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
