package main_test

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"9fans.net/go/plan9"
)

// TestE2EDevFiles: /dev/null, /dev/zero, /dev/random and /dev/urandom are
// in the namespace, as upstream's tree has them, over FUSE and 9P: zero
// reads zeros, random and urandom random bytes, null end of file, and a
// write to any is discarded; each is a regular file of size 0, mode 0666.
// Tree walkers over the mount (grep -r, tar, cp -r, rsync, find, du)
// finish: a walker opens with O_NOFOLLOW and reads them empty, as their
// size says. fs.read of /dev/zero is empty; fs.write to /dev/null is
// taken.
func TestE2EDevFiles(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	got := d.mustSh(t, `
		stat -c '%n %s %a %F' "$1/dev/null" "$1/dev/zero" "$1/dev/random" "$1/dev/urandom" | sed "s|$1||"
		head -c 100000 "$1/dev/zero" | wc -c
		head -c 100000 "$1/dev/zero" | tr -d '\000' | wc -c
		dd if="$1/dev/zero" bs=1M count=4 2>/dev/null | cmp -s - /dev/zero -n 4194304 && echo zeros
		head -c 65536 "$1/dev/urandom" | tr -d '\000' | wc -c | awk '{ print ($1 > 65000) ? "random" : "not random: " $1 }'
		head -c 16 "$1/dev/random" | wc -c
		cat "$1/dev/null" | wc -c
		echo discarded > "$1/dev/null" && echo written
		dd if=/dev/zero of="$1/dev/zero" bs=64k count=16 2>/dev/null && echo written to zero
		cat "$1/dev/null" | wc -c
		ls "$1/dev" | tr '\n' ' '
	`, d.mnt)
	want := `/dev/null 0 666 regular empty file
/dev/zero 0 666 regular empty file
/dev/random 0 666 regular empty file
/dev/urandom 0 666 regular empty file
100000
0
zeros
random
16
0
written
written to zero
0
gsv null random urandom zero `
	if strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Fatalf("over FUSE:\n%s\nwant:\n%s", got, want)
	}

	// Tree walkers finish (a walker that did not is killed at the
	// command's limit and fails here).
	out := filepath.Join(d.base, "copy")
	for _, tool := range []struct{ name, script, want string }{
		{"grep -r /dev", `grep -r zzz-no-such-text "$1/dev"; echo "exit $?"`, "exit 1"},
		{"grep -r the mount", `grep -rs zzz-no-such-text "$1" >/dev/null; echo finished`, "finished"},
		{"tar", `tar cf - -C "$1" dev 2>/dev/null | tar tvf - | awk '$NF == "dev/zero" || $NF == "dev/urandom" { print $3, $NF }'`, "0 dev/urandom\n0 dev/zero"},
		{"cp -r", `rm -rf "$2"; cp -r "$1/dev" "$2" 2>/dev/null; stat -c '%s %n' "$2/zero" "$2/random" | sed "s|$2/||"`, "0 zero\n0 random"},
		{"rsync", `rm -rf "$2"; mkdir -p "$2"; rsync -r "$1/dev/" "$2/" 2>/dev/null; stat -c '%s %n' "$2/zero" "$2/urandom" | sed "s|$2/||"`, "0 zero\n0 urandom"},
		{"find", `find "$1/dev" -maxdepth 1 -type f | sed "s|$1||" | sort`, "/dev/null\n/dev/random\n/dev/urandom\n/dev/zero"},
		{"du", `du -a "$1/dev" | awk '$2 ~ /zero$/ { print $1 }'`, "0"},
	} {
		r := d.sh(tool.script, d.mnt, out)
		if r.code == -1 || strings.TrimSpace(r.stdout) != tool.want {
			t.Errorf("%s over /dev: %v; want %q", tool.name, r, tool.want)
		}
	}

	// Over 9P.
	fsys := d.dial(t)
	read := func(name string, n int) []byte {
		t.Helper()
		fid, err := fsys.Open(name, plan9.OREAD)
		if err != nil {
			t.Fatalf("9P open %s: %v", name, err)
		}
		defer fid.Close()
		b, err := io.ReadAll(io.LimitReader(fid, int64(n)))
		if err != nil {
			t.Fatalf("9P read %s: %v", name, err)
		}
		return b
	}
	if b := read("/dev/zero", 200000); len(b) != 200000 || !bytes.Equal(b, make([]byte, 200000)) {
		t.Errorf("9P /dev/zero: %d bytes, not all zero", len(b))
	}
	if b := read("/dev/urandom", 4096); len(b) != 4096 || bytes.Count(b, []byte{0}) > 200 {
		t.Errorf("9P /dev/urandom: %d bytes, %d zeros", len(b), bytes.Count(b, []byte{0}))
	}
	if b := read("/dev/null", 100); len(b) != 0 {
		t.Errorf("9P /dev/null: %q", b)
	}
	fid, err := fsys.Open("/dev/null", plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := fid.Write([]byte("discarded")); n != 9 || err != nil {
		t.Errorf("9P write to /dev/null: %d, %v", n, err)
	}
	fid.Close()
	if st, err := fsys.Stat("/dev/zero"); err != nil || st.Length != 0 || st.Mode&0o777 != 0o666 {
		t.Errorf("9P stat /dev/zero: %+v, %v", st, err)
	}
	var rd struct {
		OK      bool   `json:"ok"`
		Content string `json:"content"`
	}
	mustOK(t, call9p(t, fsys, "fs.read", map[string]any{"path": "/dev/zero"}), &rd)
	if !rd.OK || rd.Content != "" {
		t.Errorf("fs.read /dev/zero: %+v", rd)
	}
	var wr struct {
		OK bool `json:"ok"`
	}
	mustOK(t, call9p(t, fsys, "fs.write", map[string]any{"path": "/dev/null", "content": "x"}), &wr)
	if !wr.OK {
		t.Errorf("fs.write /dev/null: %+v", wr)
	}
}
