package abi

import "encoding/json"

// The pkgs room's syscalls (pkg.*, seed 003): packages installed from
// repositories. Mutating calls need root or the package's scope's
// owner; a global package is root's.
var (
	PkgList = Call[PkgListArgs, *PkgListResult]{Name: "pkg.list", Grant: Users, Flags: Read,
		Doc: "The packages the caller sees (its own, then the global ones), enabled or not, optionally filtered."}
	PkgAdd = Call[PkgAddArgs, *PkgAddResult]{Name: "pkg.add", Grant: Users,
		Doc: "Adds a package from a repository (repo) or an upstream URL (remoteUrl) at a ref (main) and subdir (.); one outside the builtin source stays disabled and review-required."}
	PkgShow = Call[PkgIDArgs, *PkgShowResult]{Name: "pkg.show", Grant: Users, Flags: Read,
		Doc: "A package's manifest and its review: exactly what enabling it adds and the rights each part runs with."}
	PkgSync = Call[struct{}, *PkgSyncResult]{Name: "pkg.sync", Grant: Root,
		Doc: "Rebuilds the builtin packages from the builtin source, removes stale ones and keeps their enabled state."}
	PkgCheckout = Call[PkgCheckoutArgs, *PkgChangeResult]{Name: "pkg.checkout", Grant: Users,
		Doc: "Re-resolves a package at a new ref, keeping its enabled state and review (a ref that adds commands, schedules or servers needs a new review)."}
	PkgInstall = Call[PkgIDArgs, *PkgChangeResult]{Name: "pkg.install", Grant: Users,
		Doc: "Enables a package: its profiles, skills, commands, schedules and MCP servers appear, all or none; refused while its review is required and not approved."}
	PkgReviewApprove = Call[PkgIDArgs, *PkgChangeResult]{Name: "pkg.review.approve", Grant: Users,
		Doc: "Approves a review-required package at its current commit."}
	PkgRemove = Call[PkgIDArgs, *PkgChangeResult]{Name: "pkg.remove", Grant: Users,
		Doc: "Disables a package (its parts disappear) without deleting it; the package named packages cannot be disabled."}
	PkgRemoteList = Call[struct{}, *PkgRemoteListResult]{Name: "pkg.remote.list", Grant: Users, Flags: Read,
		Doc: "The caller's package catalog remotes, sorted by name."}
	PkgRemoteAdd = Call[PkgRemoteAddArgs, *PkgRemoteAddResult]{Name: "pkg.remote.add", Grant: Users,
		Doc: "Adds (or changes) one of the caller's package catalog remotes: a name of letters, digits and dashes and an http(s) URL."}
	PkgRemoteRemove = Call[PkgRemoteRemoveArgs, *PkgRemoteRemoveResult]{Name: "pkg.remote.remove", Grant: Users,
		Doc: "Removes one of the caller's package catalog remotes; removed:false if there was none."}
	PkgPublicList = Call[PkgPublicListArgs, *PkgPublicListResult]{Name: "pkg.public.list", Grant: Users,
		Doc: "This server's public packages, or the catalog of a remote (<baseUrl>/public/packages); invalid entries are dropped."}
	PkgPublicSet = Call[PkgPublicSetArgs, *PkgPublicSetResult]{Name: "pkg.public.set", Grant: Users,
		Doc: "Marks a package's source repository public or private (its owner or root)."}
	PkgProfileGet = Call[PkgProfileArgs, *PkgProfileResult]{Name: "pkg.profile", Grant: Users, Flags: Internal | Read,
		Doc: "An active package's profile the caller sees, for proc.spawn; 404 if none."}
	PkgProfiles = Call[struct{}, []Profile]{Name: "pkg.profiles", Grant: Users, Flags: Internal | Read,
		Doc: "The profiles of the active packages the caller sees, for proc.profile.list."}
)

// The pkgs room's signals.
var (
	SigPkgChanged = Signal[PkgChanged]{Name: "pkg.changed",
		Doc: "A package was added, checked out, installed, approved, removed or synced."}
)

// The Internal calls of /pkg, of proc's skills and of exec sessions.
var (
	PkgFile = Call[PkgFileArgs, *RepoReadResult]{Name: "pkg.file", Grant: Users, Flags: Internal | Read,
		Doc: "A tree or a file of a package the caller sees, at its commit (/pkg/<scope>/<name>/files)."}
	PkgSkills = Call[struct{}, []PkgSkill]{Name: "pkg.skills", Grant: Users, Flags: Internal | Read,
		Doc: "The skills of the active packages the caller sees (/pkg/skills)."}
	PkgSession = Call[struct{}, *PkgSessionResult]{Name: "pkg.session", Grant: Users, Flags: Internal | Read,
		Doc: "What an exec session of the caller gets from its active packages: the mount of its commands and the PATH entry."}
)

// PkgFileArgs are pkg.file's args: a package and a path in it ("" its
// root).
type PkgFileArgs struct {
	PackageID string
	Path      string
}

// PkgSkill is one skill of an active package.
type PkgSkill struct {
	Name      string
	PackageID string
}

// PkgSessionResult is pkg.session's result: Mount is nil when the caller
// has no package commands.
type PkgSessionResult struct {
	Mount *ProcessMount
	Path  string
}

// PkgEvent is the package.event schedule target's syscall.
var PkgEvent = Call[PkgEventArgs, *PkgEventResult]{Name: "pkg.event", Grant: Users,
	Doc: "Hands an event to a command of one of the caller's active packages (its entrypoint), run in an exec session of the caller's."}

// PkgEventArgs are pkg.event's args: the seed's package.event target.
type PkgEventArgs struct {
	PackageID  string          `json:"packageId"`
	Entrypoint string          `json:"entrypoint"`
	Event      string          `json:"event"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// PkgEventResult is pkg.event's result: the command's exit code and a
// one-line summary (its output's last line).
type PkgEventResult struct {
	ExitCode int    `json:"exitCode"`
	Summary  string `json:"summary"`
}
