package main_test

// /sys/events, the stream file: a read blocks until the next signal; an
// interrupt (FUSE) or Tflush (9P) ends it at once; the daemon keeps serving.

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// sigFrame is one line of /sys/events.
type sigFrame struct {
	Type    string         `json:"type"`
	Signal  string         `json:"signal"`
	Payload map[string]any `json:"payload"`
	Seq     uint64         `json:"seq"`
}

func parseSig(t *testing.T, line string) sigFrame {
	t.Helper()
	var f sigFrame
	if err := json.Unmarshal([]byte(line), &f); err != nil {
		t.Fatalf("event line %q: %v", line, err)
	}
	if f.Type != "sig" || f.Signal == "" || f.Seq == 0 {
		t.Fatalf("event line %q: want type sig, a signal and a seq", line)
	}
	return f
}

// waitOpen waits until process pid has the host file p open.
func waitOpen(t *testing.T, pid int, p string) {
	t.Helper()
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	deadline := time.Now().Add(liveness)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir(fdDir)
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && l == p {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d did not open %s", pid, p)
}

// catStream starts cmd (a cat of a stream file, possibly under setpriv)
// and returns a channel of its output lines.
func catStream(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// nextLine returns the next line from lines, failing after timeout (at
// least liveness).
func nextLine(t *testing.T, lines <-chan string, timeout time.Duration) string {
	t.Helper()
	timeout = max(timeout, liveness)
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("the stream ended; want another line")
		}
		return l
	case <-time.After(timeout):
		t.Fatalf("no line within %v", timeout)
	}
	return ""
}

func TestE2EStreamFUSE(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	events := d.p("/sys/events")
	cat := exec.Command("cat", events)
	cat.Dir = d.work
	lines := catStream(t, cat)
	waitOpen(t, cat.Process.Pid, events)

	// Nothing happened since the open: the read blocks.
	select {
	case l := <-lines:
		t.Fatalf("cat /sys/events printed %q before any event", l)
	case <-time.After(200 * time.Millisecond):
	}

	ctl := d.p("/sys/config/ctl")
	if r := d.sh(`echo "set users/0/ai/model streamed" > "$1"`, ctl); r.code != 0 {
		t.Fatalf("set: %v", r)
	}
	f1 := parseSig(t, nextLine(t, lines, 5*time.Second))
	if f1.Signal != "sys.config.changed" || f1.Payload["key"] != "users/0/ai/model" {
		t.Fatalf("first event %+v, want sys.config.changed of users/0/ai/model", f1)
	}
	if r := d.sh(`echo "set config/server/motd hello" > "$1"`, ctl); r.code != 0 {
		t.Fatalf("set: %v", r)
	}
	f2 := parseSig(t, nextLine(t, lines, 5*time.Second))
	if f2.Signal != "sys.config.changed" || f2.Payload["key"] != "config/server/motd" || f2.Seq <= f1.Seq {
		t.Fatalf("second event %+v after %+v, want sys.config.changed of config/server/motd with a larger seq", f2, f1)
	}

	// SIGINT interrupts the blocked read: cat exits at once.
	start := time.Now()
	cat.Process.Signal(syscall.SIGINT)
	exited := make(chan error, 1)
	go func() { exited <- cat.Wait() }()
	select {
	case err := <-exited:
		t.Logf("cat exited %v after SIGINT in %v", err, time.Since(start).Round(time.Millisecond))
	case <-time.After(liveness): // blocked for good, without the interrupt
		t.Fatalf("cat /sys/events did not exit within %v of SIGINT", liveness)
	}

	// The daemon keeps serving.
	if r := d.sh(`cat "$1"`, d.p("/etc/passwd")); r.code != 0 || !strings.HasPrefix(r.stdout, passwdRoot) {
		t.Fatalf("cat /etc/passwd after the interrupted stream: %v", r)
	}
	// And a new reader gets only new events.
	cat2 := exec.Command("cat", events)
	cat2.Dir = d.work
	lines2 := catStream(t, cat2)
	waitOpen(t, cat2.Process.Pid, events)
	if r := d.sh(`echo "set users/0/ai/model again" > "$1"`, ctl); r.code != 0 {
		t.Fatalf("set: %v", r)
	}
	f3 := parseSig(t, nextLine(t, lines2, 5*time.Second))
	if f3.Signal != "sys.config.changed" || f3.Seq <= f2.Seq {
		t.Fatalf("new reader's first event %+v, want a new sys.config.changed", f3)
	}
	cat2.Process.Signal(syscall.SIGTERM)
	cat2.Wait()
	d.stop()
}

// rawConn is a 9P connection driven message by message, for what the
// 9fans client cannot do (Tflush).
type rawConn struct {
	t *testing.T
	c net.Conn
	r chan *plan9.Fcall
}

func dialRaw(t *testing.T, sock string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawConn{t: t, c: c, r: make(chan *plan9.Fcall, 16)}
	go func() {
		defer close(rc.r)
		for {
			f, err := plan9.ReadFcall(c)
			if err != nil {
				return
			}
			rc.r <- f
		}
	}()
	return rc
}

func (rc *rawConn) send(f *plan9.Fcall) {
	rc.t.Helper()
	if err := plan9.WriteFcall(rc.c, f); err != nil {
		rc.t.Fatalf("send %v: %v", f, err)
	}
}

// recv returns the next reply, failing after timeout (at least liveness).
func (rc *rawConn) recv(timeout time.Duration) *plan9.Fcall {
	rc.t.Helper()
	timeout = max(timeout, liveness)
	select {
	case f, ok := <-rc.r:
		if !ok {
			rc.t.Fatalf("the 9P connection closed")
		}
		return f
	case <-time.After(timeout):
		rc.t.Fatalf("no 9P reply within %v", timeout)
	}
	return nil
}

// rpc sends f and requires the matching reply type.
func (rc *rawConn) rpc(f *plan9.Fcall) *plan9.Fcall {
	rc.t.Helper()
	rc.send(f)
	r := rc.recv(5 * time.Second)
	if r.Type == plan9.Rerror {
		rc.t.Fatalf("%v: Rerror %q", f, r.Ename)
	}
	if r.Type != f.Type+1 || r.Tag != f.Tag {
		rc.t.Fatalf("%v: got %v", f, r)
	}
	return r
}

func TestE2EStream9P(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	setter := d.dial(t)
	set := func(key, val string) {
		t.Helper()
		mustOK(t, call9p(t, setter, "sys.config.set", map[string]any{"key": key, "value": val}), nil)
	}

	t.Run("ReadBlocksUntilEvent", func(t *testing.T) {
		fsys := d.dial(t)
		fid, err := fsys.Open("/sys/events", plan9.OREAD)
		if err != nil {
			t.Fatal(err)
		}
		type res struct {
			s   string
			err error
		}
		got := make(chan res, 1)
		go func() {
			buf := make([]byte, 8192)
			n, err := fid.Read(buf)
			got <- res{string(buf[:n]), err}
		}()
		select {
		case r := <-got:
			t.Fatalf("read of /sys/events returned %q, %v before any event", r.s, r.err)
		case <-time.After(300 * time.Millisecond):
		}
		set("users/0/ai/model", "woken")
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatal(r.err)
			}
			f := parseSig(t, strings.TrimSpace(r.s))
			if f.Signal != "sys.config.changed" || f.Payload["key"] != "users/0/ai/model" {
				t.Fatalf("event %+v, want sys.config.changed of users/0/ai/model", f)
			}
		case <-time.After(liveness):
			t.Fatal("a config set did not wake the blocked read")
		}
	})

	t.Run("FlushEndsRead", func(t *testing.T) {
		rc := dialRaw(t, d.sock)
		r := rc.rpc(&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 8192, Version: "9P2000"})
		if r.Version != "9P2000" {
			t.Fatalf("Rversion %v", r)
		}
		rc.rpc(&plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID, Uname: "root"})
		rc.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"sys", "events"}})
		rc.rpc(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 1, Mode: plan9.OREAD})
		rc.send(&plan9.Fcall{Type: plan9.Tread, Tag: 5, Fid: 1, Count: 4096})
		select {
		case f := <-rc.r:
			t.Fatalf("Tread of /sys/events answered %v before any event", f)
		case <-time.After(200 * time.Millisecond):
		}
		start := time.Now()
		rc.send(&plan9.Fcall{Type: plan9.Tflush, Tag: 6, Oldtag: 5})
		f := rc.recv(2 * time.Second)
		if f.Type == plan9.Rread && f.Tag == 5 { // allowed before the Rflush
			f = rc.recv(2 * time.Second)
		}
		if f.Type != plan9.Rflush || f.Tag != 6 {
			t.Fatalf("after Tflush: got %v, want Rflush tag 6", f)
		}
		t.Logf("Rflush after %v", time.Since(start).Round(time.Millisecond))
		// The fid is still open; the next read gets the next event.
		rc.send(&plan9.Fcall{Type: plan9.Tread, Tag: 7, Fid: 1, Count: 4096})
		set("config/server/motd", "after flush")
		f = rc.recv(5 * time.Second)
		if f.Type != plan9.Rread || f.Tag != 7 {
			t.Fatalf("read after flush: got %v", f)
		}
		ev := parseSig(t, strings.TrimSpace(string(f.Data)))
		if ev.Payload["key"] != "config/server/motd" {
			t.Fatalf("read after flush: %+v", ev)
		}
		// A blocked read ends when its connection goes away; the daemon
		// keeps serving others.
		rc.send(&plan9.Fcall{Type: plan9.Tread, Tag: 8, Fid: 1, Count: 4096})
		time.Sleep(50 * time.Millisecond)
		rc.c.Close()
	})

	// The daemon still serves after flushed and abandoned reads.
	b, err := readAll9p(d.dial(t), "/etc/passwd")
	if err != nil || !strings.HasPrefix(b, passwdRoot) {
		t.Fatalf("/etc/passwd after the stream tests: %q, %v", b, err)
	}
	d.stop()
}
