package repos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// importTimeout bounds one repo.import's fetch.
const importTimeout = 10 * time.Minute

// importPackMax is the largest pack one repo.import fetches: past it the
// fetch stops and the import is a 400.
const importPackMax = 1 << 30

// errPackTooBig is a fetch stopped by the pack cap.
var errPackTooBig = errors.New("pack over the import limit")

// capStorer is a repository's storer whose pack writer takes at most max
// bytes (go-git writes a fetched pack through PackfileWriter).
type capStorer struct {
	storage.Storer
	max int64
}

// PackfileWriter is the storer's pack writer, capped.
func (s capStorer) PackfileWriter() (io.WriteCloser, error) {
	pw, ok := s.Storer.(storer.PackfileWriter)
	if !ok {
		return nil, errors.New("the repository's storage takes no packs")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return &capWriter{w: w, left: s.max}, nil
}

// capWriter passes at most left bytes to w, then fails every write.
type capWriter struct {
	w    io.WriteCloser
	left int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.left = -1
		return 0, errPackTooBig
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

func (c *capWriter) Close() error { return c.w.Close() }

// cleanImport removes what a failed fetch left in a repository that
// existed before it: go-git keeps a cut-short pack's temporary file.
func (r *Room) cleanImport(rec *record) {
	tmps, _ := filepath.Glob(filepath.Join(r.gitDir(rec), "objects", "pack", "tmp_pack_*"))
	for _, f := range tmps {
		os.Remove(f)
	}
}

// dropRepo removes a repository a failed import made: its record and
// its directory.
func (r *Room) dropRepo(ctx context.Context, rec *record) {
	if _, err := r.st.Exec(context.WithoutCancel(ctx), `DELETE FROM repos_repos WHERE owner=? AND name=?`, rec.Owner, rec.Name); err != nil {
		r.log.Warn("repos: removing a failed import", "repo", rec.id(), "err", err)
		return
	}
	os.RemoveAll(r.gitDir(rec))
}

// checkRemote checks an import's URL: http, https or git, with a host;
// never file://, a local path, ssh or any other scheme (the daemon's own
// files are not an upstream).
func checkRemote(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > 2048 {
		return abi.E(abi.Invalid, "remoteUrl: not a URL")
	}
	switch u.Scheme {
	case "http", "https", "git":
	default:
		return abi.E(abi.Invalid, abi.Path(redact(raw)), "remoteUrl: only http, https and git URLs may be imported")
	}
	if u.Host == "" {
		return abi.E(abi.Invalid, abi.Path(redact(raw)), "remoteUrl: no host")
	}
	return nil
}

// redact is a URL as an error may show it: no password, clipped.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return clip(u.Redacted())
	}
	return "the URL"
}

// importCall serves repo.import: the upstream's ref, fetched into the
// repository (made if need be) and set as the local ref.
func (r *Room) importCall(ctx context.Context, c *kernel.Caller, a *abi.RepoImportArgs) (*abi.RepoImportResult, error) {
	if err := checkRemote(a.RemoteURL); err != nil {
		return nil, err
	}
	ref, err := branchRef(a.Ref)
	if err != nil {
		return nil, err
	}
	owner, name, err := splitRepo(a.Repo, c.Username)
	if err != nil {
		return nil, err
	}
	if owner != c.Username && !c.IsRoot() {
		return nil, abi.E(abi.Permission, abi.Path(owner+"/"+name), "only "+owner+" may import into repositories of theirs")
	}
	if name == homeRepo {
		return nil, abi.E(abi.Busy, abi.Path(owner+"/"+name), "home is each user's home's history")
	}
	ctx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	remoteRef, err := remoteBranch(ctx, a.RemoteURL, a.RemoteRef)
	if err != nil {
		return nil, err
	}
	u, err := r.k.UserByName(ctx, owner)
	if err != nil || u == nil {
		return nil, abi.E(abi.NotExist, abi.Path(owner), "no such user")
	}
	old, err := r.lookup(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	rec, err := r.ensure(ctx, &record{Owner: owner, Name: name, OwnerUid: u.Uid, Kind: "user"}, ref)
	if err != nil {
		return nil, err
	}
	if !canWrite(c, rec) {
		return nil, abi.E(abi.Permission, abi.Path(rec.id()), "only "+rec.Owner+" may write the repository")
	}
	unlock := r.lock(rec)
	defer unlock()
	out, err := r.fetchInto(ctx, rec, a, ref, remoteRef)
	if err != nil {
		if old == nil {
			r.dropRepo(ctx, rec) // a failed import leaves no repository behind
		} else {
			r.cleanImport(rec)
		}
	}
	return out, err
}

// fetchInto fetches the upstream's remoteRef into rec (locked) and sets
// ref to it.
func (r *Room) fetchInto(ctx context.Context, rec *record, a *abi.RepoImportArgs, ref, remoteRef string) (*abi.RepoImportResult, error) {
	g, err := r.open(rec)
	if err != nil {
		return nil, err
	}
	tmp := plumbing.ReferenceName("refs/gsv-import/head")
	rem := git.NewRemote(capStorer{Storer: g.Storer, max: r.importMax}, &config.RemoteConfig{Name: "gsv-import", URLs: []string{a.RemoteURL}})
	err = rem.FetchContext(ctx, &git.FetchOptions{RemoteName: "gsv-import", Force: true, Tags: git.NoTags,
		RefSpecs: []config.RefSpec{config.RefSpec("+" + remoteRef + ":" + tmp.String())}})
	if errors.Is(err, errPackTooBig) {
		return nil, abi.E(abi.Invalid, abi.Path(redact(a.RemoteURL)), fmt.Sprintf("the upstream's pack is over the import limit of %d bytes", r.importMax))
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, abi.E(abi.Invalid, abi.Path(redact(a.RemoteURL)), "fetching: "+err.Error())
	}
	got, err := g.Reference(tmp, false)
	if err != nil {
		return nil, abi.E(abi.NotExist, abi.Path(remoteRef), "the upstream has no such ref")
	}
	defer g.Storer.RemoveReference(tmp)
	if _, err := g.CommitObject(got.Hash()); err != nil {
		return nil, abi.E(abi.Invalid, abi.Path(remoteRef), "the upstream ref is not a commit")
	}
	out := &abi.RepoImportResult{Repo: rec.id(), Ref: shortRef(ref), RemoteURL: a.RemoteURL, RemoteRef: remoteRef}
	cur, err := g.Reference(plumbing.ReferenceName(ref), false)
	if err != nil || cur.Hash() != got.Hash() {
		if err := g.Storer.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(ref), got.Hash())); err != nil {
			return nil, err
		}
		out.Changed = true
		r.touch(ctx, rec)
	}
	h := got.Hash().String()
	out.Head = &h
	return out, nil
}

// remoteBranch is the full name of the upstream's ref to import: the one
// given (a branch or tag name, or a full ref), else the branch its HEAD
// names.
func remoteBranch(ctx context.Context, url, want string) (string, error) {
	if want != "" {
		full := want
		if !strings.HasPrefix(want, "refs/") {
			full = "refs/heads/" + want
		}
		if !validRefName(full) {
			return "", abi.E(abi.Invalid, abi.Path(clip(want)), "remoteRef: not a ref name git accepts")
		}
		return full, nil
	}
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "upstream", URLs: []string{url}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{})
	if err != nil {
		return "", abi.E(abi.Invalid, abi.Path(redact(url)), "listing the upstream: "+err.Error())
	}
	var head *plumbing.Reference
	for _, ref := range refs {
		if ref.Name() == plumbing.HEAD {
			head = ref
		}
	}
	if head != nil && head.Type() == plumbing.SymbolicReference {
		return head.Target().String(), nil
	}
	for _, ref := range refs {
		if head != nil && ref.Name().IsBranch() && ref.Hash() == head.Hash() {
			return ref.Name().String(), nil
		}
	}
	return "refs/heads/main", nil
}
