package main_test

// The adapter bridges end to end: a real daemon, gsvfs adapter KIND as a
// subprocess with a service token bound to its kind, and the platform's
// real wire (HTTP for the webhook, a real IRC server for irc).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"

	"gsvfs.dev/gsvfs/adapters/bridge"
	"gsvfs.dev/gsvfs/mcpserve"
	"gsvfs.dev/gsvfs/ninep"
)

// startBridge starts gsvfs adapter with args.
func startBridge(t *testing.T, args ...string) *deviceProc {
	t.Helper()
	cmd := exec.Command(gsvfsBin, append([]string{"adapter", "--log-level", "debug"}, args...)...)
	cmd.Env = append(os.Environ(), raceEnv)
	return startProc(t, "adapter", args, cmd)
}

// hookSink is a webhook's far end: it keeps each signed POST's text.
type hookSink struct {
	secret []byte
	mu     sync.Mutex
	texts  []string
	bad    int
	srv    *httptest.Server
}

func newHookSink(t *testing.T, secret []byte) *hookSink {
	h := &hookSink{secret: secret}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.Header.Get(bridge.SignatureHeader) != bridge.Sign(h.secret, body) {
			h.bad++
			http.Error(w, "bad signature", 401)
			return
		}
		var m struct{ Text string }
		json.Unmarshal(body, &m)
		h.texts = append(h.texts, m.Text)
		fmt.Fprintf(w, `{"messageId":"w%d"}`, len(h.texts))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// wait waits for a text holding want and returns it.
func (h *hookSink) wait(t *testing.T, want string) string {
	t.Helper()
	var got string
	waitFor(t, 30*time.Second, "a webhook post holding "+want, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, s := range h.texts {
			if strings.Contains(s, want) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// count is how many posts hold want.
func (h *hookSink) count(want string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.texts {
		if strings.Contains(s, want) {
			n++
		}
	}
	return n
}

// postHook posts a message to the bridge's listener, signed with secret,
// and returns the HTTP status.
func postHook(t *testing.T, url string, secret []byte, msg any) int {
	t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	if secret != nil {
		req.Header.Set(bridge.SignatureHeader, bridge.Sign(secret, body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0 // not listening (yet)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// hookMsg is a webhook DM from actor.
func hookMsg(id, actor, text string) map[string]any {
	return map[string]any{"messageId": id, "surface": map[string]string{"kind": "dm", "id": actor},
		"actor": map[string]string{"id": actor}, "text": text}
}

var linkCode = regexp.MustCompile(`gsv link ([A-Z2-9]{4}-[A-Z2-9]{4})`)

// adapterSetup is a daemon listening on TCP, alice, her service token
// bound to kind, and a secret file.
type adapterSetup struct {
	d      *daemon
	listen string
	alice  uint32
	token  string
	secret string
	env    []string
}

func newAdapterSetup(t *testing.T, base, kind string) *adapterSetup {
	t.Helper()
	requireRoot(t)
	s := &adapterSetup{listen: fmt.Sprintf("tcp!127.0.0.1!%d", freePort(t))}
	s.d = startDaemon(t, base, daemonOpts{listen: s.listen})
	root := s.d.dial(t)
	s.alice = addUser(t, root, "alice", aliceHost)
	var tok struct{ Token struct{ Token string } }
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "service", "uid": s.alice, "allowedAdapter": kind}), &tok)
	s.token = tok.Token.Token
	s.secret = filepath.Join(t.TempDir(), "secret")
	os.WriteFile(s.secret, []byte("s3cret\n"), 0o600)
	s.env = []string{"GSV_ADDR=unix!" + s.d.sock}
	return s
}

// accountStatus is the account's status as alice reads it.
func (s *adapterSetup) accountStatus(t *testing.T, kind, account string) map[string]any {
	r := gsvAs(aliceHost, s.env, "call", "adapter.status", fmt.Sprintf(`{"adapter":%q,"accountId":%q}`, kind, account))
	var st struct{ Accounts []map[string]any }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Accounts) == 0 {
		return nil
	}
	return st.Accounts[0]
}

// hookURL waits for the webhook bridge's listener and returns its URL.
func (s *adapterSetup) hookURL(t *testing.T) string {
	var url string
	waitFor(t, 30*time.Second, "the webhook bridge's account", func() bool {
		st := s.accountStatus(t, "webhook", "hooks")
		if st == nil {
			return false
		}
		extra, _ := st["extra"].(map[string]any)
		if l, ok := extra["listen"].(string); ok {
			url = "http://" + l + "/inbound"
			return true
		}
		return false
	})
	return url
}

func TestE2EAdapterWebhook(t *testing.T) {
	s := newAdapterSetup(t, newBase(t), "webhook")
	secret := []byte("s3cret")
	sink := newHookSink(t, secret)
	startBridge(t, "webhook", "--kernel", s.listen, "--token", s.token, "--bot-token-file", s.secret,
		"--base-url", sink.srv.URL, "--account", "hooks")
	url := s.hookURL(t)

	// A bad signature: 401, and nothing is done.
	if c := postHook(t, url, []byte("wrong"), hookMsg("0", "u1", "hi")); c != 401 {
		t.Fatalf("a bad signature: %d", c)
	}
	if c := postHook(t, url, nil, hookMsg("0", "u1", "hi")); c != 401 {
		t.Fatalf("no signature: %d", c)
	}
	// An unlinked DM gets a link code.
	if c := postHook(t, url, secret, hookMsg("1", "u1", "hi")); c != 200 {
		t.Fatalf("a DM: %d", c)
	}
	m := linkCode.FindStringSubmatch(sink.wait(t, "gsv link"))
	if sink.count("gsv link") != 1 {
		t.Fatalf("the bad-signature posts were answered: %q", sink.texts)
	}
	if r := gsvAs(aliceHost, s.env, "link", m[1]); r.code != 0 {
		t.Fatalf("gsv link: %v", r)
	}
	if r := gsvAs(aliceHost, s.env, "link", "list"); r.code != 0 || !strings.Contains(r.stdout, "webhook") || !strings.Contains(r.stdout, "u1") {
		t.Fatalf("gsv link list: %v", r)
	}
	// Linked: the reply comes back; a replay does nothing.
	if c := postHook(t, url, secret, hookMsg("2", "u1", "hello hook")); c != 200 {
		t.Fatalf("a linked DM: %d", c)
	}
	sink.wait(t, "You said: hello hook")
	if c := postHook(t, url, secret, hookMsg("2", "u1", "hello hook")); c != 200 {
		t.Fatalf("a replay: %d", c)
	}
	postHook(t, url, secret, hookMsg("3", "u1", "after the replay"))
	sink.wait(t, "You said: after the replay")
	if n := sink.count("You said: hello hook"); n != 1 {
		t.Fatalf("the reply went %d times", n)
	}
	// Too large: the listener's limit, then the kernel's.
	if c := postHook(t, url, secret, hookMsg("4", "u1", strings.Repeat("x", 10<<20))); c != 413 {
		t.Fatalf("a 10 MB body: %d", c)
	}
	if c := postHook(t, url, secret, hookMsg("5", "u1", strings.Repeat("x", 100<<10))); c != 400 {
		t.Fatalf("a 100 KB text: %d", c)
	}
	// The account's files (root's view over 9P), and a send through its ctl.
	root := s.d.dial(t)
	if st, err := readAll9p(root, "/sys/adapters/webhook/hooks/status"); err != nil || !strings.Contains(st, `"connected": true`) || !strings.Contains(st, `"sent"`) {
		t.Fatalf("/sys/adapters/webhook/hooks/status: %q %v", st, err)
	}
	if ls, err := readAll9p(root, "/sys/links"); err != nil || !strings.Contains(ls, "webhook\thooks\tu1\t") {
		t.Fatalf("/sys/links: %q %v", ls, err)
	}
	fid, err := root.Open("/sys/adapters/webhook/hooks/ctl", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Write([]byte("send dm u1 written to ctl\n")); err != nil {
		t.Fatalf("ctl send: %v", err)
	}
	fid.Close()
	sink.wait(t, "written to ctl")
	if r := gsvAs(aliceHost, s.env, "adapter", "status", "webhook"); r.code != 0 || !strings.Contains(r.stdout, "hooks") {
		t.Fatalf("gsv adapter status: %v", r)
	}
	if r := gsvAs(aliceHost, s.env, "adapter", "send", "webhook", "--account", "hooks", "--to", "dm:u1", "deploy done"); r.code != 0 || !strings.Contains(r.stdout, "sent") {
		t.Fatalf("gsv adapter send: %v", r)
	}
	sink.wait(t, "deploy done")
}

// TestE2EAdapterCrash: the daemon killed (SIGKILL) right after a
// message's receipt, with its bridge gone too: after the restart the
// reply goes out exactly once.
func TestE2EAdapterCrash(t *testing.T) {
	base := newBase(t)
	s := newAdapterSetup(t, base, "webhook")
	secret := []byte("s3cret")
	sink := newHookSink(t, secret)
	hook := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"webhook", "--kernel", s.listen, "--token", s.token, "--bot-token-file", s.secret,
		"--base-url", sink.srv.URL, "--account", "hooks", "--opt", "listen=" + hook}
	b := startBridge(t, args...)
	url := s.hookURL(t)
	postHook(t, url, secret, hookMsg("1", "u1", "hi"))
	m := linkCode.FindStringSubmatch(sink.wait(t, "gsv link"))
	if r := gsvAs(aliceHost, s.env, "link", m[1]); r.code != 0 {
		t.Fatalf("gsv link: %v", r)
	}
	b.kill()

	// The message goes in as the bridge would send it, and the daemon
	// dies at once.
	rpc, err := mcpserve.Dial(ninep.Dialer{}, s.listen, "", []byte(s.token))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	res, err := rpc.Call(ctx, "adapter.inbound", json.RawMessage(`{"adapter":"webhook","accountId":"hooks",`+
		`"message":{"messageId":"2","surface":{"kind":"dm","id":"u1"},"actor":{"id":"u1"},"text":"before the crash"}}`))
	if err != nil || !strings.Contains(string(res), `"delivered"`) {
		t.Fatalf("inbound: %s %v", res, err)
	}
	rpc.Close()
	s.d.kill()

	s.d = startDaemon(t, base, daemonOpts{listen: s.listen})
	startBridge(t, args...)
	sink.wait(t, "You said: before the crash")
	// One more message and its answer: whatever was owed has gone by then.
	waitFor(t, 30*time.Second, "the bridge's listener again", func() bool {
		return postHook(t, url, secret, hookMsg("3", "u1", "after the crash")) == 200
	})
	sink.wait(t, "You said: after the crash")
	if n := sink.count("You said: before the crash"); n != 1 {
		t.Fatalf("the reply went %d times", n)
	}
}
