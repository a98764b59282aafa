package main_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestE2EDeviceProcs: gsvfs device takes --procs, how many processors
// run its Go code at once (1 unless given), and refuses a count that is
// not one, before it dials anything.
func TestE2EDeviceProcs(t *testing.T) {
	for _, tc := range []struct {
		procs string
		want  string
	}{
		{"-1", "--procs -1: give a number of processors from 1, or 0 for all"},
		{"many", `invalid argument "many" for "--procs"`},
	} {
		t.Run(tc.procs, func(t *testing.T) {
			// Port 1 on loopback: nothing must be dialed before the
			// refusal (a dial would fail and retry, not exit).
			ctx, cancel := context.WithTimeout(context.Background(), liveness)
			defer cancel()
			out, err := exec.CommandContext(ctx, gsvfsBin, "device", "--kernel", "tcp!127.0.0.1!1", "--id", "procs",
				"--token", "t", "--procs", tc.procs).CombinedOutput()
			if err == nil {
				t.Fatalf("--procs %s: exit 0 (%s), want a refusal", tc.procs, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("--procs %s: %s, want %q", tc.procs, out, tc.want)
			}
		})
	}
}
