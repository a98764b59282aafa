//go:build !linux

package ninep

import (
	"errors"
	"net"
)

// PeerCred returns the host uid and gid of the process at the other end of
// the unix socket c, as the kernel recorded them when the peer connected
// (SO_PEERCRED). It fails on systems without SO_PEERCRED, such as this one.
func PeerCred(c *net.UnixConn) (uid, gid int, err error) {
	return -1, -1, errors.New("ninep: peer credentials are not supported on this system")
}
