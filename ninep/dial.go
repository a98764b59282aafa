package ninep

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"9fans.net/go/plan9/client"
)

// DefaultPort is the 9P port used by "tcp!host" dial strings.
const DefaultPort = "564"

// ParseAddr splits a Plan 9 dial string into a network and an address for
// net.Dial:
//
//	unix!/path/to/sock   -> unix /path/to/sock
//	tcp!host!port        -> tcp host:port   ("9fs" means 564)
//	tcp!host             -> tcp host:564
//	net!host[!port]      -> as tcp
//	/path/to/sock        -> unix /path/to/sock (anything without '!')
//
// It fails on an empty address or an unknown network.
func ParseAddr(addr string) (network, address string, err error) {
	if addr == "" {
		return "", "", errors.New("ninep: empty dial string")
	}
	if !strings.Contains(addr, "!") {
		return "unix", addr, nil
	}
	netw, rest, _ := strings.Cut(addr, "!")
	switch netw {
	case "unix":
		if rest == "" {
			return "", "", fmt.Errorf("ninep: dial string %q has no path", addr)
		}
		return "unix", rest, nil
	case "tcp", "net":
		host, port, ok := strings.Cut(rest, "!")
		if !ok || port == "9fs" {
			port = DefaultPort
		}
		if host == "" || port == "" || strings.Contains(port, "!") {
			return "", "", fmt.Errorf("ninep: bad dial string %q", addr)
		}
		return "tcp", net.JoinHostPort(host, port), nil
	}
	return "", "", fmt.Errorf("ninep: unknown network %q in dial string %q", netw, addr)
}

// Dial connects to the 9P server at addr, a Plan 9 dial string or a plain
// unix socket path (see ParseAddr). It does not speak 9P.
func Dial(addr string) (net.Conn, error) {
	network, address, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	return net.Dial(network, address)
}

// Mount dials addr (see Dial), negotiates 9P2000 and attaches as user with
// the empty aname. If token is not nil it first makes an auth fid (Tauth),
// writes token to it and attaches through it; the auth fid is clunked after
// the attach. With a nil token the attach uses NOFID, which the server
// accepts only if it can trust the transport (a unix socket peer).
//
// On success the connection belongs to the returned Fsys: it closes when
// the Fsys and every fid obtained from it are closed. On failure the
// connection is closed.
func Mount(addr, user string, token []byte) (*client.Fsys, error) {
	nc, err := Dial(addr)
	if err != nil {
		return nil, err
	}
	c, err := client.NewConn(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	var afid *client.Fid
	if token != nil {
		afid, err = c.Auth(user, "")
		if err != nil {
			c.Close()
			return nil, err
		}
		if _, err := afid.Write(token); err != nil {
			afid.Close()
			c.Close()
			return nil, err
		}
	}
	fsys, err := c.Attach(afid, user, "")
	if afid != nil {
		afid.Close()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Release()
	return fsys, nil
}
