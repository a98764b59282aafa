package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/web"
)

// WebURLKey is the config key holding the web console's URL, which gsv
// login-link prints links of: the daemon sets it when it serves --http.
const webURLKey = "config/web/url"

// webRoutes are the web console's routes on the --http listener l (its
// /ws, sign-in API and pages: package web), and the console's URL, which
// the daemon records under config/web/url for gsv login-link.
func webRoutes(ctx context.Context, k *kernel.Kernel, l net.Listener, o options, log *slog.Logger) (routes []ninep.Route, url string) {
	scheme := "http"
	if o.tlsCert != "" {
		scheme = "https"
	}
	host, port, _ := net.SplitHostPort(l.Addr().String())
	if h, _, err := net.SplitHostPort(o.http); err == nil && h != "" && !net.ParseIP(h).IsUnspecified() {
		host = h
	}
	url = scheme + "://" + net.JoinHostPort(host, port) + "/"
	w := web.New(web.Options{Kernel: k, Version: Version, Logger: log, Secure: o.tlsCert != ""})
	for _, p := range w.Paths() {
		routes = append(routes, ninep.Route{Path: p, Handler: w})
	}
	v, _ := json.Marshal(url)
	if _, err := kernel.Do(ctx, k, k.KernelCaller(), abi.SysConfigSet, &abi.ConfigSetArgs{Key: webURLKey, Value: v}); err != nil {
		log.Warn("web: recording the console's URL", "err", err)
	}
	return routes, url
}

// printLoginLink prints the console's URL and a one-time sign-in link
// (gsv login-link's) as the host user who started the daemon, on stderr:
// what make run shows.
func printLoginLink(ctx context.Context, k *kernel.Kernel, url string, log *slog.Logger) {
	id, err := k.Authenticate(ctx, kernel.Peer{Transport: "9p-unix", HostUID: os.Getuid()})
	if err != nil {
		log.Warn("web: no sign-in link", "err", err)
		return
	}
	label := "login-link"
	exp := time.Now().Add(10 * time.Minute).UnixMilli()
	r, err := kernel.Do(ctx, k, &kernel.Caller{Identity: id}, abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "user", Label: &label, ExpiresAt: &exp})
	if err != nil {
		log.Warn("web: no sign-in link", "err", err)
		return
	}
	fmt.Fprintf(os.Stderr, "web console: %s\nsign in (once, within 10 minutes): %slogin#%s\n", url, url, r.Token.Token)
}
