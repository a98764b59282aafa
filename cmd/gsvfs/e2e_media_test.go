package main_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestE2EMedia drives media through a real daemon and its FUSE mount:
// alice's gsv send --media cat.png reaches the (offline) model as an
// image; the file is in her media store, where ls and cat show it to
// her and refuse bob (EACCES) as another host uid; a PNG in her home
// read by her agent's Read tool reaches the model as an image too; bad
// media is refused and stores nothing.
func TestE2EMedia(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	M := d.mnt
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	sh := func(host int, script string) shResult {
		u := strconv.Itoa(host)
		return runCmd("/", nil, nil, "setpriv", "--reuid", u, "--regid", u, "--clear-groups", "bash", "-c", script, "bash", M)
	}
	must := func(host int, script string) string {
		t.Helper()
		r := sh(host, script)
		if r.code != 0 {
			t.Fatalf("%s as %d: %v", script, host, r)
		}
		return r.stdout
	}

	// cat.png, a real PNG alice's host uid can read.
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(2, 3, color.RGBA{G: 200, A: 255})
	var pic bytes.Buffer
	if err := png.Encode(&pic, img); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "media-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	catPNG := filepath.Join(dir, "cat.png")
	if err := os.WriteFile(catPNG, pic.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	r := gsvAs(aliceHost, env, "send", "--wait", "--media", catPNG, "what is this?")
	if r.code != 0 || !strings.Contains(r.stdout, "[offline model: I saw 1 image(s): image/png]") {
		t.Fatalf("gsv send --media: %v", r)
	}
	names := strings.Fields(must(aliceHost, `ls "$1"/var/media/alice/`))
	if len(names) != 1 || !strings.HasSuffix(names[0], ".png") || len(names[0]) != 64+len(".png") {
		t.Fatalf("alice's media store: %q", names)
	}
	file := "/var/media/alice/" + names[0]
	if got := must(aliceHost, `cat "$1"`+file); got != pic.String() {
		t.Fatalf("cat %s: %d bytes, want the %d of cat.png", file, len(got), pic.Len())
	}
	if out := must(aliceHost, `sha256sum < "$1"`+file); !strings.HasPrefix(out, strings.TrimSuffix(names[0], ".png")) {
		t.Fatalf("the name is not the content's sha256: %s vs %s", out, names[0])
	}
	if got := must(0, `cat "$1"`+file); got != pic.String() {
		t.Fatal("root cannot read alice's media")
	}
	for _, script := range []string{`cat "$1"` + file, `ls "$1"/var/media/alice/`} {
		if r := sh(bobHost, script); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("bob: %s: %v", script, r)
		}
	}

	// The agent's Read tool of a PNG (named .bin: the content decides).
	must(aliceHost, `cp `+catPNG+` "$1"/home/alice/dog.bin`)
	r = gsvAs(aliceHost, env, "send", "--wait", `use Read {"path":"~/dog.bin"}`)
	if r.code != 0 || !strings.Contains(r.stdout, "[offline model: I saw 1 image(s): image/png]") {
		t.Fatalf("Read of a PNG: %v", r)
	}

	// Bad media: refused, nothing stored.
	empty := filepath.Join(dir, "empty.png")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := gsvAs(aliceHost, env, "send", "--media", empty, "x"); r.code == 0 || !strings.Contains(r.stderr, "the file is empty") {
		t.Fatalf("an empty file: %v", r)
	}
	if r := gsvAs(aliceHost, env, "call", "proc.send", `{"message":"x","media":[{"type":"image","mimeType":"image/png","data":"@@"}]}`); r.code == 0 || !strings.Contains(r.stderr, "media[0]: data is not standard base64") {
		t.Fatalf("bad base64: %v", r)
	}
	if names := strings.Fields(must(aliceHost, `ls "$1"/var/media/alice/`)); len(names) != 1 {
		t.Fatalf("alice's store after the refusals: %q", names)
	}
}
