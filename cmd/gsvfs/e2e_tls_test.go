package main_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir and returns their paths.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gsv test kernel"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return cert, key
}

// A kernel listening with TLS: a device and the CLI that trust its
// certificate reach it; a device that does not is refused at the
// handshake, and a plain 9P client gets nothing.
func TestE2ETLS(t *testing.T) {
	requireRoot(t)
	certs := t.TempDir()
	cert, key := selfSigned(t, certs)
	port := freePort(t)
	listen := fmt.Sprintf("tls!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen, args: []string{"--tls-cert", cert, "--tls-key", key}})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	var tok struct {
		Token struct{ Token string }
	}
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": aliceUID}), &tok)
	user := tok.Token.Token
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "laptop"}), &tok)
	node := tok.Token.Token

	env := []string{"GSV_ADDR=" + listen, "GSV_USER=alice", "GSV_TOKEN=" + user, "GSV_TLS_CA=" + cert}
	if r := gsvAs(0, env, "whoami"); r.code != 0 || !strings.HasPrefix(r.stdout, "alice ") {
		t.Fatalf("gsv whoami over TLS: %v", r)
	}
	if r := gsvAs(0, env[:3], "whoami"); r.code == 0 || !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("gsv whoami over TLS without trusting the certificate: %v", r)
	}
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f.txt"), []byte("over tls\n"), 0o644)
	untrusting := startDevice(t, "--kernel", listen, "--id", "laptop", "--token", node, "--root", export)
	waitFor(t, 10*time.Second, "the untrusting device's refusal", func() bool {
		return strings.Contains(untrusting.stderr.String(), "certificate")
	})
	untrusting.kill()
	startDevice(t, "--kernel", listen, "--id", "laptop", "--token", node, "--root", export, "--tls-ca", cert)
	waitFor(t, 15*time.Second, "the device online over TLS", func() bool {
		r := gsvAs(0, env, "call", "fs.read", `{"target":"laptop","path":"f.txt"}`)
		return r.code == 0 && strings.Contains(r.stdout, "over tls")
	})
	// A plain 9P client on the TLS port gets no 9P.
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("\x13\x00\x00\x00\x64\xff\xff\x00\x20\x00\x00\x06\x009P2000"))
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if strings.Contains(string(buf[:n]), "9P2000") {
		t.Fatalf("a plain Tversion on the TLS port got %q", buf[:n])
	}
}

// 9P over a WebSocket: the CLI and a device reach a kernel that listens
// on ws!host!port, as through an HTTP proxy; any other HTTP request is
// refused and the kernel goes on.
func TestE2EWebSocket(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	listen := fmt.Sprintf("ws!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	var tok struct {
		Token struct{ Token string }
	}
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": aliceUID}), &tok)
	env := []string{"GSV_ADDR=" + listen, "GSV_USER=alice", "GSV_TOKEN=" + tok.Token.Token}
	mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "node", "uid": aliceUID, "allowedDeviceId": "laptop"}), &tok)
	if r := gsvAs(0, env, "whoami"); r.code != 0 || !strings.HasPrefix(r.stdout, "alice ") {
		t.Fatalf("gsv whoami over a WebSocket: %v", r)
	}
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f.txt"), []byte("over a websocket\n"), 0o644)
	startDevice(t, "--kernel", listen, "--id", "laptop", "--token", tok.Token.Token, "--root", export)
	waitFor(t, 15*time.Second, "the device online over a WebSocket", func() bool {
		r := gsvAs(0, env, "call", "fs.read", `{"target":"laptop","path":"f.txt"}`)
		return r.code == 0 && strings.Contains(r.stdout, "over a websocket")
	})
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET / answered %s", resp.Status)
	}
	if r := gsvAs(0, env, "whoami"); r.code != 0 || !d.running() {
		t.Fatalf("after a stray request: %v", r)
	}
}

// The OAuth callback is served on the ws!host!port listener beside /9p:
// an answer whose state no sign-in waits for is a 404 page saying so,
// and the kernel goes on.
func TestE2EOAuthCallbackRoute(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	listen := fmt.Sprintf("ws!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen})
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/oauth/callback?state=nobody&code=x", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no sign-in is waiting") {
		t.Fatalf("GET /oauth/callback: %s %s", resp.Status, body)
	}
	if !d.running() {
		t.Fatal("the daemon stopped")
	}
}
