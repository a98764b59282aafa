package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"

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
