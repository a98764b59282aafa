package mcpserve

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the daemon's HTTP listener serves MCP.
const Path = "/mcp"

// HTTPOptions configure Handler.
type HTTPOptions struct {
	Options
	// Authenticate returns the Caller of a bearer token: the syscalls
	// of the token's identity through the kernel's dispatcher. An error
	// refuses the request (401). A Caller with a method Done() <-chan
	// struct{} (the token's lease: closed when it is revoked or expires)
	// serves no request once Done is closed.
	Authenticate func(ctx context.Context, token string) (Caller, error)
	// AuthCache is how long a token's Caller serves the token's later
	// requests without Authenticate (as a 9P attach serves a connection's
	// requests): zero is DefaultAuthCache, negative never.
	AuthCache time.Duration
}

// DefaultAuthCache is HTTPOptions.AuthCache's default.
const DefaultAuthCache = 30 * time.Second

// maxAuthCache bounds the tokens whose Callers a Handler keeps.
const maxAuthCache = 1024

// leased is a Caller whose authority can end.
type leased interface{ Done() <-chan struct{} }

// authCache keeps the Callers of the tokens that authenticated lately,
// by the token's SHA-256.
type authCache struct {
	ttl time.Duration
	mu  sync.Mutex // guards m
	m   map[[sha256.Size]byte]authEntry
}

type authEntry struct {
	c     Caller
	until time.Time
}

// get returns the Caller of token if it authenticated within the ttl and
// its lease, if any, has not ended.
func (a *authCache) get(key [sha256.Size]byte) (Caller, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[key]
	if !ok {
		return nil, false
	}
	if time.Now().After(e.until) || ended(e.c) {
		delete(a.m, key)
		return nil, false
	}
	return e.c, true
}

// put keeps c as the Caller of key, making room if need be.
func (a *authCache) put(key [sha256.Size]byte, c Caller) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if len(a.m) >= maxAuthCache {
		for k, e := range a.m {
			if now.After(e.until) || ended(e.c) {
				delete(a.m, k)
			}
		}
		for k := range a.m {
			if len(a.m) < maxAuthCache {
				break
			}
			delete(a.m, k)
		}
	}
	a.m[key] = authEntry{c: c, until: now.Add(a.ttl)}
}

// ended reports whether c's lease has ended.
func ended(c Caller) bool {
	l, ok := c.(leased)
	if !ok || l.Done() == nil {
		return false
	}
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// callerKey is the request context key of the request's Caller.
type callerKey struct{}

// requestCaller is the Caller of the /mcp server: the Caller of the
// request the call came with. The SDK serves each request of a stateless
// handler in a session of its own, connected with the request's context,
// whose values its handlers' contexts carry.
type requestCaller struct{}

func (requestCaller) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok {
		return nil, errors.New("mcpserve: a call without its request's caller")
	}
	return c.Call(ctx, name, args)
}

// Handler serves MCP's streamable HTTP transport, stateless (as the
// protocol of 2026-07-28 is; the SDK answers the older initialize
// handshake too, each request on its own): every request carries a GSV
// token as its bearer (Authorization: Bearer gsv_...), which
// Authenticate checks (or checked within AuthCache, and its lease has
// not ended since); a request with none, or with one that does not
// authenticate, is refused with 401 and a WWW-Authenticate header, and
// nothing runs. A request that passes is served by one server (New)
// whose every call is a syscall as the request's token's identity. A
// body that is not JSON-RPC is a 400 for that request only.
func Handler(o HTTPOptions) (http.Handler, error) {
	s, err := New(requestCaller{}, o.Options)
	if err != nil {
		return nil, err
	}
	auth := o.Authenticate
	if o.AuthCache >= 0 {
		cache := &authCache{ttl: cmp.Or(o.AuthCache, DefaultAuthCache), m: map[[sha256.Size]byte]authEntry{}}
		auth = func(ctx context.Context, token string) (Caller, error) {
			key := sha256.Sum256([]byte(token))
			if c, ok := cache.get(key); ok {
				return c, nil
			}
			c, err := o.Authenticate(ctx, token)
			if err != nil {
				return nil, err
			}
			if ended(c) {
				return nil, errors.New("the token's lease has ended")
			}
			cache.put(key, c)
			return c, nil
		}
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: o.Logger, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gsvfs"`)
			http.Error(w, "unauthorized: send a GSV token (gsv token create) as Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		c, err := auth(r.Context(), token)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gsvfs", error="invalid_token"`)
			http.Error(w, "unauthorized: the token does not authenticate", http.StatusUnauthorized)
			return
		}
		sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}), nil
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
