package repos

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// A merge brings a fork's branch into a working tree: first merge wins.
// Both working trees are checkpointed, then each path the branch changed
// since the merge base is taken into the target unless the target changed
// it too, differently: such a path is a conflict, and a merge with any
// conflict is a 409 naming them that writes nothing (both branches keep
// their commits; merge again once the fork has taken the target's
// change). A clean merge writes the taken files into the target's
// directory as the caller and commits them with both heads as parents.

// treeOf is the flat tree of the commit h.
func (r *Room) treeOf(g *git.Repository, h plumbing.Hash) (flatTree, error) {
	cm, err := g.CommitObject(h)
	if err != nil {
		return nil, err
	}
	return flatten(g.Storer, cm.TreeHash)
}

// workspaceMerge serves repo.workspace.merge.
func (r *Room) workspaceMerge(ctx context.Context, c *kernel.Caller, a *abi.WorkspaceMergeArgs) (*abi.WorkspaceMergeResult, error) {
	dst, err := r.workspaceByID(ctx, c, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if _, err := branchRef(a.Branch); err != nil {
		return nil, err
	}
	if a.Branch == dst.Branch {
		return nil, abi.E(abi.Invalid, abi.Path(a.Branch), "a working tree's own branch is merged already")
	}
	src, err := r.workspaceOnBranch(ctx, dst.Root, a.Branch)
	if err != nil {
		return nil, err
	}
	out := &abi.WorkspaceMergeResult{WorkspaceID: dst.ID, Branch: a.Branch, Paths: []string{}}
	if src != nil {
		if _, _, err := r.checkpoint(ctx, c, src, "checkpoint before merging into "+dst.Branch); err != nil {
			return nil, err
		}
	}
	if _, _, err := r.checkpoint(ctx, c, dst, "checkpoint before merging "+a.Branch); err != nil {
		return nil, err
	}
	rec, err := r.lookup(ctx, dst.Owner, wsPrefix+dst.Root)
	if err != nil || rec == nil {
		return nil, abi.E(abi.NotExist, abi.Path(dst.repo().id()), "no repository")
	}
	unlock := r.lock(rec)
	defer unlock()
	g, err := r.open(rec)
	if err != nil {
		return nil, err
	}
	dref, err := g.Reference(plumbing.NewBranchReferenceName(dst.Branch), false)
	if err != nil {
		return nil, abi.E(abi.NotExist, abi.Path(rec.id()+"@"+dst.Branch), err)
	}
	sref, err := g.Reference(plumbing.NewBranchReferenceName(a.Branch), false)
	if err != nil {
		return nil, abi.E(abi.NotExist, abi.Path(rec.id()+"@"+a.Branch), "no such branch")
	}
	dc, err := g.CommitObject(dref.Hash())
	if err != nil {
		return nil, err
	}
	sc, err := g.CommitObject(sref.Hash())
	if err != nil {
		return nil, err
	}
	bases, err := dc.MergeBase(sc)
	if err != nil {
		return nil, err
	}
	base := flatTree{}
	if len(bases) > 0 {
		if bases[0].Hash == sc.Hash {
			out.Head = dc.Hash.String() // the branch is in the target already
			return out, nil
		}
		if base, err = flatten(g.Storer, bases[0].TreeHash); err != nil {
			return nil, err
		}
	}
	ours, err := flatten(g.Storer, dc.TreeHash)
	if err != nil {
		return nil, err
	}
	theirs, err := flatten(g.Storer, sc.TreeHash)
	if err != nil {
		return nil, err
	}
	merged, taken, conflicts := merge3(base, ours, theirs)
	if len(conflicts) > 0 {
		return nil, abi.E(abi.Busy, abi.Path(dst.dir()), fmt.Sprintf("merge conflict: %s changed on both %s and %s; nothing was merged, both branches are kept",
			strings.Join(conflicts, ", "), dst.Branch, a.Branch))
	}
	for _, p := range taken {
		if e, ok := merged[p]; ok {
			b, err := readBlob(g, e.hash)
			if err != nil {
				return nil, err
			}
			err = r.writeAs(ctx, c, dst.dir()+"/"+p, b)
		} else {
			err = r.deleteAs(ctx, c, dst.dir()+"/"+p)
		}
		if err != nil {
			return nil, err
		}
	}
	th, err := writeTree(g.Storer, merged)
	if err != nil {
		return nil, err
	}
	sig := r.signature(c)
	h, err := putObject(g.Storer, &object.Commit{Author: sig, Committer: sig, TreeHash: th,
		ParentHashes: []plumbing.Hash{dc.Hash, sc.Hash},
		Message:      fmt.Sprintf("Merge branch %s into %s\n\n%s\n", a.Branch, dst.Branch, summarize(taken))})
	if err != nil {
		return nil, err
	}
	if err := g.Storer.CheckAndSetReference(plumbing.NewHashReference(dref.Name(), h), dref); err != nil {
		return nil, abi.E(abi.Busy, abi.Path(rec.id()+"@"+dst.Branch), err)
	}
	r.touch(ctx, rec)
	out.Head, out.Merged, out.Paths = h.String(), true, taken
	return out, nil
}

// summaryPath is the continuity summary proc.checkpoint writes at the
// top of a working tree: a kill or reset on each side changes it, so a
// merge keeps the target's rather than calling it a conflict (each
// process's own files are under .gsv/processes/<pid>/ and merge cleanly).
const summaryPath = ".gsv/summary.md"

// merge3 merges theirs into ours from base: the paths theirs changed are
// taken (sorted) unless ours changed them differently (conflicts, sorted;
// summaryPath stays ours then); a file that would stand where the other
// side has a directory is a conflict too.
func merge3(base, ours, theirs flatTree) (merged flatTree, taken, conflicts []string) {
	merged = flatTree{}
	for p, e := range ours {
		merged[p] = e
	}
	paths := map[string]bool{}
	for p := range base {
		paths[p] = true
	}
	for p := range theirs {
		paths[p] = true
	}
	for p := range paths {
		b, inB := base[p]
		t, inT := theirs[p]
		if inB == inT && b == t {
			continue // theirs left it
		}
		o, inO := ours[p]
		if inO == inT && o == t {
			continue // the same change on both
		}
		if inO != inB || o != b {
			if p != summaryPath {
				conflicts = append(conflicts, p)
			}
			continue // the target's summary stays: each side writes its own
		}
		if inT {
			merged[p] = t
		} else {
			delete(merged, p)
		}
		taken = append(taken, p)
	}
	for _, p := range taken {
		if _, ok := merged[p]; ok && (merged.isDir(p) || merged.fileOnTheWay(p) != "") {
			conflicts = append(conflicts, p)
		}
	}
	sort.Strings(taken)
	sort.Strings(conflicts)
	return merged, taken, conflicts
}
