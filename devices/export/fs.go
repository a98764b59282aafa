package export

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
)

// The fs.* syscalls on the device, the seed's file tools, run here on the
// exported directory: the kernel routes them, and fs.search walks and
// matches on the device, never over 9P. A path that is malformed or
// outside Root, and a write to a read-only export, fail the call (a
// frame error); the operation's own failure (no such file, a binary
// file, oldString not found) is its result's {ok:false, error}, as on the
// local device.

const (
	// maxReadFile is the largest file fs.read and fs.edit read, and
	// fs.search searches (as devices/local's).
	maxReadFile = 25 << 20
	// maxSearchMatches caps fs.search (abi.FSSearchResult).
	maxSearchMatches = 500
)

// read is fs.read: a file's numbered lines or a directory's listing.
func (e *Export) read(ctx context.Context, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	abs, rel, err := e.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	res, err := e.readAt(abs, rel, a)
	if err != nil {
		return &abi.FSReadResult{Error: err.Error()}, nil
	}
	return res, nil
}

func (e *Export) readAt(abs, rel string, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	fi, err := e.dir.Stat(rel)
	if err != nil {
		return nil, abi.E(abi.Path(abs), err)
	}
	if fi.IsDir() {
		ents, err := e.readDir(rel)
		if err != nil {
			return nil, abi.E(abi.Path(abs), err)
		}
		files, dirs := []string{}, []string{}
		for _, ent := range ents {
			switch {
			case ent.mode.IsDir():
				dirs = append(dirs, ent.name)
			case ent.mode.IsRegular():
				files = append(files, ent.name)
			}
		}
		return &abi.FSReadResult{OK: true, Dir: true, Path: abs, Files: files, Directories: dirs}, nil
	}
	b, err := e.readFile(abs, rel, fi)
	if err != nil {
		return nil, err
	}
	return local.Numbered(abs, b, fi.Size(), a)
}

// dirEnt is a directory entry, a symbolic link by its target's type (a
// link that leads outside Root or nowhere by its own).
type dirEnt struct {
	name string
	mode fs.FileMode
}

// readDir lists the directory rel, by name.
func (e *Export) readDir(rel string) ([]dirEnt, error) {
	f, err := e.dir.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]dirEnt, 0, len(ents))
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, ent := range ents {
		m := ent.Type()
		if m&fs.ModeSymlink != 0 {
			if fi, err := e.dir.Stat(path.Join(rel, ent.Name())); err == nil {
				m = fi.Mode().Type()
			}
		}
		out = append(out, dirEnt{ent.Name(), m})
	}
	return out, nil
}

// readFile reads the regular file rel (fi) whole, at most maxReadFile
// bytes; a FIFO or device is refused, never opened.
func (e *Export) readFile(abs, rel string, fi fs.FileInfo) ([]byte, error) {
	if !fi.Mode().IsRegular() {
		return nil, abi.E(abi.Path(abs), abi.Invalid, "not a regular file")
	}
	if fi.Size() > maxReadFile {
		return nil, abi.E(abi.Path(abs), abi.Invalid, fmt.Sprintf("file is larger than %d bytes", maxReadFile))
	}
	f, err := e.dir.OpenFile(rel, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, abi.E(abi.Path(abs), err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReadFile+1))
	if err != nil {
		return nil, abi.E(abi.Path(abs), err)
	}
	if len(b) > maxReadFile {
		return nil, abi.E(abi.Path(abs), abi.Invalid, fmt.Sprintf("file is larger than %d bytes", maxReadFile))
	}
	return b, nil
}

// write is fs.write: it replaces (or creates, with its missing parent
// directories) a file's content atomically.
func (e *Export) write(ctx context.Context, a *abi.FSWriteArgs) (*abi.FSWriteResult, error) {
	abs, rel, err := e.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	if err := e.writable(); err != nil {
		return nil, err
	}
	if err := e.writeFile(abs, rel, []byte(a.Content), true); err != nil {
		return &abi.FSWriteResult{Error: err.Error()}, nil
	}
	return &abi.FSWriteResult{OK: true, Path: abs, Size: len(a.Content)}, nil
}

// writeFile replaces rel's content: a temporary file beside it renamed
// over it, which keeps an existing file's mode (a new one gets 0644). A
// symbolic link (inside Root) is written through, in place.
func (e *Export) writeFile(abs, rel string, content []byte, mkParents bool) error {
	if rel == "." {
		return abi.E(abi.Path(abs), abi.Invalid, "is a directory")
	}
	mode := fs.FileMode(0o644)
	fi, err := e.dir.Lstat(rel)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		f, err := e.dir.OpenFile(rel, os.O_WRONLY|os.O_TRUNC|nonblock, 0)
		if err != nil {
			return abi.E(abi.Path(abs), err)
		}
		_, werr := f.Write(content)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return abi.E(abi.Path(abs), werr)
		}
		return nil
	case err == nil && fi.IsDir():
		return abi.E(abi.Path(abs), abi.Invalid, "is a directory")
	case err == nil:
		mode = fi.Mode().Perm()
	case errors.Is(err, fs.ErrNotExist) && mkParents:
		if err := e.dir.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return abi.E(abi.Path(abs), err)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return abi.E(abi.Path(abs), err)
	}
	tmp := path.Join(path.Dir(rel), ".gsv-"+randomHex()+".tmp")
	f, err := e.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return abi.E(abi.Path(abs), err)
	}
	_, werr := f.Write(content)
	if werr == nil {
		werr = f.Chmod(mode)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = e.dir.Rename(tmp, rel)
	}
	if werr != nil {
		e.dir.Remove(tmp)
		return abi.E(abi.Path(abs), werr)
	}
	return nil
}

// edit is fs.edit: it replaces an exact string in a file.
func (e *Export) edit(ctx context.Context, a *abi.FSEditArgs) (*abi.FSEditResult, error) {
	abs, rel, err := e.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	if err := e.writable(); err != nil {
		return nil, err
	}
	n, err := e.editFile(abs, rel, a)
	if err != nil {
		return &abi.FSEditResult{Error: err.Error()}, nil
	}
	return &abi.FSEditResult{OK: true, Path: abs, Replacements: n}, nil
}

func (e *Export) editFile(abs, rel string, a *abi.FSEditArgs) (int, error) {
	if a.OldString == "" {
		return 0, abi.E(abi.Path(abs), abi.Invalid, "oldString is empty")
	}
	fi, err := e.dir.Stat(rel)
	if err != nil {
		return 0, abi.E(abi.Path(abs), err)
	}
	b, err := e.readFile(abs, rel, fi)
	if err != nil {
		return 0, err
	}
	s, n, err := local.Replace(abs, string(b), a)
	if err != nil {
		return 0, err
	}
	return n, e.writeFile(abs, rel, []byte(s), false)
}

// delete is fs.delete: it removes a file, a symbolic link (not its
// target) or a directory tree.
func (e *Export) delete(ctx context.Context, a *abi.FSDeleteArgs) (*abi.FSDeleteResult, error) {
	abs, rel, err := e.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	if err := e.writable(); err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, abi.E(abi.Permission, abi.Path(abs), "cannot delete the export's root")
	}
	if _, err := e.dir.Lstat(rel); err != nil {
		return &abi.FSDeleteResult{Error: abi.E(abi.Path(abs), err).Error()}, nil
	}
	if err := e.dir.RemoveAll(rel); err != nil {
		return &abi.FSDeleteResult{Error: abi.E(abi.Path(abs), err).Error()}, nil
	}
	return &abi.FSDeleteResult{OK: true, Path: abs}, nil
}

// search is fs.search, run on the device: the lines holding a literal
// string in the regular files under a path (default Root) whose names
// match Include; symbolic links are not followed, unreadable parts and
// binary files skipped, at most maxSearchMatches matches.
func (e *Export) search(ctx context.Context, a *abi.FSSearchArgs) (*abi.FSSearchResult, error) {
	if a.Query == "" {
		return nil, abi.E(abi.Invalid, "empty query")
	}
	p := a.Path
	if p == "" {
		p = e.root
	}
	abs, rel, err := e.resolve(p)
	if err != nil {
		return nil, err
	}
	if a.Include != "" {
		if _, err := path.Match(a.Include, "x"); err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("bad include pattern %q", a.Include))
		}
	}
	if _, err := e.dir.Stat(rel); err != nil {
		return &abi.FSSearchResult{Error: abi.E(abi.Path(abs), err).Error()}, nil
	}
	s := searcher{e: e, ctx: ctx, q: []byte(a.Query), include: a.Include, matches: []abi.FSMatch{}}
	if err := s.walk(abs, rel, true); err != nil {
		return nil, err
	}
	return &abi.FSSearchResult{OK: true, Matches: s.matches, Count: len(s.matches), Truncated: s.truncated}, nil
}

// searcher is one fs.search's walk.
type searcher struct {
	e         *Export
	ctx       context.Context
	q         []byte
	include   string
	matches   []abi.FSMatch
	truncated bool
	buf       []byte
}

// walk searches abs (rel in Root); top is the path searched, which may be
// a symbolic link (inside Root) followed.
func (s *searcher) walk(abs, rel string, top bool) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	var fi fs.FileInfo
	var err error
	if top {
		fi, err = s.e.dir.Stat(rel)
	} else {
		fi, err = s.e.dir.Lstat(rel)
	}
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		f, err := s.e.dir.Open(rel)
		if err != nil {
			return nil
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return nil
		}
		slices.Sort(names)
		for _, name := range names {
			if err := s.walk(path.Join(abs, name), path.Join(rel, name), false); err != nil || s.truncated {
				return err
			}
		}
		return nil
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxReadFile {
		return nil
	}
	if s.include != "" {
		if ok, _ := path.Match(s.include, path.Base(abs)); !ok {
			return nil
		}
	}
	f, err := s.e.dir.OpenFile(rel, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if s.buf == nil {
		s.buf = make([]byte, 64<<10)
	}
	sc.Buffer(s.buf, 1<<20)
	var found []abi.FSMatch
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if bytes.IndexByte(line, 0) >= 0 {
			return nil // binary
		}
		if bytes.Contains(line, s.q) {
			found = append(found, abi.FSMatch{Path: abs, Line: n, Content: string(line)})
		}
	}
	for _, m := range found {
		if len(s.matches) == maxSearchMatches {
			s.truncated = true
			return nil
		}
		s.matches = append(s.matches, m)
	}
	return nil
}

// exec is shell.exec on the device (the local device's Shell). A cwd
// that is malformed or outside Root fails the call, as an fs.* path does.
func (e *Export) exec(ctx context.Context, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	if a.SessionID == "" && a.Cwd != "" {
		if _, _, err := e.resolve(a.Cwd); err != nil {
			return nil, abi.E(abi.Op("cwd"), err)
		}
	}
	return e.shell.Exec(ctx, e.who, a)
}

// randomHex is a random name part for a temporary file.
func randomHex() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
