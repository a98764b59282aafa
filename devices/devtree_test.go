package devices

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// splitWords splits as a shell does, without expansions.
func TestSplitWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`sh -c "echo hi > /work/out.txt; echo done"`, []string{"sh", "-c", "echo hi > /work/out.txt; echo done"}},
		{`echo "don't" 'say "no"'`, []string{"echo", "don't", `say "no"`}},
		{`a\ b "x\"y\\z\n" '' ""`, []string{"a b", `x"y\z\n`, "", ""}},
		{"  a\tb  ", []string{"a", "b"}},
		{`k="v w"x`, []string{"k=v wx"}},
		{``, nil},
	} {
		got, err := splitWords(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{`a "b`, `a 'b`} {
		if _, err := splitWords(in); abi.KindOf(err) != abi.Invalid {
			t.Errorf("splitWords(%q): %v, want a 400", in, err)
		}
	}
}

// An open line becomes process.session.open's args; mounts repeat.
func TestOpenWords(t *testing.T) {
	ws, _ := splitWords(`network=full mount=~/proj:/work:rw mount='/home/a/my docs:/docs' workdir=/work ttl=1h env=A=b=c label=k=v`)
	call, args, err := openWords(ws)
	if err != nil || call != "process.session.open" {
		t.Fatalf("openWords: %s, %v", call, err)
	}
	ttl := int64(3600e9)
	want := &abi.SessionOpenArgs{SessionTTLNs: &ttl, Labels: map[string]string{"k": "v"}, Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{
		NetworkMode: "full", Workdir: "/work", Env: map[string]string{"A": "b=c"},
		Mounts: []abi.ProcessMount{{HostPath: "~/proj", GuestPath: "/work", Mode: "rw"}, {HostPath: "/home/a/my docs", GuestPath: "/docs", Mode: "rw"}},
	}}}
	if !reflect.DeepEqual(args, want) {
		t.Fatalf("openWords = %+v, want %+v", args, want)
	}
	if _, args, _ := openWords(nil); args.(*abi.SessionOpenArgs).Target.Local.NetworkMode != abi.NetworkNone {
		t.Fatalf("the default network: %+v", args)
	}
	for _, bad := range []string{"frob=1", "proj", "mount=/x", "mount=:/x", "ttl=soon", "env=novalue",
		// Contradictory or repeated options (issue 20, item 18).
		"network=full network=none", "network=none network=none", "ttl=1h ttl=2h", "workdir=/a workdir=/b",
		"env=A=1 env=A=2", "label=k=1 label=k=1"} {
		ws, _ := splitWords(bad)
		if _, _, err := openWords(ws); abi.KindOf(err) != abi.Invalid {
			t.Errorf("openWords(%q): %v, want a 400", bad, err)
		}
	}
	// Mounts, and env and labels of different names, repeat.
	ws, _ = splitWords("mount=~/a:/a mount=~/b:/b env=A=1 env=B=2 label=x=1 label=y=2")
	if _, _, err := openWords(ws); err != nil {
		t.Errorf("repeated mounts, env and labels: %v", err)
	}
}

// The session files through the tree, as alice: clone's JSON args, an
// exec whose words hold quotes of both kinds, an exec's JSON args, and a
// blob file.
func TestSessionTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("exec sessions need root")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("exec sessions need bubblewrap")
	}
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	r, err := New(e.K, Options{Space: space, Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { space.Close() })
	r.SetRoot(space.Root())
	ctx := context.Background()
	walk := func(p string) vfs.Node {
		t.Helper()
		var n vfs.Node = space.Root()
		for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
			d, ok := n.(vfs.Dir)
			if !ok {
				t.Fatalf("%s: %s is not a directory", p, name)
			}
			c, err := d.Lookup(ctx, e.Alice, name)
			if err != nil {
				t.Fatalf("walk %s: %v", p, err)
			}
			n = c
		}
		return n
	}
	// rw writes line to the file p and reads back the result.
	rw := func(p, line string) string {
		t.Helper()
		h, err := walk(p).(vfs.File).Open(ctx, e.Alice, os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(ctx)
		if _, err := h.Write(ctx, []byte(line+"\n"), 0); err != nil {
			t.Fatalf("%s: %q: %v", p, line, err)
		}
		b := make([]byte, 64<<10)
		n, _ := h.Read(ctx, b, 0)
		return string(b[:n])
	}
	read := func(p string) string {
		t.Helper()
		h, err := walk(p).(vfs.File).Open(ctx, e.Alice, os.O_RDONLY)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		defer h.Close(ctx)
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for off := int64(0); ; {
			n, err := h.Read(ctx, buf, off)
			if err != nil && err != io.EOF {
				t.Fatalf("read %s: %v", p, err)
			}
			if n == 0 {
				return b.String()
			}
			b.Write(buf[:n])
			off += int64(n)
		}
	}
	sid := strings.TrimSpace(rw("/dev/gsv/shell/clone", `{"target":{"local":{"network_mode":"none"}}}`))
	if !strings.HasPrefix(sid, "ps_") {
		t.Fatalf("clone with JSON args: %q", sid)
	}
	S := "/dev/gsv/shell/" + sid
	rw(S+"/ctl", `exec sh -c "echo \"don't\" 'x'"`)
	if w := read(S + "/wait"); !strings.Contains(w, `"exit_code": 0`) {
		t.Fatalf("wait: %s", w)
	}
	if out := read(S + "/stdout"); out != "don't x\n" {
		t.Fatalf("stdout: %q", out)
	}
	rw(S+"/ctl", `exec {"argv":["sh","-c","head -c 100000 /dev/zero"]}`)
	if w := read(S + "/wait"); !strings.Contains(w, `"blob_ref": "sha256:`) {
		t.Fatalf("wait: %s", w)
	}
	if out := read(S + "/stdout"); out != strings.Repeat("\x00", 100000) {
		t.Fatalf("stdout: %d bytes", len(out))
	}
	const zeros = "0c3e0a5ed1dc4c8ee2ee4bb5cae9e3b8a3c3bd81eacfbea7bd7ba1cc1e2ef1cb" // not the digest: a 404
	blobs := walk("/var/blobs/sha256").(vfs.Dir)
	if _, err := blobs.Lookup(ctx, e.Alice, zeros); err != vfs.ErrNotExist {
		t.Fatalf("a blob that is not there: %v", err)
	}
	ents, err := blobs.ReadDir(ctx, e.Alice)
	if err != nil || len(ents) != 1 {
		t.Fatalf("blobs: %v, %v", ents, err)
	}
	if out := read("/var/blobs/sha256/" + ents[0].Name); len(out) != 100000 {
		t.Fatalf("blob: %d bytes", len(out))
	}
	if ents, err := blobs.ReadDir(ctx, e.Bob); err != nil || len(ents) != 0 {
		t.Fatalf("bob's blobs: %v, %v", ents, err)
	}
}

// FuzzOpenLine: any line splits and parses without a panic or is a 400;
// a UTF-8 line that parses gives args whose JSON decodes back the same,
// and
// words that splitWords gives back, quoted again, split the same.
func FuzzOpenLine(f *testing.F) {
	for _, s := range []string{
		`network=none mount=/home/me/proj:/work:rw`,
		`network=full mount='/home/a/my docs:/docs:ro' workdir=/work ttl=1h env=A=b=c label=k=v`,
		`sh -c "echo \"hi\" > /w; echo 'x'"`, `a\ b "x\"y\\z" '' ""`, `mount=host:/srv:/data:ro`, `"unterminated`,
		`network=full network=none`, `env=A=1 env=A=2`, `label=k=1 label=k=2`, `ttl=1h ttl=2h`, `workdir=/a workdir=/b`,
		`mount=~/a:/a mount=~/b:/b env=A=1 env=B=1`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		ws, err := splitWords(line)
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("splitWords(%q): %v, want a 400", line, err)
			}
			return
		}
		var quoted []string
		for _, w := range ws {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := splitWords(strings.Join(quoted, " "))
		if err != nil || (len(ws) > 0 && !reflect.DeepEqual(again, ws)) {
			t.Fatalf("words %q quoted and split again: %q, %v", ws, again, err)
		}
		_, args, err := openWords(ws)
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("openWords(%q): %v, want a 400", ws, err)
			}
			return
		}
		// An option that holds one value is given once: a line that says
		// two things is refused, never read as its last word.
		seen := map[string]bool{}
		for _, w := range ws {
			k, v, _ := strings.Cut(w, "=")
			switch k {
			case "env", "label":
				name, _, _ := strings.Cut(v, "=")
				k += "=" + name
			case "mount":
				continue
			}
			if seen[k] {
				t.Fatalf("openWords(%q) takes %q twice", ws, k)
			}
			seen[k] = true
		}
		if !utf8.ValidString(line) {
			return // JSON carries only UTF-8; the open refuses the rest
		}
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		var back abi.SessionOpenArgs
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if b2, _ := json.Marshal(&back); string(b2) != string(b) {
			t.Fatalf("args %s decode back as %s", b, b2)
		}
	})
}
