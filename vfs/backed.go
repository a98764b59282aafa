package vfs

import (
	"context"
	"errors"
	"io"
	"os"
)

// BackingFiler is a Handle whose content is exactly a real, read-only
// file, from offset 0 to its end: reading the handle at any offset reads
// the file at that offset. A transport may let the operating system read
// the file directly instead of calling Read (the FUSE binding uses FUSE
// passthrough); Read must give the same bytes. The file belongs to the
// handle: the caller must not close it, move its offset or keep it after
// the handle is closed.
//
// The file may grow while the handle is open (its owner appends whole
// records to it), so a reader may see more than there was at open, as with
// a log being written; it never shrinks below what the owner completed.
type BackingFiler interface {
	BackingFile() *os.File
}

// Backed is a read-only synthetic file whose content is a real file the
// tree's owner keeps (a rendering cached on disk): each open asks OpenFile
// for that file, opened for reading, and the handle serves it with ReadAt
// and offers it as a BackingFiler. The identity check is the open: which
// file an open gets is decided there (a later open may get another file),
// and reads are the file's. Its size is that of the file an open would
// get now (Attr asks OpenFile), so a reader that follows the size (tail -f)
// sees what the owner adds.
type Backed struct {
	Meta
	// OpenFile returns the file to serve to cred, opened read-only; the
	// handle closes it.
	OpenFile func(ctx context.Context, cred Cred) (*os.File, error)
}

var _ File = (*Backed)(nil)

// Attr implements Node: the Meta's attributes, with the size and mtime of
// the file an open by cred would get now (its owner sets the file's mtime
// to when the content last changed). A cred that may not read the file, a
// file that cannot be had, or a context made by WithoutContent reports the
// Meta's.
func (b *Backed) Attr(ctx context.Context, cred Cred) (Attr, error) {
	a, err := b.Meta.Attr(ctx, cred)
	if err != nil || !ContentWanted(ctx) || b.Meta.Access(ctx, cred, WantRead) != nil {
		return a, err
	}
	f, err := b.OpenFile(ctx, cred)
	if err != nil {
		return a, nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		a.Size, a.Mtime = fi.Size(), fi.ModTime()
	}
	return a, nil
}

// Open implements File. Opening for writing fails with EACCES.
func (b *Backed) Open(ctx context.Context, cred Cred, flags int) (Handle, error) {
	if err := openRead(ctx, b, cred, flags); err != nil {
		return nil, err
	}
	f, err := b.OpenFile(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &backedHandle{f: f}, nil
}

// backedHandle is an open Backed file.
type backedHandle struct{ f *os.File }

var _ BackingFiler = (*backedHandle)(nil)

// Read reads the file at off; the end of the file is 0, nil.
func (h *backedHandle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, Errorf(22 /* EINVAL */, "negative offset")
	}
	n, err := h.f.ReadAt(p, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if n > 0 {
		return n, nil
	}
	return 0, err
}

func (h *backedHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, ErrReadOnly
}

func (h *backedHandle) Close(ctx context.Context) error { return h.f.Close() }

// BackingFile implements BackingFiler.
func (h *backedHandle) BackingFile() *os.File { return h.f }
