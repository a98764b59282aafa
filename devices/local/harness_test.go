package local

import (
	"context"
	"encoding/json"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// env is a kernel (kerneltest's) with the local device's syscalls
// registered, the routable ones served straight by the device.
type env struct {
	*kernel.Kernel
	d        *Device
	dataPath string
}

// Close closes the device, then the kernel.
func (e *env) Close() error {
	e.d.Close()
	return e.Kernel.Close()
}

// newKernel opens a kernel set up with root, alice (host uid 1001) and
// bob (host uid 1002), and the local device on it.
func newKernel(t testing.TB) (*env, *kernel.Identity, *kernel.Identity, *kernel.Identity) {
	t.Helper()
	e := kerneltest.Open(t)
	d, err := New(e.K, Options{Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	e.K.Register(d.Syscalls()...)
	e.K.Register(
		kernel.Fn("fs.read", 0, d.Read),
		kernel.Fn("fs.write", 0, d.Write),
		kernel.Fn("fs.edit", 0, d.Edit),
		kernel.Fn("fs.delete", 0, d.Delete),
		kernel.Fn("fs.search", 0, d.Search),
		kernel.Fn("shell.exec", 0, d.Exec).Admit(AdmitShell),
	)
	return &env{Kernel: e.K, d: d, dataPath: d.dataPath}, e.Root, e.Alice, e.Bob
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
