package repos

import (
	"reflect"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestJournal: fs.changed signals are kept per tree (a home, a
// workspace), a rename under both its paths; a drain takes a tree's and
// leaves the others'; paths outside homes and workspaces, and other
// signals, are not kept; past maxJournal a new path is not kept.
func TestJournal(t *testing.T) {
	var j journal
	sig := func(p abi.FsChanged) *kernel.Event { return &kernel.Event{Signal: abi.SigFsChanged.Name, Payload: p} }
	j.observe(sig(abi.FsChanged{Op: "write", Path: "/home/alice/a.txt", Uid: 1000, Username: "alice", Pid: "p_1"}), kernel.Audience{})
	j.observe(sig(abi.FsChanged{Op: "rename", Path: "/home/alice/d2", From: "/home/alice/d1", Uid: 0, Username: "root"}), kernel.Audience{})
	j.observe(sig(abi.FsChanged{Op: "write", Path: "/workspaces/abc/x", Uid: 1000, Username: "alice"}), kernel.Audience{})
	j.observe(sig(abi.FsChanged{Op: "write", Path: "/etc/passwd", Uid: 0, Username: "root"}), kernel.Audience{})
	j.observe(sig(abi.FsChanged{Op: "mkdir", Path: "/home/bob", Uid: 0, Username: "root"}), kernel.Audience{})
	j.observe(&kernel.Event{Signal: "other", Payload: abi.FsChanged{Path: "/home/alice/z"}}, kernel.Audience{})
	// A tree written to now is busy until its writes pause (quietFor),
	// never past maxDefer after its burst began.
	now := time.Now()
	if !j.busy("/home/alice", now) || j.busy("/home/alice", now.Add(quietFor+time.Second)) || j.busy("/home/carol", now) {
		t.Fatal("busy: a tree just written to is busy, a quiet or unwritten one is not")
	}
	j.mu.Lock()
	j.active["/home/alice"] = burst{first: now.Add(-maxDefer), last: now}
	j.mu.Unlock()
	if j.busy("/home/alice", now) {
		t.Fatal("busy past maxDefer")
	}
	home := j.drain("/home/alice")
	if len(home) != 3 || home["a.txt"].w != (writer{"alice", 1000, "p_1"}) || home["d1"].w.name != "root" || home["d2"].w.name != "root" {
		t.Fatalf("alice's home: %+v", home)
	}
	if j.busy("/home/alice", now) {
		t.Fatal("busy after a drain")
	}
	if again := j.drain("/home/alice"); len(again) != 0 {
		t.Fatalf("drained twice: %+v", again)
	}
	if ws := j.drain("/workspaces/abc"); len(ws) != 1 || j.n != 0 {
		t.Fatalf("the workspace: %+v (n %d)", ws, j.n)
	}
	j.n = maxJournal
	j.observe(sig(abi.FsChanged{Op: "write", Path: "/home/alice/b", Username: "alice"}), kernel.Audience{})
	if m := j.drain("/home/alice"); len(m) != 0 {
		t.Fatalf("past the bound: %+v", m)
	}
}

// TestGroupByWriter: changed paths go to their own writer or their
// nearest noted directory's, the rest to the owner; groups come in the
// order their writers first wrote, the owner's unsigned share first.
func TestGroupByWriter(t *testing.T) {
	alice, agent, root := writer{"alice", 1000, ""}, writer{"alice", 1000, "p_1"}, writer{"root", 0, ""}
	notes := map[string]noted{
		"agent.txt": {agent, 5},
		"d":         {root, 2}, // a directory root removed or renamed whole
		"mine.txt":  {alice, 9},
	}
	got := groupByWriter([]string{"agent.txt", "d/a", "d/b/c", "mine.txt", "shell.txt"}, notes, alice)
	type g struct {
		w     writer
		paths []string
	}
	var out []g
	for _, gr := range got {
		out = append(out, g{gr.w, gr.paths})
	}
	want := []g{{alice, []string{"mine.txt", "shell.txt"}}, {root, []string{"d/a", "d/b/c"}}, {agent, []string{"agent.txt"}}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("groups:\n got %+v\nwant %+v", out, want)
	}
	for _, tc := range []struct{ in, tree, rel string }{
		{"/home/alice/x/y", "/home/alice", "x/y"},
		{"/home/alice", "/home/alice", ""},
		{"/workspaces/abc/f", "/workspaces/abc", "f"},
	} {
		if tree, rel, ok := treeOf(tc.in); !ok || tree != tc.tree || rel != tc.rel {
			t.Errorf("treeOf(%q) = %q %q %v", tc.in, tree, rel, ok)
		}
	}
	for _, p := range []string{"/home/", "/var/sessions/alice/x", "/homes/x"} {
		if _, _, ok := treeOf(p); ok {
			t.Errorf("treeOf(%q) is a tree", p)
		}
	}
}
