package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// static is the console: plain ES modules and CSS, served as they are in
// the repository (no build step).
//
//go:embed assets
var static embed.FS

// assets serves the console's files; a path that names no file (a page
// of the console: /, /login, /proc/ID) is index.html, whose script routes
// it.
func assets() http.Handler {
	sub, err := fs.Sub(static, "assets")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
		if p == "" || p == "index.html" {
			serveIndex(w, r, sub)
			return
		}
		if st, err := fs.Stat(sub, p); err != nil || st.IsDir() {
			serveIndex(w, r, sub)
			return
		}
		files.ServeHTTP(w, r)
	})
}

func serveIndex(w http.ResponseWriter, r *http.Request, sub fs.FS) {
	b, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		http.Error(w, "no console", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}
