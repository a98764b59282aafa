package ns_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/fusefs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// boundTree is a small subtree to bind: /dev/probe with one view, hello.
func boundTree() vfs.Node {
	return vfs.NewDir(ns.RootMeta("/dev/probe", os.ModeDir|0o555),
		vfs.DirEntry{Name: "hello", Node: &vfs.View{Meta: ns.RootMeta("/dev/probe/hello", 0o444),
			Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) { return []byte("bound\n"), nil }}})
}

// TestBindLive9P: a subtree bound while a 9P client is attached is seen
// by that client's next walk; once unbound, it is gone from the walk and
// from its directory's listing.
func TestBindLive9P(t *testing.T) {
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	space.Bind("/dev/keep", boundTree()) // /dev exists before the probe comes and goes
	srv := &ninep.Server{Root: space.Root(), Auth: space, Logger: kerneltest.Quiet()}
	l := vfstest.ListenUnix(t)
	vfstest.Serve(t, l, func(ctx context.Context, l net.Listener) error {
		return srv.Serve(ctx, l, func(net.Conn) vfs.Peer {
			return vfs.Peer{Transport: "9p-unix", HostUID: 1001, HostGID: 1001}
		})
	})
	fsys, err := ninep.Mount("unix!"+l.Addr().String(), "alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	list := func() string {
		fid, err := fsys.Open("/dev", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fid.Close()
		ds, err := fid.Dirreadall()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range ds {
			names = append(names, d.Name)
		}
		return strings.Join(names, " ")
	}
	if _, err := fsys.Stat("/dev/probe/hello"); err == nil {
		t.Fatal("/dev/probe/hello exists before the bind")
	}
	space.Bind("/dev/probe", boundTree())
	if got := vfstest.ReadFile(t, fsys, "/dev/probe/hello"); got != "bound\n" {
		t.Fatalf("after bind: %q", got)
	}
	if got := list(); got != "keep null probe random urandom zero" {
		t.Fatalf("ls /dev after bind: %q", got)
	}
	if err := space.Unbind("/dev/probe"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("/dev/probe/hello"); err == nil {
		t.Fatal("/dev/probe/hello still there after the unbind")
	}
	if got := list(); got != "keep null random urandom zero" {
		t.Fatalf("ls /dev after unbind: %q", got)
	}
	if err := space.Unbind("/dev/probe"); err == nil {
		t.Fatal("a second unbind succeeded")
	}
}

// TestBindLiveFUSE is TestBindLive9P through a FUSE mount: the mount
// caches no entries, so a shell sees the bind and the unbind at once.
func TestBindLiveFUSE(t *testing.T) {
	vfstest.Mountable(t)
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	dir := t.TempDir()
	srv, err := fusefs.Mount(dir, space.Root(), space, fusefs.Options{Logger: kerneltest.Quiet()})
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot mount: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
		srv.Wait()
	})
	if _, _, err := vfstest.Sh(dir, `cat "$M/dev/probe/hello"`); err == nil {
		t.Fatal("/dev/probe/hello exists before the bind")
	}
	space.Bind("/dev/probe", boundTree())
	if got := vfstest.Must(t, dir, `cat "$M/dev/probe/hello"; ls "$M/dev"`); got != "bound\nnull\nprobe\nrandom\nurandom\nzero\n" {
		t.Fatalf("after bind: %q", got)
	}
	if err := space.Unbind("/dev/probe"); err != nil {
		t.Fatal(err)
	}
	if out, errs, err := vfstest.Sh(dir, `cat "$M/dev/probe/hello"`); err == nil || !strings.Contains(errs, "No such file") {
		t.Fatalf("after unbind: %q %q %v", out, errs, err)
	}
	if got := vfstest.Must(t, dir, `ls "$M/dev"`); got != "null\nrandom\nurandom\nzero\n" {
		t.Fatalf("ls /dev after unbind: %q", got)
	}
}
