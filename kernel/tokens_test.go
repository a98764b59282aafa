package kernel

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// createToken makes a token as id and returns it.
func createToken(t *testing.T, k *Kernel, id *Identity, a *abi.TokenCreateArgs) *Token {
	t.Helper()
	res, err := k.Call(context.Background(), &Caller{Identity: id}, "sys.token.create", a)
	if err != nil {
		t.Fatalf("sys.token.create %+v: %v", a, err)
	}
	return res.(*abi.TokenCreateResult).Token
}

// TestTokenListNulls: the seed's sys.token.list shows lastUsedAt,
// revokedAt and revokedReason as null until they are set.
func TestTokenListNulls(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "user"})
	out := k.Serve(context.Background(), &Caller{Identity: alice}, []byte(`{"call":"sys.token.list"}`))
	var r struct {
		Data struct {
			Tokens []map[string]json.RawMessage `json:"tokens"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Data.Tokens) != 1 {
		t.Fatalf("sys.token.list: %s (%v)", out, err)
	}
	for _, key := range []string{"lastUsedAt", "revokedAt", "revokedReason", "expiresAt", "label", "allowedDeviceId"} {
		if v, ok := r.Data.Tokens[0][key]; !ok || string(v) != "null" {
			t.Errorf("sys.token.list: %s = %s (present %v), want null; frame %s", key, v, ok, out)
		}
	}
}

// TestTokenKinds: a user token attaches as its owner, a service token as
// a service (not root even when root's, and managing no tokens), a node
// token not at all (it is for a device).
func TestTokenKinds(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	ctx := context.Background()
	auth := func(raw, user string) (*Identity, error) {
		cred, err := k.Authenticate(ctx, Peer{Transport: "9p-tcp", HostUID: -1, User: user, Secret: []byte(raw)})
		if err != nil {
			return nil, err
		}
		return cred, nil
	}
	user := createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "user"})
	if id, err := auth(user.Token, "alice"); err != nil || id.Role != "user" || id.Uid != alice.Uid {
		t.Fatalf("user token: %+v, %v", id, err)
	}
	nodeDevice := "laptop"
	node := createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: &nodeDevice})
	if _, err := auth(node.Token, "alice"); err == nil || !strings.Contains(err.Error(), "only as a device") {
		t.Fatalf("node token attaches: err = %v, want refused: only as a device", err)
	}
	svc := createToken(t, k, root, &abi.TokenCreateArgs{Kind: "service"})
	id, err := auth(svc.Token, "")
	if err != nil || id.Role != "service" || id.Uid != 0 {
		t.Fatalf("root's service token: %+v, %v", id, err)
	}
	if id.IsRoot() {
		t.Fatal("root's service token is root")
	}
	for _, call := range []struct {
		name string
		args any
	}{
		{"sys.token.create", &abi.TokenCreateArgs{Kind: "user"}},
		{"sys.token.revoke", &abi.TokenRevokeArgs{TokenID: user.TokenID}},
	} {
		if _, err := k.Call(ctx, &Caller{Identity: id}, call.name, call.args); abi.Code(err) != 403 {
			t.Errorf("%s as a service: err = %v, want 403", call.name, err)
		}
	}
	res, err := k.Call(ctx, &Caller{Identity: id}, "sys.whoami", nil)
	if err != nil || res.(*abi.WhoamiResult).Role != "service" {
		t.Fatalf("sys.whoami as a service: %v, %v", res, err)
	}
}

// TestTokenLease: the identity a token attaches as carries a lease that
// ends when the token is revoked or expires; a host uid's has none.
func TestTokenLease(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	ctx := context.Background()
	attach := func(raw string) *Identity {
		t.Helper()
		cred, err := k.Authenticate(ctx, Peer{Transport: "9p-tcp", HostUID: -1, Secret: []byte(raw)})
		if err != nil {
			t.Fatalf("attach: %v", err)
		}
		return cred
	}
	ended := func(l *Identity, within time.Duration) bool {
		select {
		case <-l.Done():
			return true
		case <-time.After(within):
			return false
		}
	}

	tok := createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "user"})
	l1, l2 := attach(tok.Token), attach(tok.Token)
	if l1.Grant() != "token "+tok.TokenID || l2.Grant() != l1.Grant() {
		t.Fatalf("grants %q %q, want token %s", l1.Grant(), l2.Grant(), tok.TokenID)
	}
	if ended(l1, 50*time.Millisecond) {
		t.Fatal("lease ended before revocation")
	}
	if _, err := k.Call(ctx, &Caller{Identity: alice}, "sys.token.revoke", &abi.TokenRevokeArgs{TokenID: tok.TokenID}); err != nil {
		t.Fatal(err)
	}
	if !ended(l1, time.Minute) || !ended(l2, time.Minute) {
		t.Fatal("revocation did not end the token's leases")
	}

	exp := time.Now().Add(2 * time.Second).UnixMilli()
	tok = createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "user", ExpiresAt: &exp})
	l := attach(tok.Token)
	if ended(l, 100*time.Millisecond) && time.Now().UnixMilli() < exp {
		t.Fatal("lease ended before expiry")
	}
	if !ended(l, time.Minute) {
		t.Fatal("expiry did not end the token's lease")
	}

	cred, err := k.Authenticate(ctx, Peer{Transport: "9p-unix", HostUID: 1001})
	if err != nil {
		t.Fatal(err)
	}
	if l := cred; l.Grant() != "" || l.Done() != nil {
		t.Fatalf("a host uid's identity names grant %q", l.Grant())
	}
}

// TestUnmappedHostUID: a host uid with no GSV account is nobody over FUSE
// but may not attach over 9P.
func TestUnmappedHostUID(t *testing.T) {
	k, _, _, _ := newKernel(t)
	ctx := context.Background()
	cred, err := k.Authenticate(ctx, Peer{Transport: "fuse", HostUID: 4242})
	if err != nil || cred.Role != "nobody" {
		t.Fatalf("FUSE peer with no account: %+v, %v", cred, err)
	}
	_, err = k.Authenticate(ctx, Peer{Transport: "9p-unix", HostUID: 4242})
	if err == nil || !strings.Contains(err.Error(), "host uid 4242 has no GSV account") {
		t.Fatalf("9P unix peer with no account: err = %v", err)
	}
}

// TestNodeTokenDevice: a node token binds to one valid device id; it is
// refused without one, with a bad one, and no other kind binds to any.
func TestNodeTokenDevice(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	ctx := context.Background()
	id := func(s string) *string { return &s }
	tok := createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: id("laptop")})
	if tok.AllowedDeviceID == nil || *tok.AllowedDeviceID != "laptop" {
		t.Fatalf("node token: allowedDeviceId %v, want laptop", tok.AllowedDeviceID)
	}
	for _, tc := range []struct {
		args *abi.TokenCreateArgs
		want string
	}{
		{&abi.TokenCreateArgs{Kind: "node"}, "a node token binds to a device: give allowedDeviceId"},
		{&abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: id("")}, "a device id is empty"},
		{&abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: id("gsv")}, "the kernel's own device"},
		{&abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: id("Laptop")}, "want only a-z"},
		{&abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: id("a/b")}, "want only a-z"},
		{&abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: id("..")}, "not a name"},
		{&abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: id(strings.Repeat("x", 65))}, "longer than 64"},
		{&abi.TokenCreateArgs{Kind: "user", AllowedDeviceID: id("laptop")}, "only node tokens may bind to a device"},
	} {
		_, err := k.Call(ctx, &Caller{Identity: alice}, "sys.token.create", tc.args)
		if abi.Code(err) != 400 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sys.token.create %+v: %v, want 400 %q", tc.args, err, tc.want)
		}
	}
}

// A device authenticates with a live node token bound to its id: as the
// token's owner in role driver, with the token's lease; a token bound to
// another id, a user token, a revoked token and garbage are refused.
func TestAuthenticateNode(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	ctx := context.Background()
	laptop := "laptop"
	node := createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "node", AllowedDeviceID: &laptop})
	user := createToken(t, k, alice, &abi.TokenCreateArgs{Kind: "user"})
	id, err := k.AuthenticateNode(ctx, node.Token, "laptop")
	if err != nil || id.Uid != alice.Uid || id.Role != "driver" || id.Done() == nil {
		t.Fatalf("node token for its device: %+v, %v", id, err)
	}
	if _, err := k.AuthenticateNode(ctx, node.Token, "phone"); abi.Code(err) != 403 || !strings.Contains(err.Error(), `bound to device "laptop"`) {
		t.Fatalf("node token for another device: %v", err)
	}
	for name, raw := range map[string]string{"user token": user.Token, "garbage": "gsv_node_nope"} {
		if _, err := k.AuthenticateNode(ctx, raw, "laptop"); abi.Code(err) != 403 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := k.Call(ctx, &Caller{Identity: alice}, "sys.token.revoke", &abi.TokenRevokeArgs{TokenID: node.TokenID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-id.Done():
	case <-time.After(time.Minute):
		t.Fatal("the device's lease did not end with its token")
	}
	if _, err := k.AuthenticateNode(ctx, node.Token, "laptop"); abi.Code(err) != 403 {
		t.Fatalf("a revoked node token: %v", err)
	}
}

// TestNobodyIsAStranger: a host uid with no GSV account gets the others'
// read and search bits of every file, whoever owns it, and never write;
// its capabilities are the reads behind such files, nothing that writes
// or runs (issue 20, item 19).
func TestNobodyIsAStranger(t *testing.T) {
	k, _, _, _ := newKernel(t)
	// The kernel derives nobody's capabilities from the grants of the
	// syscalls registered: stand in for the rooms' file syscalls.
	stub := func(context.Context, *Caller, *struct{}) (struct{}, error) { return struct{}{}, nil }
	for _, d := range []abi.Desc{abi.FsStat, abi.FsReaddir, abi.FsOpen, abi.FsPread, abi.FsReadlink, abi.FsStatfs, abi.FsRead, abi.FsWrite, abi.FsCreate,
		abi.FsPwrite, abi.FsMkdir, abi.FsRemove, abi.FsRename, abi.FsSetattr, abi.FsSymlink, abi.FsLink, abi.FsFtruncate, abi.FsOpenread,
		abi.FsReadraw, abi.ShellExec, abi.ProcessSessionOpen, abi.ProcSpawn, abi.ProcList, abi.SchedAdd, abi.CodemodeRun} {
		k.Register(Handle(abi.Call[struct{}, struct{}]{Name: d.CallName(), Grant: d.CallGrant(), Flags: d.CallFlags()}, stub))
	}
	n, err := k.Authenticate(context.Background(), Peer{Transport: "fuse", HostUID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		uid, gid uint32
		mode     fs.FileMode
		want     uint32
		ok       bool
	}{
		{0, 0, 0o444, 4, true},          // /etc/passwd
		{0, 0, 0o440, 4, false},         // a group's file
		{1000, 100, 0o644, 4, true},     // a world-readable file
		{1000, 100, 0o644, 2, false},    // written by nobody
		{1000, 100, 0o666, 2, false},    // even a world-writable one
		{0, 0, 0o666, 6, false},         // /sys/config/ctl, read-write
		{1000, 100, 0o755, 1, true},     // a home, searched
		{1000, 100, 0o777, 3, false},    // created in
		{1000, 100, 0o600, 4, false},    // another's private file
		{65534, 65534, 0o600, 4, false}, // owned by uid 65534: nobody is no owner
		{65534, 65534, 0o060, 4, false}, // nor of gid 65534's group
	} {
		if got := n.Allowed(c.uid, c.gid, c.mode, c.want); got != c.ok {
			t.Errorf("nobody: Allowed(%d, %d, %v, %d) = %v, want %v", c.uid, c.gid, c.mode, c.want, got, c.ok)
		}
	}
	for _, name := range []string{"sys.user.list", "sys.group.list", "fs.stat", "fs.readdir", "fs.open", "fs.pread", "fs.readlink", "fs.statfs"} {
		if !n.Can(name) {
			t.Errorf("nobody may not %s", name)
		}
	}
	for _, name := range []string{"sys.whoami", "sys.config.get", "sys.config.set", "sys.events", "fs.read", "fs.write", "fs.create",
		"fs.pwrite", "fs.mkdir", "fs.remove", "fs.rename", "fs.setattr", "fs.symlink", "fs.link", "fs.ftruncate", "fs.openread",
		"fs.readraw", "shell.exec", "process.session.open", "proc.spawn", "proc.list", "sched.add", "codemode.run", "sys.token.create"} {
		if n.Can(name) {
			t.Errorf("nobody may %s", name)
		}
	}
}
