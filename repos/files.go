package repos

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// srcPath is where the room's files are bound.
const srcPath = "/src/repos"

// maxLogFile bounds the commits a log file shows.
const maxLogFile = 10000

// The namespace of a repository, in the way Plan 9's git file server
// shows one: read-only, every listing and every read a syscall made as
// the reader.
//
//	/src/repos/<owner>/<name>/log                     main's first-parent history
//	/src/repos/<owner>/<name>/refs/heads/<b>/head     the branch's commit hash
//	/src/repos/<owner>/<name>/refs/heads/<b>/log      its first-parent history
//	/src/repos/<owner>/<name>/refs/heads/<b>/tree/... its files
//	/src/repos/<owner>/<name>/refs/tags/<t>/...       the same for a tag

// topDir is /src/repos: a directory per owner with a repository the
// reader may read.
func (r *Room) topDir() vfs.Dir {
	return &vfs.FuncDir{Meta: ns.RootMeta(srcPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.RepoList, &abi.RepoListArgs{})
			if err != nil {
				return nil, err
			}
			var out []vfs.DirEntry
			seen := map[string]bool{}
			for _, info := range res.Repos {
				if seen[info.Owner] {
					continue
				}
				seen[info.Owner] = true
				if u, err := r.k.UserByName(ctx, info.Owner); err == nil && u != nil {
					out = append(out, vfs.DirEntry{Name: info.Owner, Node: r.ownerDir(*u)})
				}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			u, err := r.k.UserByName(ctx, name)
			if err != nil || u == nil || !validName(name) {
				return nil, vfs.ErrNotExist
			}
			return r.ownerDir(*u), nil
		}}
}

// metaOf is the Meta of the node at path that user u owns, with mode.
func metaOf(u abi.User, path string, mode fs.FileMode) *ns.Meta {
	group := fmt.Sprint(u.Gid)
	switch u.Gid {
	case kernel.RootGID:
		group = "root"
	case kernel.UsersGID:
		group = kernel.UsersGroup
	}
	host := int(u.Uid)
	if u.HostUID != nil {
		host = *u.HostUID
	}
	return &ns.Meta{Path: path, Uid: u.Uid, Gid: u.Gid, Mode: mode, Owner: u.Username, Group: group, HostUID: host}
}

// ownerDir is /src/repos/<owner>: the owner's repositories the reader
// may read. A private one of another user is not listed, but found (its
// directory refuses the reader: 403, EACCES).
func (r *Room) ownerDir(u abi.User) vfs.Dir {
	path := srcPath + "/" + u.Username
	return &vfs.FuncDir{Meta: metaOf(u, path, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.RepoList, &abi.RepoListArgs{Owner: u.Username})
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, 0, len(res.Repos))
			for _, info := range res.Repos {
				out = append(out, vfs.DirEntry{Name: info.Name, Node: r.repoDir(u, info.Name, info.Public)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if !validName(name) {
				return nil, vfs.ErrNotExist
			}
			rec, err := r.lookup(ctx, u.Username, name)
			if err != nil {
				return nil, err
			}
			if rec == nil {
				return nil, vfs.ErrNotExist
			}
			return r.repoDir(u, name, rec.Public), nil
		}}
}

// repoDir is /src/repos/<owner>/<name>: log and refs. A private
// repository's directory is its owner's alone (0500).
func (r *Room) repoDir(u abi.User, name string, public bool) vfs.Dir {
	path := srcPath + "/" + u.Username + "/" + name
	repo := u.Username + "/" + name
	dmode, fmode := fs.FileMode(0o500), fs.FileMode(0o400)
	if public {
		dmode, fmode = 0o555, 0o444
	}
	refs := &vfs.FuncDir{Meta: metaOf(u, path+"/refs", fs.ModeDir|dmode),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			return []vfs.DirEntry{
				{Name: "heads", Node: r.refDir(u, repo, path+"/refs/heads", "heads", "", dmode, fmode)},
				{Name: "tags", Node: r.refDir(u, repo, path+"/refs/tags", "tags", "", dmode, fmode)},
			}, nil
		}}
	refs.Find = findIn(refs)
	d := &vfs.FuncDir{Meta: metaOf(u, path, fs.ModeDir|dmode),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			if _, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.RepoRefs, &abi.RepoArgs{Repo: repo}); err != nil {
				return nil, err
			}
			return []vfs.DirEntry{
				{Name: "log", Node: r.logFile(u, repo, path+"/log", "", fmode)},
				{Name: "refs", Node: refs},
			}, nil
		}}
	d.Find = findIn(d)
	return d
}

// findIn is a Find that looks a name up in d's listing.
func findIn(d *vfs.FuncDir) func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	return func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
		list, err := d.List(ctx, cred)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			if e.Name == name {
				return e.Node, nil
			}
		}
		return nil, vfs.ErrNotExist
	}
}

// refDir is refs/heads or refs/tags, or a directory under one: prefix is
// the ref name so far ("" at the top). A ref's own directory holds head,
// log and tree; a name with a slash (feature/x) is a directory per part.
func (r *Room) refDir(u abi.User, repo, path, kind, prefix string, dmode, fmode fs.FileMode) vfs.Dir {
	d := &vfs.FuncDir{Meta: metaOf(u, path, fs.ModeDir|dmode),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.RepoRefs, &abi.RepoArgs{Repo: repo})
			if err != nil {
				return nil, err
			}
			refs := res.Heads
			if kind == "tags" {
				refs = res.Tags
			}
			var out []vfs.DirEntry
			if h, ok := refs[prefix]; ok && prefix != "" {
				full := "refs/" + kind + "/" + prefix
				out = append(out,
					vfs.DirEntry{Name: "head", Node: &vfs.View{Meta: metaOf(u, path+"/head", fmode), Render: func(context.Context, vfs.Cred) ([]byte, error) {
						return []byte(h + "\n"), nil
					}}},
					vfs.DirEntry{Name: "log", Node: r.logFile(u, repo, path+"/log", full, fmode)},
					vfs.DirEntry{Name: "tree", Node: r.treeDir(u, repo, full, path+"/tree", "", dmode, fmode)})
			}
			seen := map[string]bool{}
			var names []string
			for name := range refs {
				rest, ok := name, prefix == ""
				if !ok {
					rest, ok = strings.CutPrefix(name, prefix+"/")
				}
				if !ok {
					continue
				}
				part, _, _ := strings.Cut(rest, "/")
				if !seen[part] && part != "head" && part != "log" && part != "tree" {
					seen[part] = true
					names = append(names, part)
				}
			}
			sort.Strings(names)
			for _, part := range names {
				sub := part
				if prefix != "" {
					sub = prefix + "/" + part
				}
				out = append(out, vfs.DirEntry{Name: part, Node: r.refDir(u, repo, path+"/"+part, kind, sub, dmode, fmode)})
			}
			return out, nil
		}}
	d.Find = findIn(d)
	return d
}

// treeDir is a directory of a ref's tree (dir: its path in the tree).
func (r *Room) treeDir(u abi.User, repo, ref, path, dir string, dmode, fmode fs.FileMode) vfs.Dir {
	d := &vfs.FuncDir{Meta: metaOf(u, path, fs.ModeDir|dmode),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.RepoRead, &abi.RepoReadArgs{Repo: repo, Ref: ref, Path: dir})
			if err != nil {
				return nil, err
			}
			if res.Kind != "tree" {
				return nil, abi.E(abi.Invalid, abi.Path(path), "not a directory")
			}
			out := make([]vfs.DirEntry, 0, len(res.Entries))
			for _, e := range res.Entries {
				switch e.Type {
				case "tree":
					out = append(out, vfs.DirEntry{Name: e.Name, Node: r.treeDir(u, repo, ref, path+"/"+e.Name, e.Path, dmode, fmode)})
				case "blob", "symlink":
					mode := fmode
					if e.Mode == "100755" {
						mode |= fmode >> 2 & 0o111
					}
					out = append(out, vfs.DirEntry{Name: e.Name, Node: r.blobFile(u, repo, ref, path+"/"+e.Name, e.Path, mode)})
				}
			}
			return out, nil
		}}
	d.Find = findIn(d)
	return d
}

// blobFile is a file of a ref's tree: its bytes at the ref (a symbolic
// link's target as text: nothing in a repository points outside it).
func (r *Room) blobFile(u abi.User, repo, ref, path, file string, mode fs.FileMode) *vfs.View {
	return &vfs.View{Meta: metaOf(u, path, mode), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		return kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.RepoBlob, &abi.RepoBlobArgs{Repo: repo, Ref: ref, Path: file})
	}}
}

// logFile is a ref's first-parent history as git log shows it (ref ""
// is main, else HEAD), newest first, at most maxLogFile commits.
func (r *Room) logFile(u abi.User, repo, path, ref string, mode fs.FileMode) *vfs.View {
	return &vfs.View{Meta: metaOf(u, path, mode), Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
		var b strings.Builder
		limit := 100
		for off := 0; off < maxLogFile; off += limit {
			res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.RepoLog, &abi.RepoLogArgs{Repo: repo, Ref: ref, Limit: &limit, Offset: off})
			if err != nil {
				var e *abi.Error
				if off == 0 || !errors.As(err, &e) {
					return nil, err
				}
				break
			}
			for _, c := range res.Entries {
				writeLogEntry(&b, c)
			}
			if len(res.Entries) < limit {
				break
			}
		}
		return []byte(b.String()), nil
	}}
}

// writeLogEntry writes one commit as git log's medium format does.
func writeLogEntry(b *strings.Builder, c abi.RepoCommit) {
	fmt.Fprintf(b, "commit %s\nAuthor: %s <%s>\nDate:   %s\n\n", c.Hash, c.Author, c.AuthorEmail,
		time.Unix(c.AuthorTime, 0).UTC().Format("Mon Jan 2 15:04:05 2006 -0700"))
	for _, l := range strings.Split(strings.TrimRight(c.Message, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	b.WriteString("\n")
}
