package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// niceOf is the nice value of the task whose /proc directory is dir.
func niceOf(t *testing.T, dir string) (int, bool) {
	t.Helper()
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 17 {
		t.Fatalf("%s/stat: %q", dir, b)
	}
	n, err := strconv.Atoi(f[16]) // field 19 of stat(5)
	if err != nil {
		t.Fatalf("%s/stat: %q", dir, b)
	}
	return n, true
}

// nicerThreads lists the threads of the process whose /proc directory is
// dir that are not at nice base.
func nicerThreads(t *testing.T, dir string, base int) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir + "/task")
	var out []string
	for _, e := range ents {
		if n, ok := niceOf(t, dir+"/task/"+e.Name()); ok && n != base {
			out = append(out, fmt.Sprintf("%s (nice %d)", e.Name(), n))
		}
	}
	return out
}

// A worker runs workerNice steps nicer than the daemon, every thread of
// it; the daemon's threads keep their priority but the one that waits
// for the worker, which ends with it.
func TestWorkerPriority(t *testing.T) {
	base, ok := niceOf(t, "/proc/self")
	if !ok {
		t.Fatal("no /proc/self/stat")
	}
	waitNicerThreads := func(what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for n := nicerThreads(t, "/proc/self", base); len(n) > 0; n = nicerThreads(t, "/proc/self", base) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: threads of the daemon at a worker's priority: %v", what, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitNicerThreads("before")
	p, err := startWorker(self(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.kill()
	if err := p.awaitReady(); err != nil {
		t.Fatal(err)
	}
	dir := "/proc/" + strconv.Itoa(p.cmd.Process.Pid)
	want := min(base+workerNice, 19)
	ents, err := os.ReadDir(dir + "/task")
	if err != nil || len(ents) == 0 {
		t.Fatalf("the worker's threads: %v", err)
	}
	if n := nicerThreads(t, dir, want); len(n) > 0 {
		t.Errorf("threads of the worker not at nice %d: %v", want, n)
	}
	if n := nicerThreads(t, "/proc/self", base); len(n) != 1 {
		t.Errorf("threads of the daemon at another priority than its own: %v, want one (the worker's)", n)
	}
	p.kill()
	waitNicerThreads("after the worker's end")
}

// cpuGroupDir is the directory of this process's cpu cgroup (v1), found
// at /sys/fs/cgroup/cpu, or "" where there is none.
func cpuGroupDir() string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || !slices.Contains(strings.Split(f[1], ","), "cpu") {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup/cpu", f[2])
		if _, err := os.Stat(filepath.Join(dir, "tasks")); err == nil {
			return dir
		}
	}
	return ""
}

// groupTasks lists the tasks of the cpu cgroup dir by their process:
// this process's threads (ours) and the other processes' pids.
func groupTasks(t *testing.T, dir string) (ours int, others map[int]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	others = map[int]bool{}
	for _, f := range strings.Fields(string(b)) {
		tid, _ := strconv.Atoi(f)
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
		if err != nil {
			continue // ended meanwhile
		}
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "Tgid:"); ok {
				switch pid, _ := strconv.Atoi(strings.TrimSpace(v)); pid {
				case os.Getpid():
					ours++
				default:
					others[pid] = true
				}
			}
		}
	}
	return ours, others
}

// A Runner's workers are born in its cpu cgroup (RunnerOptions.CPUGroup)
// at workerNice, all of them started by one launcher thread, the only
// thread of the daemon in the group, which leaves it (ends) once the
// Runner is closed and its workers have ended. A group the launcher
// cannot join leaves the workers at their nice alone: blocks still run.
func TestRunnerCPUGroup(t *testing.T) {
	own := cpuGroupDir()
	if os.Geteuid() != 0 || own == "" {
		t.Skip("needs root and a cgroup v1 cpu controller")
	}
	base, ok := niceOf(t, "/proc/self")
	if !ok {
		t.Fatal("no /proc/self/stat")
	}
	dir := filepath.Join(own, fmt.Sprintf("codemode-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skip("cannot make a cpu cgroup:", err)
	}
	defer os.Remove(dir) // empty once the launcher has ended
	for _, c := range []struct {
		name, group string
		joined      bool
	}{
		{"group", dir, true},
		{"no such group", filepath.Join(dir, "absent"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := NewRunnerWith(self(t), RunnerOptions{CPUGroup: c.group})
			var ours int
			var others map[int]bool
			res, err := r.Run(context.Background(), Request{Code: `return (await shell("x")).status`}, func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				// The worker is alive while it waits for this answer.
				ours, others = groupTasks(t, dir)
				return json.RawMessage(`{"status":"completed"}`), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			completed(t, res, `"completed"`)
			if !c.joined {
				if ours != 0 || len(others) != 0 {
					t.Errorf("tasks in the group: %d of ours, workers %v; want none", ours, others)
				}
				r.Close()
				return
			}
			if ours != 1 || len(others) == 0 {
				t.Fatalf("tasks in the group during a run: %d of ours (want 1: the launcher), workers %v", ours, others)
			}
			want := min(base+workerNice, 19)
			for pid := range others {
				if n := nicerThreads(t, "/proc/"+strconv.Itoa(pid), want); len(n) > 0 {
					t.Errorf("threads of worker %d not at nice %d: %v", pid, want, n)
				}
			}
			r.Close()
			deadline := time.Now().Add(liveness)
			for {
				ours, others := groupTasks(t, dir)
				if ours == 0 && len(others) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after Close: %d threads of ours and workers %v still in the group", ours, others)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
