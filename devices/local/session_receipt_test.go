package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// The seed's receipts (001): process.session.signal of a session that
// does not exist is the receipt {status:"not_found"}, not a failure; an
// open whose sandbox cannot be set up is the receipt {status:"error",
// error_code, error}; a refused open stays the call's error.

// TestSessionSignalNotFound: a session id that does not exist, and
// another user's, answer not_found; a bad signal is still a 400.
func TestSessionSignalNotFound(t *testing.T) {
	k, _, alice, bob := newKernel(t)
	for _, who := range []string{"alice", "bob"} {
		id := alice
		if who == "bob" {
			id = bob
		}
		res, err := sessionCall[*abi.SessionSignalResult](t, k, id, "process.session.signal", &abi.SessionSignalArgs{SessionID: "ps_nosuch", Signal: abi.SignalTerm})
		if err != nil || res.Status != abi.SignalNotFound || res.ExitCode != nil || res.EndedAtNs != nil {
			t.Errorf("%s signals an unknown session: %+v, %v; want the receipt not_found", who, res, err)
		}
	}
	if _, err := sessionCall[*abi.SessionSignalResult](t, k, alice, "process.session.signal", &abi.SessionSignalArgs{SessionID: "ps_nosuch", Signal: "hup"}); kindOf(err) != abi.Invalid {
		t.Errorf("signal hup of an unknown session: %v, want 400", err)
	}
	if !needsRoot(t) {
		return
	}
	s := openSession(t, k, alice, abi.ProcessLocalTarget{NetworkMode: "none"})
	res, err := sessionCall[*abi.SessionSignalResult](t, k, bob, "process.session.signal", &abi.SessionSignalArgs{SessionID: s.SessionID, Signal: abi.SignalKill})
	if err != nil || res.Status != abi.SignalNotFound {
		t.Fatalf("bob signals alice's session: %+v, %v; want not_found", res, err)
	}
	if r := execIn(t, k, alice, s.SessionID, "true"); r.Status != abi.ExecOK {
		t.Fatalf("alice's session after bob's signal: %+v", r)
	}
}

// needsRoot says whether sandboxes can run here (the daemon's root).
func needsRoot(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("sessions need root: the rest is skipped")
		return false
	}
	return true
}

// TestSessionOpenErrorReceipt: an open whose sandbox runtime is not
// usable (a bwrap that does not answer --version), or whose first
// sandbox cannot run (a bwrap that fails), is the receipt status
// "error" with its code and cause, no session made; a refused open (a
// bad network mode) is still a 400.
func TestSessionOpenErrorReceipt(t *testing.T) {
	needSandbox(t)
	for _, tc := range []struct {
		name, script, code, text string
	}{
		{"no runtime", "#!/bin/sh\necho broken >&2\nexit 3\n", "sandbox_unavailable", "--version"},
		{"no sandbox", "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.11.0'; exit 0; }\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n", "sandbox_failed", "setting up uid map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			if err := os.WriteFile(filepath.Join(bin, "bwrap"), []byte(tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			// The sandbox's host ids run it: the way to it is open.
			for d := bin; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
				os.Chmod(d, 0o755)
			}
			t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
			k, _, alice, _ := newKernel(t)
			if _, err := sessionCall[*abi.SessionOpenResult](t, k, alice, "process.session.open",
				&abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "wifi"}}}); kindOf(err) != abi.Invalid {
				t.Fatalf("a refused open: %v, want a 400", err)
			}
			res, err := sessionCall[*abi.SessionOpenResult](t, k, alice, "process.session.open",
				&abi.SessionOpenArgs{Target: abi.ProcessTarget{Local: &abi.ProcessLocalTarget{NetworkMode: "none"}}})
			if err != nil || res.Status != abi.SessionError || res.ErrorCode != tc.code || res.SessionID != "" || res.Error == "" || !strings.Contains(res.Error, tc.text) || res.StartedAtNs == 0 {
				t.Fatalf("open: %+v, %v; want the receipt status error, %s", res, err, tc.code)
			}
			list, err := sessionCall[*abi.SessionListResult](t, k, alice, "process.session.list", &abi.SessionListArgs{})
			if err != nil || len(list.Sessions) != 0 {
				t.Fatalf("sessions after a failed open: %+v, %v", list, err)
			}
		})
	}
}
