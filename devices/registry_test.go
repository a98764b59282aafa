package devices

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// newRegistry opens a kernel with the router added to its namespace, as
// the daemon has them, and returns the router for the connection's calls
// (Register, Seen, Disconnected).
func newRegistry(t *testing.T, dir string) (*kerneltest.Env, *Router) {
	t.Helper()
	e := kerneltest.OpenAt(t, dir)
	space := ns.New(e.K)
	r, err := New(e.K, Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { space.Close() })
	return e, r
}

// hello is the hello of device id serving fs.read and shell.exec.
func hello(id string) abi.DeviceHello {
	return abi.DeviceHello{ID: id, Platform: "linux/amd64", Version: "0.1", Implements: []string{"fs.read", "shell.exec"}}
}

// ids are the ids of the devices of a list.
func ids(r *abi.DeviceListResult) string {
	var out []string
	for _, d := range r.Devices {
		out = append(out, d.DeviceID)
	}
	return strings.Join(out, ",")
}

// addGroup makes group name (gid) with members uids, straight in the
// store (no syscall adds a group yet).
func addGroup(t *testing.T, k *kernel.Kernel, gid uint32, name string, uids ...uint32) {
	t.Helper()
	ctx := context.Background()
	if _, err := k.Store.Exec(ctx, `INSERT INTO groups(gid,name) VALUES(?,?)`, gid, name); err != nil {
		t.Fatal(err)
	}
	for _, u := range uids {
		if _, err := k.Store.Exec(ctx, `INSERT INTO group_members(gid,uid) VALUES(?,?)`, gid, u); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRegistryAccess: a registered device is listed and read by root, its
// owner and, once granted, members of the group; anyone else sees no
// device (list empty, get null, update null, grant 404); only the owner
// and root update and grant; a group member may use it but not change it.
func TestRegistryAccess(t *testing.T) {
	e, r := newRegistry(t, t.TempDir())
	ctx := context.Background()
	if err := r.Register(ctx, e.Alice.Uid, hello("laptop"), "c1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ctx, e.Bob.Uid, hello("desk"), "c2"); err != nil {
		t.Fatal(err)
	}
	addGroup(t, e.K, 2000, "team", e.Bob.Uid)
	bob := kerneltest.Host(t, e.K, 1002) // with the team group now

	d, err := r.deviceRecord(ctx, "laptop")
	if err != nil || d.OwnerUid != e.Alice.Uid || !d.Online || d.Platform != "linux/amd64" || d.Version != "0.1" ||
		strings.Join(d.Implements, ",") != "fs.read,shell.exec" || d.ConnectedAt == nil || d.DisconnectedAt != nil ||
		d.FirstSeenAt == 0 || d.LastSeenAt == 0 || len(d.Groups) != 0 {
		t.Fatalf("deviceRecord(laptop) = %+v, %v", d, err)
	}
	if _, err := r.deviceRecord(ctx, "nope"); abi.Code(err) != 404 {
		t.Fatalf("deviceRecord(nope): %v, want 404", err)
	}

	steps := []struct {
		name string
		who  *kernel.Identity
		call string
		args any
		code int    // the error's code; 0: none
		want string // list: the ids; get, update, grant: the device's id and groups ("-" for null)
	}{
		{"root lists all", e.Root, "sys.device.list", &abi.DeviceListArgs{}, 0, "desk,laptop"},
		{"alice lists hers", e.Alice, "sys.device.list", &abi.DeviceListArgs{}, 0, "laptop"},
		{"bob lists his", bob, "sys.device.list", &abi.DeviceListArgs{}, 0, "desk"},
		{"alice gets hers", e.Alice, "sys.device.get", &abi.DeviceGetArgs{DeviceID: "laptop"}, 0, "laptop[]"},
		{"root gets any", e.Root, "sys.device.get", &abi.DeviceGetArgs{DeviceID: "laptop"}, 0, "laptop[]"},
		{"bob gets null", bob, "sys.device.get", &abi.DeviceGetArgs{DeviceID: "laptop"}, 0, "-"},
		{"missing is null", e.Root, "sys.device.get", &abi.DeviceGetArgs{DeviceID: "nope"}, 0, "-"},
		{"bad id is null", e.Root, "sys.device.get", &abi.DeviceGetArgs{DeviceID: "../x"}, 0, "-"},
		{"bob updates null", bob, "sys.device.update", &abi.DeviceUpdateArgs{DeviceID: "laptop", Description: "mine"}, 0, "-"},
		{"bob grants 404", bob, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "team"}, 404, ""},
		{"grant missing 404", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "nope", Group: "team"}, 404, ""},
		{"grant no group 404", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "nogroup"}, 404, ""},
		{"grant empty group 400", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop"}, 400, ""},
		{"grant bad id 400", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "Bad", Group: "team"}, 400, ""},
		{"alice grants team", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "team"}, 0, "laptop[team]"},
		{"granting twice is once", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "team"}, 0, "laptop[team]"},
		{"bob lists both", bob, "sys.device.list", &abi.DeviceListArgs{}, 0, "desk,laptop"},
		{"bob gets laptop", bob, "sys.device.get", &abi.DeviceGetArgs{DeviceID: "laptop"}, 0, "laptop[team]"},
		{"member updates null", bob, "sys.device.update", &abi.DeviceUpdateArgs{DeviceID: "laptop", Description: "mine"}, 0, "-"},
		{"member grants 403", bob, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "users"}, 403, ""},
		{"alice updates", e.Alice, "sys.device.update", &abi.DeviceUpdateArgs{DeviceID: "laptop", Description: "Alice's laptop"}, 0, "laptop[team]"},
		{"root updates", e.Root, "sys.device.update", &abi.DeviceUpdateArgs{DeviceID: "desk", Description: "bob's desk"}, 0, "desk[]"},
		{"update missing null", e.Root, "sys.device.update", &abi.DeviceUpdateArgs{DeviceID: "nope", Description: "x"}, 0, "-"},
		{"description one line", e.Alice, "sys.device.update", &abi.DeviceUpdateArgs{DeviceID: "laptop", Description: "a\nb"}, 400, ""},
		{"description not too long", e.Alice, "sys.device.update", &abi.DeviceUpdateArgs{DeviceID: "laptop", Description: strings.Repeat("x", 1025)}, 400, ""},
		{"root grants users", e.Root, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "desk", Group: "users"}, 0, "desk[users]"},
		{"alice lists desk via users", e.Alice, "sys.device.list", &abi.DeviceListArgs{}, 0, "desk,laptop"},
		{"bob revokes users", bob, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "desk", Group: "users", Revoke: true}, 0, "desk[]"},
		{"alice lists hers again", e.Alice, "sys.device.list", &abi.DeviceListArgs{}, 0, "laptop"},
		{"alice revokes team", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "team", Revoke: true}, 0, "laptop[]"},
		{"revoking twice is nothing", e.Alice, "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "team", Revoke: true}, 0, "laptop[]"},
		{"bob lists his again", bob, "sys.device.list", &abi.DeviceListArgs{}, 0, "desk"},
	}
	for _, s := range steps {
		res, err := e.K.Call(ctx, kerneltest.Caller(s.who), s.call, s.args)
		if abi.Code(err) != s.code && (s.code != 0 || err != nil) {
			t.Fatalf("%s: %s: err %v, want code %d", s.name, s.call, err, s.code)
		}
		if s.code != 0 {
			continue
		}
		var got string
		switch res := res.(type) {
		case *abi.DeviceListResult:
			got = ids(res)
		case *abi.DeviceGetResult:
			got = "-"
			if res.Device != nil {
				got = res.Device.DeviceID + "[" + strings.Join(res.Device.Groups, ",") + "]"
			}
		default:
			t.Fatalf("%s: result %T", s.name, res)
		}
		if got != s.want {
			t.Fatalf("%s: %s = %s, want %s", s.name, s.call, got, s.want)
		}
	}
	if d, _ := r.deviceRecord(ctx, "laptop"); d.Description != "Alice's laptop" {
		t.Fatalf("laptop's description %q", d.Description)
	}
	// A user may make the calls: they are the users group's.
	for _, call := range []string{"sys.device.list", "sys.device.get", "sys.device.update", "sys.device.grant"} {
		if !e.Alice.Can(call) {
			t.Errorf("alice may not make %s", call)
		}
	}
}

// TestRegister: a device id is checked (400), as is the rest of the
// hello; another user's id is 403; the owner registering again keeps the
// first-seen time and the description, and takes the new platform.
func TestRegister(t *testing.T) {
	e, r := newRegistry(t, t.TempDir())
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		h    abi.DeviceHello
		want string
	}{
		{"empty id", hello(""), "a device id is empty"},
		{"gsv", hello("gsv"), `device id "gsv": it names the kernel's own device`},
		{"zero", hello("zero"), `device id "zero": it names a file of /dev`},
		{"null", hello("null"), `device id "null": it names a file of /dev`},
		{"upper case", hello("Laptop"), "want only a-z"},
		{"slash", hello("a/b"), "want only a-z"},
		{"dot dot", hello(".."), "not a name"},
		{"too long", hello(strings.Repeat("a", 65)), "longer than 64"},
		{"platform newline", abi.DeviceHello{ID: "x", Platform: "linux\n"}, "platform has a control character"},
		{"bad implements", abi.DeviceHello{ID: "x", Implements: []string{"fs.read; rm"}}, `"fs.read; rm" is not a syscall name`},
	} {
		err := r.Register(ctx, e.Alice.Uid, tc.h, "c")
		if abi.Code(err) != 400 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Register: %v, want 400 %q", tc.name, err, tc.want)
		}
	}
	if err := r.Register(ctx, e.Alice.Uid, hello(strings.Repeat("a", 64)), "c"); err != nil {
		t.Errorf("a 64-character id: %v", err)
	}
	if err := r.Register(ctx, e.Alice.Uid, hello("my-laptop.home_1"), "c1"); err != nil {
		t.Fatal(err)
	}
	first, err := r.deviceRecord(ctx, "my-laptop.home_1")
	if err != nil {
		t.Fatal(err)
	}
	err = r.Register(ctx, e.Bob.Uid, hello("my-laptop.home_1"), "c2")
	if abi.Code(err) != 403 || !strings.Contains(err.Error(), "device my-laptop.home_1 belongs to another user") {
		t.Fatalf("bob registers alice's id: %v, want 403", err)
	}
	if _, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Alice), abi.SysDeviceUpdate, &abi.DeviceUpdateArgs{DeviceID: "my-laptop.home_1", Description: "d"}); err != nil {
		t.Fatal(err)
	}
	h := hello("my-laptop.home_1")
	h.Platform, h.Implements = "darwin/arm64", nil
	if err := r.Register(ctx, e.Alice.Uid, h, "c3"); err != nil {
		t.Fatal(err)
	}
	d, err := r.deviceRecord(ctx, "my-laptop.home_1")
	if err != nil || d.FirstSeenAt != first.FirstSeenAt || d.Description != "d" || d.Platform != "darwin/arm64" ||
		d.Implements == nil || len(d.Implements) != 0 || d.OwnerUid != e.Alice.Uid {
		t.Fatalf("registered again: %+v, %v", d, err)
	}
	if err := r.Seen(ctx, "nope"); abi.Code(err) != 404 {
		t.Fatalf("Seen(nope): %v, want 404", err)
	}
}

// TestDisconnected: only the device's current connection takes it
// offline (a superseded one does not); an offline device is listed only
// with includeOffline, and get still shows it; a restart finds every
// device offline.
func TestDisconnected(t *testing.T) {
	dir := t.TempDir()
	e, r := newRegistry(t, dir)
	ctx := context.Background()
	if err := r.Register(ctx, e.Alice.Uid, hello("laptop"), "c1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(ctx, e.Alice.Uid, hello("laptop"), "c2"); err != nil { // supersedes c1
		t.Fatal(err)
	}
	if err := r.Disconnected(ctx, "laptop", "c1"); err != nil {
		t.Fatal(err)
	}
	if d, err := r.deviceRecord(ctx, "laptop"); err != nil || !d.Online || d.DisconnectedAt != nil {
		t.Fatalf("after the stale connection's end: %+v, %v; want online", d, err)
	}
	if err := r.Disconnected(ctx, "laptop", "c2"); err != nil {
		t.Fatal(err)
	}
	d, err := r.deviceRecord(ctx, "laptop")
	if err != nil || d.Online || d.DisconnectedAt == nil || d.LastSeenAt < *d.DisconnectedAt {
		t.Fatalf("after the connection's end: %+v, %v; want offline", d, err)
	}
	for _, tc := range []struct {
		who     *kernel.Identity
		offline bool
		want    string
	}{
		{e.Alice, false, ""},
		{e.Alice, true, "laptop"},
		{e.Root, false, ""},
		{e.Root, true, "laptop"},
		{e.Bob, true, ""},
	} {
		res, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(tc.who), abi.SysDeviceList, &abi.DeviceListArgs{IncludeOffline: tc.offline})
		if err != nil || ids(res) != tc.want || res.Devices == nil {
			t.Errorf("%s lists (includeOffline %v): %+v, %v; want %q", tc.who.Username, tc.offline, res, err, tc.want)
		}
	}
	g, err := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Alice), abi.SysDeviceGet, &abi.DeviceGetArgs{DeviceID: "laptop"})
	if err != nil || g.Device == nil || g.Device.Online {
		t.Fatalf("get an offline device: %+v, %v", g, err)
	}
	// Online again, then the daemon restarts: offline.
	if err := r.Register(ctx, e.Alice.Uid, hello("laptop"), "c3"); err != nil {
		t.Fatal(err)
	}
	if err := r.Seen(ctx, "laptop"); err != nil {
		t.Fatal(err)
	}
	r2, err := New(e.K, Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	d, err = r2.deviceRecord(ctx, "laptop")
	if err != nil || d.Online || d.DisconnectedAt == nil {
		t.Fatalf("after a restart: %+v, %v; want offline", d, err)
	}
	// The connection that was live before the restart ends late: nothing changes.
	if err := r2.Disconnected(ctx, "laptop", "c3"); err != nil {
		t.Fatal(err)
	}
	if d2, err := r2.deviceRecord(ctx, "laptop"); err != nil || *d2.DisconnectedAt != *d.DisconnectedAt {
		t.Fatalf("a connection from before the restart ends: %+v, %v", d2, err)
	}
}

// TestDevicesPerUser: a user owns at most config/devices/max_per_user
// devices (16 by default); one more new id is refused with a 409 naming
// the limit, at registration and at a device's hello, while the ids they
// have reconnect; removing one (sys.device.remove, the owner or root)
// makes room; root has no limit; another user may not remove a device
// (404, as for none).
func TestDevicesPerUser(t *testing.T) {
	e := newDevEnv(t)
	ctx := context.Background()
	for i := range DefaultMaxDevices {
		if err := e.r.Register(ctx, e.Alice.Uid, hello(fmt.Sprintf("dev%d", i)), "c"); err != nil {
			t.Fatalf("device %d of alice's: %v", i+1, err)
		}
	}
	err := e.r.Register(ctx, e.Alice.Uid, hello("onemore"), "c")
	if abi.Code(err) != 409 || !strings.Contains(err.Error(), "devices.max_per_user") || !strings.Contains(err.Error(), "gsv device remove") {
		t.Fatalf("alice's device %d: %v, want a 409 naming the limit", DefaultMaxDevices+1, err)
	}
	// Over TCP, the hello of a new id is refused with the same error.
	g := &rogue{answer: func(abi.Request) io.Reader { return frameOf(`{}`) }}
	if w := g.dial(t, e, "onemore", e.nodeToken(t, e.Alice, "onemore")); w.OK || !strings.Contains(w.Error, "devices.max_per_user") {
		t.Fatalf("the hello of alice's device %d: %+v", DefaultMaxDevices+1, w)
	}
	// An id she has connects again; root and bob are not limited by hers.
	if err := e.r.Register(ctx, e.Alice.Uid, hello("dev0"), "c2"); err != nil {
		t.Fatalf("alice's dev0 again: %v", err)
	}
	if err := e.r.Register(ctx, e.Bob.Uid, hello("bobs"), "c"); err != nil {
		t.Fatalf("bob's first device: %v", err)
	}
	for i := range DefaultMaxDevices + 1 {
		if err := e.r.Register(ctx, e.Root.Uid, hello(fmt.Sprintf("root%d", i)), "c"); err != nil {
			t.Fatalf("root's device %d: %v", i+1, err)
		}
	}
	// Identities made after the router's migrations (which grant
	// sys.device.remove to the users group).
	alice, bob := kerneltest.Host(t, e.K, 1001), kerneltest.Host(t, e.K, 1002)
	// bob may not remove hers: it is not there for him.
	if _, err := e.K.Call(ctx, kerneltest.Caller(bob), "sys.device.remove", &abi.DeviceRemoveArgs{DeviceID: "dev3"}); abi.Code(err) != 404 {
		t.Fatalf("bob removes alice's dev3: %v, want 404", err)
	}
	res, err := e.K.Call(ctx, kerneltest.Caller(alice), "sys.device.remove", &abi.DeviceRemoveArgs{DeviceID: "dev3"})
	if err != nil || res.(*abi.DeviceGetResult).Device.DeviceID != "dev3" {
		t.Fatalf("alice removes dev3: %v %v", res, err)
	}
	if d, _ := kernel.Do(context.Background(), e.K, kerneltest.Caller(e.Alice), abi.SysDeviceGet, &abi.DeviceGetArgs{DeviceID: "dev3"}); d.Device != nil {
		t.Fatalf("dev3 after its removal: %+v", d.Device)
	}
	if err := e.r.Register(ctx, e.Alice.Uid, hello("onemore"), "c"); err != nil {
		t.Fatalf("alice's new device after a removal: %v", err)
	}
	// The limit is root's to set.
	if _, err := e.K.Call(ctx, kerneltest.Caller(e.Root), "sys.config.set", &abi.ConfigSetArgs{Key: "config/devices/max_per_user", Value: json.RawMessage(`"1"`)}); err != nil {
		t.Fatal(err)
	}
	if err := e.r.Register(ctx, e.Bob.Uid, hello("bobs2"), "c"); abi.Code(err) != 409 {
		t.Fatalf("bob's second device with a limit of 1: %v", err)
	}
	for _, bad := range []string{`"many"`, `"-1"`, `"1.5"`, `"2000000"`} {
		if _, err := e.K.Call(ctx, kerneltest.Caller(e.Root), "sys.config.set", &abi.ConfigSetArgs{Key: "config/devices/max_per_user", Value: json.RawMessage(bad)}); abi.Code(err) != 400 {
			t.Errorf("devices.max_per_user = %s: %v, want 400", bad, err)
		}
	}
}

// TestDevListing: /dev lists gsv and the devices the reader may use
// (root: all); a device the reader may not use is not there, whether
// listed or walked to by name (ENOENT, as for an id nobody has), until
// the reader's group is granted it.
func TestDevListing(t *testing.T) {
	e := newDevEnv(t)
	ctx := context.Background()
	for _, d := range []struct {
		who *kernel.Identity
		id  string
	}{{e.Alice, "laptop"}, {e.Bob, "desk"}} {
		g := &rogue{answer: func(abi.Request) io.Reader { return frameOf(`{}`) }}
		if w := g.dial(t, e, d.id, e.nodeToken(t, d.who, d.id)); !w.OK {
			t.Fatalf("device %s: %+v", d.id, w)
		}
	}
	dev, err := e.space.Root().Lookup(ctx, e.Root, "dev")
	if err != nil {
		t.Fatal(err)
	}
	list := func(id *kernel.Identity) string {
		t.Helper()
		ents, err := dev.(vfs.Dir).ReadDir(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name)
		}
		slices.Sort(names)
		return strings.Join(names, ",")
	}
	lookup := func(id *kernel.Identity, name string) error {
		_, err := dev.(vfs.Dir).Lookup(ctx, id, name)
		return err
	}
	for _, c := range []struct {
		who  *kernel.Identity
		want string
	}{{e.Root, "desk,gsv,laptop,null,random,urandom,zero"}, {e.Alice, "gsv,laptop,null,random,urandom,zero"}, {e.Bob, "desk,gsv,null,random,urandom,zero"}} {
		if got := list(c.who); got != c.want {
			t.Errorf("ls /dev as uid %d: %s, want %s", c.who.Uid, got, c.want)
		}
	}
	for _, name := range []string{"null", "zero", "random", "urandom"} {
		if err := lookup(e.Bob, name); err != nil {
			t.Errorf("bob walks to /dev/%s: %v", name, err)
		}
	}
	for _, name := range []string{"laptop", "nosuch"} {
		if err := lookup(e.Bob, name); vfs.Errno(err) != syscall.ENOENT {
			t.Errorf("bob walks to /dev/%s: %v, want ENOENT", name, err)
		}
	}
	if err := lookup(e.Alice, "laptop"); err != nil {
		t.Errorf("alice walks to her /dev/laptop: %v", err)
	}
	if err := lookup(e.Root, "laptop"); err != nil {
		t.Errorf("root walks to /dev/laptop: %v", err)
	}
	addGroup(t, e.K, 2000, "team", e.Bob.Uid)
	bob := kerneltest.Host(t, e.K, 1002)
	if _, err := e.K.Call(ctx, kerneltest.Caller(e.Alice), "sys.device.grant", &abi.DeviceGrantArgs{DeviceID: "laptop", Group: "team"}); err != nil {
		t.Fatal(err)
	}
	if got := list(bob); got != "desk,gsv,laptop,null,random,urandom,zero" {
		t.Errorf("ls /dev as bob, granted laptop: %s", got)
	}
	if err := lookup(bob, "laptop"); err != nil {
		t.Errorf("bob, granted laptop, walks to it: %v", err)
	}
}
