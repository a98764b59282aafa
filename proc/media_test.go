package proc

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// testPNG is a real 2x2 PNG.
func testPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// errnoOf is the errno a transport answers for err.
func errnoOf(err error) syscall.Errno {
	var e *abi.Error
	if errors.As(err, &e) {
		return e.Errno()
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// lastAssistant is the text of the last assistant message of pid's
// default conversation.
func (h *ptHarness) lastAssistant(pid string) string {
	h.t.Helper()
	ms := h.history(h.alice, pid, "default").Messages
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == "assistant" {
			return ptAssistant(h.t, ms[i]).Text
		}
	}
	h.t.Fatalf("no assistant message: %s", ptDump(ms))
	return ""
}

// TestSendMedia: proc.send's media are kept in the owner's media store
// (/var/media/<user>/<sha256>.<ext>, the owner's and root's to read,
// EACCES to another user), the message refers to them (no bytes in the
// conversation), and the model gets the image and a placeholder for the
// voice note.
func TestSendMedia(t *testing.T) {
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[1000] = model.Offline{}
	h.mu.Unlock()
	pic := testPNG(t)
	b64 := base64.StdEncoding.EncodeToString(pic)
	var r ptSend
	h.must(h.alice, "proc.send", map[string]any{"pid": init0(1000), "message": "look", "media": []abi.MediaInput{
		{Type: "image", MimeType: "image/png", Data: b64, Filename: "cat.png"},
		{Type: "audio", MimeType: "audio/ogg", Data: "T2dnUw==", Filename: "v.ogg", Duration: 2, Transcription: "meow"},
	}}, &r)
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	if got := h.lastAssistant(init0(1000)); !strings.Contains(got, "[offline model: I saw 1 image(s): image/png]") ||
		!strings.Contains(got, `[audio: v.ogg (audio/ogg, 2 s, 4 bytes) at /var/media/alice/`) || !strings.Contains(got, `transcription: "meow"`) {
		t.Fatalf("the model's answer: %q", got)
	}
	ms := h.history(h.alice, init0(1000), "default").Messages
	if len(ms) == 0 || ms[0].Role != "user" || len(ms[0].Media) != 2 {
		t.Fatalf("history: %s", ptDump(ms))
	}
	ref := ms[0].Media[0]
	name := ref.Sha256 + ".png"
	if ref.Path != "/var/media/alice/"+name || ref.Size != int64(len(pic)) || ref.MimeType != "image/png" || ref.Filename != "cat.png" {
		t.Fatalf("ref %+v", ref)
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages WHERE content LIKE ?`, "%"+b64[:16]+"%"); n != 0 {
		t.Fatalf("%d messages hold the image's bytes", n)
	}
	// The history and transcript files name the media.
	if got, err := h.readFile(h.alice, "/proc/init:1000/conversations/default/history"); err != nil || !strings.Contains(got, `"media":[{"type":"image","mimeType":"image/png","sha256":"`+ref.Sha256) {
		t.Fatalf("history file: %v\n%s", err, got)
	}
	if got, err := h.readFile(h.alice, "/proc/init:1000/conversations/default/transcript"); err != nil || !strings.Contains(got, "look\n[image: cat.png (image/png, ") {
		t.Fatalf("transcript: %v\n%s", err, got)
	}
	// The store, through the namespace.
	if got, err := h.readFile(h.alice, ref.Path); err != nil || got != string(pic) {
		t.Fatalf("alice reads %s: %v", ref.Path, err)
	}
	if got, err := h.readFile(h.root, ref.Path); err != nil || got != string(pic) {
		t.Fatalf("root reads %s: %v", ref.Path, err)
	}
	if _, err := h.readFile(h.bob, ref.Path); errnoOf(err) != syscall.EACCES {
		t.Fatalf("bob reads alice's media: %v", err)
	}
	if _, err := h.readFile(h.alice, "/var/media/alice/"+strings.Repeat("0", 64)+".png"); errnoOf(err) != syscall.ENOENT {
		t.Fatalf("a file not there: %v", err)
	}
	ctx := context.Background()
	files, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.alice}, abi.ProcMediaList, &abi.MediaFilesArgs{Uid: 1000})
	if err != nil || len(files.Files) != 2 {
		t.Fatalf("alice's store: %+v, %v", files, err)
	}
	if _, err := kernel.Do(ctx, h.k, &kernel.Caller{Identity: h.bob}, abi.ProcMediaList, &abi.MediaFilesArgs{Uid: 1000}); abi.Code(err) != 403 {
		t.Fatalf("bob lists alice's store: %v", err)
	}
	// The same image again is kept once.
	h.must(h.alice, "proc.send", map[string]any{"pid": init0(1000), "message": "again", "media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: b64}}}, &r)
	h.waitRun(r.RunID)
	if ents, _ := os.ReadDir(filepath.Join(h.dir, "media", "1000")); len(ents) != 2 {
		t.Fatalf("the store holds %d files", len(ents))
	}
}

// TestSendMediaBad: bad media is a 400 naming the item, and nothing is
// stored: no message, no file.
func TestSendMediaBad(t *testing.T) {
	h := newPTHarness(t)
	png64 := base64.StdEncoding.EncodeToString(testPNG(t))
	tests := []struct {
		name  string
		args  map[string]any
		want  string
		isErr bool
	}{
		{"no mime", map[string]any{"media": []abi.MediaInput{{Type: "image", Data: png64}}}, "media[0]: mimeType is required", true},
		{"not base64", map[string]any{"media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: "**"}}}, "not standard base64", true},
		{"second bad", map[string]any{"media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: png64}, {Type: "gif", MimeType: "image/gif", Data: png64}}}, "media[1]: type", true},
		{"file url", map[string]any{"media": []abi.MediaInput{{Type: "image", MimeType: "image/png", URL: "file:///etc/shadow"}}}, "absolute http(s) URL", true},
		{"steer", map[string]any{"mode": "steer", "media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: png64}}}, "do not steer", true},
		{"bad kind first", map[string]any{"kind": "nope", "media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: png64}}}, "kind", true},
		{"unknown field", map[string]any{"media": []map[string]any{{"type": "image", "mimeType": "image/png", "data": png64, "bytes": 1}}}, "bytes", true},
		{"no such conversation", map[string]any{"conversationId": "nope", "media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: png64}}}, "no such conversation", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"pid": init0(1000), "message": "look"}
			for k, v := range tt.args {
				args[k] = v
			}
			code := 400
			if !tt.isErr {
				code = 404
			}
			err := h.call(h.alice, "proc.send", args, nil)
			if abi.Code(err) != code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a %d with %q", err, code, tt.want)
			}
		})
	}
	if n := h.sqlCount(`SELECT count(*) FROM proc_messages`); n != 0 {
		t.Fatalf("%d messages", n)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "media")); !os.IsNotExist(err) {
		t.Fatalf("the store: %v", err)
	}
}

// TestReadImageTool: the Read tool of a PNG gives the model the image
// (kept in the owner's store); the tool result in the conversation names
// it and holds no bytes.
func TestReadImageTool(t *testing.T) {
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[1000] = model.Offline{}
	h.mu.Unlock()
	pic := testPNG(t)
	h.must(h.alice, "fs.write", abi.FSWriteArgs{Path: "~/cat.dat", Content: "x"}, nil)
	if err := os.WriteFile(h.realPath("/home/alice/cat.dat"), pic, 0o644); err != nil { // bytes JSON cannot carry
		t.Fatal(err)
	}
	r := h.send(h.alice, init0(1000), "", `use Read {"path":"~/cat.dat"}`)
	if st := h.waitRun(r.RunID); st != "done" {
		t.Fatalf("run %s", st)
	}
	if got := h.lastAssistant(init0(1000)); !strings.Contains(got, "[offline model: I saw 1 image(s): image/png]") {
		t.Fatalf("the model's answer: %q", got)
	}
	var tr toolResultContent
	for _, m := range h.history(h.alice, init0(1000), "default").Messages {
		if m.Role == "toolResult" {
			tr = ptTool(t, m)
		}
	}
	var out imageReadResult
	if err := json.Unmarshal([]byte(tr.Output), &out); err != nil || len(tr.Media) != 1 || out.Image.Path != tr.Media[0].Path || out.Size != int64(len(pic)) {
		t.Fatalf("tool result %+v: %v", tr, err)
	}
	if strings.Contains(tr.Output, base64.StdEncoding.EncodeToString(pic)[:16]) {
		t.Fatalf("the tool result holds the bytes: %s", tr.Output)
	}
	if got, err := h.readFile(h.alice, tr.Media[0].Path); err != nil || got != string(pic) {
		t.Fatalf("alice reads %s: %v", tr.Media[0].Path, err)
	}
}

// TestSendMediaQueued: media sent while a run is under way wait with
// their message in the queue (queue mode) or run next (interrupt), and
// reach the model when it runs.
func TestSendMediaQueued(t *testing.T) {
	h := newPTHarness(t)
	h.mu.Lock()
	h.provs[1000] = model.Offline{}
	h.mu.Unlock()
	png64 := base64.StdEncoding.EncodeToString(testPNG(t))
	for _, mode := range []string{"queue", "interrupt"} {
		t.Run(mode, func(t *testing.T) {
			first := h.send(h.alice, init0(1000), "", `use Shell {"command":"true"}`) // waits for approval
			h.waitRun(first.RunID, "waiting_hil")
			var r ptSend
			h.must(h.alice, "proc.send", map[string]any{"pid": init0(1000), "message": "see " + mode, "mode": mode,
				"media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: png64}}}, &r)
			if mode == "queue" {
				if !r.Queued {
					t.Fatalf("send: %+v", r)
				}
				req := h.history(h.alice, init0(1000), "default").PendingHil
				h.must(h.alice, "proc.hil", map[string]any{"pid": init0(1000), "requestId": req.RequestID, "decision": "deny"}, nil)
			}
			if st := h.waitRun(r.RunID); st != "done" {
				t.Fatalf("run %s", st)
			}
			if got := h.lastAssistant(init0(1000)); !strings.Contains(got, "You said: see "+mode) || !strings.Contains(got, "I saw 1 image(s): image/png") {
				t.Fatalf("the model's answer: %q", got)
			}
		})
	}
}

// TestSendMediaQuota: a user's media store holds at most
// proc/max_media_mib MiB: a send past it is a 409 naming the key and
// keeps nothing; root's store has no limit.
func TestSendMediaQuota(t *testing.T) {
	h := newPTHarness(t)
	h.must(h.root, "sys.config.set", map[string]any{"key": "users/1000/proc/max_media_mib", "value": "0"}, nil)
	png64 := base64.StdEncoding.EncodeToString(testPNG(t))
	err := h.call(h.alice, "proc.send", map[string]any{"pid": init0(1000), "message": "look", "media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: png64}}}, nil)
	if abi.Code(err) != 409 || !strings.Contains(err.Error(), "proc/max_media_mib") {
		t.Fatalf("send past the limit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "media", "1000")); !os.IsNotExist(err) {
		t.Fatalf("alice's store: %v", err)
	}
	h.must(h.root, "sys.config.set", map[string]any{"key": "config/proc/max_media_mib", "value": "0"}, nil)
	h.must(h.root, "proc.send", map[string]any{"pid": init0(0), "message": "look", "media": []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: png64}}}, nil)
}
