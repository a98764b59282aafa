package proc

// Tests of the hardening rules of proc: credentials follow their
// endpoint, scripts are read from the namespace as their user, refused
// reads write nothing, names are one line, compaction keeps its promises,
// and an abort is announced as chat.complete.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/vfs"
)

// newCfgHarness is a ptHarness whose models come from the kernel's config
// (no injected provider), as in the daemon.
func newCfgHarness(t *testing.T) *ptHarness {
	t.Helper()
	return startPT(&ptHarness{t: t, dir: t.TempDir(), fromConfig: true})
}

// setCfg sets config keys as id (root: config/ai/..., a user: users/<uid>/ai/...).
func (h *ptHarness) setCfg(id *kernel.Identity, kv ...string) {
	h.t.Helper()
	for i := 0; i < len(kv); i += 2 {
		h.must(id, "sys.config.set", map[string]any{"key": kv[i], "value": kv[i+1]}, nil)
	}
}

// oaServer is an OpenAI-compatible server that records the credentials
// it is sent.
type oaServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string // Authorization of each request
}

func newOAServer(t *testing.T, reply string) *oaServer {
	s := &oaServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) string {
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
		}
		b, _ := json.Marshal(map[string]string{"role": "assistant", "content": reply})
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n", chunk(string(b), ""), chunk(`{}`, "stop"))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *oaServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

// lastText is the text of the last message of pid/cid.
func (h *ptHarness) lastText(id *kernel.Identity, pid string) string {
	h.t.Helper()
	ms := h.history(id, pid, "").Messages
	if len(ms) == 0 {
		return ""
	}
	m := ms[len(ms)-1]
	if m.Role == "assistant" {
		return ptAssistant(h.t, m).Text
	}
	return ptText(h.t, m)
}

// Credentials follow their endpoint: a user who names their own server
// (base_url or provider) is never sent root's key; root's server still
// gets root's key, and a user's own key goes where they send it.
func TestCredentialsFollowEndpoint(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-daemon-env")
	h := newCfgHarness(t)
	rootSrv, aliceSrv := newOAServer(t, "root server"), newOAServer(t, "alice server")
	h.setCfg(h.root, "config/ai/provider", "openai", "config/ai/base_url", rootSrv.URL+"/v1",
		"config/ai/api_key", "sk-root-secret", "config/ai/model", "m")

	// bob uses the system's endpoint: root's key goes to root's server.
	r := h.send(h.bob, "", "", "hi")
	if st := h.waitRun(r.RunID); st != "done" || h.lastText(h.bob, "") != "root server" {
		t.Fatalf("bob's run: %s %q", st, h.lastText(h.bob, ""))
	}
	if got := rootSrv.seen(); len(got) != 1 || got[0] != "Bearer sk-root-secret" {
		t.Fatalf("root's server was sent %q", got)
	}

	// alice names her own server: it gets no key at all (not root's, not
	// the daemon's environment).
	h.setCfg(h.alice, "users/1000/ai/base_url", aliceSrv.URL+"/v1")
	r = h.send(h.alice, "", "", "hi")
	if st := h.waitRun(r.RunID); st != "done" || h.lastText(h.alice, "") != "alice server" {
		t.Fatalf("alice's run: %s %q", st, h.lastText(h.alice, ""))
	}
	if got := aliceSrv.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("alice's server was sent credentials %q", got)
	}

	// A provider override alone is an endpoint of her own too.
	h.setCfg(h.root, "users/1000/ai/base_url", "")
	h.must(h.root, "sys.config.set", map[string]any{"key": "users/1000/ai/base_url", "value": aliceSrv.URL + "/v1"}, nil)
	h.setCfg(h.alice, "users/1000/ai/provider", "openai")
	r = h.send(h.alice, "", "", "again")
	h.waitRun(r.RunID)
	if got := aliceSrv.seen(); len(got) != 2 || got[1] != "" {
		t.Fatalf("alice's server was sent credentials %q", got)
	}

	// Her own key goes with her endpoint.
	h.setCfg(h.alice, "users/1000/ai/api_key", "sk-alice")
	r = h.send(h.alice, "", "", "with my key")
	h.waitRun(r.RunID)
	if got := aliceSrv.seen(); len(got) != 3 || got[2] != "Bearer sk-alice" {
		t.Fatalf("alice's server was sent %q, want her own key", got)
	}
	if got := rootSrv.seen(); len(got) != 1 {
		t.Fatalf("root's server was called %d times", len(got))
	}
}

func TestResolveAI(t *testing.T) {
	sys := map[string]string{"provider": "openai", "base_url": "https://sys", "api_key": "k-sys", "client_secret": "s", "model": "m", "timeout_ms": "9000"}
	tests := []struct {
		name   string
		user   map[string]string
		want   map[string]string
		system bool
	}{
		{"no override", nil, sys, true},
		{"model only", map[string]string{"model": "m2"},
			map[string]string{"provider": "openai", "base_url": "https://sys", "api_key": "k-sys", "client_secret": "s", "model": "m2", "timeout_ms": "9000"}, true},
		{"own key to the system endpoint", map[string]string{"api_key": "k-user"},
			map[string]string{"provider": "openai", "base_url": "https://sys", "api_key": "k-user", "client_secret": "s", "model": "m", "timeout_ms": "9000"}, true},
		{"base_url", map[string]string{"base_url": "https://evil"},
			map[string]string{"provider": "openai", "base_url": "https://evil", "model": "m", "timeout_ms": "9000"}, false},
		{"provider", map[string]string{"provider": "anthropic"},
			map[string]string{"provider": "anthropic", "base_url": "https://sys", "model": "m", "timeout_ms": "9000"}, false},
		{"empty base_url is an override", map[string]string{"base_url": ""},
			map[string]string{"provider": "openai", "base_url": "", "model": "m", "timeout_ms": "9000"}, false},
		{"own endpoint, own key", map[string]string{"base_url": "https://mine", "api_key": "k-user"},
			map[string]string{"provider": "openai", "base_url": "https://mine", "api_key": "k-user", "model": "m", "timeout_ms": "9000"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, system := resolveAI(sys, tt.user)
			if system != tt.system || fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("resolveAI = %v %v, want %v %v", got, system, tt.want, tt.system)
			}
		})
	}
}

// The scripted provider's script is a namespace path read as the owner:
// another user's private file, a file outside the data tree, a device, a
// FIFO and an oversized file are clear errors in the owner's conversation,
// and never block another user's runs.
func TestScriptIsReadAsTheOwner(t *testing.T) {
	h := newCfgHarness(t)
	h.setCfg(h.root, "config/ai/provider", "scripted", "config/ai/script", "~/turns.jsonl")
	write := func(id *kernel.Identity, p, content string) {
		h.must(id, "fs.write", map[string]any{"path": p, "content": content}, nil)
	}
	write(h.bob, "~/turns.jsonl", `{"text":"bob's turn one"}`+"\n"+`{"text":"bob's turn two"}`+"\n")
	write(h.root, "/home/root/private.jsonl", `{"text":"root's secret turn"}`+"\n")
	if err := os.Chmod(h.realPath("/home/root/private.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(h.realPath("/home/alice/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(h.alice, "~/big.jsonl", strings.Repeat(`{"text":"x"}`+"\n", MaxScript/13+10))

	// bob's own script, as bob.
	r := h.send(h.bob, "", "", "one")
	if st := h.waitRun(r.RunID); st != "done" || h.lastText(h.bob, "") != "bob's turn one" {
		t.Fatalf("bob: %s %q", st, h.lastText(h.bob, ""))
	}

	cases := []struct{ script, want string }{
		{"/home/root/private.jsonl", "permission denied"},
		{"/etc/shadow", "not in the data tree"},
		{"/dev/zero", "not in the data tree"},
		{"~/fifo", "not a regular file"},
		{"~/big.jsonl", "larger than"},
		{"~/missing.jsonl", "no such file"},
	}
	for _, c := range cases {
		t.Run(c.script, func(t *testing.T) {
			h.setCfg(h.alice, "users/1000/ai/script", c.script)
			start := time.Now()
			r := h.send(h.alice, "", "", "go")
			st := h.waitRun(r.RunID)
			txt := h.lastText(h.alice, "")
			if st != "error" || !strings.HasPrefix(txt, "[Process Event]: model error: config ai/script "+c.script) || !strings.Contains(txt, c.want) {
				t.Fatalf("run %s, last message %q, want a model error with %q", st, txt, c.want)
			}
			if strings.Contains(txt, "secret turn") {
				t.Fatalf("root's file reached alice's run: %q", txt)
			}
			if d := time.Since(start); d > ptWait { // (a fifo read would block for good)
				t.Fatalf("the run took %v", d)
			}
		})
	}
	// bob's runs went on meanwhile, with his own replay.
	r = h.send(h.bob, "", "", "two")
	if st := h.waitRun(r.RunID); st != "done" || h.lastText(h.bob, "") != "bob's turn two" {
		t.Fatalf("bob after alice's failures: %s %q", st, h.lastText(h.bob, ""))
	}
}

// A script replaced by a FIFO while it is read, or a slow script, never
// holds other users' runs: no lock shared by users is held across a
// script's read or a model call.
func TestSlowScriptDoesNotBlockOthers(t *testing.T) {
	h := newCfgHarness(t)
	h.setCfg(h.root, "config/ai/provider", "scripted", "config/ai/script", "~/turns.jsonl")
	h.must(h.alice, "fs.write", map[string]any{"path": "~/turns.jsonl", "content": `{"text":"slow","delayMs":600000}` + "\n"}, nil)
	h.must(h.bob, "fs.write", map[string]any{"path": "~/turns.jsonl", "content": `{"text":"quick"}` + "\n"}, nil)
	slow := h.send(h.alice, "", "", "take your time")
	h.waitRun(slow.RunID, "running")
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	r := h.send(h.bob, "", "", "quick please")
	if st := h.waitRun(r.RunID); st != "done" || h.lastText(h.bob, "") != "quick" || time.Since(start) > ptWait { // alice's turn waits 10 min
		t.Fatalf("bob: %s %q after %v", st, h.lastText(h.bob, ""), time.Since(start))
	}
	h.must(h.alice, "proc.abort", map[string]any{"pid": ""}, nil)
}

// Another user's init process does not exist for a user: every look at it
// is a 404, and it is not walked to.
func TestRefusedReadOfInit(t *testing.T) {
	h := newPTHarness(t)
	for _, call := range []string{"proc.status", "proc.history", "proc.conversation.list"} {
		if c := h.code(h.alice, call, map[string]any{"pid": "init:1001"}); c != 404 {
			t.Fatalf("%s of bob's init as alice: code %d", call, c)
		}
	}
	if _, err := h.node(h.alice, "/proc/init:1001"); err == nil {
		t.Fatal("alice walked to bob's init")
	}
	h.must(h.bob, "proc.status", map[string]any{"pid": "init:1001"}, nil)
}

// dataVersion returns a function that reads PRAGMA data_version of the
// store's database on a connection of its own: its value changes when any
// other connection commits a change. It also changes when a checkpoint
// resets the WAL (wal_checkpoint(TRUNCATE), which the store's checkpointer
// runs in the background after a burst: see kernel/sqlite.go), which
// writes no data; so a second connection holds a read transaction open
// for the rest of the test: while a reader is in the WAL, no checkpoint
// resets it, and every commit still changes data_version. The second
// function lists the audit records appended after seq (what wrote).
func dataVersion(t *testing.T, dir string) (version func() int64, auditAfter func(seq int64) string) {
	t.Helper()
	if kerneltest.Postgres() {
		t.Skip("data_version is SQLite's: that reads write nothing is checked on SQLite")
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "gsv.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hold, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	if _, err := hold.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := hold.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.ExecContext(ctx, `ROLLBACK`) })
	version = func() int64 {
		t.Helper()
		var v int64
		if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	auditAfter = func(seq int64) string {
		rows, err := conn.QueryContext(ctx, `SELECT seq, kind, syscall, uid, code FROM audit_log WHERE seq > ? ORDER BY seq`, seq)
		if err != nil {
			return err.Error()
		}
		defer rows.Close()
		var b strings.Builder
		for rows.Next() {
			var s, uid, code int64
			var kind, call string
			if err := rows.Scan(&s, &kind, &call, &uid, &code); err != nil {
				return err.Error()
			}
			fmt.Fprintf(&b, "[%d %s %s uid %d code %d] ", s, kind, call, uid, code)
		}
		if b.Len() == 0 {
			return "no audit record"
		}
		return b.String()
	}
	return version, auditAfter
}

// Reads are free: a user has an init process from the moment they are
// added, and looking at it (walking to it, its status, its default
// conversation's history, root's list of every process) writes nothing.
func TestInitExistsReadsWriteNothing(t *testing.T) {
	h := newPTHarness(t)
	var u kernel.User
	h.must(h.root, "sys.user.add", map[string]any{"username": "carol"}, &u)
	pid := fmt.Sprintf("init:%d", u.Uid)
	if n := h.sqlCount(`SELECT count(*) FROM proc_processes WHERE pid=? AND uid=? AND profile='init' AND cwd='/home/carol'`, pid, u.Uid); n != 1 {
		t.Fatalf("carol's init after sys.user.add: %d records", n)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_conversations WHERE pid=? AND cid='default'`, pid); n != 1 {
		t.Fatalf("carol's init's default conversation after sys.user.add: %d records", n)
	}
	carol, err := h.k.IdentityOf(context.Background(), u.Uid)
	if err != nil {
		t.Fatal(err)
	}

	version, auditAfter := dataVersion(t, h.dir)
	seq0 := h.sqlCount(`SELECT coalesce(max(seq), 0) FROM audit_log`)
	procs := h.sqlCount(`SELECT count(*) FROM proc_processes`)
	convs := h.sqlCount(`SELECT count(*) FROM proc_conversations`)
	v0 := version()

	reads := []struct {
		name string
		read func() error
	}{
		{"walk to /proc/" + pid, func() error { _, err := h.node(carol, "/proc/"+pid); return err }},
		{"cat /proc/" + pid + "/status", func() error { _, err := h.readFile(carol, "/proc/"+pid+"/status"); return err }},
		{"proc.status", func() error { return h.call(carol, "proc.status", map[string]any{"pid": pid}, nil) }},
		{"proc.status of no pid", func() error { return h.call(carol, "proc.status", map[string]any{}, nil) }},
		{"proc.list", func() error { return h.call(carol, "proc.list", map[string]any{}, nil) }},
		{"proc.list as root", func() error { return h.call(h.root, "proc.list", map[string]any{}, nil) }},
		{"proc.history", func() error {
			return h.call(carol, "proc.history", map[string]any{"pid": pid, "conversationId": "default"}, nil)
		}},
		{"cat history", func() error {
			_, err := h.readFile(carol, "/proc/"+pid+"/conversations/default/history")
			return err
		}},
		{"ls /proc as root", func() error {
			n, err := h.node(h.root, "/proc")
			if err != nil {
				return err
			}
			ents, err := n.(vfs.Dir).ReadDir(context.Background(), h.root)
			for _, e := range ents {
				if e.Name == pid {
					return err
				}
			}
			return fmt.Errorf("%s not listed in %v (%v)", pid, ents, err)
		}},
		{"walk to /proc/init:0 as root", func() error { _, err := h.node(h.root, "/proc/init:0"); return err }},
	}
	for _, r := range reads {
		if err := r.read(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if v := version(); v != v0 {
			t.Fatalf("%s wrote to the store (data_version %d, was %d; audited since: %s)", r.name, v, v0, auditAfter(int64(seq0)))
		}
	}
	// A look at a user's init that is not stored is a 404 and makes nothing.
	if c := h.code(h.root, "proc.status", map[string]any{"pid": "init:4242"}); c != 404 {
		t.Fatalf("status of the init of no user: code %d", c)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_processes`); n != procs {
		t.Fatalf("reads made processes: %d, was %d", n, procs)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_conversations`); n != convs {
		t.Fatalf("reads made conversations: %d, was %d", n, convs)
	}
	if v := version(); v != v0 {
		t.Fatalf("reads wrote to the store (data_version %d, was %d; audited since: %s)", v, v0, auditAfter(int64(seq0)))
	}
}

// A state whose users have no init process (made before every user had
// one) gets them when proc starts, with their default conversations; a
// start where every user has one writes no process.
func TestInitBackfill(t *testing.T) {
	if kerneltest.Postgres() {
		t.Skip("edits the SQLite file of a stopped daemon")
	}
	h := newPTHarness(t)
	h.close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.dir, "gsv.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DELETE FROM proc_processes WHERE pid IN ('init:0','init:1000')`,
		`DELETE FROM proc_conversations WHERE pid IN ('init:0','init:1000')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	h.open()
	h.identities()
	for _, u := range []struct {
		pid, home string
	}{{"init:0", "/home/root"}, {"init:1000", "/home/alice"}, {"init:1001", "/home/bob"}} {
		if n := h.sqlCount(`SELECT count(*) FROM proc_processes WHERE pid=? AND profile='init' AND cwd=?`, u.pid, u.home); n != 1 {
			t.Fatalf("%s after start: %d records", u.pid, n)
		}
		if n := h.sqlCount(`SELECT count(*) FROM proc_conversations WHERE pid=? AND cid='default'`, u.pid); n != 1 {
			t.Fatalf("%s's default conversation after start: %d records", u.pid, n)
		}
	}
	h.must(h.alice, "proc.status", map[string]any{}, nil)

	before := h.sqlCount(`SELECT count(*) FROM proc_processes`)
	var created int64
	h.k.Store.QueryRowContext(context.Background(), `SELECT created_at FROM proc_processes WHERE pid='init:1000'`).Scan(&created)
	h.close()
	h.open()
	var again int64
	h.k.Store.QueryRowContext(context.Background(), `SELECT created_at FROM proc_processes WHERE pid='init:1000'`).Scan(&again)
	if n := h.sqlCount(`SELECT count(*) FROM proc_processes`); n != before || again != created {
		t.Fatalf("second start: %d processes (was %d), alice's init made at %d (was %d)", n, before, again, created)
	}
}

// A hook of kernel.OnUserCreated that fails rolls the user back, and
// with it the init process made in the same transaction.
func TestUserHookFailureLeavesNoInit(t *testing.T) {
	h := newPTHarness(t)
	h.k.OnUserCreated(func(tx *kernel.Tx, u *kernel.User) error {
		if u.Username == "mallory" {
			return abi.E(abi.Invalid, "refused")
		}
		return nil
	})
	if c := h.code(h.root, "sys.user.add", map[string]any{"username": "mallory", "uid": 1500}); c != 400 {
		t.Fatalf("sys.user.add of a refused user: code %d", c)
	}
	if n := h.sqlCount(`SELECT count(*) FROM users WHERE username='mallory'`); n != 0 {
		t.Fatal("the refused user was made")
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_processes WHERE pid='init:1500'`); n != 0 {
		t.Fatal("the refused user's init was made")
	}
}

// Names are one line: labels, titles and conversation ids with control
// characters are refused; a label stored before the rule cannot forge a
// line of status.
func TestNamesAreOneLine(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "ok")
	bad := []string{"x\nuid: 0", "nul\x00", "esc\x1b[2J", "tab\there", "ls\u2028x", strings.Repeat("l", kernel.MaxLabel+1)}
	for _, b := range bad {
		cases := []struct {
			call string
			args map[string]any
		}{
			{"proc.spawn", map[string]any{"profile": "task", "label": b}},
			{"proc.conversation.open", map[string]any{"pid": pid, "conversationId": b}},
			{"proc.conversation.open", map[string]any{"pid": pid, "conversationId": "c1", "title": b}},
			{"proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": 1, "targetConversationId": b}},
			{"proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": 1, "targetConversationId": "f1", "title": b}},
		}
		for _, c := range cases {
			if got := h.code(h.alice, c.call, c.args); got != 400 {
				t.Errorf("%s %q: code %d, want 400", c.call, c.args, got)
			}
		}
	}
	if err := h.writeFile(h.alice, "/proc/ctl", "spawn task label='a\nuid: 0'\n"); err == nil {
		t.Error("a label with a newline was accepted by /proc/ctl")
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_conversations WHERE pid=? AND cid IN ('c1','f1')`, pid); n != 0 {
		t.Fatalf("%d conversations made by refused calls", n)
	}
	// A label stored before the rule is quoted in status.
	if _, err := h.k.Store.Exec(context.Background(), `UPDATE proc_processes SET label=? WHERE pid=?`, "x\nuid: 0\x1b[0m", pid); err != nil {
		t.Fatal(err)
	}
	st, err := h.readFile(h.alice, "/proc/"+pid+"/status")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(st, "\n") != len(statusLines(&abi.ProcStatusRecord{})) || strings.Contains(st, "\nuid: 0\x1b") || strings.Contains(st, "\x1b") ||
		!strings.Contains(st, `label: "x\nuid: 0\x1b[0m"`+"\n") {
		t.Fatalf("status:\n%s", st)
	}
}

// A compaction that does not happen (the conversation was reset while its
// summary was made) leaves no archive behind.
func TestDiscardedCompactionLeavesNoArchive(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "discard")
	h.chat(h.alice, pid, "", "m1", "m2")
	slow := h.setScript(1000, "summary_slow.jsonl") // until Release
	done := make(chan error, 1)
	go func() {
		done <- h.call(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "keepLast": 1, "generateSummary": true}, nil)
	}()
	dir := h.realPath("/var/sessions/alice/" + pid + "/default")
	deadline := time.Now().Add(ptWait)
	for {
		if ents, _ := os.ReadDir(dir); len(ents) == 1 {
			break // the archive is written; the summary is being made
		}
		if time.Now().After(deadline) {
			t.Fatal("no archive was written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.must(h.alice, "proc.conversation.reset", map[string]any{"pid": pid, "archive": false}, nil)
	slow.Release()
	if err := <-done; abi.Code(err) != 409 {
		t.Fatalf("compaction after a reset: %v, want 409", err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 0 {
		t.Fatalf("archives left behind in %s: %v", dir, names)
	}
	if segs := h.segments(h.alice, pid, ""); len(segs) != 0 {
		t.Fatalf("segments %+v", segs)
	}
}

// Auto-compaction that leaves the context over the window stops the run
// with a visible error, instead of calling the model with it.
func TestAutoCompactStillOverWindow(t *testing.T) {
	h := newPTHarness(t)
	h.must(h.root, "sys.config.set", map[string]any{"key": "config/ai/context_window", "value": "80"}, nil)
	pid := h.spawn(h.alice, "over")
	h.must(h.alice, "proc.conversation.policy.set", map[string]any{"pid": pid, "overflow": "auto-compact", "compactAtPressure": 0.9, "keepLast": 2}, nil)
	h.chat(h.alice, pid, "", "m1", "m2")
	s := h.setScript(1000, "")
	r := h.send(h.alice, pid, "", strings.Repeat("big ", 100))
	if st := h.waitRun(r.RunID); st != "error" {
		t.Fatalf("run %s, want error", st)
	}
	if segs := h.segments(h.alice, pid, ""); len(segs) != 1 {
		t.Fatalf("segments %+v, want the one compaction", segs)
	}
	ms := h.history(h.alice, pid, "").Messages
	if txt := ptText(t, ms[len(ms)-1]); !strings.HasPrefix(txt, "[Process Event]: run refused: context is still over the window after compaction") {
		t.Fatalf("last message %q", txt)
	}
	if n := len(s.Requests()); n != 1 { // the summary's, not the run's
		t.Fatalf("%d model calls, want the summary's only", n)
	}
	var errText string
	h.k.Store.QueryRowContext(context.Background(), `SELECT coalesce(error,'') FROM proc_runs WHERE run_id=?`, r.RunID).Scan(&errText)
	if !strings.Contains(errText, "still over the window") {
		t.Fatalf("run error %q", errText)
	}
}

// An abort is announced as the seed's chat.complete, aborted: true; a
// run's normal end as chat.complete, aborted: false.
func TestAbortEmitsChatComplete(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "chat")
	sub := h.k.Subscribe(h.alice, func(ev *kernel.Event) bool {
		return ev.Pid == pid && ev.Signal == "chat.complete"
	})
	defer sub.Close()
	h.chat(h.alice, pid, "", "hello")
	ev := ptEvents(t, sub, func(ptEvent) bool { return true })
	if p := ev[0].Payload; p["aborted"] != false || p["status"] != "done" {
		t.Fatalf("chat.complete of a finished run: %+v", p)
	}
	h.setScript(1000, "slow.jsonl")
	r := h.send(h.alice, pid, "", "slowly")
	h.waitRun(r.RunID, "running")
	h.must(h.alice, "proc.abort", map[string]any{"pid": pid}, nil)
	ev = ptEvents(t, sub, func(ptEvent) bool { return true })
	if p := ev[0].Payload; p["aborted"] != true || p["runId"] != r.RunID || p["conversationId"] != "default" || p["status"] != "aborted" {
		t.Fatalf("chat.complete of an aborted run: %+v", p)
	}
}
