package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack/slackevents"

	"gsvfs.dev/gsvfs/abi"
)

const slackSecret = "xoxb-bot-token\nxapp-app-token\n"

// fakeSlack speaks the Web API's shapes (auth.test,
// apps.connections.open, chat.postMessage, chat.update, the external
// file upload, private file downloads) and Socket Mode's WebSocket
// (hello, events_api envelopes resent on each connection until
// acknowledged, pings).
type fakeSlack struct {
	srv *httptest.Server

	mu      sync.Mutex // guards the fields below
	pending []string   // envelopes not acknowledged, in order
	byID    map[string]string
	acked   []string
	posts   []map[string]string
	uploads map[string][]byte
	mode    string // "", "garbage", "stall", "send500", "sendstall", "send4xx"
	conns   int
	kick    chan struct{} // a new envelope to send
	done    chan struct{}
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{byID: map[string]string{}, uploads: map[string][]byte{}, kick: make(chan struct{}, 10), done: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() { close(f.done) })
	return f
}

func (f *fakeSlack) setMode(m string) { f.mu.Lock(); f.mode = m; f.mu.Unlock() }

func (f *fakeSlack) push(id string, event map[string]any) {
	env, _ := json.Marshal(map[string]any{"envelope_id": id, "type": "events_api", "accepts_response_payload": false,
		"payload": map[string]any{"token": "t", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
			"event_id": "Ev" + id, "event_time": 1700000000, "event": event}})
	f.mu.Lock()
	f.pending = append(f.pending, id)
	f.byID[id] = string(env)
	f.mu.Unlock()
	f.kick <- struct{}{}
}

func (f *fakeSlack) isAcked(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.acked {
		if a == id {
			return true
		}
	}
	return false
}

func slackJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode := f.mode
	f.mu.Unlock()
	r.ParseMultipartForm(32 << 20)
	switch p := strings.TrimPrefix(r.URL.Path, "/"); {
	case p == "auth.test":
		slackJSON(w, map[string]any{"ok": true, "user": "gsv", "user_id": "UBOT", "bot_id": "BBOT", "team": "Acme", "team_id": "T1"})
	case p == "apps.connections.open":
		if r.Header.Get("Authorization") != "Bearer xapp-app-token" {
			slackJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		if mode == "garbage" {
			io.WriteString(w, "<html>not json")
			return
		}
		slackJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/ws"})
	case p == "ws":
		f.socket(w, r, mode)
	case strings.HasPrefix(p, "files/"):
		if r.Header.Get("Authorization") != "Bearer xoxb-bot-token" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		io.WriteString(w, "PNGDATA")
	case strings.HasPrefix(p, "upload/"):
		file, hdr, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(file)
		f.mu.Lock()
		f.uploads[hdr.Filename] = b
		f.mu.Unlock()
		io.WriteString(w, "OK")
	case p == "files.getUploadURLExternal":
		slackJSON(w, map[string]any{"ok": true, "upload_url": f.srv.URL + "/upload/F1", "file_id": "F1"})
	case p == "files.completeUploadExternal":
		f.record(p, r)
		slackJSON(w, map[string]any{"ok": true, "files": []any{map[string]any{"id": "F1", "title": "x"}}})
	case p == "chat.postMessage" || p == "chat.update":
		switch mode {
		case "send500":
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		case "sendstall":
			select {
			case <-r.Context().Done():
			case <-f.done:
			}
			return
		case "send4xx":
			slackJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		f.record(p, r)
		ts := orDefault(r.FormValue("ts"), "1700000001.000200")
		slackJSON(w, map[string]any{"ok": true, "channel": r.FormValue("channel"), "ts": ts})
	default:
		slackJSON(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (f *fakeSlack) record(method string, r *http.Request) {
	c := map[string]string{"method": method}
	for k, v := range r.Form {
		c[k] = v[0]
	}
	f.mu.Lock()
	f.posts = append(f.posts, c)
	f.mu.Unlock()
}

func (f *fakeSlack) socket(w http.ResponseWriter, r *http.Request, mode string) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }} // Socket Mode clients send Origin: https://api.slack.com
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	f.mu.Lock()
	f.conns++
	f.mu.Unlock()
	if mode == "stall" {
		select { // no hello, no pings
		case <-f.done:
		case <-r.Context().Done():
		}
		return
	}
	var wmu sync.Mutex // one writer at a time
	write := func(s string) error {
		wmu.Lock()
		defer wmu.Unlock()
		return c.WriteMessage(websocket.TextMessage, []byte(s))
	}
	write(`{"type":"hello","num_connections":1,"connection_info":{"app_id":"A1"}}`)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			var ack struct {
				EnvelopeID string `json:"envelope_id"`
			}
			json.Unmarshal(b, &ack)
			f.mu.Lock()
			f.acked = append(f.acked, ack.EnvelopeID)
			for i, p := range f.pending {
				if p == ack.EnvelopeID {
					f.pending = append(f.pending[:i:i], f.pending[i+1:]...)
					break
				}
			}
			f.mu.Unlock()
		}
	}()
	sent := map[string]bool{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		var out []string
		for _, id := range f.pending {
			if !sent[id] {
				sent[id] = true
				out = append(out, f.byID[id])
			}
		}
		f.mu.Unlock()
		for _, e := range out {
			if write(e) != nil {
				return
			}
		}
		select {
		case <-f.kick:
		case <-tick.C:
			wmu.Lock()
			err := c.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
			wmu.Unlock()
			if err != nil {
				return
			}
		case <-closed:
			return
		case <-f.done:
			return
		}
	}
}

func newTestSlack(t *testing.T, f *fakeSlack, opts map[string]string) *slackKind {
	t.Helper()
	a, err := New("slack", Config{Account: "ws", Secret: slackSecret, BaseURL: f.srv.URL, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return a.(*slackKind)
}

func slackDM(f *fakeSlack) map[string]any {
	return map[string]any{"type": "message", "channel": "D1", "channel_type": "im", "user": "U1",
		"text": "hi <@UBOT>", "ts": "1700000000.123400",
		"files": []any{map[string]any{"id": "F9", "name": "a.png", "mimetype": "image/png", "size": 7,
			"url_private_download": f.srv.URL + "/files/F9"}}}
}

// TestSlackInbound: a DM with a file reaches the sink, and its envelope
// is acknowledged only after Deliver returned nil.
func TestSlackInbound(t *testing.T) {
	f := newFakeSlack(t)
	a := newTestSlack(t, f, map[string]string{"ping_timeout": "5"})
	sink := newFakeSink()
	gate := make(chan struct{})
	sink.gate = gate
	r := startRun(a, sink)
	defer r.stop(t)
	if st := sink.waitConnected(t); st.Extra["bot"] != "gsv" || !st.Authenticated {
		t.Errorf("state %+v", st)
	}
	f.push("e1", slackDM(f))
	got := sink.next(t)
	if got.MessageID != "D1:1700000000.123400" || got.Text != "hi <@UBOT>" || !got.WasMentioned ||
		got.Surface != (abi.AdapterSurface{Kind: "dm", ID: "D1"}) || got.Actor.ID != "U1" || got.Timestamp != 1700000000123 {
		t.Errorf("delivered %+v", got)
	}
	if len(got.Media) != 1 || got.Media[0].Data != base64.StdEncoding.EncodeToString([]byte("PNGDATA")) || got.Media[0].Type != "image" {
		t.Errorf("media %+v", got.Media)
	}
	if f.isAcked("e1") {
		t.Fatal("envelope acknowledged before Deliver returned")
	}
	close(gate)
	eventually(t, "envelope acknowledged", func() bool { return f.isAcked("e1") })
}

// TestSlackRedeliver: a Deliver error ends Run without acknowledging;
// the next connection gets the envelope again.
func TestSlackRedeliver(t *testing.T) {
	f := newFakeSlack(t)
	a := newTestSlack(t, f, map[string]string{"ping_timeout": "5"})
	sink := newFakeSink()
	sink.fail = 1
	ev := slackDM(f)
	delete(ev, "files")
	f.push("e2", ev)
	if err := startRun(a, sink).wait(t); err == nil || !strings.Contains(err.Error(), "kernel refused") {
		t.Fatalf("Run = %v", err)
	}
	if f.isAcked("e2") {
		t.Fatal("failed envelope acknowledged")
	}
	sink.next(t)
	r := startRun(a, sink)
	defer r.stop(t)
	if m := sink.next(t); m.MessageID != "D1:1700000000.123400" {
		t.Fatalf("redelivered %+v", m)
	}
	eventually(t, "acknowledged after redelivery", func() bool { return f.isAcked("e2") })
}

// TestSlackSend: a threaded reply, an edit, an upload, refusals.
func TestSlackSend(t *testing.T) {
	f := newFakeSlack(t)
	a := newTestSlack(t, f, nil)
	ctx := context.Background()
	ch := abi.AdapterSurface{Kind: "channel", ID: "C1"}
	s, err := a.Send(ctx, Outbound{Surface: ch, Text: "hello", ReplyToID: "C1:1700000000.000100"})
	if err != nil || s.MessageID != "C1:1700000001.000200" {
		t.Fatalf("Send = %+v, %v", s, err)
	}
	if _, err := a.Send(ctx, Outbound{Surface: ch, Text: "hello!", Edit: s.MessageID}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Outbound{Surface: ch, Media: []abi.MediaInput{{Type: "document", MimeType: "text/plain",
		Data: base64.StdEncoding.EncodeToString([]byte("notes")), Filename: "n.txt"}}}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	posts, up := f.posts, f.uploads["n.txt"]
	f.mu.Unlock()
	if len(posts) != 3 || posts[0]["method"] != "chat.postMessage" || posts[0]["text"] != "hello" || posts[0]["thread_ts"] != "1700000000.000100" ||
		posts[1]["method"] != "chat.update" || posts[1]["ts"] != "1700000001.000200" || posts[1]["text"] != "hello!" ||
		posts[2]["method"] != "files.completeUploadExternal" || posts[2]["channel_id"] != "C1" || string(up) != "notes" {
		t.Errorf("posts %v upload %q", posts, up)
	}
	if _, err := a.Send(ctx, Outbound{Surface: ch, Text: strings.Repeat("x", slackMaxText+1)}); err == nil || IsAmbiguous(err) {
		t.Errorf("over limit: %v", err)
	}
	for _, tc := range []struct {
		mode      string
		ambiguous bool
	}{{"send500", true}, {"sendstall", true}, {"send4xx", false}} {
		f.setMode(tc.mode)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := a.Send(cctx, Outbound{Surface: ch, Text: "x"})
		cancel()
		if err == nil || IsAmbiguous(err) != tc.ambiguous {
			t.Errorf("%s: Send = %v, want ambiguous %v", tc.mode, err, tc.ambiguous)
		}
	}
}

// TestSlackRunFails: garbage from apps.connections.open, a socket that
// never says hello nor pings, or a closed server end Run with an error.
func TestSlackRunFails(t *testing.T) {
	for _, mode := range []string{"garbage", "stall", "closed"} {
		t.Run(mode, func(t *testing.T) {
			f := newFakeSlack(t)
			a := newTestSlack(t, f, map[string]string{"ping_timeout": "1"})
			f.setMode(mode)
			if mode == "closed" {
				f.srv.Close()
			}
			if err := startRun(a, newFakeSink()).wait(t); err == nil {
				t.Fatal("Run = nil")
			}
		})
	}
}

// FuzzSlackEvent: any message event maps without panicking.
func FuzzSlackEvent(f *testing.F) {
	f.Add([]byte(`{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1.2","thread_ts":"0.1"}`))
	f.Add([]byte(`{"type":"message","subtype":"message_changed","channel":"C1","message":{"text":"x"}}`))
	f.Add([]byte(`{"type":"app_mention","channel":"G1","user":"U1","ts":"99999999999999999999.9"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var me slackevents.MessageEvent
		if json.Unmarshal(b, &me) == nil {
			if in, _, ok := slackMessage("UBOT", "BBOT", &me); ok && (in.MessageID == "" || in.Surface.Kind == "") {
				t.Fatalf("mapped %+v", in)
			}
		}
		var am slackevents.AppMentionEvent
		if json.Unmarshal(b, &am) == nil {
			if in, _, ok := slackMessage("UBOT", "BBOT", &am); ok && !in.WasMentioned {
				t.Fatalf("mention not marked %+v", in)
			}
		}
	})
}
