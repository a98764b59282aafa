package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/mcp"
)

// fakeClock is a clock the test moves forward.
type fakeClock struct{ ahead atomic.Int64 }

func (c *fakeClock) now() time.Time               { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *fakeClock) advance(d time.Duration)      { c.ahead.Add(int64(d)) }
func (c *fakeClock) expired(at time.Time) bool    { return c.now().After(at) }
func (c *fakeClock) in(d time.Duration) time.Time { return c.now().Add(d) }

// authServer is an OAuth authorization server for the tests: metadata
// (RFC 8414), dynamic client registration, authorization code with PKCE
// (S256 only; the "user" consents at once) and refresh. Its tokens
// expire an hour after they are made, on clock.
type authServer struct {
	t     *testing.T
	clock *fakeClock
	srv   *httptest.Server

	mu        sync.Mutex
	codes     map[string]authCode  // code -> what it was issued for
	tokens    map[string]time.Time // access token -> expiry
	refreshes map[string]bool      // refresh tokens alive
	refreshed int                  // refresh grants served
	n         int
	// registered is how many dynamic registrations it served.
	registered int
	// cimd, if not nil, fetches client metadata documents: the server
	// then says it takes them (client_id_metadata_document_supported)
	// and checks a URL client_id against its document at /authorize.
	cimd *http.Client
	// noRegistration drops its registration endpoint.
	noRegistration bool
}

type authCode struct{ challenge, redirect, client, resource string }

func newAuthServer(t *testing.T, clock *fakeClock) *authServer {
	return newAuthServerWith(t, clock, nil, false)
}

// newAuthServerWith is newAuthServer that takes client metadata
// documents fetched with cimd (if not nil), and has no registration
// endpoint if noRegistration.
func newAuthServerWith(t *testing.T, clock *fakeClock, cimd *http.Client, noRegistration bool) *authServer {
	a := &authServer{t: t, clock: clock, codes: map[string]authCode{}, tokens: map[string]time.Time{}, refreshes: map[string]bool{},
		cimd: cimd, noRegistration: noRegistration}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		meta := map[string]any{"issuer": a.srv.URL, "authorization_endpoint": a.srv.URL + "/authorize",
			"token_endpoint": a.srv.URL + "/token", "registration_endpoint": a.srv.URL + "/register",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
			"grant_types_supported": []string{"authorization_code", "refresh_token"}}
		if a.noRegistration {
			delete(meta, "registration_endpoint")
		}
		if a.cimd != nil {
			meta["client_id_metadata_document_supported"] = true
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(meta)
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.registered++
		a.mu.Unlock()
		var meta oauthex.ClientRegistrationMetadata
		json.NewDecoder(r.Body).Decode(&meta)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"client_id": "client-" + fmt.Sprint(len(meta.RedirectURIs)),
			"redirect_uris": meta.RedirectURIs, "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "want response_type=code with an S256 code_challenge", 400)
			return
		}
		if err := a.checkClient(q.Get("client_id"), q.Get("redirect_uri")); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		a.mu.Lock()
		a.n++
		code := fmt.Sprintf("code-%d", a.n)
		a.codes[code] = authCode{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), client: q.Get("client_id"), resource: q.Get("resource")}
		a.mu.Unlock()
		u, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"code": {code}, "state": {q.Get("state")}}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		a.mu.Lock()
		defer a.mu.Unlock()
		fail := func(code string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			json.NewEncoder(w).Encode(map[string]string{"error": code})
		}
		switch r.Form.Get("grant_type") {
		case "authorization_code":
			c, ok := a.codes[r.Form.Get("code")]
			delete(a.codes, r.Form.Get("code"))
			sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || c.redirect != r.Form.Get("redirect_uri") || c.client != r.Form.Get("client_id") {
				fail("invalid_grant")
				return
			}
		case "refresh_token":
			if !a.refreshes[r.Form.Get("refresh_token")] {
				fail("invalid_grant")
				return
			}
			delete(a.refreshes, r.Form.Get("refresh_token"))
			a.refreshed++
		default:
			fail("unsupported_grant_type")
			return
		}
		a.n++
		access, refresh := fmt.Sprintf("access-secret-%d", a.n), fmt.Sprintf("refresh-secret-%d", a.n)
		a.tokens[access] = a.clock.in(time.Hour)
		a.refreshes[refresh] = true
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh})
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// checkClient checks a URL client_id as the MCP authorization spec has
// an authorization server do: it fetches the document at that URL, whose
// client_id must be the URL and whose redirect_uris must hold redirect.
// Another client_id (a registered one) passes.
func (a *authServer) checkClient(clientID, redirect string) error {
	if !strings.HasPrefix(clientID, "https://") {
		return nil
	}
	if a.cimd == nil {
		return fmt.Errorf("client_id %s: this server takes no client metadata documents", clientID)
	}
	resp, err := a.cimd.Get(clientID)
	if err != nil {
		return fmt.Errorf("fetching the client metadata document: %v", err)
	}
	defer resp.Body.Close()
	var doc struct {
		ClientID                string   `json:"client_id"`
		RedirectURIs            []string `json:"redirect_uris"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return fmt.Errorf("the client metadata document: %s", resp.Status)
	}
	if doc.ClientID != clientID || !slices.Contains(doc.RedirectURIs, redirect) || doc.TokenEndpointAuthMethod != "none" {
		return fmt.Errorf("the client metadata document does not match: %+v (client_id %s, redirect_uri %s)", doc, clientID, redirect)
	}
	return nil
}

// valid reports whether an access token is one it made that has not
// expired on its clock.
func (a *authServer) valid(tok string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.tokens[tok]
	return ok && !a.clock.expired(exp)
}

// protectedServer is a streamable HTTP MCP server (the SDK's) that
// demands a bearer token of as, and says so with its protected resource
// metadata; its tool "secret" answers "the treasure".
func protectedServer(t *testing.T, as *authServer) string {
	s := sdk.NewServer(&sdk.Implementation{Name: "protected", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "secret", Description: "tells the treasure to a signed-in caller"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the treasure"}}}, nil, nil
		})
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	endpoint := srv.URL + "/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: endpoint, AuthorizationServers: []string{as.srv.URL}}))
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if !as.valid(tok) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp"})(h))
	return endpoint
}

// A server that answers 401: add answers authenticating with an authUrl;
// the user's browser follows it to the authorization server and back to
// /oauth/callback; the server then connects and a call works. The
// tokens are never answered, bob can neither see nor use alice's, the
// answer cannot be replayed, and an access token about to expire is
// refreshed before its use.
func TestOAuthSignIn(t *testing.T) {
	clock := &fakeClock{}
	s := newSysWith(t, mcp.Options{Now: clock.now})
	as := newAuthServer(t, clock)
	endpoint := protectedServer(t, as)
	cb := httptest.NewServer(mcp.CallbackHandler(s.k))
	t.Cleanup(cb.Close)

	sv := must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "vault", URL: endpoint, CallbackHost: cb.URL}).Server
	if sv.State != abi.McpAuthenticating || sv.AuthURL == nil || !strings.HasPrefix(*sv.AuthURL, as.srv.URL+"/authorize?") {
		t.Fatalf("add: want authenticating with an authUrl: %+v %s", sv, deref(sv.Error))
	}
	au, _ := url.Parse(*sv.AuthURL)
	if got := au.Query().Get("redirect_uri"); got != cb.URL+abi.OAuthCallbackPath {
		t.Fatalf("redirect_uri %q", got)
	}
	// Before the sign-in a call says what is needed.
	if _, err := do(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "vault", Name: "secret"}); err == nil || !strings.Contains(err.Error(), "sign in") {
		t.Fatalf("a call before the sign-in: %v", err)
	}
	pending := must(s, s.alice, abi.SysOauthList, &abi.OAuthListArgs{IncludePending: true})
	if len(pending.Accounts) != 0 || len(pending.Flows) != 1 || pending.Flows[0].Kind != abi.OAuthMcpServer || pending.Flows[0].Provider != "vault" {
		t.Fatalf("pending: %+v", pending)
	}

	// The browser: the authorization server redirects to the callback.
	callbackURL := ""
	browser := &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		callbackURL = req.URL.String()
		return nil
	}}
	resp, err := browser.Get(*sv.AuthURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "signed in to vault") {
		t.Fatalf("callback: %d %s", resp.StatusCode, body)
	}
	r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "vault", Name: "secret"})
	if got := text(t, r); got != "the treasure" {
		t.Fatalf("secret: %q", got)
	}
	list := must(s, s.alice, abi.SysMcpList, &abi.McpListArgs{}).Servers
	if len(list) != 1 || list[0].AuthURL != nil || list[0].State != abi.McpReady || len(list[0].Tools) != 1 {
		t.Fatalf("after the sign-in: %+v", list)
	}

	// Summaries only: no token in any answer, to alice or to root.
	accts := must(s, s.alice, abi.SysOauthList, &abi.OAuthListArgs{IncludePending: true})
	if len(accts.Accounts) != 1 || len(accts.Flows) != 0 || accts.Accounts[0].Metadata.ServerID != sv.ServerID || accts.Accounts[0].ExpiresAt == nil {
		t.Fatalf("alice's accounts: %+v", accts)
	}
	for _, v := range []any{accts, must(s, s.root, abi.SysOauthList, &abi.OAuthListArgs{}), list,
		must(s, s.root, abi.SysConfigGet, &abi.ConfigGetArgs{})} {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), "-secret-") {
			t.Fatalf("a token is shown: %s", b)
		}
	}

	// bob sees none of alice's, forgets none, calls none.
	if got := must(s, s.bob, abi.SysOauthList, &abi.OAuthListArgs{IncludePending: true}); len(got.Accounts) != 0 || len(got.Flows) != 0 {
		t.Fatalf("bob's accounts: %+v", got)
	}
	if _, err := do(s, s.bob, abi.SysOauthList, &abi.OAuthListArgs{Uid: &s.alice.Uid}); abi.Code(err) != 403 {
		t.Fatalf("bob listing alice's: %v", err)
	}
	if got := must(s, s.bob, abi.SysOauthForget, &abi.OAuthForgetArgs{AccountID: accts.Accounts[0].AccountID}); got.Forgotten {
		t.Fatal("bob forgot alice's account")
	}
	if _, err := do(s, s.bob, abi.SysMcpCall, &abi.McpCallArgs{ServerID: sv.ServerID, Name: "secret"}); abi.Code(err) != 404 {
		t.Fatalf("bob calling alice's server: %v", err)
	}
	if _, err := do(s, s.bob, abi.SysOauthCallback, &abi.OAuthCallbackArgs{State: "x"}); abi.Code(err) != 403 {
		t.Fatalf("bob calling the callback syscall: %v", err)
	}

	// The answer is taken once: a replay finds no sign-in.
	if callbackURL == "" {
		t.Fatal("the browser was not redirected")
	}
	resp, err = http.Get(callbackURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("a replayed callback: %d", resp.StatusCode)
	}

	// Two hours later the access token has expired: it is refreshed
	// before its use, and the call works.
	clock.advance(2 * time.Hour)
	r = must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "vault", Name: "secret"})
	if got := text(t, r); got != "the treasure" {
		t.Fatalf("secret after the refresh: %q", got)
	}
	as.mu.Lock()
	refreshed := as.refreshed
	as.mu.Unlock()
	if refreshed != 1 {
		t.Fatalf("refreshes: %d, want 1", refreshed)
	}

	// Forgetting the account: the server needs a sign-in again.
	if got := must(s, s.alice, abi.SysOauthForget, &abi.OAuthForgetArgs{AccountID: accts.Accounts[0].AccountID}); !got.Forgotten {
		t.Fatal("alice could not forget her account")
	}
	sv = must(s, s.alice, abi.SysMcpRefresh, &abi.McpServerArgs{ServerID: "vault"}).Server
	if sv.State != abi.McpAuthenticating || sv.AuthURL == nil {
		t.Fatalf("refresh after forget: %+v %s", sv, deref(sv.Error))
	}
}
