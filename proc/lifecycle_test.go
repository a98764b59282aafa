package proc

// Tests of the process manager on an in-process kernel, with scripted
// model providers replaying proc/testdata/*.jsonl. They assert stored
// state: proc.history results, the proc_* rows and the archive files.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// Tests of the history lifecycle: compact, fork and reset.

type ptCompactRes struct {
	OK               bool        `json:"ok"`
	Segment          abi.Segment `json:"segment"`
	ArchivedMessages int         `json:"archivedMessages"`
	ArchivedTo       string      `json:"archivedTo"`
	SummaryMessageID int64       `json:"summaryMessageId"`
}

// segments lists the segments of pid/cid.
func (h *ptHarness) segments(id *kernel.Identity, pid, cid string) []abi.Segment {
	h.t.Helper()
	var r struct {
		Segments []abi.Segment `json:"segments"`
	}
	h.must(id, "proc.conversation.segments", map[string]any{"pid": pid, "conversationId": cid}, &r)
	return r.Segments
}

// checkCompacted checks a compaction of before that archived n messages
// with summary text: the live history, the segment record, the archive
// file, segment.read paging and the segment files of the tree.
func (h *ptHarness) checkCompacted(t *testing.T, pid, cid string, before []abi.Message, n int, res ptCompactRes, summary string) {
	t.Helper()
	if !res.OK || res.ArchivedMessages != n {
		t.Fatalf("compact: %+v, want %d archived", res, n)
	}
	boundary, first := before[n-1].ID, before[0].ID
	if res.SummaryMessageID != first {
		t.Fatalf("summary id %d, want %d (the first archived id)", res.SummaryMessageID, first)
	}
	live := h.history(h.alice, pid, cid).Messages
	if len(live) != len(before)-n+1 {
		t.Fatalf("%d live messages, want %d", len(live), len(before)-n+1)
	}
	systems := 0
	for _, m := range live {
		if m.Role == "system" {
			systems++
		}
	}
	if systems != 1 || live[0].Role != "system" || live[0].ID != first {
		t.Fatalf("live history does not start with the one summary: %s", ptDump(live))
	}
	txt := ptText(t, live[0])
	if !strings.HasPrefix(txt, fmt.Sprintf("[Process Event]: Compacted %d messages", n)) || !strings.Contains(txt, summary) || !strings.Contains(txt, res.Segment.ID) {
		t.Fatalf("summary message %q", txt)
	}
	ptSameMessages(t, "live suffix", live[1:], before[n:])

	seg := res.Segment
	if seg.Kind != "compaction" || seg.ConversationID != cid || seg.Messages != int64(n) || seg.FromMessageID != before[0].ID ||
		seg.ToMessageID != boundary || seg.SummaryMessageID == nil || *seg.SummaryMessageID != first || seg.ArchivePath != res.ArchivedTo {
		t.Fatalf("segment %+v", seg)
	}
	if segs := h.segments(h.alice, pid, cid); len(segs) == 0 || segs[len(segs)-1].ID != seg.ID {
		t.Fatalf("segments %+v", segs)
	}
	want := "/var/sessions/alice/" + pid + "/" + cid + "/" + seg.ID + ".jsonl.gz"
	if seg.ArchivePath != want {
		t.Fatalf("archive path %s, want %s", seg.ArchivePath, want)
	}
	ptSameMessages(t, "archive file", ptGunzip(t, h.realPath(seg.ArchivePath)), before[:n])

	// segment.read pages the archive and restores nothing.
	var paged []abi.Message
	for off := 0; ; off += 3 {
		var r struct {
			Messages     []abi.Message `json:"messages"`
			MessageCount int           `json:"messageCount"`
			Truncated    bool          `json:"truncated"`
		}
		h.must(h.alice, "proc.conversation.segment.read", map[string]any{"pid": pid, "conversationId": cid, "segmentId": seg.ID, "offset": off, "limit": 3}, &r)
		if r.MessageCount != n || r.Truncated != (off+3 < n) {
			t.Fatalf("segment.read offset %d: count %d truncated %v (n %d)", off, r.MessageCount, r.Truncated, n)
		}
		paged = append(paged, r.Messages...)
		if !r.Truncated {
			break
		}
	}
	ptSameMessages(t, "segment.read pages", paged, before[:n])
	ptSameMessages(t, "live history after segment.read", h.history(h.alice, pid, cid).Messages, live)

	// The tree: segments/<id>/meta and messages.
	dir := "/proc/" + pid + "/conversations/" + cid + "/segments/" + seg.ID
	meta, err := h.readFile(h.alice, dir+"/meta")
	if err != nil {
		t.Fatal(err)
	}
	var sm abi.Segment
	if err := json.Unmarshal([]byte(meta), &sm); err != nil || sm.ID != seg.ID || sm.Messages != int64(n) {
		t.Fatalf("meta %q (%v)", meta, err)
	}
	msgs, err := h.readFile(h.alice, dir+"/messages")
	if err != nil {
		t.Fatal(err)
	}
	var fromFile []abi.Message
	for _, line := range strings.Split(strings.TrimSpace(msgs), "\n") {
		var m abi.Message
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("messages line %q: %v", line, err)
		}
		fromFile = append(fromFile, m)
	}
	ptSameMessages(t, "segments/<id>/messages", fromFile, before[:n])
}

// 6. Compaction.
func TestCompact(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "compact")
	texts := []string{"m1", "m2", "m3", "m4", "m5"}

	t.Run("arithmetic", func(t *testing.T) {
		intp := func(n int) *int { return &n }
		const n = 8 // messages: 4 sends and their replies
		cases := []struct {
			name    string
			keep    *int
			through int // index of the through message, when keep is nil
			want    int // archived
		}{
			{"keep=3", intp(3), 0, 5},
			{"keep=2", intp(2), 0, 6},
			{"keep=0", intp(0), 0, 8},
			{"keep=7", intp(7), 0, 1},
			{"through=4th", nil, 3, 4},
			{"through=last", nil, 7, 8},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h.setScript(1000, "")
				cid := fmt.Sprintf("arith-%d", i)
				h.openConv(h.alice, pid, cid)
				h.chat(h.alice, pid, cid, texts[:n/2]...)
				before := h.history(h.alice, pid, cid).Messages
				if len(before) != n {
					t.Fatalf("%d messages", len(before))
				}
				args := map[string]any{"pid": pid, "conversationId": cid, "summary": "summary of " + c.name}
				if c.keep != nil {
					args["keepLast"] = *c.keep
				} else {
					args["throughMessageId"] = before[c.through].ID
				}
				var res ptCompactRes
				h.must(h.alice, "proc.conversation.compact", args, &res)
				h.checkCompacted(t, pid, cid, before, c.want, res, "summary of "+c.name)
			})
		}
	})

	t.Run("ctl", func(t *testing.T) {
		h.setScript(1000, "")
		cid := "viactl"
		h.openConv(h.alice, pid, cid)
		h.chat(h.alice, pid, cid, texts[:3]...)
		before := h.history(h.alice, pid, cid).Messages
		ctl := "/proc/" + pid + "/conversations/" + cid + "/ctl"
		if err := h.writeFile(h.alice, ctl, "compact keep=2 summary='all done'\n"); err != nil {
			t.Fatal(err)
		}
		segs := h.segments(h.alice, pid, cid)
		if len(segs) != 1 {
			t.Fatalf("segments %+v", segs)
		}
		h.checkCompacted(t, pid, cid, before, 4, ptCompactRes{OK: true, Segment: segs[0], ArchivedMessages: 4, ArchivedTo: segs[0].ArchivePath, SummaryMessageID: segs[0].FromMessageID}, "all done")
		for _, line := range []string{"compact", "compact keep=2", "compact keep=x summary=s", "compact keep=2 summary=s generate", "compact keep=1 through=3 summary=s"} {
			err := h.writeFile(h.alice, ctl, line+"\n")
			if vfs.Errno(err) != 22 { // EINVAL
				t.Errorf("%q: %v (errno %d), want EINVAL", line, err, vfs.Errno(err))
			}
		}
	})

	t.Run("tool-call boundary", func(t *testing.T) {
		h.must(h.alice, "fs.write", map[string]any{"path": "~/a.txt", "content": "A\n"}, nil)
		h.must(h.alice, "fs.write", map[string]any{"path": "~/b.txt", "content": "B\n"}, nil)
		// u, a(2 calls), tr, tr, a, u, a
		cases := []struct {
			keep, through, want int // through: an index of before, or -1
		}{
			{4, -1, 1}, // would split the second result from its call: back to before the call
			{5, -1, 1}, // would split the two results: likewise
			{6, -1, 1}, // just before the call: not moved
			{3, -1, 4}, // after the group: not moved
			{0, 1, 4},  // through the call: through its results too
			{0, 2, 1},  // through the first result: back to before the call
			{0, 3, 4},  // through the last result: the group
		}
		for _, c := range cases {
			name := fmt.Sprintf("keep=%d", c.keep)
			if c.through >= 0 {
				name = fmt.Sprintf("through=%d", c.through)
			}
			t.Run(name, func(t *testing.T) {
				h.setScript(1000, "tool_boundary.jsonl")
				cid := "tools-" + strings.ReplaceAll(name, "=", "-")
				h.openConv(h.alice, pid, cid)
				h.chat(h.alice, pid, cid, "read both", "thanks")
				before := h.history(h.alice, pid, cid).Messages
				if got := ptRoles(before); got != "user,assistant,toolResult,toolResult,assistant,user,assistant" {
					t.Fatalf("roles %s", got)
				}
				args := map[string]any{"pid": pid, "conversationId": cid, "keepLast": c.keep, "summary": "s"}
				if c.through >= 0 {
					args = map[string]any{"pid": pid, "conversationId": cid, "throughMessageId": before[c.through].ID, "summary": "s"}
				}
				var res ptCompactRes
				h.must(h.alice, "proc.conversation.compact", args, &res)
				h.checkCompacted(t, pid, cid, before, c.want, res, "s")
				live := h.history(h.alice, pid, cid).Messages
				// No tool result is live without its call, and no call
				// without its results.
				calls := map[string]bool{}
				for _, m := range live {
					switch m.Role {
					case "assistant":
						for _, tc := range ptAssistant(t, m).ToolCalls {
							calls[tc.ID] = true
						}
					case "toolResult":
						if !calls[ptTool(t, m).ToolCallID] {
							t.Fatalf("a live tool result lost its call: %s", ptDump(live))
						}
						delete(calls, ptTool(t, m).ToolCallID)
					}
				}
				if len(calls) != 0 {
					t.Fatalf("live calls without results %v", calls)
				}
			})
		}
	})

	t.Run("generate", func(t *testing.T) {
		h.setScript(1000, "")
		cid := "gen"
		h.openConv(h.alice, pid, cid)
		h.chat(h.alice, pid, cid, texts[:3]...)
		before := h.history(h.alice, pid, cid).Messages
		s := h.setScript(1000, "summary.jsonl")
		var res ptCompactRes
		h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": cid, "keepLast": 2, "generateSummary": true}, &res)
		h.checkCompacted(t, pid, cid, before, 4, res, "The user said m1..m3; the model answered each.")
		reqs := s.Requests()
		if len(reqs) != 1 || !strings.Contains(reqs[0].System, "Summarize") || !strings.Contains(reqs[0].Messages[0].Content, "m1") || strings.Contains(reqs[0].Messages[0].Content, "m3") {
			t.Fatalf("summary request %+v", reqs)
		}
	})

	t.Run("bad args", func(t *testing.T) {
		h.setScript(1000, "")
		cid := "bad"
		h.openConv(h.alice, pid, cid)
		h.chat(h.alice, pid, cid, texts[:2]...)
		before := h.history(h.alice, pid, cid).Messages
		base := func(kv ...any) map[string]any {
			a := map[string]any{"pid": pid, "conversationId": cid}
			for i := 0; i < len(kv); i += 2 {
				a[kv[i].(string)] = kv[i+1]
			}
			return a
		}
		cases := []struct {
			name string
			args map[string]any
			code int
		}{
			{"no selector", base("summary", "s"), 400},
			{"two selectors", base("summary", "s", "keepLast", 1, "throughMessageId", before[0].ID), 400},
			{"no summary", base("keepLast", 1), 400},
			{"empty summary", base("keepLast", 1, "summary", ""), 400},
			{"summary and generate", base("keepLast", 1, "summary", "s", "generateSummary", true), 400},
			{"negative keep", base("keepLast", -1, "summary", "s"), 400},
			{"nothing to compact", base("keepLast", 4, "summary", "s"), 400},
			{"missing through", base("throughMessageId", 999999, "summary", "s"), 404},
			{"unknown conversation", map[string]any{"pid": pid, "conversationId": "nope", "keepLast": 1, "summary": "s"}, 404},
		}
		for _, c := range cases {
			if got := h.code(h.alice, "proc.conversation.compact", c.args); got != c.code {
				t.Errorf("%s: code %d, want %d", c.name, got, c.code)
			}
		}
		ptSameMessages(t, "history after refused compactions", h.history(h.alice, pid, cid).Messages, before)
		if segs := h.segments(h.alice, pid, cid); len(segs) != 0 {
			t.Fatalf("segments %+v", segs)
		}
	})

	t.Run("busy", func(t *testing.T) {
		h.setScript(1000, "")
		h.openConv(h.alice, pid, "idle")
		h.chat(h.alice, pid, "idle", texts[:2]...)
		h.setScript(1000, "slow.jsonl")
		h.openConv(h.alice, pid, "busy")
		r := h.send(h.alice, pid, "busy", "take your time")
		if c := h.code(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": "busy", "keepLast": 0, "summary": "s"}); c != 409 {
			t.Fatalf("compact during a run: code %d", c)
		}
		// Another conversation of the process may be compacted.
		h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": "idle", "keepLast": 1, "summary": "s"}, nil)
		h.must(h.alice, "proc.abort", map[string]any{"pid": pid}, nil)
		if st := h.runStatus(r.RunID); st != "aborted" {
			t.Fatalf("run %s", st)
		}
	})
}

// 7. Fork.
func TestFork(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "fork")
	h.chat(h.alice, pid, "default", "m1", "m2", "m3") // 6 messages
	before := h.history(h.alice, pid, "default").Messages

	type forkRes struct {
		OK                 bool             `json:"ok"`
		TargetConversation abi.Conversation `json:"targetConversation"`
		RestoredMessages   int              `json:"restoredMessages"`
		IncludedLiveSuffix bool             `json:"includedLiveSuffix"`
	}
	// stripped is ms without ids (a fork gets new ones).
	stripped := func(ms []abi.Message) []abi.Message {
		out := make([]abi.Message, len(ms))
		for i, m := range ms {
			out[i] = abi.Message{Role: m.Role, Content: m.Content, Timestamp: m.Timestamp}
		}
		return out
	}

	var fr forkRes
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": before[2].ID, "targetConversationId": "branch", "title": "Branch"}, &fr)
	if fr.RestoredMessages != 3 || fr.TargetConversation.ID != "branch" || fr.TargetConversation.MessageCount != 3 || *fr.TargetConversation.Title != "Branch" {
		t.Fatalf("fork through: %+v", fr)
	}
	ptSameMessages(t, "branch", stripped(h.history(h.alice, pid, "branch").Messages), stripped(before[:3]))
	ptSameMessages(t, "source after fork", h.history(h.alice, pid, "default").Messages, before)
	// The branch is a live conversation.
	h.chat(h.alice, pid, "branch", "branch message")
	if n := h.history(h.alice, pid, "branch").MessageCount; n != 5 {
		t.Fatalf("branch has %d messages", n)
	}

	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": 999999, "targetConversationId": "x"}); c != 404 {
		t.Fatalf("fork through a missing id: code %d", c)
	}
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "targetConversationId": "x"}); c != 400 {
		t.Fatalf("fork without a selector: code %d", c)
	}
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "segmentId": "seg_nope", "targetConversationId": "x"}); c != 404 {
		t.Fatalf("fork from a missing segment: code %d", c)
	}

	// Compact, then restore the segment with and without the live suffix.
	var cr ptCompactRes
	h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "keepLast": 2, "summary": "s"}, &cr)
	h.chat(h.alice, pid, "default", "m4") // after the compaction: not part of the suffix
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "segmentId": cr.Segment.ID, "targetConversationId": "replay"}, &fr)
	if fr.RestoredMessages != 6 || !fr.IncludedLiveSuffix {
		t.Fatalf("fork segment: %+v", fr)
	}
	ptSameMessages(t, "replay (segment + live suffix)", stripped(h.history(h.alice, pid, "replay").Messages), stripped(before))
	h.must(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "segmentId": cr.Segment.ID, "targetConversationId": "replay2", "includeLiveSuffix": false}, &fr)
	if fr.RestoredMessages != 4 || fr.IncludedLiveSuffix {
		t.Fatalf("fork segment nosuffix: %+v", fr)
	}
	ptSameMessages(t, "replay2 (segment only)", stripped(h.history(h.alice, pid, "replay2").Messages), stripped(before[:4]))
	// Through the ctl file, with nosuffix.
	ctl := "/proc/" + pid + "/conversations/default/ctl"
	if err := h.writeFile(h.alice, ctl, "fork segment="+cr.Segment.ID+" as=replay3 nosuffix\n"); err != nil {
		t.Fatal(err)
	}
	ptSameMessages(t, "replay3", stripped(h.history(h.alice, pid, "replay3").Messages), stripped(before[:4]))

	// Into an existing conversation.
	live := h.history(h.alice, pid, "default").Messages
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "throughMessageId": live[1].ID, "targetConversationId": "replay"}); c != 409 {
		t.Fatalf("fork into an existing id: code %d", c)
	}
	if err := h.writeFile(h.alice, ctl, "fork segment="+cr.Segment.ID+" as=replay\n"); vfs.Errno(err) != 16 { // EBUSY
		t.Fatalf("fork into an existing id through ctl: %v", err)
	}
	if n := h.history(h.alice, pid, "replay").MessageCount; n != 6 {
		t.Fatalf("the existing conversation changed: %d messages", n)
	}
	// A segment of another conversation is not found from this one.
	if c := h.code(h.alice, "proc.conversation.fork", map[string]any{"pid": pid, "conversationId": "branch", "segmentId": cr.Segment.ID, "targetConversationId": "y"}); c != 404 {
		t.Fatalf("fork of another conversation's segment: code %d", c)
	}
}

// archiveDirs lists the archive directories of pid (not the compaction
// directories, which are named by conversation).
func (h *ptHarness) archiveDirs(user, pid string) []string {
	h.t.Helper()
	ents, err := os.ReadDir(h.realPath(path.Join("/var/sessions", user, pid)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasSuffix(strings.SplitN(e.Name(), "-", 2)[0], "Z") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// 8. Reset of a conversation and of a process; kill.
func TestReset(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "reset")
	h.openConv(h.alice, pid, "other")
	h.openConv(h.alice, pid, "empty")
	h.chat(h.alice, pid, "default", "d1", "d2")
	h.chat(h.alice, pid, "other", "o1")
	def := h.history(h.alice, pid, "default").Messages
	other := h.history(h.alice, pid, "other").Messages

	type resetRes struct {
		OK               bool   `json:"ok"`
		Generation       int64  `json:"generation"`
		ArchivedMessages int    `json:"archivedMessages"`
		ArchivedTo       string `json:"archivedTo"`
	}
	var rr resetRes
	h.must(h.alice, "proc.conversation.reset", map[string]any{"pid": pid}, &rr)
	if !rr.OK || rr.Generation != 2 || rr.ArchivedMessages != 4 {
		t.Fatalf("reset: %+v", rr)
	}
	dirs := h.archiveDirs("alice", pid)
	if len(dirs) != 1 || rr.ArchivedTo != "/var/sessions/alice/"+pid+"/"+dirs[0] {
		t.Fatalf("archive dirs %v, archivedTo %s", dirs, rr.ArchivedTo)
	}
	if names := dirNames(t, h.realPath(rr.ArchivedTo)); !slices.Equal(names, []string{"default.gen-1.jsonl.gz"}) {
		t.Fatalf("archive dir holds %v", names)
	}
	ptSameMessages(t, "reset archive", ptGunzip(t, h.realPath(rr.ArchivedTo+"/default.gen-1.jsonl.gz")), def)
	var conv struct {
		Conversation abi.Conversation `json:"conversation"`
	}
	h.must(h.alice, "proc.conversation.get", map[string]any{"pid": pid}, &conv)
	if conv.Conversation.Generation != 2 || conv.Conversation.MessageCount != 0 || conv.Conversation.Status != "open" {
		t.Fatalf("after reset: %+v", conv.Conversation)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=? AND cid='default'`, pid); n != 0 {
		t.Fatalf("%d stored messages left in the reset conversation", n)
	}
	ptSameMessages(t, "other conversation", h.history(h.alice, pid, "other").Messages, other)
	// The generation's new messages are its own.
	h.chat(h.alice, pid, "default", "d3")
	def2 := h.history(h.alice, pid, "default").Messages
	if len(def2) != 2 || ptText(t, def2[0]) != "d3" {
		t.Fatalf("new generation: %s", ptDump(def2))
	}

	// Reset without archive writes nothing.
	h.openConv(h.alice, pid, "scratch")
	h.chat(h.alice, pid, "scratch", "s1")
	if err := h.writeFile(h.alice, "/proc/"+pid+"/conversations/scratch/ctl", "reset noarchive\n"); err != nil {
		t.Fatal(err)
	}
	if got := h.archiveDirs("alice", pid); len(got) != 1 {
		t.Fatalf("reset noarchive made an archive: %v", got)
	}
	if n := h.history(h.alice, pid, "scratch").MessageCount; n != 0 {
		t.Fatalf("scratch has %d messages", n)
	}

	// Process reset: one archive dir, one file per non-empty conversation.
	type killRes struct {
		OK               bool               `json:"ok"`
		ArchivedMessages int                `json:"archivedMessages"`
		ArchivedTo       string             `json:"archivedTo"`
		Archives         []abi.ArchiveEntry `json:"archives"`
	}
	var kr killRes
	h.must(h.alice, "proc.reset", map[string]any{"pid": pid}, &kr)
	if !kr.OK || kr.ArchivedMessages != len(def2)+len(other) || len(kr.Archives) != 2 {
		t.Fatalf("proc.reset: %+v", kr)
	}
	if names := dirNames(t, h.realPath(kr.ArchivedTo)); !slices.Equal(names, []string{"default.gen-2.jsonl.gz", "other.gen-1.jsonl.gz"}) {
		t.Fatalf("process archive holds %v", names)
	}
	ptSameMessages(t, "process reset: default", ptGunzip(t, h.realPath(kr.ArchivedTo+"/default.gen-2.jsonl.gz")), def2)
	ptSameMessages(t, "process reset: other", ptGunzip(t, h.realPath(kr.ArchivedTo+"/other.gen-1.jsonl.gz")), other)
	for _, e := range kr.Archives {
		if e.Path != kr.ArchivedTo+"/"+e.ConversationID+fmt.Sprintf(".gen-%d.jsonl.gz", e.Generation) {
			t.Fatalf("archive entry %+v", e)
		}
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=?`, pid); n != 0 {
		t.Fatalf("%d messages left after proc.reset", n)
	}
	if len(h.archiveDirs("alice", pid)) != 2 {
		t.Fatalf("archive dirs %v", h.archiveDirs("alice", pid))
	}

	// Kill archives like reset; kill noarchive writes nothing.
	h.chat(h.alice, pid, "other", "o2")
	oth := h.history(h.alice, pid, "other").Messages
	h.must(h.alice, "proc.kill", map[string]any{"pid": pid}, &kr)
	if kr.ArchivedMessages != 2 || len(kr.Archives) != 1 || kr.Archives[0].ConversationID != "other" || kr.Archives[0].Generation != 2 {
		t.Fatalf("kill: %+v", kr)
	}
	ptSameMessages(t, "kill archive", ptGunzip(t, h.realPath(kr.Archives[0].Path)), oth)
	nDirs := len(h.archiveDirs("alice", pid))
	h.chat(h.alice, pid, "other", "o3")
	if err := h.writeFile(h.alice, "/proc/"+pid+"/ctl", "kill noarchive\n"); err != nil {
		t.Fatal(err)
	}
	if got := h.archiveDirs("alice", pid); len(got) != nDirs {
		t.Fatalf("kill noarchive made an archive: %v", got)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE pid=?`, pid); n != 0 {
		t.Fatalf("%d messages left after kill", n)
	}
	// The process itself remains (kill does not remove the registry entry).
	var st struct {
		Processes []abi.Process `json:"processes"`
	}
	h.must(h.alice, "proc.list", map[string]any{}, &st)
	found := false
	for _, p := range st.Processes {
		found = found || p.Pid == pid
	}
	if !found {
		t.Fatal("the killed process is gone from proc.list")
	}
}

// 9. A process is its owner's (and root's) only.
