// Package pkgs is the package room: packages installed from
// repositories (seed 003 pkg.*; docs/packages.md).
//
// # Packages
//
// A package is a repository (or a subdirectory of one) whose
// gsv-package.json (ParseManifest) names agent profiles, skills, context
// files, CodeMode modules, commands, schedules and MCP servers. pkg.add
// resolves a ref to a commit through the repos room's syscalls, as the
// caller, and stores the manifest; a package from outside the builtin
// source (BuiltinRepo) is added disabled and review-required.
//
// # Installing
//
// pkg.install makes an approved package's parts appear through the other
// rooms' own syscalls, as the package's owner: its commands are written
// to the owner's ~/.gsv/pkg/bin (fs.write, fs.setattr), which the
// devices room mounts in the owner's exec sessions (pkg.session); its
// schedules are crontab lines (sched.crontab.get/set); its MCP servers
// are sys.mcp.add. Profiles and skills need nothing installed: proc asks
// for them (pkg.profile, pkg.profiles, /pkg/skills). An install that
// fails undoes what it added; pkg.remove removes what was installed.
//
// # The room
//
// A Room is a room of the namespace (ns.Room, ns.Starter): Open migrates
// its tables (pkg_packages, pkg_remotes); Start syncs the builtin
// packages (Options.Builtin), at once or when sys.setup has made the
// first user, in a goroutine Close stops; Mounts binds /pkg.
package pkgs
