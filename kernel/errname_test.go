package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// serve sends one request frame as id and returns the response.
func serve(t *testing.T, k *kernel.Kernel, id *kernel.Identity, call, args string) abi.Response {
	t.Helper()
	req, err := json.Marshal(abi.Request{Type: "req", ID: "1", Call: call, Args: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	var r abi.Response
	if err := json.Unmarshal(k.Serve(context.Background(), kerneltest.Caller(id), req), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestErrorsNameTheirSyscall: whatever refuses a syscall (its args, the
// dispatcher, the handler), the message of the failed frame begins with
// the syscall's name.
func TestErrorsNameTheirSyscall(t *testing.T) {
	e := kerneltest.Open(t)
	// Every registered public syscall, given an argument it does not have.
	for _, name := range e.K.Syscalls() {
		r := serve(t, e.K, e.Root, name, `{"noSuchArgument":1}`)
		if r.OK || r.Error == nil || !strings.HasPrefix(r.Error.Message, name+": ") || r.Error.Code != 400 {
			t.Errorf("%s with an unknown argument: %+v", name, r.Error)
		}
	}
	// The sys calls, refused by their handlers or by the dispatcher.
	for _, c := range []struct {
		id   *kernel.Identity
		call string
		args string
		code int
	}{
		{e.Root, "sys.setup", `{}`, 409},
		{e.Alice, "sys.user.add", `{"username":"carol"}`, 403},
		{e.Root, "sys.user.add", `{"username":"Not Valid"}`, 400},
		{e.Root, "sys.user.add", `{"username":"alice"}`, 409},
		{e.Root, "sys.user.add", `{"username":"dave","uid":5}`, 400},
		{e.Alice, "sys.config.set", `{"key":"config/server/name","value":"x"}`, 403},
		{e.Root, "sys.config.set", `{"key":"bad key","value":"x"}`, 400},
		{e.Alice, "sys.token.create", `{"kind":"root"}`, 400},
		{e.Alice, "sys.token.create", `{"kind":"user","uid":0}`, 403},
		{e.Alice, "sys.token.create", `{"kind":"user","expiresAt":1}`, 400},
		{e.Alice, "sys.token.list", `{"uid":0}`, 403},
		{e.Alice, "sys.events", `{}`, 400},
		{e.Alice, "sys.nosuch", `{}`, 400},
		{e.Alice, "sys.whoami", `[1]`, 400},
	} {
		r := serve(t, e.K, c.id, c.call, c.args)
		if r.OK || r.Error == nil {
			t.Errorf("%s %s as %s: succeeded", c.call, c.args, c.id.Username)
			continue
		}
		if !strings.HasPrefix(r.Error.Message, c.call+": ") || r.Error.Code != c.code {
			t.Errorf("%s %s as %s: %d %q, want %d and the syscall's name first", c.call, c.args, c.id.Username, r.Error.Code, r.Error.Message, c.code)
		}
	}
}
