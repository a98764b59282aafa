// Package repos is the repository room: git repositories at
// /src/repos/<owner>/<name>, the repo.* syscalls (seed 003), and git's
// smart HTTP protocol as a transport onto them (docs/repos.md).
//
// # Storage
//
// Each repository is a bare git repository under the daemon's state
// directory, STATE/repos/<owner>/<name>.git, kept with go-git (no git
// binary, no shell). STATE/repos and each owner's directory are the
// daemon's alone (0700): no sandbox and no other host user reads a
// repository except through the namespace, whose every read is a syscall
// that the room checks. A table (repos_repos) records each repository's
// owner, visibility and description.
//
// # Who may do what
//
// Root may read and write every repository. Its owner may read and
// write it. Any other user may read a public one, and nothing else: a
// private repository of another user is 403 to every call and file.
//
// # Writes
//
// A repository's writes (repo.create, repo.apply, repo.import and a
// push's repo.receive) take its lock, so that each one reads the head it
// replaces and replaces it at once: a write whose expected head (apply's
// expectedHead, a push command's old value) is not the ref's head is a
// 409 and writes no ref.
package repos
