package proc

import (
	"context"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Workspaces are the repos room's (repo.workspace.*): proc reaches them
// through the dispatcher, as the caller, and keeps only a process's
// workspace id and cwd.

// openWorkspace makes or opens the workspace spec asks for, as c, for a
// process spawned with parent (nil: none): new, attach (with a branch: a
// working tree of its own on it, a fork) or inherit of a parent with a
// workspace. It returns nil for none, and for inherit of a parent
// without one.
func (m *engine) openWorkspace(ctx context.Context, c *kernel.Caller, spec *abi.WorkspaceSpec, parent *abi.Process) (*abi.WorkspaceOpenResult, error) {
	if spec == nil {
		return nil, nil
	}
	args := &abi.WorkspaceOpenArgs{Mode: spec.Mode, WorkspaceID: spec.WorkspaceID, Branch: spec.Branch, Label: spec.Label, Kind: spec.Kind}
	switch spec.Mode {
	case "new", "attach":
	case "inherit":
		if parent == nil || parent.WorkspaceID == nil || *parent.WorkspaceID == "" {
			return nil, nil
		}
		args = &abi.WorkspaceOpenArgs{Mode: "attach", WorkspaceID: *parent.WorkspaceID}
	default:
		return nil, nil
	}
	return kernel.Do(ctx, m.k, c, abi.RepoWorkspaceOpen, args)
}

// setWorkspace records that pid works in ws, its cwd.
func (m *engine) setWorkspace(ctx context.Context, pid string, ws *abi.WorkspaceOpenResult) error {
	_, err := m.st.Exec(ctx, `UPDATE proc_processes SET cwd=?, workspace_id=? WHERE pid=?`, ws.Dir, ws.WorkspaceID, pid)
	return err
}

// checkpointWorkspace is what proc.kill and proc.reset do first for a
// process with a workspace: the continuity files (proc.checkpoint) and
// then a commit of the workspace's files (repo.workspace.checkpoint),
// both as c. A workspace that is gone is nothing to checkpoint.
func (m *engine) checkpointWorkspace(ctx context.Context, c *kernel.Caller, p *abi.Process, event string) error {
	if p.WorkspaceID == nil || *p.WorkspaceID == "" {
		return nil
	}
	if _, err := m.sysCheckpoint(ctx, c, &abi.CheckpointArgs{Pid: p.Pid}); err != nil {
		if abi.KindOf(err) == abi.NotExist {
			return nil
		}
		return err
	}
	_, err := kernel.Do(ctx, m.k, c, abi.RepoWorkspaceCheckpoint, &abi.WorkspaceCheckpointArgs{WorkspaceID: *p.WorkspaceID,
		Message: "proc." + event + " " + p.Pid, AllowEmpty: true})
	if abi.KindOf(err) == abi.NotExist {
		return nil
	}
	return err
}
