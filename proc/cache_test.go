package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// addMessages appends n messages of every role and various sizes to
// pid/cid's current generation, in one transaction as a burst of runs
// would.
func (h *ptHarness) addMessages(pid, cid string, n int) {
	h.t.Helper()
	ctx := context.Background()
	err := h.k.Store.Tx(ctx, func(tx *kernel.Tx) error {
		var gen int64
		if err := tx.QueryRow(`SELECT generation FROM proc_conversations WHERE pid=? AND cid=?`, pid, cid).Scan(&gen); err != nil {
			return err
		}
		for i := range n {
			var role, content string
			switch i % 6 {
			case 0:
				role, content = "user", string(jsonString(fmt.Sprintf("question %d: ünïcode \"quoted\"\nsecond line", i)))
			case 1:
				b, _ := json.Marshal(assistantContent{Text: fmt.Sprintf("answer %d", i)})
				role, content = "assistant", string(b)
			case 2:
				b, _ := json.Marshal(map[string]any{"text": "", "toolCalls": []map[string]any{{"id": fmt.Sprintf("call_%d", i), "name": "Read", "args": map[string]string{"path": "/x"}}}})
				role, content = "assistant", string(b)
			case 3:
				b, _ := json.Marshal(toolResultContent{ToolCallID: fmt.Sprintf("call_%d", i-1), ToolName: "Read", Output: strings.Repeat("out ", 600+i%7), IsError: i%12 == 3})
				role, content = "toolResult", string(b)
			case 4:
				role, content = "system", string(jsonString(EventPrefix+"tick"))
			default:
				role, content = "user", string(jsonString(strings.Repeat("long ", 100+i%50)))
			}
			if _, err := tx.Exec(`INSERT INTO proc_messages(pid,cid,generation,role,content,created_at) VALUES(?,?,?,?,?,?)`, pid, cid, gen, role, content, 1700000000000+int64(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// oldRendering is what the history files served before the cache: the
// proc.history pages (renderHistory), rendered message by message.
func (h *ptHarness) oldRendering(pid, cid, kind string) string {
	h.t.Helper()
	ctx := context.Background()
	conv, err := h.m.conv(ctx, pid, cid)
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := h.m.run.renderHistory(ctx, &kernel.Caller{Identity: h.alice}, pid, cid, conv.Generation, renderKinds[kind])
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// checkRenderings reads pid/cid's history and transcript files through the
// tree, as alice, and compares them with the old rendering.
func (h *ptHarness) checkRenderings(what, pid, cid string) {
	h.t.Helper()
	for _, kind := range []string{"history", "transcript"} {
		got, err := h.readFile(h.alice, fmt.Sprintf("/proc/%s/conversations/%s/%s", pid, cid, kind))
		if err != nil {
			h.t.Fatalf("%s: %s: %v", what, kind, err)
		}
		if want := h.oldRendering(pid, cid, kind); got != want {
			h.t.Fatalf("%s: %s of %s/%s: %d bytes, want %d\n got: %.300q\nwant: %.300q", what, kind, pid, cid, len(got), len(want), got, want)
		}
	}
}

// cacheFile is the cache's file for a rendering (the entry's path).
func (h *ptHarness) cacheFile(pid, cid, kind string) string {
	h.m.cache.mu.Lock()
	e := h.m.cache.entries[renderKey{pid, cid, kind}]
	h.m.cache.mu.Unlock()
	if e == nil {
		return ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.path
}

func TestRenderCache(t *testing.T) {
	h := newPTHarness(t)
	ctx := context.Background()
	pid := h.spawn(h.alice, "cache")
	h.checkRenderings("empty", pid, "default")
	h.addMessages(pid, "default", 2500) // more than a page
	h.checkRenderings("first render", pid, "default")
	path := h.cacheFile(pid, "default", "history")
	if !strings.HasPrefix(path, filepath.Join(h.dir, "cache", "proc")+"/") {
		t.Fatalf("cache file %q is not under STATE/cache/proc", path)
	}

	// Appends extend the same file; a reader that is open sees the new
	// whole lines when it reads on.
	hist := fmt.Sprintf("/proc/%s/conversations/default/history", pid)
	open := func() *os.File {
		f, err := h.m.cache.open(ctx, pid, "default", "history")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	held := open()
	defer held.Close()
	before, _ := io.ReadAll(held)
	for i := range 3 {
		h.addMessages(pid, "default", 7+i)
		h.checkRenderings(fmt.Sprintf("append %d", i), pid, "default")
		if p := h.cacheFile(pid, "default", "history"); p != path {
			t.Fatalf("append %d: a new file %s (was %s)", i, p, path)
		}
	}
	more, _ := io.ReadAll(held)
	if want := h.oldRendering(pid, "default", "history"); string(before)+string(more) != want {
		t.Fatalf("the open reader read %d+%d bytes, want %d", len(before), len(more), len(want))
	}

	// A compaction rewrites the history: a new file for new opens; the
	// old one is unlinked, and a reader that has it keeps it.
	old := open()
	defer old.Close()
	oldBytes, _ := io.ReadAll(old)
	h.must(h.alice, "proc.conversation.compact", map[string]any{"pid": pid, "conversationId": "default", "keepLast": 100, "summary": "the story so far"}, nil)
	h.checkRenderings("after compaction", pid, "default")
	np := h.cacheFile(pid, "default", "history")
	if np == path {
		t.Fatal("compaction: still the old file")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the old file is still there: %v", err)
	}
	if b, _ := old.ReadAt(make([]byte, 1), 0); b != 1 {
		t.Error("the old file cannot be read")
	}
	if got, _ := io.ReadAll(io.NewSectionReader(old, 0, 1<<40)); !bytes.Equal(got, oldBytes) {
		t.Errorf("the old reader's file changed: %d bytes, had %d", len(got), len(oldBytes))
	}
	if got, _ := h.readFile(h.alice, hist); !strings.Contains(got, "the story so far") || strings.Count(got, "\n") != 101 {
		t.Errorf("history after compaction: %d lines", strings.Count(got, "\n"))
	}
	h.addMessages(pid, "default", 30)
	h.checkRenderings("append after compaction", pid, "default")

	// A second conversation, interleaved.
	h.openConv(h.alice, pid, "other")
	for i := range 3 {
		h.addMessages(pid, "other", 50+i)
		h.addMessages(pid, "default", 5)
		h.checkRenderings(fmt.Sprintf("other %d", i), pid, "other")
		h.checkRenderings(fmt.Sprintf("default %d", i), pid, "default")
	}

	// A reset: a new generation, a new (empty) file.
	path = h.cacheFile(pid, "other", "transcript")
	h.must(h.alice, "proc.conversation.reset", map[string]any{"pid": pid, "conversationId": "other"}, nil)
	h.checkRenderings("after reset", pid, "other")
	if got, _ := h.readFile(h.alice, fmt.Sprintf("/proc/%s/conversations/other/history", pid)); got != "" {
		t.Errorf("history after reset: %d bytes", len(got))
	}
	if h.cacheFile(pid, "other", "transcript") == path {
		t.Error("reset: still the old transcript file")
	}
	h.addMessages(pid, "other", 12)
	h.checkRenderings("append after reset", pid, "other")
	h.checkRenderings("default after reset of other", pid, "default")

	// Only the owner (and root) may open a rendering.
	if _, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.bob}, abi.ProcHistoryOpen, &abi.HistoryOpenArgs{Pid: pid, Kind: "history"}); abi.Code(err) != 404 {
		t.Errorf("bob opening alice's history: %v, want 404", err)
	}
	if f, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.root}, abi.ProcHistoryOpen, &abi.HistoryOpenArgs{Pid: pid, Kind: "transcript"}); err != nil {
		t.Errorf("root opening alice's transcript: %v", err)
	} else {
		f.Close()
	}
	if _, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.alice}, abi.ProcHistoryOpen, &abi.HistoryOpenArgs{Pid: pid, Kind: "raw"}); abi.Code(err) != 400 {
		t.Errorf("an unknown kind: %v, want 400", err)
	}
	if _, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.alice}, abi.ProcHistoryOpen, &abi.HistoryOpenArgs{Pid: pid, ConversationID: "nonesuch", Kind: "history"}); abi.Code(err) != 404 {
		t.Errorf("a missing conversation: %v, want 404", err)
	}
	if code := h.code(h.alice, "proc.history.open", map[string]any{"Pid": pid, "Kind": "history"}); code != 400 {
		t.Errorf("proc.history.open from a request frame: code %d, want 400", code)
	}

	// A restart starts with an empty cache, rebuilt at the next opens.
	h.close()
	h.open()
	h.identities()
	if ents, err := os.ReadDir(filepath.Join(h.dir, "cache", "proc")); err != nil || len(ents) != 0 {
		t.Fatalf("cache after restart: %d files (%v)", len(ents), err)
	}
	h.checkRenderings("default after restart", pid, "default")
	h.checkRenderings("other after restart", pid, "other")
	h.addMessages(pid, "default", 3)
	h.checkRenderings("append after restart", pid, "default")
}

// TestRenderCacheCancel: an open cancelled during the rendering keeps
// the whole pages it wrote (the file is cut back to them), and the next
// open completes it.
func TestRenderCacheCancel(t *testing.T) {
	h := newPTHarness(t)
	pid := h.spawn(h.alice, "cancel")
	h.addMessages(pid, "default", 50)
	h.checkRenderings("before", pid, "default")
	h.addMessages(pid, "default", 20000)
	want := h.oldRendering(pid, "default", "history")
	e := h.m.cache.entries[renderKey{pid, "default", "history"}]
	cut := false
	for d := 100 * time.Microsecond; ; d *= 2 {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		f, err := h.m.cache.open(ctx, pid, "default", "history")
		cancel()
		if err == nil {
			f.Close()
			break
		}
		e.mu.Lock()
		size, last := e.size, e.last
		e.mu.Unlock()
		got, rerr := os.ReadFile(e.path)
		if rerr != nil || int64(len(got)) != size || !strings.HasPrefix(want, string(got)) {
			t.Fatalf("after a cancelled open (%v): file of %d bytes (entry: %d bytes through id %d), not a prefix of the rendering (%v)", err, len(got), size, last, rerr)
		}
		cut = cut || size > 0 && int(size) < len(want)
	}
	if !cut {
		t.Log("no open was cancelled in the middle of the rendering")
	}
	h.checkRenderings("after the cancelled opens", pid, "default")
}
