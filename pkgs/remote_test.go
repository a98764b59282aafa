package pkgs_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/pkgs"
	"gsvfs.dev/gsvfs/repos"
)

// serve serves the repositories' git smart HTTP and the package catalog
// as the daemon's --http does, and returns the base URL.
func (s *sys) serve() string {
	mux := http.NewServeMux()
	mux.Handle(repos.HTTPPath, repos.HTTPHandler(s.k))
	mux.Handle(pkgs.CatalogPath, pkgs.CatalogHandler(s.k))
	srv := httptest.NewServer(mux)
	s.t.Cleanup(srv.Close)
	return srv.URL
}

// TestPkgRemote: bob adds alice's package from its git URL (served over
// the /git/ HTTP of the repositories, with bob's token) at a tag-like
// branch, its password never shown; the package is review-required;
// alice marks it public; bob's remote's catalog lists it; a catalog
// remote that is not http(s) is refused.
func TestPkgRemote(t *testing.T) {
	s := newSys(t, nil)
	base := s.serve()
	do(s, s.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "release-tools", Public: true})
	s.commit(s.alice, "release-tools", "main", releaseTools())
	files := releaseTools()
	files["CONTEXT.md"] = "v1.2 context\n"
	s.branch(s.alice, "release-tools", "v1.2", files)
	tok := do(s, s.bob, abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "user"}).Token.Token
	u, _ := url.Parse(base)
	u.User = url.UserPassword("bob", tok)
	u.Path = "/git/alice/release-tools"
	add := do(s, s.bob, abi.PkgAdd, &abi.PkgAddArgs{RemoteURL: u.String(), Ref: "v1.2"})
	p := add.Package
	if p.ID != "bob/release-tools" || p.Repo != "bob/pkg-release-tools" || p.Ref != "v1.2" || !p.Review.Required || p.Enabled {
		t.Fatalf("add: %+v", add)
	}
	for _, shown := range []string{p.RemoteURL, add.Imported.RemoteURL} {
		if strings.Contains(shown, tok) || !strings.Contains(shown, "/git/alice/release-tools") {
			t.Fatalf("remote URL shown as %q", shown)
		}
	}
	ctx := do(s, s.bob, abi.FsRead, &abi.FSReadArgs{Path: "/pkg/bob/release-tools/files/CONTEXT.md", Raw: true})
	if ctx.Content != "v1.2 context\n" {
		t.Fatalf("files at v1.2: %+v", ctx)
	}
	// alice's own package, public in her server's catalog.
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	fails(s, s.bob, abi.PkgPublicSet, &abi.PkgPublicSetArgs{Repo: "alice/release-tools", Public: true}, abi.Permission)
	do(s, s.alice, abi.PkgPublicSet, &abi.PkgPublicSetArgs{PackageID: "release-tools", Public: true})
	rm := do(s, s.bob, abi.PkgRemoteAdd, &abi.PkgRemoteAddArgs{Name: "team", BaseURL: base + "/"})
	if !rm.Changed || rm.Remote.BaseURL != base || len(rm.Remotes) != 1 {
		t.Fatalf("remote add: %+v", rm)
	}
	cat := do(s, s.bob, abi.PkgPublicList, &abi.PkgPublicListArgs{Remote: "team"})
	if cat.Source.Kind != "remote" || len(cat.Packages) != 1 || cat.Packages[0].Name != "release-tools" || cat.Packages[0].Repo != "alice/release-tools" {
		t.Fatalf("catalog: %+v", cat)
	}
	if local := do(s, s.alice, abi.PkgPublicList, &abi.PkgPublicListArgs{}); local.Source.Kind != "local" || len(local.Packages) != 1 {
		t.Fatalf("local catalog: %+v", local)
	}
	fails(s, s.bob, abi.PkgPublicList, &abi.PkgPublicListArgs{Remote: "nope"}, abi.NotExist)
	fails(s, s.bob, abi.PkgRemoteAdd, &abi.PkgRemoteAddArgs{Name: "ssh", BaseURL: "ssh://x"}, abi.Invalid, "baseUrl")
	if rr := do(s, s.bob, abi.PkgRemoteRemove, &abi.PkgRemoteRemoveArgs{Name: "team"}); !rr.Removed || len(rr.Remotes) != 0 {
		t.Fatalf("remote remove: %+v", rr)
	}
	// bob's package re-resolved at main from its upstream.
	co := do(s, s.bob, abi.PkgCheckout, &abi.PkgCheckoutArgs{PackageID: "release-tools", Ref: "main"})
	if !co.Changed || co.Package.Ref != "main" {
		t.Fatalf("checkout main: %+v", co)
	}
}
