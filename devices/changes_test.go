package devices

import (
	"context"
	"os"
	"sync"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/vfs"
)

// TestFsChangedSignal: each change of the data tree through the
// dispatcher publishes fs.changed naming its writer: fs.write and
// fs.delete, and the mount's syscalls (a create and its writes, one
// signal for a run of writes, a rename, a mkdir, a remove); a write to a
// namespace file (a ctl) and a read publish none.
func TestFsChangedSignal(t *testing.T) {
	e, space := newSpace(t)
	ctx := context.Background()
	var mu sync.Mutex
	var got []abi.FsChanged
	e.K.Observe(func(ev *kernel.Event, a kernel.Audience) {
		if p, ok := ev.Payload.(abi.FsChanged); ok {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		}
	})
	alice := kerneltest.Caller(e.Alice)
	if r, err := kernel.Do(ctx, e.K, alice, abi.FsWrite, &abi.FSWriteArgs{Path: "~/a.txt", Content: "a"}); err != nil || !r.OK {
		t.Fatalf("fs.write: %+v %v", r, err)
	}
	if r, err := kernel.Do(ctx, e.K, kerneltest.Caller(e.Root), abi.FsWrite, &abi.FSWriteArgs{Path: "/sys/config/ctl", Content: "set config/test/x y\n"}); err != nil || !r.OK {
		t.Fatalf("ctl write: %+v %v", r, err)
	}
	if r, err := kernel.Do(ctx, e.K, alice, abi.FsRead, &abi.FSReadArgs{Path: "~/a.txt"}); err != nil || !r.OK {
		t.Fatalf("fs.read: %+v %v", r, err)
	}
	// The mount's way: nodes of the namespace, as alice.
	var n vfs.Node = space.Root()
	for _, name := range []string{"home", "alice"} {
		c, err := n.(vfs.Dir).Lookup(ctx, e.Alice, name)
		if err != nil {
			t.Fatal(err)
		}
		n = c
	}
	home := n.(vfs.Dir)
	_, h, err := home.(vfs.Creator).Create(ctx, e.Alice, "b.txt", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := h.Write(ctx, []byte("bb"), int64(2*i)); err != nil {
			t.Fatal(err)
		}
	}
	h.Close(ctx)
	if _, err := home.(vfs.Creator).Mkdir(ctx, e.Alice, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := home.(vfs.Renamer).Rename(ctx, e.Alice, "b.txt", home, "c.txt"); err != nil {
		t.Fatal(err)
	}
	if err := home.(vfs.Remover).Remove(ctx, e.Alice, "c.txt", false); err != nil {
		t.Fatal(err)
	}
	if r, err := kernel.Do(ctx, e.K, alice, abi.FsDelete, &abi.FSDeleteArgs{Path: "~/a.txt"}); err != nil || !r.OK {
		t.Fatalf("fs.delete: %+v %v", r, err)
	}
	want := []abi.FsChanged{
		{Op: "write", Path: "/home/alice/a.txt"},
		{Op: "write", Path: "/home/alice/b.txt"},
		{Op: "mkdir", Path: "/home/alice/d"},
		{Op: "rename", Path: "/home/alice/c.txt", From: "/home/alice/b.txt"},
		{Op: "remove", Path: "/home/alice/c.txt"},
		{Op: "remove", Path: "/home/alice/a.txt"},
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("signals: %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Op != w.Op || g.Path != w.Path || g.From != w.From || g.Username != "alice" || g.Uid != e.Alice.Uid {
			t.Errorf("signal %d: %+v, want %+v by alice", i, g, w)
		}
	}
}
