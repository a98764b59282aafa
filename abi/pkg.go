package abi

// The package domain (seed 003 pkg.*): packages installed from
// repositories, served by the pkgs room (docs/packages.md). A package is
// a repository (or a subdirectory of one) whose gsv-package.json
// manifest names what it adds.

// PkgManifestFile is the name of a package's manifest, at the root of
// its subdirectory.
const PkgManifestFile = "gsv-package.json"

// PkgManifest is a package's gsv-package.json (docs/packages.md, *The
// manifest*). Unknown keys and wrong types are refused naming the field.
type PkgManifest struct {
	// Name is the package's name: 1-64 of [a-z0-9-], starting with a
	// letter or digit.
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// Profiles are agent profiles proc.spawn takes by ID.
	Profiles []PkgProfile `json:"profiles,omitempty"`
	// Skills name directories skills/<name>/SKILL.md of the package.
	Skills []string `json:"skills,omitempty"`
	// Context are paths of text files of the package given to every
	// process spawned with one of its profiles.
	Context []string `json:"context,omitempty"`
	// Modules are CodeMode modules (JavaScript files of the package).
	Modules []PkgModule `json:"modules,omitempty"`
	// Commands are executables of the package put on the PATH of the
	// owner's exec sessions.
	Commands []PkgCommand `json:"commands,omitempty"`
	// Schedules are crontab lines installed, as the owner, on enable.
	Schedules []PkgSchedule `json:"schedules,omitempty"`
	// McpServers are MCP servers registered, as the owner, on enable.
	McpServers []PkgMcpServer `json:"mcpServers,omitempty"`
}

// PkgProfile is an agent profile a package brings: its prompt (inline,
// or a file of the package), the tools and model it asks for, and its
// run budget's defaults.
type PkgProfile struct {
	ID          string     `json:"id"`
	DisplayName string     `json:"displayName,omitempty"`
	Description string     `json:"description,omitempty"`
	Prompt      string     `json:"prompt,omitempty"`
	PromptFile  string     `json:"promptFile,omitempty"`
	Tools       []string   `json:"tools,omitempty"`
	Model       string     `json:"model,omitempty"`
	Budget      *RunBudget `json:"budget,omitempty"`
}

// PkgModule is a CodeMode module of a package: a JavaScript file, and
// whether it is offered to agents as a tool.
type PkgModule struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Tool bool   `json:"tool,omitempty"`
}

// PkgCommand is an executable of a package: Name is the command's name
// on the PATH, Path the file in the package.
type PkgCommand struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// PkgSchedule is a crontab line a package installs (docs/scheduler.md,
// *Files*), named so that it is found again: the installed line's name
// is pkg.<package>.<name>.
type PkgSchedule struct {
	Name string `json:"name"`
	Line string `json:"line"`
}

// PkgMcpServer is an MCP server a package registers: a URL, or a stdio
// command (its first word a command of the package or on the PATH).
// The registered server's name is <package>-<name>.
type PkgMcpServer struct {
	Name    string   `json:"name"`
	URL     string   `json:"url,omitempty"`
	Command []string `json:"command,omitempty"`
}

// PkgSummary is one package as pkg.* shows it. ID is <scope>/<name>:
// scope is the owner's user name, or "global".
type PkgSummary struct {
	ID        string `json:"packageId"`
	Name      string `json:"name"`
	Scope     string `json:"scope"`
	Version   string `json:"version,omitempty"`
	Desc      string `json:"description,omitempty"`
	Builtin   bool   `json:"builtin"`
	Enabled   bool   `json:"enabled"`
	Repo      string `json:"repo"`
	RemoteURL string `json:"remoteUrl,omitempty"`
	Ref       string `json:"ref"`
	Subdir    string `json:"subdir"`
	Commit    string `json:"commit"`
	// Review is the review state: ReviewRequired says enabling needs an
	// approval; Approved that the approval covers this commit's powers.
	Review PkgReview `json:"review"`
	// Active is whether its parts are installed now: enabled and
	// reviewed (a checkout that adds powers holds an enabled package
	// until it is reviewed again).
	Active      bool  `json:"active"`
	InstalledAt int64 `json:"installedAt"`
	UpdatedAt   int64 `json:"updatedAt"`
}

// PkgReview is a package's review state.
type PkgReview struct {
	Required   bool   `json:"required"`
	Approved   bool   `json:"approved"`
	ApprovedAt int64  `json:"approvedAt,omitempty"`
	ApprovedBy string `json:"approvedBy,omitempty"`
	// Commit is the commit the approval was given at.
	Commit string `json:"commit,omitempty"`
}

// PkgListArgs are pkg.list's args: Enabled and Name (exact, trimmed)
// filter; Runtime is the seed's and only "" or "gsv" matches.
type PkgListArgs struct {
	Enabled *bool  `json:"enabled,omitempty"`
	Name    string `json:"name,omitempty"`
	Runtime string `json:"runtime,omitempty"`
}

// PkgListResult is pkg.list's result: the caller's packages, then the
// global ones, each sorted by name.
type PkgListResult struct {
	Packages []PkgSummary `json:"packages"`
}

// PkgAddArgs are pkg.add's args: RemoteURL (an http(s) or git URL) or
// Repo (owner/name of a local repository); Ref defaults to main, Subdir
// to ".". Enable installs it at once when no review is required. Global
// (root only) adds it for every user.
type PkgAddArgs struct {
	RemoteURL string `json:"remoteUrl,omitempty"`
	Repo      string `json:"repo,omitempty"`
	Ref       string `json:"ref,omitempty"`
	Subdir    string `json:"subdir,omitempty"`
	Enable    bool   `json:"enable,omitempty"`
	Global    bool   `json:"global,omitempty"`
}

// PkgImported says where pkg.add found a package: its repository, the
// upstream URL (if any), the ref and the commit it resolved to.
type PkgImported struct {
	Repo      string  `json:"repo"`
	RemoteURL string  `json:"remoteUrl"`
	Ref       string  `json:"ref"`
	Head      *string `json:"head"`
}

// PkgAddResult is pkg.add's result.
type PkgAddResult struct {
	Changed  bool        `json:"changed"`
	Imported PkgImported `json:"imported"`
	Package  PkgSummary  `json:"package"`
}

// PkgIDArgs name one package: its id (<scope>/<name>) or its name
// alone (the caller's, then the global one).
type PkgIDArgs struct {
	PackageID string `json:"packageId"`
}

// PkgCheckoutArgs are pkg.checkout's args.
type PkgCheckoutArgs struct {
	PackageID string `json:"packageId"`
	Ref       string `json:"ref"`
}

// PkgChangeResult is the result of pkg.checkout, pkg.install,
// pkg.review.approve and pkg.remove.
type PkgChangeResult struct {
	Changed bool       `json:"changed"`
	Package PkgSummary `json:"package"`
}

// PkgSyncResult is pkg.sync's result: the builtin packages.
type PkgSyncResult struct {
	Packages []PkgSummary `json:"packages"`
}

// PkgShowResult is pkg.show's result (ours): the package, its manifest,
// and the review: exactly what enabling it adds and as whom it runs.
type PkgShowResult struct {
	Package  PkgSummary   `json:"package"`
	Manifest PkgManifest  `json:"manifest"`
	Adds     []PkgAddItem `json:"adds"`
	// NewPowers are the commands, schedules and servers this commit adds
	// over the ones last approved (a new review is needed for them).
	NewPowers []string `json:"newPowers,omitempty"`
}

// PkgAddItem is one thing enabling a package adds: Kind (profile,
// skill, context, module, command, schedule, mcpServer), its name, the
// file(s) or line it comes from, and the rights it runs with.
type PkgAddItem struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Source string `json:"source"`
	RunsAs string `json:"runsAs"`
}

// PkgRemote is a package catalog: a name and its base URL.
type PkgRemote struct {
	Name    string `json:"name"`
	BaseURL string `json:"baseUrl"`
}

// PkgRemoteListResult is pkg.remote.list's result, sorted by name.
type PkgRemoteListResult struct {
	Remotes []PkgRemote `json:"remotes"`
}

// PkgRemoteAddArgs are pkg.remote.add's args.
type PkgRemoteAddArgs struct {
	Name    string `json:"name"`
	BaseURL string `json:"baseUrl"`
}

// PkgRemoteAddResult is pkg.remote.add's result.
type PkgRemoteAddResult struct {
	Changed bool        `json:"changed"`
	Remote  PkgRemote   `json:"remote"`
	Remotes []PkgRemote `json:"remotes"`
}

// PkgRemoteRemoveArgs are pkg.remote.remove's args.
type PkgRemoteRemoveArgs struct {
	Name string `json:"name"`
}

// PkgRemoteRemoveResult is pkg.remote.remove's result.
type PkgRemoteRemoveResult struct {
	Removed bool        `json:"removed"`
	Remotes []PkgRemote `json:"remotes"`
}

// PkgPublicListArgs are pkg.public.list's args: Remote is a remote's
// name or an http(s) URL; none lists this server's public packages.
type PkgPublicListArgs struct {
	Remote string `json:"remote,omitempty"`
}

// PkgCatalogEntry is one package of a catalog.
type PkgCatalogEntry struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`
	Repo        string `json:"repo"`
	RemoteURL   string `json:"remoteUrl,omitempty"`
	Ref         string `json:"ref,omitempty"`
	Subdir      string `json:"subdir,omitempty"`
}

// PkgCatalogSource says where a catalog came from: Kind "local" or
// "remote".
type PkgCatalogSource struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	BaseURL string `json:"baseUrl,omitempty"`
}

// PkgPublicListResult is pkg.public.list's result.
type PkgPublicListResult struct {
	ServerName string            `json:"serverName"`
	Source     PkgCatalogSource  `json:"source"`
	Packages   []PkgCatalogEntry `json:"packages"`
}

// PkgPublicSetArgs are pkg.public.set's args: a package (its source
// repository) or a repository.
type PkgPublicSetArgs struct {
	PackageID string `json:"packageId,omitempty"`
	Repo      string `json:"repo,omitempty"`
	Public    bool   `json:"public"`
}

// PkgPublicSetResult is pkg.public.set's result.
type PkgPublicSetResult struct {
	Changed bool   `json:"changed"`
	Repo    string `json:"repo"`
	Public  bool   `json:"public"`
}

// PkgProfileArgs are the Internal pkg.profile's args: a profile's ID.
type PkgProfileArgs struct {
	ID string
}

// PkgProfileResult is what proc.spawn takes from an active package's
// profile: the profile as proc.profile.list shows it, the package, its
// prompt and context files (an assignment's), and its budget defaults.
type PkgProfileResult struct {
	Profile      Profile
	Package      string
	ContextFiles []ContextFile
	Budget       *RunBudget
}

// PkgChanged is the payload of pkg.changed: the package and the change
// (added, checkout, installed, approved, removed, synced).
type PkgChanged struct {
	PackageID string `json:"packageId"`
	Change    string `json:"change"`
}
