package main_test

import (
	"encoding/json"
	"os"
	"testing"
)

// TestE2ECodeModeRootPaths: a root block's shell() sees the namespace's
// paths (its home as cwd and HOME, /home/root, /workspaces and
// /var/sessions as fs.* does), the host's own /home untouched; fs.read
// from a block gives the file's bytes, and raw:false the numbered lines
// the model's Read tool gets.
func TestE2ECodeModeRootPaths(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{})
	before, _ := os.ReadDir("/home")
	r := gsvAs(0, []string{"GSV_ADDR=unix!" + d.sock}, "codemode", "--json", "-e", `
await fs.write({path: "~/n.txt", content: "one\ntwo"});
await fs.write({path: "/workspaces/w/x.txt", content: "w\n"});
const raw = await fs.read({path: "~/n.txt"});
const numbered = await fs.read({path: "~/n.txt", raw: false});
const sh = await shell("pwd; echo $HOME; cat /home/root/n.txt; echo; cat /workspaces/w/x.txt; ls -d /var/sessions");
const ws = await shell("pwd", {cwd: "/workspaces/w"});
return {raw: raw.content, numbered: numbered.content, out: sh.output, status: sh.status, ws: ws.output};`)
	var env struct {
		Status string
		Result struct {
			Raw, Numbered, Out, Status, Ws string
		}
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &env) != nil || env.Status != "completed" {
		t.Fatalf("gsv codemode: %v", r)
	}
	got := env.Result
	if got.Raw != "one\ntwo" {
		t.Errorf("fs.read in a block: %q, want the file's bytes %q", got.Raw, "one\ntwo")
	}
	if got.Numbered != "     1\tone\n     2\ttwo\n" {
		t.Errorf("fs.read raw:false: %q, want numbered lines", got.Numbered)
	}
	if want := "/home/root\n/home/root\none\ntwo\nw\n/var/sessions\n"; got.Out != want || got.Status != "completed" {
		t.Errorf("root's shell(): %s %q, want completed %q", got.Status, got.Out, want)
	}
	if got.Ws != "/workspaces/w\n" {
		t.Errorf("shell() in /workspaces/w: pwd %q", got.Ws)
	}
	after, _ := os.ReadDir("/home")
	if len(after) != len(before) {
		t.Errorf("the host's /home changed: %d entries, then %d", len(before), len(after))
	}
}
