package main

import (
	"errors"
	"fmt"
	"syscall"

	"gsvfs.dev/gsvfs/ninep"
)

// needToken refuses, before dialing, an address whose listener takes only
// token attaches (every one but a unix socket) when no token is set: the
// daemon would refuse the attach with less to say about it.
func needToken(addr string, token []byte) error {
	network, _, err := ninep.ParseAddr(addr)
	if err != nil || network == "unix" || token != nil {
		return nil
	}
	return fmt.Errorf("connect %s: a %s listener attaches only with a token: set GSV_TOKEN "+
		"(make one on the daemon's machine with `gsv token create --kind user`; GSV_USER names its user)", addr, network)
}

// connectError is the error of a failed connection to the daemon at
// addr: the dial's own, and, when nothing listens there (no socket, a
// stale socket, a refused connection), how to start a daemon or point
// gsv at the one that runs.
func connectError(addr string, err error) error {
	err = fmt.Errorf("connect %s: %w", addr, err)
	if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) {
		return err
	}
	network, _, _ := ninep.ParseAddr(addr)
	if network == "unix" {
		return fmt.Errorf("%w\nno daemon is running there. Start one with `make run` in a clone of gsvfs "+
			"(or `gsvfs mount DIR`), or point gsv at the one that runs: GSV_STATE=DIR (its state directory; "+
			"the socket is DIR/9p.sock) or GSV_ADDR=unix!PATH, tcp!HOST!PORT, tls!HOST!PORT", err)
	}
	return fmt.Errorf("%w\nno daemon listens there. Start one with `gsvfs mount DIR --listen %s` "+
		"(`make run ARGS='--listen %s'`), or set GSV_ADDR to the address it serves", err, addr, addr)
}
