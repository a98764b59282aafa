package repos

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// HTTPPath is where the daemon's HTTP listener serves git's smart HTTP:
// /git/<owner>/<name>[.git]/info/refs, /git-upload-pack and
// /git-receive-pack.
const HTTPPath = "/git/"

// maxPush bounds a push's request body (its pack).
const maxPush = 1 << 30

// HTTPHandler is git's smart HTTP protocol as a transport onto the
// dispatcher: it authenticates each request with HTTP basic auth whose
// password is a GSV token (the user name is the token's user), and makes
// the Internal repo.upload or repo.receive as that identity, which check
// who may read or write, exactly as every other call does. A request with
// no credentials is answered 401 so that git asks for them.
func HTTPHandler(k *kernel.Kernel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		serveGit(k, w, req)
	})
}

// serveGit serves one smart HTTP request.
func serveGit(k *kernel.Kernel, w http.ResponseWriter, req *http.Request) {
	rest := strings.TrimPrefix(req.URL.Path, HTTPPath)
	var repo, action string
	for _, suf := range []string{"/info/refs", "/git-upload-pack", "/git-receive-pack"} {
		if r, ok := strings.CutSuffix(rest, suf); ok {
			repo, action = strings.TrimSuffix(r, ".git"), suf
			break
		}
	}
	if action == "" || strings.Count(repo, "/") != 1 {
		http.Error(w, "not a git smart HTTP path: /git/<owner>/<repo>/...", http.StatusNotFound)
		return
	}
	service := ""
	switch action {
	case "/info/refs":
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			http.Error(w, "GET info/refs", http.StatusMethodNotAllowed)
			return
		}
		service = req.URL.Query().Get("service")
		if service != "git-upload-pack" && service != "git-receive-pack" {
			http.Error(w, "only the smart protocol is served: ?service=git-upload-pack or git-receive-pack", http.StatusForbidden)
			return
		}
	default:
		if req.Method != http.MethodPost {
			http.Error(w, "POST "+action[1:], http.StatusMethodNotAllowed)
			return
		}
		service = action[1:]
	}
	user, pass, ok := req.BasicAuth()
	if !ok || pass == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="gsv"`)
		http.Error(w, "authentication required: user name and a gsv token as the password", http.StatusUnauthorized)
		return
	}
	id, err := k.Authenticate(req.Context(), kernel.Peer{Transport: "git-http", HostUID: -1, User: user, Secret: []byte(pass)})
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="gsv"`)
		http.Error(w, "authentication failed", http.StatusUnauthorized)
		return
	}
	c := &kernel.Caller{Identity: id}
	out := &trackWriter{w: w}
	a := &abi.RepoWireArgs{Repo: repo, Advertise: action == "/info/refs", Out: out}
	if !a.Advertise {
		if req.Header.Get("Content-Type") != "application/x-"+service+"-request" {
			http.Error(w, "want Content-Type application/x-"+service+"-request", http.StatusBadRequest)
			return
		}
		body := io.Reader(http.MaxBytesReader(w, req.Body, maxPush))
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(body)
			if err != nil {
				http.Error(w, "bad gzip body", http.StatusBadRequest)
				return
			}
			defer zr.Close()
			body = zr
		}
		a.In = body
	}
	w.Header().Set("Cache-Control", "no-cache")
	if a.Advertise {
		w.Header().Set("Content-Type", "application/x-"+service+"-advertisement")
	} else {
		w.Header().Set("Content-Type", "application/x-"+service+"-result")
	}
	call := abi.RepoUpload
	if service == "git-receive-pack" {
		call = abi.RepoReceive
	}
	if _, err := kernel.Do(req.Context(), k, c, call, a); err != nil && !out.wrote {
		w.Header().Del("Content-Type")
		http.Error(w, err.Error(), httpStatus(err))
	}
}

// httpStatus is the HTTP status of a syscall's error.
func httpStatus(err error) int {
	var e *abi.Error
	if errors.As(err, &e) {
		switch e.Kind {
		case abi.Invalid:
			return http.StatusBadRequest
		case abi.Permission:
			return http.StatusForbidden
		case abi.NotExist:
			return http.StatusNotFound
		case abi.Busy:
			return http.StatusConflict
		}
	}
	if errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// trackWriter notes whether any of the answer was written.
type trackWriter struct {
	w     io.Writer
	wrote bool
}

func (t *trackWriter) Write(p []byte) (int, error) {
	t.wrote = true
	return t.w.Write(p)
}
