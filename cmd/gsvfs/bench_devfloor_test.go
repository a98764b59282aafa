package main_test

// The floor of BenchmarkDevicePath's ratio on the machine it runs on: the
// same three processes (a client, a kernel, a device) and the same shape
// of call, with nothing but one-byte messages on sockets, measured in the
// same run, interleaved with the real calls.
//
//   - The client (the benchmark) holds a unix socket to the kernel, as
//     the benchmark's 9P connection is; the device dials the kernel over
//     TCP on loopback, as the device pathbench does.
//   - A call is two round trips of the client, as a request frame on a
//     held /sys/call fid is (its Twrite and Rwrite, its Tread and Rread):
//     the client writes the request byte ('W' or 'R') and reads the
//     kernel's acknowledgement, then writes 'T' and reads the answer.
//   - 'W' (whoami's shape): the kernel answers itself.
//   - 'R' (a routed call's): the kernel sends the request to the device
//     first, then acknowledges; a goroutine of the kernel reads the
//     device's answers and hands each to the 'T' waiting for it (as the
//     connection's reader of a device hands an answer to its caller).
//     The device answers each byte at once.
//
// Whatever the real routed call costs past this floor's routed/whoami is
// the code's; the floor itself is the processes' wake-ups on the
// machine's processors (one more process in the way of the answer).

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// relayFloorEnv names the role of a helper run of the test binary in the
// floor: "kernel\t<client socket>" or "device\t<kernel address>".
const relayFloorEnv = "GSV_TEST_RELAY_FLOOR"

// relayFloor is a helper run of the test binary: the kernel or the device
// of the floor (see above). It returns when its connections end.
func relayFloor(spec string) int {
	role, addr, _ := strings.Cut(spec, "\t")
	switch role {
	case "device":
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "relay floor device:", err)
			return 1
		}
		b := make([]byte, 1)
		for {
			if _, err := io.ReadFull(c, b); err != nil {
				return 0
			}
			if _, err := c.Write(b); err != nil {
				return 0
			}
		}
	case "kernel":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "relay floor kernel:", err)
			return 1
		}
		fmt.Println(l.Addr().String()) // the device's address, to the benchmark
		c, err := net.Dial("unix", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "relay floor kernel:", err)
			return 1
		}
		d, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "relay floor kernel:", err)
			return 1
		}
		l.Close()
		answers := make(chan byte, 1)
		go func() {
			defer close(answers)
			b := make([]byte, 1)
			for {
				if _, err := io.ReadFull(d, b); err != nil {
					return
				}
				answers <- b[0]
			}
		}()
		b := make([]byte, 1)
		routed := false
		for {
			if _, err := io.ReadFull(c, b); err != nil {
				return 0
			}
			var out byte
			switch b[0] {
			case 'W':
				routed, out = false, 'a'
			case 'R':
				if _, err := d.Write(b); err != nil {
					return 1
				}
				routed, out = true, 'a'
			case 'T':
				out = 'w'
				if routed {
					var ok bool
					if out, ok = <-answers; !ok {
						return 1
					}
				}
			}
			if _, err := c.Write([]byte{out}); err != nil {
				return 0
			}
		}
	}
	fmt.Fprintf(os.Stderr, "relay floor: bad spec %q\n", spec)
	return 2
}

// relayFloorClient is the benchmark's side of the floor.
type relayFloorClient struct {
	c net.Conn
	b []byte
}

// startRelayFloor starts the floor's kernel and device, both killed at the
// end of b, and returns the client's connection to the kernel.
func startRelayFloor(b *testing.B) *relayFloorClient {
	b.Helper()
	dir, err := os.MkdirTemp("", "gsv-relayfloor-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "k.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	start := func(spec string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), relayFloorEnv+"="+spec)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	kernel := start("kernel\t" + sock)
	out, err := kernel.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := kernel.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kernel.Process.Kill(); kernel.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the floor's kernel: %v", err)
	}
	device := start("device\t" + strings.TrimSpace(addr))
	if err := device.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { device.Process.Kill(); device.Wait() })
	l.(*net.UnixListener).SetDeadline(time.Now().Add(liveness))
	c, err := l.Accept()
	if err != nil {
		b.Fatalf("the floor's kernel does not dial: %v", err)
	}
	b.Cleanup(func() { c.Close() })
	f := &relayFloorClient{c: c, b: make([]byte, 1)}
	// The first routed call waits for the device to be connected.
	c.SetDeadline(time.Now().Add(liveness))
	if err := f.call('R'); err != nil {
		b.Fatalf("the floor's first routed call: %v", err)
	}
	c.SetDeadline(time.Time{})
	return f
}

// call makes one call of kind ('W' or 'R'): two round trips.
func (f *relayFloorClient) call(kind byte) error {
	for _, m := range []byte{kind, 'T'} {
		f.b[0] = m
		if _, err := f.c.Write(f.b); err != nil {
			return err
		}
		if _, err := io.ReadFull(f.c, f.b); err != nil {
			return err
		}
	}
	if want := map[byte]byte{'W': 'w', 'R': 'R'}[kind]; f.b[0] != want {
		return fmt.Errorf("the floor answered %q to %q", f.b[0], kind)
	}
	return nil
}
