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

// requestModel answers every call with "done" and hands each request
// to reqs.
type requestModel struct{ reqs chan model.Request }

func (m requestModel) Name() string { return "test" }

func (m requestModel) Complete(ctx context.Context, req model.Request, _ func(string)) (model.Response, error) {
	select {
	case m.reqs <- req:
	default:
	}
	return model.Response{Text: "done", StopReason: "end_turn"}, nil
}

// TestPkgProfileToolsModel: a package profile's tools and model are its
// processes' (proc.run.get shows them; the model call offers exactly
// those tools, with that model); a profile naming no agent tool fails
// its spawn with a clear 400.
func TestPkgProfileToolsModel(t *testing.T) {
	m := requestModel{reqs: make(chan model.Request, 4)}
	s := newSysWith(t, nil, m)
	files := releaseTools()
	files["gsv-package.json"] = strings.Replace(files["gsv-package.json"], `"budget": {"turns": 20}}`,
		`"budget": {"turns": 20}, "tools": ["Read", "Search"], "model": "small-model"},
    {"id": "bad-tools", "prompt": "x", "tools": ["Read", "Teleport"]}`, 1)
	s.commit(s.alice, "release-tools", "main", files)
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})
	sp := do(s, s.alice, abi.ProcSpawn, &abi.SpawnArgs{Profile: "release-manager", Prompt: "cut v1.2"})
	info := do(s, s.alice, abi.ProcRunGet, &abi.PidArgs{Pid: sp.Pid})
	if info.Model != "small-model" || strings.Join(info.Tools, ",") != "Read,Search" {
		t.Fatalf("run settings: model %q tools %v", info.Model, info.Tools)
	}
	var req model.Request
	select {
	case req = <-m.reqs:
	case <-time.After(liveness):
		t.Fatal("no model call")
	}
	var names []string
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	if req.Model != "small-model" || strings.Join(names, ",") != "Read,Search" {
		t.Fatalf("model call: model %q tools %v", req.Model, names)
	}
	fails(s, s.alice, abi.ProcSpawn, &abi.SpawnArgs{Profile: "bad-tools"}, abi.Invalid, `tools: "Teleport" is not an agent tool`)
	// A system profile keeps every tool and the owner's model.
	sp = do(s, s.alice, abi.ProcSpawn, &abi.SpawnArgs{Profile: "task"})
	if info := do(s, s.alice, abi.ProcRunGet, &abi.PidArgs{Pid: sp.Pid}); info.Model != "" || len(info.Tools) != 0 {
		t.Fatalf("task's run settings: %+v", info)
	}
}

// toolsModel calls Shell and a CodeMode block that calls shell, then
// hands the tool results to results.
type toolsModel struct{ results chan []model.Message }

func (m toolsModel) Name() string { return "test" }

func (m toolsModel) Complete(ctx context.Context, req model.Request, _ func(string)) (model.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role != model.Tool {
		return model.Response{StopReason: "tool_use", ToolCalls: []model.ToolCall{
			{ID: "c1", Name: "Shell", Args: []byte(`{"command":"echo hi"}`)},
			{ID: "c2", Name: "CodeMode", Args: []byte(`{"code":"return await shell(\"echo hi\")"}`)},
		}}, nil
	}
	var out []model.Message
	for _, msg := range req.Messages {
		if msg.Role == model.Tool {
			out = append(out, msg)
		}
	}
	m.results <- out
	return model.Response{Text: "done", StopReason: "end_turn"}, nil
}

// TestPkgProfileToolsBind: a process of a profile narrowed to Read and
// CodeMode is refused the Shell tool, directly and in a CodeMode block.
func TestPkgProfileToolsBind(t *testing.T) {
	m := toolsModel{results: make(chan []model.Message, 1)}
	s := newSysWith(t, nil, m)
	files := releaseTools()
	files["gsv-package.json"] = strings.Replace(files["gsv-package.json"], `"budget": {"turns": 20}}`,
		`"budget": {"turns": 20}, "tools": ["Read", "CodeMode"]}`, 1)
	s.commit(s.alice, "release-tools", "main", files)
	do(s, s.alice, abi.PkgAdd, &abi.PkgAddArgs{Repo: "release-tools"})
	do(s, s.alice, abi.PkgReviewApprove, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.PkgInstall, &abi.PkgIDArgs{PackageID: "release-tools"})
	do(s, s.alice, abi.ProcSpawn, &abi.SpawnArgs{Profile: "release-manager", Prompt: "run a shell"})
	var res []model.Message
	select {
	case res = <-m.results:
	case <-time.After(liveness):
		t.Fatal("no tool results")
	}
	want := map[string]string{"Shell": `unknown tool "Shell"`, "CodeMode": "the Shell tool is not one of this process's tools"}
	if len(res) != 2 {
		t.Fatalf("tool results: %+v", res)
	}
	for _, r := range res {
		if !strings.Contains(r.Content, want[r.ToolName]) {
			t.Errorf("%s: %q lacks %q", r.ToolName, r.Content, want[r.ToolName])
		}
	}
}
