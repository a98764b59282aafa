package repos

import (
	"context"
	"io/fs"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// wsPath is where the workspaces' ctl is bound.
const wsPath = "/src/workspaces"

// wsDir is /src/workspaces: ctl and err. Its verbs act on the writer's
// own workspaces (root: anyone's), each a syscall as the writer:
//
//	checkpoint <id> [message...]   repo.workspace.checkpoint
//	merge <id> <branch>            repo.workspace.merge
//	remove <id>                    repo.workspace.remove
func (r *Room) wsDir() vfs.Dir {
	ctl := r.space.Ctl(wsPath, ns.RootMeta(wsPath+"/ctl", 0o666), wsVerbs())
	fixed := []vfs.DirEntry{{Name: "ctl", Node: ctl}, {Name: "err", Node: r.space.ErrView(wsPath)}}
	return &vfs.FuncDir{Meta: ns.RootMeta(wsPath, fs.ModeDir|0o555),
		List: func(context.Context, vfs.Cred) ([]vfs.DirEntry, error) { return fixed, nil },
		Find: func(_ context.Context, _ vfs.Cred, name string) (vfs.Node, error) {
			for _, e := range fixed {
				if e.Name == name {
					return e.Node, nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
}

// wsVerbs are /src/workspaces/ctl's verbs.
func wsVerbs() map[string]ns.CtlVerb {
	return map[string]ns.CtlVerb{
		"checkpoint": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.WorkspaceCheckpointArgs{}
			if l.JSON != nil {
				return kernel.Bind(abi.RepoWorkspaceCheckpoint, a), nil
			}
			if len(l.Words) < 1 {
				return kernel.Bind(abi.RepoWorkspaceCheckpoint, nil), abi.E(abi.Invalid, "usage: checkpoint <id> [message...]")
			}
			a.WorkspaceID, a.Message = l.Words[0], strings.Join(l.Words[1:], " ")
			return kernel.Bind(abi.RepoWorkspaceCheckpoint, a), nil
		},
		"merge": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.WorkspaceMergeArgs{}
			if l.JSON != nil {
				return kernel.Bind(abi.RepoWorkspaceMerge, a), nil
			}
			if len(l.Words) != 2 {
				return kernel.Bind(abi.RepoWorkspaceMerge, nil), abi.E(abi.Invalid, "usage: merge <id> <branch>")
			}
			a.WorkspaceID, a.Branch = l.Words[0], l.Words[1]
			return kernel.Bind(abi.RepoWorkspaceMerge, a), nil
		},
		"remove": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.WorkspaceRemoveArgs{}
			if l.JSON != nil {
				return kernel.Bind(abi.RepoWorkspaceRemove, a), nil
			}
			if len(l.Words) != 1 {
				return kernel.Bind(abi.RepoWorkspaceRemove, nil), abi.E(abi.Invalid, "usage: remove <id>")
			}
			a.WorkspaceID = l.Words[0]
			return kernel.Bind(abi.RepoWorkspaceRemove, a), nil
		},
	}
}
