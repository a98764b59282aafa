package main_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestE2ESchedDamagedRows: rows of the scheduler's table damaged in the
// real SQLite file (JSON that does not decode, an expression of no known
// kind, a cron text that does not parse, text in a number's column, a
// uid out of range) do not stop the daemon from starting. Each is logged
// with the table and a repair hint, listed as broken by gsv sched list,
// shown as a #broken comment by the crontab, runs nothing, refuses
// updates and can be removed; the healthy schedules go on running.
func TestE2ESchedDamagedRows(t *testing.T) {
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{})
	gsv := func(args ...string) string { t.Helper(); return d.mustGsv(t, args...) }
	gsv("sched", "add", "--name", "healthy", "--every", "1s", "--event", "init:0", "tick")
	damage := []struct {
		name, set string
		arg       any
		problem   string
	}{
		{"badexpr", "expression=?", `{not json`, "stored expression"},
		{"badkind", "expression=?", `{"kind":"sometimes"}`, `unknown kind "sometimes"`},
		{"badcron", "expression=?", `{"kind":"cron","expr":"61 * * * *","timezone":"UTC"}`, "stored expression"},
		{"badtarget", "target=?", `[1,2`, "stored target"},
		{"badretry", "retry=?", `{"maxAttempts":"x"}`, "stored retry"},
		{"badnext", "next_run_at=?", "soon", "stored next_run_at"},
		{"badcount", "run_count=?", "many", "stored run_count"},
		{"badowner", "owner_uid=?", int64(1) << 40, "stored owner_uid"},
	}
	for _, x := range damage {
		gsv("sched", "add", "--name", x.name, "--every", "1h", "--event", "init:0", "hello")
	}
	d.stop()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.state, "gsv.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range damage {
		if _, err := db.Exec(`UPDATE sched_schedules SET `+x.set+` WHERE name=?`, x.arg, x.name); err != nil {
			t.Fatalf("damaging %s: %v", x.name, err)
		}
	}
	var ids = map[string]string{}
	rows, err := db.Query(`SELECT name,id FROM sched_schedules`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, id string
		if err := rows.Scan(&n, &id); err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	rows.Close()
	db.Close()

	// The daemon starts (startDaemon fails the test if it exits).
	d = startDaemon(t, base, daemonOpts{})
	gsv = func(args ...string) string { t.Helper(); return d.mustGsv(t, args...) }
	var list struct {
		Schedules []struct {
			ID, Name, Broken string
			State            struct{ RunCount int64 }
		}
	}
	listed := func() map[string]string {
		t.Helper()
		if err := json.Unmarshal([]byte(gsv("call", "sched.list", `{}`)), &list); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range list.Schedules {
			out[s.ID] = s.Broken
		}
		return out
	}
	got := listed()
	for _, x := range damage {
		if b := got[ids[x.name]]; !strings.Contains(b, x.problem) {
			t.Errorf("%s (%s) listed as broken %q, want %q", x.name, ids[x.name], b, x.problem)
		}
	}
	if b, ok := got[ids["healthy"]]; !ok || b != "" {
		t.Errorf("healthy: listed %v, broken %q", ok, b)
	}
	table := gsv("sched", "list", "--all")
	for _, x := range damage {
		if !strings.Contains(table, ids[x.name]) {
			t.Errorf("gsv sched list --all lacks %s:\n%s", x.name, table)
		}
	}
	if strings.Count(table, " broken ") != len(damage) {
		t.Errorf("gsv sched list --all shows %d broken, want %d:\n%s", strings.Count(table, " broken "), len(damage), table)
	}
	log := d.stderr.String()
	if !strings.Contains(log, "damaged schedule") || !strings.Contains(log, "sched_schedules") {
		t.Errorf("the daemon's log does not name the damage:\n%s", log)
	}
	tab := gsv("crontab", "-l")
	if strings.Count(tab, "#broken id=") != len(damage)-1 { // badowner is nobody's: root's crontab lacks it
		t.Errorf("crontab:\n%s", tab)
	}

	// The healthy schedule runs; the damaged ones do not.
	deadline := time.Now().Add(liveness)
	var runs int64
	for time.Now().Before(deadline) && runs < 2 {
		listed()
		for _, s := range list.Schedules {
			if s.Name == "healthy" {
				runs = s.State.RunCount
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if runs < 2 {
		t.Fatalf("the healthy schedule did not run after the restart: %d runs", runs)
	}
	var hist struct {
		Runs []struct{ Schedule string }
	}
	if err := json.Unmarshal([]byte(gsv("call", "sched.log", `{}`)), &hist); err != nil {
		t.Fatal(err)
	}
	for _, r := range hist.Runs {
		if r.Schedule != "healthy" {
			t.Errorf("a damaged schedule ran: %+v", r)
		}
	}

	// A damaged schedule refuses changes and can be removed.
	r := gsvAs(0, []string{"GSV_ADDR=unix!" + d.sock}, "sched", "disable", ids["badtarget"])
	if r.code == 0 || !strings.Contains(r.stderr, "damaged") {
		t.Errorf("disabling a damaged schedule: %v", r)
	}
	gsv("sched", "remove", ids["badtarget"], ids["badexpr"])
	if got := listed(); len(got) != len(damage)-1 {
		t.Errorf("after removing two: %v", got)
	}
	// A crontab written back as it reads leaves the damaged ones as
	// they are.
	file := filepath.Join(d.work, "tab")
	if err := os.WriteFile(file, []byte(gsv("crontab", "-l")), 0o644); err != nil {
		t.Fatal(err)
	}
	gsv("crontab", file)
	if got := listed(); len(got) != len(damage)-1 {
		t.Errorf("after a crontab write: %v", got)
	}
}
