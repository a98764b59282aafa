package pkgs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/proc/model"
)

// systemModel answers every call with "done" and hands each system
// prompt to prompts.
type systemModel struct{ prompts chan string }

func (m systemModel) Name() string { return "test" }

func (m systemModel) Complete(ctx context.Context, req model.Request, _ func(string)) (model.Response, error) {
	select {
	case m.prompts <- req.System:
	default:
	}
	return model.Response{Text: "done", StopReason: "end_turn"}, nil
}

// TestPkgProfileSpawns: an active package's profile is listed by
// proc.profile.list and spawns a process whose instructions hold the
// profile's prompt, the package's context and its skill; disabled, the
// profile is unknown again.
func TestPkgProfileSpawns(t *testing.T) {
	m := systemModel{prompts: make(chan string, 4)}
	s := newSysWith(t, nil, m)
	s.commit(s.alice, "release-tools", "main", releaseTools())
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	fails(s, s.alice, abi.ProcSpawn, &abi.SpawnArgs{Profile: "release-manager"}, abi.Invalid, "unknown profile")
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})
	list := do(s, s.alice, abi.ProcProfileList, &abi.ProfileListArgs{})
	found := false
	for _, p := range list.Profiles {
		found = found || p.ID == "release-manager" && p.Kind == "package"
	}
	if !found {
		t.Fatalf("profiles: %+v", list.Profiles)
	}
	sp := do(s, s.alice, abi.ProcSpawn, &abi.SpawnArgs{Profile: "release-manager", Prompt: "cut v1.2"})
	if sp.Profile != "release-manager" {
		t.Fatalf("spawn: %+v", sp)
	}
	var sys string
	select {
	case sys = <-m.prompts:
	case <-time.After(liveness):
		t.Fatal("no model call")
	}
	for _, want := range []string{"You are the release manager", "Releases are cut on Mondays", "release-notes: Write release notes"} {
		if !strings.Contains(sys, want) {
			t.Errorf("instructions lack %q:\n%s", want, sys)
		}
	}
	// bob has no such profile.
	fails(s, s.bob, abi.ProcSpawn, &abi.SpawnArgs{Profile: "release-manager"}, abi.Invalid, "unknown profile")
	do(s, s.alice, abi.PkgRemove, &abi.PkgIDArgs{PackageID: "release-tools"})
	fails(s, s.alice, abi.ProcSpawn, &abi.SpawnArgs{Profile: "release-manager"}, abi.Invalid, "unknown profile")
}
