package mcpserve

import (
	"context"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the daemon's HTTP listener serves MCP.
const Path = "/mcp"

// HTTPOptions configure Handler.
type HTTPOptions struct {
	Options
	// Authenticate returns the Caller of a bearer token: the syscalls
	// of the token's identity through the kernel's dispatcher. An error
	// refuses the request (401).
	Authenticate func(ctx context.Context, token string) (Caller, error)
}

// serverKey is the request context key of the server New made for the
// request's caller.
type serverKey struct{}

// Handler serves MCP's streamable HTTP transport, stateless (as the
// protocol of 2026-07-28 is; the SDK answers the older initialize
// handshake too, each request on its own): every request carries a GSV
// token as its bearer (Authorization: Bearer gsv_...), which
// Authenticate checks; a request with none, or with one that does not
// authenticate, is refused with 401 and a WWW-Authenticate header, and
// nothing runs. A request that passes is served by a server (New) whose
// every call is a syscall as the token's identity. A body that is not
// JSON-RPC is a 400 for that request only.
func Handler(o HTTPOptions) http.Handler {
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s, _ := r.Context().Value(serverKey{}).(*mcp.Server)
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: o.Logger, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gsvfs"`)
			http.Error(w, "unauthorized: send a GSV token (gsv token create) as Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		c, err := o.Authenticate(r.Context(), token)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gsvfs", error="invalid_token"`)
			http.Error(w, "unauthorized: the token does not authenticate", http.StatusUnauthorized)
			return
		}
		s, err := New(c, o.Options)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, s)))
	})
}

// bearer returns the token of a request's Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
