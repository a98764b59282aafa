package sched

import (
	"context"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestLogRotates: sched.log with Rotate gives the caller's runs since the
// last rotation (1 to Rotate of them, newest first), so the log a reader
// follows only grows between rotations; another owner's runs neither show
// nor count.
func TestLogRotates(t *testing.T) {
	h := newHarness(t, harnessStart)
	ctx := context.Background()
	add := func(owner uint32, n int) {
		for i := 0; i < n; i++ {
			if _, err := h.k.Store.Exec(ctx, `INSERT INTO sched_runs(schedule_id,name,owner_uid,scheduled_at,started_at,finished_at,status,duration_ms) VALUES('s','n',?,1,1,1,'ok',0)`, owner); err != nil {
				t.Fatal(err)
			}
		}
	}
	log := func(id *kernel.Identity, rotate int) []abi.Run {
		t.Helper()
		res, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: id}, abi.SchedLog, &abi.SchedLogArgs{Rotate: rotate})
		if err != nil {
			t.Fatal(err)
		}
		return res.Runs
	}
	if got := log(h.alice, 3); len(got) != 0 {
		t.Fatalf("no runs: %d lines", len(got))
	}
	var last int64
	for i, want := range []int{1, 2, 3, 1, 2, 3, 1} { // lines after each of alice's runs
		add(1000, 1)
		add(1001, 2) // bob's runs do not count for alice
		got := log(h.alice, 3)
		if len(got) != want {
			t.Fatalf("after alice's run %d: %d lines, want %d", i+1, len(got), want)
		}
		if got[0].ID <= last {
			t.Fatalf("after alice's run %d: the newest line is run %d, not newer than %d", i+1, got[0].ID, last)
		}
		last = got[0].ID
		for _, r := range got {
			if r.OwnerUid != 1000 {
				t.Fatalf("alice's log shows a run of %d", r.OwnerUid)
			}
		}
	}
	if got := log(h.root, 3); len(got) != (7+14-1)%3+1 {
		t.Fatalf("root's log: %d lines of 21 runs, want %d", len(got), (7+14-1)%3+1)
	}
	for _, bad := range []int{-1, 10001} {
		if _, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.alice}, abi.SchedLog, &abi.SchedLogArgs{Rotate: bad}); abi.Code(err) != 400 {
			t.Errorf("rotate %d: %v, want 400", bad, err)
		}
	}
}
