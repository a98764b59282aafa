package main_test

// Issue 20 over the real mount: a host uid with no GSV account is a
// stranger (the others' read bits, never write; item 19), a refused NaN
// changes nothing (item 11), and a ctl line says one thing; config keys
// are checked when set and can be unset (item 18).

import (
	"fmt"
	"strings"
	"testing"
)

// A host user with no GSV account reads, over FUSE, what the others' bits
// let a stranger read (/etc/passwd 0444, a 0644 file in a 0755 home), and
// nothing else: no private file, no write anywhere (not even a 0666 file
// or a 0777 directory), no ctl, no config, no process. (On main it got
// EACCES on /etc/passwd although the docs said the others' bits apply.)
func TestE2EStranger(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	home := d.p("/home/alice")
	if r := d.shAs(aliceHost, `cd "$1" && echo hello > pub && chmod 0644 pub && echo s3cret > priv && chmod 0600 priv &&
		echo open > open && chmod 0666 open && mkdir drop && chmod 0777 drop`, home); r.code != 0 {
		t.Fatalf("alice makes her files: %v", r)
	}
	// What a stranger may read.
	for _, c := range []struct{ script, want string }{
		{`cat "$1/etc/passwd"`, "alice:x:"},
		{`cat "$1/etc/group"`, "users:x:100:"},
		{`cat "$1/home/alice/pub"`, "hello\n"},
		{`ls "$1/home/alice"`, "priv\n"},
		{`stat -c %a "$1/home/alice/drop"`, "777\n"},
		{`df "$1" >/dev/null && echo df`, "df\n"},
	} {
		r := d.shAs(nobodyHost, c.script, d.mnt)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("as an unmapped host uid: %s: %v, want %q in its output", c.script, r, c.want)
		}
	}
	// What it may not: each is refused with EACCES and changes nothing.
	for _, script := range []string{
		`cat "$1/home/alice/priv"`,
		`echo bad > "$1/home/alice/pub"`,
		`echo bad > "$1/home/alice/open"`,
		`echo bad >> "$1/home/alice/open"`,
		`echo bad > "$1/home/alice/drop/new"`,
		`mkdir "$1/home/alice/drop/d"`,
		`rm -f "$1/home/alice/pub"`,
		`mv "$1/home/alice/pub" "$1/home/alice/drop/pub"`,
		`ln -s /etc "$1/home/alice/drop/l"`,
		`touch "$1/home/alice/pub"`,
		`chmod 0777 "$1/home/alice/pub"`,
		`echo 'set users/0/ai/model x' > "$1/sys/config/ctl"`,
		`cat "$1/sys/config/config/server/name"`,
		`printf '%s\n' '{"call":"sys.whoami"}' > "$1/sys/call"`,
		`echo 'spawn task' > "$1/proc/ctl"`,
		`echo 'create hi' > "$1/var/notify/ctl"`,
		`echo 'open' > "$1/dev/gsv/shell/clone"`,
		`timeout 10 cat "$1/sys/events"`,
	} {
		r := d.shAs(nobodyHost, script, d.mnt)
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("as an unmapped host uid: %s: %v, want Permission denied", script, r)
		}
	}
	r := d.shAs(aliceHost, `cd "$1" && cat pub open && ls drop | wc -l && stat -c %a pub`, home)
	if r.code != 0 || r.stdout != "hello\nopen\n0\n644\n" {
		t.Errorf("alice's files after the stranger: %v", r)
	}
	if r := d.sh(`cat "$1/sys/config/users/0/ai/model"`, d.mnt); r.code == 0 {
		t.Errorf("the stranger set a config key: %v", r)
	}
}

// A refused NaN changes nothing (item 11), contradictory or extra words
// on a ctl line are refused (item 18), a config value its reader could
// not use is refused when set, and a key can be unset (item 18): every
// refusal over the mount, with its message in the directory's err view.
func TestE2EInputNits(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	M := d.mnt
	pid := strings.TrimSpace(d.mustSh(t, `exec 3<>"$1/proc/clone" && echo 'spawn task' >&3 && read pid <&3 && echo "$pid"`, M))
	if pid == "" {
		t.Fatal("no pid")
	}
	P := M + "/proc/" + pid
	before := d.mustSh(t, `cat "$1/run"`, P)
	for _, c := range []struct{ file, line, msg string }{
		{P + "/ctl", "budget usd=NaN", `usd="NaN": want a finite decimal number`},
		{P + "/ctl", "budget usd=Inf", `usd="Inf": want a finite decimal number`},
		{P + "/ctl", "budget usd=1e400", `usd="1e400": want a finite decimal number`},
		{P + "/ctl", "set-temperature NaN", `temperature "NaN": want 0 to 2`},
		{P + "/ctl", "budget usd=1 usd=2", `option "usd" is given more than once`},
		{P + "/ctl", "stop now", `usage: stop`},
		{P + "/ctl", "start now", `usage: start`},
		{P + "/conversations/default/ctl", "policy pressure=NaN", `pressure="NaN": want a finite decimal number`},
		{M + "/dev/gsv/shell/clone", "open network=full network=none", `option "network" is given more than once`},
		{M + "/sys/config/ctl", `set config/process/cap {"networks":["nonee"]}`, `network "nonee": want none or full`},
		{M + "/sys/config/ctl", "set config/system/timezone Nowhere/City", `time zone "Nowhere/City"`},
		{M + "/sys/config/ctl", "unset no/such/key", `no such config key`},
		{M + "/sys/config/ctl", "unset a b", `usage: unset <key>`},
	} {
		r := d.sh(`/bin/echo "$2" > "$1"`, c.file, c.line) // dash's echo says "I/O error" for any errno
		if r.code == 0 || !strings.Contains(r.stderr, "Invalid argument") && !strings.Contains(r.stderr, "No such file") {
			t.Errorf("%s > %s: %v, want it refused", c.line, c.file, r)
			continue
		}
		dir := c.file[:strings.LastIndex(c.file, "/")]
		if e := d.mustSh(t, `cat "$1/err"`, dir); !strings.Contains(e, c.msg) {
			t.Errorf("%s > %s: the err view says %q, want %q", c.line, c.file, e, c.msg)
		}
		if got := d.mustSh(t, `cat "$1/run"`, P); got != before {
			t.Fatalf("after %q %s/run reads\n%s\nwant\n%s", c.line, P, got, before)
		}
	}
	d.mustGsv(t, "call", "proc.run.list", "{}")
	if r := d.sh(`cat "$1/sys/config/config/process/cap"`, M); r.code == 0 {
		t.Errorf("a refused capability was stored: %v", r)
	}
	if r := d.sh(`ls "$1/dev/gsv/shell"`, M); r.code != 0 || r.stdout != "clone\nerr\n" {
		t.Errorf("a refused open left a session: %v", r)
	}
	// unset: a key goes, and its reader falls back.
	d.mustSh(t, `echo 'set config/ai/model big' > "$1/sys/config/ctl" && cat "$1/sys/config/config/ai/model"`, M)
	d.mustSh(t, `echo 'unset config/ai/model' > "$1/sys/config/ctl"`, M)
	if r := d.sh(`cat "$1/sys/config/config/ai/model"`, M); r.code == 0 {
		t.Errorf("config/ai/model after unset: %v", r)
	}
	if out := d.mustGsv(t, "config", "get"); strings.Contains(out, "config/ai/model") {
		t.Errorf("gsv config get after unset: %s", out)
	}
	d.mustGsv(t, "config", "set", "users/0/ai/model", "m")
	d.mustGsv(t, "config", "unset", "users/0/ai/model")
	if r := gsvAs(0, []string{"GSV_ADDR=unix!" + d.sock}, "config", "unset", "users/0/ai/model"); r.code == 0 || !strings.Contains(r.stderr, fmt.Sprintf("%s: no such config key (404)", "users/0/ai/model")) {
		t.Errorf("gsv config unset of a key not set: %v", r)
	}
}
