package pkgs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Resolving a package in its repository, and installing its parts into
// the other rooms (through the dispatcher, as the package's owner).

// binRel is where an owner's package commands are written, under their
// home; exec sessions mount it read-only at BinGuest and put it on PATH.
const binRel = ".gsv/pkg/bin"

// binDirOf is the bin directory of the user called owner, as a
// namespace path.
func binDirOf(owner string) string {
	return "/home/" + owner + "/" + binRel
}

// schedName is the crontab name of package pkg's schedule name.
func schedName(pkg, name string) string { return "pkg." + pkg + "." + name }

// mcpName is the MCP server name of package pkg's server name.
func mcpName(pkg, name string) string { return pkg + "-" + name }

// ownerCaller is the caller a package's parts are installed and read as:
// its scope's user (root for a global package).
func (r *Room) ownerCaller(ctx context.Context, uid uint32) (*kernel.Caller, error) {
	id, err := r.k.IdentityOf(ctx, uid)
	if err != nil {
		return nil, err
	}
	return &kernel.Caller{Identity: id}, nil
}

// importRemote imports an upstream URL's ref into the caller's
// repository pkg-<last element of the URL>, as the caller, and answers
// the repository and the local branch. A ref that is not a branch of the
// upstream is tried as a tag.
func (r *Room) importRemote(ctx context.Context, c *kernel.Caller, remote, ref string) (repo, branch string, err error) {
	u, perr := url.Parse(remote)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "git") || u.Host == "" {
		return "", "", abi.E(abi.Invalid, "remoteUrl: want an http, https or git URL")
	}
	base := strings.TrimSuffix(path.Base(strings.TrimRight(u.Path, "/")), ".git")
	base = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, base)
	if base == "" || base == "." || base == "/" {
		base = "package"
	}
	repo = c.Username + "/pkg-" + strings.TrimLeft(base, ".-")
	if strings.HasPrefix(ref, "refs/") || !validBranch(ref) {
		return "", "", abi.E(abi.Invalid, abi.Path(clip(ref)), "ref: not a branch or tag name")
	}
	res, err := kernel.Do(ctx, r.k, c, abi.RepoImport, &abi.RepoImportArgs{Repo: repo, Ref: ref, RemoteURL: remote, RemoteRef: ref,
		Message: "pkg.add " + remote + " " + ref})
	if err != nil && abi.KindOf(err) == abi.Invalid {
		res, err = kernel.Do(ctx, r.k, c, abi.RepoImport, &abi.RepoImportArgs{Repo: repo, Ref: ref, RemoteURL: remote,
			RemoteRef: "refs/tags/" + ref, Message: "pkg.add " + remote + " " + ref})
	}
	if err != nil {
		return "", "", err
	}
	return res.Repo, res.Ref, nil
}

// branchRe is what a ref a package names may be: a branch or tag name.
var branchRe = regexp.MustCompile(`^[A-Za-z0-9._][A-Za-z0-9._/-]{0,199}$`)

// validBranch says whether ref is a plain branch or tag name.
func validBranch(ref string) bool {
	return branchRe.MatchString(ref) && !strings.Contains(ref, "..") && !strings.HasSuffix(ref, ".lock") &&
		!strings.HasSuffix(ref, "/") && !strings.Contains(ref, "//")
}

// hexRe is a full commit hash.
var hexRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// resolve reads the package at ref (a branch, a tag or a full hash) and
// subdir of repo as c: its commit and its checked manifest, whose every
// file must be there and whose schedule lines must parse for owner uid.
func (r *Room) resolve(ctx context.Context, c *kernel.Caller, uid uint32, repo, ref, subdir string) (string, *abi.PkgManifest, error) {
	refs, err := kernel.Do(ctx, r.k, c, abi.RepoRefs, &abi.RepoArgs{Repo: repo})
	if err != nil {
		return "", nil, err
	}
	commit := refs.Heads[ref]
	if commit == "" {
		commit = refs.Tags[ref]
	}
	if commit == "" && hexRe.MatchString(ref) {
		commit = ref
	}
	if commit == "" {
		return "", nil, abi.E(abi.Path(repo), abi.NotExist, fmt.Sprintf("ref: %q is no branch or tag of %s", clip(ref), repo))
	}
	raw, err := kernel.Do(ctx, r.k, c, abi.RepoBlob, &abi.RepoBlobArgs{Repo: repo, Ref: commit, Path: inPkg(subdir, abi.PkgManifestFile)})
	if err != nil {
		if abi.KindOf(err) == abi.NotExist {
			return "", nil, abi.E(abi.Path(repo), abi.Invalid, fmt.Sprintf("subdir: no %s in %s at %s", abi.PkgManifestFile, subdir, ref))
		}
		return "", nil, err
	}
	m, err := ParseManifest(raw)
	if err != nil {
		return "", nil, err
	}
	// Every file the manifest names is there.
	var files [][2]string
	for i, p := range m.Profiles {
		if p.PromptFile != "" {
			files = append(files, [2]string{fmt.Sprintf("profiles[%d].promptFile", i), p.PromptFile})
		}
	}
	for i, s := range m.Skills {
		files = append(files, [2]string{fmt.Sprintf("skills[%d]", i), "skills/" + s + "/SKILL.md"})
	}
	for i, f := range m.Context {
		files = append(files, [2]string{fmt.Sprintf("context[%d]", i), f})
	}
	for i, mod := range m.Modules {
		files = append(files, [2]string{fmt.Sprintf("modules[%d].path", i), mod.Path})
	}
	for i, cmd := range m.Commands {
		files = append(files, [2]string{fmt.Sprintf("commands[%d].path", i), cmd.Path})
	}
	for _, f := range files {
		res, err := kernel.Do(ctx, r.k, c, abi.RepoRead, &abi.RepoReadArgs{Repo: repo, Ref: commit, Path: inPkg(subdir, f[1])})
		if err != nil || res.Kind != "file" {
			return "", nil, abi.E(abi.Path(repo), abi.Invalid, fmt.Sprintf("%s: no file %s in the package at %s", f[0], f[1], ref))
		}
	}
	for i, s := range m.Schedules {
		if _, err := kernel.Do(ctx, r.k, c, abi.SchedCrontabCheck, &abi.CrontabCheckArgs{
			Text: s.Line + " # name=" + schedName(m.Name, s.Name) + "\n", Line: 1, OwnerUid: uid}); err != nil {
			return "", nil, abi.E(abi.Invalid, fmt.Sprintf("schedules[%d].line: %v", i, err))
		}
	}
	return commit, m, nil
}

// replace makes next the package's record in effect: old's parts (if it
// was active) are removed, next's (if active) installed, and the record
// written; on any failure what was added is undone, old's parts are put
// back and the error is returned: nothing is installed halfway.
func (r *Room) replace(ctx context.Context, old, next *record) error {
	ctx = context.WithoutCancel(ctx)
	wasActive := old.active() && old.commit != ""
	if wasActive {
		if err := r.uninstall(ctx, old); err != nil {
			return err
		}
	}
	next.installed = installed{}
	if next.active() {
		inst, err := r.installParts(ctx, next)
		if err != nil {
			r.restore(ctx, old, wasActive)
			return err
		}
		next.installed = inst
	}
	if err := r.put(ctx, next); err != nil {
		if next.active() {
			if uerr := r.uninstall(ctx, next); uerr != nil {
				r.log.Warn("pkgs: undoing an install", "package", next.id, "err", uerr)
			}
		}
		r.restore(ctx, old, wasActive)
		return err
	}
	return nil
}

// restore puts old's parts back after a failed change.
func (r *Room) restore(ctx context.Context, old *record, wasActive bool) {
	if !wasActive {
		return
	}
	if _, err := r.installParts(ctx, old); err != nil {
		r.log.Warn("pkgs: putting a package's parts back", "package", old.id, "err", err)
	}
}

// installParts installs rec's commands, schedules and MCP servers as its
// owner, in that order; on a failure it undoes what it added.
func (r *Room) installParts(ctx context.Context, rec *record) (installed, error) {
	var inst installed
	c, err := r.ownerCaller(ctx, rec.uid)
	if err != nil {
		return inst, err
	}
	fail := func(err error) (installed, error) {
		tmp := *rec
		tmp.installed = inst
		if uerr := r.uninstall(ctx, &tmp); uerr != nil {
			r.log.Warn("pkgs: undoing a failed install", "package", rec.id, "err", uerr)
		}
		return installed{}, abi.E(abi.Path(rec.id), err)
	}
	m := &rec.manifest
	if len(m.Commands) > 0 {
		taken, err := r.commandsTaken(ctx, rec)
		if err != nil {
			return fail(err)
		}
		for i, cmd := range m.Commands {
			if by := taken[cmd.Name]; by != "" {
				return fail(abi.E(abi.Busy, fmt.Sprintf("commands[%d].name: %q is already a command of %s", i, cmd.Name, by)))
			}
			body, err := kernel.Do(ctx, r.k, c, abi.RepoBlob, &abi.RepoBlobArgs{Repo: rec.repo, Ref: rec.commit, Path: inPkg(rec.subdir, cmd.Path)})
			if err != nil {
				return fail(err)
			}
			file := binDirOf(c.Username) + "/" + cmd.Name
			w, err := kernel.Do(ctx, r.k, c, abi.FsWrite, &abi.FSWriteArgs{Path: file, Content: string(body)})
			if err == nil && !w.OK {
				err = abi.E(abi.Path(file), w.Error)
			}
			if err != nil {
				return fail(err)
			}
			if len(inst.Commands) == 0 {
				r.markPending(rec.uid, 1)
				defer r.markPending(rec.uid, -1)
			}
			inst.Commands = append(inst.Commands, cmd.Name)
			mode := fs.FileMode(0o755)
			if _, err := kernel.Do(ctx, r.k, c, abi.FsSetattr, &abi.SetattrArgs{Path: strings.TrimPrefix(file, "/"), Set: abi.SetAttr{Mode: &mode}}); err != nil {
				return fail(err)
			}
		}
	}
	if len(m.Schedules) > 0 {
		tab, err := kernel.Do(ctx, r.k, c, abi.SchedCrontabGet, &abi.CrontabGetArgs{})
		if err != nil {
			return fail(err)
		}
		text := strings.TrimRight(tab.Text, "\n")
		if text != "" {
			text += "\n"
		}
		var names []string
		for _, s := range m.Schedules {
			text += s.Line + " # name=" + schedName(rec.name, s.Name) + "\n"
			names = append(names, schedName(rec.name, s.Name))
		}
		if _, err := kernel.Do(ctx, r.k, c, abi.SchedCrontabSet, &abi.CrontabSetArgs{Text: text}); err != nil {
			return fail(err)
		}
		inst.Schedules = names
	}
	for i, s := range m.McpServers {
		args := &abi.McpAddArgs{Name: mcpName(rec.name, s.Name), URL: s.URL}
		if s.URL == "" {
			cmd := append([]string(nil), s.Command...)
			for _, pc := range m.Commands {
				if pc.Path == cmd[0] {
					cmd[0] = BinGuest + "/" + pc.Name
				}
			}
			args.Stdio = &abi.McpStdio{Command: cmd}
		}
		if _, err := kernel.Do(ctx, r.k, c, abi.SysMcpAdd, args); err != nil {
			return fail(abi.E(fmt.Sprintf("mcpServers[%d]", i), err))
		}
		inst.McpServers = append(inst.McpServers, args.Name)
	}
	return inst, nil
}

// markPending counts an install under way that has written commands of
// uid's (d 1), or its end (d -1).
func (r *Room) markPending(uid uint32, d int) {
	r.pendingMu.Lock()
	defer r.pendingMu.Unlock()
	r.pending[uid] += d
	if r.pending[uid] <= 0 {
		delete(r.pending, uid)
	}
}

// BinGuest is where an exec session sees its owner's package commands
// (pkg.session's mount).
const BinGuest = "/opt/gsv/pkg/bin"

// commandsTaken are the command names the other active packages of rec's
// owner installed, and which package each is.
func (r *Room) commandsTaken(ctx context.Context, rec *record) (map[string]string, error) {
	recs, err := r.listWhere(ctx, `WHERE owner_uid=? AND enabled=1`, rec.uid)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, o := range recs {
		if o.id == rec.id || o.scope != rec.scope {
			continue
		}
		for _, c := range o.installed.Commands {
			out[c] = o.id
		}
	}
	return out, nil
}

// uninstall removes what rec.installed lists, as its owner, in reverse
// order: MCP servers, schedules, commands. It goes on past a failure and
// returns the first.
func (r *Room) uninstall(ctx context.Context, rec *record) error {
	c, err := r.ownerCaller(ctx, rec.uid)
	if err != nil {
		return err
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
		if err != nil {
			r.log.Warn("pkgs: removing a package's part", "package", rec.id, "err", err)
		}
	}
	for _, name := range rec.installed.McpServers {
		_, err := kernel.Do(ctx, r.k, c, abi.SysMcpRemove, &abi.McpServerArgs{ServerID: name})
		keep(err)
	}
	if len(rec.installed.Schedules) > 0 {
		tab, err := kernel.Do(ctx, r.k, c, abi.SchedCrontabGet, &abi.CrontabGetArgs{})
		if err == nil {
			var lines []string
			for _, l := range strings.Split(tab.Text, "\n") {
				drop := false
				for _, n := range rec.installed.Schedules {
					if strings.Contains(l, "# name="+n+" ") || strings.HasSuffix(l, "# name="+n) {
						drop = true
					}
				}
				if !drop {
					lines = append(lines, l)
				}
			}
			_, err = kernel.Do(ctx, r.k, c, abi.SchedCrontabSet, &abi.CrontabSetArgs{Text: strings.Join(lines, "\n")})
		}
		keep(err)
	}
	for _, name := range rec.installed.Commands {
		res, err := kernel.Do(ctx, r.k, c, abi.FsDelete, &abi.FSDeleteArgs{Path: binDirOf(c.Username) + "/" + name})
		if err == nil && !res.OK && !strings.Contains(res.Error, "not") {
			err = errors.New(res.Error)
		}
		keep(err)
	}
	return first
}
