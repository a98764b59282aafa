package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/mcp"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs/fusefs"
)

// liveness bounds every wait of these tests for something that must
// happen; it guards against hangs only (a loaded machine is slow).
const liveness = 90 * time.Second

// sys is a system as gsvfs stands it up: a kernel with root, alice
// (host uid 1001) and bob (1002), the devices room (the data tree and
// exec sessions) and the mcp room, in one namespace.
type sys struct {
	t                *testing.T
	k                *kernel.Kernel
	space            *ns.Space
	room             *mcp.Room
	root, alice, bob *kernel.Identity
	data             string // the data tree's directory
}

// newSys stands a system up; it closes when the test ends.
func newSys(t *testing.T) *sys {
	t.Helper()
	return newSysWith(t, mcp.Options{})
}

// newSysWith is newSys with the mcp room's options opts (its logger is
// the tests' quiet one).
func newSysWith(t *testing.T, opts mcp.Options) *sys {
	t.Helper()
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	t.Cleanup(func() { space.Close() })
	ctx := context.Background()
	dev, err := devices.New(e.K, devices.Options{Space: space, Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, dev); err != nil {
		t.Fatal(err)
	}
	dev.SetRoot(space.Root())
	opts.Logger = kerneltest.Quiet()
	room, err := mcp.Open(space, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, room); err != nil {
		t.Fatal(err)
	}
	return &sys{t: t, k: e.K, space: space, room: room, root: e.Root, alice: e.Alice, bob: e.Bob,
		data: filepath.Join(e.K.StateDir(), "fs")}
}

// as is the caller id.
func as(id *kernel.Identity) *kernel.Caller { return &kernel.Caller{Identity: id} }

// do makes the syscall d as id, within liveness.
func do[A, R any](s *sys, id *kernel.Identity, d abi.Call[A, R], args *A) (R, error) {
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	return kernel.Do(ctx, s.k, as(id), d, args)
}

// must is do that fails the test on an error.
func must[A, R any](s *sys, id *kernel.Identity, d abi.Call[A, R], args *A) R {
	s.t.Helper()
	r, err := do(s, id, d, args)
	if err != nil {
		s.t.Fatalf("%s: %v", d.Name, err)
	}
	return r
}

var (
	buildOnce sync.Once
	serverBin string
	buildErr  error
)

// testServer builds testdata/testserver (static: it runs in a sandbox)
// once and returns its path.
func testServer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gsv-mcp-bin-")
		if err != nil {
			buildErr = err
			return
		}
		serverBin = filepath.Join(dir, "testserver")
		cmd := exec.Command("go", "build", "-o", serverBin, "./testdata/testserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build testserver: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return serverBin
}

// needSandbox skips the test unless sandboxes can run here.
func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("stdio servers run in sandboxes, which need root")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("stdio servers run in sandboxes, which need bubblewrap (bwrap)")
	}
}

// install copies the test server into u's home in the data tree, at
// ~/mcpbin/testserver, owned by u's disk ids as the daemon keeps files
// (a sandbox's rights are the disk's).
func (s *sys) install(u *kernel.Identity) {
	s.t.Helper()
	b, err := os.ReadFile(testServer(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	dir := filepath.Join(s.data, "home", u.Username, "mcpbin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "testserver"), b, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "testserver")} {
		if err := os.Lchown(p, int(diskBase+u.Uid), int(diskBase+u.Gid)); err != nil {
			s.t.Fatal(err)
		}
	}
}

// diskBase is where the disk ids of GSV's uids and gids begin.
const diskBase = 1610612736

// stdioArgs are the add args of the test server as a stdio server of the
// user's, run from ~/mcpbin with extra flags.
func stdioArgs(name, network string, flags ...string) *abi.McpAddArgs {
	return &abi.McpAddArgs{Name: name, Stdio: &abi.McpStdio{
		Command:     append([]string{"/opt/mcp/testserver"}, flags...),
		NetworkMode: network,
		Mounts:      []abi.ProcessMount{{HostPath: "~/mcpbin", GuestPath: "/opt/mcp", Mode: "ro"}},
	}}
}

// text is the text of a call result's first content block.
func text(t *testing.T, r *abi.McpCallResult) string {
	t.Helper()
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(r.Content, &blocks); err != nil || len(blocks) == 0 {
		t.Fatalf("content %s: %v", r.Content, err)
	}
	return blocks[0].Text
}

// mount mounts the namespace with FUSE where every host uid may reach
// it, or skips the test; sh runs a script there as a host uid (0: root)
// with $M the mount point.
func (s *sys) mount() func(uid int, script string) (string, error) {
	t := s.t
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv")
	}
	mnt, err := os.MkdirTemp("", "gsvmcp-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(mnt, 0o755)
	srv, err := fusefs.Mount(mnt, s.space.Root(), s.space, fusefs.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if errors.Is(err, syscall.EPERM) || errors.Is(err, os.ErrNotExist) {
		os.Remove(mnt)
		t.Skipf("cannot mount: %v", err)
	}
	if err != nil {
		os.Remove(mnt)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		srv.Wait()
		os.Remove(mnt)
	})
	return func(uid int, script string) (string, error) {
		args := []string{"sh", "-c", script}
		if uid != 0 {
			args = append([]string{"setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=100", "--clear-groups"}, args...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C", "M=" + mnt}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// kernelDo makes sys.mcp.call as alice with ctx.
func kernelDo(ctx context.Context, s *sys, a *abi.McpCallArgs) (*abi.McpCallResult, error) {
	return kernel.Do(ctx, s.k, as(s.alice), abi.SysMcpCall, a)
}
