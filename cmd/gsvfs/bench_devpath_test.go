// Benchmarks of the device path: a routed call against a kernel call
// over the same 9P connection, measured in the same run (issue 22, "The
// device path").
//
// Run (needs root: the daemon's state and the device run as root):
//
//	go test -run '^$' -bench DevicePath -timeout 20m ./cmd/gsvfs/
//
// BenchmarkDevicePath starts a kernel (`gsvfs serve --listen
// tcp!127.0.0.1!PORT`) and a device (`gsvfs device` exporting a directory
// with one small file), both real processes, and dials the kernel's unix
// socket as root: one 9P connection, on which each side holds its own
// open fid of /sys/call. Its sub-benchmark read-small times, alternately,
// b.N of each:
//
//   - ours: fs.read {"target":"pathbench","path":"small.txt"}, a request
//     frame written to the held fid and its answer read (the kernel routes
//     it to the device over the device's call channel: one round trip);
//   - the baseline: sys.whoami the same way on the other held fid (the
//     kernel answers it itself).
//
// It reports both in µs and their ratio; the target is ours/baseline <=
// 1.3. Interleaved with them it times the ratio's floor on the machine
// (bench_devfloor_test.go: the same three processes and the same two
// round trips of the client, one-byte messages on raw sockets, the
// routed call against the kernel's own), reported as floor-ratio. read-refused is the same pair with an fs.read the device refuses
// at once (a path with "..": no file is touched, the answer is an error
// frame): the routed call's floor, its round trip to the device with no
// work there, reported for information. read-small-open is the same
// pair with a fresh fid per call (walk, open, write, read to end of file,
// clunk: how the CLI and the other benchmarks call), reported for
// information.
package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// targetDevPathRatio is the target: a routed fs.read of a small
// file over a sys.whoami, at most.
const targetDevPathRatio = 1.3

// devPathID is the device of BenchmarkDevicePath.
const devPathID = "pathbench"

// heldCall is an open fid of /sys/call that makes one call at a time.
type heldCall struct {
	fid *client.Fid
	buf []byte
}

// openHeld opens /sys/call on fsys, closed at the end of b.
func openHeld(b *testing.B, fsys *client.Fsys) *heldCall {
	b.Helper()
	fid, err := fsys.Open("/sys/call", plan9.ORDWR)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fid.Close() })
	return &heldCall{fid: fid, buf: make([]byte, 64<<10)}
}

// do writes the request frame req and reads its answer, which must be a
// successful frame whose data holds want.
func (h *heldCall) do(req []byte, want string) error {
	return h.doAnswer(req, `"ok":true`, want)
}

// doAnswer writes the request frame req and reads its answer, which must
// hold ok and want.
func (h *heldCall) doAnswer(req []byte, ok, want string) error {
	if _, err := h.fid.Write(req); err != nil {
		return err
	}
	var resp []byte
	for !bytes.HasSuffix(resp, []byte("\n")) {
		n, err := h.fid.Read(h.buf)
		if err != nil {
			return fmt.Errorf("reading the answer to %s: %v (%q)", req, err, resp)
		}
		resp = append(resp, h.buf[:n]...)
	}
	if !bytes.Contains(resp, []byte(ok)) || !bytes.Contains(resp, []byte(want)) {
		return fmt.Errorf("%s answered %s", bytes.TrimSpace(req), resp)
	}
	return nil
}

func BenchmarkDevicePath(b *testing.B) {
	requireRoot(b)
	port := freePort(b)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	sockDir, err := os.MkdirTemp("", "gsv-devpath-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(sockDir) })
	unixListen := "unix!" + filepath.Join(sockDir, "dev.sock")
	k := startDaemon(b, newBase(b), daemonOpts{listen: listen, logLevel: "warn", args: []string{"--listen", unixListen}})
	fsys := k.dial(b)
	data := b.TempDir()
	if err := os.WriteFile(filepath.Join(data, "small.txt"), []byte("a small file\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	// Two devices of the same directory: one dials the TCP address (as a
	// device on another machine does), one the unix socket (the
	// transport of the benchmark's own connection to the kernel).
	for _, dev := range []struct{ id, kernel string }{{devPathID, listen}, {devPathID + "-unix", unixListen}} {
		var tok struct {
			Token struct{ Token string }
		}
		mustOK(b, call9p(b, fsys, "sys.token.create", map[string]any{"kind": "node", "uid": 0, "allowedDeviceId": dev.id}), &tok)
		startBenchDevicePath(b, "--kernel", dev.kernel, "--id", dev.id, "--token", tok.Token.Token, "--root", data, "--log-level", "warn")
		args := map[string]any{"target": dev.id, "path": "small.txt"}
		deadline := time.Now().Add(liveness)
		for {
			s, err := callRaw9p(fsys, "fs.read", args)
			if err == nil && strings.Contains(s, "a small file") {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("device %s does not answer fs.read: %q %v\nkernel:\n%s", dev.id, s, err, k.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	frame := func(call string, args any) []byte {
		req, _ := json.Marshal(map[string]any{"call": call, "args": args})
		return append(req, '\n')
	}
	whoReq := frame("sys.whoami", map[string]any{})
	summary := map[string]string{}

	// The floor (bench_devfloor_test.go), measured interleaved with the
	// real calls of read-small.
	floor := startRelayFloor(b)
	held := func(name, id, how string, withFloor bool) {
		readReq := frame("fs.read", map[string]any{"target": id, "path": "small.txt"})
		b.Run(name, func(b *testing.B) {
			rh, wh := openHeld(b, fsys), openHeld(b, fsys)
			var ot, st, frt, fwt []time.Duration
			o := &devSide{name: "fs.read on the device", op: timed(&ot, func() error { return rh.do(readReq, "a small file") })}
			s := &devSide{name: "sys.whoami", op: timed(&st, func() error { return wh.do(whoReq, `"uid":0`) })}
			sides := []*devSide{o, s}
			fr := &devSide{name: "the floor's routed call", op: timed(&frt, func() error { return floor.call('R') })}
			fw := &devSide{name: "the floor's kernel call", op: timed(&fwt, func() error { return floor.call('W') })}
			if withFloor {
				sides = append(sides, fr, fw)
			}
			devInterleave(b, nil, sides...)
			ratio := o.ms() / s.ms()
			om, sm := median(ot), median(st)
			b.ReportMetric(o.ms()*1000, "ours-us")
			b.ReportMetric(s.ms()*1000, "whoami-us")
			b.ReportMetric(ratio, "ours/whoami")
			b.ReportMetric(float64(om)/float64(sm), "median-ratio")
			line := fmt.Sprintf("fs.read of a small file on the device (%s) %.0f µs, sys.whoami %.0f µs (held /sys/call fids, one 9P connection): ours/whoami %.2f (target <= %.1f) %s; medians %.0f and %.0f µs: %.2f  [n=%d]",
				how, o.ms()*1000, s.ms()*1000, ratio, targetDevPathRatio, devVerdict(ratio <= targetDevPathRatio),
				float64(om.Nanoseconds())/1000, float64(sm.Nanoseconds())/1000, float64(om)/float64(sm), b.N)
			if withFloor {
				fratio := fr.ms() / fw.ms()
				frm, fwm := median(frt), median(fwt)
				b.ReportMetric(fratio, "floor-ratio")
				b.ReportMetric(float64(frm)/float64(fwm), "floor-median-ratio")
				line += fmt.Sprintf("\n%-16s interleaved: the floor of that ratio here, the same three processes and two round trips of the client with one-byte messages on raw sockets: routed %.0f µs, kernel-only %.0f µs: %.2f; medians %.0f and %.0f µs: %.2f; the device's round trip adds (medians) %.0f µs to ours, %.0f µs to the floor's",
					"", fr.ms()*1000, fw.ms()*1000, fratio, float64(frm.Nanoseconds())/1000, float64(fwm.Nanoseconds())/1000, float64(frm)/float64(fwm),
					float64((om-sm).Nanoseconds())/1000, float64((frm-fwm).Nanoseconds())/1000)
			}
			summary[name] = line
		})
	}
	held("read-small", devPathID, "over TCP", true)
	held("read-small-unix", devPathID+"-unix", "over a unix socket", false)

	refusedReq := frame("fs.read", map[string]any{"target": devPathID, "path": "../small.txt"})
	b.Run("read-refused", func(b *testing.B) {
		rh, wh := openHeld(b, fsys), openHeld(b, fsys)
		var ot, st []time.Duration
		o := &devSide{name: "a refused fs.read on the device", op: timed(&ot, func() error {
			return rh.doAnswer(refusedReq, `"ok":false`, "may not contain")
		})}
		s := &devSide{name: "sys.whoami", op: timed(&st, func() error { return wh.do(whoReq, `"uid":0`) })}
		devInterleave(b, nil, o, s)
		ratio := o.ms() / s.ms()
		om, sm := median(ot), median(st)
		b.ReportMetric(o.ms()*1000, "ours-us")
		b.ReportMetric(s.ms()*1000, "whoami-us")
		b.ReportMetric(ratio, "ours/whoami")
		b.ReportMetric(float64(om)/float64(sm), "median-ratio")
		summary["read-refused"] = fmt.Sprintf("over TCP, an fs.read the device refuses at once (the floor: a round trip to the device, no work there): %.0f µs vs %.0f µs: %.2f; medians %.0f and %.0f µs: %.2f (for information)  [n=%d]",
			o.ms()*1000, s.ms()*1000, ratio, float64(om.Nanoseconds())/1000, float64(sm.Nanoseconds())/1000, float64(om)/float64(sm), b.N)
	})

	readArgs := map[string]any{"target": devPathID, "path": "small.txt"}
	b.Run("read-small-open", func(b *testing.B) {
		o := &devSide{name: "fs.read on the device", op: func() error {
			s, err := callRaw9p(fsys, "fs.read", readArgs)
			if err == nil && !strings.Contains(s, "a small file") {
				err = fmt.Errorf("fs.read answered %s", s)
			}
			return err
		}}
		s := &devSide{name: "sys.whoami", op: func() error {
			s, err := callRaw9p(fsys, "sys.whoami", nil)
			if err == nil && !strings.Contains(s, `"ok":true`) {
				err = fmt.Errorf("sys.whoami answered %s", s)
			}
			return err
		}}
		devInterleave(b, nil, o, s)
		ratio := o.ms() / s.ms()
		b.ReportMetric(o.ms()*1000, "ours-us")
		b.ReportMetric(s.ms()*1000, "whoami-us")
		b.ReportMetric(ratio, "ours/whoami")
		summary["read-small-open"] = fmt.Sprintf("over TCP with a fresh /sys/call fid per call: %.0f µs vs %.0f µs: %.2f (for information)  [n=%d]",
			o.ms()*1000, s.ms()*1000, ratio, b.N)
	})

	fmt.Println("\n=== gsvfs device path: a routed call vs a kernel call over the same 9P connection (same run) ===")
	for _, n := range []string{"read-small", "read-small-unix", "read-refused", "read-small-open"} {
		if l, ok := summary[n]; ok {
			fmt.Printf("%-16s %s\n", n, l)
		}
	}
	fmt.Println()
}

// timed is op, each of whose runs' durations is appended to *d.
func timed(d *[]time.Duration, op func() error) func() error {
	return func() error {
		t0 := time.Now()
		err := op()
		*d = append(*d, time.Since(t0))
		return err
	}
}

// median is the median of d (0 for none).
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// startBenchDevicePath starts gsvfs device with args as root, killed at
// the end of b.
func startBenchDevicePath(b *testing.B, args ...string) {
	b.Helper()
	stderr := &syncBuffer{}
	cmd := exec.Command(gsvfsBin, append([]string{"device"}, args...)...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if b.Failed() {
			b.Logf("device log:\n%s", stderr.String())
		}
	})
}
