package pkgs_test

import (
	"os"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/codemode"
	"gsvfs.dev/gsvfs/kernel"
)

// TestMain makes the test binary its own CodeMode worker.
func TestMain(m *testing.M) {
	if os.Getenv(codemode.WorkerEnv) == "1" {
		os.Exit(codemode.WorkerMain())
	}
	os.Exit(m.Run())
}

// TestPkgModules: an active package's CodeMode module is pkg.<name> in
// its owner's blocks (codemode.run), not in another user's; disabled, it
// is gone.
func TestPkgModules(t *testing.T) {
	s := newSysWith(t, nil, systemModel{prompts: make(chan string, 4)})
	files := releaseTools()
	files["gsv-package.json"] = `{"name": "release-tools", "modules": [{"name": "changelog", "path": "modules/changelog.js"}]}`
	files["modules/changelog.js"] = "exports.title = (v) => \"Release \" + v;\n"
	s.commit(s.alice, "release-tools", "main", files)
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	block := &abi.CodeModeRunArgs{Code: `return typeof pkg === "object" && typeof pkg.changelog === "object" ? pkg.changelog.title("1.2") : "none"`}
	result := func(c *kernel.Caller) string {
		t.Helper()
		res := do(s, c, abi.CodemodeRun, block)
		if res.Status != "completed" {
			t.Fatalf("block: %+v", res)
		}
		return string(res.Result)
	}
	if got := result(s.alice); got != `"none"` {
		t.Fatalf("before install: %s", got)
	}
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})
	if got := result(s.alice); got != `"Release 1.2"` {
		t.Fatalf("installed: %s", got)
	}
	if got := result(s.bob); got != `"none"` {
		t.Fatalf("bob: %s", got)
	}
	do(s, s.alice, abi.PkgRemove, &abi.PkgIDArgs{PackageID: "release-tools"})
	if got := result(s.alice); got != `"none"` {
		t.Fatalf("disabled: %s", got)
	}
}
