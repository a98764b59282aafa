package abi

// The OAuth domain (seed 003 sys.oauth.*): authorization-code + PKCE
// sign-ins of a user's, and the accounts they leave. The mcp room keeps
// them (an MCP server that answers 401 signs in this way too). No call
// ever answers an access or a refresh token: they are their owner's
// secrets, used by the daemon on their behalf.

// OAuth connection kinds (OAuthFlowSummary.Kind), the seed's.
const (
	OAuthAIProvider = "ai-provider"
	OAuthMcpServer  = "mcp-server"
	OAuthGeneric    = "generic"
)

// OAuthCallbackPath is the HTTP path of the daemon's OAuth callback: a
// sign-in's redirect URI is <origin>/oauth/callback.
const OAuthCallbackPath = "/oauth/callback"

// OAuthClientMetadataPath is the HTTP path of the daemon's OAuth client
// metadata document (a Client ID Metadata Document, the MCP
// authorization spec of 2025-11-25): gsvfs's client_id at an
// authorization server that supports them is <origin> + this path.
const OAuthClientMetadataPath = "/.well-known/oauth-client/gsv.json"

// OAuthFlowSummary is the seed's OAuthFlowSummary: a sign-in started and
// not finished yet (it ends at ExpiresAt). Times are Unix milliseconds.
type OAuthFlowSummary struct {
	FlowID                string  `json:"flowId"`
	Uid                   uint32  `json:"uid"`
	Kind                  string  `json:"kind"`
	Provider              string  `json:"provider"`
	AccountKey            string  `json:"accountKey"`
	Label                 *string `json:"label"`
	AuthorizationEndpoint string  `json:"authorizationEndpoint"`
	TokenEndpoint         string  `json:"tokenEndpoint"`
	ClientID              string  `json:"clientId"`
	RedirectURI           string  `json:"redirectUri"`
	Scope                 *string `json:"scope"`
	Resource              *string `json:"resource"`
	CreatedAt             int64   `json:"createdAt"`
	ExpiresAt             int64   `json:"expiresAt"`
}

// OAuthAccountSummary is the seed's OAuthAccountSummary: a signed-in
// account, without its tokens. ExpiresAt is when its access token
// expires (null: not said).
type OAuthAccountSummary struct {
	AccountID  string               `json:"accountId"`
	Uid        uint32               `json:"uid"`
	Kind       string               `json:"kind"`
	Provider   string               `json:"provider"`
	AccountKey string               `json:"accountKey"`
	Label      *string              `json:"label"`
	Scope      *string              `json:"scope"`
	Resource   *string              `json:"resource"`
	ClientID   string               `json:"clientId"`
	TokenType  string               `json:"tokenType"`
	ExpiresAt  *int64               `json:"expiresAt"`
	CreatedAt  int64                `json:"createdAt"`
	UpdatedAt  int64                `json:"updatedAt"`
	LastUsedAt *int64               `json:"lastUsedAt"`
	Metadata   OAuthAccountMetadata `json:"metadata"`
}

// OAuthAccountMetadata is what an account is for (the seed's metadata
// object): ServerID for an MCP server's account.
type OAuthAccountMetadata struct {
	ServerID string `json:"serverId,omitempty"`
}

// OAuthStartArgs are sys.oauth.start's args: a sign-in of Kind with
// Provider (AccountKey tells two accounts of one provider apart; default
// "default") at AuthorizationEndpoint and TokenEndpoint (https, or http
// to a loopback address) as the client ClientID registered with
// RedirectURI (whose path is /oauth/callback). Root may start one for
// another Uid.
type OAuthStartArgs struct {
	Uid                   *uint32           `json:"uid,omitempty"`
	Kind                  string            `json:"kind"`
	Provider              string            `json:"provider"`
	AccountKey            string            `json:"accountKey,omitempty"`
	Label                 string            `json:"label,omitempty"`
	AuthorizationEndpoint string            `json:"authorizationEndpoint"`
	TokenEndpoint         string            `json:"tokenEndpoint"`
	ClientID              string            `json:"clientId"`
	RedirectURI           string            `json:"redirectUri"`
	Scope                 string            `json:"scope,omitempty"`
	Resource              string            `json:"resource,omitempty"`
	ExtraAuthParams       map[string]string `json:"extraAuthParams,omitempty"`
}

// OAuthStartResult is sys.oauth.start's result: the URL the user opens
// in a browser, and the pending flow.
type OAuthStartResult struct {
	AuthorizationURL string           `json:"authorizationUrl"`
	Flow             OAuthFlowSummary `json:"flow"`
}

// OAuthListArgs are sys.oauth.list's args: root may name a Uid (none:
// every user's); IncludePending adds the unexpired flows.
type OAuthListArgs struct {
	Uid            *uint32 `json:"uid,omitempty"`
	IncludePending bool    `json:"includePending,omitempty"`
}

// OAuthListResult is sys.oauth.list's result.
type OAuthListResult struct {
	Accounts []OAuthAccountSummary `json:"accounts"`
	Flows    []OAuthFlowSummary    `json:"flows,omitempty"`
}

// OAuthForgetArgs are sys.oauth.forget's args.
type OAuthForgetArgs struct {
	AccountID string  `json:"accountId"`
	Uid       *uint32 `json:"uid,omitempty"`
}

// OAuthForgetResult is sys.oauth.forget's result: false for an account
// the caller has not.
type OAuthForgetResult struct {
	Forgotten bool `json:"forgotten"`
}

// OAuthCallbackArgs are the query of a GET /oauth/callback, as the
// authorization server redirected the user's browser there.
type OAuthCallbackArgs struct {
	State            string `json:"state"`
	Code             string `json:"code,omitempty"`
	Iss              string `json:"iss,omitempty"`
	Error            string `json:"error,omitempty"`
	ErrorDescription string `json:"errorDescription,omitempty"`
}

// OAuthCallbackResult is what a finished sign-in made: the account, and
// the MCP server it is for ("" for none).
type OAuthCallbackResult struct {
	Account  OAuthAccountSummary `json:"account"`
	ServerID string              `json:"serverId,omitempty"`
}
