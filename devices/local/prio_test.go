package local_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
	"gsvfs.dev/gsvfs/kernel"
)

// shell.exec's commands run sandbox.Nice steps nicer than the daemon:
// root's on the host (root may renice them), everyone else's in their
// sandbox, where renice cannot take it back.
func TestShellExecPriority(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	base, _ := strconv.Atoi(strings.Fields(rest)[16])
	want := strconv.Itoa(min(base+sandbox.Nice, 19))
	for _, c := range []struct {
		name  string
		id    *kernel.Identity
		input string
	}{
		{"root on the host", root, `cut -d' ' -f19 /proc/$$/stat`},
		{"alice in a sandbox", alice, `renice -n 0 -p $$ >/dev/null 2>&1; cut -d' ' -f19 /proc/$$/stat`},
	} {
		res, err := k.Call(context.Background(), &kernel.Caller{Identity: c.id}, "shell.exec", &abi.ShellExecArgs{Input: c.input})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r := res.(*abi.ShellExecResult); r.Status != "completed" || strings.TrimSpace(r.Output) != want {
			t.Errorf("%s: %+v, want nice %s", c.name, r, want)
		}
	}
}
