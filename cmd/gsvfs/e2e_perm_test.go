package main_test

// Permissions are the kernel's, whichever transport asked: over FUSE the
// calling host uid, over the 9P unix socket the peer's SO_PEERCRED uid,
// over TCP the token written to the auth fid.

import (
	"9fans.net/go/plan9/client"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The host uids the tests map GSV users to (and nobodyHost, a host uid
// with no GSV account) are picked at run time among the uids and gids the
// host's user database does not name (freeHostUIDs), so that what ls or
// stat prints, and who a uid is, never depends on the machine.
var aliceHost, bobHost, nobodyHost int

// freeHostUIDs returns n numbers from 1001 up that name neither a host
// user nor a host group.
func freeHostUIDs(n int) ([]int, error) {
	var out []int
	for id := 1001; id < 60000 && len(out) < n; id++ {
		s := strconv.Itoa(id)
		var nu user.UnknownUserIdError
		if _, err := user.LookupId(s); !errors.As(err, &nu) {
			continue
		}
		var ng user.UnknownGroupIdError
		if _, err := user.LookupGroupId(s); !errors.As(err, &ng) {
			continue
		}
		out = append(out, id)
	}
	if len(out) < n {
		return nil, fmt.Errorf("found only %d of %d free host uids", len(out), n)
	}
	return out, nil
}

func TestE2EPermissions(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, listen: listen})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	bobUID := addUser(t, root, "bob", bobHost)
	if aliceUID == bobUID || aliceUID < 1000 {
		t.Fatalf("uids alice=%d bob=%d", aliceUID, bobUID)
	}
	passwd := d.sh(`cat "$1"`, d.p("/etc/passwd")).stdout
	for _, want := range []string{fmt.Sprintf("alice:x:%d:100::/home/alice:/bin/sh\n", aliceUID), fmt.Sprintf("bob:x:%d:100::/home/bob:/bin/sh\n", bobUID)} {
		if !strings.Contains(passwd, want) {
			t.Fatalf("/etc/passwd = %q, want a line %q", passwd, want)
		}
	}
	secret := d.p("/home/alice/secret")
	unixAddr := "GSV_ADDR=unix!" + d.sock

	t.Run("FUSE", func(t *testing.T) {
		// alice is who the daemon says she is.
		r := d.shAs(aliceHost, `exec 3<>"$1" && printf '%s\n' '{"call":"sys.whoami"}' >&3 && cat <&3`, d.p("/sys/call"))
		f := parseFrame(t, r.stdout)
		var w struct {
			Process struct{ Username string } `json:"process"`
		}
		mustOK(t, f, &w)
		if w.Process.Username != "alice" {
			t.Fatalf("sys.whoami as host uid %d over FUSE: %s", aliceHost, f.Data)
		}

		r = d.shAs(aliceHost, `echo s3cret > "$1" && chmod 0600 "$1" && stat -c '%a %u' "$1" && cat "$1"`, secret)
		if r.code != 0 || r.stdout != fmt.Sprintf("600 %d\ns3cret\n", aliceHost) {
			t.Fatalf("alice creates her secret: %v", r)
		}
		// bob can neither read nor write it.
		r = d.shAs(bobHost, `cat "$1"`, secret)
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") || strings.Contains(r.stdout, "s3cret") {
			t.Fatalf("bob reads alice's 0600 file: %v", r)
		}
		r = d.shAs(bobHost, `echo bob > "$1"`, secret)
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("bob writes alice's 0600 file: %v", r)
		}
		r = d.shAs(bobHost, `rm -f "$1"`, secret)
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("bob removes alice's file: %v", r)
		}
		r = d.shAs(bobHost, `echo bob > "$1"`, d.p("/home/alice/bob-was-here"))
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("bob creates a file in alice's home: %v", r)
		}
		// He sees that it is there, and its mode: /home/alice is 0755.
		r = d.shAs(bobHost, `ls -ln "$1"`, d.p("/home/alice"))
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("-rw------- 1 %d 100 ", aliceHost)) || !strings.Contains(r.stdout, " secret") {
			t.Fatalf("bob lists alice's home: %v", r)
		}
		// bob's own home is his.
		r = d.shAs(bobHost, `echo mine > "$1" && cat "$1"`, d.p("/home/bob/notes"))
		if r.code != 0 || r.stdout != "mine\n" {
			t.Fatalf("bob writes his own home: %v", r)
		}
		// root can read it; alice's content survived bob's attempts.
		if r := d.sh(`cat "$1"`, secret); r.code != 0 || r.stdout != "s3cret\n" {
			t.Fatalf("root reads alice's secret: %v", r)
		}
		// A host user with no GSV account reaches nothing.
		r = d.shAs(nobodyHost, `cat "$1"`, secret)
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("an unmapped host user reads alice's secret: %v", r)
		}
	})

	t.Run("9PUnixSocket", func(t *testing.T) {
		if _, err := os.Stat(secret); err != nil {
			t.Skip("needs the FUSE subtest's file")
		}
		args := `{"path":"/home/alice/secret"}`
		r := gsvAs(aliceHost, []string{unixAddr}, "call", "fs.read", args)
		if r.code != 0 || !strings.Contains(r.stdout, `"content": "     1\ts3cret\n"`) {
			t.Fatalf("alice: gsv call fs.read: %v", r)
		}
		r = gsvAs(bobHost, []string{unixAddr}, "call", "fs.read", args)
		if r.code != 1 || !strings.Contains(r.stderr, "permission denied") || strings.Contains(r.stdout, "s3cret") {
			t.Fatalf("bob: gsv call fs.read of alice's secret: %v", r)
		}
		r = gsvAs(bobHost, []string{unixAddr}, "call", "fs.write", `{"path":"/home/alice/secret","content":"bob"}`)
		if r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
			t.Fatalf("bob: gsv call fs.write of alice's secret: %v", r)
		}
		r = gsvAs(0, []string{unixAddr}, "call", "fs.read", args)
		if r.code != 0 || !strings.Contains(r.stdout, "s3cret") {
			t.Fatalf("root: gsv call fs.read: %v", r)
		}
		for uid, want := range map[int]string{aliceHost: fmt.Sprintf("alice uid=%d gid=100 home=/home/alice role=user", aliceUID),
			bobHost: fmt.Sprintf("bob uid=%d gid=100 home=/home/bob role=user", bobUID), 0: "root uid=0 gid=0 home=/home/root"} {
			r := gsvAs(uid, []string{unixAddr}, "whoami")
			if r.code != 0 || !strings.HasPrefix(r.stdout, want) {
				t.Errorf("host uid %d: gsv whoami: %v, want %q", uid, r, want)
			}
		}
		r = gsvAs(nobodyHost, []string{unixAddr}, "whoami")
		if r.code != 1 {
			t.Errorf("unmapped host uid: gsv whoami: %v, want failure", r)
		}
		// The 9P server's own permission checks: bob's Topen of the file.
		if b := d.sh(`cat "$1"`, secret).stdout; b != "s3cret\n" {
			t.Fatalf("alice's secret changed: %q", b)
		}
	})

	t.Run("Events", func(t *testing.T) {
		// Each user sees the signals meant for them: alice does not see
		// root's private config changes, but sees public ones and her own.
		cat := exec.Command("setpriv", "--reuid", fmt.Sprint(aliceHost), "--regid", fmt.Sprint(aliceHost), "--clear-groups", "cat", d.p("/sys/events"))
		cat.Dir = "/"
		lines := catStream(t, cat)
		waitOpen(t, cat.Process.Pid, d.p("/sys/events"))
		mustOK(t, call9p(t, root, "sys.config.set", map[string]any{"key": "users/0/ai/model", "value": "private"}), nil)
		mustOK(t, call9p(t, root, "sys.config.set", map[string]any{"key": "config/server/motd", "value": "public"}), nil)
		f := parseSig(t, nextLine(t, lines, 5*time.Second))
		if f.Payload["key"] != "config/server/motd" {
			t.Fatalf("alice's first event: %+v, want the public config/server/motd (not root's users/0/...)", f)
		}
		own := fmt.Sprintf("users/%d/ai/model", aliceUID)
		r := d.shAs(aliceHost, `echo "set $2 hers" > "$1"`, d.p("/sys/config/ctl"), own)
		if r.code != 0 {
			t.Fatalf("alice sets %s: %v", own, r)
		}
		if f := parseSig(t, nextLine(t, lines, 5*time.Second)); f.Payload["key"] != own {
			t.Fatalf("alice's second event: %+v, want %s", f, own)
		}
		// She may not set root's keys: EACCES, and her err view says why
		// while root's does not.
		r = d.shAs(aliceHost, `env echo "set users/0/ai/model stolen" > "$1"`, d.p("/sys/config/ctl"))
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Fatalf("alice sets users/0/ai/model: %v", r)
		}
		r = d.shAs(aliceHost, `cat "$1"`, d.p("/sys/config/err"))
		if !strings.Contains(r.stdout, "permission denied") {
			t.Fatalf("alice's /sys/config/err = %v", r)
		}
		if s := d.sh(`cat "$1"`, d.p("/sys/config/err")).stdout; strings.Contains(s, "users/0/ai/model") {
			t.Fatalf("root's /sys/config/err shows alice's failure: %q", s)
		}
		if s := d.sh(`cat "$1"`, d.p("/sys/config/users/0/ai/model")).stdout; s != "private\n" {
			t.Fatalf("users/0/ai/model = %q after alice's refused set", s)
		}
		cat.Process.Kill()
		cat.Wait()
	})

	t.Run("TokenTCP", func(t *testing.T) {
		var tok struct {
			Token struct {
				TokenID string `json:"tokenId"`
				Token   string `json:"token"`
				Uid     uint32 `json:"uid"`
			} `json:"token"`
		}
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": aliceUID, "label": "e2e"}), &tok)
		if tok.Token.Uid != aliceUID || !strings.HasPrefix(tok.Token.Token, "gsv_user_") {
			t.Fatalf("sys.token.create: %+v", tok)
		}
		tcp := "GSV_ADDR=" + listen
		r := gsvAs(0, []string{tcp, "GSV_TOKEN=" + tok.Token.Token, "GSV_USER=alice"}, "whoami")
		if r.code != 0 || !strings.HasPrefix(r.stdout, fmt.Sprintf("alice uid=%d ", aliceUID)) {
			t.Fatalf("gsv whoami over TCP with alice's token: %v", r)
		}
		// Her token carries her permissions, not the caller's.
		r = gsvAs(0, []string{tcp, "GSV_TOKEN=" + tok.Token.Token, "GSV_USER=alice"}, "call", "fs.read", `{"path":"/home/bob/notes"}`)
		if r.code != 0 || !strings.Contains(r.stdout, "mine") {
			t.Fatalf("alice reads bob's 0644 notes over TCP: %v", r)
		}
		r = gsvAs(0, []string{tcp, "GSV_TOKEN=" + tok.Token.Token, "GSV_USER=alice"}, "call", "sys.user.add", `{"username":"mallory"}`)
		if r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
			t.Fatalf("alice adds a user over TCP: %v", r)
		}
		// Without a token gsv says what to set, and the daemon refuses a
		// 9P attach that carries none.
		if r := gsvAs(0, []string{tcp, "GSV_USER=alice"}, "whoami"); r.code != 1 || !strings.Contains(r.stderr, "set GSV_TOKEN") {
			t.Errorf("gsv whoami over TCP without a token: %v, want the GSV_TOKEN hint", r)
		}
		if c, err := client.Dial("tcp", strings.ReplaceAll(strings.TrimPrefix(listen, "tcp!"), "!", ":")); err != nil {
			t.Errorf("dial %s: %v", tcp, err)
		} else {
			if fsys, err := c.Attach(nil, "alice", ""); err == nil {
				fsys.Close()
				t.Errorf("a 9P attach over TCP without a token succeeded")
			}
			c.Close()
		}
		for name, env := range map[string][]string{
			"wrong user":    {tcp, "GSV_TOKEN=" + tok.Token.Token, "GSV_USER=bob"},
			"unknown token": {tcp, "GSV_TOKEN=gsv_user_aaaaaaaaaaaaaaaaaaaa", "GSV_USER=alice"},
		} {
			r := gsvAs(0, env, "whoami")
			if r.code != 1 || !strings.Contains(r.stderr, "authentication") || strings.Contains(r.stdout, "alice") {
				t.Errorf("gsv whoami over TCP, %s: %v, want an authentication failure", name, r)
			}
		}
		// A revoked token no longer attaches.
		var rev struct{ Revoked bool }
		mustOK(t, call9p(t, root, "sys.token.revoke", map[string]any{"tokenId": tok.Token.TokenID}), &rev)
		if !rev.Revoked {
			t.Fatal("sys.token.revoke: not revoked")
		}
		r = gsvAs(0, []string{tcp, "GSV_TOKEN=" + tok.Token.Token, "GSV_USER=alice"}, "whoami")
		if r.code != 1 || !strings.Contains(r.stderr, "authentication failed") {
			t.Fatalf("gsv whoami with a revoked token: %v", r)
		}
	})
	d.stop()
}

// TestE2ESocketReachableByOtherUsers starts the daemon on a state
// directory it creates itself, as on a first run, and requires that host
// users mapped to GSV users can use the 9P socket ("Anyone may connect;
// who they are is their SO_PEERCRED uid").
func TestE2ESocketReachableByOtherUsers(t *testing.T) {
	requireRoot(t)
	base := newBase(t)
	if err := os.Remove(filepath.Join(base, "state")); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, base, daemonOpts{})
	addUser(t, d.dial(t), "alice", aliceHost)
	r := gsvAs(aliceHost, []string{"GSV_ADDR=unix!" + d.sock}, "whoami")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "alice ") {
		st, _ := os.Stat(d.state)
		t.Errorf("host uid %d: gsv whoami on the socket of a daemon-created state dir (mode %v): %v", aliceHost, st.Mode(), r)
	}
	d.stop()
}

// TestE2EStateFilesPrivate: the kernel decides who sees what, so the host
// files behind the namespace must not hand other host users what the kernel
// would refuse them. Here the state directory is searchable (as it must be
// for other host users to reach the 9P socket in it), and root keeps an API
// key in the config, which GSV shows to root only.
func TestE2EStateFilesPrivate(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	const key = "sk-e2e-do-not-leak"
	mustOK(t, call9p(t, root, "sys.config.set", map[string]any{"key": "config/ai/api_key", "value": key}), nil)
	// GSV hides it from alice.
	r := gsvAs(aliceHost, []string{"GSV_ADDR=unix!" + d.sock}, "config", "get")
	if r.code != 0 || strings.Contains(r.stdout, key) || strings.Contains(r.stdout, "api_key") {
		t.Fatalf("alice: gsv config get: %v", r)
	}
	// The host must too.
	for _, name := range []string{"gsv.db", "gsv.db-wal"} {
		p := filepath.Join(d.state, name)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		r := d.shAs(aliceHost, `cat "$1" > /dev/null`, p)
		if r.code == 0 {
			st, _ := os.Stat(p)
			t.Errorf("host uid %d can read %s (mode %v), which holds root-only config such as config/ai/api_key", aliceHost, p, st.Mode())
		}
	}
	d.stop()
}
