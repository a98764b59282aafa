package main_test

// End-to-end tests of gsvfs as an MCP server (issue 23, part 6): `gsvfs
// mcp serve` driven over stdio as a subprocess, run as alice and bob (host
// users, setpriv), and /mcp on the daemon's --http listener driven with
// bearer tokens, both by the MCP Go SDK's own client and by the
// reference inspector CLI from npm. The permission matrix holds through
// MCP exactly as over 9P: bob's fs.read of alice's 0600 file fails with
// the error 9P gives him.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/ninep"
)

// mcpEnv is a daemon mounted with FUSE and serving HTTP, with alice and
// bob, a token of each, and alice's file secret (0600).
type mcpEnv struct {
	d                *daemon
	url              string // the /mcp endpoint
	aliceUID, bobUID uint32
	aliceTok, bobTok string
	bobTokID         string
	secret           string // alice's 0600 file, as a namespace path
	bobSecretErr     string // fs.read's error for bob over 9P
}

func startMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	requireRoot(t)
	port := freePort(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true, logLevel: "warn", args: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	root := d.dial(t)
	e := &mcpEnv{d: d, url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), secret: "/home/alice/secret"}
	e.aliceUID = addUser(t, root, "alice", aliceHost)
	e.bobUID = addUser(t, root, "bob", bobHost)
	if r := d.shAs(aliceHost, `echo s3cret > "$1" && chmod 0600 "$1"`, d.p(e.secret)); r.code != 0 {
		t.Fatalf("alice writes her secret: %v", r)
	}
	token := func(uid uint32) (tok, id string) {
		var res struct {
			Token struct {
				Token   string `json:"token"`
				TokenID string `json:"tokenId"`
			} `json:"token"`
		}
		mustOK(t, call9p(t, root, "sys.token.create", map[string]any{"kind": "user", "uid": uid}), &res)
		if !strings.HasPrefix(res.Token.Token, "gsv_") {
			t.Fatalf("sys.token.create: %+v", res)
		}
		return res.Token.Token, res.Token.TokenID
	}
	e.aliceTok, _ = token(e.aliceUID)
	e.bobTok, e.bobTokID = token(e.bobUID)
	// What 9P says to bob: his token over the unix socket.
	bob, err := ninep.Mount("unix!"+d.sock, "bob", []byte(e.bobTok))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	f := call9p(t, bob, "fs.read", map[string]any{"path": e.secret})
	var op struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if !f.OK || json.Unmarshal(f.Data, &op) != nil || op.OK || op.Error == "" {
		t.Fatalf("bob's fs.read of alice's secret over 9P: %+v %s", f, f.Data)
	}
	e.bobSecretErr = "fs.read: " + op.Error
	return e
}

// stdio starts `gsvfs mcp serve` as the host user uid (0: the test's
// own) and returns the SDK client's session of it.
func (e *mcpEnv) stdio(t *testing.T, uid int) *mcp.ClientSession {
	t.Helper()
	cs, _ := e.stdioCmd(t, uid)
	return cs
}

// stdioCmd is stdio, with the command.
func (e *mcpEnv) stdioCmd(t *testing.T, uid int) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := e.serveCmd(t, uid)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to gsvfs mcp serve as host uid %d: %v", uid, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

// serveCmd is `gsvfs mcp serve` on the daemon's socket as host uid uid.
func (e *mcpEnv) serveCmd(t *testing.T, uid int) *exec.Cmd {
	args := []string{"mcp", "serve", "--kernel", "unix!" + e.d.sock, "--log-level", "warn"}
	cmd := exec.Command(gsvfsBin, args...)
	if uid != 0 {
		u := strconv.Itoa(uid)
		cmd = exec.Command("setpriv", append([]string{"--reuid", u, "--regid", u, "--clear-groups", gsvfsBin}, args...)...)
	}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/", raceEnv}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() && stderr.String() != "" {
			t.Logf("gsvfs mcp serve (uid %d) stderr:\n%s", uid, stderr.String())
		}
	})
	return cmd
}

// http returns the SDK client's session of /mcp with token as bearer.
func (e *mcpEnv) http(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := e.httpConnect(token)
	if err != nil {
		t.Fatalf("connect to %s: %v", e.url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (e *mcpEnv) httpConnect(token string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: bearer{token}}
	return mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: hc}, nil)
}

// bearer adds Authorization: Bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// callText calls tool with args and returns its one text content and
// whether it is a tool error; a protocol error fails t.
func callText(t *testing.T, cs *mcp.ClientSession, tool string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(r.Content) != 1 {
		t.Fatalf("%s: %d contents", tool, len(r.Content))
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: a %T", tool, r.Content[0])
	}
	return tc.Text, r.IsError
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", tl.Name)
		}
	}
	return names
}

// TestE2EMCPServe drives gsvfs as an MCP server with the SDK's client
// over both transports, as alice and as bob: the tools they may make,
// alice's fs.read of her own 0600 file, bob's refused with the error 9P
// gives him, process resources (bob cannot read alice's), a syscall's
// failure as a tool error, and the bearer token's checks (none, bad,
// revoked: 401).
func TestE2EMCPServe(t *testing.T) {
	e := startMCPEnv(t)
	transports := []struct {
		name       string
		alice, bob func(t *testing.T) *mcp.ClientSession
	}{
		{"stdio",
			func(t *testing.T) *mcp.ClientSession { return e.stdio(t, aliceHost) },
			func(t *testing.T) *mcp.ClientSession { return e.stdio(t, bobHost) }},
		{"http",
			func(t *testing.T) *mcp.ClientSession { return e.http(t, e.aliceTok) },
			func(t *testing.T) *mcp.ClientSession { return e.http(t, e.bobTok) }},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			alice, bob := tr.alice(t), tr.bob(t)
			names := toolNames(t, alice)
			for _, want := range []string{"fs.read", "fs.write", "fs.edit", "fs.delete", "fs.search", "shell.exec", "process.session.open",
				"proc.spawn", "proc.send", "proc.history", "proc.status", "proc.directive", "sched.list", "codemode.run", "sys.device.list"} {
				if !slices.Contains(names, want) {
					t.Errorf("alice's tools lack %s: %v", want, names)
				}
			}
			for _, not := range []string{"sys.user.add", "sys.token.create", "sys.config.set", "fs.stat"} {
				if slices.Contains(names, not) {
					t.Errorf("alice's tools have %s", not)
				}
			}
			if txt, isErr := callText(t, alice, "fs.read", map[string]any{"path": e.secret}); isErr || !strings.Contains(txt, "s3cret") {
				t.Errorf("alice's fs.read of her secret: isError=%v %s", isErr, txt)
			}
			if txt, isErr := callText(t, bob, "fs.read", map[string]any{"path": e.secret}); !isErr || txt != e.bobSecretErr {
				t.Errorf("bob's fs.read of alice's secret: isError=%v %q, want the tool error %q (what 9P says)", isErr, txt, e.bobSecretErr)
			}
			if txt, isErr := callText(t, bob, "fs.write", map[string]any{"path": e.secret, "content": "bob"}); !isErr {
				t.Errorf("bob's fs.write of alice's secret passed: %s", txt)
			}
			if got := e.d.mustSh(t, `cat "$1"`, e.d.p(e.secret)); got != "s3cret\n" {
				t.Errorf("alice's secret is %q after bob's write", got)
			}
			// A syscall's refusal is a tool error with the dispatcher's message.
			if txt, isErr := callText(t, alice, "proc.status", map[string]any{"pid": "p_none"}); !isErr || !strings.HasPrefix(txt, "proc.status: ") {
				t.Errorf("proc.status of no process: isError=%v %q", isErr, txt)
			}
			if txt, isErr := callText(t, alice, "fs.read", map[string]any{"path": e.secret, "uid": 0}); !isErr || txt != `fs.read: unknown field "uid"` {
				t.Errorf("fs.read with an unknown field: isError=%v %q", isErr, txt)
			}
			// Writes land as alice.
			if txt, isErr := callText(t, alice, "fs.write", map[string]any{"path": "/home/alice/from-mcp-" + tr.name, "content": "hello\n"}); isErr {
				t.Fatalf("alice's fs.write: %s", txt)
			}
			if r := e.d.sh(`stat -c %u "$1"`, e.d.p("/home/alice/from-mcp-"+tr.name)); strings.TrimSpace(r.stdout) != strconv.Itoa(aliceHost) {
				t.Errorf("alice's file written through MCP is owned by %q, want %d", r.stdout, aliceHost)
			}
			// Resources: alice's init process, hers only.
			ctx := context.Background()
			list, err := alice.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			initStatus := fmt.Sprintf("gsv://proc/init:%d/status", e.aliceUID)
			var uris []string
			for _, r := range list.Resources {
				uris = append(uris, r.URI)
			}
			if !slices.Contains(uris, initStatus) {
				t.Fatalf("alice's resources %v lack %s", uris, initStatus)
			}
			r, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: initStatus})
			if err != nil || len(r.Contents) != 1 || !strings.Contains(r.Contents[0].Text, fmt.Sprintf(`"pid":"init:%d"`, e.aliceUID)) {
				t.Fatalf("alice reads %s: %v %+v", initStatus, err, r)
			}
			if _, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("gsv://proc/init:%d/history", e.aliceUID)}); err != nil {
				t.Fatalf("alice reads her init's history: %v", err)
			}
			if r, err := bob.ReadResource(ctx, &mcp.ReadResourceParams{URI: initStatus}); err == nil {
				t.Fatalf("bob read alice's %s: %+v", initStatus, r.Contents)
			}
			blist, err := bob.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range blist.Resources {
				if strings.Contains(r.URI, fmt.Sprintf("init:%d/", e.aliceUID)) {
					t.Errorf("bob's resources list alice's %s", r.URI)
				}
			}
		})
	}

	t.Run("oauth-callback", func(t *testing.T) {
		// The HTTP listener also serves the MCP room's OAuth callback.
		resp, err := http.Get(strings.TrimSuffix(e.url, "/mcp") + "/oauth/callback?state=nobody&code=x")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no sign-in is waiting") {
			t.Fatalf("GET /oauth/callback on --http: %s %s", resp.Status, body)
		}
		// And the client metadata document, whose client_id is its URL.
		doc := strings.TrimSuffix(e.url, "/mcp") + "/.well-known/oauth-client/gsv.json"
		resp, err = http.Get(doc)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"client_id": "`+doc+`"`) {
			t.Fatalf("GET the client metadata document on --http: %s %s", resp.Status, body)
		}
	})

	t.Run("bearer", func(t *testing.T) {
		post := func(auth, body string) (int, http.Header, string) {
			req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header, string(b)
		}
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs.write","arguments":{"path":"/home/alice/unauth","content":"x"}}}`
		for _, auth := range []string{"", "Basic YWxpY2U6eA==", "Bearer gsv_user_notatoken", "Bearer " + e.aliceTok + "x"} {
			code, h, body := post(auth, call)
			if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("Authorization %q: %d %q %s, want 401 with WWW-Authenticate: Bearer", auth, code, h.Get("WWW-Authenticate"), body)
			}
		}
		if _, err := os.Stat(e.d.p("/home/alice/unauth")); !os.IsNotExist(err) {
			t.Errorf("a request that did not authenticate wrote: %v", err)
		}
		// A revoked token is refused at once.
		bob := e.http(t, e.bobTok)
		if _, isErr := callText(t, bob, "fs.read", map[string]any{"path": "/etc/passwd"}); isErr {
			t.Fatal("bob's fs.read of /etc/passwd failed")
		}
		var rev struct {
			Revoked bool `json:"revoked"`
		}
		mustOK(t, call9p(t, e.d.dial(t), "sys.token.revoke", map[string]any{"tokenId": e.bobTokID, "uid": e.bobUID}), &rev)
		if !rev.Revoked {
			t.Fatal("bob's token was not revoked")
		}
		if code, _, body := post("Bearer "+e.bobTok, call); code != http.StatusUnauthorized {
			t.Errorf("a revoked token: %d %s, want 401", code, body)
		}
		if _, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": "/etc/passwd"}}); err == nil {
			t.Error("a session of a revoked token made a call")
		}
	})
}

// TestE2EMCPServeMalformed checks that a malformed JSON-RPC message
// closes only its own connection: gsvfs mcp serve ends with an error
// naming it, a request to /mcp gets 400; the daemon, another stdio
// session and another HTTP session go on.
func TestE2EMCPServeMalformed(t *testing.T) {
	e := startMCPEnv(t)
	other := e.stdio(t, aliceHost)
	otherHTTP := e.http(t, e.aliceTok)

	cmd := e.serveCmd(t, aliceHost)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { io.Copy(io.Discard, stdout); done <- cmd.Wait() }()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`+"\n")
	io.WriteString(stdin, "{not json-rpc\n")
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "gsvfs: mcp: invalid character") {
			t.Fatalf("gsvfs mcp serve after garbage: %v, stderr %q; want exit 1 naming the bad input", err, stderr.String())
		}
	case <-time.After(liveness):
		cmd.Process.Kill()
		t.Fatal("gsvfs mcp serve did not end after garbage")
	}
	stdin.Close()

	for _, body := range []string{"{not json-rpc", `[{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}`} {
		req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+e.aliceTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && !strings.Contains(string(b), `"error"`) {
			t.Errorf("POST %q: 200 without an error: %s", body, b)
		}
		if resp.StatusCode >= 500 {
			t.Errorf("POST %q: %d %s", body, resp.StatusCode, b)
		}
	}
	for name, cs := range map[string]*mcp.ClientSession{"stdio": other, "http": otherHTTP} {
		if txt, isErr := callText(t, cs, "fs.read", map[string]any{"path": e.secret}); isErr || !strings.Contains(txt, "s3cret") {
			t.Errorf("the other %s session after the garbage: isError=%v %s", name, isErr, txt)
		}
	}
	if !e.d.running() {
		t.Fatal("the daemon died")
	}
}

// inspectorPkg is the reference MCP inspector's CLI the tests install
// from npm, pinned.
const inspectorPkg = "@modelcontextprotocol/inspector-cli@1.0.3"

var (
	inspectorOnce sync.Once
	inspectorDir  string // the package's build directory
	inspectorErr  error
)

// inspector installs inspectorPkg once into a cache directory the tests
// own (os.TempDir()/gsvfs-npm-cache), and returns the directory of its
// build/index.js, the CLI. It skips the test only if npm or node is
// absent.
func inspector(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"npm", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the MCP inspector CLI needs %s (Debian's nodejs and npm; make deps)", tool)
		}
	}
	inspectorOnce.Do(func() {
		root := filepath.Join(os.TempDir(), "gsvfs-npm-cache")
		if inspectorErr = os.MkdirAll(root, 0o755); inspectorErr != nil {
			return
		}
		dir := filepath.Join(root, strings.NewReplacer("/", "+", "@", "").Replace(inspectorPkg))
		build := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector-cli", "build")
		if _, err := os.Stat(filepath.Join(build, "index.js")); err == nil {
			inspectorDir = build
			return
		}
		tmp, err := os.MkdirTemp(root, "install-")
		if err != nil {
			inspectorErr = err
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", tmp, inspectorPkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			inspectorErr = fmt.Errorf("npm install %s: %v\n%s", inspectorPkg, err, out)
			return
		}
		if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
			if _, serr := os.Stat(filepath.Join(build, "index.js")); serr != nil {
				inspectorErr = err
				return
			}
		}
		inspectorDir = build
	})
	if inspectorErr != nil {
		t.Fatal(inspectorErr)
	}
	return inspectorDir
}

// runInspector runs the inspector's CLI with args and returns its
// stdout. It runs in the CLI's build directory: version 1.0.3 reads its
// own package.json by a path it checks against the working directory
// (upstream's bug), which only holds there.
func runInspector(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir := inspector(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"index.js"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), raceEnv)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("inspector %q: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// TestE2EMCPServeInspector drives gsvfs as an MCP server with the
// reference inspector CLI (npm, TypeScript SDK) over stdio and over
// HTTP: it lists the tools (their schemas pass the TypeScript SDK's
// checks) and calls one; bob's token cannot read alice's file.
func TestE2EMCPServeInspector(t *testing.T) {
	inspector(t) // install (or skip) before the daemon starts
	e := startMCPEnv(t)
	serve := []string{"setpriv", "--reuid", strconv.Itoa(aliceHost), "--regid", strconv.Itoa(aliceHost), "--clear-groups",
		gsvfsBin, "mcp", "serve", "--kernel", "unix!" + e.d.sock, "--log-level", "warn"}
	httpArgs := func(token string) []string {
		return []string{e.url, "--transport", "http", "--header", "Authorization: Bearer " + token}
	}
	type result struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	parse := func(out string) result {
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("inspector output %q: %v", out, err)
		}
		return r
	}
	for _, tr := range []struct {
		name       string
		alice, bob []string
	}{
		{"stdio", serve, nil},
		{"http", httpArgs(e.aliceTok), httpArgs(e.bobTok)},
	} {
		t.Run(tr.name, func(t *testing.T) {
			out, err := runInspector(t, append(slices.Clone(tr.alice), "--method", "tools/list")...)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range parse(out).Tools {
				names = append(names, tl.Name)
			}
			if !slices.Contains(names, "fs.read") || !slices.Contains(names, "codemode.run") || slices.Contains(names, "sys.user.add") {
				t.Fatalf("tools/list: %v", names)
			}
			out, err = runInspector(t, append(slices.Clone(tr.alice), "--method", "tools/call", "--tool-name", "fs.read", "--tool-arg", "path="+e.secret)...)
			if err != nil {
				t.Fatal(err)
			}
			if r := parse(out); r.IsError || len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, "s3cret") {
				t.Fatalf("alice's fs.read: %s", out)
			}
			if tr.bob == nil {
				return
			}
			out, err = runInspector(t, append(slices.Clone(tr.bob), "--method", "tools/call", "--tool-name", "fs.read", "--tool-arg", "path="+e.secret)...)
			if err != nil {
				t.Fatal(err)
			}
			if r := parse(out); !r.IsError || len(r.Content) != 1 || r.Content[0].Text != e.bobSecretErr {
				t.Fatalf("bob's fs.read of alice's secret: %s, want the tool error %q", out, e.bobSecretErr)
			}
		})
	}
}

// TestE2EMCPServeDaemonGone checks that gsvfs mcp serve fails its calls
// and ends, saying so, when the daemon goes away.
func TestE2EMCPServeDaemonGone(t *testing.T) {
	e := startMCPEnv(t)
	cs, cmd := e.stdioCmd(t, aliceHost)
	if _, isErr := callText(t, cs, "fs.read", map[string]any{"path": e.secret}); isErr {
		t.Fatal("alice's fs.read failed")
	}
	e.d.stop()
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs.read", Arguments: map[string]any{"path": e.secret}}); err == nil {
		t.Fatalf("a call after the daemon went passed: %+v", r)
	}
	stderr := cmd.Stderr.(*syncBuffer)
	deadline := time.Now().Add(liveness)
	for !strings.Contains(stderr.String(), "gsvfs: lost the daemon at unix!"+e.d.sock) {
		if time.Now().After(deadline) {
			t.Fatalf("gsvfs mcp serve did not end saying it lost the daemon; stderr: %q", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
