package codemode

import (
	"fmt"
	"os"
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
	p, err := startWorker(self(t))
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
