package main_test

// The file kinds as everyday tools meet them through the real mount: ctl
// and call framing (one line is one command, however many writes carry
// it), calls that do not hold up other callers, tail -f of streams and
// histories, tree walkers over streams, and df.

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spawnProc makes a process through /proc/clone and returns its pid.
func spawnProc(t *testing.T, d *daemon) string {
	t.Helper()
	r := d.sh(`exec 3<>"$1/proc/clone"; echo 'spawn task label=vfs' >&3; read pid <&3; echo "$pid"`, d.mnt)
	pid := strings.TrimSpace(r.stdout)
	if r.code != 0 || pid == "" || strings.ContainsAny(pid, " /") {
		t.Fatalf("clone: %v", r)
	}
	return pid
}

// userMessages returns the text of the user messages in a history.
func userMessages(t *testing.T, hist string) []string {
	t.Helper()
	var out []string
	for _, m := range epHistory(t, hist) {
		if m.Role == "user" {
			out = append(out, m.text())
		}
	}
	return out
}

func TestE2EFraming(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	pid := spawnProc(t, d)
	conv := d.p("/proc/" + pid + "/conversations/default")

	// bash's echo writes a long line in pieces: it is still one command.
	text := strings.Repeat("a", 16<<10) + "kill noarchive"
	r := runCmd(d.work, nil, nil, "bash", "-c", `echo "send $2" > "$1/ctl"`, "bash", conv, text)
	if r.code != 0 {
		t.Fatalf("echo send <16 KiB> > ctl: %v", r)
	}
	if st := d.sh(`cat "$1/status"`, d.p("/proc/"+pid)); st.code != 0 {
		t.Fatalf("the process is gone after a long send: %v", st)
	}
	hist := d.sh(`cat "$1/history"`, conv)
	if got := userMessages(t, hist.stdout); len(got) != 1 || got[0] != text {
		t.Fatalf("after one long send line, user messages are %d: %.80q", len(got), got)
	}

	// A line over 1 MiB fails whole: nothing of it runs.
	big := filepath.Join(d.work, "big")
	if err := os.WriteFile(big, []byte("send "+strings.Repeat("b", 1<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = d.sh(`cat "$2" > "$1/ctl"`, conv, big)
	if r.code == 0 || errnoOf(r.stderr) != syscall.EINVAL {
		t.Fatalf("a line over 1 MiB: %v, want EINVAL", r)
	}
	hist = d.sh(`cat "$1/history"`, conv)
	if got := userMessages(t, hist.stdout); len(got) != 1 {
		t.Fatalf("a refused line ran: %d user messages", len(got))
	}
}

// TestE2ECallFrames: a read of a call file returns one response frame, so
// `read` in a shell gets one answer per request.
func TestE2ECallFrames(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	// Two pipelined requests, then two reads: one answer each. (bash's
	// read takes 128 bytes at a time from a seekable file and seeks back
	// to the end of the line; dash's reads a byte at a time.)
	r := runCmd(d.work, nil, nil, "bash", "-c", `exec 3<>"$1"
printf '%s\n%s\n' '{"id":"one","call":"sys.whoami"}' '{"id":"two","call":"sys.whoami"}' >&3
read -r a <&3; read -r b <&3; printf '%s\n%s\n' "$a" "$b"`, "bash", d.p("/sys/call"))
	ls := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(ls) != 2 || parseFrame(t, ls[0]).ID != "one" || parseFrame(t, ls[1]).ID != "two" {
		t.Fatalf("two requests, two reads: %v", r)
	}
}

// TestE2ECallNotDelayed: a slow call by one user does not hold up another
// user's call through the same file.
func TestE2ECallNotDelayed(t *testing.T) {
	requireRoot(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	addUser(t, d.dial(t), "alice", aliceHost)
	call := d.p("/sys/call")

	// Root's call lasts until the test opens the gate: a block whose
	// shell calls wait for it (up to its 10 min wall time). Alice's call,
	// were it held up, would never end.
	started, gate := filepath.Join(d.work, "slow-started"), filepath.Join(d.work, "slow-gate")
	block := `await shell("touch ` + started + `");
while ((await shell("test -e ` + gate + ` && echo open || sleep 0.05")).output !== "open\n") {}
return "slept"`
	req, _ := json.Marshal(map[string]any{"id": "slow", "call": "codemode.run", "args": map[string]any{"code": block, "timeoutMs": 600000}})
	slow := exec.Command("sh", "-c", `exec 3<>"$1"; printf '%s\n' "$2" >&3; cat <&3`, "sh", call, string(req))
	slow.Dir = d.work
	out, err := slow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	defer slow.Wait()
	defer os.WriteFile(gate, nil, 0o644) // (on a failure too)
	waitFor(t, liveness, "the slow call under way", func() bool { _, err := os.Stat(started); return err == nil })

	t0 := time.Now()
	r := d.shAs(aliceHost, `exec 3<>"$1" && printf '%s\n' '{"call":"sys.whoami"}' >&3 && cat <&3`, call)
	took := time.Since(t0)
	if f := parseFrame(t, r.stdout); !f.OK {
		t.Fatalf("alice's whoami while root's call ran: %v", r)
	}
	t.Logf("sys.whoami took %v during a slow call", took.Round(time.Millisecond))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("no answer to the slow call")
	}
	if f := parseFrame(t, sc.Text()); !f.OK || f.ID != "slow" || !strings.Contains(string(f.Data), "slept") {
		t.Fatalf("slow call answered %s", sc.Text())
	}
}

// tailF starts tail -f on p and returns its output lines.
func tailF(t *testing.T, d *daemon, p string) <-chan string {
	t.Helper()
	tail := exec.Command("tail", "-f", p)
	tail.Dir = d.work
	lines := catStream(t, tail)
	waitOpen(t, tail.Process.Pid, p)
	time.Sleep(300 * time.Millisecond) // past tail's first read
	return lines
}

// waitLine waits until a line of lines contains want, for timeout (at
// least liveness).
func waitLine(t *testing.T, lines <-chan string, want string, timeout time.Duration) {
	t.Helper()
	timeout = max(timeout, liveness)
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("tail ended before a line with %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no line with %q within %v", want, timeout)
		}
	}
}

func TestE2ETailFollow(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	pid := spawnProc(t, d)
	P := d.p("/proc/" + pid)

	t.Run("events", func(t *testing.T) {
		lines := tailF(t, d, P+"/events")
		if r := d.sh(`echo 'open tailed title=Tailed' > "$1/conversations/ctl"`, P); r.code != 0 {
			t.Fatalf("open: %v", r)
		}
		waitLine(t, lines, `"pid":"`+pid+`"`, 5*time.Second)
	})
	t.Run("history", func(t *testing.T) {
		hist := P + "/conversations/default/history"
		if r := d.sh(`echo 'first message' > "$1/conversations/default/in"`, P); r.code != 0 {
			t.Fatalf("in: %v", r)
		}
		lines := tailF(t, d, hist)
		waitLine(t, lines, "first message", 5*time.Second)
		if r := d.sh(`echo 'second message' > "$1/conversations/default/in"`, P); r.code != 0 {
			t.Fatalf("in: %v", r)
		}
		waitLine(t, lines, "second message", 5*time.Second)
	})
}

// TestE2ETreeWalkers: tools that walk a tree finish over /proc and /sys,
// stream files and all, while the streams are live.
func TestE2ETreeWalkers(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	pid := spawnProc(t, d)
	// Keep the streams busy while the tools run.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			d.sh(`echo "set config/server/motd m$2" > "$1"`, d.p("/sys/config/ctl"), strconv.Itoa(i))
		}
	}()
	defer func() { close(stop); <-done }()

	out := filepath.Join(d.base, "out")
	tools := []struct{ name, script string }{
		{"grep -r", `grep -r zzz-no-such-text "$1/proc" "$1/sys"`},
		{"find", `find "$1/proc" "$1/sys" -type f`},
		{"du", `du -a "$1/proc" "$1/sys"`},
		{"cp -r", `rm -rf "$2"; mkdir -p "$2"; cp -r "$1/proc/$3" "$1/sys" "$2/"`},
		{"tar", `tar cf - -C "$1" proc sys | tar tf - | grep -c events`},
		{"rsync", `rm -rf "$2"; mkdir -p "$2"; rsync -r "$1/proc/$3" "$1/sys" "$2/"`},
	}
	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			if tool.name == "rsync" {
				if _, err := exec.LookPath("rsync"); err != nil {
					t.Skip("no rsync")
				}
			}
			start := time.Now()
			r := d.sh(tool.script, d.mnt, out, pid)
			if r.err != nil && r.code == -1 {
				t.Fatalf("%s did not finish: %v", tool.name, r)
			}
			t.Logf("%s: exit %d in %v", tool.name, r.code, time.Since(start).Round(time.Millisecond))
			// Refusals (write-only files) are expected; a stream that
			// would block is not.
			if strings.Contains(r.stderr, "temporarily unavailable") || strings.Contains(r.stderr, "Interrupted") {
				t.Fatalf("%s: %s", tool.name, r.stderr)
			}
			for _, l := range strings.SplitN(r.stderr, "\n", 4)[:min(3, strings.Count(r.stderr, "\n"))] {
				t.Logf("  %s", l)
			}
		})
	}
	// rsync copied the streams as empty files.
	if fi, err := os.Stat(filepath.Join(out, pid, "events")); err != nil || fi.Size() != 0 {
		t.Fatalf("rsync'd events: %v %v", fi, err)
	}
}

// TestE2EStreamNonblock: a read of a stream opened O_NONBLOCK with nothing
// pending fails with EAGAIN at once.
func TestE2EStreamNonblock(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	f, err := os.OpenFile(d.p("/sys/events"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		_, err := syscall.Read(int(f.Fd()), buf)
		res <- err
	}()
	select {
	case err := <-res:
		if err != syscall.EAGAIN {
			t.Fatalf("non-blocking read of an idle stream: %v, want EAGAIN", err)
		}
	case <-time.After(liveness): // (a blocking read of an idle stream waits for good)
		t.Fatalf("a non-blocking read of a stream blocked")
	}
}

func TestE2EDf(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	df := func(p string) (size, avail int64) {
		t.Helper()
		r := d.sh(`df -B1 --output=size,avail "$1" | tail -1`, p)
		f := strings.Fields(r.stdout)
		if r.code != 0 || len(f) != 2 {
			t.Fatalf("df %s: %v", p, r)
		}
		size, _ = strconv.ParseInt(f[0], 10, 64)
		avail, _ = strconv.ParseInt(f[1], 10, 64)
		return size, avail
	}
	ms, ma := df(d.mnt)
	ss, sa := df(d.state)
	near := func(a, b int64) bool { return a > 0 && b > 0 && (a-b < 64<<20 && b-a < 64<<20) }
	if ms != ss || !near(ma, sa) {
		t.Fatalf("df of the mount: size %d avail %d; of the state dir: size %d avail %d", ms, ma, ss, sa)
	}
}
