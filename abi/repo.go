package abi

import "io"

// The repository domain (seed 003 repo.*): git repositories at
// /src/repos/<owner>/<name>, served by the repos room. A repo is named
// "owner/name"; a name alone means the caller's own.

// RepoInfo is one repository repo.list shows. Kind is "user" (made with
// repo.create or repo.import), "home" or "workspace".
type RepoInfo struct {
	Repo        string `json:"repo"`
	Owner       string `json:"owner"`
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Writable    bool   `json:"writable"`
	Public      bool   `json:"public"`
	Description string `json:"description,omitempty"`
	UpdatedAt   int64  `json:"updatedAt,omitempty"`
}

// RepoListArgs are repo.list's args: Owner, if set, keeps that owner's.
type RepoListArgs struct {
	Owner string `json:"owner,omitempty"`
}

// RepoListResult is repo.list's result, sorted by repo.
type RepoListResult struct {
	Repos []RepoInfo `json:"repos"`
}

// RepoCreateArgs are repo.create's args. Ref defaults to main. Public
// (not in the seed) makes the repository readable by every user.
type RepoCreateArgs struct {
	Repo        string `json:"repo"`
	Ref         string `json:"ref,omitempty"`
	Description string `json:"description,omitempty"`
	Public      bool   `json:"public,omitempty"`
}

// RepoCreateResult is repo.create's result: Created is false when the ref
// was already there.
type RepoCreateResult struct {
	Repo    string  `json:"repo"`
	Ref     string  `json:"ref"`
	Head    *string `json:"head"`
	Created bool    `json:"created"`
}

// RepoArgs name one repository (repo.refs).
type RepoArgs struct {
	Repo string `json:"repo"`
}

// RepoRefsResult is repo.refs's result: branch and tag names (short) to
// commit hashes.
type RepoRefsResult struct {
	Repo  string            `json:"repo"`
	Heads map[string]string `json:"heads"`
	Tags  map[string]string `json:"tags"`
}

// RepoReadArgs are repo.read's args: Ref defaults to main (any
// revision git understands: a branch, a tag, a hash, HEAD~2), Path to the
// root.
type RepoReadArgs struct {
	Repo string `json:"repo"`
	Ref  string `json:"ref,omitempty"`
	Path string `json:"path,omitempty"`
}

// RepoTreeEntry is one entry of a tree: Type is "tree", "blob" or
// "symlink"; Mode is git's octal mode.
type RepoTreeEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Mode string `json:"mode"`
	Hash string `json:"hash"`
	Type string `json:"type"`
	Size int64  `json:"size,omitempty"`
}

// RepoReadResult is repo.read's result: Kind "tree" with Entries, or
// "file" with Size, IsBinary and Content (null for a binary file).
type RepoReadResult struct {
	Repo     string          `json:"repo"`
	Ref      string          `json:"ref"`
	Path     string          `json:"path"`
	Kind     string          `json:"kind"`
	Entries  []RepoTreeEntry `json:"entries,omitempty"`
	Size     int64           `json:"size,omitempty"`
	IsBinary bool            `json:"isBinary,omitempty"`
	Content  *string         `json:"content,omitempty"`
}

// RepoSearchArgs are repo.search's args: Query is a non-empty literal.
type RepoSearchArgs struct {
	Repo   string `json:"repo"`
	Ref    string `json:"ref,omitempty"`
	Query  string `json:"query"`
	Prefix string `json:"prefix,omitempty"`
}

// RepoSearchMatch is one matching line.
type RepoSearchMatch struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// RepoSearchResult is repo.search's result.
type RepoSearchResult struct {
	Repo      string            `json:"repo"`
	Ref       string            `json:"ref"`
	Query     string            `json:"query"`
	Prefix    string            `json:"prefix,omitempty"`
	Truncated bool              `json:"truncated,omitempty"`
	Matches   []RepoSearchMatch `json:"matches"`
}

// RepoLogArgs are repo.log's args: Limit defaults to 30, clamped to
// 1-100; Offset to 0.
type RepoLogArgs struct {
	Repo   string `json:"repo"`
	Ref    string `json:"ref,omitempty"`
	Limit  *int   `json:"limit,omitempty"`
	Offset int    `json:"offset,omitempty"`
}

// RepoCommit is one commit of a log. Times are Unix seconds.
type RepoCommit struct {
	Hash           string   `json:"hash"`
	TreeHash       string   `json:"treeHash"`
	Author         string   `json:"author"`
	AuthorEmail    string   `json:"authorEmail"`
	AuthorTime     int64    `json:"authorTime"`
	Committer      string   `json:"committer"`
	CommitterEmail string   `json:"committerEmail"`
	CommitTime     int64    `json:"commitTime"`
	Message        string   `json:"message"`
	Parents        []string `json:"parents"`
}

// RepoLogResult is repo.log's result: first-parent history, newest first.
type RepoLogResult struct {
	Repo    string       `json:"repo"`
	Ref     string       `json:"ref"`
	Limit   int          `json:"limit"`
	Offset  int          `json:"offset"`
	Entries []RepoCommit `json:"entries"`
}

// RepoDiffArgs are repo.diff's args: Context defaults to 3, clamped to
// 0-20. Path, if set (not in the seed), keeps the files at or under it.
type RepoDiffArgs struct {
	Repo    string `json:"repo"`
	Commit  string `json:"commit"`
	Context *int   `json:"context,omitempty"`
	Path    string `json:"path,omitempty"`
}

// RepoDiffLine is one line of a hunk: Tag is "context", "add", "delete"
// or "binary".
type RepoDiffLine struct {
	Tag     string `json:"tag"`
	Content string `json:"content"`
}

// RepoDiffHunk is one hunk of a file's diff.
type RepoDiffHunk struct {
	OldStart int            `json:"oldStart"`
	OldCount int            `json:"oldCount"`
	NewStart int            `json:"newStart"`
	NewCount int            `json:"newCount"`
	Lines    []RepoDiffLine `json:"lines"`
}

// RepoDiffFile is one file of a diff: Status "added", "deleted" or
// "modified".
type RepoDiffFile struct {
	Path    string         `json:"path"`
	Status  string         `json:"status"`
	OldHash string         `json:"oldHash,omitempty"`
	NewHash string         `json:"newHash,omitempty"`
	Hunks   []RepoDiffHunk `json:"hunks,omitempty"`
}

// RepoDiffStats count a diff's files and lines.
type RepoDiffStats struct {
	FilesChanged int `json:"filesChanged"`
	Additions    int `json:"additions"`
	Deletions    int `json:"deletions"`
}

// RepoDiffResult is repo.diff's result: the commit against its first
// parent (none for a root commit).
type RepoDiffResult struct {
	Repo       string         `json:"repo"`
	CommitHash string         `json:"commitHash"`
	ParentHash *string        `json:"parentHash"`
	Stats      RepoDiffStats  `json:"stats"`
	Files      []RepoDiffFile `json:"files"`
}

// RepoCompareArgs are repo.compare's args: Stat omits the hunks. Path, if
// set (not in the seed), keeps the files at or under it.
type RepoCompareArgs struct {
	Repo    string `json:"repo"`
	Base    string `json:"base"`
	Head    string `json:"head"`
	Context *int   `json:"context,omitempty"`
	Stat    bool   `json:"stat,omitempty"`
	Path    string `json:"path,omitempty"`
}

// RepoCompareResult is repo.compare's result.
type RepoCompareResult struct {
	Repo  string         `json:"repo"`
	Base  string         `json:"base"`
	Head  string         `json:"head"`
	Stats RepoDiffStats  `json:"stats"`
	Files []RepoDiffFile `json:"files"`
}

// RepoOp is one operation of repo.apply: Type "put" (Path, and Content
// or ContentBase64), "delete" (Path, Recursive for a directory) or
// "move" (From, To). The seed's field is "type"; "op" is taken as its
// synonym.
type RepoOp struct {
	Type          string  `json:"type,omitempty"`
	Op            string  `json:"op,omitempty"`
	Path          string  `json:"path,omitempty"`
	Content       *string `json:"content,omitempty"`
	ContentBase64 *string `json:"contentBase64,omitempty"`
	Recursive     bool    `json:"recursive,omitempty"`
	From          string  `json:"from,omitempty"`
	To            string  `json:"to,omitempty"`
}

// RepoApplyArgs are repo.apply's args. Ref defaults to main. A set
// ExpectedHead that is not the ref's head is a 409 and nothing is
// written; AllowEmpty permits a commit that changes nothing.
type RepoApplyArgs struct {
	Repo         string   `json:"repo"`
	Ref          string   `json:"ref,omitempty"`
	Message      string   `json:"message"`
	ExpectedHead *string  `json:"expectedHead,omitempty"`
	AllowEmpty   bool     `json:"allowEmpty,omitempty"`
	Ops          []RepoOp `json:"ops"`
}

// RepoApplyResult is repo.apply's result: the ref's new head.
type RepoApplyResult struct {
	OK   bool    `json:"ok"`
	Repo string  `json:"repo"`
	Ref  string  `json:"ref"`
	Head *string `json:"head"`
}

// RepoImportArgs are repo.import's args: RemoteURL is an http(s) or git
// URL; RemoteRef defaults to the remote's HEAD branch, Ref to main.
type RepoImportArgs struct {
	Repo      string `json:"repo"`
	Ref       string `json:"ref,omitempty"`
	RemoteURL string `json:"remoteUrl"`
	RemoteRef string `json:"remoteRef,omitempty"`
	Message   string `json:"message,omitempty"`
}

// RepoImportResult is repo.import's result.
type RepoImportResult struct {
	Repo      string  `json:"repo"`
	Ref       string  `json:"ref"`
	Head      *string `json:"head"`
	Changed   bool    `json:"changed"`
	RemoteURL string  `json:"remoteUrl"`
	RemoteRef string  `json:"remoteRef"`
}

// RepoBlobArgs are the Internal repo.blob's args: the file at Path of
// Ref, as its bytes (the namespace's tree files).
type RepoBlobArgs struct {
	Repo string
	Ref  string
	Path string
}

// RepoWireArgs are the Internal repo.upload and repo.receive's args: git's
// smart protocol over a transport (the daemon's /git/ HTTP handler).
// Advertise asks for the refs advertisement alone; otherwise In is the
// client's request body. The answer is written to Out.
type RepoWireArgs struct {
	Repo      string
	Advertise bool
	In        io.Reader
	Out       io.Writer
}
