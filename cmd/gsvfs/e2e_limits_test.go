package main_test

// The 9P server's limits, as users meet them: a host uid (or token) holds
// a bounded number of connections and fids, a connection that does not
// attach in time is closed, a host uid with no GSV account attaches
// nothing, and a token's sessions end when it is revoked or expires.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/ninep"
)

// holdEnv makes the test binary a helper that attaches to a 9P address n
// times and holds the connections until its stdin closes:
// "addr<TAB>n".
const holdEnv = "GSV_E2E_HOLD"

// holdConns is the helper of holdEnv. It prints "held N", or "error: ..."
// at the first attach that fails.
func holdConns(spec string) int {
	addr, ns, _ := strings.Cut(spec, "\t")
	n, err := strconv.Atoi(ns)
	if err != nil {
		fmt.Println("error: bad spec", spec)
		return 2
	}
	var held []*client.Fsys
	for range n {
		fsys, err := ninep.Mount(addr, "", nil)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		held = append(held, fsys)
	}
	fmt.Println("held", len(held))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

var (
	helperOnce sync.Once
	helperBin  string
	helperErr  error
)

// helperBinary returns a copy of the test binary that other host uids may
// run (the go test build directory is private).
func helperBinary(t testing.TB) string {
	t.Helper()
	helperOnce.Do(func() {
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			helperErr = err
			return
		}
		helperBin = binDir + "/e2e-helper"
		helperErr = os.WriteFile(helperBin, b, 0o755)
	})
	if helperErr != nil {
		t.Fatalf("copy the test binary: %v", helperErr)
	}
	return helperBin
}

// holdAs starts the holdEnv helper as host uid uid, waits until it holds n
// connections to addr, and returns a function that lets them go.
func holdAs(t *testing.T, uid int, addr string, n int) (release func()) {
	t.Helper()
	u := strconv.Itoa(uid)
	cmd := exec.Command("setpriv", "--reuid", u, "--regid", u, "--clear-groups", helperBinary(t))
	cmd.Dir = "/"
	cmd.Env = []string{holdEnv + "=" + addr + "\t" + strconv.Itoa(n), raceEnv}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	release = func() {
		stdin.Close()
		cmd.Wait()
	}
	t.Cleanup(release)
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != fmt.Sprintf("held %d", n) {
		t.Fatalf("helper as uid %d: %q", uid, sc.Text())
	}
	return release
}

// TestE2EConnectionLimits: one host uid at its connection cap is told so,
// and does not stop another uid from connecting, writing and reading; a
// uid with no GSV account attaches nothing; connections that do not attach
// are closed at the deadline, on the unix socket and on TCP.
func TestE2EConnectionLimits(t *testing.T) {
	requireRoot(t)
	const maxConns, authTimeout = 3, 2 * time.Second
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen,
		args: []string{"--9p-max-conns", strconv.Itoa(maxConns), "--9p-auth-timeout", authTimeout.String()}})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}

	release := holdAs(t, aliceHost, "unix!"+d.sock, maxConns)
	r := gsvAs(aliceHost, env, "whoami")
	if want := fmt.Sprintf("too many connections for uid %d", aliceHost); r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("alice at her cap: gsv whoami: %v, want an error saying %q", r, want)
	}
	// bob is not affected.
	if r := gsvAs(bobHost, env, "whoami"); r.code != 0 || !strings.HasPrefix(r.stdout, "bob ") {
		t.Fatalf("bob, while alice is at her cap: gsv whoami: %v", r)
	}
	if r := gsvAs(bobHost, env, "call", "fs.write", `{"path":"/home/bob/notes","content":"mine"}`); r.code != 0 {
		t.Fatalf("bob writes while alice is at her cap: %v", r)
	}
	if r := gsvAs(bobHost, env, "call", "fs.read", `{"path":"/home/bob/notes"}`); r.code != 0 || !strings.Contains(r.stdout, "mine") {
		t.Fatalf("bob reads while alice is at her cap: %v", r)
	}
	// A host uid with no GSV account attaches nothing.
	if r := gsvAs(nobodyHost, env, "whoami"); r.code == 0 || !strings.Contains(r.stderr, fmt.Sprintf("host uid %d has no GSV account", nobodyHost)) {
		t.Fatalf("an unmapped host uid: gsv whoami: %v", r)
	}

	// Connections that never attach are closed at the deadline.
	for _, a := range []struct{ network, addr string }{{"unix", d.sock}, {"tcp", fmt.Sprintf("127.0.0.1:%d", port)}} {
		nc, err := net.Dial(a.network, a.addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		nc.SetReadDeadline(start.Add(authTimeout + liveness))
		_, err = nc.Read(make([]byte, 1))
		if err != io.EOF {
			t.Errorf("%s connection that never attaches: read: %v after %v, want EOF at the %v deadline", a.network, err, time.Since(start), authTimeout)
		}
		nc.Close()
	}

	// Once alice lets her connections go she connects again.
	release()
	deadline := time.Now().Add(liveness)
	for {
		r = gsvAs(aliceHost, env, "whoami")
		if r.code == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.code != 0 || !strings.HasPrefix(r.stdout, "alice ") {
		t.Fatalf("alice after releasing her connections: gsv whoami: %v", r)
	}
	d.stop()
}

// TestE2ETokenSessions: revoking a token, or its expiry, ends the sessions
// attached with it, a read blocked in one included; a
// service token attaches as a service, a node token not at all; unset
// times of sys.token.list are null.
func TestE2ETokenSessions(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	d := startDaemon(t, newBase(t), daemonOpts{listen: listen})
	root := d.dial(t)
	aliceUID := addUser(t, root, "alice", aliceHost)
	type token struct {
		TokenID string `json:"tokenId"`
		Token   string `json:"token"`
	}
	create := func(args map[string]any) token {
		t.Helper()
		var r struct{ Token token }
		args["uid"] = aliceUID
		mustOK(t, call9p(t, root, "sys.token.create", args), &r)
		return r.Token
	}
	mount := func(tok token) *client.Fsys {
		t.Helper()
		fsys, err := ninep.Mount(listen, "alice", []byte(tok.Token))
		if err != nil {
			t.Fatalf("attach with alice's token: %v", err)
		}
		t.Cleanup(func() { fsys.Close() })
		return fsys
	}
	// ended waits up to within for fsys's session to be gone.
	ended := func(fsys *client.Fsys, within time.Duration) bool {
		for deadline := time.Now().Add(within); ; {
			if _, err := readAll9p(fsys, "/etc/passwd"); err != nil {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	t.Run("Revoke", func(t *testing.T) {
		tok := create(map[string]any{"kind": "user"})
		fsys, other := mount(tok), mount(tok)
		fid, err := fsys.Open("/sys/events", plan9.OREAD)
		if err != nil {
			t.Fatal(err)
		}
		readErr := make(chan error, 1)
		go func() {
			_, err := fid.Read(make([]byte, 4096))
			readErr <- err
		}()
		select {
		case err := <-readErr:
			t.Fatalf("read of /sys/events returned before any event: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		mustOK(t, call9p(t, root, "sys.token.revoke", map[string]any{"tokenId": tok.TokenID, "reason": "e2e"}), nil)
		start := time.Now()
		select {
		case err := <-readErr:
			if err == nil {
				t.Fatal("a blocked read of a revoked token's session succeeded")
			}
		case <-time.After(liveness):
			t.Fatalf("a read blocked in a revoked token's session still waits %v later", liveness)
		}
		if !ended(other, liveness-time.Since(start)) {
			t.Fatalf("another session of the revoked token still reads %v later", liveness)
		}
	})

	t.Run("Expire", func(t *testing.T) {
		expires := time.Now().Add(1500 * time.Millisecond)
		tok := create(map[string]any{"kind": "user", "expiresAt": expires.UnixMilli()})
		fsys := mount(tok)
		if ended(fsys, 0) && time.Now().Before(expires) {
			t.Fatal("the session ended before its token expired")
		}
		time.Sleep(time.Until(expires))
		if !ended(fsys, liveness) {
			t.Fatalf("the session of an expired token still reads %v after expiry", liveness)
		}
	})

	t.Run("Kinds", func(t *testing.T) {
		tcp := []string{"GSV_ADDR=" + listen, "GSV_USER=alice"}
		svc := create(map[string]any{"kind": "service"})
		r := gsvAs(0, append(tcp, "GSV_TOKEN="+svc.Token), "whoami")
		if r.code != 0 || !strings.Contains(r.stdout, "role=service") {
			t.Fatalf("gsv whoami with a service token: %v, want role=service", r)
		}
		r = gsvAs(0, append(tcp, "GSV_TOKEN="+svc.Token), "call", "sys.token.create", `{"kind":"user"}`)
		if r.code == 0 || !strings.Contains(r.stderr, "only a user manages tokens") {
			t.Fatalf("a service token mints a user token: %v", r)
		}
		node := create(map[string]any{"kind": "node", "allowedDeviceId": "laptop"})
		r = gsvAs(0, append(tcp, "GSV_TOKEN="+node.Token), "whoami")
		if r.code == 0 || !strings.Contains(r.stderr, "only as a device") {
			t.Fatalf("gsv whoami with a node token: %v, want refused: only as a device", r)
		}
	})

	// A token narrows its holder's process capability: a session opened
	// with it gets no network beyond the token's and mounts no stronger.
	t.Run("ProcessCap", func(t *testing.T) {
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Skip("bubblewrap is not installed")
		}
		unixAddr := "GSV_ADDR=unix!" + d.sock
		r := gsvAs(0, []string{unixAddr}, "token", "create", "--uid", strconv.Itoa(int(aliceUID)),
			"--process", `{"networks":["none"],"mounts":[{"prefix":"~","mode":"ro"}]}`)
		if r.code != 0 {
			t.Fatalf("gsv token create --process: %v", r)
		}
		tcp := []string{"GSV_ADDR=" + listen, "GSV_USER=alice", "GSV_TOKEN=" + strings.TrimSpace(r.stdout)}
		if r := gsvAs(0, tcp, "session", "open", "--network", "full"); r.code == 0 || !strings.Contains(r.stderr, "(403)") {
			t.Fatalf("network full with a none-only token: %v", r)
		}
		r = gsvAs(0, tcp, "session", "open", "--network", "none", "--mount", "~:/h:rw", "--json")
		if r.code != 0 || !strings.Contains(r.stdout, `"mode": "ro"`) {
			t.Fatalf("rw under a ro token: %v", r)
		}
		if r := gsvAs(0, []string{unixAddr}, "token", "create", "--process", `{"networks":["moon"]}`); r.code == 0 || !strings.Contains(r.stderr, "(400)") {
			t.Fatalf("a malformed process capability: %v", r)
		}
		// Without the token (alice's own host uid), full is hers.
		if r := gsvAs(aliceHost, []string{unixAddr}, "session", "open", "--network", "full"); r.code != 0 {
			t.Fatalf("alice's own network full: %v", r)
		}
	})

	t.Run("ListNulls", func(t *testing.T) {
		create(map[string]any{"kind": "user"})
		var r struct{ Tokens []map[string]json.RawMessage }
		mustOK(t, call9p(t, root, "sys.token.list", map[string]any{"uid": aliceUID}), &r)
		unused := r.Tokens[len(r.Tokens)-1]
		for _, key := range []string{"lastUsedAt", "revokedAt", "revokedReason"} {
			if v, ok := unused[key]; !ok || string(v) != "null" {
				t.Errorf("sys.token.list of an unused token: %s = %s (present %v), want null", key, v, ok)
			}
		}
	})
	d.stop()
}
