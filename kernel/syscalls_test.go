package kernel

import (
	"context"
	"slices"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// sys.syscall.list names the syscalls the caller may make with a frame:
// not Internal or kernel-only ones, not those its capabilities or a
// syscall's own rule refuse it.
func TestSyscallList(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	noop := func(context.Context, *Caller, *struct{}) (*struct{}, error) { return &struct{}{}, nil }
	k.Register(
		Handle(abi.Call[struct{}, *struct{}]{Name: "zz.rootcap"}, noop),
		Handle(abi.Call[struct{}, *struct{}]{Name: "zz.kernel", Flags: KernelOnly}, noop),
		Handle(abi.Call[struct{}, *struct{}]{Name: "zz.internal", Flags: Internal}, noop),
		Handle(abi.Call[struct{}, *struct{}]{Name: "sys.zz.admit"}, noop).Admit(func(c *Caller) error {
			if c.Uid != 0 {
				return abi.E(abi.Permission, "root only")
			}
			return nil
		}),
	)
	list := func(id *Identity) []string {
		t.Helper()
		r, err := Do(context.Background(), k, &Caller{Identity: id}, abi.SysSyscallList, &abi.SyscallListArgs{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(r.Syscalls) {
			t.Fatalf("not sorted: %v", r.Syscalls)
		}
		return r.Syscalls
	}
	tests := []struct {
		name     string
		id       *Identity
		has, not []string
	}{
		{"alice", alice, []string{"sys.whoami", "sys.syscall.list", "sys.config.get", "sys.token.create"},
			[]string{"zz.rootcap", "zz.kernel", "zz.internal", "sys.zz.admit", "sys.events", "sys.lasterror"}},
		{"root", root, []string{"sys.whoami", "sys.syscall.list", "zz.rootcap", "sys.zz.admit", "sys.user.add"},
			[]string{"zz.kernel", "zz.internal", "sys.events"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := list(tt.id)
			for _, n := range tt.has {
				if !slices.Contains(got, n) {
					t.Errorf("%s lacks %s: %v", tt.name, n, got)
				}
			}
			for _, n := range tt.not {
				if slices.Contains(got, n) {
					t.Errorf("%s lists %s: %v", tt.name, n, got)
				}
			}
		})
	}
	if r := frame(t, k, alice, `{"call":"sys.syscall.list"}`); !r.OK {
		t.Fatalf("a frame: %+v", r.Error)
	}
}
