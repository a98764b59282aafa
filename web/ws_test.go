package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/web"
)

// liveness bounds every wait of these tests: it guards against a hang,
// not a speed.
const liveness = 60 * time.Second

// waitCall is a test syscall that blocks until its context ends.
var waitCall = abi.Call[struct{}, struct{}]{Name: "webtest.wait", Grant: abi.Users, Doc: "Blocks until cancelled."}

type env struct {
	*kerneltest.Env
	srv *httptest.Server
	ws  *web.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := kerneltest.Open(t)
	e.K.Register(kernel.Handle(waitCall, func(ctx context.Context, _ *kernel.Caller, _ *struct{}) (struct{}, error) {
		<-ctx.Done()
		return struct{}{}, abi.E(abi.Timeout, "cancelled")
	}))
	w := web.New(web.Options{Kernel: e.K, Version: "test", Logger: kerneltest.Quiet(), MaxFrame: 1 << 20})
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	return &env{Env: e, srv: srv, ws: w}
}

// token makes a user token for id.
func (e *env) token(t *testing.T, id *kernel.Identity, kind string) string {
	t.Helper()
	res, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(id), abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return res.Token.Token
}

// client is one WebSocket connection of a test.
type client struct {
	t    *testing.T
	c    *websocket.Conn
	n    int
	in   chan []byte // the text frames read, in order
	end  chan error
	kept []res // frames read but not matched yet
}

func (e *env) dial(t *testing.T, hdr http.Header) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+web.WSPath, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	cl := &client{t: t, c: c, in: make(chan []byte, 1024), end: make(chan error, 1)}
	go func() {
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				cl.end <- err
				close(cl.in)
				return
			}
			cl.in <- b
		}
	}()
	t.Cleanup(func() { c.CloseNow() })
	return cl
}

func (cl *client) send(v any) string {
	cl.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.sendRaw(websocket.MessageText, b)
	return ""
}

func (cl *client) sendRaw(typ websocket.MessageType, b []byte) {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	if err := cl.c.Write(ctx, typ, b); err != nil {
		cl.t.Fatalf("write: %v", err)
	}
}

type res struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	OK     bool            `json:"ok"`
	Data   json.RawMessage `json:"data"`
	Signal string          `json:"signal"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Next    string `json:"next"`
	} `json:"error"`
}

// req sends a request and returns its id.
func (cl *client) req(call string, args any) string {
	cl.n++
	id := "r" + strconv.Itoa(cl.n)
	cl.send(map[string]any{"type": "req", "id": id, "call": call, "args": args})
	return id
}

// next returns the first frame not returned yet that matches; the
// frames it passes over are kept for later calls.
func (cl *client) next(match func(r res) bool) res {
	cl.t.Helper()
	for i, r := range cl.kept {
		if match(r) {
			cl.kept = append(cl.kept[:i], cl.kept[i+1:]...)
			return r
		}
	}
	timer := time.NewTimer(liveness)
	defer timer.Stop()
	for {
		select {
		case b, ok := <-cl.in:
			if !ok {
				cl.t.Fatalf("connection closed: %v", <-cl.end)
			}
			var r res
			if err := json.Unmarshal(b, &r); err != nil {
				cl.t.Fatalf("frame %s: %v", b, err)
			}
			if match(r) {
				return r
			}
			cl.kept = append(cl.kept, r)
		case <-timer.C:
			cl.t.Fatal("no frame in time")
		}
	}
}

func (cl *client) answer(id string) res {
	cl.t.Helper()
	return cl.next(func(r res) bool { return r.Type == "res" && r.ID == id })
}

// call makes a request and returns its answer.
func (cl *client) call(callName string, args any) res {
	cl.t.Helper()
	return cl.answer(cl.req(callName, args))
}

// closed waits for the connection to end and returns its close status.
func (cl *client) closed() websocket.StatusCode {
	cl.t.Helper()
	timer := time.NewTimer(liveness)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-cl.in:
			if !ok {
				return websocket.CloseStatus(<-cl.end)
			}
		case <-timer.C:
			cl.t.Fatal("connection not closed in time")
		}
	}
}

var clientSeq atomic.Int64

// connectArgs are sys.connect's args, for a client id of their own.
func connectArgs(role, token string, protocol int) map[string]any {
	a := map[string]any{"protocol": protocol, "client": map[string]any{"id": fmt.Sprintf("test-%d", clientSeq.Add(1)), "version": "1", "platform": "go", "role": role}}
	if token != "" {
		a["auth"] = map[string]any{"username": "", "token": token}
	}
	return a
}

func (e *env) connected(t *testing.T, token string) *client {
	t.Helper()
	cl := e.dial(t, nil)
	if r := cl.call(abi.SysConnect.Name, connectArgs("user", token, 2)); !r.OK {
		t.Fatalf("sys.connect: %+v", r.Error)
	}
	return cl
}

// TestWSHandshake: sys.connect answers each of the seed's error codes,
// and connects with a good token.
func TestWSHandshake(t *testing.T) {
	e := newEnv(t)
	alice := e.token(t, e.Alice, "user")
	svc := e.token(t, e.Alice, "service")
	cases := []struct {
		name string
		args map[string]any
		code int
	}{
		{"protocol 1", connectArgs("user", alice, 1), abi.CodeProtocol},
		{"unknown role", connectArgs("admin", alice, 2), abi.CodeRole},
		{"service token as user", connectArgs("user", svc, 2), abi.CodeRole},
		{"user token as service", connectArgs("service", alice, 2), abi.CodeRole},
		{"bad token", connectArgs("user", "gsv_user_nope", 2), abi.CodeAuth},
		{"no credentials", connectArgs("user", "", 2), abi.CodeAuth},
		{"unknown field", map[string]any{"protocol": 2, "uid": 0}, int(abi.Invalid)},
		{"good", connectArgs("user", alice, 2), 0},
		{"service", connectArgs("service", svc, 2), 0},
	}
	dev := "dev1"
	node, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Alice), abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: &dev})
	if err != nil {
		t.Fatal(err)
	}
	driver := connectArgs("driver", node.Token.Token, 2)
	driver["client"].(map[string]any)["id"] = dev
	otherDev := connectArgs("driver", node.Token.Token, 2)
	cases = append(cases, []struct {
		name string
		args map[string]any
		code int
	}{
		{"driver", driver, 0},
		{"node token for another device", otherDev, abi.CodeAuth},
		{"node token as user", connectArgs("user", node.Token.Token, 2), abi.CodeAuth},
	}...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := e.dial(t, nil)
			r := cl.call(abi.SysConnect.Name, c.args)
			if c.code == 0 {
				var got abi.ConnectResult
				if !r.OK || json.Unmarshal(r.Data, &got) != nil || got.Protocol != 2 || got.Identity.Username != "alice" || len(got.Syscalls) == 0 || got.Server.ConnectionID == "" {
					t.Fatalf("connect: %+v %s", r.Error, r.Data)
				}
				return
			}
			if r.OK || r.Error == nil || r.Error.Code != c.code {
				t.Fatalf("got %+v %s, want code %d", r.Error, r.Data, c.code)
			}
		})
	}
	t.Run("req before connect", func(t *testing.T) {
		cl := e.dial(t, nil)
		if r := cl.call(abi.SysWhoami.Name, nil); r.OK || r.Error.Code != abi.CodeAuth {
			t.Fatalf("got %+v, want 401", r.Error)
		}
	})
}

// TestWSSetupMode: on a state not set up, sys.connect is 425 with next
// sys.setup.
func TestWSSetupMode(t *testing.T) {
	k, err := kernel.Open(kernel.Config{StateDir: t.TempDir(), Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	srv := httptest.NewServer(web.New(web.Options{Kernel: k}))
	t.Cleanup(srv.Close)
	e := &env{srv: srv}
	cl := e.dial(t, nil)
	r := cl.call(abi.SysConnect.Name, connectArgs("user", "gsv_user_x", 2))
	if r.OK || r.Error.Code != int(abi.SetupRequired) || r.Error.Next != abi.SysSetup.Name {
		t.Fatalf("got %+v, want 425 next sys.setup", r.Error)
	}
}

// TestWSCalls: a req/res as the connection's user, a sig of its
// signals, request.cancel and a cancel frame ending a call in flight, a
// body frame filling an args field, and a user who cannot act as another.
func TestWSCalls(t *testing.T) {
	e := newEnv(t)
	cl := e.connected(t, e.token(t, e.Alice, "user"))
	t.Run("req/res", func(t *testing.T) {
		r := cl.call(abi.SysWhoami.Name, nil)
		var who abi.WhoamiResult
		if !r.OK || json.Unmarshal(r.Data, &who) != nil || who.Process.Username != "alice" {
			t.Fatalf("whoami: %+v %s", r.Error, r.Data)
		}
	})
	t.Run("sig", func(t *testing.T) {
		if r := cl.call(abi.SysTokenCreate.Name, map[string]any{"kind": "user"}); !r.OK {
			t.Fatal(r.Error)
		}
		cl.next(func(r res) bool { return r.Type == "sig" && r.Signal == abi.SigTokenCreated.Name })
	})
	for _, how := range []string{"request.cancel", "cancel frame"} {
		t.Run(how, func(t *testing.T) {
			id := cl.req(waitCall.Name, nil)
			// The call is in flight once request.cancel finds it.
			for {
				if how == "cancel frame" {
					cl.send(map[string]any{"type": "cancel", "id": id})
					break
				}
				r := cl.call(abi.RequestCancel.Name, map[string]any{"id": id})
				var got abi.RequestCancelResult
				if !r.OK || json.Unmarshal(r.Data, &got) != nil {
					t.Fatalf("request.cancel: %+v", r.Error)
				}
				if got.Cancelled {
					break
				}
			}
			if r := cl.answer(id); r.OK {
				t.Fatalf("cancelled call answered ok")
			}
		})
	}
	t.Run("inflight bound", func(t *testing.T) {
		// A connection with 32 calls in flight gets 409 for the next,
		// and is still read: cancelling them answers each.
		var ids []string
		for range 32 {
			ids = append(ids, cl.req(waitCall.Name, nil))
		}
		for {
			r := cl.call(waitCall.Name, nil)
			if !r.OK && r.Error.Code == int(abi.Busy) {
				break
			}
		}
		for _, id := range ids {
			cl.send(map[string]any{"type": "cancel", "id": id})
		}
		for _, id := range ids {
			if r := cl.answer(id); r.OK {
				t.Fatalf("cancelled %s answered ok", id)
			}
		}
	})
	t.Run("body frame", func(t *testing.T) {
		key := fmt.Sprintf("users/%d/ai/model", e.Alice.Uid)
		cl.send(map[string]any{"type": "req", "id": "b1", "call": abi.SysConfigSet.Name, "args": map[string]any{"key": key}, "body": "value"})
		cl.sendRaw(websocket.MessageBinary, []byte("model-from-body"))
		if r := cl.answer("b1"); !r.OK {
			t.Fatalf("set with body: %+v", r.Error)
		}
		r := cl.call(abi.SysConfigGet.Name, map[string]any{"key": key})
		if !r.OK || !bytes.Contains(r.Data, []byte("model-from-body")) {
			t.Fatalf("get: %+v %s", r.Error, r.Data)
		}
	})
	t.Run("not as another user", func(t *testing.T) {
		bob := e.connected(t, e.token(t, e.Bob, "user"))
		uid := e.Alice.Uid
		if r := bob.call(abi.SysTokenList.Name, map[string]any{"uid": uid}); r.OK || r.Error.Code != int(abi.Permission) {
			t.Fatalf("bob listed alice's tokens: %+v %s", r.Error, r.Data)
		}
		// alice's token with bob's name does not connect.
		other := e.dial(t, nil)
		a := connectArgs("user", e.token(t, e.Alice, "user"), 2)
		a["auth"].(map[string]any)["username"] = "bob"
		if r := other.call(abi.SysConnect.Name, a); r.OK || r.Error.Code != abi.CodeAuth {
			t.Fatalf("alice's token as bob: %+v", r.Error)
		}
	})
}

// TestWSBadInput: a malformed frame, a frame past the limit and a body
// frame nobody waits for each close their own connection only; a
// cross-site upgrade is refused; revoking the token ends its connection.
func TestWSBadInput(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, e.Alice, "user")
	bystander := e.connected(t, tok)
	cases := []struct {
		name string
		typ  websocket.MessageType
		b    []byte
		want websocket.StatusCode
	}{
		{"not JSON", websocket.MessageText, []byte("hello"), websocket.StatusPolicyViolation},
		{"unknown type", websocket.MessageText, []byte(`{"type":"rpc","id":"1"}`), websocket.StatusPolicyViolation},
		{"no id", websocket.MessageText, []byte(`{"type":"req","call":"sys.whoami"}`), websocket.StatusPolicyViolation},
		{"args not object", websocket.MessageText, []byte(`{"type":"req","id":"1","call":"sys.whoami","args":[1]}`), websocket.StatusPolicyViolation},
		{"stray body", websocket.MessageBinary, []byte("x"), websocket.StatusPolicyViolation},
		{"too large", websocket.MessageText, bytes.Repeat([]byte(" "), 2<<20), websocket.StatusMessageTooBig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := e.connected(t, tok)
			ctx, cancel := context.WithTimeout(context.Background(), liveness)
			defer cancel()
			cl.c.Write(ctx, c.typ, c.b) // a too-large write may fail as the server closes
			if got := cl.closed(); got != c.want {
				t.Fatalf("closed with %v, want %v", got, c.want)
			}
			if r := bystander.call(abi.SysWhoami.Name, nil); !r.OK {
				t.Fatalf("bystander: %+v", r.Error)
			}
		})
	}
	t.Run("cross-site origin", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		defer cancel()
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+web.WSPath,
			&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-site upgrade: %v %v", err, resp)
		}
	})
	t.Run("revoked token", func(t *testing.T) {
		res, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Alice), abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "user"})
		if err != nil {
			t.Fatal(err)
		}
		cl := e.connected(t, res.Token.Token)
		if _, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Alice), abi.SysTokenRevoke, &abi.TokenRevokeArgs{TokenID: res.Token.TokenID}); err != nil {
			t.Fatal(err)
		}
		if got := cl.closed(); got != 4401 {
			t.Fatalf("closed with %v, want 4401", got)
		}
	})
}

// TestLogin: a one-time code signs in once, into an HttpOnly,
// SameSite=Strict cookie that connects /ws; a cross-site sign-in is
// refused.
func TestLogin(t *testing.T) {
	e := newEnv(t)
	code := e.token(t, e.Alice, "user")
	post := func(origin, body string) *http.Response {
		req, _ := http.NewRequest("POST", e.srv.URL+web.LoginPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	body := `{"code":"` + code + `"}`
	if resp := post("https://evil.example", body); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site sign-in: %s", resp.Status)
	}
	if resp := post("", body); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in without Origin: %s", resp.Status)
	}
	resp := post(e.srv.URL, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %s", resp.Status)
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == web.CookieName {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Value == code {
		t.Fatalf("cookie %+v", ck)
	}
	if resp := post(e.srv.URL, body); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use of the link: %s", resp.Status)
	}
	cl := e.dial(t, http.Header{"Cookie": {ck.String()}})
	r := cl.call(abi.SysConnect.Name, connectArgs("user", "", 2))
	var got abi.ConnectResult
	if !r.OK || json.Unmarshal(r.Data, &got) != nil || got.Identity.Username != "alice" {
		t.Fatalf("connect with the cookie: %+v", r.Error)
	}
}

// TestWSFlood: a connection sending frames as fast as it can is read at
// its rate; another user's connection is answered meanwhile.
func TestWSFlood(t *testing.T) {
	e := kerneltest.Open(t)
	srv := httptest.NewServer(web.New(web.Options{Kernel: e.K, FrameRate: 200}))
	t.Cleanup(srv.Close)
	en := &env{Env: e, srv: srv}
	flooder := en.connected(t, en.token(t, e.Alice, "user"))
	bystander := en.connected(t, en.token(t, e.Bob, "user"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		defer cancel()
		for i := range 2000 {
			if flooder.c.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`{"type":"cancel","id":"f%d"}`, i))) != nil {
				return
			}
		}
	}()
	for range 5 {
		if r := bystander.call(abi.SysWhoami.Name, nil); !r.OK {
			t.Fatalf("bystander: %+v", r.Error)
		}
	}
	flooder.c.CloseNow()
	<-done
}

// BenchmarkWSRoundTrip is one sys.whoami request and its answer over
// /ws on loopback.
func BenchmarkWSRoundTrip(b *testing.B) {
	e := kerneltest.Open(b)
	srv := httptest.NewServer(web.New(web.Options{Kernel: e.K, FrameRate: 1 << 30}))
	b.Cleanup(srv.Close)
	res, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Alice), abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "user"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+web.WSPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	rt := func(frame string) []byte {
		if err := c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			b.Fatal(err)
		}
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(msg, []byte(`{"type":"res"`)) {
				return msg
			}
		}
	}
	args, _ := json.Marshal(connectArgs("user", res.Token.Token, 2))
	if msg := rt(`{"type":"req","id":"c","call":"` + abi.SysConnect.Name + `","args":` + string(args) + `}`); !bytes.Contains(msg, []byte(`"ok":true`)) {
		b.Fatalf("connect: %s", msg)
	}
	frame := `{"type":"req","id":"w","call":"` + abi.SysWhoami.Name + `"}`
	b.ResetTimer()
	for b.Loop() {
		rt(frame)
	}
}
