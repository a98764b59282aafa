package main_test

// The Telegram bridge end to end: a real daemon, gsvfs adapter telegram
// as a subprocess, and a local server speaking the Bot API's HTTP shapes
// (getMe, long-polled getUpdates, sendMessage, editMessageText) that the
// go-telegram/bot library is pointed at with --base-url.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// e2eTelegram is the Bot API: updates queued for getUpdates (an offset
// confirms those below it) and the texts the bot posted or edited to.
type e2eTelegram struct {
	srv *httptest.Server

	mu      sync.Mutex // guards the fields below
	updates []map[string]any
	texts   []string
	wake    chan struct{}
	nextID  int
}

func startE2ETelegram(t *testing.T, token string) *e2eTelegram {
	f := &e2eTelegram{wake: make(chan struct{}), nextID: 100}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, ok := strings.CutPrefix(r.URL.Path, "/bot"+token+"/")
		if !ok {
			http.Error(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`, 401)
			return
		}
		answer := func(v any) { json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": v}) }
		switch method {
		case "getMe":
			answer(map[string]any{"id": 1, "is_bot": true, "first_name": "Gsv", "username": "gsv_bot"})
		case "getUpdates":
			var p struct{ Offset, Timeout int64 }
			json.NewDecoder(r.Body).Decode(&p)
			deadline := time.After(time.Duration(p.Timeout) * time.Second)
			for {
				f.mu.Lock()
				var out []map[string]any
				keep := f.updates[:0:0]
				for _, u := range f.updates {
					if u["update_id"].(int64) >= p.Offset {
						out, keep = append(out, u), append(keep, u)
					}
				}
				f.updates = keep
				wake := f.wake
				f.mu.Unlock()
				if len(out) > 0 {
					answer(out)
					return
				}
				select {
				case <-wake:
				case <-deadline:
					answer([]any{})
					return
				case <-r.Context().Done():
					return
				}
			}
		case "sendMessage", "editMessageText":
			r.ParseMultipartForm(1 << 20)
			f.mu.Lock()
			f.texts = append(f.texts, r.FormValue("text"))
			f.nextID++
			id := f.nextID
			f.mu.Unlock()
			answer(map[string]any{"message_id": id, "date": 1, "chat": map[string]any{"id": 42, "type": "private"}})
		default:
			http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, 404)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// dm queues a private message from user 42.
func (f *e2eTelegram) dm(id int64, text string) {
	f.mu.Lock()
	f.updates = append(f.updates, map[string]any{"update_id": id, "message": map[string]any{
		"message_id": id, "date": time.Now().Unix(), "text": text,
		"chat": map[string]any{"id": 42, "type": "private", "first_name": "Ada"},
		"from": map[string]any{"id": 42, "is_bot": false, "first_name": "Ada"}}})
	close(f.wake)
	f.wake = make(chan struct{})
	f.mu.Unlock()
}

func (f *e2eTelegram) wait(t *testing.T, want string) string {
	t.Helper()
	var got string
	waitFor(t, 60*time.Second, "a Telegram post holding "+want, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, s := range f.texts {
			if strings.Contains(s, want) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// TestE2EAdapterTelegram: a DM gets a link code; once linked, a DM
// reaches alice's agent and the answer comes back to the chat; the
// same update handed out again (as Telegram does after a reconnect) is
// a replay and is answered once.
func TestE2EAdapterTelegram(t *testing.T) {
	s := newAdapterSetup(t, newBase(t), "telegram")
	const token = "123:e2e-token"
	tokFile := filepath.Join(t.TempDir(), "tg")
	os.WriteFile(tokFile, []byte(token+"\n"), 0o600)
	f := startE2ETelegram(t, token)
	startBridge(t, "telegram", "--kernel", s.listen, "--token", s.token, "--bot-token-file", tokFile,
		"--base-url", f.srv.URL, "--account", "main", "--opt", "poll_timeout=2")

	f.dm(1, "hi")
	code := linkCode.FindStringSubmatch(f.wait(t, "gsv link"))
	if code == nil {
		t.Fatal("no link code")
	}
	if r := gsvAs(aliceHost, s.env, "link", code[1]); r.code != 0 {
		t.Fatalf("gsv link: %v", r)
	}
	f.dm(2, "hello from telegram")
	f.wait(t, "You said: hello from telegram")
	f.dm(2, "hello from telegram") // handed out again
	f.dm(3, "after the replay")
	f.wait(t, "You said: after the replay")
	f.mu.Lock()
	n := 0
	for _, s := range f.texts {
		if strings.Contains(s, "You said: hello from telegram") {
			n++
		}
	}
	texts := fmt.Sprint(f.texts)
	f.mu.Unlock()
	if n == 0 || n > 2 { // posted once, maybe edited once as it streamed
		t.Fatalf("the reply was posted %d times: %s", n, texts)
	}
	if st := s.accountStatus(t, "telegram", "main"); st == nil || st["connected"] != true {
		t.Errorf("account status %v", st)
	}
}
