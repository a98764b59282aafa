package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"gsvfs.dev/gsvfs/abi"
)

const tgToken = "123456:test-token"

// fakeTelegram speaks the Bot API's HTTP shapes: getMe, getUpdates
// (long polling with offsets that confirm updates), getFile and file
// downloads, sendMessage, editMessageText, sendPhoto/sendDocument/
// sendVoice (multipart). mode selects a misbehaviour.
type fakeTelegram struct {
	srv *httptest.Server

	mu      sync.Mutex // guards the fields below
	updates []json.RawMessage
	ids     []int64
	offsets []int64 // each getUpdates' offset, in order
	files   map[string][]byte
	sent    []tgCall
	nextID  int
	mode    string // "", "garbage", "stall", "send500", "send502html", "sendstall", "send400"
	wake    chan struct{}
	done    chan struct{} // closed when the test ends: stalls end
}

type tgCall struct {
	method string
	fields map[string]string
	file   []byte
	fname  string
}

func newFakeTelegram(t *testing.T) *fakeTelegram {
	f := &fakeTelegram{files: map[string][]byte{}, nextID: 100, wake: make(chan struct{}), done: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.done) })
	return f
}

func (f *fakeTelegram) setMode(m string) { f.mu.Lock(); f.mode = m; f.mu.Unlock() }

// push queues an update (its update_id is set from id).
func (f *fakeTelegram) push(id int64, u map[string]any) {
	u["update_id"] = id
	b, _ := json.Marshal(u)
	f.mu.Lock()
	f.updates = append(f.updates, b)
	f.ids = append(f.ids, id)
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

func (f *fakeTelegram) maxOffset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var m int64
	for _, o := range f.offsets {
		m = max(m, o)
	}
	return m
}

func (f *fakeTelegram) calls() []tgCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]tgCall(nil), f.sent...)
}

func tgOK(w http.ResponseWriter, result any) {
	b, _ := json.Marshal(map[string]any{"ok": true, "result": result})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (f *fakeTelegram) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode := f.mode
	f.mu.Unlock()
	if p, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+tgToken+"/"); ok {
		f.mu.Lock()
		b, ok := f.files[p]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+tgToken+"/")
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`)
		return
	}
	switch method {
	case "getMe":
		tgOK(w, map[string]any{"id": 123456, "is_bot": true, "first_name": "Gsv", "username": "gsv_bot"})
	case "getUpdates":
		f.getUpdates(w, r, mode)
	case "getFile":
		r.ParseMultipartForm(1 << 20)
		id := r.FormValue("file_id")
		tgOK(w, map[string]any{"file_id": id, "file_unique_id": id, "file_path": "files/" + id})
	default:
		f.send(w, r, method, mode)
	}
}

func (f *fakeTelegram) getUpdates(w http.ResponseWriter, r *http.Request, mode string) {
	var p struct {
		Offset  int64 `json:"offset"`
		Timeout int   `json:"timeout"`
	}
	json.NewDecoder(r.Body).Decode(&p)
	switch mode {
	case "garbage":
		io.WriteString(w, "<html>this is not the bot api")
		return
	case "stall":
		f.stall(r)
		return
	}
	deadline := time.After(time.Duration(p.Timeout) * time.Second)
	for {
		f.mu.Lock()
		f.offsets = append(f.offsets, p.Offset)
		var out []json.RawMessage
		keep, keepIDs := f.updates[:0:0], f.ids[:0:0]
		for i, id := range f.ids {
			if id >= p.Offset { // an offset confirms every update below it
				out = append(out, f.updates[i])
				keep, keepIDs = append(keep, f.updates[i]), append(keepIDs, id)
			}
		}
		f.updates, f.ids = keep, keepIDs
		wake := f.wake
		f.mu.Unlock()
		if len(out) > 0 {
			tgOK(w, out)
			return
		}
		select {
		case <-wake:
		case <-deadline:
			tgOK(w, []any{})
			return
		case <-r.Context().Done():
			return
		case <-f.done:
			return
		}
	}
}

// stall answers nothing until the client gives up or the test ends.
func (f *fakeTelegram) stall(r *http.Request) {
	io.Copy(io.Discard, r.Body) // the server notices a closed connection only past the body
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

func (f *fakeTelegram) send(w http.ResponseWriter, r *http.Request, method, mode string) {
	switch mode {
	case "send500":
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
		return
	case "send502html":
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>bad gateway</html>")
		return
	case "sendstall":
		f.stall(r)
		return
	case "send400":
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`)
		return
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c := tgCall{method: method, fields: map[string]string{}}
	for k, v := range r.MultipartForm.Value {
		c.fields[k] = v[0]
	}
	for _, fhs := range r.MultipartForm.File {
		fh := fhs[0]
		rd, _ := fh.Open()
		c.file, _ = io.ReadAll(rd)
		c.fname = fh.Filename
		rd.Close()
	}
	f.mu.Lock()
	f.nextID++
	id := f.nextID
	if method == "editMessageText" {
		id, _ = strconv.Atoi(c.fields["message_id"])
	}
	f.sent = append(f.sent, c)
	f.mu.Unlock()
	chat, _ := strconv.ParseInt(c.fields["chat_id"], 10, 64)
	tgOK(w, map[string]any{"message_id": id, "date": 1, "chat": map[string]any{"id": chat, "type": "private"}, "text": c.fields["text"]})
}

func newTestTelegram(t *testing.T, f *fakeTelegram, opts map[string]string) *telegram {
	t.Helper()
	a, err := New("telegram", Config{Account: "main", Secret: tgToken + "\n", BaseURL: f.srv.URL, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return a.(*telegram)
}

func tgDM(msgID int, text string) map[string]any {
	return map[string]any{"message": map[string]any{
		"message_id": msgID, "date": 1700000000, "text": text,
		"chat": map[string]any{"id": 42, "type": "private", "first_name": "Ada", "username": "ada"},
		"from": map[string]any{"id": 42, "is_bot": false, "first_name": "Ada", "last_name": "L", "username": "ada"},
	}}
}

// TestTelegramInbound: a DM reaches the sink with its fields, and its
// update is confirmed (a getUpdates offset past it) only after Deliver
// returned nil.
func TestTelegramInbound(t *testing.T) {
	f := newFakeTelegram(t)
	photo := []byte("\x89PNG fake photo bytes")
	f.files["files/ph-big"] = photo
	a := newTestTelegram(t, f, nil)
	sink := newFakeSink()
	gate := make(chan struct{})
	sink.gate = gate
	r := startRun(a, sink)
	defer r.stop(t)
	st := sink.waitConnected(t)
	if !st.Authenticated || st.Extra["bot"] != "@gsv_bot" {
		t.Errorf("state %+v", st)
	}

	u := tgDM(7, "")
	m := u["message"].(map[string]any)
	m["caption"] = "look @GSV_bot"
	m["photo"] = []any{map[string]any{"file_id": "ph-small", "file_unique_id": "s", "width": 1, "height": 1},
		map[string]any{"file_id": "ph-big", "file_unique_id": "b", "width": 9, "height": 9, "file_size": len(photo)}}
	m["reply_to_message"] = map[string]any{"message_id": 5, "date": 1, "chat": m["chat"], "text": "earlier",
		"from": map[string]any{"id": 123456, "is_bot": true, "first_name": "Gsv"}}
	f.push(10, u)

	got := sink.next(t)
	want := abi.AdapterMessage{
		MessageID: "42:7", Text: "look @GSV_bot", ReplyToID: "42:5", ReplyToText: "earlier",
		Surface:   abi.AdapterSurface{Kind: "dm", ID: "42", Name: "Ada", Handle: "ada"},
		Actor:     &abi.AdapterActor{ID: "42", Name: "Ada L", Handle: "ada"},
		Timestamp: 1700000000000, WasMentioned: true,
	}
	media := got.Media
	got.Media = nil
	if gj, wj := mustJSON(got), mustJSON(want); gj != wj {
		t.Errorf("delivered\n %s\nwant\n %s", gj, wj)
	}
	if len(media) != 1 || media[0].Type != "image" || media[0].Data != base64.StdEncoding.EncodeToString(photo) {
		t.Errorf("media %+v", media)
	}
	if o := f.maxOffset(); o > 10 {
		t.Fatalf("update confirmed (offset %d) before Deliver returned", o)
	}
	close(gate)
	eventually(t, "offset 11 asked after Deliver", func() bool { return f.maxOffset() == 11 })
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestTelegramRedeliver: a Deliver error ends Run with an error and
// leaves the update unconfirmed; the next Run delivers it again.
func TestTelegramRedeliver(t *testing.T) {
	f := newFakeTelegram(t)
	a := newTestTelegram(t, f, nil)
	sink := newFakeSink()
	sink.fail = 1
	f.push(20, tgDM(1, "hi"))
	r := startRun(a, sink)
	if err := r.wait(t); err == nil || !strings.Contains(err.Error(), "kernel refused") {
		t.Fatalf("Run = %v, want the deliver error", err)
	}
	if o := f.maxOffset(); o > 20 {
		t.Fatalf("failed update confirmed (offset %d)", o)
	}
	sink.next(t) // the failed attempt
	r = startRun(a, sink)
	defer r.stop(t)
	if m := sink.next(t); m.MessageID != "42:1" || m.Text != "hi" {
		t.Fatalf("redelivered %+v", m)
	}
	eventually(t, "confirmed after redelivery", func() bool { return f.maxOffset() == 21 })
	if n := len(sink.delivered()); n != 1 {
		t.Errorf("%d messages delivered, want 1", n)
	}
}

// TestTelegramSend: text with a reply, an edit, media out, and refusals
// over the limits before anything is sent.
func TestTelegramSend(t *testing.T) {
	f := newFakeTelegram(t)
	a := newTestTelegram(t, f, nil)
	ctx := context.Background()
	dm := abi.AdapterSurface{Kind: "dm", ID: "42"}

	s, err := a.Send(ctx, Outbound{Surface: dm, Text: "hello", ReplyToID: "42:7"})
	if err != nil || s.MessageID != "42:101" {
		t.Fatalf("Send = %+v, %v", s, err)
	}
	s, err = a.Send(ctx, Outbound{Surface: dm, Text: "hello, world", Edit: s.MessageID})
	if err != nil || s.MessageID != "42:101" {
		t.Fatalf("edit = %+v, %v", s, err)
	}
	img := []byte("image bytes")
	voice := []byte("OggS voice")
	_, err = a.Send(ctx, Outbound{Surface: dm, Media: []abi.MediaInput{
		{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(img), Filename: "a.png"},
		{Type: "audio", MimeType: "audio/ogg", Data: base64.StdEncoding.EncodeToString(voice)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	calls := f.calls()
	if len(calls) != 4 {
		t.Fatalf("%d calls: %+v", len(calls), calls)
	}
	if c := calls[0]; c.method != "sendMessage" || c.fields["chat_id"] != "42" || c.fields["text"] != "hello" ||
		!strings.Contains(c.fields["reply_parameters"], `"message_id":7`) {
		t.Errorf("send: %+v", c)
	}
	if c := calls[1]; c.method != "editMessageText" || c.fields["message_id"] != "101" || c.fields["text"] != "hello, world" {
		t.Errorf("edit: %+v", c)
	}
	if c := calls[2]; c.method != "sendPhoto" || string(c.file) != string(img) || c.fname != "a.png" {
		t.Errorf("photo: %+v", c)
	}
	if c := calls[3]; c.method != "sendVoice" || string(c.file) != string(voice) {
		t.Errorf("voice: %+v", c)
	}

	for name, out := range map[string]Outbound{
		"over limit": {Surface: dm, Text: strings.Repeat("x", telegramMaxText+1)},
		"no data":    {Surface: dm, Media: []abi.MediaInput{{Type: "image", MimeType: "image/png", URL: "http://x/y.png"}}},
		"bad chat":   {Surface: abi.AdapterSurface{ID: "not a chat"}, Text: "x"},
		"empty":      {Surface: dm},
	} {
		if _, err := a.Send(ctx, out); err == nil || IsAmbiguous(err) {
			t.Errorf("%s: Send = %v, want a plain refusal", name, err)
		}
	}
	if n := len(f.calls()); n != 4 {
		t.Errorf("refused sends reached the server (%d calls)", n)
	}
	if _, err := a.Send(ctx, Outbound{Surface: dm, Text: strings.Repeat("y", telegramMaxText)}); err != nil {
		t.Errorf("text at the limit: %v", err)
	}
}

// TestTelegramSendAmbiguous: a 5xx, a garbled 502 or a timeout is
// Ambiguous; a 400 or a refused connection is not.
func TestTelegramSendAmbiguous(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		ambiguous bool
	}{{"send500", true}, {"send502html", true}, {"sendstall", true}, {"send400", false}, {"closed", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			f := newFakeTelegram(t)
			a := newTestTelegram(t, f, nil)
			f.setMode(tc.mode)
			if tc.mode == "closed" {
				f.srv.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := a.Send(ctx, Outbound{Surface: abi.AdapterSurface{ID: "42"}, Text: "x"})
			if err == nil || IsAmbiguous(err) != tc.ambiguous {
				t.Fatalf("Send = %v, ambiguous %v, want %v", err, IsAmbiguous(err), tc.ambiguous)
			}
			if strings.Contains(err.Error(), tgToken) {
				t.Errorf("error quotes the token: %v", err)
			}
		})
	}
}

// TestTelegramRunFails: a server answering garbage, stalling, or gone
// makes Run return an error (and report it), without hanging.
func TestTelegramRunFails(t *testing.T) {
	for _, mode := range []string{"garbage", "stall", "closed"} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeTelegram(t)
			a := newTestTelegram(t, f, map[string]string{"poll_timeout": "1"})
			f.setMode(mode)
			if mode == "closed" {
				f.srv.Close()
			}
			sink := newFakeSink()
			err := startRun(a, sink).wait(t)
			if err == nil {
				t.Fatal("Run = nil, want an error")
			}
			if strings.Contains(err.Error(), tgToken) {
				t.Errorf("error quotes the token: %v", err)
			}
			sink.mu.Lock()
			last := sink.states[len(sink.states)-1]
			sink.mu.Unlock()
			if last.Connected || last.Error == "" {
				t.Errorf("last state %+v, want an error", last)
			}
		})
	}
}

func TestTelegramConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no token":   {Account: "a"},
		"bad option": {Account: "a", Secret: tgToken, Options: map[string]string{"nope": "1"}},
		"bad poll":   {Account: "a", Secret: tgToken, Options: map[string]string{"poll_timeout": "-1"}},
	} {
		if _, err := New("telegram", cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// FuzzTelegramUpdate: any update JSON maps without panicking, and a
// mapped message always has an id and a surface kind.
func FuzzTelegramUpdate(f *testing.F) {
	for _, u := range []map[string]any{tgDM(1, "hi @gsv_bot"),
		{"channel_post": map[string]any{"message_id": 3, "chat": map[string]any{"id": -100, "type": "channel", "title": "news"}, "sender_chat": map[string]any{"id": -100}}},
		{"message": map[string]any{"message_id": 4, "is_topic_message": true, "message_thread_id": 9, "chat": map[string]any{"id": -5, "type": "supergroup"},
			"entities": []any{map[string]any{"type": "text_mention", "offset": 99, "length": -3, "user": map[string]any{"id": 123456}}},
			"document": map[string]any{"file_id": "d", "file_unique_id": "d"}, "voice": map[string]any{"file_id": "v"}}},
	} {
		u["update_id"] = 1
		b, _ := json.Marshal(u)
		f.Add(b)
	}
	f.Add([]byte(`{"update_id":1,"message":null}`))
	me := &models.User{ID: 123456, Username: "gsv_bot"}
	f.Fuzz(func(t *testing.T, b []byte) {
		var u models.Update
		if json.Unmarshal(b, &u) != nil {
			return
		}
		m := telegramMessageOf(&u)
		if m == nil {
			return
		}
		in, files := telegramMessage(me, m)
		if in.MessageID == "" || in.Surface.Kind == "" || in.Surface.ID == "" {
			t.Fatalf("mapped %+v", in)
		}
		for _, fl := range files {
			if fl.name == "" {
				t.Fatalf("file without a name: %+v", fl)
			}
		}
		chat, msg, err := telegramIDs(in.MessageID)
		if err != nil || chat != in.Surface.ID || fmt.Sprint(msg) != strconv.Itoa(m.ID) {
			t.Fatalf("id %q does not parse back (%q %d %v)", in.MessageID, chat, msg, err)
		}
	})
}
