package mcp

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The OAuth timing.
const (
	// flowTTL is how long a sign-in may take: its URL, then its callback.
	flowTTL = 10 * time.Minute
	// refreshAhead is how long before its expiry an access token is
	// refreshed (when its account has a refresh token).
	refreshAhead = time.Minute
	// oauthTimeout bounds a request to an authorization server.
	oauthTimeout = 30 * time.Second
)

// oauthID is a new id with prefix: the prefix and 16 random base32
// letters.
func oauthID(prefix string) string {
	b := make([]byte, 10)
	rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.EncodeToString(b))
}

// flow is a sign-in under way, as the store keeps it.
type flow struct {
	abi.OAuthFlowSummary
	state, clientSecret, verifier, authURL, serverID string
}

// flowColumns are what scanFlow reads, in its order.
const flowColumns = `flow_id, state, uid, kind, provider, account_key, label, auth_endpoint, token_endpoint, client_id,
	client_secret, redirect_uri, scope, resource, verifier, auth_url, server_id, created_at, expires_at`

// scanFlow reads one flow of flowColumns.
func scanFlow(row rowScanner) (*flow, error) {
	var f flow
	var label, scope, resource sql.NullString
	err := row.Scan(&f.FlowID, &f.state, &f.Uid, &f.Kind, &f.Provider, &f.AccountKey, &label, &f.AuthorizationEndpoint,
		&f.TokenEndpoint, &f.ClientID, &f.clientSecret, &f.RedirectURI, &scope, &resource, &f.verifier, &f.authURL,
		&f.serverID, &f.CreatedAt, &f.ExpiresAt)
	if err != nil {
		return nil, err
	}
	f.Label, f.Scope, f.Resource = nullable(label), nullable(scope), nullable(resource)
	return &f, nil
}

// nullable is s's string, or nil.
func nullable(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

// orNull is s, or NULL for "".
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// account is a signed-in account with its tokens, as the store keeps
// it.
type account struct {
	abi.OAuthAccountSummary
	clientSecret, tokenEndpoint, access, refresh, serverID string
}

// accountColumns are what scanAccount reads, in its order.
const accountColumns = `account_id, uid, kind, provider, account_key, label, scope, resource, client_id, client_secret,
	token_endpoint, token_type, access_token, refresh_token, expires_at, server_id, created_at, updated_at, last_used_at`

// scanAccount reads one account of accountColumns.
func scanAccount(row rowScanner) (*account, error) {
	var a account
	var label, scope, resource sql.NullString
	var expires, used sql.NullInt64
	err := row.Scan(&a.AccountID, &a.Uid, &a.Kind, &a.Provider, &a.AccountKey, &label, &scope, &resource, &a.ClientID,
		&a.clientSecret, &a.tokenEndpoint, &a.TokenType, &a.access, &a.refresh, &expires, &a.serverID, &a.CreatedAt,
		&a.UpdatedAt, &used)
	if err != nil {
		return nil, err
	}
	a.Label, a.Scope, a.Resource = nullable(label), nullable(scope), nullable(resource)
	if expires.Valid {
		a.ExpiresAt = &expires.Int64
	}
	if used.Valid {
		a.LastUsedAt = &used.Int64
	}
	a.Metadata.ServerID = a.serverID
	return &a, nil
}

// checkEndpoint checks an OAuth endpoint of field: https, or http to a
// loopback address, with no user information.
func checkEndpoint(field, raw string) (*url.URL, error) {
	u, err := checkURL(raw)
	if err != nil {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("%s: %v", field, err))
	}
	return u, nil
}

// checkRedirectURI checks a sign-in's redirect URI: a URL checkURL takes
// whose path is the daemon's callback.
func checkRedirectURI(raw string) error {
	u, err := checkEndpoint("redirectUri", raw)
	if err != nil {
		return err
	}
	if u.Path != abi.OAuthCallbackPath || u.RawQuery != "" || u.Fragment != "" {
		return abi.E(abi.Invalid, fmt.Sprintf("redirectUri %q: want the daemon's %s (https://HOST%s)", truncate(raw, 200), abi.OAuthCallbackPath, abi.OAuthCallbackPath))
	}
	return nil
}

// callbackOrigin makes a sys.mcp.add's callbackHost an origin: a host
// (https is meant), or an https URL, or an http URL of a loopback host;
// its path, if any, is dropped.
func callbackOrigin(host string) (string, error) {
	raw := host
	if !strings.Contains(host, "://") {
		raw = "https://" + host
	}
	u, err := checkURL(raw)
	if err != nil {
		return "", abi.E(abi.Invalid, fmt.Sprintf("callbackHost: %v", err))
	}
	return u.Scheme + "://" + u.Host, nil
}

// newFlow keeps a sign-in of uid's and answers its URL: authorization
// code with PKCE (S256), state and verifier random.
func (m *Room) newFlow(ctx context.Context, uid uint32, a *abi.OAuthStartArgs, clientSecret, serverID string) (*flow, error) {
	now := m.now()
	f := &flow{state: rand.Text(), verifier: oauth2.GenerateVerifier(), clientSecret: clientSecret, serverID: serverID}
	key := a.AccountKey
	if key == "" {
		key = "default"
	}
	f.OAuthFlowSummary = abi.OAuthFlowSummary{FlowID: oauthID("oaf_"), Uid: uid, Kind: a.Kind, Provider: a.Provider,
		AccountKey: key, AuthorizationEndpoint: a.AuthorizationEndpoint, TokenEndpoint: a.TokenEndpoint,
		ClientID: a.ClientID, RedirectURI: a.RedirectURI, CreatedAt: now.UnixMilli(), ExpiresAt: now.Add(flowTTL).UnixMilli()}
	if a.Label != "" {
		f.Label = &a.Label
	}
	if a.Scope != "" {
		f.Scope = &a.Scope
	}
	if a.Resource != "" {
		f.Resource = &a.Resource
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(f.verifier)}
	if a.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", a.Resource))
	}
	for k, v := range a.ExtraAuthParams {
		opts = append(opts, oauth2.SetAuthURLParam(k, v))
	}
	f.authURL = f.config("").AuthCodeURL(f.state, opts...)
	_, err := m.st.Exec(ctx, `INSERT INTO mcp_oauth_flows (`+flowColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		f.FlowID, f.state, f.Uid, f.Kind, f.Provider, f.AccountKey, orNull(a.Label), f.AuthorizationEndpoint,
		f.TokenEndpoint, f.ClientID, f.clientSecret, f.RedirectURI, orNull(a.Scope), orNull(a.Resource), f.verifier,
		f.authURL, f.serverID, f.CreatedAt, f.ExpiresAt)
	if err != nil {
		return nil, abi.E(err)
	}
	return f, nil
}

// config is the flow's OAuth client (its client secret, if any, sent in
// the token request's body).
func (f *flow) config(tokenURL string) *oauth2.Config {
	if tokenURL == "" {
		tokenURL = f.TokenEndpoint
	}
	c := &oauth2.Config{ClientID: f.ClientID, ClientSecret: f.clientSecret, RedirectURL: f.RedirectURI,
		Endpoint: oauth2.Endpoint{AuthURL: f.AuthorizationEndpoint, TokenURL: tokenURL, AuthStyle: oauth2.AuthStyleInParams}}
	if f.Scope != nil {
		c.Scopes = strings.Fields(*f.Scope)
	}
	return c
}

// oauthStart is sys.oauth.start: a sign-in of the caller's (root: of
// uid's) with a client the caller registered with the provider.
func (m *Room) oauthStart(ctx context.Context, c *kernel.Caller, a *abi.OAuthStartArgs) (*abi.OAuthStartResult, error) {
	uid, ok := scope(c, a.Uid)
	if !ok {
		return nil, abi.E(abi.Permission, "permission denied: only root may start a sign-in for another uid")
	}
	if _, err := m.k.UserOf(ctx, uid); err != nil {
		return nil, err
	}
	switch a.Kind {
	case abi.OAuthAIProvider, abi.OAuthMcpServer, abi.OAuthGeneric:
	default:
		return nil, abi.E(abi.Invalid, fmt.Sprintf("kind %q: want ai-provider, mcp-server or generic", truncate(a.Kind, 40)))
	}
	if err := checkName("provider", a.Provider); err != nil {
		return nil, err
	}
	if a.AccountKey != "" {
		if err := checkName("accountKey", a.AccountKey); err != nil {
			return nil, err
		}
	}
	if a.ClientID == "" {
		return nil, abi.E(abi.Invalid, "clientId is empty: give the client id you registered with the provider")
	}
	if _, err := checkEndpoint("authorizationEndpoint", a.AuthorizationEndpoint); err != nil {
		return nil, err
	}
	if _, err := checkEndpoint("tokenEndpoint", a.TokenEndpoint); err != nil {
		return nil, err
	}
	if err := checkRedirectURI(a.RedirectURI); err != nil {
		return nil, err
	}
	for k := range a.ExtraAuthParams {
		switch k {
		case "state", "code_challenge", "code_challenge_method", "redirect_uri", "client_id", "response_type":
			return nil, abi.E(abi.Invalid, fmt.Sprintf("extraAuthParams: %s is the sign-in's own", k))
		}
	}
	f, err := m.newFlow(ctx, uid, a, "", "")
	if err != nil {
		return nil, err
	}
	return &abi.OAuthStartResult{AuthorizationURL: f.authURL, Flow: f.OAuthFlowSummary}, nil
}

// oauthList is sys.oauth.list: the caller's accounts (root: uid's, or
// everyone's), never their tokens, and the unexpired flows if asked.
func (m *Room) oauthList(ctx context.Context, c *kernel.Caller, a *abi.OAuthListArgs) (*abi.OAuthListResult, error) {
	where, args := `uid=?`, []any{c.Uid}
	if a.Uid != nil {
		uid, ok := scope(c, a.Uid)
		if !ok {
			return nil, abi.E(abi.Permission, "permission denied: only root may list another uid's accounts")
		}
		args = []any{uid}
	} else if c.IsRoot() {
		where, args = `1=1`, nil
	}
	out := &abi.OAuthListResult{Accounts: []abi.OAuthAccountSummary{}}
	rows, err := m.st.QueryContext(ctx, `SELECT `+accountColumns+` FROM mcp_oauth_accounts WHERE `+where+` ORDER BY uid, provider, account_key`, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	for rows.Next() {
		acc, err := scanAccount(rows)
		if err != nil {
			return nil, abi.E(err)
		}
		out.Accounts = append(out.Accounts, acc.OAuthAccountSummary)
	}
	if err := rows.Err(); err != nil {
		return nil, abi.E(err)
	}
	if !a.IncludePending {
		return out, nil
	}
	out.Flows = []abi.OAuthFlowSummary{}
	frows, err := m.st.QueryContext(ctx, `SELECT `+flowColumns+` FROM mcp_oauth_flows WHERE `+where+` AND expires_at > ? ORDER BY created_at`,
		append(args, m.now().UnixMilli())...)
	if err != nil {
		return nil, abi.E(err)
	}
	defer frows.Close()
	for frows.Next() {
		f, err := scanFlow(frows)
		if err != nil {
			return nil, abi.E(err)
		}
		out.Flows = append(out.Flows, f.OAuthFlowSummary)
	}
	return out, wrap(frows.Err())
}

// oauthForget is sys.oauth.forget: the account and its tokens go. An
// account the caller has not is forgotten:false.
func (m *Room) oauthForget(ctx context.Context, c *kernel.Caller, a *abi.OAuthForgetArgs) (*abi.OAuthForgetResult, error) {
	uid, ok := scope(c, a.Uid)
	if !ok {
		return &abi.OAuthForgetResult{}, nil
	}
	q, args := `DELETE FROM mcp_oauth_accounts WHERE account_id=? AND uid=?`, []any{a.AccountID, uid}
	if c.IsRoot() && a.Uid == nil {
		q, args = `DELETE FROM mcp_oauth_accounts WHERE account_id=?`, []any{a.AccountID}
	}
	res, err := m.st.Exec(ctx, q, args...)
	if err != nil {
		return nil, abi.E(err)
	}
	n, _ := res.RowsAffected()
	return &abi.OAuthForgetResult{Forgotten: n > 0}, nil
}

// oauthCallback is the Internal sys.oauth.callback: the sign-in whose
// state came back is taken (once), its code exchanged for tokens with
// its PKCE verifier, and the account kept for the flow's user. An MCP
// server's sign-in then reconnects the server.
func (m *Room) oauthCallback(ctx context.Context, c *kernel.Caller, a *abi.OAuthCallbackArgs) (*abi.OAuthCallbackResult, error) {
	if a.State == "" {
		return nil, abi.E(abi.Invalid, "no state: this is not the answer to a sign-in")
	}
	var f *flow
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		var err error
		f, err = scanFlow(m.st.TxQueryRow(tx, `SELECT `+flowColumns+` FROM mcp_oauth_flows WHERE state=?`, a.State))
		if err != nil {
			return err
		}
		_, err = m.st.TxExec(tx, `DELETE FROM mcp_oauth_flows WHERE flow_id=?`, f.FlowID)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) || err == nil && f.ExpiresAt <= m.now().UnixMilli() {
		return nil, abi.E(abi.NotExist, "no sign-in is waiting for this answer (it finished, or expired after 10 minutes): start it again")
	}
	if err != nil {
		return nil, abi.E(err)
	}
	if a.Error != "" {
		msg := "the authorization server refused the sign-in: " + truncate(a.Error, 100)
		if a.ErrorDescription != "" {
			msg += ": " + truncate(a.ErrorDescription, 300)
		}
		return nil, abi.E(abi.Permission, msg)
	}
	if a.Code == "" {
		return nil, abi.E(abi.Invalid, "no code in the authorization server's answer")
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(f.verifier)}
	if f.Resource != nil {
		opts = append(opts, oauth2.SetAuthURLParam("resource", *f.Resource))
	}
	xctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, newHTTPClient(nil)), oauthTimeout)
	defer cancel()
	tok, err := f.config("").Exchange(xctx, a.Code, opts...)
	if err != nil {
		return nil, abi.E(abi.Permission, fmt.Sprintf("exchanging the code at %s: %v", f.TokenEndpoint, err))
	}
	acc, err := m.keepAccount(ctx, f, tok)
	if err != nil {
		return nil, err
	}
	if f.serverID != "" {
		if rec, err := m.byID(ctx, f.serverID); err == nil {
			l := m.link(rec)
			l.signedIn()
			m.spawn(func() { l.refresh(l.ctx) })
		}
	}
	return &abi.OAuthCallbackResult{Account: acc.OAuthAccountSummary, ServerID: f.serverID}, nil
}

// expiry is when tok expires on the room's clock (nil: it does not say).
func (m *Room) expiry(tok *oauth2.Token) *int64 {
	if tok.Expiry.IsZero() {
		return nil
	}
	at := m.now().Add(time.Until(tok.Expiry)).UnixMilli()
	return &at
}

// keepAccount keeps the account a flow's sign-in made (another sign-in
// of the same user, kind, provider and key replaces its tokens).
func (m *Room) keepAccount(ctx context.Context, f *flow, tok *oauth2.Token) (*account, error) {
	now := m.now().UnixMilli()
	typ := tok.Type()
	var label, scopeS, resource any
	if f.Label != nil {
		label = *f.Label
	}
	if s, _ := tok.Extra("scope").(string); s != "" {
		scopeS = s
	} else if f.Scope != nil {
		scopeS = *f.Scope
	}
	if f.Resource != nil {
		resource = *f.Resource
	}
	var expires any
	if e := m.expiry(tok); e != nil {
		expires = *e
	}
	id := oauthID("oaa_")
	err := m.st.Tx(ctx, func(tx *kernel.Tx) error {
		_, err := m.st.TxExec(tx, `INSERT INTO mcp_oauth_accounts (account_id, uid, kind, provider, account_key, label, scope, resource,
			client_id, client_secret, token_endpoint, token_type, access_token, refresh_token, expires_at, server_id, created_at, updated_at)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (uid, kind, provider, account_key) DO UPDATE SET label=excluded.label, scope=excluded.scope,
			resource=excluded.resource, client_id=excluded.client_id, client_secret=excluded.client_secret,
			token_endpoint=excluded.token_endpoint, token_type=excluded.token_type, access_token=excluded.access_token,
			refresh_token=excluded.refresh_token, expires_at=excluded.expires_at, server_id=excluded.server_id,
			updated_at=excluded.updated_at`,
			id, f.Uid, f.Kind, f.Provider, f.AccountKey, label, scopeS, resource, f.ClientID, f.clientSecret, f.TokenEndpoint,
			typ, tok.AccessToken, tok.RefreshToken, expires, f.serverID, now, now)
		return err
	})
	if err != nil {
		return nil, abi.E(err)
	}
	return m.accountWhere(ctx, `uid=? AND kind=? AND provider=? AND account_key=?`, f.Uid, f.Kind, f.Provider, f.AccountKey)
}

// accountWhere reads the account where says (errNoAccount if none).
func (m *Room) accountWhere(ctx context.Context, where string, args ...any) (*account, error) {
	a, err := scanAccount(m.st.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM mcp_oauth_accounts WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoAccount
	}
	if err != nil {
		return nil, abi.E(err)
	}
	return a, nil
}

// errNoAccount is what a lookup of an account that is not there returns.
var errNoAccount = errors.New("no such account")

// forgetServer drops the accounts and flows of server id (removed).
func (m *Room) forgetServer(ctx context.Context, id string) error {
	return m.st.Tx(ctx, func(tx *kernel.Tx) error {
		if _, err := m.st.TxExec(tx, `DELETE FROM mcp_oauth_accounts WHERE server_id=?`, id); err != nil {
			return abi.E(err)
		}
		_, err := m.st.TxExec(tx, `DELETE FROM mcp_oauth_flows WHERE server_id=?`, id)
		return wrap(err)
	})
}

// refreshMu serializes the refreshes of the room's tokens, so that two
// requests at once use one refresh token once.
var refreshMu sync.Mutex

// token is server id's access token, refreshed first when it expires
// within refreshAhead (and its account has a refresh token); nil when
// the server has no account. The account's last use is noted.
func (m *Room) token(ctx context.Context, serverID string) (*oauth2.Token, error) {
	refreshMu.Lock()
	defer refreshMu.Unlock()
	a, err := m.accountWhere(ctx, `server_id=? AND kind=?`, serverID, abi.OAuthMcpServer)
	if errors.Is(err, errNoAccount) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := m.now()
	if a.ExpiresAt != nil && a.refresh != "" && now.Add(refreshAhead).UnixMilli() >= *a.ExpiresAt {
		cfg := &oauth2.Config{ClientID: a.ClientID, ClientSecret: a.clientSecret,
			Endpoint: oauth2.Endpoint{TokenURL: a.tokenEndpoint, AuthStyle: oauth2.AuthStyleInParams}}
		rctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, newHTTPClient(nil)), oauthTimeout)
		defer cancel()
		tok, err := cfg.TokenSource(rctx, &oauth2.Token{RefreshToken: a.refresh, Expiry: time.Unix(1, 0)}).Token()
		if err != nil {
			return nil, fmt.Errorf("refreshing its OAuth token: %w", err)
		}
		if tok.RefreshToken == "" {
			tok.RefreshToken = a.refresh
		}
		var expires any
		if e := m.expiry(tok); e != nil {
			expires = *e
		}
		if _, err := m.st.Exec(ctx, `UPDATE mcp_oauth_accounts SET access_token=?, refresh_token=?, token_type=?, expires_at=?, updated_at=?, last_used_at=? WHERE account_id=?`,
			tok.AccessToken, tok.RefreshToken, tok.Type(), expires, now.UnixMilli(), now.UnixMilli(), a.AccountID); err != nil {
			return nil, abi.E(err)
		}
		return tok, nil
	}
	if _, err := m.st.Exec(ctx, `UPDATE mcp_oauth_accounts SET last_used_at=? WHERE account_id=?`, now.UnixMilli(), a.AccountID); err != nil {
		return nil, abi.E(err)
	}
	return &oauth2.Token{AccessToken: a.access, TokenType: a.TokenType}, nil
}

// signIn is the auth.OAuthHandler of a URL server's connection: its
// requests carry the owner's token for the server, and a 401 starts a
// sign-in (the room's, answered at /oauth/callback) whose URL the
// server's summary then shows; the connection fails with needSignIn
// until the user has signed in.
type signIn struct {
	m   *Room
	rec *record
	hc  *http.Client

	mu      sync.Mutex
	asked   bool   // a 401 came
	url     string // the sign-in's URL, once a 401 started one
	failure error  // why a 401's sign-in could not start
}

var _ auth.OAuthHandler = (*signIn)(nil)

// TokenSource implements auth.OAuthHandler: the owner's token for the
// server, if they signed in.
func (h *signIn) TokenSource(context.Context) (oauth2.TokenSource, error) {
	return tokenSource{h}, nil
}

// tokenSource reads (and refreshes) the server's token at each request.
type tokenSource struct{ h *signIn }

// Token implements oauth2.TokenSource; with no account it is an
// invalid_grant error, on which the SDK sends the request without a
// token (and a 401 comes back).
func (t tokenSource) Token() (*oauth2.Token, error) {
	tok, err := t.h.m.token(t.h.m.ctx, t.h.rec.id)
	if err == nil && tok == nil {
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant"}
	}
	return tok, err
}

// Authorize implements auth.OAuthHandler: on a 401 it discovers the
// server's authorization server (its protected resource metadata, then
// the authorization server's metadata), registers gsvfs as a client
// there (dynamic client registration) and keeps a sign-in; then it fails
// the request, so that the connection fails with needSignIn. A 403 that
// is not insufficient_scope is the server's own answer.
func (h *signIn) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return nil
	}
	u, err := h.m.startSignIn(ctx, h.rec, h.hc, resp)
	h.mu.Lock()
	h.asked, h.url, h.failure = true, u, err
	h.mu.Unlock()
	if err != nil {
		return err
	}
	return errSignInNeeded
}

// outcome is what a 401 led to: nil if none came, a *needSignIn with the
// sign-in's URL, or why none could start.
func (h *signIn) outcome() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.asked:
		return nil
	case h.failure != nil:
		return abi.E(abi.Permission, fmt.Sprintf("it answered 401 (it needs an OAuth sign-in), and the sign-in could not start: %v", h.failure))
	default:
		return abi.E(abi.Permission, &needSignIn{url: h.url})
	}
}

// errSignInNeeded is what Authorize fails a request with.
var errSignInNeeded = errors.New("the server needs an OAuth sign-in")

// needSignIn is the error of a connection that waits for its owner's
// sign-in at URL.
type needSignIn struct{ url string }

func (e *needSignIn) Error() string {
	return "the server needs you to sign in: open its authUrl in a browser (" + e.url + ")"
}

// startSignIn starts the sign-in a 401 of server rec asks for, or
// answers the URL of the one under way.
func (m *Room) startSignIn(ctx context.Context, rec *record, hc *http.Client, resp *http.Response) (string, error) {
	var pending string
	err := m.st.QueryRowContext(ctx, `SELECT auth_url FROM mcp_oauth_flows WHERE server_id=? AND expires_at > ? ORDER BY created_at DESC LIMIT 1`,
		rec.id, m.now().UnixMilli()).Scan(&pending)
	if err == nil {
		return pending, nil
	}
	origin := rec.callback
	if origin == "" {
		origin = m.callback
	}
	if origin == "" {
		return "", errors.New("it needs an OAuth sign-in, and this daemon has no callback URL: add the server with callbackHost (the daemon's HTTP address), or run the daemon with --http")
	}
	redirect := origin + abi.OAuthCallbackPath
	ctx, cancel := context.WithTimeout(ctx, oauthTimeout)
	defer cancel()
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	var metaURL, scopes string
	for _, c := range challenges {
		if c.Scheme == "bearer" {
			metaURL, scopes = c.Params["resource_metadata"], c.Params["scope"]
		}
	}
	resource := rec.url
	var prm *oauthex.ProtectedResourceMetadata
	su, _ := url.Parse(rec.url)
	candidates := []string{}
	if metaURL != "" {
		candidates = append(candidates, metaURL)
	}
	candidates = append(candidates, su.Scheme+"://"+su.Host+"/.well-known/oauth-protected-resource/"+strings.TrimLeft(su.Path, "/"))
	for _, c := range candidates {
		if p, err := oauthex.GetProtectedResourceMetadata(ctx, c, rec.url, hc); err == nil && p != nil && len(p.AuthorizationServers) > 0 {
			prm = p
			break
		}
	}
	issuer := su.Scheme + "://" + su.Host
	if prm != nil {
		issuer = prm.AuthorizationServers[0]
		if prm.Resource != "" {
			resource = prm.Resource
		}
		if scopes == "" && len(prm.ScopesSupported) > 0 {
			scopes = strings.Join(prm.ScopesSupported, " ")
		}
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	if err != nil {
		return "", fmt.Errorf("its authorization server %s: %w", issuer, err)
	}
	if asm == nil {
		asm = &oauthex.AuthServerMeta{Issuer: issuer, AuthorizationEndpoint: issuer + "/authorize",
			TokenEndpoint: issuer + "/token", RegistrationEndpoint: issuer + "/register"}
	}
	for _, e := range []struct{ field, u string }{{"authorization_endpoint", asm.AuthorizationEndpoint}, {"token_endpoint", asm.TokenEndpoint}} {
		if _, err := checkEndpoint(e.field, e.u); err != nil {
			return "", fmt.Errorf("its authorization server %s: %w", issuer, err)
		}
	}
	// The client: the daemon's client metadata document where the
	// authorization server takes one (its URL is the client_id; the spec
	// wants an https URL), else a dynamic registration.
	var clientID, clientSecret string
	switch {
	case asm.ClientIDMetadataDocumentSupported && strings.HasPrefix(origin, "https://"):
		clientID = origin + abi.OAuthClientMetadataPath
	case asm.RegistrationEndpoint == "":
		return "", fmt.Errorf("its authorization server %s offers no dynamic client registration, and takes no client metadata document from this daemon (it needs an https callback origin and client_id_metadata_document_supported): sign in with sys.oauth.start and a client registered there", issuer)
	default:
		reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"},
			ResponseTypes: []string{"code"}, ClientName: "gsvfs", Scope: scopes}, hc)
		if err != nil {
			return "", fmt.Errorf("registering with its authorization server %s: %w", issuer, err)
		}
		clientID, clientSecret = reg.ClientID, reg.ClientSecret
	}
	f, err := m.newFlow(ctx, rec.uid, &abi.OAuthStartArgs{Kind: abi.OAuthMcpServer, Provider: rec.name, AccountKey: rec.id,
		AuthorizationEndpoint: asm.AuthorizationEndpoint, TokenEndpoint: asm.TokenEndpoint, ClientID: clientID,
		RedirectURI: redirect, Scope: scopes, Resource: resource}, clientSecret, rec.id)
	if err != nil {
		return "", err
	}
	return f.authURL, nil
}

// ClientMetadata is the daemon's OAuth client metadata document (a
// Client ID Metadata Document) as served at origin: its client_id is
// its own URL, its one redirect URI the origin's callback; gsvfs is a
// public client (no secret) of the authorization-code grant with PKCE.
type ClientMetadata struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// ClientMetadataFor is the document served at origin
// (scheme://host[:port]).
func ClientMetadataFor(origin string) ClientMetadata {
	return ClientMetadata{ClientID: origin + abi.OAuthClientMetadataPath, ClientName: "gsvfs", ClientURI: origin + "/",
		RedirectURIs: []string{origin + abi.OAuthCallbackPath}, GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"}
}

// ClientMetadataHandler is the daemon's GET
// /.well-known/oauth-client/gsv.json: the client metadata document of
// the origin it was asked at (https if the connection is TLS or a proxy
// in front says X-Forwarded-Proto: https; the request's Host), which an
// authorization server fetches when the room signs in with that URL as
// its client_id. It is public and holds nothing of any user's.
func ClientMetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		scheme := "http"
		if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
			scheme = "https"
		}
		u, err := url.Parse(scheme + "://" + r.Host)
		if r.Host == "" || err != nil || u.Host != r.Host || u.User != nil || u.Path != "" {
			http.Error(w, "bad Host", http.StatusBadRequest)
			return
		}
		b, _ := json.MarshalIndent(ClientMetadataFor(scheme+"://"+r.Host), "", "  ")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(append(b, '\n'))
	})
}

// CallbackHandler is the daemon's GET /oauth/callback: it hands the
// authorization server's answer to sys.oauth.callback (as the kernel:
// the flow's state says whose sign-in it is) and answers the browser a
// short page saying how it went.
func CallbackHandler(k *kernel.Kernel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		res, err := kernel.Do(r.Context(), k, k.KernelCaller(), abi.SysOauthCallback, &abi.OAuthCallbackArgs{
			State: q.Get("state"), Code: q.Get("code"), Iss: q.Get("iss"), Error: q.Get("error"), ErrorDescription: q.Get("error_description")})
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			code := abi.Code(err)
			if code < 400 || code > 599 {
				code = http.StatusInternalServerError
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, "gsvfs: the sign-in failed: %v\n", err)
			return
		}
		fmt.Fprintf(w, "gsvfs: signed in to %s. You may close this window.\n", res.Account.Provider)
	})
}
