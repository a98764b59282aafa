package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestWorkspaceMake: fs.workspace.make makes /workspaces/<id> owned by
// its caller, 0700: its maker writes in it, another user neither lists
// nor writes it, another user's id is a 409, a bad id a 400, and the
// owner is kept across a restart.
func TestWorkspaceMake(t *testing.T) {
	k, _, alice, bob := newKernel(t)
	ctx := context.Background()
	as := func(id *kernel.Identity) *kernel.Caller { return &kernel.Caller{Identity: id} }
	dir, err := kernel.Do(ctx, k.Kernel, as(alice), abi.FsWorkspaceMake, &abi.WorkspaceMakeArgs{ID: "w1"})
	if err != nil || dir != "/workspaces/w1" {
		t.Fatalf("make: %q %v", dir, err)
	}
	if _, err := kernel.Do(ctx, k.Kernel, as(alice), abi.FsWorkspaceMake, &abi.WorkspaceMakeArgs{ID: "w1"}); err != nil {
		t.Fatalf("make again by its owner: %v", err)
	}
	for _, tc := range []struct {
		who  *kernel.Identity
		id   string
		code int
		text string
	}{
		{bob, "w1", 409, "another user's workspace"},
		{alice, "../home", 400, "a workspace id"},
		{alice, "A", 400, "a workspace id"},
		{alice, "", 400, "a workspace id"},
		{alice, "-x", 400, "a workspace id"},
		{alice, strings.Repeat("a", 65), 400, "a workspace id"},
	} {
		_, err := kernel.Do(ctx, k.Kernel, as(tc.who), abi.FsWorkspaceMake, &abi.WorkspaceMakeArgs{ID: tc.id})
		if abi.Code(err) != tc.code || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("make %q: %v, want %d %q", tc.id, err, tc.code, tc.text)
		}
	}
	check := func(k *env) {
		t.Helper()
		if r := frame(t, k, alice, `{"type":"req","id":"1","call":"fs.write","args":{"path":"/workspaces/w1/a.txt","content":"hi"}}`); !r.OK || asMap(r.Data)["ok"] != true {
			t.Fatalf("alice writes in her workspace: %+v", r)
		}
		if r := frame(t, k, bob, `{"type":"req","id":"1","call":"fs.write","args":{"path":"/workspaces/w1/b.txt","content":"hi"}}`); r.OK && asMap(r.Data)["ok"] == true {
			t.Fatalf("bob writes in alice's workspace: %+v", r)
		}
		if r := frame(t, k, bob, `{"type":"req","id":"1","call":"fs.read","args":{"path":"/workspaces/w1/a.txt"}}`); r.OK && asMap(r.Data)["ok"] == true {
			t.Fatalf("bob reads alice's workspace: %+v", r)
		}
	}
	check(k)
	check(reopen(t, k))
}

// TestWorkspaceRemove: fs.workspace.remove removes a workspace's
// directory, its files and a link in it (not what the link names), and
// its owner record: another user's is a 403 that removes nothing, a bad
// id a 400, one not there a 404; the id may then be made again by
// anyone.
func TestWorkspaceRemove(t *testing.T) {
	k, _, alice, bob := newKernel(t)
	ctx := context.Background()
	as := func(id *kernel.Identity) *kernel.Caller { return &kernel.Caller{Identity: id} }
	if _, err := kernel.Do(ctx, k.Kernel, as(alice), abi.FsWorkspaceMake, &abi.WorkspaceMakeArgs{ID: "w1"}); err != nil {
		t.Fatal(err)
	}
	if r := frame(t, k, alice, `{"type":"req","id":"1","call":"fs.write","args":{"path":"/workspaces/w1/d/a.txt","content":"hi"}}`); !r.OK {
		t.Fatalf("write: %+v", r)
	}
	outside := filepath.Join(k.dataPath, "home", "alice", "keep.txt")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(k.dataPath, "workspaces", "w1", "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who  *kernel.Identity
		id   string
		code int
	}{{bob, "w1", 403}, {alice, "../home", 400}, {alice, "nosuch", 404}} {
		if _, err := kernel.Do(ctx, k.Kernel, as(tc.who), abi.FsWorkspaceRemove, &abi.WorkspaceMakeArgs{ID: tc.id}); abi.Code(err) != tc.code {
			t.Errorf("remove %q: %v, want %d", tc.id, err, tc.code)
		}
	}
	if _, err := os.Stat(filepath.Join(k.dataPath, "workspaces", "w1", "d", "a.txt")); err != nil {
		t.Fatalf("a refused remove removed files: %v", err)
	}
	if _, err := kernel.Do(ctx, k.Kernel, as(alice), abi.FsWorkspaceRemove, &abi.WorkspaceMakeArgs{ID: "w1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(k.dataPath, "workspaces", "w1")); !os.IsNotExist(err) {
		t.Fatalf("the directory: %v", err)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Fatalf("the link's target: %q %v", b, err)
	}
	if _, err := kernel.Do(ctx, k.Kernel, as(bob), abi.FsWorkspaceMake, &abi.WorkspaceMakeArgs{ID: "w1"}); err != nil {
		t.Fatalf("bob makes the id again: %v", err)
	}
}
