package repos

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// gitCmd runs the real git client in dir with a clean configuration; it
// returns the combined output and the error.
func gitCmd(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // liveness only
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	// At the timeout git and its remote helper go together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustGit is gitCmd that fails the test on an error.
func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitCmd(t, dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return out
}

// token makes a user token for c.
func (h *harness) token(c *kernel.Caller) string {
	h.t.Helper()
	return do(h, c, abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "user"}).Token.Token
}

// TestGitSmartHTTP: the real git client clones a repository over /git/,
// commits and pushes; the push is a commit repo.read sees; bob may not
// push to it (403) nor clone it; a wrong token is 401; a repository made
// public is clonable by bob, who still may not push.
func TestGitSmartHTTP(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git (make deps)")
	}
	h := newHarness(t)
	srv := httptest.NewServer(HTTPHandler(h.k))
	defer srv.Close()
	cr := do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "notes"})
	do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "notes", Message: "seed", Ops: []abi.RepoOp{{Type: "put", Path: "a.md", Content: str("one\n")}}})
	u, _ := url.Parse(srv.URL)
	repoURL := func(user, tok, repo string) string {
		return fmt.Sprintf("http://%s:%s@%s/git/%s", user, url.QueryEscape(tok), u.Host, repo)
	}
	aliceTok, bobTok := h.token(h.alice), h.token(h.bob)
	dir := t.TempDir()
	mustGit(t, dir, "clone", repoURL("alice", aliceTok, "alice/notes"), "notes")
	wt := filepath.Join(dir, "notes")
	if b, err := os.ReadFile(filepath.Join(wt, "a.md")); err != nil || string(b) != "one\n" {
		t.Fatalf("clone: %q %v", b, err)
	}
	if br := strings.TrimSpace(mustGit(t, wt, "rev-parse", "--abbrev-ref", "HEAD")); br != "main" {
		t.Fatalf("cloned branch %q", br)
	}
	os.WriteFile(filepath.Join(wt, "b.md"), []byte("two\n"), 0o644)
	mustGit(t, wt, "add", "b.md")
	mustGit(t, wt, "commit", "-m", "from git")
	mustGit(t, wt, "push", "origin", "main")
	local := strings.TrimSpace(mustGit(t, wt, "rev-parse", "HEAD"))
	if head := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "notes"}).Heads["main"]; head != local {
		t.Fatalf("pushed %s, the repository is at %s", local, head)
	}
	if f := do(h, h.alice, abi.RepoRead, &abi.RepoReadArgs{Repo: "notes", Path: "b.md"}); *f.Content != "two\n" {
		t.Fatalf("b.md: %+v", f)
	}
	// A fetch of a new commit (haves) works too.
	do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "notes", Message: "server side", Ops: []abi.RepoOp{{Type: "put", Path: "c.md", Content: str("three\n")}}})
	mustGit(t, wt, "pull", "--ff-only", "origin", "main")
	if b, _ := os.ReadFile(filepath.Join(wt, "c.md")); string(b) != "three\n" {
		t.Fatalf("pull: c.md %q", b)
	}
	// An old clone's push is refused (its head is stale), and nothing moves.
	old := filepath.Join(dir, "old")
	mustGit(t, dir, "clone", repoURL("alice", aliceTok, "alice/notes"), "old")
	do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "notes", Message: "moved on", Ops: []abi.RepoOp{{Type: "put", Path: "d.md", Content: str("4\n")}}})
	before := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "notes"}).Heads["main"]
	os.WriteFile(filepath.Join(old, "x"), []byte("x"), 0o644)
	mustGit(t, old, "add", "x")
	mustGit(t, old, "commit", "-m", "stale")
	if out, err := gitCmd(t, old, "push", "origin", "main"); err == nil {
		t.Fatalf("a stale push went through:\n%s", out)
	}
	if after := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "notes"}).Heads["main"]; after != before {
		t.Fatal("a refused push moved the head")
	}
	// bob: no clone of a private repository, no push.
	if out, err := gitCmd(t, dir, "clone", repoURL("bob", bobTok, "alice/notes"), "bobs"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("bob cloned alice's private repository: %v\n%s", err, out)
	}
	if out, err := gitCmd(t, wt, "push", repoURL("bob", bobTok, "alice/notes"), "main:refs/heads/bob"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("bob pushed: %v\n%s", err, out)
	}
	if out, err := gitCmd(t, dir, "clone", repoURL("alice", "gsv_wrong", "alice/notes"), "wrong"); err == nil {
		t.Fatalf("a wrong token cloned:\n%s", out)
	}
	// Public: bob clones, still may not push.
	do(h, h.bob, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "pub", Public: true})
	mustGit(t, dir, "clone", repoURL("alice", aliceTok, "bob/pub"), "pub")
	if out, err := gitCmd(t, filepath.Join(dir, "pub"), "push", "origin", "HEAD:refs/heads/x"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("alice pushed to bob's public repository: %v\n%s", err, out)
	}
	_ = cr
}

// TestRepoReceiveStale: a push command whose old value is not the ref's
// head is refused, whatever the client checked, and no ref moves.
func TestRepoReceiveStale(t *testing.T) {
	h := newHarness(t)
	cr := do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "notes"})
	ap := do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "notes", Message: "x", Ops: []abi.RepoOp{{Type: "put", Path: "a", Content: str("a")}}})
	for _, tc := range []struct{ name, cmd string }{
		{"stale", *cr.Head + " " + *ap.Head + " refs/heads/main"},
		{"funny ref", "0000000000000000000000000000000000000000 " + *ap.Head + " refs/heads/a..b"},
		{"not heads or tags", "0000000000000000000000000000000000000000 " + *ap.Head + " refs/gsv/x"},
	} {
		line := tc.cmd + "\x00report-status\n"
		req := fmt.Sprintf("%04x%s0000", len(line)+4, line)
		var out bytes.Buffer
		if _, err := kernel.Do(context.Background(), h.k, h.alice, abi.RepoReceive, &abi.RepoWireArgs{Repo: "notes", In: strings.NewReader(req), Out: &out}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !strings.Contains(out.String(), "ng ") {
			t.Errorf("%s: report %q", tc.name, out.String())
		}
	}
	refs := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "notes"})
	if refs.Heads["main"] != *ap.Head || len(refs.Heads) != 1 {
		t.Fatalf("refs moved: %+v", refs)
	}
}

// TestRepoImport: repo.import fetches an upstream over http (here this
// room's own /git/, as alice) into a new repository of bob's, and a
// second import of an unchanged upstream changes nothing.
func TestRepoImport(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(HTTPHandler(h.k))
	defer srv.Close()
	do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "src", Public: true})
	ap := do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "src", Message: "x", Ops: []abi.RepoOp{{Type: "put", Path: "f", Content: str("upstream\n")}}})
	u, _ := url.Parse(srv.URL)
	remote := fmt.Sprintf("http://bob:%s@%s/git/alice/src", url.QueryEscape(h.token(h.bob)), u.Host)
	res := do(h, h.bob, abi.RepoImport, &abi.RepoImportArgs{Repo: "copy", RemoteURL: remote})
	if !res.Changed || res.Head == nil || *res.Head != *ap.Head || res.RemoteRef != "refs/heads/main" {
		t.Fatalf("import: %+v", res)
	}
	if f := do(h, h.bob, abi.RepoRead, &abi.RepoReadArgs{Repo: "copy", Path: "f"}); *f.Content != "upstream\n" {
		t.Fatalf("imported f: %+v", f)
	}
	if again := do(h, h.bob, abi.RepoImport, &abi.RepoImportArgs{Repo: "copy", RemoteURL: remote, RemoteRef: "main"}); again.Changed {
		t.Fatalf("a second import changed: %+v", again)
	}
	if _, err := kernel.Do(context.Background(), h.k, h.alice, abi.RepoImport, &abi.RepoImportArgs{Repo: "bob/copy", RemoteURL: remote}); kindOf(err) != abi.Permission {
		t.Fatalf("alice imported into bob's: %v", err)
	}
}

// TestRepoImportCap: an upstream pack over the import limit is a 400
// naming the limit; a new repository the import made is gone (record and
// directory), and an existing one keeps its refs and no partial pack.
func TestRepoImportCap(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(HTTPHandler(h.k))
	defer srv.Close()
	do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "big", Public: true})
	noise := make([]byte, 8192)
	for i := range noise {
		noise[i] = byte('a' + (i*7919+i*i*31)%26)
	}
	do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "big", Message: "x", Ops: []abi.RepoOp{{Type: "put", Path: "f", Content: str(string(noise))}}})
	u, _ := url.Parse(srv.URL)
	remote := fmt.Sprintf("http://bob:%s@%s/git/alice/big", url.QueryEscape(h.token(h.bob)), u.Host)
	h.r.importMax = 256
	have := do(h, h.bob, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "have"})
	for _, repo := range []string{"new", "have"} {
		_, err := kernel.Do(context.Background(), h.k, h.bob, abi.RepoImport, &abi.RepoImportArgs{Repo: repo, RemoteURL: remote})
		if kindOf(err) != abi.Invalid || !strings.Contains(err.Error(), "import limit of 256 bytes") {
			t.Fatalf("import into %s over the cap: %v", repo, err)
		}
	}
	if rec, err := h.r.lookup(context.Background(), "bob", "new"); err != nil || rec != nil {
		t.Fatalf("the failed import's new repository is recorded: %+v %v", rec, err)
	}
	if _, err := os.Stat(filepath.Join(h.r.dir, "bob", "new.git")); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(filepath.Join(h.r.dir, "bob"))
		t.Fatalf("the failed import left a directory: %v %v", err, entries)
	}
	rec, _ := h.r.lookup(context.Background(), "bob", "have")
	left, _ := filepath.Glob(filepath.Join(h.r.gitDir(rec), "objects", "pack", "*"))
	if len(left) != 0 {
		t.Fatalf("the failed import left %v", left)
	}
	if refs := do(h, h.bob, abi.RepoRefs, &abi.RepoArgs{Repo: "have"}); refs.Heads["main"] != *have.Head {
		t.Fatalf("have's refs moved: %+v (was %v)", refs, *have.Head)
	}
	h.r.importMax = importPackMax
	if res := do(h, h.bob, abi.RepoImport, &abi.RepoImportArgs{Repo: "new", RemoteURL: remote}); !res.Changed {
		t.Fatalf("import under the cap: %+v", res)
	}
}
