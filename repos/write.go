package repos

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The bounds of a repo.apply.
const (
	maxOps     = 1000     // operations in one apply
	maxBlob    = 16 << 20 // one put's content, decoded
	maxApply   = 64 << 20 // every put's content of one apply
	maxMessage = 64 << 10 // a commit message
)

// signature is who c is in a commit: the user's name, and the process a
// process's work acts as.
func (r *Room) signature(c *kernel.Caller) object.Signature {
	name := c.Username
	if c.Pid != "" {
		name += " (" + c.Pid + ")"
	}
	return object.Signature{Name: name, Email: c.Username + "@gsv", When: r.now().Truncate(time.Second)}
}

// create serves repo.create: a repository owned by the caller (root: by
// any user) with an empty first commit on the ref.
func (r *Room) create(ctx context.Context, c *kernel.Caller, a *abi.RepoCreateArgs) (*abi.RepoCreateResult, error) {
	owner, name, err := splitRepo(a.Repo, c.Username)
	if err != nil {
		return nil, err
	}
	ref, err := branchRef(a.Ref)
	if err != nil {
		return nil, err
	}
	if len(a.Description) > 1024 || strings.ContainsAny(a.Description, "\n\r") {
		return nil, abi.E(abi.Invalid, "a description is one line of at most 1024 bytes")
	}
	if owner != c.Username && !c.IsRoot() {
		return nil, abi.E(abi.Permission, abi.Path(owner+"/"+name), "only "+owner+" may make repositories of theirs")
	}
	if name == homeRepo {
		return nil, abi.E(abi.Busy, abi.Path(owner+"/"+name), "home is each user's home's history")
	}
	u, err := r.k.UserByName(ctx, owner)
	if err != nil || u == nil {
		return nil, abi.E(abi.NotExist, abi.Path(owner), "no such user")
	}
	rec, err := r.ensure(ctx, &record{Owner: owner, Name: name, OwnerUid: u.Uid, Kind: "user", Public: a.Public, Description: a.Description}, ref)
	if err != nil {
		return nil, err
	}
	if !canWrite(c, rec) {
		return nil, abi.E(abi.Permission, abi.Path(rec.id()), "only "+rec.Owner+" may write the repository")
	}
	unlock := r.lock(rec)
	defer unlock()
	g, err := r.open(rec)
	if err != nil {
		return nil, err
	}
	out := &abi.RepoCreateResult{Repo: rec.id(), Ref: shortRef(ref)}
	if cur, err := g.Reference(plumbing.ReferenceName(ref), false); err == nil {
		h := cur.Hash().String()
		out.Head = &h
		return out, nil
	}
	h, err := r.commit(g, c, plumbing.ZeroHash, nil, "Create "+rec.id())
	if err != nil {
		return nil, err
	}
	if err := g.Storer.CheckAndSetReference(plumbing.NewHashReference(plumbing.ReferenceName(ref), h), nil); err != nil {
		return nil, abi.E(abi.Other, abi.Path(rec.id()), err)
	}
	hs := h.String()
	out.Head, out.Created = &hs, true
	r.touch(ctx, rec)
	return out, nil
}

// ensure returns the record of rec's repository, making the repository
// (bare, HEAD at ref) and its record if there is none.
func (r *Room) ensure(ctx context.Context, rec *record, ref string) (*record, error) {
	unlock := r.lock(rec)
	defer unlock()
	old, err := r.lookup(ctx, rec.Owner, rec.Name)
	if err != nil || old != nil {
		return old, err
	}
	if err := os.MkdirAll(filepath.Join(r.dir, rec.Owner), 0o700); err != nil {
		return nil, err
	}
	dir := r.gitDir(rec)
	os.RemoveAll(dir) // a directory a crash left before its record
	if _, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{Bare: true,
		InitOptions: git.InitOptions{DefaultBranch: plumbing.ReferenceName(ref)}}); err != nil {
		return nil, abi.E(abi.Other, abi.Path(rec.id()), err)
	}
	if err := r.insert(ctx, rec); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return rec, nil
}

// commit writes a commit of tree (the empty tree when zero) on parent
// (none when zero) by c, with message; it moves no ref.
func (r *Room) commit(g *git.Repository, c *kernel.Caller, parent plumbing.Hash, tree *plumbing.Hash, message string) (plumbing.Hash, error) {
	th := plumbing.ZeroHash
	if tree != nil {
		th = *tree
	} else {
		h, err := putObject(g.Storer, &object.Tree{})
		if err != nil {
			return plumbing.ZeroHash, err
		}
		th = h
	}
	sig := r.signature(c)
	cm := &object.Commit{Author: sig, Committer: sig, Message: message, TreeHash: th}
	if !parent.IsZero() {
		cm.ParentHashes = []plumbing.Hash{parent}
	}
	return putObject(g.Storer, cm)
}

// encoder is a git object that encodes itself.
type encoder interface {
	Encode(plumbing.EncodedObject) error
}

// putObject stores o and returns its hash.
func putObject(s storer.EncodedObjectStorer, o encoder) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// putBlob stores b as a blob and returns its hash.
func putBlob(s storer.EncodedObjectStorer, b []byte) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(b)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(b); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// op is one checked operation of an apply: a put's content decoded.
type op struct {
	kind      string // put, delete, move
	path, to  string
	content   []byte
	recursive bool
}

// parseOps checks an apply's operations: their kinds, paths (cleanPath)
// and contents, within the bounds. Nothing is written.
func parseOps(ops []abi.RepoOp) ([]op, error) {
	if len(ops) > maxOps {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("at most %d operations in one apply", maxOps))
	}
	out := make([]op, 0, len(ops))
	total := 0
	for i, o := range ops {
		kind := o.Type
		if kind == "" {
			kind = o.Op
		} else if o.Op != "" && o.Op != o.Type {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("ops[%d]: type %q and op %q differ", i, clip(o.Type), clip(o.Op)))
		}
		bad := func(why string) error { return abi.E(abi.Invalid, fmt.Sprintf("ops[%d] (%s): %s", i, clip(kind), why)) }
		var p op
		p.kind = kind
		switch kind {
		case "put":
			path, err := cleanPath(o.Path)
			if err != nil {
				return nil, bad(err.Error())
			}
			if path == "" {
				return nil, bad("a put needs a path")
			}
			if o.Content != nil && o.ContentBase64 != nil {
				return nil, bad("give content or contentBase64, not both")
			}
			p.path = path
			switch {
			case o.ContentBase64 != nil:
				if base64.StdEncoding.DecodedLen(len(*o.ContentBase64)) > maxBlob+3 {
					return nil, bad(fmt.Sprintf("content over %d bytes", maxBlob))
				}
				b, err := base64.StdEncoding.DecodeString(*o.ContentBase64)
				if err != nil {
					return nil, bad("contentBase64: " + err.Error())
				}
				p.content = b
			case o.Content != nil:
				p.content = []byte(*o.Content)
			}
			if len(p.content) > maxBlob {
				return nil, bad(fmt.Sprintf("content over %d bytes", maxBlob))
			}
			total += len(p.content)
			if total > maxApply {
				return nil, bad(fmt.Sprintf("the apply's contents are over %d bytes", maxApply))
			}
			if o.From != "" || o.To != "" || o.Recursive {
				return nil, bad("a put takes path and content only")
			}
		case "delete":
			path, err := cleanPath(o.Path)
			if err != nil {
				return nil, bad(err.Error())
			}
			if o.Content != nil || o.ContentBase64 != nil || o.From != "" || o.To != "" {
				return nil, bad("a delete takes path and recursive only")
			}
			p.path, p.recursive = path, o.Recursive
		case "move":
			from, err := cleanPath(o.From)
			if err != nil {
				return nil, bad("from: " + err.Error())
			}
			to, err := cleanPath(o.To)
			if err != nil {
				return nil, bad("to: " + err.Error())
			}
			if from == "" || to == "" {
				return nil, bad("a move needs from and to")
			}
			if o.Path != "" || o.Content != nil || o.ContentBase64 != nil {
				return nil, bad("a move takes from and to only")
			}
			if to == from || strings.HasPrefix(to, from+"/") {
				return nil, bad("cannot move a path into itself")
			}
			p.path, p.to = from, to
		case "":
			return nil, bad("an operation needs a type: put, delete or move")
		default:
			return nil, bad("unknown type: want put, delete or move")
		}
		out = append(out, p)
	}
	return out, nil
}

// entry is a file of a flat tree.
type entry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// flatTree is a tree's files by path.
type flatTree map[string]entry

// flatten reads the files (every non-tree entry) of the tree h; an empty
// map for the zero hash.
func flatten(s storer.EncodedObjectStorer, h plumbing.Hash) (flatTree, error) {
	out := flatTree{}
	if h.IsZero() {
		return out, nil
	}
	t, err := object.GetTree(s, h)
	if err != nil {
		return nil, err
	}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if e.Mode == filemode.Dir {
			continue
		}
		out[name] = entry{mode: e.Mode, hash: e.Hash}
	}
	return out, nil
}

// isDir reports whether some file of f is under p.
func (f flatTree) isDir(p string) bool {
	pre := p + "/"
	for k := range f {
		if strings.HasPrefix(k, pre) {
			return true
		}
	}
	return false
}

// fileOnTheWay returns a file of f that is a parent directory of p on
// the way, if any.
func (f flatTree) fileOnTheWay(p string) string {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			if _, ok := f[p[:i]]; ok {
				return p[:i]
			}
		}
	}
	return ""
}

// applyOps applies ops to f, writing each put's blob to s.
func applyOps(s storer.EncodedObjectStorer, f flatTree, ops []op) error {
	for i, o := range ops {
		bad := func(k abi.Kind, why string) error {
			return abi.E(k, abi.Path(o.path), fmt.Sprintf("ops[%d] (%s): %s", i, o.kind, why))
		}
		switch o.kind {
		case "put":
			if f.isDir(o.path) {
				return bad(abi.Invalid, "is a directory")
			}
			if d := f.fileOnTheWay(o.path); d != "" {
				return bad(abi.Invalid, d+" is a file")
			}
			h, err := putBlob(s, o.content)
			if err != nil {
				return err
			}
			mode := filemode.Regular
			if e, ok := f[o.path]; ok && e.mode == filemode.Executable {
				mode = e.mode
			}
			f[o.path] = entry{mode: mode, hash: h}
		case "delete":
			if _, ok := f[o.path]; ok && o.path != "" {
				delete(f, o.path)
				continue
			}
			if o.path != "" && !f.isDir(o.path) {
				return bad(abi.NotExist, "no such file")
			}
			if !o.recursive {
				return bad(abi.Invalid, "is a directory: give recursive")
			}
			for k := range f {
				if o.path == "" || strings.HasPrefix(k, o.path+"/") {
					delete(f, k)
				}
			}
		case "move":
			if _, ok := f[o.to]; ok || f.isDir(o.to) {
				return bad(abi.Busy, o.to+" is there already")
			}
			if d := f.fileOnTheWay(o.to); d != "" {
				return bad(abi.Invalid, d+" is a file")
			}
			if e, ok := f[o.path]; ok {
				delete(f, o.path)
				f[o.to] = e
				continue
			}
			if !f.isDir(o.path) {
				return bad(abi.NotExist, "no such file")
			}
			for k, e := range f {
				if strings.HasPrefix(k, o.path+"/") {
					delete(f, k)
					f[o.to+k[len(o.path):]] = e
				}
			}
		}
	}
	return nil
}

// writeTree writes f as nested trees and returns the root's hash.
func writeTree(s storer.EncodedObjectStorer, f flatTree) (plumbing.Hash, error) {
	type dir struct {
		files map[string]entry
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]entry{}, dirs: map[string]*dir{}} }
	root := newDir()
	for p, e := range f {
		d := root
		parts := strings.Split(p, "/")
		for _, c := range parts[:len(parts)-1] {
			sub := d.dirs[c]
			if sub == nil {
				sub = newDir()
				d.dirs[c] = sub
			}
			d = sub
		}
		d.files[parts[len(parts)-1]] = e
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		t := &object.Tree{}
		for name, e := range d.files {
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash})
		}
		for name, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
		// git's order: a tree's name sorts as if it ended in '/'.
		key := func(e object.TreeEntry) string {
			if e.Mode == filemode.Dir {
				return e.Name + "/"
			}
			return e.Name
		}
		sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
		return putObject(s, t)
	}
	return write(root)
}

// apply serves repo.apply: the operations, at once, as one commit on the
// ref; a set expectedHead that is not the ref's head is a 409 and nothing
// is written.
func (r *Room) apply(ctx context.Context, c *kernel.Caller, a *abi.RepoApplyArgs) (*abi.RepoApplyResult, error) {
	rec, err := r.access(ctx, c, a.Repo, true)
	if err != nil {
		return nil, err
	}
	ref, err := branchRef(a.Ref)
	if err != nil {
		return nil, err
	}
	if len(a.Message) > maxMessage {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("a message of at most %d bytes", maxMessage))
	}
	if a.ExpectedHead != nil && *a.ExpectedHead != "" && !plumbing.IsHash(*a.ExpectedHead) {
		return nil, abi.E(abi.Invalid, "expectedHead: want a full 40-digit commit hash")
	}
	ops, err := parseOps(a.Ops)
	if err != nil {
		return nil, err
	}
	msg := a.Message
	if strings.TrimSpace(msg) == "" {
		msg = fmt.Sprintf("repo.apply: %d operations", len(ops))
	}
	h, err := r.commitOps(ctx, c, rec, ref, a.ExpectedHead, ops, msg, a.AllowEmpty)
	if err != nil {
		return nil, err
	}
	hs := h.String()
	return &abi.RepoApplyResult{OK: true, Repo: rec.id(), Ref: shortRef(ref), Head: &hs}, nil
}

// errNothing is commitOps's answer to a change of nothing without
// allowEmpty.
var errNothing = abi.E(abi.Invalid, "nothing changes (allowEmpty makes an empty commit)")

// commitOps commits ops on ref of rec as c under the repository's lock:
// a set expected head that is not the ref's is a 409 before anything is
// written.
func (r *Room) commitOps(ctx context.Context, c *kernel.Caller, rec *record, ref string, expected *string, ops []op, msg string, allowEmpty bool) (plumbing.Hash, error) {
	unlock := r.lock(rec)
	defer unlock()
	g, err := r.open(rec)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	var old *plumbing.Reference
	parent, parentTree := plumbing.ZeroHash, plumbing.ZeroHash
	if cur, err := g.Reference(plumbing.ReferenceName(ref), false); err == nil {
		old, parent = cur, cur.Hash()
		cm, err := g.CommitObject(parent)
		if err != nil {
			return plumbing.ZeroHash, abi.E(abi.Other, abi.Path(rec.id()), err)
		}
		parentTree = cm.TreeHash
	}
	if expected != nil && *expected != parentHex(parent) {
		return plumbing.ZeroHash, abi.E(abi.Busy, abi.Path(rec.id()+"@"+shortRef(ref)),
			fmt.Sprintf("stale head: expected %s, the ref is at %s; nothing was written", orNone(*expected), orNone(parentHex(parent))))
	}
	f, err := flatten(g.Storer, parentTree)
	if err != nil {
		return plumbing.ZeroHash, abi.E(abi.Other, abi.Path(rec.id()), err)
	}
	if err := applyOps(g.Storer, f, ops); err != nil {
		return plumbing.ZeroHash, err
	}
	th, err := writeTree(g.Storer, f)
	if err != nil {
		return plumbing.ZeroHash, abi.E(abi.Other, abi.Path(rec.id()), err)
	}
	if th == parentTree && !parent.IsZero() && !allowEmpty {
		return plumbing.ZeroHash, errNothing
	}
	h, err := r.commit(g, c, parent, &th, msg)
	if err != nil {
		return plumbing.ZeroHash, abi.E(abi.Other, abi.Path(rec.id()), err)
	}
	if err := g.Storer.CheckAndSetReference(plumbing.NewHashReference(plumbing.ReferenceName(ref), h), old); err != nil {
		return plumbing.ZeroHash, abi.E(abi.Busy, abi.Path(rec.id()), err)
	}
	r.touch(ctx, rec)
	return h, nil
}

// parentHex is h's text, "" for the zero hash.
func parentHex(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}

// orNone is s, or "none" for "".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// shortRef is a ref's name without refs/heads/ or refs/tags/.
func shortRef(ref string) string {
	if s, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return s
	}
	if s, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		return s
	}
	return ref
}
