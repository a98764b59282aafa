package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/internal/pgtest"
)

// TestE2EPostgresStore: gsvfs serve --store postgres://... keeps its state
// in Postgres, not in the state directory: a user added on one daemon is
// there for a daemon started afterwards on another, empty, state
// directory with the same --store; neither writes a gsv.db. A --store that
// is not a postgres:// URL is refused.
func TestE2EPostgresStore(t *testing.T) {
	requireRoot(t)
	dsn := pgtest.New(t)
	first := newBase(t)
	d := startDaemon(t, first, daemonOpts{args: []string{"--store", dsn}})
	d.mustGsv(t, "user", "add", "carol")
	d.stop()

	second := newBase(t)
	d2 := startDaemon(t, second, daemonOpts{args: []string{"--store", dsn}})
	if out := d2.mustGsv(t, "user", "list"); !strings.Contains(out, "carol") {
		t.Errorf("gsv user list on the second daemon: %q, want carol", out)
	}
	for _, base := range []string{first, second} {
		if _, err := os.Stat(filepath.Join(base, "state", "gsv.db")); !os.IsNotExist(err) {
			t.Errorf("%s/state/gsv.db: %v, want none", base, err)
		}
	}
	d2.stop()

	cmd := exec.Command(gsvfsBin, "serve", "--state", filepath.Join(newBase(t), "state"), "--store", "/tmp/elsewhere.db")
	cmd.Env = append(os.Environ(), "GSV_STATE=", raceEnv)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--store takes a postgres:// URL") {
		t.Errorf("--store with a file: %v, %q", err, out)
	}
}
