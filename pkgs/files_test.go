package pkgs_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// readNS reads file p of the namespace as c, as a transport does: a walk
// from the root, an open and reads to the end.
func readNS(t *testing.T, s *sys, c *kernel.Caller, p string) []byte {
	t.Helper()
	ctx := context.Background()
	var n vfs.Node = s.space.Root()
	for _, name := range strings.Split(p, "/") {
		d, ok := n.(vfs.Dir)
		if !ok {
			t.Fatalf("%s: %s is not in a directory", p, name)
		}
		var err error
		if n, err = d.Lookup(ctx, c.Identity, name); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	f, ok := n.(vfs.File)
	if !ok {
		t.Fatalf("%s: not a file", p)
	}
	h, err := f.Open(ctx, c.Identity, os.O_RDONLY)
	if err != nil {
		t.Fatalf("%s: open: %v", p, err)
	}
	defer h.Close(ctx)
	var out []byte
	buf := make([]byte, 4096)
	for {
		k, err := h.Read(ctx, buf, int64(len(out)))
		out = append(out, buf[:k]...)
		if k == 0 || err != nil {
			return out
		}
	}
}

// TestPkgBinaryFile: a binary file of a package reads as its bytes under
// /pkg/<scope>/<name>/files (pkg.blob), as a text file does.
func TestPkgBinaryFile(t *testing.T) {
	s := newSys(t, nil)
	s.commit(s.alice, "release-tools", "main", releaseTools())
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\xff\xfe binary")
	b64 := base64.StdEncoding.EncodeToString(png)
	do(s, s.alice, abi.RepoApply, &abi.RepoApplyArgs{Repo: "release-tools", Ref: "main", Message: "a logo",
		Ops: []abi.RepoOp{{Type: "put", Path: "assets/logo.png", ContentBase64: &b64}}})
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	for _, tc := range []struct {
		path string
		want []byte
	}{
		{"assets/logo.png", png},
		{"CONTEXT.md", []byte("Releases are cut on Mondays.\n")},
	} {
		got := readNS(t, s, s.alice, "pkg/alice/release-tools/files/"+tc.path)
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: %+v, want %q", tc.path, got, tc.want)
		}
	}
	fails(s, s.alice, abi.PkgBlob, &abi.PkgFileArgs{PackageID: "release-tools", Path: "../x"}, abi.Invalid, "path")
	fails(s, s.bob, abi.PkgBlob, &abi.PkgFileArgs{PackageID: "alice/release-tools", Path: "CONTEXT.md"}, abi.Permission, "another user's package")
}
