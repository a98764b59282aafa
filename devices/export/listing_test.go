package export_test

import (
	"os"
	"path/filepath"
	"testing"

	"9fans.net/go/plan9"

	"gsvfs.dev/gsvfs/devices/export"
)

// TestListingStats: a directory's listing gives each entry the stat a
// Tstat of it gives (a link inside Root as its target, one that leads out
// or nowhere as a link), in Root and in a directory below it.
func TestListingStats(t *testing.T) {
	_, root, fsys := serve(t, export.Options{})
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret\n"), 0o644)
	for _, dir := range []string{root, filepath.Join(root, "sub")} {
		os.MkdirAll(filepath.Join(dir, "d"), 0o750)
		os.WriteFile(filepath.Join(dir, "f.txt"), []byte("twelve bytes"), 0o640)
		os.Symlink("f.txt", filepath.Join(dir, "in-link"))
		os.Symlink("d", filepath.Join(dir, "dir-link"))
		os.Symlink(outside, filepath.Join(dir, "out"))
		os.Symlink("nowhere", filepath.Join(dir, "dangling"))
	}
	for _, dir := range []string{"fs", "fs/sub"} {
		fid, err := fsys.Open(dir, plan9.OREAD)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := fid.Dirreadall()
		fid.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"d": true, "f.txt": true, "in-link": true, "dir-link": true, "out": true, "dangling": true}
		if dir == "fs" {
			want["sub"] = true
		}
		for _, e := range ents {
			if !want[e.Name] {
				t.Errorf("%s: listed %q", dir, e.Name)
				continue
			}
			delete(want, e.Name)
			st, err := fsys.Stat(dir + "/" + e.Name)
			if err != nil {
				t.Errorf("stat %s/%s: %v", dir, e.Name, err)
				continue
			}
			if e.Mode != st.Mode || e.Length != st.Length || e.Qid != st.Qid || e.Mtime != st.Mtime || e.Uid != st.Uid || e.Gid != st.Gid {
				t.Errorf("%s/%s: listed %v, stat %v", dir, e.Name, e, st)
			}
		}
		if len(want) > 0 {
			t.Errorf("%s: not listed: %v", dir, want)
		}
	}
}
