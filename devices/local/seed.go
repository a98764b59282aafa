package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The seed's fs.* syscalls on the local device: the agent's file tools.
// Paths of the data tree (/home, /workspaces, /var/sessions) are served
// straight from its real files; every other path is the namespace's,
// walked as the caller (see nsfs.go).

// maxReadFile is the largest file fs.read returns.
const maxReadFile = 25 << 20

// MaxSearchMatches caps fs.search (a device's answers too).
const MaxSearchMatches = 500

// Read is fs.read: a file's numbered lines or a directory's listing.
// The operation's own failure is {ok:false, error}.
func (d *Device) Read(ctx context.Context, who Who, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	res, err := d.fsRead(ctx, who, a)
	if err != nil {
		return &abi.FSReadResult{Error: err.Error()}, nil
	}
	return res, nil
}

// Write is fs.write: it replaces a file's content atomically (a data
// tree file), or writes it to a namespace file (a ctl file runs it).
func (d *Device) Write(ctx context.Context, who Who, a *abi.FSWriteArgs) (*abi.FSWriteResult, error) {
	p, err := d.where(who, a.Path)
	if err == nil {
		if p.ns {
			err = d.nsWrite(ctx, who, p.path, []byte(a.Content))
		} else {
			err = d.writeFile(ctx, who, p.rel, []byte(a.Content), true)
		}
	}
	if err != nil {
		return &abi.FSWriteResult{Error: err.Error()}, nil
	}
	return &abi.FSWriteResult{OK: true, Path: p.path, Size: len(a.Content)}, nil
}

// Edit is fs.edit: it replaces an exact string in a file.
func (d *Device) Edit(ctx context.Context, who Who, a *abi.FSEditArgs) (*abi.FSEditResult, error) {
	n, p, err := d.fsEdit(ctx, who, a)
	if err != nil {
		return &abi.FSEditResult{Error: err.Error()}, nil
	}
	return &abi.FSEditResult{OK: true, Path: p, Replacements: n}, nil
}

// Delete is fs.delete: it removes a file or a directory tree of the data
// tree, or a namespace file whose directory removes it.
func (d *Device) Delete(ctx context.Context, who Who, a *abi.FSDeleteArgs) (*abi.FSDeleteResult, error) {
	p, err := d.where(who, a.Path)
	if err == nil {
		if p.ns {
			err = d.nsRemove(ctx, who, p.path)
		} else {
			err = d.deleteTree(ctx, who, p.rel)
		}
	}
	if err != nil {
		return &abi.FSDeleteResult{Error: err.Error()}, nil
	}
	return &abi.FSDeleteResult{OK: true, Path: p.path}, nil
}

// Search is fs.search: the lines holding a literal string, in the data
// tree's files under a path.
func (d *Device) Search(ctx context.Context, who Who, a *abi.FSSearchArgs) (*abi.FSSearchResult, error) {
	res, err := d.fsSearch(ctx, who, a)
	if err != nil {
		return &abi.FSSearchResult{Error: err.Error()}, nil
	}
	return res, nil
}

// fsRead reads a file or lists a directory for fs.read.
func (d *Device) fsRead(ctx context.Context, who Who, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	p, err := d.where(who, a.Path)
	if err != nil {
		return nil, err
	}
	if p.ns {
		return d.nsRead(ctx, who, p.path, a)
	}
	rel := p.rel
	fi, err := d.access(ctx, who, rel, vfs.WantRead)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		list, err := d.readDirData(rel)
		if err != nil {
			return nil, abi.E(abi.Path("/"+rel), err)
		}
		files, dirs := []string{}, []string{}
		for _, e := range list {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
			} else if e.Mode().IsRegular() {
				files = append(files, e.Name())
			}
		}
		return &abi.FSReadResult{OK: true, Dir: true, Path: "/" + rel, Files: files, Directories: dirs}, nil
	}
	if fi.Size() > maxReadFile {
		return nil, abi.E(abi.Path("/"+rel), abi.Invalid, fmt.Sprintf("file is larger than %d bytes", maxReadFile))
	}
	b, err := d.readFileData(rel, maxReadFile)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return Numbered("/"+rel, b, fi.Size(), a)
}

// Numbered is fs.read's result for the file at path with content b: its
// lines from a.Offset, at most a.Limit of them, each numbered (with
// a.Raw, as they are: all of them are b itself); a file that is not UTF-8
// is a 400 "binary file", except an image: without a.Raw, a file whose
// content (http.DetectContentType, not its name) is one of abi.ImageTypes
// is its image, base64 (FSReadResult.Image). A device daemon's fs.read
// answers with it too.
func Numbered(path string, b []byte, size int64, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	if !a.Raw {
		if mt := http.DetectContentType(b); slices.Contains(abi.ImageTypes, mt) {
			return &abi.FSReadResult{OK: true, Path: path, Size: size,
				Image: &abi.ImageBlock{Type: "image", Data: base64.StdEncoding.EncodeToString(b), MimeType: mt}}, nil
		}
	}
	if !utf8.Valid(b) {
		return nil, abi.E(abi.Path(path), abi.Invalid, "binary file")
	}
	var out strings.Builder
	lines := strings.SplitAfter(string(b), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	total := len(lines)
	start := min(max(a.Offset, 0), total)
	end := total
	if a.Limit > 0 {
		end = min(start+a.Limit, total)
	}
	for i := start; i < end; i++ {
		if a.Raw {
			out.WriteString(lines[i])
			continue
		}
		fmt.Fprintf(&out, "%6d\t%s", i+1, strings.TrimSuffix(lines[i], "\n")+"\n")
	}
	return &abi.FSReadResult{OK: true, Path: path, Content: out.String(), Lines: total, Size: size}, nil
}

// writeFile replaces rel's content atomically (a temporary file renamed
// over it), creating parent directories when mkParents is set. An existing
// file keeps its mode; a new one gets 0644.
func (d *Device) writeFile(ctx context.Context, who Who, rel string, content []byte, mkParents bool) error {
	mode := fs.FileMode(0o644)
	var old int64 // the size of the file replaced
	fi, err := d.access(ctx, who, rel, vfs.WantWrite)
	switch {
	case err == nil:
		if fi.IsDir() {
			return abi.E(abi.Path("/"+rel), abi.Invalid, syscall.EISDIR)
		}
		mode = fi.Mode().Perm()
		if fi.Mode().IsRegular() {
			old = fi.Size()
		}
		if err := d.accessParent(ctx, who, rel); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrNotExist):
		if mkParents {
			if err := d.mkdirAll(ctx, who, path.Dir(rel)); err != nil {
				return err
			}
		}
		if err := d.accessParent(ctx, who, rel); err != nil {
			return err
		}
	default:
		return err
	}
	if err := d.chargeHome(ctx, rel, func() int64 { return int64(len(content)) - old }); err != nil {
		return err
	}
	tmp := tmpDir + "/" + randomText()
	f, err := d.openData(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return abi.E(abi.Path("/"+rel), err)
	}
	// The file takes rel's owner's disk ids before it is there.
	werr := d.ownFile(ctx, f, rel)
	if werr == nil {
		_, werr = f.Write(content)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = d.chmodData(tmp, mode)
	}
	if werr == nil {
		werr = d.renameData(tmp, rel)
	}
	if werr != nil {
		d.removeData(tmp, false)
		d.staleHome(homeUser(rel), false) // counted, not written
		return abi.E(abi.Path("/"+rel), werr)
	}
	return nil
}

// mkdirAll makes rel and its missing parents, checking each step.
func (d *Device) mkdirAll(ctx context.Context, who Who, rel string) error {
	return d.mkdirAllMode(ctx, who, rel, 0o755)
}

// mkdirAllMode is mkdirAll making directories with mode perm.
func (d *Device) mkdirAllMode(ctx context.Context, who Who, rel string, perm fs.FileMode) error {
	if fi, err := d.access(ctx, who, rel, 0); err == nil {
		if !fi.IsDir() {
			return abi.E(abi.Path("/"+rel), syscall.ENOTDIR)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := path.Dir(rel); parent != "." {
		if err := d.mkdirAllMode(ctx, who, parent, perm); err != nil {
			return err
		}
	}
	if err := d.accessParent(ctx, who, rel); err != nil {
		return err
	}
	if err := d.mkdirData(ctx, rel, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return abi.E(abi.Path("/"+rel), err)
	}
	return nil
}

// fsEdit replaces a.OldString in a file for fs.edit and returns the
// count of replacements and the file's path.
func (d *Device) fsEdit(ctx context.Context, who Who, a *abi.FSEditArgs) (int, string, error) {
	p, err := d.where(who, a.Path)
	if err != nil {
		return 0, "", err
	}
	if a.OldString == "" {
		return 0, p.path, abi.E(abi.Path(p.path), abi.Invalid, "oldString is empty")
	}
	var b []byte
	if p.ns {
		b, err = d.nsReadAll(ctx, who, p.path)
	} else {
		b, err = d.readForEdit(ctx, who, p.rel)
	}
	if err != nil {
		return 0, p.path, err
	}
	s, n, err := Replace(p.path, string(b), a)
	if err != nil {
		return 0, p.path, err
	}
	if p.ns {
		return n, p.path, d.nsWrite(ctx, who, p.path, []byte(s))
	}
	return n, p.path, d.writeFile(ctx, who, p.rel, []byte(s), false)
}

// Replace is fs.edit's change to the content s of the file at path:
// a.OldString replaced by a.NewString, once (it must occur once) or,
// with a.ReplaceAll, everywhere. It returns the new content and how many
// were replaced; a missing oldString is a 404, an ambiguous one a 400. A
// device daemon's fs.edit changes with it too.
func Replace(path, s string, a *abi.FSEditArgs) (string, int, error) {
	n := strings.Count(s, a.OldString)
	switch {
	case n == 0:
		return "", 0, abi.E(abi.Path(path), abi.NotExist, "oldString not found in file")
	case n > 1 && !a.ReplaceAll:
		return "", 0, abi.E(abi.Path(path), abi.Invalid, fmt.Sprintf("oldString occurs %d times: give more context to make it unique, or set replaceAll", n))
	}
	if !a.ReplaceAll {
		n = 1
	}
	return strings.Replace(s, a.OldString, a.NewString, n), n, nil
}

// readForEdit reads the data tree file rel, which who must be able to
// read and write.
func (d *Device) readForEdit(ctx context.Context, who Who, rel string) ([]byte, error) {
	if _, err := d.access(ctx, who, rel, vfs.WantRead|vfs.WantWrite); err != nil {
		return nil, err
	}
	b, err := d.readFileData(rel, maxReadFile)
	if err != nil {
		return nil, abi.E(abi.Path("/"+rel), err)
	}
	return b, nil
}

// deleteTree removes rel and, for a directory, everything in it.
func (d *Device) deleteTree(ctx context.Context, who Who, rel string) error {
	if !strings.Contains(rel, "/") {
		return abi.E(abi.Path("/"+rel), abi.Permission, "cannot delete a top-level directory")
	}
	if err := d.accessParent(ctx, who, rel); err != nil {
		return err
	}
	fi, err := d.reach(ctx, who, rel)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if _, err := d.access(ctx, who, rel, vfs.WantWrite|vfs.WantExec|vfs.WantRead); err != nil {
			return err
		}
		ents, err := d.readDirData(rel)
		if err != nil {
			return abi.E(abi.Path("/"+rel), err)
		}
		for _, e := range ents {
			if err := d.deleteTree(ctx, who, rel+"/"+e.Name()); err != nil {
				return err
			}
		}
	}
	if err := d.removeData(rel, fi.IsDir()); err != nil {
		return abi.E(abi.Path("/"+rel), err)
	}
	if fi.Mode().IsRegular() {
		d.creditHome(rel, fi.Size())
	}
	return nil
}

// fsSearch searches the data tree's files for fs.search; unreadable
// parts are skipped.
func (d *Device) fsSearch(ctx context.Context, who Who, a *abi.FSSearchArgs) (*abi.FSSearchResult, error) {
	if a.Query == "" {
		return nil, abi.E(abi.Invalid, "empty query")
	}
	p := a.Path
	if p == "" {
		p = who.Cwd
	}
	rel, err := resolve(who, p)
	if err != nil {
		return nil, err
	}
	if a.Include != "" {
		if _, err := path.Match(a.Include, "x"); err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("bad include pattern %q", a.Include))
		}
	}
	matches := []abi.FSMatch{}
	truncated := false
	q := []byte(a.Query)
	var walk func(rel string) error
	walk = func(rel string) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fi, err := d.access(ctx, who, rel, vfs.WantRead)
		if err != nil {
			return nil // unreadable parts are skipped, as grep -r -s does
		}
		if fi.IsDir() {
			ents, err := d.readDirData(rel)
			if err != nil {
				return nil
			}
			for _, e := range ents {
				if err := walk(rel + "/" + e.Name()); err != nil || truncated {
					return err
				}
			}
			return nil
		}
		if !fi.Mode().IsRegular() || fi.Size() > maxReadFile {
			return nil
		}
		if a.Include != "" {
			if ok, _ := path.Match(a.Include, path.Base(rel)); !ok {
				return nil
			}
		}
		f, err := d.openReadData(rel)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if bytes.IndexByte(line, 0) >= 0 {
				return nil // binary
			}
			if bytes.Contains(line, q) {
				if len(matches) == MaxSearchMatches {
					truncated = true
					return nil
				}
				matches = append(matches, abi.FSMatch{Path: "/" + rel, Line: n, Content: string(line)})
			}
		}
		return nil
	}
	if err := walk(rel); err != nil {
		return nil, abi.E(err)
	}
	return &abi.FSSearchResult{OK: true, Matches: matches, Count: len(matches), Truncated: truncated}, nil
}
