package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// newKernel opens a kernel on a fresh state, set up with root as the first
// user, plus alice (host uid 1001) and bob (host uid 1002).
func newKernel(t testing.TB) (*Kernel, *Identity, *Identity, *Identity) {
	t.Helper()
	k, err := Open(Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	ctx := context.Background()
	if err := k.EnsureSetup(ctx, "root", 0); err != nil {
		t.Fatal(err)
	}
	root, _ := k.identityForHostUID(ctx, 0)
	for _, u := range []struct {
		name string
		host int
	}{{"alice", 1001}, {"bob", 1002}} {
		h := u.host
		if _, err := k.Call(ctx, &Caller{Identity: root}, "sys.user.add", &abi.UserAddArgs{Username: u.name, HostUID: &h}); err != nil {
			t.Fatal(err)
		}
	}
	alice, _ := k.identityForHostUID(ctx, 1001)
	bob, _ := k.identityForHostUID(ctx, 1002)
	return k, root, alice, bob
}

func frame(t testing.TB, k *Kernel, id *Identity, req string) abi.Response {
	t.Helper()
	var r abi.Response
	out := k.Serve(context.Background(), &Caller{Identity: id}, []byte(req))
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("response %q: %v", out, err)
	}
	return r
}

func TestSetupRequired(t *testing.T) {
	k, err := Open(Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	root, _ := k.identityForHostUID(context.Background(), 0)
	r := frame(t, k, root, `{"call":"sys.config.get","args":{}}`)
	if r.OK || r.Error.Code != 425 {
		t.Fatalf("before setup: %+v", r)
	}
	r = frame(t, k, root, `{"call":"sys.setup","args":{"username":"ann","hostUid":1500}}`)
	if !r.OK {
		t.Fatalf("setup: %+v", r.Error)
	}
	r = frame(t, k, root, `{"call":"sys.setup","args":{"username":"ann2","hostUid":1501}}`)
	if r.OK || r.Error.Code != 409 {
		t.Fatalf("second setup: %+v", r)
	}
	ann, _ := k.identityForHostUID(context.Background(), 1500)
	if ann.Uid != FirstUID || ann.Username != "ann" || ann.Home != "/home/ann" {
		t.Fatalf("first user = %+v", ann)
	}
}

func TestFrames(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	tests := []struct {
		name string
		id   *Identity
		req  string
		ok   bool
		code int
	}{
		{"minimal", alice, `{"call":"sys.whoami"}`, true, 0},
		{"full", alice, `{"type":"req","id":"7","call":"sys.config.get","args":{}}`, true, 0},
		{"unknown call", alice, `{"call":"nope.nope","args":{}}`, false, 400},
		{"internal call", alice, `{"call":"fs.stat","args":{"Path":"home"}}`, false, 400},
		{"malformed", alice, `{"call":`, false, 400},
		{"trailing", alice, `{"call":"sys.whoami"} {}`, false, 400},
		{"args not object", alice, `{"call":"sys.whoami","args":[1]}`, false, 400},
		{"bad args type", alice, `{"call":"sys.config.get","args":{"key":5}}`, false, 400},
		{"unknown field", alice, `{"call":"sys.config.get","args":{"key":"x","uid":1}}`, false, 400},
		{"wrong type", alice, `{"type":"res","call":"sys.whoami"}`, false, 400},
		{"no call", alice, `{"args":{}}`, false, 400},
		{"not root", alice, `{"call":"sys.user.add","args":{"username":"eve"}}`, false, 403},
		{"root may", root, `{"call":"sys.user.add","args":{"username":"eve"}}`, true, 0},
		{"nobody", k.nobody(4242), `{"call":"sys.whoami"}`, false, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := frame(t, k, tt.id, tt.req)
			if r.OK != tt.ok || (!tt.ok && r.Error.Code != tt.code) {
				t.Fatalf("got %+v (error %+v)", r, r.Error)
			}
			if r.Type != "res" {
				t.Fatalf("type %q", r.Type)
			}
		})
	}
	r := frame(t, k, alice, `{"call":"sys.config.set","args":{"key":"ai.model","value":"m","uid":0}}`)
	if r.OK || r.Error.Code != 400 || r.Error.Message != `sys.config.set: unknown field "uid"` {
		t.Fatalf("unknown field: %+v", r.Error)
	}
	if r := frame(t, k, alice, `{"call":"sys.config.get","args":{"key":"ai.model"}}`); strings.Contains(string(mustJSON(t, r.Data)), `"m"`) {
		t.Fatalf("a frame with an unknown field ran: %s", mustJSON(t, r.Data))
	}
	r = frame(t, k, alice, `{"id":"x1","call":"sys.whoami"}`)
	if r.ID != "x1" {
		t.Fatalf("id not echoed: %+v", r)
	}
}

func TestConfigVisibility(t *testing.T) {
	k, root, alice, bob := newKernel(t)
	ctx := context.Background()
	set := func(id *Identity, key, val string) error {
		v, _ := json.Marshal(val)
		_, err := k.Call(ctx, &Caller{Identity: id}, "sys.config.set", &abi.ConfigSetArgs{Key: key, Value: v})
		return err
	}
	if err := set(root, "config/ai/api_key", "sk-secret"); err != nil {
		t.Fatal(err)
	}
	if err := set(alice, "users/1000/ai/model", "m1"); err != nil {
		t.Fatal(err)
	}
	if err := set(alice, "users/1001/ai/model", "m1"); abi.Code(err) != 403 {
		t.Fatalf("alice setting bob's key: %v", err)
	}
	if err := set(alice, "config/ai/provider", "x"); abi.Code(err) != 403 {
		t.Fatalf("alice setting system key: %v", err)
	}
	if err := set(root, "bad key", "x"); abi.Code(err) != 400 {
		t.Fatalf("bad key: %v", err)
	}
	keys := func(id *Identity) []string {
		es, err := k.configGet(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Key)
		}
		return out
	}
	joined := func(s []string) string { return strings.Join(s, ",") }
	if a := joined(keys(alice)); strings.Contains(a, "api_key") || !strings.Contains(a, "users/1000/ai/model") || strings.Contains(a, "sys/setup") {
		t.Fatalf("alice sees %s", a)
	}
	if b := joined(keys(bob)); strings.Contains(b, "users/1000") {
		t.Fatalf("bob sees %s", b)
	}
	if r := joined(keys(root)); !strings.Contains(r, "api_key") || !strings.Contains(r, "users/1000/ai/model") {
		t.Fatalf("root sees %s", r)
	}
	es, _ := k.configGet(ctx, alice, "config/ai")
	for _, e := range es {
		if !strings.HasPrefix(e.Key, "config/ai/") {
			t.Fatalf("prefix get returned %s", e.Key)
		}
	}
}

func TestTokens(t *testing.T) {
	k, root, alice, bob := newKernel(t)
	ctx := context.Background()
	res, err := k.Call(ctx, &Caller{Identity: alice}, "sys.token.create", &abi.TokenCreateArgs{Kind: "user"})
	if err != nil {
		t.Fatal(err)
	}
	tok := res.(*abi.TokenCreateResult).Token
	if !strings.HasPrefix(tok.Token, "gsv_user_") || tok.Uid != alice.Uid {
		t.Fatalf("token %+v", tok)
	}
	var n int
	k.Store.R.QueryRow(`SELECT count(*) FROM tokens WHERE hash=? OR hash=?`, tok.Token, hashToken(tok.Token)).Scan(&n)
	if n != 1 {
		t.Fatal("token not stored (only) as a hash")
	}
	var raw int
	k.Store.R.QueryRow(`SELECT count(*) FROM tokens WHERE hash=?`, tok.Token).Scan(&raw)
	if raw != 0 {
		t.Fatal("raw token stored")
	}
	id, err := k.identityForToken(ctx, tok.Token, "alice")
	if err != nil || id.Uid != alice.Uid {
		t.Fatalf("auth: %v %+v", err, id)
	}
	if _, err := k.identityForToken(ctx, tok.Token, "bob"); err == nil {
		t.Fatal("token accepted for another user")
	}
	if _, err := k.identityForToken(ctx, tok.Token+"x", ""); err == nil {
		t.Fatal("wrong token accepted")
	}
	if _, err := k.Call(ctx, &Caller{Identity: alice}, "sys.token.create", &abi.TokenCreateArgs{Kind: "root"}); abi.Code(err) != 400 {
		t.Fatalf("bad kind: %v", err)
	}
	other := bob.Uid
	if _, err := k.Call(ctx, &Caller{Identity: alice}, "sys.token.create", &abi.TokenCreateArgs{Kind: "user", Uid: &other}); abi.Code(err) != 403 {
		t.Fatalf("alice creating bob's token: %v", err)
	}
	// bob cannot revoke alice's token; alice can; root lists all.
	r, _ := k.Call(ctx, &Caller{Identity: bob}, "sys.token.revoke", &abi.TokenRevokeArgs{TokenID: tok.TokenID})
	if r.(*abi.TokenRevokeResult).Revoked {
		t.Fatal("bob revoked alice's token")
	}
	l, _ := k.Call(ctx, &Caller{Identity: bob}, "sys.token.list", &abi.TokenListArgs{})
	if len(l.(*abi.TokenListResult).Tokens) != 0 {
		t.Fatal("bob sees alice's tokens")
	}
	r, _ = k.Call(ctx, &Caller{Identity: alice}, "sys.token.revoke", &abi.TokenRevokeArgs{TokenID: tok.TokenID})
	if !r.(*abi.TokenRevokeResult).Revoked {
		t.Fatal("alice could not revoke")
	}
	if _, err := k.identityForToken(ctx, tok.Token, ""); err == nil {
		t.Fatal("revoked token accepted")
	}
	l, _ = k.Call(ctx, &Caller{Identity: root}, "sys.token.list", &abi.TokenListArgs{})
	ts := l.(*abi.TokenListResult).Tokens
	if len(ts) != 1 || ts[0].Token != "" || ts[0].RevokedAt == nil {
		t.Fatalf("root list %+v", ts)
	}
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"key":"a","value":1}`, `{"Key":"a"}`, `{"uid":1}`, `{"key":"a","key":"b"}`, `{"value":{"uid":1}}`, `{} {}`, `[1]`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a abi.ConfigSetArgs
		err := DecodeArgs(b, &a)
		if err != nil {
			if abi.Code(err) != 400 {
				t.Fatalf("refusal %v is not a 400", err)
			}
			return
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(b, &fields) != nil {
			return // null or empty: nothing to check
		}
		for name := range fields {
			if !strings.EqualFold(name, "key") && !strings.EqualFold(name, "value") {
				t.Fatalf("accepted %q with the unknown field %q", b, name)
			}
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"call":"sys.whoami"}`, `{"type":"req","id":"1","call":"x","args":{}}`, `{"call":"x","args":[]}`, `{`, `null`, `"x"`} {
		f.Add([]byte(s))
	}
	k, _, alice, _ := newKernel(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := abi.DecodeRequest(b)
		if err == nil && r.Call == "" {
			t.Fatal("accepted a request with no call")
		}
		out := k.Serve(context.Background(), &Caller{Identity: alice}, b)
		var resp abi.Response
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("response is not JSON: %q", out)
		}
		if resp.Type != "res" || (!resp.OK && resp.Error == nil) {
			t.Fatalf("bad response %q", out)
		}
	})
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDottedConfigKeys(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	ctx := context.Background()
	set := func(id *Identity, key, val string) error {
		v, _ := json.Marshal(val)
		_, err := k.Call(ctx, &Caller{Identity: id}, "sys.config.set", &abi.ConfigSetArgs{Key: key, Value: v})
		return err
	}
	get := func(id *Identity, key string) []ConfigEntry {
		res, err := k.Call(ctx, &Caller{Identity: id}, "sys.config.get", &abi.ConfigGetArgs{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return res.(*abi.ConfigGetResult).Entries
	}
	if err := set(root, "ai.provider", "openai"); err != nil {
		t.Fatal(err)
	}
	if es := get(root, "config/ai/provider"); len(es) != 1 || es[0].Value != "openai" {
		t.Fatalf("root ai.provider: %v", es)
	}
	if es := get(alice, "ai.provider"); len(es) != 1 || es[0].Value != "openai" {
		t.Fatalf("alice reads system ai.provider: %v", es)
	}
	if err := set(alice, "ai.model", "small"); err != nil {
		t.Fatal(err)
	}
	if es := get(alice, "users/1000/ai/model"); len(es) != 1 || es[0].Value != "small" {
		t.Fatalf("alice ai.model: %v", es)
	}
	if es := get(alice, "ai.model"); len(es) != 1 || es[0].Value != "small" {
		t.Fatalf("alice reads her own ai.model: %v", es)
	}
	if err := set(alice, "server.name", "x"); abi.Code(err) != 403 {
		t.Fatalf("alice server.name: %v", err)
	}
}

// The hooks of OnUserCreated run, in order, inside the transaction that
// creates the user (sys.setup's first user, sys.user.add): they see the
// user's row, their writes are committed with it, and an error from one
// rolls the user and every write of the hooks back.
func TestOnUserCreated(t *testing.T) {
	k, err := Open(Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	if _, err := k.Store.Exec(ctx, `CREATE TABLE hook_log(uid INTEGER, username TEXT, hook INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		k.OnUserCreated(func(tx *Tx, u *User) error {
			var name string
			if err := tx.QueryRow(`SELECT username FROM users WHERE uid=?`, u.Uid).Scan(&name); err != nil || name != u.Username {
				return fmt.Errorf("hook %d: user %d in the transaction: %q, %v", i, u.Uid, name, err)
			}
			if _, err := tx.Exec(`INSERT INTO hook_log VALUES(?,?,?)`, u.Uid, u.Username, i); err != nil {
				return err
			}
			if i == 2 && u.Username == "mallory" {
				return abi.E(abi.Invalid, "refused by the hook")
			}
			return nil
		})
	}
	root, _ := k.identityForHostUID(ctx, 0)
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := k.Store.R.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		name, req string
		ok        bool
		uid       uint32
	}{
		{"setup's first user", `{"call":"sys.setup","args":{"username":"ann","hostUid":1500}}`, true, 1000},
		{"sys.user.add", `{"call":"sys.user.add","args":{"username":"carl"}}`, true, 1001},
		{"refused by a hook", `{"call":"sys.user.add","args":{"username":"mallory","uid":1500}}`, false, 1500},
	}
	for _, tc := range tests {
		r := frame(t, k, root, tc.req)
		if r.OK != tc.ok {
			t.Fatalf("%s: %+v", tc.name, r)
		}
		want := 0
		if tc.ok {
			want = 2
		} else if r.Error.Code != 400 || !strings.Contains(r.Error.Message, "refused by the hook") {
			t.Fatalf("%s: error %+v", tc.name, r.Error)
		}
		if n := count(`SELECT count(*) FROM hook_log WHERE uid=?`, tc.uid); n != want {
			t.Fatalf("%s: %d hook rows, want %d", tc.name, n, want)
		}
		if n := count(`SELECT count(*) FROM users WHERE uid=?`, tc.uid); n != want/2 {
			t.Fatalf("%s: %d user rows", tc.name, n)
		}
	}
}
