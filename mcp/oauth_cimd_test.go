package mcp_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/mcp"
)

// The daemon's client metadata document: served at
// /.well-known/oauth-client/gsv.json beside /oauth/callback, its
// client_id its own URL; a sign-in at an authorization server that takes
// such documents uses it as the client_id (no registration), and one at
// a server that does not, or with a callback origin that is not https,
// registers as before.
func TestOAuthClientMetadataDocument(t *testing.T) {
	// The daemon's HTTPS listener: the callback and the document.
	// Its callback hands the answer to the kernel of the case that runs.
	var cur atomic.Pointer[kernel.Kernel]
	mux := http.NewServeMux()
	mux.Handle(abi.OAuthClientMetadataPath, mcp.ClientMetadataHandler())
	mux.HandleFunc(abi.OAuthCallbackPath, func(w http.ResponseWriter, r *http.Request) {
		mcp.CallbackHandler(cur.Load()).ServeHTTP(w, r)
	})
	cb := httptest.NewTLSServer(mux)
	t.Cleanup(cb.Close)

	cases := []struct {
		name           string
		cimd           bool   // the authorization server takes documents
		noRegistration bool   // and has no registration endpoint
		origin         string // the callback origin: "" is cb's (https)
		wantClient     string // the client_id of the sign-in
		wantRegistered int
		wantErr        string // the add's error, for a sign-in that cannot start
	}{
		{name: "document", cimd: true, noRegistration: true, wantClient: cb.URL + abi.OAuthClientMetadataPath},
		{name: "document preferred", cimd: true, wantClient: cb.URL + abi.OAuthClientMetadataPath},
		{name: "registration", wantClient: "client-1", wantRegistered: 1},
		{name: "http origin registers", cimd: true, origin: "http://127.0.0.1:1", wantClient: "client-1", wantRegistered: 1},
		{name: "neither", cimd: true, noRegistration: true, origin: "http://127.0.0.1:1", wantErr: "no dynamic client registration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{}
			s := newSysWith(t, mcp.Options{Now: clock.now})
			cur.Store(s.k)
			var fetch *http.Client
			if tc.cimd {
				fetch = cb.Client()
			}
			as := newAuthServerWith(t, clock, fetch, tc.noRegistration)
			endpoint := protectedServer(t, as)
			// The room goes before the servers it is connected to.
			t.Cleanup(func() { s.room.Close() })
			origin := tc.origin
			if origin == "" {
				origin = cb.URL
			}
			sv := must(s, s.alice, abi.SysMcpAdd, &abi.McpAddArgs{Name: "vault", URL: endpoint, CallbackHost: origin}).Server
			if tc.wantErr != "" {
				if sv.State != abi.McpFailed || !strings.Contains(deref(sv.Error), tc.wantErr) {
					t.Fatalf("add: want failed with %q: %+v %s", tc.wantErr, sv, deref(sv.Error))
				}
				return
			}
			if sv.State != abi.McpAuthenticating || sv.AuthURL == nil {
				t.Fatalf("add: want authenticating: %+v %s", sv, deref(sv.Error))
			}
			au, _ := url.Parse(*sv.AuthURL)
			if got := au.Query().Get("client_id"); got != tc.wantClient {
				t.Fatalf("client_id %q, want %q", got, tc.wantClient)
			}
			as.mu.Lock()
			registered := as.registered
			as.mu.Unlock()
			if registered != tc.wantRegistered {
				t.Fatalf("registrations: %d, want %d", registered, tc.wantRegistered)
			}
			if tc.origin != "" {
				return // a callback nobody serves: the sign-in is not finished
			}
			// The browser signs in; the authorization server checks the
			// document and redirects to the callback; the server connects.
			resp, err := cb.Client().Get(*sv.AuthURL)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), "signed in to vault") {
				t.Fatalf("the sign-in: %d %s", resp.StatusCode, body)
			}
			r := must(s, s.alice, abi.SysMcpCall, &abi.McpCallArgs{ServerID: "vault", Name: "secret"})
			if got := text(t, r); got != "the treasure" {
				t.Fatalf("secret: %q", got)
			}
		})
	}
}

// The document as served: its client_id is its URL at the origin it was
// asked at, its redirect URI that origin's callback; a Host that is not
// a host is a 400, another method a 405.
func TestClientMetadataHandler(t *testing.T) {
	h := mcp.ClientMetadataHandler()
	cases := []struct {
		name, host, proto, method string
		tls                       bool
		wantCode                  int
		wantOrigin                string
	}{
		{name: "https", host: "gsv.example.com", tls: true, method: "GET", wantCode: 200, wantOrigin: "https://gsv.example.com"},
		{name: "behind a proxy", host: "gsv.example.com", proto: "https", method: "GET", wantCode: 200, wantOrigin: "https://gsv.example.com"},
		{name: "loopback", host: "127.0.0.1:8080", method: "GET", wantCode: 200, wantOrigin: "http://127.0.0.1:8080"},
		{name: "a path in Host", host: "evil.example/x", method: "GET", wantCode: 400},
		{name: "user info", host: "u@evil.example", method: "GET", wantCode: 400},
		{name: "POST", host: "gsv.example.com", method: "POST", wantCode: 405},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, abi.OAuthClientMetadataPath, nil)
			req.Host = tc.host
			req.TLS = nil
			if tc.tls {
				req.TLS = &tls.ConnectionState{}
			}
			if tc.proto != "" {
				req.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tc.wantCode {
				t.Fatalf("%d, want %d: %s", w.Code, tc.wantCode, w.Body)
			}
			if tc.wantCode != 200 {
				return
			}
			var doc mcp.ClientMetadata
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			want := mcp.ClientMetadataFor(tc.wantOrigin)
			if doc.ClientID != tc.wantOrigin+abi.OAuthClientMetadataPath || len(doc.RedirectURIs) != 1 ||
				doc.RedirectURIs[0] != tc.wantOrigin+abi.OAuthCallbackPath || doc.TokenEndpointAuthMethod != "none" || doc.ClientName != want.ClientName {
				t.Fatalf("document: %+v", doc)
			}
		})
	}
}
