package repos

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
)

// harness is kerneltest's kernel (root; alice; bob) with the repos room.
type harness struct {
	t                *testing.T
	k                *kernel.Kernel
	r                *Room
	root, alice, bob *kernel.Caller
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	env := kerneltest.Open(t)
	space := ns.New(env.K)
	r, err := Open(space, Options{Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { space.Close() })
	return &harness{t: t, k: env.K, r: r, root: kerneltest.Caller(env.Root),
		alice: kerneltest.Caller(env.Alice), bob: kerneltest.Caller(env.Bob)}
}

func do[A, R any](h *harness, c *kernel.Caller, call abi.Call[A, R], a *A) R {
	h.t.Helper()
	res, err := kernel.Do(context.Background(), h.k, c, call, a)
	if err != nil {
		h.t.Fatalf("%s: %v", call.Name, err)
	}
	return res
}

func kindOf(err error) abi.Kind {
	var e *abi.Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

func str(s string) *string { return &s }

// TestRepoCreateApplyRead: a repository made, written with apply, read
// back as a tree, a file, a log, a diff and a search.
func TestRepoCreateApplyRead(t *testing.T) {
	h := newHarness(t)
	cr := do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "notes"})
	if !cr.Created || cr.Repo != "alice/notes" || cr.Ref != "main" || cr.Head == nil {
		t.Fatalf("create: %+v", cr)
	}
	again := do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "alice/notes"})
	if again.Created || *again.Head != *cr.Head {
		t.Fatalf("create again: %+v", again)
	}
	ap := do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "alice/notes", Message: "first", ExpectedHead: cr.Head,
		Ops: []abi.RepoOp{{Type: "put", Path: "a.md", Content: str("hello\nworld\n")}, {Op: "put", Path: "d/b.txt", Content: str("bee\n")}}})
	tree := do(h, h.alice, abi.RepoRead, &abi.RepoReadArgs{Repo: "alice/notes"})
	if tree.Kind != "tree" || len(tree.Entries) != 2 || tree.Entries[0].Name != "a.md" || tree.Entries[1].Type != "tree" {
		t.Fatalf("tree: %+v", tree)
	}
	f := do(h, h.alice, abi.RepoRead, &abi.RepoReadArgs{Repo: "alice/notes", Path: "d/b.txt"})
	if f.Kind != "file" || f.Content == nil || *f.Content != "bee\n" {
		t.Fatalf("file: %+v", f)
	}
	lg := do(h, h.alice, abi.RepoLog, &abi.RepoLogArgs{Repo: "alice/notes"})
	if len(lg.Entries) != 2 || lg.Entries[0].Hash != *ap.Head || lg.Entries[0].Message != "first" || lg.Entries[0].Author != "alice" {
		t.Fatalf("log: %+v", lg)
	}
	df := do(h, h.alice, abi.RepoDiff, &abi.RepoDiffArgs{Repo: "alice/notes", Commit: *ap.Head})
	if df.Stats.FilesChanged != 2 || df.Stats.Additions != 3 || df.Files[0].Status != "added" {
		t.Fatalf("diff: %+v", df)
	}
	ap2 := do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "alice/notes", Message: "edit",
		Ops: []abi.RepoOp{{Type: "put", Path: "a.md", Content: str("hello\nthere\n")}, {Type: "move", From: "d", To: "e"}}})
	cmp := do(h, h.alice, abi.RepoCompare, &abi.RepoCompareArgs{Repo: "alice/notes", Base: *ap.Head, Head: "main", Path: "a.md"})
	if cmp.Stats.FilesChanged != 1 || cmp.Stats.Additions != 1 || cmp.Stats.Deletions != 1 || cmp.Head != *ap2.Head {
		t.Fatalf("compare: %+v", cmp)
	}
	hunk := cmp.Files[0].Hunks[0]
	if hunk.OldStart != 1 || hunk.OldCount != 2 || hunk.NewCount != 2 || hunk.Lines[1].Tag != "delete" || hunk.Lines[2].Content != "there" {
		t.Fatalf("hunk: %+v", hunk)
	}
	s := do(h, h.alice, abi.RepoSearch, &abi.RepoSearchArgs{Repo: "alice/notes", Query: "bee"})
	if len(s.Matches) != 1 || s.Matches[0].Path != "e/b.txt" || s.Matches[0].Line != 1 {
		t.Fatalf("search: %+v", s)
	}
	refs := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "alice/notes"})
	if refs.Heads["main"] != *ap2.Head {
		t.Fatalf("refs: %+v", refs)
	}
	old := do(h, h.alice, abi.RepoRead, &abi.RepoReadArgs{Repo: "alice/notes", Ref: "main~1", Path: "a.md"})
	if *old.Content != "hello\nworld\n" {
		t.Fatalf("main~1: %+v", old)
	}
	// The repository on disk is the daemon's alone.
	for _, p := range []string{h.r.dir, filepath.Join(h.r.dir, "alice")} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", p, st.Mode(), err)
		}
	}
}

// TestRepoApplyStale: an apply whose expectedHead is stale is a 409 and
// changes nothing; racing applies from one head: exactly one wins.
func TestRepoApplyStale(t *testing.T) {
	h := newHarness(t)
	cr := do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "notes"})
	do(h, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "notes", Message: "one", ExpectedHead: cr.Head,
		Ops: []abi.RepoOp{{Type: "put", Path: "a", Content: str("1")}}})
	before := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "notes"}).Heads["main"]
	_, err := kernel.Do(context.Background(), h.k, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "notes", Message: "stale", ExpectedHead: cr.Head,
		Ops: []abi.RepoOp{{Type: "put", Path: "a", Content: str("2")}}})
	if kindOf(err) != abi.Busy || !strings.Contains(err.Error(), "stale head") {
		t.Fatalf("stale apply: %v", err)
	}
	if after := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "notes"}).Heads["main"]; after != before {
		t.Fatalf("the head moved: %s -> %s", before, after)
	}
	// Racing.
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	for i := range n {
		wg.Go(func() {
			_, err := kernel.Do(context.Background(), h.k, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "notes", Message: "race", ExpectedHead: &before,
				Ops: []abi.RepoOp{{Type: "put", Path: "r", Content: str(string(rune('a' + i)))}}})
			mu.Lock()
			defer mu.Unlock()
			switch kindOf(err) {
			case 0:
				wins++
			case abi.Busy:
				conflicts++
			default:
				t.Errorf("race: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || conflicts != n-1 {
		t.Fatalf("wins %d conflicts %d", wins, conflicts)
	}
}

// TestRepoAccess: owners write; another user reads a public repository
// only, and writes none; root does everything.
func TestRepoAccess(t *testing.T) {
	h := newHarness(t)
	do(h, h.bob, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "secret"})
	do(h, h.bob, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "open", Public: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
		want abi.Kind
	}{
		{"read private", func() error {
			_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoRead, &abi.RepoReadArgs{Repo: "bob/secret"})
			return err
		}(), abi.Permission},
		{"log private", func() error {
			_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoLog, &abi.RepoLogArgs{Repo: "bob/secret"})
			return err
		}(), abi.Permission},
		{"read public", func() error {
			_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoRead, &abi.RepoReadArgs{Repo: "bob/open"})
			return err
		}(), 0},
		{"write public", func() error {
			_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "bob/open", Ops: []abi.RepoOp{{Type: "put", Path: "x", Content: str("x")}}})
			return err
		}(), abi.Permission},
		{"create for another", func() error {
			_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "bob/mine"})
			return err
		}(), abi.Permission},
		{"root writes", func() error {
			_, err := kernel.Do(ctx, h.k, h.root, abi.RepoApply, &abi.RepoApplyArgs{Repo: "bob/secret", Ops: []abi.RepoOp{{Type: "put", Path: "x", Content: str("x")}}})
			return err
		}(), 0},
		{"missing", func() error {
			_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "bob/none"})
			return err
		}(), abi.NotExist},
	} {
		if got := kindOf(tc.err); got != tc.want {
			t.Errorf("%s: got %v (%v), want %v", tc.name, got, tc.err, tc.want)
		}
	}
	list := do(h, h.alice, abi.RepoList, &abi.RepoListArgs{})
	if len(list.Repos) != 1 || list.Repos[0].Repo != "bob/open" || list.Repos[0].Writable {
		t.Fatalf("alice's list: %+v", list)
	}
}

// TestRepoBadInput: each a 400, nothing written.
func TestRepoBadInput(t *testing.T) {
	h := newHarness(t)
	cr := do(h, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: "notes"})
	big := strings.Repeat("x", maxBlob+1)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		a    abi.RepoApplyArgs
	}{
		{"dotdot", abi.RepoApplyArgs{Ops: []abi.RepoOp{{Type: "put", Path: "../x", Content: str("x")}}}},
		{"absolute", abi.RepoApplyArgs{Ops: []abi.RepoOp{{Type: "put", Path: "/etc/passwd", Content: str("x")}}}},
		{".git", abi.RepoApplyArgs{Ops: []abi.RepoOp{{Type: "put", Path: "a/.GIT/config", Content: str("x")}}}},
		{"huge", abi.RepoApplyArgs{Ops: []abi.RepoOp{{Type: "put", Path: "big", Content: &big}}}},
		{"bad ref", abi.RepoApplyArgs{Ref: "a..b", Ops: []abi.RepoOp{{Type: "put", Path: "a", Content: str("x")}}}},
		{"ref lock", abi.RepoApplyArgs{Ref: "x.lock", Ops: []abi.RepoOp{{Type: "put", Path: "a", Content: str("x")}}}},
		{"unknown op", abi.RepoApplyArgs{Ops: []abi.RepoOp{{Type: "chmod", Path: "a"}}}},
		{"empty", abi.RepoApplyArgs{}},
		{"bad expected", abi.RepoApplyArgs{ExpectedHead: str("HEAD"), Ops: []abi.RepoOp{{Type: "put", Path: "a", Content: str("x")}}}},
		{"move into itself", abi.RepoApplyArgs{Ops: []abi.RepoOp{{Type: "move", From: "a", To: "a/b"}}}},
	} {
		a := tc.a
		a.Repo = "notes"
		_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoApply, &a)
		if kindOf(err) != abi.Invalid {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	for _, u := range []string{"file:///etc", "/tmp/x", "ssh://host/x", "ext::sh -c id"} {
		_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoImport, &abi.RepoImportArgs{Repo: "imp", RemoteURL: u})
		if kindOf(err) != abi.Invalid {
			t.Errorf("import %q: %v", u, err)
		}
	}
	for _, name := range []string{"../x", ".hidden", "a/b/c", "x.git", ""} {
		_, err := kernel.Do(ctx, h.k, h.alice, abi.RepoCreate, &abi.RepoCreateArgs{Repo: name})
		if kindOf(err) != abi.Invalid {
			t.Errorf("create %q: %v", name, err)
		}
	}
	if head := do(h, h.alice, abi.RepoRefs, &abi.RepoArgs{Repo: "notes"}).Heads["main"]; head != *cr.Head {
		t.Fatalf("the head moved")
	}
	for _, r := range do(h, h.alice, abi.RepoList, &abi.RepoListArgs{}).Repos {
		// alice/home is the home keeper's, made once the test outlasts a
		// batch (under -race).
		if r.Repo != "alice/notes" && r.Repo != "alice/home" {
			t.Fatalf("a bad create made a repository: %+v", r)
		}
	}
}
