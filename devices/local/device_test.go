package local_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"gsvfs.dev/gsvfs/kernel"
)

// A user's home is made in the transaction that adds the user: a home
// that cannot be made fails the add, and the user is not there.
func TestHomeOnUserAdd(t *testing.T) {
	k, root, _, _ := newKernel(t)
	ctx := context.Background()
	rc := &kernel.Caller{Identity: root}
	if _, err := k.Call(ctx, rc, "sys.user.add", json.RawMessage(`{"username":"carl"}`)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(k.dataPath, "home", "carl")); err != nil || !fi.IsDir() {
		t.Fatalf("carl's home: %v", err)
	}
	for _, u := range []string{"root", "alice", "bob"} {
		if _, err := os.Stat(filepath.Join(k.dataPath, "home", u)); err != nil {
			t.Fatalf("%s's home: %v", u, err)
		}
	}
	// /home is a file now: no home can be made, and no user is added.
	home := filepath.Join(k.dataPath, "home")
	if err := os.Rename(home, home+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(home, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Call(ctx, rc, "sys.user.add", json.RawMessage(`{"username":"dave"}`)); err == nil {
		t.Fatal("dave was added without a home")
	}
	if _, err := k.UserByName(ctx, "dave"); err == nil {
		t.Fatal("dave exists after a failed add")
	}
}
