package main_test

// The audit log end to end: kill -9 in the middle of a storm of store
// changes, restart, and every change that survived has its record and
// no record lacks its change; the chain verifies with gsv audit verify,
// which finds a record edited in the store; /var/log/gsv/audit shows the
// records through the mount.

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"9fans.net/go/plan9"
	_ "modernc.org/sqlite"

	"gsvfs.dev/gsvfs/ninep"
)

func TestE2EAuditCrash(t *testing.T) {
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{mount: true})
	addr := "unix!" + d.sock
	var (
		acks    atomic.Int64
		reached = make(chan struct{})
		once    sync.Once
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fsys, err := ninep.Mount(addr, "", nil)
			if err != nil {
				return
			}
			defer fsys.Close()
			fid, err := fsys.Open("/sys/call", plan9.ORDWR)
			if err != nil {
				return
			}
			defer fid.Close()
			for j := 0; !stop.Load(); j++ {
				req, _ := json.Marshal(map[string]any{"call": "sys.config.set", "args": map[string]any{
					"key": fmt.Sprintf("users/0/ai/audit%d_%d", w, j), "value": "v"}})
				if ok, err := callOK(fid, append(req, '\n')); err != nil {
					return
				} else if ok && acks.Add(1) >= 200 {
					once.Do(func() { close(reached) })
				}
			}
		}()
	}
	select {
	case <-reached:
	case <-time.After(liveness):
		t.Fatalf("only %d sets acknowledged in %v", acks.Load(), liveness)
	}
	d.kill()
	stop.Store(true)
	wg.Wait()

	// Every change has its record and every record its change.
	check := func() {
		db, err := sql.Open("sqlite", "file:"+d.state+"/gsv.db?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		keys := map[string]bool{}
		rows, err := db.Query(`SELECT key FROM config WHERE key LIKE 'users/0/ai/audit%'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			rows.Scan(&k)
			keys[k] = true
		}
		rows.Close()
		recorded := map[string]bool{}
		re := regexp.MustCompile(`"key":"(users/0/ai/audit[0-9_]+)"`)
		rows, err = db.Query(`SELECT args FROM audit_log WHERE kind='change' AND syscall='sys.config.set'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a string
			rows.Scan(&a)
			if m := re.FindStringSubmatch(a); m != nil {
				recorded[m[1]] = true
			}
		}
		rows.Close()
		for k := range keys {
			if !recorded[k] {
				t.Errorf("change %s survived without its audit record", k)
			}
		}
		for k := range recorded {
			if !keys[k] {
				t.Errorf("audit record of %s, a change that is not there", k)
			}
		}
		t.Logf("%d changes, each with its record", len(keys))
	}
	check()

	d2 := startDaemon(t, base, daemonOpts{mount: true})
	if st := d2.mustGsv(t, "status"); !strings.Contains(st, "version ") || !strings.Contains(st, "store ") {
		t.Fatalf("gsv status: %q", st)
	}
	out := d2.mustGsv(t, "audit", "verify")
	if !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("gsv audit verify after the crash: %q", out)
	}
	q := d2.mustGsv(t, "audit", "--syscall", "sys.config.set", "--since", "1h", "--limit", "5")
	if n := strings.Count(q, "\n"); n != 5 || !strings.Contains(q, "root(0)") {
		t.Fatalf("gsv audit: %q", q)
	}
	log, err := d2.cat(d2.p("/var/log/gsv/audit"))
	if err != nil || !strings.Contains(log, " sys.config.set root(0)") || !strings.Contains(log, "trace=") {
		t.Fatalf("/var/log/gsv/audit: %.300q %v", log, err)
	}
	if r := d2.shAs(1001, `cat "$1"`, d2.p("/var/log/gsv/audit")); r.code == 0 {
		t.Fatalf("a host user with no account read the audit log: %v", r)
	}
	d2.stop()

	// An edited record breaks the chain, and gsv audit verify says where.
	db, err := sql.Open("sqlite", "file:"+d.state+"/gsv.db")
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := db.QueryRow(`SELECT seq FROM audit_log WHERE kind='change' ORDER BY seq LIMIT 1 OFFSET 10`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit_log SET code=200, username='mallory' WHERE seq=?`, seq); err != nil {
		t.Fatal(err)
	}
	db.Close()
	d3 := startDaemon(t, base, daemonOpts{mount: true})
	r := gsvAs(0, []string{"GSV_ADDR=unix!" + d3.sock}, "audit", "verify")
	if r.code == 0 || !strings.Contains(r.stderr, fmt.Sprintf("broken at record %d", seq)) {
		t.Fatalf("gsv audit verify after an edit of record %d: %v", seq, r)
	}
	d3.stop()
}

// TestE2EMetricsScrape: the daemon serves /metrics on --http; the text
// passes promtool check metrics (Debian's prometheus) and counts the
// syscalls just made, the 9P requests of gsv and the FUSE requests of a
// cat through the mount.
func TestE2EMetricsScrape(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (make deps installs Debian's prometheus)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, args: []string{"--http", addr}})
	d.mustGsv(t, "config", "set", "users/0/ai/model", "m1")
	if _, err := d.cat(d.p("/sys/config/users/0/ai/model")); err != nil {
		t.Logf("cat through the mount: %v", err) // a failed request is counted too
	}
	wants := []string{`gsv_syscalls_total{code="200",syscall="sys.config.set"}`,
		`gsv_9p_requests_total{op="walk",result="ok"}`, `gsv_9p_requests_total{op="attach",result="ok"}`,
		`gsv_fuse_requests_total{op="lookup",result="ok"}`}
	var body []byte
	deadline := time.Now().Add(liveness)
	// A request is counted once answered: fetch until every count is there.
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && !slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(string(body), w) }) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /metrics: %v; want %v in:\n%.4000s", err, wants, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
