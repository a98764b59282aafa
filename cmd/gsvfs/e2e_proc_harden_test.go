package main_test

// Agent processes, tried as another host user would: credentials stay
// with their endpoint, a model script is read as its owner, a refused
// look at another user's process writes nothing, names cannot forge
// lines, and text for a closed conversation is refused where the shell
// sees it.

import (
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// epCount runs a count query on the daemon's store, read-only.
func epCount(t *testing.T, d *daemon, q string, args ...any) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.state, "gsv.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// epAuthServer is an OpenAI-compatible model server that records the
// credentials it is sent.
type epAuthServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newEPAuthServer(t *testing.T, reply string) *epAuthServer {
	s := &epAuthServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%q},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", reply)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *epAuthServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

func TestE2EProcHardening(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{mount: true})
	root := d.dial(t)
	alice := addUser(t, root, "alice", aliceHost)
	bob := addUser(t, root, "bob", bobHost)
	M := d.mnt
	unixAddr := "GSV_ADDR=unix!" + d.sock
	as := func(uid int, sh string, args ...string) shResult {
		t.Helper()
		return d.shAs(uid, sh, args...)
	}
	ok := func(r shResult, what string) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %v", what, r)
		}
		return r.stdout
	}
	read := func(p string) (string, error) {
		r := d.sh(`cat "$1"`, p)
		if r.code != 0 {
			return r.stdout, fmt.Errorf("cat %s: %s", p, r.stderr)
		}
		return r.stdout, nil
	}
	lastMessage := func(pid string) string {
		t.Helper()
		epWaitIdle(t, read, M+"/proc/"+pid)
		h, err := read(M + "/proc/" + pid + "/conversations/default/history")
		if err != nil {
			t.Fatal(err)
		}
		ms := epHistory(t, h)
		if len(ms) == 0 {
			return ""
		}
		return ms[len(ms)-1].text()
	}

	// 1.6: bob's init process exists from his creation; alice's look at it
	// fails and changes nothing.
	t.Run("RefusedReadOfInit", func(t *testing.T) {
		bobInit := fmt.Sprintf("init:%d", bob)
		// The processes, and bob's init's creation time.
		snapshot := func() [2]int {
			return [2]int{epCount(t, d, `SELECT count(*) FROM proc_processes`),
				epCount(t, d, `SELECT created_at FROM proc_processes WHERE pid=?`, bobInit)}
		}
		before := snapshot()
		if n := epCount(t, d, `SELECT count(*) FROM proc_processes WHERE pid=?`, bobInit); n != 1 {
			t.Fatalf("bob's init process: %d records", n)
		}
		for _, sh := range []string{`stat "$1"`, `cat "$1/status"`, `ls "$1/conversations"`} {
			if r := as(aliceHost, sh, M+"/proc/"+bobInit); r.code == 0 || errnoOf(r.stderr) != syscall.ENOENT {
				t.Fatalf("alice: %s of bob's init: %v", sh, r)
			}
		}
		if r := gsvAs(aliceHost, []string{unixAddr}, "ps", "--uid", strconv.Itoa(int(bob))); r.code == 0 {
			t.Fatalf("alice: gsv ps --uid bob: %v", r)
		}
		if after := snapshot(); after != before {
			t.Fatalf("alice's refused reads changed the processes: %v, was %v", after, before)
		}
	})

	// 1.2: root's key goes only to root's endpoint.
	t.Run("CredentialsFollowEndpoint", func(t *testing.T) {
		rootSrv, aliceSrv := newEPAuthServer(t, "from root's server"), newEPAuthServer(t, "from alice's server")
		for _, kv := range [][2]string{{"config/ai/provider", "openai"}, {"config/ai/base_url", rootSrv.URL + "/v1"},
			{"config/ai/api_key", "sk-root-secret"}, {"config/ai/model", "m"}} {
			ok(gsvAs(0, []string{unixAddr}, "config", "set", kv[0], kv[1]), "root sets "+kv[0])
		}
		r := gsvAs(bobHost, []string{unixAddr}, "send", "--wait", "hi")
		if r.code != 0 || !strings.Contains(r.stdout, "from root's server") {
			t.Fatalf("bob on root's endpoint: %v", r)
		}
		ok(gsvAs(aliceHost, []string{unixAddr}, "config", "set", "ai.base_url", aliceSrv.URL+"/v1"), "alice sets ai.base_url")
		r = gsvAs(aliceHost, []string{unixAddr}, "send", "--wait", "hi")
		if r.code != 0 || !strings.Contains(r.stdout, "from alice's server") {
			t.Fatalf("alice on her endpoint: %v", r)
		}
		if got := aliceSrv.seen(); len(got) != 1 || got[0] != "" {
			t.Fatalf("alice's server was sent credentials %q", got)
		}
		if got := rootSrv.seen(); len(got) != 1 || got[0] != "Bearer sk-root-secret" {
			t.Fatalf("root's server was sent %q", got)
		}
		ok(gsvAs(0, []string{unixAddr}, "config", "set", fmt.Sprintf("users/%d/ai/base_url", alice), rootSrv.URL+"/v1"), "reset")
	})

	// 1.3: a script is a namespace file read as its owner.
	t.Run("ScriptAsOwner", func(t *testing.T) {
		ok(d.sh(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo 'set config/ai/script ~/turns.jsonl' > "$1/sys/config/ctl"`, M), "root sets the script")
		ok(d.sh(`printf '{"text":"root secret turn"}\n' > "$1/home/root/private.jsonl" && chmod 600 "$1/home/root/private.jsonl"`, M), "root's private script")
		ok(as(bobHost, `printf '{"text":"bob one"}\n{"text":"bob two"}\n' > "$1/home/bob/turns.jsonl"`, M), "bob's script")
		if err := syscall.Mkfifo(filepath.Join(d.state, "fs/home/alice/fifo"), 0o666); err != nil {
			t.Fatal(err)
		}
		aliceInit, bobInit := fmt.Sprintf("init:%d", alice), fmt.Sprintf("init:%d", bob)
		ok(as(bobHost, `echo one > "$1/proc/$2/conversations/default/in"`, M, bobInit), "bob sends")
		if got := lastMessage(bobInit); got != "bob one" {
			t.Fatalf("bob's first turn: %q", got)
		}
		key := fmt.Sprintf("users/%d/ai/script", alice)
		for _, c := range []struct{ script, want string }{
			{"/home/root/private.jsonl", "permission denied"},
			{"/etc/shadow", "not in the data tree"},
			{"/dev/zero", "not in the data tree"},
			{"~/fifo", "not a regular file"},
		} {
			ok(as(aliceHost, `echo "set $2 $3" > "$1/sys/config/ctl"`, M, key, c.script), "alice sets "+c.script)
			start := time.Now()
			ok(as(aliceHost, `echo go > "$1/proc/$2/conversations/default/in"`, M, aliceInit), "alice sends")
			got := lastMessage(aliceInit)
			if !strings.HasPrefix(got, "[Process Event]: model error: config ai/script "+c.script) || !strings.Contains(got, c.want) || strings.Contains(got, "secret turn") {
				t.Fatalf("alice with script %s: %q, want an error with %q", c.script, got, c.want)
			}
			if time.Since(start) > liveness { // (a fifo read would block for good)
				t.Fatalf("alice's run with %s took %v", c.script, time.Since(start))
			}
		}
		// bob is not held up, and the daemon is fine.
		ok(as(bobHost, `echo two > "$1/proc/$2/conversations/default/in"`, M, bobInit), "bob sends again")
		if got := lastMessage(bobInit); got != "bob two" {
			t.Fatalf("bob's second turn: %q", got)
		}
		if !d.running() {
			t.Fatal("the daemon died")
		}
		ok(d.sh(`echo 'set config/ai/provider offline' > "$1/sys/config/ctl"`, M), "offline again")
	})

	// 3: text for a closed conversation fails where the shell sees it.
	t.Run("ClosedConversationIn", func(t *testing.T) {
		P := M + "/proc/" + fmt.Sprintf("init:%d", alice)
		ok(as(aliceHost, `echo 'open side' > "$1/conversations/ctl" && echo 'close side' > "$1/conversations/ctl"`, P), "open and close side")
		r := as(aliceHost, `echo hi > "$1/conversations/side/in"`, P)
		if r.code == 0 || errnoOf(r.stderr) != syscall.EBUSY {
			t.Fatalf("echo hi > in of a closed conversation: %v, want EBUSY", r)
		}
		ok(as(aliceHost, `echo 'open side' > "$1/conversations/ctl" && echo hello > "$1/conversations/side/in"`, P), "reopen and send")
		epWaitIdle(t, read, P)
		h := ok(as(aliceHost, `cat "$1/conversations/side/history"`, P), "side history")
		if ms := epHistory(t, h); len(ms) != 2 || ms[0].text() != "hello" {
			t.Fatalf("side history %q", h)
		}
	})

	// 1.7: names are one line.
	var pid string
	t.Run("NamesAreOneLine", func(t *testing.T) {
		for _, label := range []string{"x\nuid: 0", "x\x1b[2Jy", "tab\there"} {
			r := gsvAs(aliceHost, []string{unixAddr}, "spawn", "task", "--label", label)
			if r.code == 0 || !strings.Contains(r.stderr, "(400)") || !strings.Contains(r.stderr, "label") {
				t.Fatalf("gsv spawn --label %q: %v", label, r)
			}
		}
		for _, label := range []string{`x\nuid: 0`, `nul\u0000`} {
			r := as(aliceHost, `env printf 'spawn {"profile":"task","label":"%s"}\n' "$2" > "$1/proc/ctl"`, M, label)
			if r.code == 0 || errnoOf(r.stderr) != syscall.EINVAL {
				t.Fatalf("spawn with the JSON label %s: %v", label, r)
			}
			if e := ok(as(aliceHost, `cat "$1/proc/err"`, M), "/proc/err"); !strings.Contains(e, "label has a control character") {
				t.Fatalf("/proc/err after the JSON label %s: %q", label, e)
			}
		}
		r := as(aliceHost, `env printf 'open c1 title=%s\n' "$(printf 'a\033[2Jb')" > "$1/proc/$2/conversations/ctl"`, M, fmt.Sprintf("init:%d", alice))
		if r.code == 0 || errnoOf(r.stderr) != syscall.EINVAL {
			t.Fatalf("open with a title holding ESC: %v", r)
		}
		pid = strings.TrimSpace(ok(gsvAs(aliceHost, []string{unixAddr}, "spawn", "task", "--label", "plain"), "spawn plain"))
	})

	// A label stored before the rule is quoted where it is shown.
	d.stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.state, "gsv.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE proc_processes SET label=? WHERE pid=?`, "x\nuid: 0\x1b[2J", pid); err != nil {
		t.Fatal(err)
	}
	db.Close()
	d = startDaemon(t, base, daemonOpts{mount: true})
	st := ok(as(aliceHost, `cat "$1/proc/$2/status"`, d.mnt, pid), "status")
	if strings.Contains(st, "\nuid: 0") || strings.Contains(st, "\x1b") || !strings.Contains(st, `label: "x\nuid: 0\x1b[2J"`) {
		t.Fatalf("status with an old label:\n%s", st)
	}
	ps := ok(gsvAs(aliceHost, []string{"GSV_ADDR=unix!" + d.sock}, "ps"), "gsv ps")
	for _, line := range strings.Split(ps, "\n") {
		if strings.HasPrefix(line, "uid: 0") || strings.Contains(line, "\x1b") {
			t.Fatalf("gsv ps with an old label:\n%s", ps)
		}
	}
	if !strings.Contains(ps, `"x\nuid: 0\x1b[2J"`) {
		t.Fatalf("gsv ps does not quote the old label:\n%s", ps)
	}
	d.stop()
}
