package abi

// Workspaces (seed 003's proc.spawn workspace modes and
// sys.workspace.list): /workspaces/<id>, a working tree owned by the user
// who made it, backed by the repository <owner>/ws-<root> of the repos
// room. A fork of a process gets a working tree of its own on a branch
// of the same repository; a merge brings a branch back into the
// workspace's main working tree.

// WorkspaceMakeArgs are fs.workspace.make's args (internal): ID is the
// directory's name under /workspaces.
type WorkspaceMakeArgs struct {
	ID string `json:"id"`
}

// WorkspaceOpenArgs are repo.workspace.open's args (internal; proc.spawn
// makes it as the spawning user): Mode "new" makes a workspace (Label,
// Kind); "attach" opens WorkspaceID, or, with Branch, makes a working
// tree of its own on the branch Branch of WorkspaceID's repository,
// from WorkspaceID's files now (a fork).
type WorkspaceOpenArgs struct {
	Mode        string `json:"mode"`
	WorkspaceID string `json:"workspaceId,omitempty"`
	Branch      string `json:"branch,omitempty"`
	Label       string `json:"label,omitempty"`
	Kind        string `json:"kind,omitempty"`
}

// WorkspaceOpenResult is repo.workspace.open's result: the working
// tree's id, directory (the process's cwd), repository and branch.
type WorkspaceOpenResult struct {
	WorkspaceID string `json:"workspaceId"`
	Dir         string `json:"dir"`
	Repo        string `json:"repo"`
	Branch      string `json:"branch"`
	Created     bool   `json:"created"`
}

// WorkspaceCheckpointArgs are repo.workspace.checkpoint's args: the
// working tree's files are committed on its branch (if they changed),
// with Message. AllowEmpty commits even when nothing changed (proc.kill
// and proc.reset do, so that the history marks them).
type WorkspaceCheckpointArgs struct {
	WorkspaceID string `json:"workspaceId"`
	Message     string `json:"message,omitempty"`
	AllowEmpty  bool   `json:"allowEmpty,omitempty"`
}

// WorkspaceCheckpointResult is repo.workspace.checkpoint's result: Head
// is the branch's head, Changed whether this checkpoint made it.
type WorkspaceCheckpointResult struct {
	WorkspaceID string `json:"workspaceId"`
	Repo        string `json:"repo"`
	Branch      string `json:"branch"`
	Head        string `json:"head"`
	Changed     bool   `json:"changed"`
}

// WorkspaceMergeArgs are repo.workspace.merge's args: the branch Branch
// (a fork's) is merged into the workspace WorkspaceID's branch.
type WorkspaceMergeArgs struct {
	WorkspaceID string `json:"workspaceId"`
	Branch      string `json:"branch"`
}

// WorkspaceMergeResult is repo.workspace.merge's result: the merge
// commit (Head) and the paths it brought into the working tree.
type WorkspaceMergeResult struct {
	WorkspaceID string   `json:"workspaceId"`
	Branch      string   `json:"branch"`
	Head        string   `json:"head"`
	Merged      bool     `json:"merged"`
	Paths       []string `json:"paths"`
}

// WorkspaceRemoveArgs are repo.workspace.remove's args.
type WorkspaceRemoveArgs struct {
	WorkspaceID string `json:"workspaceId"`
}

// WorkspaceRemoveResult is repo.workspace.remove's result: the working
// tree's last commit (Head) on Branch of Repo, which keep its history.
type WorkspaceRemoveResult struct {
	WorkspaceID string `json:"workspaceId"`
	Repo        string `json:"repo"`
	Branch      string `json:"branch"`
	Head        string `json:"head"`
}

// WorkspaceListArgs are sys.workspace.list's args: Uid (root only; a
// user may name only themselves) keeps one user's; without it root sees
// every workspace, a user their own.
type WorkspaceListArgs struct {
	Uid *uint32 `json:"uid,omitempty"`
}

// WorkspaceInfo is one workspace sys.workspace.list shows (the seed's
// fields; Repo, Root and Dir are ours: a fork's working tree has the Root
// of the workspace it branched from).
type WorkspaceInfo struct {
	WorkspaceID   string  `json:"workspaceId"`
	OwnerUid      uint32  `json:"ownerUid"`
	Label         *string `json:"label"`
	Kind          string  `json:"kind"`
	State         string  `json:"state"`
	CreatedAt     int64   `json:"createdAt"`
	UpdatedAt     int64   `json:"updatedAt"`
	DefaultBranch string  `json:"defaultBranch"`
	HeadCommit    *string `json:"headCommit"`
	// ActiveProcess is the newest of the processes working in it
	// (proc.list's, as the caller sees them), ProcessCount how many.
	ActiveProcess *WorkspaceProcess `json:"activeProcess"`
	ProcessCount  int               `json:"processCount"`
	Repo          string            `json:"repo"`
	Root          string            `json:"root"`
	Dir           string            `json:"dir"`
}

// WorkspaceProcess is the seed's summary of a workspace's process.
type WorkspaceProcess struct {
	Pid       string  `json:"pid"`
	Label     *string `json:"label"`
	Cwd       string  `json:"cwd"`
	CreatedAt int64   `json:"createdAt"`
}

// WorkspaceListResult is sys.workspace.list's result, oldest first.
type WorkspaceListResult struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
}
