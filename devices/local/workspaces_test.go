package local_test

import (
	"context"
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
