package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// niceOf is the nice value of the task whose /proc directory is dir
// (/proc/<pid> or /proc/self/task/<tid>), or an error if it is gone.
func niceOf(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, err
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 17 {
		return 0, fmt.Errorf("%s/stat: %q", dir, b)
	}
	return strconv.Atoi(f[16]) // field 19 of stat(5)
}

// cpuGroupOf is the cgroup v1 cpu path of the task whose /proc directory
// is dir ("" if there is none).
func cpuGroupOf(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup"))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return f[2]
		}
	}
	return ""
}

// lowThreads lists this process's threads whose nice is not base or whose
// cpu cgroup is not own.
func lowThreads(t *testing.T, base int, own string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var low []string
	for _, e := range ents {
		dir := "/proc/self/task/" + e.Name()
		n, err := niceOf(dir)
		if err != nil {
			continue // ended meanwhile
		}
		if g := cpuGroupOf(dir); n != base || g != own {
			low = append(low, fmt.Sprintf("%s (nice %d, cpu cgroup %s)", e.Name(), n, g))
		}
	}
	return low
}

// waitNoLowThreads waits until no thread of this process is at another
// priority than base and own (a launcher ends once its runtime is closed
// and its last command has ended).
func waitNoLowThreads(t *testing.T, base int, own string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for low := lowThreads(t, base, own); len(low) > 0; low = lowThreads(t, base, own) {
		if time.Now().After(deadline) {
			t.Fatalf("threads of the daemon left at a sandbox's priority: %v", low)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Every process of a sandbox runs Nice steps nicer than the daemon, in
// its host uid's cpu cgroup when the runtime has one, and cannot take
// that back; the daemon's own threads keep their priority: only the
// host uid's launcher (which runs nothing but starts) is at the
// sandbox's, and it ends once its runtime is closed and its commands
// have ended.
func TestBoxPriority(t *testing.T) {
	base, err := niceOf("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	own := cpuGroupOf("/proc/self")
	waitNoLowThreads(t, base, own)
	b, _, _ := newBox(t, false)
	p, err := b.Start(Cmd{Argv: []string{"sh", "-c", "renice -n 0 -p $$ 2>/dev/null; exec sleep 1000"}, Cwd: "/", Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	// The command has tried renice and runs sleep.
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids = p.members()
		if slices.ContainsFunc(pids, func(pid int) bool {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			return string(comm) == "sleep\n"
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox's sleep did not start: members %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want, wantGroup := min(base+Nice, 19), ""
	if b.r.launch.base != "" {
		wantGroup = filepath.Join(own, GroupName, "u"+strconv.Itoa(testUID))
	} else {
		t.Log("the runtime has no cpu cgroup here: nice alone")
	}
	for _, pid := range append(pids, p.cmd.Process.Pid) {
		dir := "/proc/" + strconv.Itoa(pid)
		comm, _ := os.ReadFile(dir + "/comm")
		if n, err := niceOf(dir); err != nil || n != want {
			t.Errorf("%d (%s): nice %d %v, want %d", pid, strings.TrimSpace(string(comm)), n, err, want)
		}
		if g := cpuGroupOf(dir); wantGroup != "" && g != wantGroup {
			t.Errorf("%d (%s): cpu cgroup %s, want %s", pid, strings.TrimSpace(string(comm)), g, wantGroup)
		}
	}
	if low := lowThreads(t, base, own); len(low) != 1 {
		t.Errorf("threads of the daemon at another priority than its own: %v, want one (the launcher)", low)
	}
	p.Kill()
	<-p.Done()
	b.r.Close()
	waitNoLowThreads(t, base, own)
}

// A sandbox does not die when the thread that called Start ends: its
// parent-death signal is its launcher's, which lives as long as it.
func TestBoxOutlivesStartingThread(t *testing.T) {
	b, _, _ := newBox(t, false)
	in, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var out strings.Builder
	type started struct {
		p   *Proc
		tid int
		err error
	}
	c := make(chan started, 1)
	GoOwnThread(func() { // a thread that ends with the function
		p, err := b.Start(Cmd{Argv: []string{"cat"}, Cwd: "/", Env: []string{"PATH=/usr/bin:/bin"}, Stdin: in, Stdout: &out, Stderr: &out})
		c <- started{p, unix.Gettid(), err}
	})
	s := <-c
	in.Close()
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer s.p.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", s.tid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the thread %d that called Start did not end", s.tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stdin.Write([]byte("alive\n"))
	stdin.Close()
	select {
	case <-s.p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("cat did not end at the end of its input")
	}
	if ex := s.p.Exit(); ex.Code != 0 || out.String() != "alive\n" {
		t.Fatalf("the sandbox after the end of the thread that started it: %+v %q", ex, out.String())
	}
}

// Group makes a cpu cgroup beside the users' groups in GroupName, under
// the daemon's own (CodeMode's workers have WorkerGroup), and refuses a
// name that is not one directory's.
func TestGroup(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "a/b", "../x"} {
		if dir, err := Group(bad); err == nil {
			t.Errorf("Group(%q) = %s, want an error", bad, dir)
		}
	}
	own, err := ownCPUGroup()
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and a cgroup v1 cpu controller:", err)
	}
	dir, err := Group(WorkerGroup)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(own, GroupName, WorkerGroup); dir != want {
		t.Fatalf("Group(%q) = %s, want %s", WorkerGroup, dir, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "tasks")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(own, GroupName, "cpu.shares"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(CPUShares) {
		t.Fatalf("the sandboxes' group's cpu.shares: %q %v, want %d", b, err, CPUShares)
	}
}
