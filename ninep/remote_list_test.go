package ninep

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// listDir is a memDir whose listings are counted, and fail while failing
// is set or wait for gate (if not nil) to close.
type listDir struct {
	*memDir
	lists   atomic.Int64
	failing atomic.Bool
	gate    chan struct{}
}

func (d *listDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	d.lists.Add(1)
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if d.failing.Load() {
		return nil, vfs.Errorf(syscall.EACCES, "permission denied: listing refused")
	}
	return d.memDir.ReadDir(ctx, cred)
}

// listTree returns a root holding the directories d0 ... d<n-1> (n at
// most 10), each holding the file f, and the file z.
func listTree(n int) (*listDir, []*listDir) {
	next := new(atomic.Uint64)
	root := &listDir{memDir: newMemDir(next, 0o777)}
	var dirs []*listDir
	for i := range n {
		d := &listDir{memDir: newMemDir(next, 0o777)}
		d.kids["f"] = &memFile{ino: next.Add(1), mode: 0o644, data: []byte("data"), mtime: fixedTime}
		root.kids[fmt.Sprintf("d%d", i)] = d
		dirs = append(dirs, d)
	}
	root.kids["z"] = &memFile{ino: next.Add(1), mode: 0o644, mtime: fixedTime}
	return root, dirs
}

// remoteOf serves root on a unix socket and returns it as a RemoteDir,
// reached through a relay: once cut is set, the relay passes on an Rread
// that carries data and ends the connection when the client's next
// message comes, which the client then sees as the connection's end where
// it waits for that message's answer.
func remoteOf(t *testing.T, root vfs.Dir, cut *atomic.Bool) *remoteDir {
	t.Helper()
	sock := serveUnix(t, &Server{Root: root, Auth: testAuth{}})
	pl := vfstest.ListenUnix(t)
	go func() {
		c, err := pl.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s, err := net.Dial("unix", sock)
		if err != nil {
			return
		}
		defer s.Close()
		var ending atomic.Bool
		go func() {
			defer s.Close()
			defer c.Close()
			for {
				m, err := readMsg(c)
				if err != nil || ending.Load() {
					return
				}
				if _, err := s.Write(m); err != nil {
					return
				}
			}
		}()
		for {
			m, err := readMsg(s)
			if err != nil {
				return
			}
			const rread = 117
			if cut.Load() && m[4] == rread && binary.LittleEndian.Uint32(m[7:]) > 0 {
				ending.Store(true)
			}
			if _, err := c.Write(m); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("unix", pl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c, err := client.NewConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := c.Attach(nil, "glenda", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Release()
	return RemoteDir(fsys, "/", RemoteOptions{}).(*remoteDir)
}

// readMsg reads one 9P message from r.
func readMsg(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	m := make([]byte, max(binary.LittleEndian.Uint32(size[:]), 7))
	copy(m, size[:])
	_, err := io.ReadFull(r, m[4:])
	return m, err
}

// names lists d through the vfs and returns the names, checking that
// every entry carries the attributes its node's Attr gives.
func names(t *testing.T, d vfs.Dir) ([]string, error) {
	t.Helper()
	ctx := context.Background()
	ents, err := d.ReadDir(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		a, err := e.Node.Attr(ctx, nil)
		if err != nil {
			t.Fatalf("attr of %s: %v", e.Name, err)
		}
		if e.Attr == nil || *e.Attr != a {
			t.Errorf("%s: the listing gives %+v, Attr %+v", e.Name, e.Attr, a)
		}
		out = append(out, e.Name)
	}
	return out, nil
}

// waitFor waits up to rpcTimeout for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(rpcTimeout); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, rpcTimeout)
		}
	}
}

// TestRemoteReadAhead: listing a directory found in its parent's fresh
// listing reads the listings of the next readAheadDirs directories ahead;
// each answers one ReadDir, unless something changed through the tree
// since it was read; a read ahead that failed is read again, and its
// error is the caller's; a ReadDir waiting for a read ahead in flight
// ends with its context.
func TestRemoteReadAhead(t *testing.T) {
	if readAheadDirs != 8 {
		t.Fatalf("readAheadDirs = %d; this test expects 8", readAheadDirs)
	}
	ctx := context.Background()
	root, dirs := listTree(10)
	dirs[3].failing.Store(true)
	dirs[4].gate = make(chan struct{})
	defer close(dirs[4].gate)
	r := remoteOf(t, root, new(atomic.Bool))
	sub := func(i int) vfs.Dir { return lookup(t, r, fmt.Sprintf("d%d", i)).(vfs.Dir) }

	// A directory reached without its parent's listing reads nothing ahead.
	if got, err := names(t, sub(5)); err != nil || !slices.Equal(got, []string{"f"}) {
		t.Fatalf("listing of d5 = %v, %v", got, err)
	}
	r.r.aheadMu.Lock()
	if len(r.r.ahead) != 0 {
		t.Errorf("%d listings read ahead of d5, want none", len(r.r.ahead))
	}
	r.r.aheadMu.Unlock()

	want := []string{"d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "z"}
	if got, err := names(t, r); err != nil || !slices.Equal(got, want) {
		t.Fatalf("listing of / = %v, %v", got, err)
	}
	if got, err := names(t, sub(0)); err != nil || !slices.Equal(got, []string{"f"}) {
		t.Fatalf("listing of d0 = %v, %v", got, err)
	}
	// d1 ... d8 are read ahead, d9 is not yet.
	for i := 1; i <= 8; i++ {
		lists := int64(1)
		if i == 5 {
			lists = 2
		}
		waitFor(t, fmt.Sprintf("d%d read ahead", i), func() bool { return dirs[i].lists.Load() == lists })
	}
	if n := dirs[9].lists.Load(); n != 0 {
		t.Errorf("d9 listed %d times, want 0", n)
	}
	// d1's listing is the one read ahead; listing d1 reads d9 ahead.
	if got, err := names(t, sub(1)); err != nil || !slices.Equal(got, []string{"f"}) {
		t.Fatalf("listing of d1 = %v, %v", got, err)
	}
	if n := dirs[1].lists.Load(); n != 1 {
		t.Errorf("d1 listed %d times at the server, want 1", n)
	}
	waitFor(t, "d9 read ahead", func() bool { return dirs[9].lists.Load() == 1 })

	// A change through the tree voids what was read ahead.
	f, h, err := sub(2).(vfs.Creator).Create(ctx, nil, "new", os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	h.Close(ctx)
	_ = f
	if got, err := names(t, sub(2)); err != nil || !slices.Equal(got, []string{"f", "new"}) {
		t.Errorf("listing of d2 after a create = %v, %v", got, err)
	}
	if n := dirs[2].lists.Load(); n != 2 {
		t.Errorf("d2 listed %d times at the server, want 2", n)
	}

	// d3's read ahead failed: it is read again, and fails for the caller.
	_, err = names(t, sub(3))
	wantErrno(t, err, syscall.EACCES, "listing refused")
	if n := dirs[3].lists.Load(); n != 2 {
		t.Errorf("d3 listed %d times at the server, want 2", n)
	}

	// d4's read ahead waits at the server: so does its ReadDir, until its
	// context ends.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	d4 := sub(4)
	go func() {
		_, err := d4.ReadDir(cctx, nil)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("ReadDir of d4 after its context ended: %v", err)
	}
}

// TestRemoteListingCut: a connection that ends while a directory is read
// is an error of the listing, not its end.
func TestRemoteListingCut(t *testing.T) {
	root, _ := listTree(2)
	cut := new(atomic.Bool)
	r := remoteOf(t, root, cut)
	d := lookup(t, r, "d0").(vfs.Dir)
	cut.Store(true)
	got, err := names(t, d)
	wantErrno(t, err, syscall.EIO, "connection lost")
	if got != nil {
		t.Errorf("listing = %v", got)
	}
}
