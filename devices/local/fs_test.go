package local_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

func TestFSPermissions(t *testing.T) {
	k, root, alice, bob := newKernel(t)
	ctx := context.Background()
	call := func(id *kernel.Identity, name string, args any) map[string]any {
		res, err := k.Call(ctx, &kernel.Caller{Identity: id}, name, args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return asMap(res)
	}
	if r := call(alice, "fs.write", &abi.FSWriteArgs{Path: "~/notes/a.txt", Content: "one\ntwo\nthree\n"}); r["ok"] != true {
		t.Fatalf("write: %v", r)
	}
	r := call(alice, "fs.read", &abi.FSReadArgs{Path: "/home/alice/notes/a.txt", Offset: 1, Limit: 1})
	if r["content"] != "     2\ttwo\n" || r["lines"] != 3 {
		t.Fatalf("read: %q", r)
	}
	if r := call(bob, "fs.read", &abi.FSReadArgs{Path: "/home/alice/notes/a.txt"}); r["ok"] != true {
		t.Fatalf("bob reading 0644: %v", r)
	}
	// chmod 600 through the POSIX side, then bob is refused and root is not.
	mode := fs.FileMode(0o600)
	if _, err := k.Call(ctx, &kernel.Caller{Identity: alice}, "fs.setattr", &local.SetattrArgs{Path: "home/alice/notes/a.txt", Set: abi.SetAttr{Mode: &mode}}); err != nil {
		t.Fatal(err)
	}
	if r := call(bob, "fs.read", &abi.FSReadArgs{Path: "/home/alice/notes/a.txt"}); r["ok"] != false || !strings.Contains(r["error"].(string), "permission denied") {
		t.Fatalf("bob reading 0600: %v", r)
	}
	if r := call(bob, "fs.write", &abi.FSWriteArgs{Path: "/home/alice/notes/a.txt", Content: "x"}); r["ok"] != false {
		t.Fatalf("bob writing: %v", r)
	}
	if r := call(root, "fs.read", &abi.FSReadArgs{Path: "/home/alice/notes/a.txt"}); r["ok"] != true {
		t.Fatalf("root reading: %v", r)
	}
	if _, err := k.Call(ctx, &kernel.Caller{Identity: bob}, "fs.setattr", &local.SetattrArgs{Path: "home/alice/notes/a.txt", Set: abi.SetAttr{Mode: &mode}}); abi.Code(err) != 403 {
		t.Fatalf("bob chmod: %v", err)
	}
	// edit, search, delete.
	if r := call(alice, "fs.edit", &abi.FSEditArgs{Path: "~/notes/a.txt", OldString: "two", NewString: "2"}); r["replacements"] != 1 {
		t.Fatalf("edit: %v", r)
	}
	if r := call(alice, "fs.edit", &abi.FSEditArgs{Path: "~/notes/a.txt", OldString: "absent", NewString: "2"}); r["ok"] != false {
		t.Fatalf("edit missing: %v", r)
	}
	sr := call(alice, "fs.search", &abi.FSSearchArgs{Query: "thr", Path: "~"})
	if sr["count"] != 1 {
		t.Fatalf("search: %v", sr)
	}
	if r := call(alice, "fs.search", &abi.FSSearchArgs{Query: ""}); r["ok"] != false {
		t.Fatalf("empty search: %v", r)
	}
	if r := call(bob, "fs.delete", &abi.FSDeleteArgs{Path: "/home/alice/notes"}); r["ok"] != false {
		t.Fatalf("bob delete: %v", r)
	}
	if r := call(alice, "fs.delete", &abi.FSDeleteArgs{Path: "~/notes"}); r["ok"] != true {
		t.Fatalf("delete: %v", r)
	}
	// bad paths
	for _, p := range []string{"/home/alice/../bob/x", "/home/alice/\x00x", "/home/alice/\xff", "/etc/passwd", ""} {
		if r := call(alice, "fs.write", &abi.FSWriteArgs{Path: p, Content: "x"}); r["ok"] != false {
			t.Errorf("write %q accepted", p)
		}
	}
}

// A symbolic link in a home is listed and read as a link, and never
// followed by the daemon, whichever way the file is reached; its target
// may point anywhere (it is data).
func TestSymlinkNotFollowed(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(k.dataPath, "..", "outside"), []byte("secret"), 0o644)
	if err := os.Symlink("../../../outside", filepath.Join(k.dataPath, "home/root/link")); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(k.dataPath, "home/root/d"), 0o755)
	os.Symlink("/etc", filepath.Join(k.dataPath, "home/root/d/etc"))
	c := &kernel.Caller{Identity: root}
	for _, p := range []string{"home/root/link", "home/root/d/etc/passwd"} {
		if f, err := k.Call(ctx, c, "fs.open", &local.OpenArgs{Path: p, Flags: os.O_RDONLY}); err == nil {
			f.(*os.File).Close()
			t.Errorf("fs.open %s followed a symlink", p)
		}
		if r, _ := k.Call(ctx, c, "fs.read", &abi.FSReadArgs{Path: "/" + p}); asMap(r)["ok"] != false {
			t.Errorf("fs.read %s followed a symlink", p)
		}
	}
	ents, err := kernel.Do(ctx, k.Kernel, c, abi.FsReaddir, &local.PathArgs{Path: "home/root"})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, e := range ents {
		if e.Name == "link" {
			listed = e.Attr.Mode&fs.ModeSymlink != 0 && e.Attr.Size == int64(len("../../../outside"))
		}
	}
	if !listed {
		t.Errorf("symlink not listed as a link: %+v", ents)
	}
	if tgt, err := kernel.Do(ctx, k.Kernel, c, abi.FsReadlink, &local.PathArgs{Path: "home/root/link"}); err != nil || tgt != "../../../outside" {
		t.Errorf("fs.readlink = %q, %v", tgt, err)
	}
	if _, err := kernel.Do(ctx, k.Kernel, c, abi.FsReadlink, &local.PathArgs{Path: "home/root/d"}); abi.Code(err) != 400 {
		t.Errorf("fs.readlink of a directory: %v", err)
	}
	// A link in a path is never walked: not by stat, mkdir, symlink,
	// rename or setattr.
	ac := &kernel.Caller{Identity: alice}
	os.WriteFile(filepath.Join(k.dataPath, "home/root/d/file"), nil, 0o644)
	if err := os.Symlink("../root", filepath.Join(k.dataPath, "home/alice/r")); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		name string
		args any
	}{
		{"fs.stat", &local.PathArgs{Path: "home/alice/r/d"}},
		{"fs.stat", &local.PathArgs{Path: "home/alice/r/d/file"}}, // a node walked before r became a link
		{"fs.mkdir", &local.MkdirArgs{Path: "home/alice/r/new", Perm: 0o755}},
		{"fs.symlink", &local.SymlinkArgs{Target: "x", Path: "home/alice/r/new"}},
		{"fs.link", &local.RenameArgs{Old: "home/root/link", New: "home/alice/r/new"}},
		{"fs.rename", &local.RenameArgs{Old: "home/alice/r", New: "home/alice/r/new"}},
		{"fs.setattr", &local.SetattrArgs{Path: "home/alice/r", Set: abi.SetAttr{Mode: ptr(fs.FileMode(0o700))}}},
	} {
		if _, err := k.Call(ctx, ac, call.name, call.args); err == nil {
			t.Errorf("%s %+v through a link succeeded", call.name, call.args)
		}
	}
	if _, err := os.Lstat(filepath.Join(k.dataPath, "home/root/new")); err == nil {
		t.Error("made a file through a link")
	}
}

func ptr[T any](v T) *T { return &v }

// fs.symlink, fs.link and fs.readlink: links within one owner's tree.
func TestLinks(t *testing.T) {
	k, _, alice, bob := newKernel(t)
	ctx := context.Background()
	ac, bc := &kernel.Caller{Identity: alice}, &kernel.Caller{Identity: bob}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(k.dataPath, "home/alice/f"), []byte("hi"), 0o644))
	a, err := kernel.Do(ctx, k.Kernel, ac, abi.FsSymlink, &local.SymlinkArgs{Target: "/usr/bin/python3", Path: "home/alice/py"})
	must(err)
	if a.Mode&fs.ModeSymlink == 0 || a.Size != int64(len("/usr/bin/python3")) || a.User != "alice" {
		t.Fatalf("fs.symlink attr %+v", a)
	}
	if tgt, err := kernel.Do(ctx, k.Kernel, ac, abi.FsReadlink, &local.PathArgs{Path: "home/alice/py"}); err != nil || tgt != "/usr/bin/python3" {
		t.Fatalf("readlink = %q, %v", tgt, err)
	}
	a, err = kernel.Do(ctx, k.Kernel, ac, abi.FsLink, &local.RenameArgs{Old: "home/alice/f", New: "home/alice/g"})
	must(err)
	if a.Nlink != 2 || !a.Mode.IsRegular() {
		t.Fatalf("fs.link attr %+v", a)
	}
	for _, tc := range []struct {
		name  string
		c     *kernel.Caller
		call  string
		args  any
		errno syscall.Errno
	}{
		{"bob links into alice's home", bc, "fs.symlink", &local.SymlinkArgs{Target: "x", Path: "home/alice/x"}, syscall.EACCES},
		{"bob hard-links alice's file", bc, "fs.link", &local.RenameArgs{Old: "home/alice/f", New: "home/bob/f"}, syscall.EXDEV},
		{"alice hard-links into bob's home", ac, "fs.link", &local.RenameArgs{Old: "home/alice/f", New: "home/bob/f"}, syscall.EACCES},
		{"link to a directory", ac, "fs.link", &local.RenameArgs{Old: "home/alice", New: "home/alice/h"}, syscall.EPERM},
		{"empty target", ac, "fs.symlink", &local.SymlinkArgs{Target: "", Path: "home/alice/e"}, syscall.EINVAL},
		{"NUL in target", ac, "fs.symlink", &local.SymlinkArgs{Target: "a\x00b", Path: "home/alice/e"}, syscall.EINVAL},
		{"name taken", ac, "fs.symlink", &local.SymlinkArgs{Target: "x", Path: "home/alice/f"}, syscall.EEXIST},
		{"readlink of a file", ac, "fs.readlink", &local.PathArgs{Path: "home/alice/f"}, syscall.EINVAL},
		{"chmod of a link", ac, "fs.setattr", &local.SetattrArgs{Path: "home/alice/py", Set: abi.SetAttr{Mode: ptr(fs.FileMode(0o600))}}, syscall.EOPNOTSUPP},
	} {
		if _, err := k.Call(ctx, tc.c, tc.call, tc.args); vfs.Errno(err) != tc.errno {
			t.Errorf("%s: %v (errno %v), want %v", tc.name, err, vfs.Errno(err), tc.errno)
		}
	}
	if _, err := os.Lstat(filepath.Join(k.dataPath, "home/bob/f")); err == nil {
		t.Error("a refused link was made")
	}
	// fs.delete removes links, never what they point to.
	must(os.WriteFile(filepath.Join(k.dataPath, "home/bob/keep"), []byte("b"), 0o644))
	must(os.Mkdir(filepath.Join(k.dataPath, "home/alice/v"), 0o755))
	must(os.Symlink("../../bob", filepath.Join(k.dataPath, "home/alice/v/b")))
	r, _ := k.Call(ctx, ac, "fs.delete", &abi.FSDeleteArgs{Path: "/home/alice/v"})
	if asMap(r)["ok"] != true {
		t.Fatalf("fs.delete of a tree with a link: %v", r)
	}
	if _, err := os.Stat(filepath.Join(k.dataPath, "home/bob/keep")); err != nil {
		t.Fatalf("fs.delete followed a link: %v", err)
	}
}
