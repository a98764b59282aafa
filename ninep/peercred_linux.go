//go:build linux

package ninep

import (
	"net"
	"syscall"
)

// PeerCred returns the host uid and gid of the process at the other end of
// the unix socket c, as the kernel recorded them when the peer connected
// (SO_PEERCRED). It fails on systems without SO_PEERCRED.
func PeerCred(c *net.UnixConn) (uid, gid int, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, -1, err
	}
	var cred *syscall.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, -1, err
	}
	if serr != nil {
		return -1, -1, serr
	}
	return int(cred.Uid), int(cred.Gid), nil
}
