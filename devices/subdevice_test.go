package devices

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/export"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/vfs"
)

// Subprocess devices: the test binary run again as a device daemon (what
// `gsvfs device` does: devices/export's tree served over 9P on the
// connection it dials, after its hello), so that a device of these tests
// is a real second process over real TCP.

// subDeviceEnv names the environment variable that makes the test binary
// a device: "ADDR ID TOKEN ROOT", separated by tabs.
const subDeviceEnv = "GSV_TEST_SUBDEVICE"

func TestMain(m *testing.M) {
	if spec := os.Getenv(subDeviceEnv); spec != "" {
		if err := runSubDevice(spec); err != nil {
			fmt.Fprintln(os.Stderr, "subdevice:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runSubDevice serves one connection as the device spec names, until the
// kernel ends it. Its shell.exec waits an hour for a command before it
// answers "running".
func runSubDevice(spec string) error {
	f := strings.Split(spec, "\t")
	if len(f) != 4 {
		return fmt.Errorf("%s: want 4 fields, got %q", subDeviceEnv, spec)
	}
	addr, id, token, root := f[0], f[1], f[2], f[3]
	ex, err := export.New(export.Options{Root: root, ShellWait: time.Hour})
	if err != nil {
		return err
	}
	defer ex.Close()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	hello, _ := json.Marshal(abi.DeviceHello{ID: id, Token: token, Platform: runtime.GOOS + "/" + runtime.GOARCH, Version: "test", Implements: ex.Implements()})
	if _, err := nc.Write(append([]byte(abi.DeviceMagic), append(hello, '\n')...)); err != nil {
		return err
	}
	br := bufio.NewReader(nc)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("no welcome: %w", err)
	}
	var w abi.DeviceWelcome
	if err := json.Unmarshal(line, &w); err != nil || !w.OK {
		return fmt.Errorf("welcome %q: %v", line, err)
	}
	srv := &ninep.Server{Root: ex.Tree(), Auth: anyPeer{}, AuthTimeout: -1, MaxConns: -1, MaxFids: -1, MaxPrincipalInflight: -1}
	return srv.ServeConn(context.Background(), &readerConn{Conn: nc, r: br}, vfs.Peer{Transport: "device", HostUID: -1, HostGID: -1})
}

// anyPeer authenticates the kernel, the one peer of a device's tree.
type anyPeer struct{}

func (anyPeer) Authenticate(context.Context, vfs.Peer) (vfs.Cred, error) { return struct{}{}, nil }

// startSubDevice starts the test binary as device id of e with token,
// exporting root, and waits for it to be online; it is killed at the end
// of t.
func startSubDevice(t testing.TB, e *devEnv, id, token, root string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), subDeviceEnv+"="+strings.Join([]string{e.addr, id, token, root}, "\t"))
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("device %s:\n%s", id, stderr.String())
		}
	})
	waitCond(t, "device "+id+" online", func() bool { return e.r.remote(id) != nil })
	return cmd
}
