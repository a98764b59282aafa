package repos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The bounds of the reads.
const (
	maxRead        = 32 << 20 // a file repo.read or repo.blob returns
	maxMatches     = 500      // repo.search's matches
	maxSearchBytes = 1 << 20  // a file repo.search looks into
	maxLine        = 512      // a matching line's content, in bytes
	binarySniff    = 8000     // git's: a NUL in the first 8000 bytes is binary
)

// resolve finds the commit a revision names in g: "" is main (else HEAD);
// a branch, a tag, a hash, or a revision such as HEAD~3.
func resolve(g *git.Repository, rev string) (*object.Commit, string, error) {
	if rev == "" {
		if _, err := g.Reference(plumbing.NewBranchReferenceName("main"), false); err == nil {
			rev = "main"
		} else {
			rev = "HEAD"
		}
	}
	if !validRev(rev) {
		return nil, rev, abi.E(abi.Invalid, abi.Path(clip(rev)), "not a revision")
	}
	h, err := g.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, rev, abi.E(abi.NotExist, abi.Path(rev), "no such revision")
	}
	cm, err := g.CommitObject(*h)
	if err != nil {
		// A tag's target, or a hash that is not a commit.
		return nil, rev, abi.E(abi.NotExist, abi.Path(rev), "not a commit")
	}
	return cm, rev, nil
}

// openRead checks that c may read repo, opens it and resolves rev.
func (r *Room) openRead(ctx context.Context, c *kernel.Caller, repo, rev string) (*record, *git.Repository, *object.Commit, string, error) {
	rec, err := r.access(ctx, c, repo, false)
	if err != nil {
		return nil, nil, nil, "", err
	}
	g, err := r.open(rec)
	if err != nil {
		return nil, nil, nil, "", err
	}
	cm, rev, err := resolve(g, rev)
	if err != nil {
		return nil, nil, nil, "", abi.E(abi.Path(rec.id()), err)
	}
	return rec, g, cm, rev, nil
}

// refs serves repo.refs.
func (r *Room) refs(ctx context.Context, c *kernel.Caller, a *abi.RepoArgs) (*abi.RepoRefsResult, error) {
	rec, err := r.access(ctx, c, a.Repo, false)
	if err != nil {
		return nil, err
	}
	g, err := r.open(rec)
	if err != nil {
		return nil, err
	}
	out := &abi.RepoRefsResult{Repo: rec.id(), Heads: map[string]string{}, Tags: map[string]string{}}
	it, err := g.References()
	if err != nil {
		return nil, err
	}
	err = it.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() != plumbing.HashReference {
			return nil
		}
		n := ref.Name()
		switch {
		case n.IsBranch():
			out.Heads[n.Short()] = ref.Hash().String()
		case n.IsTag():
			h := ref.Hash()
			if t, err := g.TagObject(h); err == nil {
				h = t.Target // an annotated tag: its commit
			}
			out.Tags[strings.TrimPrefix(n.String(), "refs/tags/")] = h.String()
		}
		return nil
	})
	return out, err
}

// read serves repo.read: a tree's entries or a file's content.
func (r *Room) read(ctx context.Context, c *kernel.Caller, a *abi.RepoReadArgs) (*abi.RepoReadResult, error) {
	path, err := cleanPath(a.Path)
	if err != nil {
		return nil, err
	}
	rec, g, cm, rev, err := r.openRead(ctx, c, a.Repo, a.Ref)
	if err != nil {
		return nil, err
	}
	out := &abi.RepoReadResult{Repo: rec.id(), Ref: rev, Path: path}
	tree, err := cm.Tree()
	if err != nil {
		return nil, err
	}
	if path != "" {
		e, err := tree.FindEntry(path)
		if err != nil {
			return nil, abi.E(abi.NotExist, abi.Path(path), "no such file at "+rev)
		}
		if e.Mode != filemode.Dir {
			b, err := readBlob(g, e.Hash)
			if err != nil {
				return nil, abi.E(abi.Path(path), err)
			}
			out.Kind, out.Size = "file", int64(len(b))
			if isBinary(b) {
				out.IsBinary = true
			} else {
				s := string(b)
				out.Content = &s
			}
			return out, nil
		}
		if tree, err = g.TreeObject(e.Hash); err != nil {
			return nil, err
		}
	}
	out.Kind = "tree"
	out.Entries = treeEntries(g, tree, path)
	return out, nil
}

// treeEntries are t's entries, at path, with each blob's size.
func treeEntries(g *git.Repository, t *object.Tree, path string) []abi.RepoTreeEntry {
	out := make([]abi.RepoTreeEntry, 0, len(t.Entries))
	for _, e := range t.Entries {
		p := e.Name
		if path != "" {
			p = path + "/" + e.Name
		}
		te := abi.RepoTreeEntry{Name: e.Name, Path: p, Mode: fmt.Sprintf("%06o", uint32(e.Mode)), Hash: e.Hash.String(), Type: "blob"}
		switch e.Mode {
		case filemode.Dir:
			te.Type = "tree"
		case filemode.Symlink:
			te.Type = "symlink"
		case filemode.Submodule:
			te.Type = "commit"
		}
		if te.Type != "tree" && te.Type != "commit" {
			if sz, err := g.Storer.EncodedObjectSize(e.Hash); err == nil {
				te.Size = sz
			}
		}
		out = append(out, te)
	}
	return out
}

// readBlob reads the blob h, up to maxRead bytes.
func readBlob(g *git.Repository, h plumbing.Hash) ([]byte, error) {
	b, err := g.BlobObject(h)
	if err != nil {
		return nil, abi.E(abi.NotExist, "not a file")
	}
	if b.Size > maxRead {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("the file is over %d bytes", maxRead))
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(io.LimitReader(rd, maxRead))
}

// isBinary is git's rule: a NUL in the first 8000 bytes, or (ours) text
// that is not UTF-8.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), binarySniff)], 0) >= 0 || !utf8.Valid(b)
}

// blob serves the Internal repo.blob: a file's bytes at a ref.
func (r *Room) blob(ctx context.Context, c *kernel.Caller, a *abi.RepoBlobArgs) ([]byte, error) {
	path, err := cleanPath(a.Path)
	if err != nil || path == "" {
		return nil, abi.E(abi.Invalid, "a file's path")
	}
	_, g, cm, rev, err := r.openRead(ctx, c, a.Repo, a.Ref)
	if err != nil {
		return nil, err
	}
	tree, err := cm.Tree()
	if err != nil {
		return nil, err
	}
	e, err := tree.FindEntry(path)
	if err != nil || e.Mode == filemode.Dir {
		return nil, abi.E(abi.NotExist, abi.Path(path), "no such file at "+rev)
	}
	return readBlob(g, e.Hash)
}

// search serves repo.search: the lines holding the query, of the text
// files under prefix, in path order, at most maxMatches.
func (r *Room) search(ctx context.Context, c *kernel.Caller, a *abi.RepoSearchArgs) (*abi.RepoSearchResult, error) {
	if a.Query == "" || len(a.Query) > 1024 || strings.ContainsAny(a.Query, "\n\x00") {
		return nil, abi.E(abi.Invalid, "a query is one non-empty line of at most 1024 bytes")
	}
	prefix, err := cleanPath(a.Prefix)
	if err != nil {
		return nil, err
	}
	rec, g, cm, rev, err := r.openRead(ctx, c, a.Repo, a.Ref)
	if err != nil {
		return nil, err
	}
	out := &abi.RepoSearchResult{Repo: rec.id(), Ref: rev, Query: a.Query, Prefix: prefix, Matches: []abi.RepoSearchMatch{}}
	f, err := flatten(g.Storer, cm.TreeHash)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(f))
	for p, e := range f {
		if (prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/")) && e.mode.IsFile() && e.mode != filemode.Symlink {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	q := []byte(a.Query)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if sz, err := g.Storer.EncodedObjectSize(f[p].hash); err != nil || sz > maxSearchBytes {
			continue
		}
		b, err := readBlob(g, f[p].hash)
		if err != nil || isBinary(b) || !bytes.Contains(b, q) {
			continue
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			if !bytes.Contains(line, q) {
				continue
			}
			if len(out.Matches) == maxMatches {
				out.Truncated = true
				return out, nil
			}
			if len(line) > maxLine {
				line = line[:maxLine]
			}
			out.Matches = append(out.Matches, abi.RepoSearchMatch{Path: p, Line: i + 1, Content: string(line)})
		}
	}
	return out, nil
}

// logCall serves repo.log: first-parent history from the ref.
func (r *Room) logCall(ctx context.Context, c *kernel.Caller, a *abi.RepoLogArgs) (*abi.RepoLogResult, error) {
	limit := 30
	if a.Limit != nil {
		limit = min(max(*a.Limit, 1), 100)
	}
	if a.Offset < 0 {
		return nil, abi.E(abi.Invalid, "offset is 0 or more")
	}
	rec, g, cm, rev, err := r.openRead(ctx, c, a.Repo, a.Ref)
	if err != nil {
		return nil, err
	}
	out := &abi.RepoLogResult{Repo: rec.id(), Ref: rev, Limit: limit, Offset: a.Offset, Entries: []abi.RepoCommit{}}
	entries, err := firstParent(g, cm, a.Offset, limit)
	out.Entries = append(out.Entries, entries...)
	return out, err
}

// firstParent walks cm's first parents, skipping offset commits and
// returning at most limit.
func firstParent(g *git.Repository, cm *object.Commit, offset, limit int) ([]abi.RepoCommit, error) {
	var out []abi.RepoCommit
	for i := 0; cm != nil && len(out) < limit; i++ {
		if i >= offset {
			out = append(out, commitInfo(cm))
		}
		if len(cm.ParentHashes) == 0 {
			break
		}
		next, err := g.CommitObject(cm.ParentHashes[0])
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			break // a shallow history ends here
		}
		if err != nil {
			return out, err
		}
		cm = next
	}
	return out, nil
}

// commitInfo is cm as a log shows it.
func commitInfo(cm *object.Commit) abi.RepoCommit {
	ps := make([]string, len(cm.ParentHashes))
	for i, p := range cm.ParentHashes {
		ps[i] = p.String()
	}
	return abi.RepoCommit{Hash: cm.Hash.String(), TreeHash: cm.TreeHash.String(),
		Author: cm.Author.Name, AuthorEmail: cm.Author.Email, AuthorTime: cm.Author.When.Unix(),
		Committer: cm.Committer.Name, CommitterEmail: cm.Committer.Email, CommitTime: cm.Committer.When.Unix(),
		Message: cm.Message, Parents: ps}
}
