package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/ninep"
)

// TestE2ENotify drives notifications through every door of a real
// daemon: the gsv CLI as alice and bob, the FUSE mount as each of them
// (ls, cat, echo to ctl), and 9P (/sys/call, /sys/events, the files) as
// alice with a user token and as root. Nobody sees or changes another's
// notifications; root reads anyone's files.
func TestE2ENotify(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, listen: listen})
	M := d.mnt
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	bobUID := addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	gsv := func(host int, args ...string) string {
		t.Helper()
		r := gsvAs(host, env, args...)
		if r.code != 0 {
			t.Fatalf("gsv %s as %d: %v", strings.Join(args, " "), host, r)
		}
		return r.stdout
	}
	// bash, not sh: dash reports every failed write as EIO.
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
	mount := func(user string, uid uint32) *client.Fsys {
		t.Helper()
		var tok struct{ Token struct{ Token string } }
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": uid}), &tok)
		fsys, err := ninep.Mount(listen, user, []byte(tok.Token.Token))
		if err != nil {
			t.Fatalf("attach as %s: %v", user, err)
		}
		t.Cleanup(func() { fsys.Close() })
		return fsys
	}
	alice9p, bob9p := mount("alice", aliceUID), mount("bob", bobUID)
	events := func(fsys *client.Fsys) *bufio.Reader {
		t.Helper()
		fid, err := fsys.Open("/sys/events", plan9.OREAD)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fid.Close() })
		return bufio.NewReader(fid)
	}
	type frame struct {
		Signal  string `json:"signal"`
		Payload struct {
			Notification struct {
				NotificationID string `json:"notificationId"`
				Title          string `json:"title"`
			} `json:"notification"`
		} `json:"payload"`
	}
	next := func(r *bufio.Reader) frame {
		t.Helper()
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("events: %v", err)
			}
			var f frame
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				t.Fatalf("event %q: %v", line, err)
			}
			if strings.HasPrefix(f.Signal, "notification.") {
				return f
			}
		}
	}
	aliceEvents, bobEvents := events(alice9p), events(bob9p)

	// The CLI as alice.
	id := strings.TrimSpace(gsv(aliceHost, "notify", "create", "build", "finished", "--body", "all green", "--level", "success"))
	if len(id) != 36 {
		t.Fatalf("create printed %q", id)
	}
	if f := next(aliceEvents); f.Signal != "notification.created" || f.Payload.Notification.NotificationID != id {
		t.Fatalf("alice's event: %+v", f)
	}
	if out := gsv(aliceHost, "notify", "list"); !strings.Contains(out, id) || !strings.Contains(out, "build finished") || !strings.Contains(out, "success") {
		t.Fatalf("alice's list:\n%s", out)
	}
	if out := gsv(bobHost, "notify", "list", "--all"); strings.Contains(out, id) {
		t.Fatalf("bob lists alice's:\n%s", out)
	}
	if out := gsv(0, "notify", "list", "--all", "--json"); strings.Contains(out, id) || !strings.Contains(out, `"notifications": []`) {
		t.Fatalf("root's own list shows alice's:\n%s", out)
	}
	if r := gsvAs(bobHost, env, "notify", "dismiss", id); r.code == 0 || !strings.Contains(r.stderr, "no such notification") {
		t.Fatalf("bob dismisses alice's: %v", r)
	}
	if r := gsvAs(aliceHost, env, "notify", "create", "x", "--level", "loud"); r.code == 0 || !strings.Contains(r.stderr, "notification.create") || !strings.Contains(r.stderr, "(400)") {
		t.Fatalf("a bad level: %v", r)
	}

	// The mount: alice sees hers, bob sees nothing of hers, root reads it.
	if out := must(aliceHost, `ls "$1/var/notify/alice"`); strings.TrimSpace(out) != id {
		t.Fatalf("ls as alice: %q", out)
	}
	out := must(aliceHost, `cat "$1/var/notify/alice/`+id+`"`)
	if !strings.Contains(out, `"title": "build finished"`) || !strings.Contains(out, `"body": "all green"`) || !strings.Contains(out, `"kind": "user"`) {
		t.Fatalf("cat as alice:\n%s", out)
	}
	if r := sh(bobHost, `ls "$1/var/notify/alice"`); r.code == 0 || errnoOf(r.stderr) != syscall.EACCES {
		t.Fatalf("ls of alice's as bob: %v", r)
	}
	if r := sh(bobHost, `cat "$1/var/notify/alice/`+id+`"`); r.code == 0 || strings.Contains(r.stdout, "build") {
		t.Fatalf("cat of alice's as bob: %v", r)
	}
	if got := must(0, `cat "$1/var/notify/alice/`+id+`"`); got != out {
		t.Fatalf("root's cat:\n%s", got)
	}
	if got := must(0, `ls -ld "$1/var/notify/alice"`); !strings.HasPrefix(got, "dr-x------") {
		t.Fatalf("alice's directory: %q", got)
	}

	// ctl: create, a bad line fails its echo with err saying why, dismiss.
	must(bobHost, `echo "create title='bob''s reminder' level=warning" > "$1/var/notify/ctl"`)
	if f := next(bobEvents); f.Signal != "notification.created" || f.Payload.Notification.Title != "bob's reminder" {
		t.Fatalf("bob's first event is not his own: %+v", f)
	}
	r := sh(aliceHost, `echo 'create title=x level=loud' > "$1/var/notify/ctl"`)
	if r.code == 0 || errnoOf(r.stderr) != syscall.EINVAL {
		t.Fatalf("a bad ctl line: %v", r)
	}
	if e := must(aliceHost, `cat "$1/var/notify/err"`); !strings.Contains(e, `notification.create: level "loud"`) {
		t.Fatalf("err: %q", e)
	}
	if r := sh(bobHost, `echo "dismiss `+id+`" > "$1/var/notify/ctl"`); r.code == 0 || errnoOf(r.stderr) != syscall.ENOENT {
		t.Fatalf("bob's dismiss of alice's: %v", r)
	}
	must(aliceHost, `echo "read `+id+`" > "$1/var/notify/ctl"`)
	if f := next(aliceEvents); f.Signal != "notification.updated" {
		t.Fatalf("alice's event after read: %+v", f)
	}
	must(aliceHost, `echo "dismiss `+id+`" > "$1/var/notify/ctl"`)
	if f := next(aliceEvents); f.Signal != "notification.dismissed" {
		t.Fatalf("alice's event after dismiss: %+v", f)
	}
	if out := must(aliceHost, `ls "$1/var/notify/alice"`); strings.TrimSpace(out) != "" {
		t.Fatalf("a dismissed notification is listed: %q", out)
	}
	if out := gsv(aliceHost, "notify", "list", "--all"); !strings.Contains(out, id) || !strings.Contains(out, "dismissed") {
		t.Fatalf("list --all lacks the dismissed one:\n%s", out)
	}

	// 9P: alice's own calls, strict args, her files; root's view of them.
	var created struct {
		Notification struct {
			NotificationID string `json:"notificationId"`
			ExpiresAt      int64  `json:"expiresAt"`
			CreatedAt      int64  `json:"createdAt"`
		} `json:"notification"`
	}
	mustOK(t, call9p(t, alice9p, "notification.create", map[string]any{"title": "short", "ttlMs": 1}), &created)
	if n := created.Notification; n.ExpiresAt-n.CreatedAt != 1000 {
		t.Fatalf("ttlMs 1 was not clamped to 1 s: %+v", n)
	}
	mustOK(t, call9p(t, alice9p, "notification.create", map[string]any{"title": "over 9P",
		"actions": []any{map[string]any{"kind": "open", "label": "Open", "target": "/home/alice"}}}), &created)
	if n := created.Notification; n.ExpiresAt-n.CreatedAt != 30*24*3600*1000 {
		t.Fatalf("the default TTL is not 30 days: %+v", n)
	}
	if out := must(aliceHost, `cat "$1/var/notify/alice/`+created.Notification.NotificationID+`"`); !strings.Contains(out, `"target": "/home/alice"`) {
		t.Fatalf("the 9P-made notification's file:\n%s", out)
	}
	if out := gsv(aliceHost, "notify", "read", created.Notification.NotificationID); !strings.Contains(out, " read") {
		t.Fatalf("gsv notify read: %q", out)
	}
	for _, c := range []struct {
		call string
		args map[string]any
		want string
	}{
		{"notification.create", map[string]any{}, "notification.create: title is required"},
		{"notification.create", map[string]any{"title": "t", "colour": "red"}, `notification.create: unknown field "colour"`},
		{"notification.list", map[string]any{"everything": true}, `notification.list: unknown field "everything"`},
		{"notification.mark_read", map[string]any{}, "notification.mark_read: notificationId is required"},
	} {
		f := call9p(t, alice9p, c.call, c.args)
		if f.OK || f.Error == nil || f.Error.Code != 400 || !strings.Contains(f.Error.Message, c.want) {
			t.Errorf("%s %v: %+v, want 400 %s", c.call, c.args, f.Error, c.want)
		}
	}
	var res struct {
		Notification *json.RawMessage `json:"notification"`
	}
	mustOK(t, call9p(t, bob9p, "notification.mark_read", map[string]any{"notificationId": id}), &res)
	if res.Notification != nil {
		t.Fatalf("bob's mark_read of alice's: %s", *res.Notification)
	}
	if _, err := readAll9p(bob9p, "/var/notify/alice"); err == nil {
		t.Fatal("bob lists alice's directory over 9P")
	}
	if _, err := readAll9p(root, "/var/notify/bob"); err != nil {
		t.Fatalf("root lists bob's directory over 9P: %v", err)
	}
	var list struct {
		Notifications []struct {
			Title string `json:"title"`
		} `json:"notifications"`
	}
	mustOK(t, call9p(t, root, "notification.list", map[string]any{"includeDismissed": true}), &list)
	if len(list.Notifications) != 0 {
		t.Fatalf("root's syscalls show others' notifications: %+v", list)
	}
}
