package local_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// env is a kernel (kerneltest's) with the device router's syscalls
// registered, as the daemon has them: a call without a target is the
// local device's.
type env struct {
	*kernel.Kernel
	r        *devices.Router
	d        *local.Device
	dataPath string
}

// Close closes the router (and so the local device), then the kernel.
func (e *env) Close() error {
	e.r.Close()
	return e.Kernel.Close()
}

// newKernel opens a kernel set up with root, alice (host uid 1001) and
// bob (host uid 1002), and the device router with the local device on it.
func newKernel(t testing.TB) (*env, *kernel.Identity, *kernel.Identity, *kernel.Identity) {
	t.Helper()
	e := kerneltest.Open(t)
	r, err := devices.New(e.K, devices.Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	e.K.Register(r.Syscalls()...)
	return &env{Kernel: e.K, r: r, d: r.Local(), dataPath: filepath.Join(e.K.StateDir(), "fs")}, e.Root, e.Alice, e.Bob
}

// frame serves the request frame req as id.
func frame(t testing.TB, k *env, id *kernel.Identity, req string) abi.Response {
	t.Helper()
	var r abi.Response
	out := k.Serve(context.Background(), &kernel.Caller{Identity: id}, []byte(req))
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("response %q: %v", out, err)
	}
	return r
}

// asMap is a syscall's result as its JSON object, integers as int.
func asMap(res any) map[string]any {
	b, err := json.Marshal(res)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil
	}
	for k, v := range m {
		if f, ok := v.(float64); ok && f == float64(int(f)) {
			m[k] = int(f)
		}
	}
	return m
}

// reopen closes k (its router, then its kernel) and opens its state
// again with a new router, as a restarted daemon does.
func reopen(t testing.TB, k *env) *env {
	t.Helper()
	k.r.Close()
	k.Kernel.Close()
	e := kerneltest.OpenAt(t, k.StateDir())
	r, err := devices.New(e.K, devices.Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	e.K.Register(r.Syscalls()...)
	return &env{Kernel: e.K, r: r, d: r.Local(), dataPath: filepath.Join(e.K.StateDir(), "fs")}
}
