package fusefs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// countingBacked is a vfs.Backed whose handles count the Reads that reach
// them: with FUSE passthrough the kernel reads the file itself and none
// do.
type countingBacked struct {
	*vfs.Backed
	reads atomic.Int64
}

func (c *countingBacked) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	h, err := c.Backed.Open(ctx, cred, flags)
	if err != nil {
		return nil, err
	}
	return &countingHandle{Handle: h, bf: h.(vfs.BackingFiler), n: &c.reads}, nil
}

type countingHandle struct {
	vfs.Handle
	bf vfs.BackingFiler
	n  *atomic.Int64
}

var _ vfs.BackingFiler = (*countingHandle)(nil)

func (h *countingHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	h.n.Add(1)
	return h.Handle.Read(ctx, p, off)
}

func (h *countingHandle) BackingFile() *os.File { return h.bf.BackingFile() }

// backedTree is a root with one backed file, "backed", whose opens get the
// real file at the path set with use.
type backedTree struct {
	root vfs.Dir
	file *countingBacked
	mu   sync.Mutex
	path string
}

func newBackedTree() *backedTree {
	t := &backedTree{}
	t.file = &countingBacked{Backed: &vfs.Backed{
		Meta: meta("/backed", false, 0o444),
		OpenFile: func(ctx context.Context, cred vfs.Cred) (*os.File, error) {
			t.mu.Lock()
			p := t.path
			t.mu.Unlock()
			return os.Open(p)
		},
	}}
	t.root = vfs.NewDir(meta("/", true, 0o755), vfs.DirEntry{Name: "backed", Node: t.file})
	return t
}

func (t *backedTree) use(path string) {
	t.mu.Lock()
	t.path = path
	t.mu.Unlock()
}

// mountRoot mounts root on a temporary directory until the test ends.
// FUSEFS_TEST_DEBUG=1 logs every FUSE request.
func mountRoot(t *testing.T, root vfs.Dir) string {
	t.Helper()
	vfstest.Mountable(t)
	dir := t.TempDir()
	srv, err := Mount(dir, root, testAuth{}, Options{Logger: vfstest.Logger(t), Debug: os.Getenv("FUSEFS_TEST_DEBUG") != ""})
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
	return dir
}

// writeLines writes n numbered lines starting with prefix to a new file in
// dir and returns its path and content.
func writeLines(t *testing.T, dir, prefix string, n int) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		b.WriteString(prefix)
		b.WriteString(strings.Repeat(" line", 20))
		b.WriteString(" ")
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString("\n")
	}
	p := filepath.Join(dir, prefix)
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, b.Bytes()
}

// TestBacked: a backed file read with cat through the mount is its real
// file's content, with FUSE passthrough when the daemon is root (no read
// reaches the tree); it reports its file's size, which follows appends.
func TestBacked(t *testing.T) {
	tree := newBackedTree()
	src, want := writeLines(t, t.TempDir(), "a", 20000) // ~2 MB
	tree.use(src)
	mnt := mountRoot(t, tree.root)
	out := filepath.Join(t.TempDir(), "out")
	vfstest.Must(t, mnt, `cat "$M/backed" > `+out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
		t.Fatalf("cat read %d bytes, want %d", len(got), len(want))
	}
	if os.Geteuid() == 0 {
		if n := tree.file.reads.Load(); n != 0 {
			t.Errorf("%d reads reached the tree: passthrough was not used", n)
		}
	}
	if got := strings.TrimSpace(vfstest.Must(t, mnt, `stat -c %s "$M/backed"`)); got != strconv.Itoa(len(want)) {
		t.Errorf("size %s, want %d", got, len(want))
	}
	got, err := os.ReadFile(filepath.Join(mnt, "backed"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadFile: %d bytes, want %d (%v)", len(got), len(want), err)
	}
	if _, errs, err := vfstest.Sh(mnt, `echo x >> "$M/backed"`); err == nil || !strings.Contains(errs, "Permission denied") {
		t.Errorf("writing backed: err %v, stderr %q", err, errs)
	}
	// Appended to while open: an open reader sees the new whole lines.
	f, err := os.Open(filepath.Join(mnt, "backed"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := io.ReadAll(f); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("read %d bytes, want %d (%v)", len(b), len(want), err)
	}
	w, err := os.OpenFile(src, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("appended\n")
	w.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(want))+9 {
		t.Errorf("fstat after append: %v (%v), want size %d", fi.Size(), err, len(want)+9)
	}
	if b, err := io.ReadAll(f); err != nil || string(b) != "appended\n" {
		t.Errorf("read after append %q (%v)", b, err)
	}
}

// TestBackedStale: while an open of the node holds one file (passthrough
// registers it as the inode's backing file), an open that gets another
// file must read that other file, not the backing one.
func TestBackedStale(t *testing.T) {
	tree := newBackedTree()
	dir := t.TempDir()
	a, wantA := writeLines(t, dir, "a", 5000)
	b, wantB := writeLines(t, dir, "b", 7000)
	tree.use(a)
	mnt := mountRoot(t, tree.root)
	path := filepath.Join(mnt, "backed")
	readAll := func(f *os.File) []byte {
		t.Helper()
		var out []byte
		buf := make([]byte, 64<<10)
		for off := int64(0); ; {
			n, err := f.ReadAt(buf, off)
			out = append(out, buf[:n]...)
			off += int64(n)
			if errors.Is(err, io.EOF) || (err == nil && n == 0) {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	f1, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	if got := readAll(f1); !bytes.Equal(got, wantA) {
		t.Fatalf("first open read %d bytes, want %d", len(got), len(wantA))
	}
	tree.use(b) // the content is now another file (as after a compaction)
	before := tree.file.reads.Load()
	f2, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(f2); !bytes.Equal(got, wantB) {
		t.Fatalf("second open read %d bytes, want the new file's %d (prefix %.40q)", len(got), len(wantB), got)
	}
	if os.Geteuid() == 0 && tree.file.reads.Load() == before {
		t.Errorf("the second open was not served by Read")
	}
	// cat too, while f1 still holds the old backing file.
	out := filepath.Join(t.TempDir(), "out")
	vfstest.Must(t, mnt, `cat "$M/backed" > `+out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, wantB) {
		t.Fatalf("cat read %d bytes, want %d", len(got), len(wantB))
	}
	// The first open still reads its own file.
	if got := readAll(f1); !bytes.Equal(got, wantA) {
		t.Fatalf("first open re-read %d bytes, want %d", len(got), len(wantA))
	}
	f1.Close()
	f2.Close()
	// Once every open of the old file is released (RELEASE is
	// asynchronous), a new open registers the new file and uses
	// passthrough again.
	deadline := time.Now().Add(time.Minute)
	for {
		before := tree.file.reads.Load()
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, wantB) {
			t.Fatalf("read %d bytes, want %d (%v)", len(got), len(wantB), err)
		}
		if os.Geteuid() != 0 || tree.file.reads.Load() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("passthrough not used again after the old opens were released")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBackedNoPassthrough: when the kernel refuses the backing file (here
// a file on another FUSE mount: stacked too deep), go-fuse serves the open
// without passthrough, and the binding must then use direct I/O and Read,
// not a cached open of a size-0 file (empty reads).
func TestBackedNoPassthrough(t *testing.T) {
	_, other := mountTree(t)
	src := filepath.Join(other, "data", "src")
	_, want := writeLines(t, t.TempDir(), "c", 3000)
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	tree := newBackedTree()
	tree.use(src)
	mnt := mountRoot(t, tree.root)
	for range 2 {
		out := filepath.Join(t.TempDir(), "out")
		vfstest.Must(t, mnt, `cat "$M/backed" > `+out)
		if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
			t.Fatalf("cat read %d bytes, want %d", len(got), len(want))
		}
	}
	if tree.file.reads.Load() == 0 {
		t.Errorf("no read reached the tree: the kernel took a file on a FUSE mount as a backing file?")
	}
}
