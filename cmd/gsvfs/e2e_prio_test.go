package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// descendants lists the live processes below pid (its children, theirs,
// and so on), with their command names.
func descendants(pid int) map[int]string {
	parent := map[int]int{}
	comm := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(st)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		f := strings.Fields(s[end+1:])
		if open < 0 || len(f) < 2 || f[0] == "Z" {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
		comm[p] = s[open+1 : end]
	}
	out := map[int]string{}
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out[p] = comm[p]
				break
			}
		}
	}
	return out
}

// niceOfPid is pid's nice value (-100 if it is gone).
func niceOfPid(pid int) int {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -100
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if len(f) < 17 {
		return -100
	}
	n, _ := strconv.Atoi(f[16]) // field 19 of stat(5)
	return n
}

// Alice's sandboxes (a session's exec and a background shell.exec) run
// ten steps nicer than the daemon, and die with a daemon killed outright:
// none runs on, reparented.
func TestE2ESandboxesDieWithDaemon(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	d := startDaemon(t, newBase(t), daemonOpts{})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	env := []string{"GSV_ADDR=unix!" + d.sock}
	r := gsvAs(aliceHost, env, "session", "open", "--network", "none")
	if r.code != 0 {
		t.Fatalf("gsv session open: %v", r)
	}
	sid := strings.TrimSpace(r.stdout)
	u := strconv.Itoa(aliceHost)
	execCmd := exec.Command("setpriv", "--reuid", u, "--regid", u, "--clear-groups", gsvBin, "exec", sid, "--", "sleep", "1000")
	execCmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/", raceEnv}, env...)
	if err := execCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		execCmd.Process.Kill()
		execCmd.Wait()
	}()
	args, _ := json.Marshal(map[string]any{"input": "exec sleep 1001", "background": true})
	if r := gsvAs(aliceHost, env, "call", "shell.exec", string(args)); r.code != 0 || !strings.Contains(r.stdout, `"running"`) {
		t.Fatalf("gsv call shell.exec: %v", r)
	}
	daemonPid := d.cmd.Process.Pid
	var below map[int]string
	var sleeps []int
	waitFor(t, 30*time.Second, "both sandboxes' sleep", func() bool {
		below, sleeps = descendants(daemonPid), nil
		for p, c := range below {
			if c == "sleep" {
				sleeps = append(sleeps, p)
			}
		}
		return len(sleeps) == 2
	})
	want := min(niceOfPid(daemonPid)+10, 19)
	for _, p := range sleeps {
		if n := niceOfPid(p); n != want {
			t.Errorf("a sandbox's sleep (%d) runs at nice %d, want %d", p, n, want)
		}
	}
	d.kill()
	waitFor(t, 20*time.Second, fmt.Sprintf("the daemon's sandboxes %v to die with it", below), func() bool {
		for p := range below {
			if cpu, state := procCPU(p); cpu >= 0 && state != "Z" {
				return false
			}
		}
		return true
	})
}
