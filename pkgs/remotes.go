package pkgs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Catalog remotes (pkg.remote.*), public packages and catalogs
// (pkg.public.*), and the profiles proc.spawn takes from packages.

// remoteNameRe is a remote's name: letters, digits and dashes.
var remoteNameRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?$`)

// maxCatalog is the most bytes of a remote catalog read.
const maxCatalog = 4 << 20

// remoteList serves pkg.remote.list.
func (r *Room) remoteList(ctx context.Context, c *kernel.Caller, _ *struct{}) (*abi.PkgRemoteListResult, error) {
	rs, err := r.remotes(ctx, c.Uid)
	if err != nil {
		return nil, err
	}
	return &abi.PkgRemoteListResult{Remotes: rs}, nil
}

// remoteAdd serves pkg.remote.add.
func (r *Room) remoteAdd(ctx context.Context, c *kernel.Caller, a *abi.PkgRemoteAddArgs) (*abi.PkgRemoteAddResult, error) {
	if !remoteNameRe.MatchString(a.Name) {
		return nil, abi.E(abi.Invalid, abi.Path(clip(a.Name)), "name: want letters, digits and dashes (1-64, not starting or ending with a dash)")
	}
	u, err := normalURL("baseUrl", a.BaseURL)
	if err != nil {
		return nil, err
	}
	rm := abi.PkgRemote{Name: a.Name, BaseURL: u}
	changed, err := r.putRemote(ctx, c.Uid, rm)
	if err != nil {
		return nil, err
	}
	rs, err := r.remotes(ctx, c.Uid)
	if err != nil {
		return nil, err
	}
	return &abi.PkgRemoteAddResult{Changed: changed, Remote: rm, Remotes: rs}, nil
}

// remoteRemove serves pkg.remote.remove.
func (r *Room) remoteRemove(ctx context.Context, c *kernel.Caller, a *abi.PkgRemoteRemoveArgs) (*abi.PkgRemoteRemoveResult, error) {
	removed, err := r.deleteRemote(ctx, c.Uid, a.Name)
	if err != nil {
		return nil, err
	}
	rs, err := r.remotes(ctx, c.Uid)
	if err != nil {
		return nil, err
	}
	return &abi.PkgRemoteRemoveResult{Removed: removed, Remotes: rs}, nil
}

// publicList serves pkg.public.list: this server's public packages, or a
// remote's catalog (<baseUrl>/public/packages), its invalid entries
// dropped.
func (r *Room) publicList(ctx context.Context, c *kernel.Caller, a *abi.PkgPublicListArgs) (*abi.PkgPublicListResult, error) {
	if a.Remote == "" {
		return r.localCatalog(ctx), nil
	}
	src := abi.PkgCatalogSource{Kind: "remote", Name: a.Remote}
	if strings.Contains(a.Remote, "://") {
		u, err := normalURL("remote", a.Remote)
		if err != nil {
			return nil, err
		}
		src.BaseURL = u
	} else {
		rs, err := r.remotes(ctx, c.Uid)
		if err != nil {
			return nil, err
		}
		for _, rm := range rs {
			if rm.Name == a.Remote {
				src.BaseURL = rm.BaseURL
			}
		}
		if src.BaseURL == "" {
			return nil, abi.E(abi.Path(clip(a.Remote)), abi.NotExist, "remote: no such remote (see pkg.remote.list)")
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.BaseURL+"/public/packages", nil)
	if err != nil {
		return nil, abi.E(abi.Invalid, "remote: "+err.Error())
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, abi.E(abi.Offline, abi.Path(src.BaseURL), "fetching the catalog: "+err.Error())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, abi.E(abi.Offline, abi.Path(src.BaseURL), fmt.Sprintf("fetching the catalog: HTTP %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCatalog+1))
	if err != nil {
		return nil, abi.E(abi.Offline, abi.Path(src.BaseURL), "reading the catalog: "+err.Error())
	}
	if len(body) > maxCatalog {
		return nil, abi.E(abi.Invalid, abi.Path(src.BaseURL), fmt.Sprintf("the catalog is over %d bytes", maxCatalog))
	}
	out, err := ParseCatalog(body)
	if err != nil {
		return nil, abi.E(abi.Path(src.BaseURL), err)
	}
	out.Source = src
	return out, nil
}

// ParseCatalog reads a catalog's JSON ({serverName, packages:[...]}),
// keeping only its valid entries: a package name, a repository or an
// http(s) URL, a ref and subdir that could be added.
func ParseCatalog(body []byte) (*abi.PkgPublicListResult, error) {
	var raw struct {
		ServerName string            `json:"serverName"`
		Packages   []json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, abi.E(abi.Invalid, "the catalog is not JSON of {serverName, packages}: "+err.Error())
	}
	out := &abi.PkgPublicListResult{ServerName: raw.ServerName, Packages: []abi.PkgCatalogEntry{}}
	if kernel.CheckText("serverName", raw.ServerName, kernel.MaxLabel) != nil {
		out.ServerName = ""
	}
	for _, p := range raw.Packages {
		var e abi.PkgCatalogEntry
		if json.Unmarshal(p, &e) != nil || checkPkgName("name", e.Name) != nil || checkFree("description", e.Description, maxDesc) != nil ||
			kernel.CheckText("version", e.Version, maxName) != nil || kernel.CheckText("repo", e.Repo, 256) != nil {
			continue
		}
		if e.RemoteURL != "" && CheckHTTPURL("remoteUrl", e.RemoteURL) != nil {
			continue
		}
		if e.RemoteURL == "" && strings.Count(e.Repo, "/") != 1 {
			continue
		}
		if e.Ref != "" && !validBranch(e.Ref) {
			continue
		}
		if _, err := checkSubdir(e.Subdir); err != nil {
			continue
		}
		out.Packages = append(out.Packages, e)
	}
	return out, nil
}

// localCatalog is this server's public packages.
func (r *Room) localCatalog(ctx context.Context) *abi.PkgPublicListResult {
	out := &abi.PkgPublicListResult{ServerName: r.name, Source: abi.PkgCatalogSource{Kind: "local", Name: r.name}, Packages: []abi.PkgCatalogEntry{}}
	recs, err := r.listWhere(ctx, `WHERE public=1`)
	if err != nil {
		r.log.Warn("pkgs: listing public packages", "err", err)
		return out
	}
	for _, rec := range recs {
		out.Packages = append(out.Packages, abi.PkgCatalogEntry{Name: rec.name, Description: rec.manifest.Description,
			Version: rec.manifest.Version, Repo: rec.repo, RemoteURL: redacted(rec.remoteURL), Ref: rec.ref, Subdir: rec.subdir})
	}
	return out
}

// publicSet serves pkg.public.set: a package (or every package of a
// repository) is listed in this server's catalog, or not.
func (r *Room) publicSet(ctx context.Context, c *kernel.Caller, a *abi.PkgPublicSetArgs) (*abi.PkgPublicSetResult, error) {
	if (a.PackageID == "") == (a.Repo == "") {
		return nil, abi.E(abi.Invalid, "give packageId or repo, exactly one")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var recs []*record
	repo := a.Repo
	if a.PackageID != "" {
		rec, err := r.lookup(ctx, c, a.PackageID)
		if err != nil {
			return nil, err
		}
		recs, repo = []*record{rec}, rec.repo
	} else {
		all, err := r.listWhere(ctx, `WHERE repo=?`, repo)
		if err != nil {
			return nil, err
		}
		for _, rec := range all {
			if mutable(c, rec) == nil {
				recs = append(recs, rec) // the caller's own packages of it
			}
		}
	}
	owner, _, _ := strings.Cut(repo, "/")
	if !c.IsRoot() && owner != c.Username {
		return nil, abi.E(abi.Path(repo), abi.Permission, "only the repository's owner or root")
	}
	changed := false
	for _, rec := range recs {
		if rec.public == a.Public {
			continue
		}
		next := *rec
		next.public = a.Public
		if err := r.put(ctx, &next); err != nil {
			return nil, err
		}
		changed = true
	}
	return &abi.PkgPublicSetResult{Changed: changed, Repo: repo, Public: a.Public}, nil
}

// activeFor are the active packages caller c sees: its own first, then
// the global ones.
func (r *Room) activeFor(ctx context.Context, c *kernel.Caller) ([]*record, error) {
	recs, err := r.listWhere(ctx, `WHERE enabled=1 AND (owner_uid=? OR scope=?)`, c.Uid, globalScope)
	if err != nil {
		return nil, err
	}
	var out []*record
	for _, rec := range recs {
		if rec.active() {
			out = append(out, rec)
		}
	}
	return out, nil
}

// profiles serves pkg.profiles: the active packages' profiles.
func (r *Room) profiles(ctx context.Context, c *kernel.Caller, _ *struct{}) ([]abi.Profile, error) {
	recs, err := r.activeFor(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []abi.Profile
	seen := map[string]bool{}
	for _, rec := range recs {
		for _, p := range rec.manifest.Profiles {
			if seen[p.ID] {
				continue
			}
			seen[p.ID] = true
			out = append(out, profileOf(rec, p))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// profileOf is p as proc.profile.list shows it.
func profileOf(rec *record, p abi.PkgProfile) abi.Profile {
	name := p.DisplayName
	if name == "" {
		name = p.ID
	}
	return abi.Profile{ID: p.ID, Kind: "package", DisplayName: name, Description: p.Description + " (package " + rec.id + ")",
		Interactive: true, Startable: true, Background: true, SpawnMode: "new"}
}

// profile serves pkg.profile: the profile id of an active package the
// caller sees (its own first), with its prompt and the package's
// context files, read from the package's commit.
func (r *Room) profile(ctx context.Context, c *kernel.Caller, a *abi.PkgProfileArgs) (*abi.PkgProfileResult, error) {
	recs, err := r.activeFor(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		for _, p := range rec.manifest.Profiles {
			if p.ID != a.ID {
				continue
			}
			owner, err := r.ownerCaller(ctx, rec.uid)
			if err != nil {
				return nil, err
			}
			read := func(file string) (string, error) {
				b, err := kernel.Do(ctx, r.k, owner, abi.RepoBlob, &abi.RepoBlobArgs{Repo: rec.repo, Ref: rec.commit, Path: inPkg(rec.subdir, file)})
				return string(b), err
			}
			prompt := p.Prompt
			if p.PromptFile != "" {
				if prompt, err = read(p.PromptFile); err != nil {
					return nil, abi.E(abi.Path(rec.id), err)
				}
			}
			res := &abi.PkgProfileResult{Profile: profileOf(rec, p), Package: rec.id, Budget: p.Budget}
			if prompt != "" {
				res.ContextFiles = append(res.ContextFiles, abi.ContextFile{Name: "profile " + p.ID, Text: prompt})
			}
			for _, f := range rec.manifest.Context {
				text, err := read(f)
				if err != nil {
					return nil, abi.E(abi.Path(rec.id), err)
				}
				res.ContextFiles = append(res.ContextFiles, abi.ContextFile{Name: f, Text: text})
			}
			return res, nil
		}
	}
	return nil, abi.E(abi.Path(a.ID), abi.NotExist, "no active package has this profile")
}
