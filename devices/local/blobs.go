package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// Blobs: the content-addressed store of large exec outputs, under
// <state>/blobs/sha256/<hex>. A blob is held by the sessions whose
// receipts refer to it; whoever may read one of those sessions (its
// owner, root) may read the blob; when the last holder is forgotten the
// blob is removed. Sessions do not outlive the daemon, so the store is
// emptied at start.

// errInlineTooLarge is why require_inline cannot be met.
var errInlineTooLarge = errors.New("inline_required_too_large")

// previewBytes is how many first bytes of a blob its receipt carries.
const previewBytes = 512

// blobStore is the device's blob store.
type blobStore struct {
	dir string // <state>/blobs

	mu      sync.Mutex
	holders map[string]map[string]uint32 // hex -> session id -> its owner's uid
	sizes   map[string]int64             // hex -> its size, counted for each holder
	use     outputUse                    // each user's kept output
}

// open makes (and empties) the store under stateDir.
func (b *blobStore) open(stateDir string) error {
	b.dir = filepath.Join(stateDir, "blobs")
	os.RemoveAll(b.dir)
	for _, d := range []string{"sha256", "tmp"} {
		if err := os.MkdirAll(filepath.Join(b.dir, d), 0o700); err != nil {
			return fmt.Errorf("blob store: %w", err)
		}
	}
	b.holders = map[string]map[string]uint32{}
	b.sizes = map[string]int64{}
	return nil
}

// tmpDir is where captures spill.
func (b *blobStore) tmpDir() string { return filepath.Join(b.dir, "tmp") }

// hold records that session sid (of uid) holds blob ref, of size bytes,
// which uid's kept output already counts (its capture reserved them);
// a second hold of the same blob by sid gives them back.
func (b *blobStore) hold(ref, sid string, uid uint32, size int64) {
	h := strings.TrimPrefix(ref, "sha256:")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holders[h] == nil {
		b.holders[h] = map[string]uint32{}
	}
	if _, ok := b.holders[h][sid]; ok {
		b.use.release(uid, size)
		return
	}
	b.holders[h][sid] = uid
	b.sizes[h] = size
}

// release forgets session sid's holds, gives their sizes back to their
// owner's kept output, and removes the blobs no session holds any more.
func (b *blobStore) release(sid string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for h, m := range b.holders {
		uid, ok := m[sid]
		if !ok {
			continue
		}
		delete(m, sid)
		b.use.release(uid, b.sizes[h])
		if len(m) == 0 {
			delete(b.holders, h)
			delete(b.sizes, h)
			os.Remove(filepath.Join(b.dir, "sha256", h))
		}
	}
}

// parseRef returns the hex of a "sha256:<hex>" ref (or a bare hex).
func parseRef(ref string) (string, error) {
	h := strings.TrimPrefix(ref, "sha256:")
	if len(h) != 64 {
		return "", abi.E(abi.Invalid, "blob_ref: want sha256:<64 hex digits>")
	}
	if _, err := hex.DecodeString(h); err != nil || strings.ToLower(h) != h {
		return "", abi.E(abi.Invalid, "blob_ref: want sha256:<64 lowercase hex digits>")
	}
	return h, nil
}

// openBlob opens blob ref for who: a 404 unless a session who may read
// holds it.
func (b *blobStore) openBlob(who Who, ref string) (*os.File, error) {
	h, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	ok := false
	for _, uid := range b.holders[h] {
		if uid == who.Uid || who.IsRoot() {
			ok = true
		}
	}
	b.mu.Unlock()
	if !ok {
		return nil, abi.E(abi.Path("sha256:"+h), abi.NotExist, "no such blob")
	}
	f, err := os.Open(filepath.Join(b.dir, "sha256", h))
	if err != nil {
		return nil, abi.E(abi.Path("sha256:"+h), abi.NotExist, "no such blob")
	}
	return f, nil
}

// read reads up to limit bytes of blob ref from off for who.
func (b *blobStore) read(who Who, ref string, off, limit int64) ([]byte, error) {
	f, err := b.openBlob(who, ref)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if off < 0 || limit < 0 {
		return nil, abi.E(abi.Invalid, "offset and limit may not be negative")
	}
	buf, err := io.ReadAll(io.NewSectionReader(f, off, limit))
	if err != nil {
		return nil, abi.E(abi.Other, err)
	}
	return buf, nil
}

// BlobRead is process.blob.read: a window of a blob who may read (at
// most 16 MiB; default the first 1 MiB).
func (x *Sessions) BlobRead(ctx context.Context, who Who, a *abi.BlobReadArgs) (*abi.BlobReadResult, error) {
	limit := a.Limit
	if limit == 0 {
		limit = 1 << 20
	}
	limit = min(limit, 16<<20)
	f, err := x.blobs.openBlob(who, a.BlobRef)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, abi.E(abi.Other, err)
	}
	buf, err := x.blobs.read(who, a.BlobRef, a.Offset, limit)
	if err != nil {
		return nil, err
	}
	return &abi.BlobReadResult{Bytes: buf, SizeBytes: fi.Size()}, nil
}

// BlobOpen is process.blob.open (internal): blob ref opened for reading,
// for /var/blobs/sha256/<hex>.
func (x *Sessions) BlobOpen(ctx context.Context, who Who, a *abi.BlobReadArgs) (*os.File, error) {
	return x.blobs.openBlob(who, a.BlobRef)
}

// BlobList is the blobs who may read, as hex digests.
func (x *Sessions) BlobList(ctx context.Context, who Who, _ *abi.SessionListArgs) ([]string, error) {
	x.blobs.mu.Lock()
	defer x.blobs.mu.Unlock()
	var out []string
	for h, m := range x.blobs.holders {
		for _, uid := range m {
			if uid == who.Uid || who.IsRoot() {
				out = append(out, h)
				break
			}
		}
	}
	return out, nil
}

// capture keeps one stream of an exec: in memory up to inlineRequired,
// then in a temporary file, up to max bytes and as much as its user's
// kept-output quota leaves (then it counts and drops). Its writes never
// fail, so the command never sees an error from them.
type capture struct {
	dir       string
	max       int64
	mem       []byte
	f         *os.File
	size      int64 // bytes kept
	truncated bool
	err       error
	h         hash.Hash

	use       *outputUse // the kept output it counts in (nil: none)
	uid       uint32
	limit     int64 // uid's quota (0: none)
	overQuota bool  // it dropped bytes for the quota
	kept      bool  // its bytes became a blob's hold
}

// newCapture makes a capture of at most max bytes, spilling to dir; the
// bytes it keeps count in use, for uid, under limit.
func newCapture(dir string, max int64, use *outputUse, uid uint32, limit int64) *capture {
	return &capture{dir: dir, max: max, h: sha256.New(), use: use, uid: uid, limit: limit}
}

// Write keeps what fits.
func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	want := min(int64(len(p)), max(c.max-c.size, 0))
	got := want
	if c.use != nil {
		got = c.use.reserve(c.uid, want, c.limit)
		if got < want {
			c.overQuota = true
		}
	}
	if int64(len(p)) > got {
		p = p[:got]
		c.truncated = true
	}
	if len(p) == 0 {
		return n, nil
	}
	c.h.Write(p)
	c.size += int64(len(p))
	if c.f == nil && int64(len(c.mem))+int64(len(p)) <= inlineRequired {
		c.mem = append(c.mem, p...)
		return n, nil
	}
	if c.f == nil && c.err == nil {
		c.f, c.err = os.CreateTemp(c.dir, "out-")
		if c.err == nil {
			_, c.err = c.f.Write(c.mem)
			c.mem = nil
		}
	}
	if c.err == nil {
		_, c.err = c.f.Write(p)
	}
	return n, nil
}

// head is up to n first bytes kept.
func (c *capture) head(n int) []byte {
	if c.f == nil {
		return c.mem[:min(n, len(c.mem))]
	}
	buf := make([]byte, n)
	m, _ := c.f.ReadAt(buf, 0)
	return buf[:m]
}

// discard drops what was kept, and gives its bytes back to the quota
// unless they became a blob's.
func (c *capture) discard() {
	if c.f != nil {
		c.f.Close()
		os.Remove(c.f.Name())
		c.f = nil
	}
	c.mem = nil
	if c.use != nil && !c.kept {
		c.use.release(c.uid, c.size)
	}
	c.use = nil
}

// output turns c into an exec receipt's output as mode asks: inline if it
// is small enough (text if UTF-8), else a blob (never under
// require_inline: errInlineTooLarge). It returns the inline bytes too,
// and the blob's ref if it made one. Nothing written: no output.
func (b *blobStore) output(c *capture, mode string) (*abi.ExecOutput, string, []byte, error) {
	defer c.discard()
	if c.err != nil {
		return nil, "", nil, fmt.Errorf("keeping the output: %w", c.err)
	}
	if c.size == 0 {
		return nil, "", []byte{}, nil
	}
	limit := int64(inlineAuto)
	if mode == abi.OutputRequireInline {
		limit = inlineRequired
	}
	if c.size <= limit && c.f == nil && !c.truncated {
		if utf8.Valid(c.mem) {
			return &abi.ExecOutput{InlineText: &abi.InlineText{Text: string(c.mem)}}, "", c.mem, nil
		}
		return &abi.ExecOutput{InlineBytes: &abi.InlineBytes{Bytes: c.mem}}, "", c.mem, nil
	}
	if mode == abi.OutputRequireInline {
		return nil, "", nil, errInlineTooLarge
	}
	if c.f == nil {
		f, err := os.CreateTemp(c.dir, "out-")
		if err != nil {
			return nil, "", nil, err
		}
		c.f = f
		if _, err := f.Write(c.mem); err != nil {
			return nil, "", nil, err
		}
	}
	sum := hex.EncodeToString(c.h.Sum(nil))
	preview := c.head(previewBytes)
	if err := c.f.Sync(); err != nil {
		return nil, "", nil, err
	}
	if err := os.Rename(c.f.Name(), filepath.Join(b.dir, "sha256", sum)); err != nil {
		return nil, "", nil, err
	}
	c.f.Close()
	c.f = nil
	c.kept = true // its bytes are the blob's, counted until its holds go
	ref := "sha256:" + sum
	return &abi.ExecOutput{Blob: &abi.BlobOutput{BlobRef: ref, SizeBytes: c.size, PreviewBytes: preview, Truncated: c.truncated}}, ref, preview, nil
}
