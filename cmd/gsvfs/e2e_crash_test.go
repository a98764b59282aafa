package main_test

// Crash safety: kill -9 the daemon in the middle of a storm of writes made
// through /sys/call, restart it on the same state and mount point, and
// require that every acknowledged write is there, whole, and that the
// database is intact.

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	_ "modernc.org/sqlite"

	"gsvfs.dev/gsvfs/ninep"
)

const (
	crashWrites    = 1000
	crashWorkers   = 8
	crashKillAfter = 300
)

// crashContent is what write i puts in /home/root/w/<i>.
func crashContent(i int) string {
	return fmt.Sprintf("%d-%s", i, strings.Repeat("payload:"+strconv.Itoa(i)+";", 40))
}

// callOK makes one request on an open /sys/call fid and reports whether
// the response acknowledged it (ok, and not the seed's data.ok:false).
func callOK(fid *client.Fid, req []byte) (bool, error) {
	if _, err := fid.Write(req); err != nil {
		return false, err
	}
	b, err := io.ReadAll(fid)
	if err != nil {
		return false, err
	}
	var f struct {
		OK   bool `json:"ok"`
		Data struct {
			OK *bool `json:"ok"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return false, fmt.Errorf("response %q: %v", b, err)
	}
	return f.OK && (f.Data.OK == nil || *f.Data.OK), nil
}

func TestE2ECrash(t *testing.T) {
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{mount: true})

	var (
		next     atomic.Int64
		acks     atomic.Int64
		mu       sync.Mutex
		acked    = map[int]bool{}
		cfgAcked = map[int]bool{}
		failures []string // acknowledged-as-failed writes before the kill
		reached  = make(chan struct{})
		once     sync.Once
		stopCfg  atomic.Bool
		wg       sync.WaitGroup
	)
	addr := "unix!" + d.sock
	for w := 0; w < crashWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fsys, err := ninep.Mount(addr, "", nil)
			if err != nil {
				mu.Lock()
				failures = append(failures, "attach: "+err.Error())
				mu.Unlock()
				return
			}
			defer fsys.Close()
			fid, err := fsys.Open("/sys/call", plan9.ORDWR)
			if err != nil {
				return
			}
			defer fid.Close()
			for {
				i := int(next.Add(1) - 1)
				if i >= crashWrites {
					return
				}
				req, _ := json.Marshal(map[string]any{"call": "fs.write", "args": map[string]any{
					"path": "/home/root/w/" + strconv.Itoa(i), "content": crashContent(i)}})
				ok, err := callOK(fid, append(req, '\n'))
				if err != nil {
					return // the daemon is gone
				}
				if !ok {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("write %d not acknowledged", i))
					mu.Unlock()
					continue
				}
				mu.Lock()
				acked[i] = true
				mu.Unlock()
				if acks.Add(1) >= crashKillAfter {
					once.Do(func() { close(reached) })
				}
			}
		}()
	}
	// Meanwhile, config sets go to the database.
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
		for j := 0; !stopCfg.Load(); j++ {
			req, _ := json.Marshal(map[string]any{"call": "sys.config.set", "args": map[string]any{
				"key": fmt.Sprintf("users/0/ai/crash%d", j), "value": fmt.Sprintf("v%d", j)}})
			ok, err := callOK(fid, append(req, '\n'))
			if err != nil {
				return
			}
			if ok {
				mu.Lock()
				cfgAcked[j] = true
				mu.Unlock()
			}
		}
	}()

	select {
	case <-reached:
	case <-time.After(liveness):
		t.Fatalf("only %d writes acknowledged in %v", acks.Load(), liveness)
	}
	d.kill()
	stopCfg.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(liveness):
		t.Fatalf("clients still blocked %v after the daemon was killed", liveness)
	}
	mu.Lock()
	nAcked, nCfg := len(acked), len(cfgAcked)
	mu.Unlock()
	t.Logf("killed after %d acknowledged writes (%d issued) and %d config sets", nAcked, min(next.Load(), crashWrites), nCfg)
	if len(failures) > 0 {
		t.Errorf("before the kill: %s", strings.Join(failures[:min(len(failures), 10)], "; "))
	}
	if nAcked >= crashWrites {
		t.Fatalf("every write finished before the kill; the test did not crash anything")
	}
	// The kill left the mount behind, stale.
	if n := mountCount(t, d.mnt); n != 1 {
		t.Fatalf("after kill -9, %s is mounted %d times, want the 1 stale mount", d.mnt, n)
	}
	if _, err := os.Stat(d.mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the stale mount: %v, want ENOTCONN", err)
	}

	// Restart on the same state and mount point: the stale mount is
	// cleared automatically.
	d2 := startDaemon(t, base, daemonOpts{mount: true, logLevel: "debug"})
	if n := mountCount(t, d2.mnt); n != 1 {
		t.Fatalf("after the restart, %s is mounted %d times, want 1", d2.mnt, n)
	}
	lost := 0
	for i := range crashWrites {
		b, err := os.ReadFile(d2.p("/home/root/w/" + strconv.Itoa(i)))
		switch {
		case acked[i] && err != nil:
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged write %d: %v", i, err)
			}
		case err == nil && string(b) != crashContent(i):
			// Acknowledged or not, a file is never torn.
			t.Errorf("/home/root/w/%d holds %d bytes %.40q..., want %d bytes of write %d (acknowledged: %v)", i, len(b), b, len(crashContent(i)), i, acked[i])
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged writes lost", lost)
	}
	ents, err := os.ReadDir(d2.p("/home/root/w"))
	if err != nil {
		t.Fatal(err)
	}
	var stray []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			stray = append(stray, e.Name())
		}
	}
	if len(stray) > 0 {
		t.Logf("the crash left %d temporary files visible in /home/root/w: %q", len(stray), stray[:min(len(stray), 5)])
	}
	for j := range cfgAcked {
		p := d2.p(fmt.Sprintf("/sys/config/users/0/ai/crash%d", j))
		if b, err := os.ReadFile(p); err != nil || string(b) != fmt.Sprintf("v%d\n", j) {
			t.Errorf("acknowledged config set crash%d: %q, %v", j, b, err)
		}
	}
	// The restarted daemon works: a write and a read through the mount.
	if r := d2.sh(`echo after > "$1" && cat "$1"`, d2.p("/home/root/after-crash")); r.code != 0 || r.stdout != "after\n" {
		t.Fatalf("write after restart: %v", r)
	}
	d2.stop()

	db, err := sql.Open("sqlite", "file:"+d2.state+"/gsv.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	if res != "ok" {
		t.Fatalf("PRAGMA integrity_check = %q", res)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM config WHERE key LIKE 'users/0/ai/crash%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < nCfg {
		t.Fatalf("the database holds %d crash keys, want at least the %d acknowledged", n, nCfg)
	}
}
