package main_test

// A FUSE request is interrupted whenever the calling thread gets a signal
// that has a handler; Go programs get them all the time (SIGURG for
// preemption, SIGCHLD, os/signal). The contract: "an interrupt ... ends the
// read at once" with EINTR, which callers (Go's os package, libc with
// SA_RESTART-less handlers, PEP 475 Python) retry. An interrupted request
// must therefore never fail with any other errno, above all not EIO.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const readLoopEnv = "GSV_E2E_READLOOP"

// readLoop is the helper: with a handler for SIGUSR1 (so that the signal
// interrupts blocking syscalls instead of being ignored), on one thread
// whose id it prints, it reads the files named in spec
// ("duration<TAB>path<TAB>path...") round after round until the duration
// has passed, with raw open(2) and read(2), which do not retry EINTR. It
// prints as JSON how many reads succeeded and how many open or read calls
// failed with each errno.
func readLoop(spec string) int {
	f := strings.Split(spec, "\t")
	dur, err := time.ParseDuration(f[0])
	if err != nil || len(f) < 2 {
		fmt.Fprintln(os.Stderr, "readloop: bad spec", spec)
		return 2
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1)
	// The reads happen on this thread, which the test signals directly.
	runtime.LockOSThread()
	fmt.Println("ready", syscall.Gettid())
	errs := map[string]int{}
	var first []string
	ok := 0
	buf := make([]byte, 64<<10)
	for end := time.Now().Add(dur); time.Now().Before(end); {
		for _, p := range f[1:] {
			fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err == nil {
				_, err = syscall.Read(fd, buf)
				syscall.Close(fd)
			}
			if err == nil {
				ok++
				continue
			}
			var en syscall.Errno
			key := "other"
			if errors.As(err, &en) {
				key = en.Error()
			}
			errs[key]++
			if en != syscall.EINTR && len(first) < 3 {
				first = append(first, p+": "+err.Error())
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"ok": ok, "errs": errs, "first": first})
	fmt.Println(string(b))
	return 0
}

// manyKeys is how many config keys the test adds: each lookup under
// /sys/config then lists them, a query long enough for signals to land in.
const manyKeys = 200

func TestE2EInterruptedReads(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	var lines strings.Builder
	for i := range manyKeys {
		fmt.Fprintf(&lines, "set users/0/ai/k%04d v%d\n", i, i)
	}
	lines.WriteString("set users/0/ai/model m1\n")
	ctlFile := d.work + "/lines"
	if err := os.WriteFile(ctlFile, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := d.sh(`cat "$3" > "$1" && echo data > "$2"`, d.p("/sys/config/ctl"), d.p("/home/root/data"), ctlFile); r.code != 0 {
		t.Fatal(r)
	}
	files := []string{d.p("/sys/config/users/0/ai/model"), d.p("/etc/passwd"), d.p("/home/root/data")}
	cmd := exec.Command(os.Args[0])
	cmd.Dir = d.work
	cmd.Env = append(os.Environ(), readLoopEnv+"=1s\t"+strings.Join(files, "\t"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var tid int
	if !sc.Scan() {
		t.Fatal("helper printed nothing")
	}
	if _, err := fmt.Sscanf(sc.Text(), "ready %d", &tid); err != nil {
		t.Fatalf("helper: %q", sc.Text())
	}
	stop := make(chan struct{})
	var sent atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			syscall.Tgkill(cmd.Process.Pid, tid, syscall.SIGUSR1)
			sent.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	if !sc.Scan() {
		close(stop)
		cmd.Wait()
		t.Fatal("helper printed no result")
	}
	close(stop)
	res := sc.Text()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	var r struct {
		OK    int
		Errs  map[string]int
		First []string
	}
	if err := json.Unmarshal([]byte(res), &r); err != nil {
		t.Fatalf("helper result %q: %v", res, err)
	}
	eintr := r.Errs[syscall.EINTR.Error()]
	t.Logf("under ~%d SIGUSR1: %d reads, failed calls by errno: %v", sent.Load(), r.OK, r.Errs)
	delete(r.Errs, syscall.EINTR.Error())
	if len(r.Errs) > 0 {
		t.Errorf("calls interrupted by a handled signal failed with errnos other than EINTR: %v; e.g. %q", r.Errs, r.First)
	}
	if eintr == 0 && len(r.Errs) == 0 {
		t.Errorf("no call was interrupted: the test did not test anything")
	}
	if r.OK == 0 {
		t.Errorf("no read succeeded between the signals")
	}
	d.stop()
}
