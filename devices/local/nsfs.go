package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The fs.* tools on paths outside the data tree (/etc, /sys, /proc, /dev,
// ...) act on the namespace as the caller, as a transport would: the path
// is walked from the namespace root with the caller's identity as the
// credential, each directory on the way must be searchable, and the nodes'
// own checks (Meta.Access at open) decide the rest. A read of a view
// renders it; a write to a ctl file runs its lines.

// walk returns the namespace node at the clean absolute path p, walked as
// who.
func (d *Device) walk(ctx context.Context, who Who, p string) (vfs.Node, error) {
	var n vfs.Node = d.nsRoot()
	for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
		if name == "" {
			continue
		}
		dir, ok := n.(vfs.Dir)
		if !ok {
			return nil, abi.E(abi.Path(p), abi.NotExist, syscall.ENOTDIR)
		}
		if m, ok := dir.(vfs.Meta); ok {
			if err := m.Access(ctx, who.Identity, vfs.WantExec); err != nil {
				return nil, accessErr(p, err)
			}
		}
		next, err := dir.Lookup(ctx, who.Identity, name)
		if err == nil && next == nil {
			err = vfs.ErrNotExist
		}
		if err != nil {
			return nil, abi.E(abi.Path(p), err)
		}
		n = next
	}
	return n, nil
}

// nsRead is fs.read of the namespace path p: a directory's listing or a
// file's numbered lines.
func (d *Device) nsRead(ctx context.Context, who Who, p string, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	n, err := d.walk(ctx, who, p)
	if err != nil {
		return nil, err
	}
	if dir, ok := n.(vfs.Dir); ok {
		if m, ok := dir.(vfs.Meta); ok {
			if err := m.Access(ctx, who.Identity, vfs.WantRead); err != nil {
				return nil, accessErr(p, err)
			}
		}
		ents, err := dir.ReadDir(ctx, who.Identity)
		if err != nil {
			return nil, abi.E(abi.Path(p), err)
		}
		files, dirs := []string{}, []string{}
		for _, e := range ents {
			if _, isDir := e.Node.(vfs.Dir); isDir {
				dirs = append(dirs, e.Name)
			} else {
				files = append(files, e.Name)
			}
		}
		return &abi.FSReadResult{OK: true, Dir: true, Path: p, Files: files, Directories: dirs}, nil
	}
	b, err := d.nsReadFile(ctx, who, p, n)
	if err != nil {
		return nil, err
	}
	return Numbered(p, b, int64(len(b)), a)
}

// nsReadAll returns the content of the namespace file p, read as who.
func (d *Device) nsReadAll(ctx context.Context, who Who, p string) ([]byte, error) {
	n, err := d.walk(ctx, who, p)
	if err != nil {
		return nil, err
	}
	return d.nsReadFile(ctx, who, p, n)
}

// nsReadFile reads the namespace file n (at p) to its end, or to what
// is there now for a file whose reads would wait (a stream), up to
// maxReadFile bytes.
func (d *Device) nsReadFile(ctx context.Context, who Who, p string, n vfs.Node) ([]byte, error) {
	f, ok := n.(vfs.File)
	if !ok {
		return nil, abi.E(abi.Path(p), abi.Invalid, "not a file")
	}
	flags := os.O_RDONLY
	if _, ok := n.(*vfs.Device); ok {
		// /dev/zero and the like have no end: read as their size (0)
		// says, as a tree walker reads them.
		flags |= syscall.O_NOFOLLOW
	}
	h, err := f.Open(ctx, who.Identity, flags)
	if err != nil {
		return nil, abi.E(abi.Path(p), err)
	}
	defer h.Close(ctx)
	rctx := vfs.WithNonblocking(ctx)
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		m, err := h.Read(rctx, buf, int64(len(out)))
		out = append(out, buf[:m]...)
		if len(out) > maxReadFile {
			return nil, abi.E(abi.Path(p), abi.Invalid, fmt.Sprintf("file is larger than %d bytes", maxReadFile))
		}
		if errors.Is(err, vfs.ErrWouldBlock) || (err == nil && m == 0) {
			return out, nil
		}
		if err != nil {
			return nil, abi.E(abi.Path(p), err)
		}
	}
}

// nsWrite writes content to the existing namespace file p as who: the file
// is opened for writing with truncation, written at offset 0 and closed
// (a ctl file runs the lines written; the close's error counts).
func (d *Device) nsWrite(ctx context.Context, who Who, p string, content []byte) error {
	n, err := d.walk(ctx, who, p)
	if err != nil {
		return err
	}
	f, ok := n.(vfs.File)
	if !ok {
		return abi.E(abi.Path(p), abi.Invalid, syscall.EISDIR)
	}
	h, err := f.Open(ctx, who.Identity, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return abi.E(abi.Path(p), err)
	}
	for off := 0; off < len(content); {
		m, err := h.Write(ctx, content[off:], int64(off))
		if err != nil {
			h.Close(ctx)
			return abi.E(abi.Path(p), err)
		}
		if m == 0 {
			h.Close(ctx)
			return abi.E(abi.Path(p), abi.Other, "short write")
		}
		off += m
	}
	if fl, ok := h.(vfs.Flusher); ok {
		if err := fl.Flush(ctx); err != nil {
			h.Close(ctx)
			return abi.E(abi.Path(p), err)
		}
	}
	if err := h.Close(ctx); err != nil {
		return abi.E(abi.Path(p), err)
	}
	return nil
}

// nsRemove removes the namespace node p as who, if its directory removes
// names (a vfs.Remover).
func (d *Device) nsRemove(ctx context.Context, who Who, p string) error {
	parent, name := path.Split(p)
	if name == "" {
		return abi.E(abi.Path(p), abi.Permission, "cannot delete the root")
	}
	n, err := d.walk(ctx, who, parent)
	if err != nil {
		return err
	}
	dir, ok := n.(vfs.Dir)
	if !ok {
		return abi.E(abi.Path(p), abi.NotExist, syscall.ENOTDIR)
	}
	child, err := d.walk(ctx, who, p)
	if err != nil {
		return err
	}
	rm, ok := dir.(vfs.Remover)
	if !ok {
		return abi.E(abi.Path(p), abi.Permission, "this directory's names cannot be removed")
	}
	a, err := child.Attr(vfs.WithoutContent(ctx), who.Identity) // its type only
	if err != nil {
		return abi.E(abi.Path(p), err)
	}
	if err := rm.Remove(ctx, who.Identity, name, a.Mode&fs.ModeDir != 0); err != nil {
		return abi.E(abi.Path(p), err)
	}
	return nil
}

// accessErr is the error of a refused Access on the way to p: an
// *abi.Error (which names its own path and kind) as it is, anything else
// as a 403 on p.
func accessErr(p string, err error) error {
	var ae *abi.Error
	if errors.As(err, &ae) {
		return err
	}
	return abi.E(abi.Path(p), abi.Permission, err)
}
