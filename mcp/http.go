package mcp

import (
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// newHTTPClient is the HTTP client of a URL server: it sends headers with
// every request, follows only the redirects checkRedirect allows, and
// dials plain http only to loopback addresses (whatever a name resolved
// to) and never through a proxy.
func newHTTPClient(headers map[string]string) *http.Client {
	secure := http.DefaultTransport.(*http.Transport).Clone()
	plain := http.DefaultTransport.(*http.Transport).Clone()
	plain.Proxy = nil
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, _ := net.SplitHostPort(address)
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("plain http to %s refused: not a loopback address", address)
			}
			return nil
		}}
	plain.DialContext = d.DialContext
	return &http.Client{Transport: &headerTransport{secure: secure, plain: plain, headers: headers}, CheckRedirect: checkRedirect}
}

// headerTransport sends a request over secure (https) or plain (http,
// loopback only) with the server's headers.
type headerTransport struct {
	secure, plain *http.Transport
	headers       map[string]string
}

// RoundTrip implements http.RoundTripper.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var rt *http.Transport
	switch req.URL.Scheme {
	case "https":
		rt = t.secure
	case "http":
		rt = t.plain
	default:
		return nil, fmt.Errorf("scheme %q refused: want https (or http to a loopback address)", req.URL.Scheme)
	}
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return rt.RoundTrip(req)
}

// close drops the idle connections of both transports.
func (t *headerTransport) close() {
	t.secure.CloseIdleConnections()
	t.plain.CloseIdleConnections()
}
