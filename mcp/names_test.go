package mcp

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckURL(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://mcp.example.com/mcp", true},
		{"https://10.0.0.5:8443/", true},
		{"http://127.0.0.1:3001/mcp", true},
		{"http://127.8.9.10/", true},
		{"http://[::1]:80/mcp", true},
		{"http://localhost:3001/mcp", true},
		{"http://LocalHost./mcp", true},
		{"http://api.localhost/mcp", true},
		{"http://mcp.example.com/mcp", false},
		{"http://10.0.0.5/", false},
		{"http://127.0.0.1.example.com/", false},
		{"http://localhost.example.com/", false},
		{"ftp://127.0.0.1/", false},
		{"file:///etc/passwd", false},
		{"https://user:pw@mcp.example.com/", false},
		{"https://", false},
		{"/relative", false},
		{"https://a b/", false},
		{"", false},
	} {
		_, err := checkURL(c.url)
		if (err == nil) != c.ok {
			t.Errorf("checkURL(%q): %v, want ok %v", c.url, err, c.ok)
		}
	}
}

// A redirect may lead to https anywhere, or to plain http on loopback
// only.
func TestCheckRedirect(t *testing.T) {
	for _, c := range []struct {
		to string
		ok bool
	}{
		{"https://elsewhere.example.com/mcp", true},
		{"http://127.0.0.1:9/mcp", true},
		{"http://10.1.2.3/mcp", false},
		{"http://evil.example.com/mcp", false},
	} {
		u, _ := url.Parse(c.to)
		err := checkRedirect(&http.Request{URL: u}, []*http.Request{{}})
		if (err == nil) != c.ok {
			t.Errorf("redirect to %s: %v, want ok %v", c.to, err, c.ok)
		}
	}
	u, _ := url.Parse("https://a.example.com/")
	if err := checkRedirect(&http.Request{URL: u}, make([]*http.Request, maxRedirects)); err == nil {
		t.Error("a redirect past the most allowed")
	}
}

// FuzzServerName: a name checkName takes is one file name of the mount
// (no "/", not "." or "..", no control or space character, valid UTF-8,
// 1 to 128 bytes); fileName makes any text such a name.
func FuzzServerName(f *testing.F) {
	for _, s := range []string{"everything", "a/b", "..", ".", "", "x\x00y", "tab\there", "caf\xc3\xa9", "\xff", "a\u2028b", strings.Repeat("é", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ok := checkName("server", s) == nil
		good := s != "" && len(s) <= maxName && utf8.ValidString(s) && s != "." && s != ".." && !strings.Contains(s, "/") &&
			strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) || r == utf8.RuneError }) < 0
		if ok != good {
			t.Fatalf("checkName(%q) ok=%v, want %v", s, ok, good)
		}
		if n := fileName(s, "alt"); checkName("file", n) != nil {
			t.Fatalf("fileName(%q) = %q, which checkName refuses: %v", s, n, checkName("file", n))
		}
	})
}

// FuzzCheckURL: a URL checkURL takes is https, or http to a loopback
// host, with a host and no user information.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://a.example.com/mcp", "http://127.0.0.1:3001/mcp", "http://localhost/", "http://evil.com/", "http://[::1]/", "http://0x7f.1/", "http://127.1/", "https://u@h/", "javascript:alert(1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := checkURL(s)
		if err != nil {
			return
		}
		if u.User != nil || u.Hostname() == "" {
			t.Fatalf("checkURL(%q) took a URL with user info or no host", s)
		}
		switch u.Scheme {
		case "https":
		case "http":
			if !loopbackHost(u.Hostname()) {
				t.Fatalf("checkURL(%q) took plain http to %q", s, u.Hostname())
			}
		default:
			t.Fatalf("checkURL(%q) took scheme %q", s, u.Scheme)
		}
	})
}
