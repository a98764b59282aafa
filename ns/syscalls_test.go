package ns_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/fusefs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// mayMake is what ls /sys/syscalls shows id: the syscalls with a
// descriptor that sys.syscall.list says id may make.
func mayMake(t *testing.T, k *kernel.Kernel, id *kernel.Identity) []string {
	t.Helper()
	res, err := kernel.Do(context.Background(), k, kerneltest.Caller(id), abi.SysSyscallList, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range k.Descs() {
		if slices.Contains(res.Syscalls, d.CallName()) {
			out = append(out, d.CallName())
		}
	}
	return out
}

// checkSchema checks that text is a syscall's schema file: the args and
// result schemas, the args one admitting args and refusing an unknown
// field.
func checkSchema(t *testing.T, text, args string) {
	t.Helper()
	var f struct{ Args, Result *jsonschema.Schema }
	if err := json.Unmarshal([]byte(text), &f); err != nil || f.Args == nil || f.Result == nil {
		t.Fatalf("schema file %q: %v", text, err)
	}
	rs, err := f.Args.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal([]byte(args), &v)
	if err := rs.Validate(v); err != nil {
		t.Errorf("args %s refused: %v", args, err)
	}
	if err := rs.Validate(map[string]any{"nope": 1}); err == nil {
		t.Errorf("args with an unknown field admitted")
	}
}

// /sys/syscalls over 9P: each reader lists the syscalls it may make that
// have a descriptor, reads each one's doc and schema, and finds no other
// (a root-only syscall is not there for alice); the files are read-only.
func TestSyscallsDir9P(t *testing.T) {
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	for _, c := range []struct {
		user string
		host int
		id   *kernel.Identity
	}{{"root", 0, e.Root}, {"alice", 1001, e.Alice}} {
		t.Run(c.user, func(t *testing.T) {
			srv := &ninep.Server{Root: space.Root(), Auth: space, Logger: kerneltest.Quiet()}
			l := vfstest.ListenUnix(t)
			vfstest.Serve(t, l, func(ctx context.Context, l net.Listener) error {
				return srv.Serve(ctx, l, func(net.Conn) vfs.Peer {
					return vfs.Peer{Transport: "9p-unix", HostUID: c.host, HostGID: c.host}
				})
			})
			fsys, err := ninep.Mount("unix!"+l.Addr().String(), c.user, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			fid, err := fsys.Open("/sys/syscalls", 0)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := fid.Dirreadall()
			fid.Close()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range ds {
				names = append(names, d.Name)
			}
			want := mayMake(t, e.K, c.id)
			if !slices.Equal(names, want) || !slices.Contains(names, "sys.whoami") {
				t.Fatalf("ls /sys/syscalls: %q, want %q", names, want)
			}
			if got := vfstest.ReadFile(t, fsys, "/sys/syscalls/sys.whoami/doc"); got != abi.SysWhoami.Doc+"\n" {
				t.Errorf("sys.whoami/doc: %q", got)
			}
			checkSchema(t, vfstest.ReadFile(t, fsys, "/sys/syscalls/sys.config.get/schema"), `{"key":"config/ai/provider"}`)
			_, err = fsys.Stat("/sys/syscalls/sys.user.add/doc")
			if root := c.user == "root"; root != (err == nil) {
				t.Errorf("%s stats sys.user.add/doc (root only): %v", c.user, err)
			}
			if _, err := fsys.Stat("/sys/syscalls/sys.events"); err == nil {
				t.Errorf("the internal syscall sys.events is listed")
			}
			if _, err := fsys.Open("/sys/syscalls/sys.whoami/schema", 1); err == nil {
				t.Errorf("schema opened for writing")
			}
		})
	}
}

// /sys/syscalls on a FUSE mount, read with ls and cat by root, by alice
// and by a host user with no account (which sys.syscall.list refuses):
// what each may make, nothing else; files are read-only to everyone.
func TestSyscallsDirFUSE(t *testing.T) {
	vfstest.Mountable(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (setpriv, a mount other uids reach)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv")
	}
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	dir, err := os.MkdirTemp("", "gsvsys-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.Remove(dir) })
	srv, err := fusefs.Mount(dir, space.Root(), space, fusefs.Options{Logger: kerneltest.Quiet()})
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot mount: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
		srv.Wait()
	})
	as := func(uid int) []string {
		if uid == 0 {
			return nil
		}
		u := strconv.Itoa(uid)
		return []string{"setpriv", "--reuid", u, "--regid", u, "--clear-groups"}
	}
	for _, c := range []struct {
		user string
		uid  int
		id   *kernel.Identity // nil: no account
	}{{"root", 0, e.Root}, {"alice", 1001, e.Alice}, {"stranger", 4242, nil}} {
		t.Run(c.user, func(t *testing.T) {
			out, errs, err := vfstest.Sh(dir, `ls "$M/sys/syscalls"`, as(c.uid)...)
			if c.id == nil {
				if err == nil || !strings.Contains(errs, "Permission denied") {
					t.Fatalf("a stranger's ls: %q %q %v", out, errs, err)
				}
				return
			}
			if want := strings.Join(mayMake(t, e.K, c.id), "\n") + "\n"; err != nil || out != want {
				t.Fatalf("ls: %q %q %v, want %q", out, errs, err, want)
			}
			out, errs, err = vfstest.Sh(dir, `cat "$M/sys/syscalls/sys.whoami/doc" && cat "$M/sys/syscalls/sys.user.list/schema"`, as(c.uid)...)
			doc, schemaText, _ := strings.Cut(out, "\n")
			if err != nil || doc != abi.SysWhoami.Doc {
				t.Fatalf("cat doc: %q %q %v", out, errs, err)
			}
			checkSchema(t, schemaText, `{}`)
			out, errs, err = vfstest.Sh(dir, `cat "$M/sys/syscalls/sys.user.add/doc"`, as(c.uid)...)
			if c.user == "root" {
				if err != nil || out != abi.SysUserAdd.Doc+"\n" {
					t.Errorf("root's sys.user.add/doc: %q %q %v", out, errs, err)
				}
			} else if err == nil || !strings.Contains(errs, "No such file") {
				t.Errorf("alice's sys.user.add/doc (root only): %q %q %v", out, errs, err)
			}
			if out, errs, err := vfstest.Sh(dir, `echo x > "$M/sys/syscalls/sys.whoami/doc"`, as(c.uid)...); err == nil {
				t.Errorf("a write to doc succeeded: %q %q", out, errs)
			}
		})
	}
}
