package abi

// The repos room's syscalls (repo.*, seed 003): git repositories at
// /src/repos/<owner>/<name>. Owners (and root) write; a public repo is
// readable by every user.
var (
	RepoList = Call[RepoListArgs, *RepoListResult]{Name: "repo.list", Grant: Users,
		Doc: "The repositories the caller may read, optionally one owner's."}
	RepoCreate = Call[RepoCreateArgs, *RepoCreateResult]{Name: "repo.create", Grant: Users,
		Doc: "Makes a repository (owner: the caller) with an empty first commit on ref (main)."}
	RepoRefs = Call[RepoArgs, *RepoRefsResult]{Name: "repo.refs", Grant: Users,
		Doc: "A repository's branches and tags."}
	RepoRead = Call[RepoReadArgs, *RepoReadResult]{Name: "repo.read", Grant: Users,
		Doc: "A tree or a file of a repository at a ref (default main) and path."}
	RepoSearch = Call[RepoSearchArgs, *RepoSearchResult]{Name: "repo.search", Grant: Users,
		Doc: "The lines of a repository's files at a ref that contain a literal query."}
	RepoLog = Call[RepoLogArgs, *RepoLogResult]{Name: "repo.log", Grant: Users,
		Doc: "A ref's first-parent history, newest first (limit 1-100, default 30)."}
	RepoDiff = Call[RepoDiffArgs, *RepoDiffResult]{Name: "repo.diff", Grant: Users,
		Doc: "One commit's changes against its first parent (context 0-20, default 3)."}
	RepoCompare = Call[RepoCompareArgs, *RepoCompareResult]{Name: "repo.compare", Grant: Users,
		Doc: "The changes from a base revision to a head revision."}
	RepoApply = Call[RepoApplyArgs, *RepoApplyResult]{Name: "repo.apply", Grant: Users,
		Doc: "Commits put, delete and move operations to a ref at once; a stale expectedHead is a 409."}
	RepoImport = Call[RepoImportArgs, *RepoImportResult]{Name: "repo.import", Grant: Users,
		Doc: "Makes or refreshes a repository from an upstream http(s) or git URL and ref."}
	RepoBlob = Call[RepoBlobArgs, []byte]{Name: "repo.blob", Grant: Users, Flags: Internal,
		Doc: "The bytes of a file of a repository at a ref (the namespace's tree files)."}
	RepoUpload = Call[RepoWireArgs, struct{}]{Name: "repo.upload", Grant: Users, Flags: Internal,
		Doc: "git's upload-pack (fetch, clone) of a repository the caller may read, over a transport."}
	RepoReceive = Call[RepoWireArgs, struct{}]{Name: "repo.receive", Grant: Users, Flags: Internal,
		Doc: "git's receive-pack (push) to a repository the caller may write, over a transport; each ref's old value is its expected head."}
	RepoWorkspaceOpen = Call[WorkspaceOpenArgs, *WorkspaceOpenResult]{Name: "repo.workspace.open", Grant: Users, Flags: Internal,
		Doc: "Makes (new) or opens (attach; with a branch, a working tree of its own on that branch) a workspace of the caller's."}
	RepoWorkspaceCheckpoint = Call[WorkspaceCheckpointArgs, *WorkspaceCheckpointResult]{Name: "repo.workspace.checkpoint", Grant: Users,
		Doc: "Commits a workspace's files on its branch when they changed."}
	RepoWorkspaceMerge = Call[WorkspaceMergeArgs, *WorkspaceMergeResult]{Name: "repo.workspace.merge", Grant: Users,
		Doc: "Merges a fork's branch into a workspace: first merge wins; a conflict is a 409 naming its paths, both branches kept."}
	RepoWorkspaceRemove = Call[WorkspaceRemoveArgs, *WorkspaceRemoveResult]{Name: "repo.workspace.remove", Grant: Users,
		Doc: "Commits a workspace's files a last time and removes its working tree; one a live process works in is a 409."}
	SysWorkspaceList = Call[WorkspaceListArgs, *WorkspaceListResult]{Name: "sys.workspace.list", Grant: Users,
		Doc: "The caller's workspaces (root: every user's, or one uid's)."}
)
