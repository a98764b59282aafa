package devices

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"

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
// The floors of that round trip are measured beside them: an fs.read the
// device refuses at once (a path with "..": no file touched; refused-us),
// and a bare 9P request (Tstat) on a fid of the device's tree held open,
// on the same connection (bare-us). Means and medians (-med-us) of each.
func BenchmarkChannelRead(b *testing.B) {
	e := newDevEnv(b)
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "small.txt"), []byte("a small file\n"), 0o644)
	startSubDevice(b, e, "bench", e.nodeToken(b, e.Alice, "bench"), dir)
	fid, err := e.r.remote("bench").fsys.Open("fs", plan9.OREAD)
	if err != nil {
		b.Fatal(err)
	}
	defer fid.Close()
	alice := kerneltest.Caller(e.Alice)
	read := []byte(`{"call":"fs.read","args":{"target":"bench","path":"small.txt"}}`)
	who := []byte(`{"call":"sys.whoami"}`)
	refused := []byte(`{"call":"fs.read","args":{"target":"bench","path":"../small.txt"}}`)
	ctx := context.Background()
	ops := []struct {
		name string
		op   func() error
		took []time.Duration
	}{
		{name: "read", op: func() error {
			if out := e.K.Serve(ctx, alice, read); !strings.Contains(string(out), "a small file") {
				return fmt.Errorf("fs.read: %s", out)
			}
			return nil
		}},
		{name: "whoami", op: func() error {
			if out := e.K.Serve(ctx, alice, who); !strings.Contains(string(out), `"ok":true`) {
				return fmt.Errorf("sys.whoami: %s", out)
			}
			return nil
		}},
		{name: "refused", op: func() error {
			if out := e.K.Serve(ctx, alice, refused); !strings.Contains(string(out), "may not contain") {
				return fmt.Errorf("fs.read ../small.txt: %s", out)
			}
			return nil
		}},
		{name: "bare", op: func() error {
			_, err := fid.Stat()
			return err
		}},
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ops {
			o := &ops[(i+j)%len(ops)]
			t0 := time.Now()
			if err := o.op(); err != nil {
				b.Fatal(err)
			}
			o.took = append(o.took, time.Since(t0))
		}
	}
	b.StopTimer()
	sum := make([]time.Duration, len(ops))
	for j := range ops {
		o := &ops[j]
		for _, d := range o.took {
			sum[j] += d
		}
		b.ReportMetric(float64(sum[j].Nanoseconds())/1000/float64(b.N), o.name+"-us")
		slices.Sort(o.took)
		b.ReportMetric(float64(o.took[len(o.took)/2].Nanoseconds())/1000, o.name+"-med-us")
	}
	b.ReportMetric(float64(sum[0])/float64(sum[1]), "read/whoami")
	b.ReportMetric(float64(sum[0])/float64(sum[3]), "read/bare")
}
