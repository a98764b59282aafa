package mcp

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// maxName is the longest server or tool name (the spec's tool names are
// at most 128 characters).
const maxName = 128

// checkName checks a server's or a tool's name (what is a file name
// under /mcp): 1 to 128 bytes of UTF-8, not "." or "..", no "/", no
// control or space characters. kind says which name it is, for the
// error.
func checkName(kind, name string) error {
	bad := func(why string) error {
		return abi.E(abi.Invalid, fmt.Sprintf("%s name %q: %s", kind, truncate(name, 64), why))
	}
	switch {
	case name == "":
		return abi.E(abi.Invalid, kind+" name is empty")
	case len(name) > maxName:
		return bad(fmt.Sprintf("longer than %d bytes", maxName))
	case !utf8.ValidString(name):
		return bad("not UTF-8")
	case name == "." || name == "..":
		return bad("not a file name")
	case strings.Contains(name, "/"):
		return bad(`holds "/"`)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.IsSpace(r) || r == utf8.RuneError {
			return bad("holds a control or space character")
		}
	}
	return nil
}

// cut is s cut to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// truncate is s cut to n bytes (a rune boundary), for messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// checkURL checks a server's URL, or one a redirect leads to: absolute,
// https, or http to a loopback host only (localhost or a loopback
// address), no user info. The host's resolved address is checked again
// when an http request dials (loopbackOnly).
func checkURL(raw string) (*url.URL, error) {
	bad := func(why string) error {
		return abi.E(abi.Invalid, fmt.Sprintf("url %q: %s", truncate(raw, 200), why))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad("does not parse")
	}
	if u.User != nil {
		return nil, bad("user information in a URL is refused: give credentials as a header")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, bad("want an https URL (or http to a loopback address)")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, bad("no host")
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return nil, bad("plain http is allowed only to a loopback address (localhost, 127.0.0.1, ::1): use https")
	}
	return u, nil
}

// loopbackHost reports whether host is localhost (or a name under
// .localhost) or a loopback address.
func loopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// maxRedirects is how many redirects a request follows.
const maxRedirects = 10

// checkRedirect is the http.Client's redirect policy: each hop is a URL
// checkURL takes (a redirect to plain http elsewhere than a loopback
// address is refused), at most maxRedirects.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if _, err := checkURL(req.URL.String()); err != nil {
		return fmt.Errorf("redirect refused: %w", err)
	}
	return nil
}
