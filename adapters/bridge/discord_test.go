package bridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"gsvfs.dev/gsvfs/abi"
)

// fakeDiscord speaks the REST API's shapes (gateway, channel messages:
// create, edit, list) and the gateway's (hello, identify, ready,
// heartbeat ack, MESSAGE_CREATE). discordgo's endpoints are
// process-wide, so the package's tests share one server; reset clears
// it between tests.
type fakeDiscord struct {
	srv *httptest.Server

	mu      sync.Mutex // guards the fields below
	mode    string     // "", "garbage", "stall", "send500", "sendstall", "send4xx"
	history []map[string]any
	queue   []map[string]any // MESSAGE_CREATE not yet sent on a gateway
	calls   []map[string]any
	files   map[string]string // filename -> bytes, of posted attachments
	kick    chan struct{}
	nextID  int
}

var (
	discordOnce sync.Once
	discordFake *fakeDiscord
)

func sharedFakeDiscord(t *testing.T) *fakeDiscord {
	discordOnce.Do(func() {
		discordFake = &fakeDiscord{kick: make(chan struct{}, 10)}
		discordFake.srv = httptest.NewServer(http.HandlerFunc(discordFake.serve))
	})
	f := discordFake
	f.mu.Lock()
	f.mode, f.history, f.queue, f.calls, f.files, f.nextID = "", nil, nil, nil, map[string]string{}, 5000
	f.mu.Unlock()
	return f
}

func (f *fakeDiscord) setMode(m string) { f.mu.Lock(); f.mode = m; f.mu.Unlock() }

func (f *fakeDiscord) push(m map[string]any) {
	f.mu.Lock()
	f.history = append(f.history, m)
	f.queue = append(f.queue, m)
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *fakeDiscord) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode := f.mode
	f.mu.Unlock()
	p := strings.TrimPrefix(r.URL.Path, "/api/v"+discordgo.APIVersion)
	switch {
	case p == "/gateway":
		slackJSON(w, map[string]any{"url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/gw"})
	case r.URL.Path == "/gw" || r.URL.Path == "/gw/":
		f.gateway(w, r, mode)
	case strings.HasPrefix(r.URL.Path, "/att/"):
		io.WriteString(w, "ATTACHED")
	case strings.HasPrefix(p, "/channels/"):
		f.channel(w, r, mode, strings.Split(strings.TrimPrefix(p, "/channels/"), "/"))
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeDiscord) channel(w http.ResponseWriter, r *http.Request, mode string, parts []string) {
	ch := parts[0]
	if r.Method == http.MethodGet {
		after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		var out []map[string]any
		f.mu.Lock()
		for _, m := range f.history {
			id, _ := strconv.ParseUint(m["id"].(string), 10, 64)
			if m["channel_id"] == ch && id > after {
				out = append(out, m)
			}
		}
		f.mu.Unlock()
		slackJSON(w, out)
		return
	}
	body := map[string]any{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		r.ParseMultipartForm(32 << 20)
		json.Unmarshal([]byte(r.FormValue("payload_json")), &body)
		for _, fhs := range r.MultipartForm.File {
			rd, _ := fhs[0].Open()
			b, _ := io.ReadAll(rd)
			rd.Close()
			f.mu.Lock()
			f.files[fhs[0].Filename] = string(b)
			f.mu.Unlock()
		}
	} else {
		json.NewDecoder(r.Body).Decode(&body)
	}
	switch mode {
	case "send500":
		http.Error(w, "oops", http.StatusInternalServerError)
		return
	case "sendstall":
		<-r.Context().Done()
		return
	case "send4xx":
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"code":50035,"message":"Invalid Form Body"}`)
		return
	}
	body["method"], body["channel"] = r.Method, ch
	f.mu.Lock()
	f.calls = append(f.calls, body)
	f.nextID++
	id := strconv.Itoa(f.nextID)
	f.mu.Unlock()
	if r.Method == http.MethodPatch && len(parts) == 3 {
		id = parts[2]
	}
	slackJSON(w, map[string]any{"id": id, "channel_id": ch, "content": body["content"]})
}

func (f *fakeDiscord) gateway(w http.ResponseWriter, r *http.Request, mode string) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	c, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	switch mode {
	case "stall":
		c.ReadMessage() // until the client gives up
		return
	case "garbage":
		c.WriteMessage(websocket.TextMessage, []byte("}{ not the gateway"))
		c.ReadMessage()
		return
	}
	var wmu sync.Mutex // one writer at a time
	seq := 0
	send := func(op int, t string, d any) error {
		wmu.Lock()
		defer wmu.Unlock()
		seq++
		b, _ := json.Marshal(map[string]any{"op": op, "t": t, "s": seq, "d": d})
		return c.WriteMessage(websocket.TextMessage, b)
	}
	send(10, "", map[string]any{"heartbeat_interval": 500})
	var id struct {
		Op int `json:"op"`
	}
	if c.ReadJSON(&id) != nil || id.Op != 2 {
		return
	}
	send(0, "READY", map[string]any{"v": 9, "session_id": "S1", "user": map[string]any{"id": "999", "username": "gsvbot", "bot": true},
		"guilds": []any{}, "private_channels": []any{}})
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			var m struct {
				Op int `json:"op"`
			}
			if c.ReadJSON(&m) != nil {
				return
			}
			if m.Op == 1 {
				wmu.Lock()
				c.WriteMessage(websocket.TextMessage, []byte(`{"op":11}`))
				wmu.Unlock()
			}
		}
	}()
	for {
		f.mu.Lock()
		q := f.queue
		f.queue = nil
		f.mu.Unlock()
		for _, m := range q {
			if send(0, "MESSAGE_CREATE", m) != nil {
				return
			}
		}
		select {
		case <-f.kick:
		case <-closed:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func newTestDiscord(t *testing.T, f *fakeDiscord, opts map[string]string) *discord {
	t.Helper()
	a, err := New("discord", Config{Account: "d", Secret: "discord-token", BaseURL: f.srv.URL, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return a.(*discord)
}

func discordDM(f *fakeDiscord, id string) map[string]any {
	return map[string]any{"id": id, "channel_id": "77", "content": "hi there", "timestamp": "2023-11-14T22:13:20.000Z",
		"author":            map[string]any{"id": "42", "username": "ada", "global_name": "Ada"},
		"attachments":       []any{map[string]any{"id": "a1", "filename": "f.txt", "content_type": "text/plain", "size": 8, "url": f.srv.URL + "/att/f.txt"}},
		"message_reference": map[string]any{"message_id": "4000", "channel_id": "77"}}
}

// TestDiscordInbound: a DM with an attachment reaches the sink mapped.
func TestDiscordInbound(t *testing.T) {
	f := sharedFakeDiscord(t)
	a := newTestDiscord(t, f, nil)
	sink := newFakeSink()
	r := startRun(a, sink)
	defer r.stop(t)
	if st := sink.waitConnected(t); st.Extra["bot"] != "gsvbot" {
		t.Errorf("state %+v", st)
	}
	f.push(discordDM(f, "4001"))
	got := sink.next(t)
	if got.MessageID != "77:4001" || got.Text != "hi there" || got.ReplyToID != "77:4000" || !got.WasMentioned ||
		got.Surface != (abi.AdapterSurface{Kind: "dm", ID: "77"}) || got.Actor.Name != "Ada" || got.Timestamp != 1700000000000 {
		t.Errorf("delivered %+v", got)
	}
	if len(got.Media) != 1 || got.Media[0].Data != base64.StdEncoding.EncodeToString([]byte("ATTACHED")) || got.Media[0].Filename != "f.txt" {
		t.Errorf("media %+v", got.Media)
	}
}

// TestDiscordRedeliver: the gateway replays nothing, so after a Deliver
// error the next Run fetches the channel's messages from the failed one
// on and delivers them again.
func TestDiscordRedeliver(t *testing.T) {
	f := sharedFakeDiscord(t)
	a := newTestDiscord(t, f, nil)
	sink := newFakeSink()
	sink.fail = 1
	r := startRun(a, sink)
	sink.waitConnected(t)
	m := discordDM(f, "4101")
	delete(m, "attachments")
	f.push(m)
	if err := r.wait(t); err == nil || !strings.Contains(err.Error(), "kernel refused") {
		t.Fatalf("Run = %v", err)
	}
	sink.next(t)
	r = startRun(a, sink)
	defer r.stop(t)
	if got := sink.next(t); got.MessageID != "77:4101" {
		t.Fatalf("redelivered %+v", got)
	}
	eventually(t, "replay point cleared", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.replay) == 0 })
}

// TestDiscordSend: a reply with an attachment, an edit, refusals, and
// ambiguous failures.
func TestDiscordSend(t *testing.T) {
	f := sharedFakeDiscord(t)
	a := newTestDiscord(t, f, nil)
	ctx := context.Background()
	ch := abi.AdapterSurface{Kind: "channel", ID: "77"}
	s, err := a.Send(ctx, Outbound{Surface: ch, Text: "hello", ReplyToID: "77:4001",
		Media: []abi.MediaInput{{Type: "document", MimeType: "text/plain", Data: base64.StdEncoding.EncodeToString([]byte("notes")), Filename: "n.txt"}}})
	if err != nil || s.MessageID != "77:5001" {
		t.Fatalf("Send = %+v, %v", s, err)
	}
	if _, err := a.Send(ctx, Outbound{Surface: ch, Text: "hello!", Edit: s.MessageID}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	calls, file := f.calls, f.files["n.txt"]
	f.mu.Unlock()
	if len(calls) != 2 || calls[0]["content"] != "hello" || calls[0]["method"] != "POST" || file != "notes" ||
		!strings.Contains(mustJSON(calls[0]["message_reference"]), `"message_id":"4001"`) ||
		calls[1]["method"] != "PATCH" || calls[1]["content"] != "hello!" {
		t.Errorf("calls %v file %q", calls, file)
	}
	if _, err := a.Send(ctx, Outbound{Surface: ch, Text: strings.Repeat("x", discordMaxText+1)}); err == nil || IsAmbiguous(err) {
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

// TestDiscordRunFails: a gateway that answers garbage or stalls ends Run
// with an error.
func TestDiscordRunFails(t *testing.T) {
	for _, mode := range []string{"garbage", "stall"} {
		t.Run(mode, func(t *testing.T) {
			f := sharedFakeDiscord(t)
			a := newTestDiscord(t, f, map[string]string{"timeout": "2"})
			f.setMode(mode)
			if err := startRun(a, newFakeSink()).wait(t); err == nil {
				t.Fatal("Run = nil")
			}
		})
	}
}

// FuzzDiscordMessage: any message maps without panicking.
func FuzzDiscordMessage(f *testing.F) {
	f.Add([]byte(`{"id":"1","channel_id":"2","guild_id":"3","content":"<@999> hi","author":{"id":"4"},"mentions":[{"id":"999"}],"referenced_message":{"id":"0","author":{"id":"999"}}}`))
	f.Add([]byte(`{"id":"1","channel_id":"2","author":{"id":"4","bot":true}}`))
	me := &discordgo.User{ID: "999"}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m discordgo.Message
		if json.Unmarshal(b, &m) != nil {
			return
		}
		for _, thread := range []bool{false, true} {
			if in, _, ok := discordMessage(me, &m, thread); ok && (in.MessageID == "" || in.Surface.Kind == "" || in.Actor == nil) {
				t.Fatalf("mapped %+v", in)
			}
		}
	})
}
