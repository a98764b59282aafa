package devices

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/fusefs"
	"gsvfs.dev/gsvfs/vfs/vfstest"

	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// pathFiles is how many small files TestDevicePathNoSQL reads.
const pathFiles = 1000

// TestDevicePathNoSQL: reading 1,000 small files through /dev/<id>/fs of
// a real device process makes no SQL query per file: the registry and
// the access table are the router's, in memory (the store is written
// through, never read on the way). The files are read as alice, the
// device's owner, through the vfs tree and through a FUSE mount with cat.
// On a router that asked the store (sys.device.get) at each Attr and
// Access of /dev/<id>, the reads made several queries per file.
func TestDevicePathNoSQL(t *testing.T) {
	e := newDevEnv(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	data := filepath.Join(dir, "d")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range pathFiles {
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("f%04d", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startSubDevice(t, e, "sub", e.nodeToken(t, e.Alice, "sub"), dir)
	ctx := context.Background()

	// At most this many queries for all the files: a few in the
	// background (the device's pings), none per file.
	const most = pathFiles / 20

	t.Run("VFS", func(t *testing.T) {
		before := e.K.Store.Queries()
		for i := range pathFiles {
			var n vfs.Node = e.space.Root()
			for _, name := range []string{"dev", "sub", "fs", "d", fmt.Sprintf("f%04d", i)} {
				if _, err := n.Attr(ctx, e.Alice); err != nil {
					t.Fatalf("attr on the way to %s: %v", name, err)
				}
				if m, ok := n.(vfs.Meta); ok {
					if err := m.Access(ctx, e.Alice, vfs.WantExec); err != nil {
						t.Fatalf("access on the way to %s: %v", name, err)
					}
				}
				c, err := n.(vfs.Dir).Lookup(ctx, e.Alice, name)
				if err != nil {
					t.Fatalf("lookup %s: %v", name, err)
				}
				n = c
			}
			h, err := n.(vfs.File).Open(ctx, e.Alice, os.O_RDONLY)
			if err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 64)
			k, err := h.Read(ctx, b, 0)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			h.Close(ctx)
			if want := fmt.Sprintf("file %d\n", i); string(b[:k]) != want {
				t.Fatalf("f%04d: %q, want %q", i, b[:k], want)
			}
		}
		q := e.K.Store.Queries() - before
		if q > most {
			t.Fatalf("reading %d files through /dev/sub/fs made %d SQL queries (at most %d: none per file)", pathFiles, q, most)
		}
		t.Logf("%d files read through the vfs tree: %d SQL queries", pathFiles, q)
	})

	t.Run("FUSE", func(t *testing.T) {
		vfstest.Mountable(t)
		if os.Geteuid() != 0 {
			t.Skip("reads as alice's host uid: needs root")
		}
		mnt := t.TempDir()
		os.Chmod(filepath.Dir(mnt), 0o755) // alice walks to it
		os.Chmod(mnt, 0o755)
		srv, err := fusefs.Mount(mnt, e.space.Root(), e.space, fusefs.Options{Logger: kerneltest.Quiet()})
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot mount: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			srv.Unmount()
			srv.Wait()
		})
		before, start := e.K.Store.Queries(), time.Now()
		out, errs, err := vfstest.Sh(mnt, `cd / && for f in "$M"/dev/sub/fs/d/*; do cat "$f"; done | wc -l; cat "$M"/dev/sub/fs/d/f0999`,
			"setpriv", "--reuid", "1001", "--regid", "1001", "--clear-groups")
		if err != nil {
			t.Fatalf("cat as alice: %v: %s", err, errs)
		}
		if want := fmt.Sprintf("%d\nfile 999\n", pathFiles); strings.TrimLeft(out, " ") != want {
			t.Fatalf("cat of %d files: %q, want %q", pathFiles, out, want)
		}
		// FUSE authenticates a host uid anew each second (fusefs's
		// credTTL: 4 queries), however many files are read.
		q := e.K.Store.Queries() - before
		if limit := most + 8*uint64(time.Since(start).Seconds()+1); q > limit {
			t.Fatalf("cat of %d files through /dev/sub/fs made %d SQL queries (at most %d: none per file)", pathFiles, q, limit)
		}
		t.Logf("%d files read with cat over FUSE: %d SQL queries", pathFiles, q)
	})
}

// BenchmarkChannelRead: a routed fs.read of a small file on a device
// process, as a request frame the kernel serves (kernel.Serve: the
// dispatcher, the router, the call channel, the device and back), against
// sys.whoami the same way, in the same run: the device path's own cost,
// without a client's transport (cmd/gsvfs's BenchmarkDevicePath has it;
// there the target applies). For information: whoami served in process
// costs microseconds, a routed call one round trip to another process.
func BenchmarkChannelRead(b *testing.B) {
	e := newDevEnv(b)
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "small.txt"), []byte("a small file\n"), 0o644)
	startSubDevice(b, e, "bench", e.nodeToken(b, e.Alice, "bench"), dir)
	alice := kerneltest.Caller(e.Alice)
	read := []byte(`{"call":"fs.read","args":{"target":"bench","path":"small.txt"}}`)
	who := []byte(`{"call":"sys.whoami"}`)
	ctx := context.Background()
	var tRead, tWho time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if out := e.K.Serve(ctx, alice, read); !strings.Contains(string(out), "a small file") {
			b.Fatalf("fs.read: %s", out)
		}
		t1 := time.Now()
		if out := e.K.Serve(ctx, alice, who); !strings.Contains(string(out), `"ok":true`) {
			b.Fatalf("sys.whoami: %s", out)
		}
		tRead += t1.Sub(t0)
		tWho += time.Since(t1)
	}
	b.ReportMetric(float64(tRead.Microseconds())/float64(b.N), "read-us")
	b.ReportMetric(float64(tWho.Microseconds())/float64(b.N), "whoami-us")
	b.ReportMetric(float64(tRead)/float64(tWho), "read/whoami")
}
