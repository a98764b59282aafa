package proc

// Where the seeds were contradicted (issue 21, section 3): the seed's own
// fields and answers, as the seed has them.

import (
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// TestSpawnSeedFields: proc.spawn and proc.send take the seed's fields.
// A workspace of mode new or attach is refused with a 501 saying where
// workspaces are planned (it was accepted and ignored); mounts and
// media are 501s too, never "unknown field"; none and inherit spawn; an
// assignment's context files are in the process's instructions and
// autoStart starts its run; a parent the caller cannot reach is a 404.
func TestSpawnSeedFields(t *testing.T) {
	h := newPTHarness(t)
	for _, tc := range []struct {
		name string
		args map[string]any
		code int
		text string
	}{
		{"new", map[string]any{"workspace": map[string]any{"mode": "new", "label": "w", "kind": "thread"}}, 501, "not supported yet: workspace mode new (workspaces come with repositories; see docs/processes.md"},
		{"attach", map[string]any{"workspace": map[string]any{"mode": "attach", "workspaceId": "ws_1"}}, 501, "not supported yet: workspace mode attach"},
		{"mounts", map[string]any{"mounts": []map[string]any{{"kind": "package-source", "packageId": "pkg_1"}}}, 501, "not supported yet: mounts (package mounts come with packages"},
		{"bad mode", map[string]any{"workspace": map[string]any{"mode": "shared"}}, 400, `workspace mode "shared"`},
		{"bad field", map[string]any{"workspace": map[string]any{"mode": "none", "bogus": 1}}, 400, "bogus"},
		{"two names", map[string]any{"assignment": map[string]any{"contextFiles": []map[string]any{{"name": "a", "text": "1"}, {"name": "a", "text": "2"}}}}, 400, "given twice"},
		{"bob's parent", map[string]any{"parentPid": "init:1001"}, 404, "no such process"},
	} {
		tc.args["profile"] = "task"
		err := h.call(h.alice, "proc.spawn", tc.args, nil)
		if abi.Code(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.text) || (tc.code == 501 && strings.Contains(err.Error(), "unknown field")) {
			t.Errorf("%s: %v (code %d), want %d with %q", tc.name, err, abi.Code(err), tc.code, tc.text)
		}
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_processes WHERE uid=1000 AND profile='task'`); n != 0 {
		t.Fatalf("refused spawns made %d processes", n)
	}
	for _, ws := range []any{"none", map[string]any{"mode": "none"}, map[string]any{"mode": "inherit"}} {
		h.must(h.alice, "proc.spawn", map[string]any{"profile": "task", "parentPid": "init:1000", "workspace": ws}, nil)
	}

	s := h.scriptOf(1000, `{"text":"on it"}`)
	var r abi.SpawnResult
	h.must(h.alice, "proc.spawn", map[string]any{"profile": "task", "parentPid": "init:1000", "assignment": map[string]any{
		"contextFiles": []map[string]any{{"name": "task.md", "text": "count the cache misses"}, {"name": "notes.md", "text": "the table is hits"}},
		"autoStart":    true}}, &r)
	h.waitIdle(r.Pid)
	reqs := s.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].System, "## task.md\ncount the cache misses") || !strings.Contains(reqs[0].System, "## notes.md\nthe table is hits") {
		t.Fatalf("autoStart: %d requests: %+v", len(reqs), reqs)
	}
	if ev := h.findEvent(r.Pid, abi.EventProcessEvent); ev == nil || !strings.Contains(string(ev.Content), "assignment") {
		t.Fatalf("the autoStart event: %+v", ev)
	}
	var st abi.StatusResult
	h.must(h.alice, "proc.status", map[string]any{"pid": r.Pid}, &st)
	if st.Status.Parent != "init:1000" {
		t.Fatalf("parent %q", st.Status.Parent)
	}

	err := h.call(h.alice, "proc.send", map[string]any{"pid": r.Pid, "message": "look", "media": []map[string]any{{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}}}, nil)
	if abi.Code(err) != 501 || !strings.Contains(err.Error(), "not supported yet: media (media come with multimodal models") {
		t.Fatalf("proc.send with media: %v", err)
	}
}
