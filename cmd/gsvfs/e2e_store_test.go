package main_test

// A state made by an older daemon opens and migrates: the database of
// testdata/state-f43bb29 was made by the gsvfs and gsv of main at f43bb29
// (before the storage seam) with its make.sh.

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// fixtureState is the older state: its database and what make.sh saw of
// it through the older daemon.
const fixtureState = "testdata/state-f43bb29"

// fixture reads a file make.sh wrote next to the database.
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureState, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestE2EStoreFromOlderMain: the daemon opens a state that the daemon of
// main before the storage seam made, migrates it (every room's steps
// since), and shows everything it held as that daemon did: the user and
// her token, config, the process and its history, the crontab in the
// order its lines were written, the notifications newest first, the
// device and the group it is granted to. Writes work after it. The
// migrated database then has exactly the schema of one made fresh, and
// the rows made before are numbered in the order they were made.
func TestE2EStoreFromOlderMain(t *testing.T) {
	requireRoot(t)
	base := newBase(t)
	zr, err := os.Open(filepath.Join(fixtureState, "gsv.db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	gz, err := gzip.NewReader(zr)
	if err != nil {
		t.Fatal(err)
	}
	db, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(base, "state", "gsv.db")
	if err := os.WriteFile(dbPath, db, 0o600); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", freePort(t))
	d := startDaemon(t, base, daemonOpts{listen: listen})
	pid := strings.TrimSpace(fixture(t, "pid"))

	if out := d.mustGsv(t, "user", "list"); !strings.Contains(out, "alice  1000  100  /home/alice  1001") {
		t.Errorf("gsv user list: %q, want alice", out)
	}
	tcp := []string{"GSV_ADDR=" + listen, "GSV_TOKEN=" + strings.TrimSpace(fixture(t, "alice.token"))}
	if r := gsvAs(0, tcp, "whoami"); r.code != 0 || !strings.Contains(r.stdout, "alice") {
		t.Errorf("gsv whoami with alice's older token: %v", r)
	}
	if out := d.mustGsv(t, "config", "get", "users/1000/ai"); !strings.Contains(out, "users/1000/ai/model=fixture-model") {
		t.Errorf("gsv config get: %q", out)
	}
	if out := d.mustGsv(t, "ps"); !strings.Contains(out, pid) || !strings.Contains(out, "fixture-proc") {
		t.Errorf("gsv ps: %q, want %s", out, pid)
	}
	if out := d.mustGsv(t, "history", "--pid", pid); !strings.Contains(out, "hello from the older main") || !strings.Contains(out, "a second message") {
		t.Errorf("gsv history: %q", out)
	}
	if out := d.mustGsv(t, "crontab", "-l"); out != fixture(t, "crontab.txt") {
		t.Errorf("gsv crontab -l:\n%s\nthe older daemon's:\n%s", out, fixture(t, "crontab.txt"))
	}
	type notes struct {
		Notifications []struct{ NotificationID, Title string }
	}
	var before, after notes
	json.Unmarshal([]byte(fixture(t, "notify.json")), &before)
	if err := json.Unmarshal([]byte(d.mustGsv(t, "notify", "list", "--json")), &after); err != nil || len(before.Notifications) != 3 ||
		!slices.Equal(after.Notifications, before.Notifications) {
		t.Errorf("gsv notify list: %+v (%v), the older daemon's %+v", after, err, before)
	}
	var dev struct {
		DeviceID string
		OwnerUid int
		Groups   []string
		Online   bool
	}
	if err := json.Unmarshal([]byte(d.mustGsv(t, "device", "get", "laptop")), &dev); err != nil || dev.DeviceID != "laptop" ||
		!slices.Equal(dev.Groups, []string{"users"}) || dev.Online {
		t.Errorf("gsv device get laptop: %+v (%v)", dev, err)
	}

	// Writes after the migration.
	d.mustGsv(t, "send", pid, "--wait", "after the seam")
	if out := d.mustGsv(t, "history", "--pid", pid); !strings.Contains(out, "after the seam") {
		t.Errorf("gsv history after a send: %q", out)
	}
	d.mustGsv(t, "notify", "create", "fixture fourth")
	if err := json.Unmarshal([]byte(d.mustGsv(t, "notify", "list", "--json")), &after); err != nil || len(after.Notifications) != 4 ||
		after.Notifications[0].Title != "fixture fourth" {
		t.Errorf("gsv notify list after a create: %+v (%v)", after, err)
	}
	crontab := fixture(t, "crontab.txt") + fmt.Sprintf("@every 3h event %s new tick # name=new\n", pid)
	if r := runCmd("/", []string{"GSV_ADDR=unix!" + d.sock}, strings.NewReader(crontab), gsvBin, "crontab", "-"); r.code != 0 {
		t.Fatalf("gsv crontab -: %v", r)
	}
	if out := d.mustGsv(t, "crontab", "-l"); !strings.HasPrefix(out, fixture(t, "crontab.txt")) || !strings.Contains(out, "name=new") {
		t.Errorf("gsv crontab -l after a line is added:\n%s", out)
	}
	d.stop()

	fresh := startDaemon(t, newBase(t), daemonOpts{})
	fresh.stop()
	got, want := schemaOf(t, dbPath), schemaOf(t, filepath.Join(fresh.state, "gsv.db"))
	if got != want {
		t.Errorf("the migrated schema:\n%s\nis not the fresh one:\n%s", got, want)
	}
	// The rows made before the seam are numbered in the order they were
	// made; the ones made after it come after them.
	migrated := openDB(t, dbPath)
	for _, table := range []string{"sched_schedules", "notify_notifications"} {
		var n int
		if err := migrated.QueryRow(`SELECT count(*) FROM ` + table + ` WHERE seq<>rowid`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows whose seq is not their rowid (%v)", table, n, err)
		}
	}
}

// openDB opens the SQLite database file path for the test to read.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// schemaOf is the schema of the database file path: every table, index
// and trigger as SQLite keeps its text, and each component's version.
func schemaOf(t *testing.T, path string) string {
	t.Helper()
	db := openDB(t, path)
	var b bytes.Buffer
	rows, err := db.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s: %s\n", typ, name, text)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	vs, err := db.Query(`SELECT component, version FROM schema_migrations ORDER BY component`)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	for vs.Next() {
		var c string
		var v int
		if err := vs.Scan(&c, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "version %s: %d\n", c, v)
	}
	return b.String()
}
