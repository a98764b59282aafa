package repos

import (
	"context"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/plumbing/object"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// maxDiffFiles bounds the files a diff shows hunks of; the rest are
// counted and listed without hunks.
const maxDiffFiles = 300

// contextOf is a diff's context lines: 3 by default, clamped to 0-20.
func contextOf(n *int) int {
	if n == nil {
		return 3
	}
	return min(max(*n, 0), 20)
}

// diff serves repo.diff: a commit against its first parent.
func (r *Room) diff(ctx context.Context, c *kernel.Caller, a *abi.RepoDiffArgs) (*abi.RepoDiffResult, error) {
	if a.Commit == "" {
		return nil, abi.E(abi.Invalid, "repo.diff needs a commit")
	}
	path, err := cleanPath(a.Path)
	if err != nil {
		return nil, err
	}
	rec, g, cm, _, err := r.openRead(ctx, c, a.Repo, a.Commit)
	if err != nil {
		return nil, err
	}
	out := &abi.RepoDiffResult{Repo: rec.id(), CommitHash: cm.Hash.String()}
	var from *object.Tree
	if len(cm.ParentHashes) > 0 {
		p, err := g.CommitObject(cm.ParentHashes[0])
		if err == nil {
			ph := p.Hash.String()
			out.ParentHash = &ph
			if from, err = p.Tree(); err != nil {
				return nil, err
			}
		}
	}
	to, err := cm.Tree()
	if err != nil {
		return nil, err
	}
	out.Files, out.Stats, err = diffTrees(ctx, from, to, contextOf(a.Context), false, path)
	return out, err
}

// compare serves repo.compare: base to head.
func (r *Room) compare(ctx context.Context, c *kernel.Caller, a *abi.RepoCompareArgs) (*abi.RepoCompareResult, error) {
	path, err := cleanPath(a.Path)
	if err != nil {
		return nil, err
	}
	if a.Base == "" || a.Head == "" {
		return nil, abi.E(abi.Invalid, "repo.compare needs base and head")
	}
	rec, g, head, _, err := r.openRead(ctx, c, a.Repo, a.Head)
	if err != nil {
		return nil, err
	}
	base, _, err := resolve(g, a.Base)
	if err != nil {
		return nil, err
	}
	from, err := base.Tree()
	if err != nil {
		return nil, err
	}
	to, err := head.Tree()
	if err != nil {
		return nil, err
	}
	out := &abi.RepoCompareResult{Repo: rec.id(), Base: base.Hash.String(), Head: head.Hash.String()}
	out.Files, out.Stats, err = diffTrees(ctx, from, to, contextOf(a.Context), a.Stat, path)
	return out, err
}

// diffTrees is the change from one tree (nil: empty) to another, of the
// files at or under path ("" all): each file's hunks with n lines of
// context (none if stat), and the counts.
func diffTrees(ctx context.Context, from, to *object.Tree, n int, stat bool, path string) ([]abi.RepoDiffFile, abi.RepoDiffStats, error) {
	var st abi.RepoDiffStats
	changes, err := object.DiffTreeWithOptions(ctx, from, to, &object.DiffTreeOptions{})
	if err != nil {
		return nil, st, err
	}
	files := []abi.RepoDiffFile{}
	for _, ch := range changes {
		name := ch.To.Name
		if name == "" {
			name = ch.From.Name
		}
		if path != "" && name != path && !strings.HasPrefix(name, path+"/") {
			continue
		}
		f := abi.RepoDiffFile{Path: name, Status: "modified"}
		if !ch.From.TreeEntry.Hash.IsZero() {
			f.OldHash = ch.From.TreeEntry.Hash.String()
		} else {
			f.Status = "added"
		}
		if !ch.To.TreeEntry.Hash.IsZero() {
			f.NewHash = ch.To.TreeEntry.Hash.String()
		} else {
			f.Status = "deleted"
		}
		patch, err := ch.PatchContext(ctx)
		if err != nil {
			return nil, st, err
		}
		for _, fp := range patch.FilePatches() {
			if fp.IsBinary() {
				if !stat {
					f.Hunks = []abi.RepoDiffHunk{{Lines: []abi.RepoDiffLine{{Tag: "binary", Content: "Binary files differ"}}}}
				}
				continue
			}
			hunks, add, del := hunksOf(fp.Chunks(), n)
			st.Additions += add
			st.Deletions += del
			if !stat && len(files) < maxDiffFiles {
				f.Hunks = append(f.Hunks, hunks...)
			}
		}
		files = append(files, f)
	}
	st.FilesChanged = len(files)
	return files, st, nil
}

// line is one line of a file's whole diff, with its numbers in the old
// and the new file (1-based; the side a line is not on has the next).
type line struct {
	tag      string
	text     string
	old, new int
}

// hunksOf turns a file's chunks into unified hunks with n lines of
// context, and counts the added and deleted lines.
func hunksOf(chunks []diff.Chunk, n int) ([]abi.RepoDiffHunk, int, int) {
	var lines []line
	o, nw, add, del := 1, 1, 0, 0
	for _, ch := range chunks {
		text := ch.Content()
		parts := strings.SplitAfter(text, "\n")
		if len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		for _, p := range parts {
			l := line{text: strings.TrimSuffix(p, "\n"), old: o, new: nw}
			switch ch.Type() {
			case diff.Equal:
				l.tag = "context"
				o++
				nw++
			case diff.Add:
				l.tag = "add"
				nw++
				add++
			case diff.Delete:
				l.tag = "delete"
				o++
				del++
			}
			lines = append(lines, l)
		}
	}
	var hunks []abi.RepoDiffHunk
	for i := 0; i < len(lines); {
		if lines[i].tag == "context" {
			i++
			continue
		}
		start := max(i-n, 0)
		end := i
		// Extend while the next change is within 2n context lines.
		for j := i; j < len(lines); j++ {
			if lines[j].tag != "context" {
				end = j
			} else if j-end > 2*n {
				break
			}
		}
		stop := min(end+n+1, len(lines))
		h := abi.RepoDiffHunk{OldStart: lines[start].old, NewStart: lines[start].new}
		for _, l := range lines[start:stop] {
			h.Lines = append(h.Lines, abi.RepoDiffLine{Tag: l.tag, Content: l.text})
			if l.tag != "add" {
				h.OldCount++
			}
			if l.tag != "delete" {
				h.NewCount++
			}
		}
		if h.OldCount == 0 {
			h.OldStart--
		}
		if h.NewCount == 0 {
			h.NewStart--
		}
		hunks = append(hunks, h)
		i = stop
	}
	return hunks, add, del
}
