package ninep

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
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
//	tls!host!port        -> tls host:port   (TLS over TCP; see Dialer)
//	ws!host!port         -> ws host:port    (a WebSocket at WSPath)
//	wss!host!port        -> wss host:port   (a WebSocket over TLS)
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
	case "tcp", "net", "tls", "ws", "wss":
		host, port, ok := strings.Cut(rest, "!")
		if !ok || port == "9fs" {
			port = DefaultPort
		}
		if host == "" || port == "" || strings.Contains(port, "!") {
			return "", "", fmt.Errorf("ninep: bad dial string %q", addr)
		}
		if netw == "net" {
			netw = "tcp"
		}
		return netw, net.JoinHostPort(host, port), nil
	}
	return "", "", fmt.Errorf("ninep: unknown network %q in dial string %q", netw, addr)
}

// Dial connects to the 9P server at addr, a Plan 9 dial string or a plain
// unix socket path (see ParseAddr). It does not speak 9P. A tls dial
// string verifies the server against the system's roots; Dialer.Dial
// takes others.
func Dial(addr string) (net.Conn, error) { return Dialer{}.Dial(addr) }

// Dialer dials 9P servers. Its zero value is Dial's.
type Dialer struct {
	// TLS configures a tls!host!port or wss!host!port dial (nil: the
	// system's roots); its ServerName, if empty, is the dial string's host.
	// Other networks ignore it.
	TLS *tls.Config
}

// Dial connects to addr as the package's Dial does, with d's TLS.
func (d Dialer) Dial(addr string) (net.Conn, error) {
	network, address, err := ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	if network != "tls" && network != "ws" && network != "wss" {
		return net.Dial(network, address)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if d.TLS != nil {
		conf = d.TLS.Clone()
	}
	if conf.ServerName == "" {
		conf.ServerName, _, _ = net.SplitHostPort(address)
	}
	if network != "tls" {
		return dialWS(network, address, conf)
	}
	return tls.Dial("tcp", address, conf)
}

// Mount is the package's Mount over a connection d dials.
func (d Dialer) Mount(addr, user string, token []byte) (*client.Fsys, error) {
	nc, err := d.Dial(addr)
	if err != nil {
		return nil, err
	}
	return attach(nc, user, token)
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
	return Dialer{}.Mount(addr, user, token)
}

// attach negotiates 9P2000 on nc and attaches as user (see Mount).
func attach(nc net.Conn, user string, token []byte) (*client.Fsys, error) {
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

// CAConfig is the client TLS configuration that trusts the PEM
// certificates in caFile (a private CA, or a server's self-signed
// certificate) instead of the system's roots; nil for an empty caFile.
func CAConfig(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("ninep: TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ninep: TLS CA %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
