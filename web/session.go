package web

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// CookieName is the session cookie: a user token made for the browser,
// HttpOnly, SameSite=Strict, Path=/, Secure on HTTPS.
const CookieName = "gsv_session"

// SessionLabel is the label of the tokens sign-in makes.
const SessionLabel = "web session"

// loginRequest is /api/login's body: a one-time link's Code, which the
// sign-in revokes, or a Token the user keeps.
type loginRequest struct {
	Code  string `json:"code,omitempty"`
	Token string `json:"token,omitempty"`
}

// loginResponse is /api/login's answer.
type loginResponse struct {
	Username  string `json:"username"`
	ExpiresAt int64  `json:"expiresAt"`
}

// login serves POST /api/login: it authenticates the code or token as a
// user, makes a session token as that user (sys.token.create, narrowed
// as the code was), revokes a code (sys.token.revoke: a link signs in
// once) and sets the session cookie. A cross-site request (its Origin
// not this host's), a body that is not JSON, or credentials that do not
// authenticate change nothing.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := s.sameOrigin(r); err != nil {
		httpError(w, http.StatusForbidden, err.Error())
		return
	}
	var req loginRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || (req.Code == "") == (req.Token == "") {
		httpError(w, http.StatusBadRequest, "want {\"code\":C} or {\"token\":T}")
		return
	}
	secret := req.Code + req.Token
	k := s.o.Kernel
	ctx := r.Context()
	id, err := k.Authenticate(ctx, kernel.Peer{Transport: "web", HostUID: -1, Secret: []byte(secret)})
	if err != nil {
		httpError(w, http.StatusUnauthorized, "sign-in failed: the link or token is not valid (a link signs in once)")
		return
	}
	if idRole(id) != "user" {
		httpError(w, http.StatusForbidden, "sign-in needs a user token")
		return
	}
	caller := &kernel.Caller{Identity: id}
	label := SessionLabel
	exp := time.Now().Add(s.o.SessionTTL).UnixMilli()
	made, err := kernel.Do(ctx, k, caller, abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "user", Label: &label, ExpiresAt: &exp, Process: id.Process})
	if err != nil {
		httpError(w, http.StatusForbidden, err.Error())
		return
	}
	if req.Code != "" {
		reason := "login link used"
		tokID, _ := strings.CutPrefix(id.Grant(), "token ")
		res, err := kernel.Do(ctx, k, caller, abi.SysTokenRevoke, &abi.TokenRevokeArgs{TokenID: tokID, Reason: &reason})
		if err != nil || !res.Revoked {
			// Another sign-in used the link first: this one signs in not.
			reason = "login link raced"
			kernel.Do(ctx, k, caller, abi.SysTokenRevoke, &abi.TokenRevokeArgs{TokenID: made.Token.TokenID, Reason: &reason})
			httpError(w, http.StatusUnauthorized, "sign-in failed: the link was used already")
			return
		}
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: made.Token.Token, Path: "/",
		Expires: time.UnixMilli(exp), HttpOnly: true, Secure: s.o.Secure || r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	writeJSON(w, loginResponse{Username: id.Username, ExpiresAt: exp})
}

// logout serves POST /api/logout: it revokes the session's token (every
// connection of it ends) and clears the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := s.sameOrigin(r); err != nil {
		httpError(w, http.StatusForbidden, err.Error())
		return
	}
	clear := &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.o.Secure || r.TLS != nil, SameSite: http.SameSiteStrictMode}
	ck, err := r.Cookie(CookieName)
	if err == nil && ck.Value != "" {
		k := s.o.Kernel
		if id, err := k.Authenticate(r.Context(), kernel.Peer{Transport: "web", HostUID: -1, Secret: []byte(ck.Value)}); err == nil {
			reason := "signed out"
			tokID, _ := strings.CutPrefix(id.Grant(), "token ")
			kernel.Do(r.Context(), k, &kernel.Caller{Identity: id}, abi.SysTokenRevoke, &abi.TokenRevokeArgs{TokenID: tokID, Reason: &reason})
		}
	}
	http.SetCookie(w, clear)
	writeJSON(w, struct{}{})
}

// sameOrigin is the CSRF check of the sign-in API: the request is JSON
// (a cross-site form cannot send it without a preflight this server
// never answers) and its Origin is this host's or one of OriginPatterns.
func (s *Server) sameOrigin(r *http.Request) error {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		return errors.New("want Content-Type application/json")
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return errors.New("no Origin header: sign in from the console's page")
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return errors.New("bad Origin header")
	}
	if strings.EqualFold(u.Host, r.Host) {
		return nil
	}
	for _, p := range s.o.OriginPatterns {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return nil
		}
	}
	return errors.New("cross-site request refused: origin " + o + " is not " + r.Host)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
